//! The manifest a plugin component carries in a custom section, so that
//! tools can read it without compiling or running the plugin (spec
//! CQ-LOAD-22, `corequic inspect`).
//!
//! The section is named [`SECTION`] and sits at the component's top level.
//! Its content is UTF-8 text, one item per line, in this order:
//!
//! ```text
//! core-quic:manifest 1
//! name ack-logger
//! version 0.1.0
//! abi-version 0.1.0
//! bind process-frame after 0x2
//! bind process-frame after 0x3
//! permission logging
//! ```
//!
//! `bind ROUTINE ANCHOR PARAM` lines (PARAM in lower-case hexadecimal) come
//! in the manifest's order, then `read FIELD`, `write FIELD` and
//! `permission NAME` lines, each in the manifest's order. That is format 1,
//! for plugins of ABI 0.1.0, whose routines, fields and permissions are WIT
//! names. Format 2, for every later ABI, starts with `core-quic:manifest 2`
//! and names them by their registry identifiers, in decimal, so that a tool
//! reads the manifest of a plugin built against a release newer than
//! itself:
//!
//! ```text
//! core-quic:manifest 2
//! name ack-logger
//! version 0.2.0
//! abi-version 0.2.0
//! bind 8 after 0x2
//! bind 8 after 0x3
//! permission 3
//! ```
//!
//! Decoding is strict: the text must be exactly what [`encode`] writes for
//! the manifest it decodes to, so a plugin of one ABI cannot carry the other
//! format (CQ-LOAD-23).

use crate::abi::{Anchor, Binding, FieldId, Permission, PluginManifest, Routine};

/// The custom section's name.
pub const SECTION: &str = "core-quic:manifest";

/// The first line of format 1 (ABI 0.1.0: names).
const HEADER: &str = "core-quic:manifest 1";

/// The first line of format 2 (ABI 0.2 and later: registry identifiers).
const HEADER_IDS: &str = "core-quic:manifest 2";

/// Whether a manifest of this ABI version is written with names (format 1).
fn uses_names(abi_version: &str) -> bool {
    abi_version == "0.1.0"
}

/// The section's text for `manifest`; an error if a name, version or ABI
/// version contains a line break or other control character, or is padded
/// with white space (the format could not carry it).
pub fn encode(manifest: &PluginManifest) -> Result<String, String> {
    let names = uses_names(&manifest.abi_version);
    let mut out = String::new();
    out.push_str(if names { HEADER } else { HEADER_IDS });
    out.push('\n');
    for (key, value) in [
        ("name", &manifest.name),
        ("version", &manifest.version),
        ("abi-version", &manifest.abi_version),
    ] {
        if value.trim() != value || value.chars().any(char::is_control) {
            return Err(format!("the manifest's {key} {value:?} cannot be embedded"));
        }
        out.push_str(&format!("{key} {value}\n"));
    }
    for b in &manifest.bindings {
        let routine = match (names, b.routine.id()) {
            (true, _) => b.routine.name().to_string(),
            (false, Some(id)) => id.to_string(),
            (false, None) => {
                return Err(format!(
                    "routine {} exists only in ABI 0.1.0, not in {}",
                    b.routine.name(),
                    manifest.abi_version
                ));
            }
        };
        out.push_str(&format!(
            "bind {routine} {} {:#x}\n",
            b.anchor.name(),
            b.param
        ));
    }
    let field = |f: &FieldId| match names {
        true => f.name().to_string(),
        false => f.id().to_string(),
    };
    for f in &manifest.reads {
        out.push_str(&format!("read {}\n", field(f)));
    }
    for f in &manifest.writes {
        out.push_str(&format!("write {}\n", field(f)));
    }
    for p in &manifest.permissions {
        match names {
            true => out.push_str(&format!("permission {}\n", p.name())),
            false => out.push_str(&format!("permission {}\n", p.id())),
        }
    }
    Ok(out)
}

