//! Shortening the names a component uses only for its own wiring.
//!
//! `wit-component` wires a plugin's core module to the component's imports
//! and exports by name: the core module imports `[method]out-buf.put` from
//! `core-quic:plugin/host@0.2.6` and exports
//! `core-quic:plugin/routines@0.2.6#should-send-frame`, the component aliases
//! those exports by the same names, and the nested component that gives the
//! exported instance its type imports `import-func-should-send-frame`. None of
//! these names is visible outside the component, yet in a small plugin they
//! add up to several kilobytes, each one spelt two or three times.
//!
//! [`minify`] renames every core-level name (core module imports and exports,
//! core instance arguments and exports, core export aliases) and the imports
//! of nested components (with the arguments that instantiate them) to short
//! ones, the same old name always to the same new one, and drops the custom
//! sections of nested core modules (`producers`). It leaves the component's
//! own imports and exports, its types and every name inside a type as they
//! are, so the component's type does not change. The result is validated.

use anyhow::{Context, Result, bail};
use std::collections::HashMap;
use wasm_encoder::reencode::{Reencode, ReencodeComponent, RoundtripReencoder};
use wasm_encoder::{Encode, ModuleArg};
use wasmparser::{BinaryReader, SectionLimited};

/// `component` with its internal names shortened (see the module docs).
pub fn minify(component: &[u8]) -> Result<Vec<u8>> {
    let mut names = Names::default();
    let out = names.component(component, 0)?;
    wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all())
        .validate_all(&out)
        .context("the component with shortened names does not validate")?;
    Ok(out)
}

/// The renaming, shared by every nesting level so that a name and each
/// reference to it get the same new name.
#[derive(Default)]
struct Names {
    /// Core-level names, old to new.
    core: HashMap<String, String>,
    /// Import names of nested components, old to new.
    nested_imports: HashMap<String, String>,
    /// How many names were handed out (the next one is derived from it).
    issued: usize,
}

/// The magic number and version of a module or component.
const PREAMBLE: usize = 8;

impl Names {
    /// The short name of core-level name `old`.
    fn core(&mut self, old: &str) -> String {
        short_name(&mut self.core, &mut self.issued, old)
    }

    /// The new name of a nested component's import `old`, or `old` when no
    /// nested component imports it.
    fn instantiation_arg<'a>(&'a self, old: &'a str) -> &'a str {
        self.nested_imports.get(old).map_or(old, String::as_str)
    }

