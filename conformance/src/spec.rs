//! The specification's requirements: every paragraph of `spec/*.md` that
//! starts with a bold `**CQ-…**` ID, and its level from its strongest BCP 14
//! keyword.

use crate::proto::Level;
use std::path::Path;

/// One requirement of the specification.
#[derive(Debug, Clone, PartialEq)]
pub struct Requirement {
    /// Its ID, e.g. `CQ-LOAD-7`.
    pub id: String,
    /// Its level; `LEVEL_UNSPECIFIED` when the paragraph has no keyword.
    pub level: Level,
    /// The spec file it is in (file name only).
    pub file: String,
}

const REQUIRED: [&str; 5] = ["MUST", "MUST NOT", "SHALL", "SHALL NOT", "REQUIRED"];
const RECOMMENDED: [&str; 4] = ["SHOULD", "SHOULD NOT", "RECOMMENDED", "NOT RECOMMENDED"];
const OPTIONAL: [&str; 2] = ["MAY", "OPTIONAL"];

/// The level of a paragraph: the strongest upper-case BCP 14 keyword in it.
pub fn paragraph_level(text: &str) -> Level {
    let words: Vec<&str> = text
        .split(|c: char| !c.is_ascii_alphabetic())
        .filter(|w| !w.is_empty())
        .collect();
    let has = |set: &[&str]| {
        set.iter().any(|k| {
            let parts: Vec<&str> = k.split(' ').collect();
            words.windows(parts.len()).any(|w| w == parts.as_slice())
        })
    };
    if has(&REQUIRED) {
        Level::LEVEL_REQUIRED
    } else if has(&RECOMMENDED) {
        Level::LEVEL_RECOMMENDED
    } else if has(&OPTIONAL) {
        Level::LEVEL_OPTIONAL
    } else {
        Level::LEVEL_UNSPECIFIED
    }
}

/// The ID a paragraph defines: `**CQ-X-N**` at its start (after an optional
/// list marker).
fn defined_id(paragraph: &str) -> Option<String> {
    let text = paragraph.trim_start();
    let text = text
        .strip_prefix("- ")
        .or_else(|| text.strip_prefix("* "))
        .unwrap_or(text);
    let rest = text.strip_prefix("**CQ-")?;
    let end = rest.find("**")?;
    let id = &rest[..end];
    let valid = id.split_once('-').is_some_and(|(area, n)| {
        !area.is_empty()
            && area.chars().all(|c| c.is_ascii_uppercase())
            && !n.is_empty()
            && n.chars().all(|c| c.is_ascii_digit())
    });
    valid.then(|| format!("CQ-{id}"))
}

/// The requirements defined in one Markdown text. A requirement's paragraph
/// runs until the next blank line that is followed by another paragraph
/// that is not part of it (a list or table inside it belongs to it), i.e.
/// until the next requirement or heading.
pub fn parse_requirements(file: &str, text: &str) -> Vec<Requirement> {
    let mut found: Vec<(String, String)> = Vec::new();
    for paragraph in text.split("\n\n") {
        if let Some(id) = defined_id(paragraph) {
            found.push((id, paragraph.to_string()));
        } else if paragraph.trim_start().starts_with('#') {
            // A heading ends the text a requirement owns.
            found.push((String::new(), String::new()));
        } else if let Some((id, body)) = found.last_mut()
            && !id.is_empty()
        {
            body.push_str("\n\n");
            body.push_str(paragraph);
        }
    }
    found
        .into_iter()
        .filter(|(id, _)| !id.is_empty())
        .map(|(id, body)| Requirement {
            level: paragraph_level(&body),
            id,
            file: file.to_string(),
        })
        .collect()
}

/// Every requirement of the spec folder, in file order.
pub fn load(spec_dir: &Path) -> Result<Vec<Requirement>, String> {
    let mut files: Vec<_> = std::fs::read_dir(spec_dir)
        .map_err(|e| format!("{}: {e}", spec_dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    files.sort();
    let mut all = Vec::new();
    for path in files {
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        all.extend(parse_requirements(&name, &text));
    }
    let mut seen = std::collections::HashSet::new();
    for r in &all {
        if !seen.insert(r.id.clone()) {
            return Err(format!("{} is defined twice in the spec", r.id));
        }
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_requirement_takes_the_strongest_keyword_of_its_paragraph() {
        let text = "# Title\n\n**CQ-A-1** A host MAY do x and MUST do y.\n\n\
                    **CQ-A-2** It SHOULD NOT do z.\n\n- a list item that belongs to CQ-A-2, MAY\n\n\
                    ## Next\n\nText with MUST that belongs to nothing.\n\n**CQ-A-3** Plain text.";
        let found = parse_requirements("x.md", text);
        let levels: Vec<_> = found.iter().map(|r| (r.id.as_str(), r.level)).collect();
        assert_eq!(
            levels,
            [
                ("CQ-A-1", Level::LEVEL_REQUIRED),
                ("CQ-A-2", Level::LEVEL_RECOMMENDED),
                ("CQ-A-3", Level::LEVEL_UNSPECIFIED),
            ]
        );
    }

    #[test]
    fn lower_case_words_are_not_keywords() {
        assert_eq!(
            paragraph_level("the host must and should"),
            Level::LEVEL_UNSPECIFIED
        );
        assert_eq!(paragraph_level("NOT RECOMMENDED"), Level::LEVEL_RECOMMENDED);
    }
}