/// The manifest of a section's content.
pub fn decode(section: &[u8]) -> Result<PluginManifest, String> {
    let text = std::str::from_utf8(section).map_err(|_| "the section is not UTF-8".to_string())?;
    let mut lines = text.lines();
    let names = match lines.next() {
        Some(HEADER) => true,
        Some(HEADER_IDS) => false,
        _ => {
            return Err(format!(
                "the section does not start with {HEADER:?} or {HEADER_IDS:?}"
            ));
        }
    };
    let mut value = |key: &str| {
        lines
            .next()
            .and_then(|l| l.strip_prefix(key)?.strip_prefix(' '))
            .map(str::to_string)
            .ok_or_else(|| format!("no `{key}` line where it belongs"))
    };
    let mut manifest = PluginManifest {
        name: value("name")?,
        version: value("version")?,
        abi_version: value("abi-version")?,
        bindings: Vec::new(),
        reads: Vec::new(),
        writes: Vec::new(),
        permissions: Vec::new(),
    };
    for line in lines {
        let (key, rest) = line
            .split_once(' ')
            .ok_or_else(|| format!("line {line:?} has no value"))?;
        let field = || {
            match names {
                true => FieldId::from_name(rest),
                false => rest.parse().ok().and_then(FieldId::from_id),
            }
            .ok_or_else(|| format!("unknown field {rest:?}"))
        };
        let permission = || {
            match names {
                true => Permission::from_name(rest),
                false => rest.parse().ok().and_then(Permission::from_id),
            }
            .ok_or_else(|| format!("unknown permission {rest:?}"))
        };
        match key {
            "bind" => manifest.bindings.push(binding(rest, names)?),
            "read" => manifest.reads.push(field()?),
            "write" => manifest.writes.push(field()?),
            "permission" => manifest.permissions.push(permission()?),
            _ => return Err(format!("unknown line {line:?}")),
        }
    }
    // Strict: only the canonical text (order, spacing, hexadecimal) decodes.
    if encode(&manifest).as_deref() != Ok(text) {
        return Err("the section is not in the canonical form".into());
    }
    Ok(manifest)
}

fn binding(text: &str, names: bool) -> Result<Binding, String> {
    let mut parts = text.split(' ');
    let (Some(routine), Some(anchor), Some(param), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(format!("binding {text:?} is not ROUTINE ANCHOR PARAM"));
    };
    Ok(Binding {
        routine: match names {
            true => Routine::from_name(routine),
            false => routine.parse().ok().and_then(Routine::from_id),
        }
        .ok_or_else(|| format!("unknown routine {routine:?}"))?,
        anchor: Anchor::ALL
            .into_iter()
            .find(|a| a.name() == anchor)
            .ok_or_else(|| format!("unknown anchor {anchor:?}"))?,
        param: param
            .strip_prefix("0x")
            .and_then(|hex| u64::from_str_radix(hex, 16).ok())
            .ok_or_else(|| format!("parameter {param:?} is not hexadecimal"))?,
    })
}

/// The content of the component's top-level [`SECTION`], if it has one.
/// An error if the bytes are not a component's binary, or if it has the
/// section twice.
pub fn find(component: &[u8]) -> Result<Option<&[u8]>, String> {
    let mut found = None;
    for (name, content) in custom_sections(component)? {
        if name == SECTION {
            if found.is_some() {
                return Err(format!("the component has two {SECTION} sections"));
            }
            found = Some(content);
        }
    }
    Ok(found)
}

/// `component` with `manifest` in its [`SECTION`] (replacing any it had).
pub fn embed(component: &[u8], manifest: &PluginManifest) -> Result<Vec<u8>, String> {
    let text = encode(manifest)?;
    let mut out = Vec::with_capacity(component.len() + text.len() + 32);
    out.extend_from_slice(&component[..PREAMBLE.len()]);
    for section in sections(component)? {
        if !matches!(section.custom, Some((SECTION, _))) {
            out.extend_from_slice(section.bytes);
        }
    }
    let mut content = Vec::new();
    leb128(&mut content, SECTION.len() as u64);
    content.extend_from_slice(SECTION.as_bytes());
    content.extend_from_slice(text.as_bytes());
    out.push(CUSTOM);
    leb128(&mut out, content.len() as u64);
    out.extend_from_slice(&content);
    Ok(out)
}