    /// Rewrite a component at nesting `depth` (0 for the outermost).
    fn component(&mut self, bytes: &[u8], depth: usize) -> Result<Vec<u8>> {
        let mut out = header(bytes)?.to_vec();
        for (id, content, offset) in sections(bytes)? {
            let reader = BinaryReader::new(content, offset);
            match id {
                // A core module.
                1 => put_raw(&mut out, 1, &self.module(content)?),
                // Core instances: their arguments and exports are core names.
                2 => {
                    let mut section = wasm_encoder::InstanceSection::new();
                    for instance in SectionLimited::<wasmparser::Instance>::new(reader)? {
                        match instance? {
                            wasmparser::Instance::Instantiate { module_index, args } => {
                                let args: Vec<_> = args
                                    .iter()
                                    .map(|a| (self.core(a.name), ModuleArg::Instance(a.index)))
                                    .collect();
                                section.instantiate(module_index, args);
                            }
                            wasmparser::Instance::FromExports(exports) => {
                                let mut items = Vec::new();
                                for e in exports.iter() {
                                    items.push((
                                        self.core(e.name),
                                        RoundtripReencoder.export_kind(e.kind)?,
                                        e.index,
                                    ));
                                }
                                section.export_items(items);
                            }
                        }
                    }
                    put(&mut out, 2, &section);
                }
                // A nested component.
                4 => put_raw(&mut out, 4, &self.component(content, depth + 1)?),
                // Component instances: instantiating a nested component names
                // its imports.
                5 => {
                    let mut section = wasm_encoder::ComponentInstanceSection::new();
                    for instance in SectionLimited::<wasmparser::ComponentInstance>::new(reader)? {
                        match instance? {
                            wasmparser::ComponentInstance::Instantiate {
                                component_index,
                                args,
                            } => {
                                let args: Vec<_> = args
                                    .iter()
                                    .map(|a| {
                                        (
                                            self.instantiation_arg(a.name).to_owned(),
                                            RoundtripReencoder.component_export_kind(a.kind),
                                            a.index,
                                        )
                                    })
                                    .collect();
                                section.instantiate(component_index, args);
                            }
                            other => {
                                RoundtripReencoder.parse_component_instance(&mut section, other)?
                            }
                        }
                    }
                    put(&mut out, 5, &section);
                }
                // Aliases: a core instance's export is named by a core name.
                6 => {
                    let mut section = wasm_encoder::ComponentAliasSection::new();
                    for alias in SectionLimited::<wasmparser::ComponentAlias>::new(reader)? {
                        match alias? {
                            wasmparser::ComponentAlias::CoreInstanceExport {
                                kind,
                                instance_index,
                                name,
                            } => {
                                let name = self.core(name);
                                section.alias(wasm_encoder::Alias::CoreInstanceExport {
                                    instance: instance_index,
                                    kind: RoundtripReencoder.export_kind(kind)?,
                                    name: &name,
                                });
                            }
                            other => {
                                section.alias(RoundtripReencoder.component_alias(other)?);
                            }
                        }
                    }
                    put(&mut out, 6, &section);
                }
                // A nested component's imports are named only by the
                // instantiation that supplies them.
                10 if depth > 0 => {
                    let mut section = wasm_encoder::ComponentImportSection::new();
                    for import in SectionLimited::<wasmparser::ComponentImport>::new(reader)? {
                        let import = import?;
                        let ty = RoundtripReencoder.component_type_ref(import.ty)?;
                        if import.name.implements.is_some() {
                            section.import(import.name, ty);
                            continue;
                        }
                        let new = short_name(
                            &mut self.nested_imports,
                            &mut self.issued,
                            import.name.name,
                        );
                        section.import(new.as_str(), ty);
                    }
                    put(&mut out, 10, &section);
                }
                _ => put_raw(&mut out, id, content),
            }
        }
        Ok(out)
    }

    /// Rewrite a core module: its import and export names, without its
    /// custom sections.
    fn module(&mut self, bytes: &[u8]) -> Result<Vec<u8>> {
        let mut out = header(bytes)?.to_vec();
        for (id, content, offset) in sections(bytes)? {
            let reader = BinaryReader::new(content, offset);
            match id {
                0 => {}
                2 => {
                    let mut section = wasm_encoder::ImportSection::new();
                    for import in wasmparser::ImportSectionReader::new(reader)?.into_imports() {
                        let import = import?;
                        let module = self.core(import.module);
                        let name = self.core(import.name);
                        section.import(&module, &name, RoundtripReencoder.entity_type(import.ty)?);
                    }
                    put(&mut out, 2, &section);
                }
                7 => {
                    let mut section = wasm_encoder::ExportSection::new();
                    for export in wasmparser::ExportSectionReader::new(reader)? {
                        let export = export?;
                        let name = self.core(export.name);
                        section.export(
                            &name,
                            RoundtripReencoder.export_kind(export.kind)?,
                            export.index,
                        );
                    }
                    put(&mut out, 7, &section);
                }
                _ => put_raw(&mut out, id, content),
            }
        }
        Ok(out)
    }
}

/// The new name of `old` in `names`; a name not renamed yet gets the next
/// short one: `a` to `z`, then `ba`, `bb`, … (letters only, so that it is
/// also a valid kebab-case component name). `issued` counts the names
/// handed out.
fn short_name(names: &mut HashMap<String, String>, issued: &mut usize, old: &str) -> String {
    if let Some(new) = names.get(old) {
        return new.clone();
    }
    let mut n = *issued;
    *issued += 1;
    let mut name = Vec::new();
    loop {
        name.push(b'a' + (n % 26) as u8);
        n /= 26;
        if n == 0 {
            break;
        }
    }
    name.reverse();
    let new = String::from_utf8(name).expect("ASCII letters");
    names.insert(old.to_owned(), new.clone());
    new
}

pub(crate) fn header(bytes: &[u8]) -> Result<&[u8]> {
    bytes
        .get(..PREAMBLE)
        .context("shorter than a module or component header")
}

