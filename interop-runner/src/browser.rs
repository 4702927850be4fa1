//! Checks that a report renders in a real headless browser (Debian's
//! chromium): the DOM after rendering has the matrix tables and the plots,
//! and a screenshot shows the matrix colours and the plot series.

use std::path::Path;
use std::process::Command;

/// Colour of a passing cell (the report's `td.pass`).
pub const PASS_RGB: [u8; 3] = [0xc8, 0xf0, 0xc8];
/// Colour of the first plot series.
pub const FIRST_SERIES_RGB: [u8; 3] = [0x1f, 0x77, 0xb4];

/// What the rendered DOM contains.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DomCounts {
    /// `<table class="matrix">` elements.
    pub matrix_tables: usize,
    /// Matrix cells with a verdict class.
    pub verdict_cells: usize,
    /// `<svg class="plot">` elements per figure (fig3..fig6).
    pub plots: [usize; 4],
    /// Drawn series (paths and dot groups).
    pub series: usize,
}

/// Count the report's elements in a serialized DOM.
pub fn count_dom(dom: &str) -> DomCounts {
    let figure = |f: &str| {
        dom.matches(&format!("class=\"plot\" data-figure=\"{f}\""))
            .count()
    };
    DomCounts {
        matrix_tables: dom.matches("<table class=\"matrix\"").count(),
        verdict_cells: ["pass", "fail", "unsupported"]
            .iter()
            .map(|c| dom.matches(&format!("<td class=\"{c}\"")).count())
            .sum(),
        plots: [
            figure("fig3"),
            figure("fig4"),
            figure("fig5"),
            figure("fig6"),
        ],
        series: dom.matches("class=\"series\"").count(),
    }
}

/// Pixels of exactly this colour in an RGB(A) PNG.
pub fn count_colour(png_bytes: &[u8], rgb: [u8; 3]) -> Result<usize, String> {
    let decoder = png::Decoder::new(std::io::Cursor::new(png_bytes));
    let mut reader = decoder.read_info().map_err(|e| e.to_string())?;
    let mut buf = vec![0; reader.output_buffer_size().ok_or("image too large")?];
    let info = reader.next_frame(&mut buf).map_err(|e| e.to_string())?;
    let channels = match info.color_type {
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        other => return Err(format!("unexpected PNG colour type {other:?}")),
    };
    if info.bit_depth != png::BitDepth::Eight {
        return Err(format!("unexpected PNG bit depth {:?}", info.bit_depth));
    }
    Ok(buf[..info.buffer_size()]
        .chunks_exact(channels)
        .filter(|p| p[..3] == rgb)
        .count())
}

/// Run headless chromium on the report: its rendered DOM and a screenshot.
pub fn render_with_chromium(
    chromium: &str,
    report: &Path,
    screenshot: &Path,
) -> Result<String, String> {
    let report = report
        .canonicalize()
        .map_err(|e| format!("{}: {e}", report.display()))?;
    let url = format!("file://{}", report.display());
    let profile = std::env::temp_dir().join(format!("interop-chromium-{}", std::process::id()));
    let common = [
        "--headless".to_string(),
        "--no-sandbox".into(),
        "--disable-gpu".into(),
        "--hide-scrollbars".into(),
        format!("--user-data-dir={}", profile.display()),
    ];
    let dom = Command::new(chromium)
        .args(&common)
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .map_err(|e| format!("{chromium}: {e}"))?;
    if !dom.status.success() {
        return Err(format!(
            "{chromium} --dump-dom failed: {}",
            String::from_utf8_lossy(&dom.stderr)
        ));
    }
    let shot = Command::new(chromium)
        .args(&common)
        .arg("--window-size=1600,4000")
        .arg(format!("--screenshot={}", screenshot.display()))
        .arg(&url)
        .output()
        .map_err(|e| format!("{chromium}: {e}"))?;
    let _ = std::fs::remove_dir_all(&profile);
    if !shot.status.success() {
        return Err(format!(
            "{chromium} --screenshot failed: {}",
            String::from_utf8_lossy(&shot.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&dom.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dom_counts_see_tables_cells_and_plots() {
        let dom = r#"<table class="matrix" id="m"><tr><td class="pass">x</td><td class="fail">y</td></tr></table>
            <svg class="plot" data-figure="fig5"><path class="series"/></svg>"#;
        assert_eq!(
            count_dom(dom),
            DomCounts {
                matrix_tables: 1,
                verdict_cells: 2,
                plots: [0, 0, 1, 0],
                series: 1
            }
        );
    }

    #[test]
    fn colours_are_counted_in_a_png() {
        let mut bytes = Vec::new();
        {
            let mut encoder = png::Encoder::new(&mut bytes, 2, 2);
            encoder.set_color(png::ColorType::Rgb);
            encoder.set_depth(png::BitDepth::Eight);
            let mut writer = encoder.write_header().expect("header");
            let mut data = Vec::new();
            for px in [PASS_RGB, PASS_RGB, [0, 0, 0], FIRST_SERIES_RGB] {
                data.extend(px);
            }
            writer.write_image_data(&data).expect("data");
        }
        assert_eq!(count_colour(&bytes, PASS_RGB), Ok(2));
        assert_eq!(count_colour(&bytes, FIRST_SERIES_RGB), Ok(1));
    }
}