/// The component binary's preamble: magic, version 0x0d, layer 1.
const PREAMBLE: [u8; 8] = [0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];

/// The id of a custom section.
const CUSTOM: u8 = 0;

/// A top-level section: its bytes (id, size and content) and, for a custom
/// section, its name and content.
struct Section<'a> {
    bytes: &'a [u8],
    custom: Option<(&'a str, &'a [u8])>,
}

/// The name and content of every top-level custom section.
fn custom_sections(component: &[u8]) -> Result<Vec<(&str, &[u8])>, String> {
    Ok(sections(component)?
        .into_iter()
        .filter_map(|s| s.custom)
        .collect())
}

/// The component's top-level sections; nested modules and components are
/// inside their sections and not visited.
fn sections(component: &[u8]) -> Result<Vec<Section<'_>>, String> {
    let mut rest = component
        .strip_prefix(PREAMBLE.as_slice())
        .ok_or("not a WebAssembly component (preamble)")?;
    let mut out = Vec::new();
    while let Some(&id) = rest.first() {
        let start = rest;
        let (size, after) = read_leb128(&rest[1..])?;
        let size = usize::try_from(size).map_err(|_| "section too large")?;
        let (content, next) = after
            .split_at_checked(size)
            .ok_or("a section runs past the end of the component")?;
        let custom = if id == CUSTOM {
            let (len, name_and_payload) = read_leb128(content)?;
            let len = usize::try_from(len).map_err(|_| "custom section name too long")?;
            let (name, payload) = name_and_payload
                .split_at_checked(len)
                .ok_or("a custom section's name runs past its end")?;
            let name =
                std::str::from_utf8(name).map_err(|_| "a custom section's name is not UTF-8")?;
            Some((name, payload))
        } else {
            None
        };
        let taken = start.len() - next.len();
        out.push(Section {
            bytes: &start[..taken],
            custom,
        });
        rest = next;
    }
    Ok(out)
}

/// An unsigned LEB128 number of at most 5 bytes (section sizes are u32).
fn read_leb128(bytes: &[u8]) -> Result<(u64, &[u8]), String> {
    let mut value = 0u64;
    for (i, b) in bytes.iter().take(5).enumerate() {
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok((value, &bytes[i + 1..]));
        }
    }
    Err("a malformed section size".into())
}