/// The sections of a module or component as (id, content, offset of the
/// content in `bytes`).
pub(crate) fn sections(bytes: &[u8]) -> Result<Vec<(u8, &[u8], u64)>> {
    let mut list = Vec::new();
    let mut pos = PREAMBLE;
    while pos < bytes.len() {
        let id = bytes[pos];
        let mut reader = BinaryReader::new(&bytes[pos + 1..], 0);
        let size = reader.read_var_u32()? as usize;
        let start = pos + 1 + reader.current_position();
        let end = start + size;
        if end > bytes.len() {
            bail!("section {id} at byte {pos} runs past the end");
        }
        list.push((id, &bytes[start..end], start as u64));
        pos = end;
    }
    Ok(list)
}

pub(crate) fn put(out: &mut Vec<u8>, id: u8, section: &impl Encode) {
    out.push(id);
    section.encode(out);
}

pub(crate) fn put_raw(out: &mut Vec<u8>, id: u8, content: &[u8]) {
    out.push(id);
    content.len().encode(out);
    out.extend_from_slice(content);
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use wit_component::{DecodedWasm, WitPrinter};
    use wit_parser::{LiftLowerAbi, ManglingAndAbi, Resolve};

    /// A component of the `plugin` world of `wit/`, as `wit-component`
    /// encodes it for the SDK's (legacy-mangled) core modules, without its
    /// debug names, as `componentize` gives it to [`minify`].
    pub(crate) fn plugin_component() -> Vec<u8> {
        plugin_component_from(|module| module)
    }

    /// [`plugin_component`] from the dummy core module as `edit` changes it.
    pub(crate) fn plugin_component_from(edit: impl FnOnce(Vec<u8>) -> Vec<u8>) -> Vec<u8> {
        let mut resolve = Resolve::default();
        let (package, _) = resolve
            .push_path(concat!(env!("CARGO_MANIFEST_DIR"), "/../../wit"))
            .expect("wit/ parses");
        let world = resolve
            .select_world(&[package], Some("plugin"))
            .expect("the plugin world");
        let mangling = ManglingAndAbi::Legacy(LiftLowerAbi::Sync);
        let mut module = edit(wit_component::dummy_module(&resolve, world, mangling));
        wit_component::embed_component_metadata(
            &mut module,
            &resolve,
            world,
            wit_component::StringEncoding::UTF8,
            false,
        )
        .expect("metadata embeds");
        let component = wit_component::ComponentEncoder::default()
            .module(&module)
            .expect("the module has its component type")
            .validate(true)
            .encode()
            .expect("encodes as a component");
        crate::strip_custom_sections(&component).expect("a component")
    }

    /// The component's type, as WIT text.
    pub(crate) fn wit_of(component: &[u8]) -> String {
        let DecodedWasm::Component(resolve, _) = wit_component::decode(component).expect("decodes")
        else {
            panic!("not a component");
        };
        let mut text = String::new();
        for (package, _) in resolve.packages.iter() {
            let mut printer = WitPrinter::default();
            printer.print(&resolve, package, &[]).expect("prints");
            text += &printer.output.to_string();
        }
        text
    }

    #[test]
    fn shortened_names_keep_the_component_type_and_drop_the_wiring_names() {
        let original = plugin_component();
        let minified = minify(&original).expect("minifies and validates");
        assert_eq!(wit_of(&minified), wit_of(&original));
        assert!(
            minified.len() + 2000 < original.len(),
            "{} -> {} bytes",
            original.len(),
            minified.len()
        );
        let text = String::from_utf8_lossy(&minified);
        let (_, version) = crate::wit_files(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../wit"
        )))
        .expect("wit/ declares its version");
        let routines = format!("core-quic:plugin/routines@{version}");
        assert!(String::from_utf8_lossy(&original).contains(&format!("{routines}#")));
        for wiring in [
            "import-func-",
            &format!("{routines}#"),
            "cabi_post_",
            "cabi_realloc",
        ] {
            assert!(!text.contains(wiring), "{wiring} is still in the component");
        }
        // The component's own interface names stay.
        assert!(text.contains(&routines));
    }

    #[test]
    fn minifying_twice_changes_nothing_more() {
        let once = minify(&plugin_component()).expect("minifies");
        let twice = minify(&once).expect("minifies again");
        assert_eq!(wit_of(&twice), wit_of(&once));
        assert!(twice.len() <= once.len());
    }
}