fn leb128(out: &mut Vec<u8>, mut value: u64) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest() -> PluginManifest {
        PluginManifest {
            name: "ack logger".into(),
            version: "0.1.0".into(),
            abi_version: "0.1.0".into(),
            bindings: vec![
                Binding {
                    routine: Routine::ProcessFrame,
                    anchor: Anchor::After,
                    param: 2,
                },
                Binding {
                    routine: Routine::PluginControl,
                    anchor: Anchor::Define,
                    param: 0x80000,
                },
            ],
            reads: vec![FieldId::ALL[0], FieldId::ALL[24]],
            writes: vec![FieldId::ALL[24]],
            permissions: vec![Permission::Logging],
        }
    }

    #[test]
    fn a_manifest_survives_its_text() {
        let text = encode(&manifest()).expect("encode");
        assert!(
            text.starts_with("core-quic:manifest 1\nname ack logger\n"),
            "{text}"
        );
        assert!(
            text.contains("bind plugin-control define 0x80000\n"),
            "{text}"
        );
        assert_eq!(decode(text.as_bytes()), Ok(manifest()));
    }

    #[test]
    fn a_manifest_of_abi_0_2_is_written_with_registry_identifiers() {
        let mut m = manifest();
        m.abi_version = "0.2.0".into();
        m.bindings[0].routine = Routine::WriteFrame;
        let text = encode(&m).expect("encode");
        assert_eq!(
            text,
            "core-quic:manifest 2\nname ack logger\nversion 0.1.0\nabi-version 0.2.0\n\
             bind 4 after 0x2\nbind 10 define 0x80000\nread 1\nread 25\nwrite 25\n\
             permission 3\n"
        );
        assert_eq!(decode(text.as_bytes()), Ok(m.clone()));
        // A plugin of one ABI cannot carry the other format (CQ-LOAD-23).
        let as_names = text
            .replace("manifest 2", "manifest 1")
            .replace("bind 4", "bind write-frame");
        assert!(decode(as_names.as_bytes()).is_err());
        let unknown = text.replace("read 25", "read 9999");
        assert!(decode(unknown.as_bytes()).is_err(), "an unknown field");
        // 0.1.0's prepare-frame has no identifier.
        m.bindings[0].routine = Routine::PrepareFrame;
        assert!(encode(&m).is_err());
    }

    #[test]
    fn only_the_canonical_text_decodes() {
        let text = encode(&manifest()).expect("encode");
        for bad in [
            text.replace("0x80000", "0x080000"),
            text.replace("0x80000", "524288"),
            text.replace("bind process-frame after", "bind  process-frame after"),
            text.replace("\npermission logging\n", "\npermission logging"),
            text.replace("core-quic:manifest 1", "core-quic:manifest 2"),
            text.replace("read is-server\n", "") + "read is-server\n",
            text.replace("permission logging", "permission teleport"),
            text.replace(
                "bind process-frame after 0x2\n",
                "bind process-frame around 0x2\n",
            ),
            text.replace("name ack logger\n", ""),
        ] {
            assert!(decode(bad.as_bytes()).is_err(), "{bad}");
        }
        let mut control = manifest();
        control.name = "two\nlines".into();
        assert!(encode(&control).is_err());
    }

    /// A minimal component: the preamble, a custom section `other`, and
    /// an empty core module section, whose own bytes must not be searched.
    fn component() -> Vec<u8> {
        let mut c = PREAMBLE.to_vec();
        c.extend_from_slice(&[0, 7, 5, b'o', b't', b'h', b'e', b'r', b'!']);
        // A nested core module that carries a custom section of our name.
        let mut module = vec![0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];
        let mut custom = Vec::new();
        leb128(&mut custom, SECTION.len() as u64);
        custom.extend_from_slice(SECTION.as_bytes());
        custom.extend_from_slice(b"nested");
        module.push(0);
        leb128(&mut module, custom.len() as u64);
        module.extend_from_slice(&custom);
        c.push(1);
        leb128(&mut c, module.len() as u64);
        c.extend_from_slice(&module);
        c
    }

    #[test]
    fn the_section_is_found_at_the_top_level_only_and_replaced_when_embedded() {
        let c = component();
        assert_eq!(
            find(&c),
            Ok(None),
            "the nested module's section is not the component's"
        );
        let with = embed(&c, &manifest()).expect("embed");
        let section = find(&with).expect("parse").expect("section");
        assert_eq!(decode(section), Ok(manifest()));
        assert!(with.starts_with(&c), "the other sections are kept in order");
        let mut other = manifest();
        other.version = "0.2.0".into();
        let again = embed(&with, &other).expect("embed");
        assert_eq!(
            decode(find(&again).expect("parse").expect("section")),
            Ok(other)
        );
        assert_eq!(again.len(), with.len(), "replaced, not added");
        let mut twice = with.clone();
        twice.extend_from_slice(&with[c.len()..]);
        assert!(find(&twice).is_err(), "two sections");
    }

    #[test]
    fn a_broken_binary_is_an_error() {
        let c = component();
        assert!(find(&c[..c.len() - 1]).is_err(), "truncated");
        assert!(find(b"\0asm\x01\0\0\0").is_err(), "a core module");
        assert!(find(&[PREAMBLE.as_slice(), &[0, 0xff, 0xff, 0xff, 0xff, 0xff]].concat()).is_err());
    }
}
