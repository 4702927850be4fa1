//! Two core instances per plugin instead of three.
//!
//! `wit-component` lowers an import whose arguments or results live in
//! memory with the plugin's own `memory` and `cabi_realloc`, which exist only
//! once the plugin's main module is instantiated, while the main module needs
//! the lowered import to be instantiated. It breaks the cycle with two small
//! modules: a shim, instantiated first, whose functions call through a table,
//! and a fixup, instantiated after the main module, that fills the table with
//! the lowered imports. Every connection then pays for three core instances
//! per plugin, and every such host call for an indirect call.
//!
//! [`relayout`] breaks the cycle the other way round. The memory moves into
//! a new module, instantiated first, together with the main module's
//! function table and a `realloc` that calls the main module's allocator
//! through one slot of that table; the main module imports both, and an
//! element segment of its own puts its allocator into the slot when it is
//! instantiated. The imports are lowered with the new module's memory and
//! `realloc` before the main module exists and are passed to it directly;
//! the shim and the fixup go. The host can only call `realloc` while the
//! plugin runs, so the slot is always filled by then. The component's type,
//! its functions, data and code do not change.

use anyhow::{Context, Result, bail, ensure};
use std::borrow::Cow;
use std::collections::HashMap;
use wasm_encoder::ModuleArg;
use wasm_encoder::reencode::{Reencode, ReencodeComponent, RoundtripReencoder};
use wasmparser::{BinaryReader, SectionLimited};

use crate::minify::{header, put, put_raw, sections};

/// The import module under which the main module finds its memory and table.
const STORAGE: &str = "corequic:storage";

/// `component` with the shim and fixup modules replaced as described in the
/// module docs, or `None` when it is not laid out the way `wit-component`
/// lays out a plugin that needs them (then it is used as it is).
pub fn relayout(component: &[u8]) -> Result<Option<Vec<u8>>> {
    let entries = entries(component)?;
    let Some(plan) = Plan::find(&entries)? else {
        return Ok(None);
    };
    let out = plan.emit(component, &entries)?;
    wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all())
        .validate_all(&out)
        .context("the component with two core instances per plugin does not validate")?;
    Ok(Some(out))
}

/// One top-level item of a component, in order.
enum Entry<'a> {
    /// A whole section that defines nothing this pass moves (types,
    /// imports, exports, component instances, nested components, custom
    /// sections).
    Section(u8, &'a [u8]),
    Module(&'a [u8]),
    Instance(wasmparser::Instance<'a>),
    Alias(wasmparser::ComponentAlias<'a>),
    Canon(wasmparser::CanonicalFunction),
}

fn entries(component: &[u8]) -> Result<Vec<Entry<'_>>> {
    let mut list = Vec::new();
    for (id, content, offset) in sections(component)? {
        let reader = BinaryReader::new(content, offset);
        match id {
            1 => list.push(Entry::Module(content)),
            2 => {
                for i in SectionLimited::<wasmparser::Instance>::new(reader)? {
                    list.push(Entry::Instance(i?));
                }
            }
            6 => {
                for a in SectionLimited::<wasmparser::ComponentAlias>::new(reader)? {
                    list.push(Entry::Alias(a?));
                }
            }
            8 => {
                for c in SectionLimited::<wasmparser::CanonicalFunction>::new(reader)? {
                    list.push(Entry::Canon(c?));
                }
            }
            _ => list.push(Entry::Section(id, content)),
        }
    }
    Ok(list)
}

/// What an entry defines, in the core index spaces this pass renumbers.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Core {
    Func(u32),
    Instance(u32),
    Module(u32),
    Memory(u32),
    Table(u32),
    Global(u32),
    Tag(u32),
}

/// The core item each entry defines (by position), and the component
/// function an alias defines.
struct Defines {
    core: Vec<Option<Core>>,
    component_func: Vec<Option<u32>>,
}

fn defines(entries: &[Entry]) -> Defines {
    let (mut funcs, mut instances, mut modules, mut memories) = (0, 0, 0, 0);
    let (mut tables, mut globals, mut tags, mut component_funcs) = (0, 0, 0, 0);
    let next = |n: &mut u32| {
        *n += 1;
        *n - 1
    };
    let mut core = Vec::new();
    let mut component_func = Vec::new();
    for entry in entries {
        let (c, f) = match entry {
            Entry::Module(_) => (Some(Core::Module(next(&mut modules))), None),
            Entry::Instance(_) => (Some(Core::Instance(next(&mut instances))), None),
            Entry::Alias(wasmparser::ComponentAlias::CoreInstanceExport { kind, .. }) => {
                use wasmparser::ExternalKind as K;
                let c = match kind {
                    K::Func | K::FuncExact => Core::Func(next(&mut funcs)),
                    K::Memory => Core::Memory(next(&mut memories)),
                    K::Table => Core::Table(next(&mut tables)),
                    K::Global => Core::Global(next(&mut globals)),
                    K::Tag => Core::Tag(next(&mut tags)),
                };
                (Some(c), None)
            }
            Entry::Alias(wasmparser::ComponentAlias::InstanceExport {
                kind: wasmparser::ComponentExternalKind::Func,
                ..
            }) => (None, Some(next(&mut component_funcs))),
            Entry::Canon(wasmparser::CanonicalFunction::Lift { .. }) => {
                (None, Some(next(&mut component_funcs)))
            }
            Entry::Canon(_) => (Some(Core::Func(next(&mut funcs))), None),
            _ => (None, None),
        };
        core.push(c);
        component_func.push(f);
    }
    Defines {
        core,
        component_func,
    }
}

/// Where the shim, the main module and the fixup are, and what replaces
/// them.
struct Plan {
    /// Entry positions of the three modules and their instantiations.
    main_module: usize,
    shim_module: usize,
    fixup_module: usize,
    shim_instance: usize,
    main_instance: usize,
    fixup_instance: usize,
    /// The first instance made for the main module's arguments.
    first_arg_instance: usize,
    /// Each shim function the main module imports (by the core function
    /// index its alias defines), and the position of the lowered import the
    /// fixup puts behind it.
    shim_funcs: HashMap<u32, usize>,
    /// Positions of the lowered imports, in order, and of the aliases of
    /// the component functions they lower.
    lowers: Vec<usize>,
    lowered_aliases: Vec<usize>,
    /// Positions of entries that go: the shim's aliases, the alias of the
    /// main module's memory, the fixup's argument instances.
    dropped: Vec<usize>,
    /// The main module, importing its memory and table, and the module that
    /// now defines them.
    new_main: Vec<u8>,
    storage: Vec<u8>,
    /// What each entry defines.
    defs: Defines,
}

impl Plan {
    fn find(entries: &[Entry]) -> Result<Option<Plan>> {
        let defs = defines(entries);
        let modules: Vec<usize> = (0..entries.len())
            .filter(|&i| matches!(entries[i], Entry::Module(_)))
            .collect();
        if modules.len() != 3 {
            return Ok(None);
        }
        let mut kinds = Vec::new();
        for &i in &modules {
            let Entry::Module(bytes) = entries[i] else {
                unreachable!()
            };
            kinds.push(ModuleInfo::read(bytes)?);
        }
        let find = |pred: &dyn Fn(&ModuleInfo) -> bool| {
            let found: Vec<usize> = (0..3).filter(|&k| pred(&kinds[k])).collect();
            (found.len() == 1).then(|| found[0])
        };
        let (Some(main), Some(shim), Some(fixup)) = (
            find(&|m| m.memories == 1),
            find(&|m| m.imports == 0 && m.exported_table.is_some()),
            find(&|m| m.imported_table.is_some() && m.memories == 0),
        ) else {
            return Ok(None);
        };
        let module_index = |k: usize| match defs.core[modules[k]] {
            Some(Core::Module(m)) => m,
            _ => unreachable!(),
        };
        let instance_of = |k: usize| -> Option<usize> {
            let m = module_index(k);
            let found: Vec<usize> = (0..entries.len())
                .filter(|&i| {
                    matches!(&entries[i], Entry::Instance(wasmparser::Instance::Instantiate { module_index, .. }) if *module_index == m)
                })
                .collect();
            (found.len() == 1).then(|| found[0])
        };
        let (Some(main_instance), Some(shim_instance), Some(fixup_instance)) =
            (instance_of(main), instance_of(shim), instance_of(fixup))
        else {
            return Ok(None);
        };
        if !(shim_instance < main_instance && main_instance < fixup_instance) {
            return Ok(None);
        }
        let core_instance = |pos: usize| match defs.core[pos] {
            Some(Core::Instance(i)) => i,
            _ => unreachable!(),
        };
        let (shim_idx, main_idx) = (core_instance(shim_instance), core_instance(main_instance));
        let Entry::Instance(wasmparser::Instance::Instantiate {
            args: fixup_args, ..
        }) = &entries[fixup_instance]
        else {
            unreachable!()
        };

        // Slot of each shim export, and the fixup's import behind each slot.
        let (shim_info, fixup_info) = (&kinds[shim], &kinds[fixup]);
        let mut shim_funcs = HashMap::new();
        let mut dropped = Vec::new();
        let mut lowers = Vec::new();
        for (pos, entry) in entries.iter().enumerate() {
            let Entry::Alias(wasmparser::ComponentAlias::CoreInstanceExport {
                instance_index,
                name,
                ..
            }) = entry
            else {
                continue;
            };
            if *instance_index != shim_idx {
                continue;
            }
            let Some(&slot) = shim_info.slots.get(*name) else {
                return Ok(None);
            };
            let Some((module, field)) = fixup_info.slot_imports.get(slot as usize) else {
                return Ok(None);
            };
            // The fixup's argument instance for `module`, and its export.
            let Some(arg) = fixup_args.iter().find(|a| a.name == module) else {
                return Ok(None);
            };
            let Some(lowered) = lowered_func(entries, &defs, arg.index, field) else {
                return Ok(None);
            };
            let Some(Core::Func(alias_func)) = defs.core[pos] else {
                return Ok(None);
            };
            shim_funcs.insert(alias_func, lowered);
            lowers.push(lowered);
            dropped.push(pos);
        }
        if lowers.is_empty() || lowers.len() != fixup_info.slot_imports.len() {
            return Ok(None);
        }
        lowers.sort_unstable();

        // The lowered imports use the main module's memory and allocator,
        // aliased after it is instantiated; the component functions they
        // lower are aliased just before them.
        let mut memory_alias = None;
        let mut realloc_alias = None;
        let mut lowered_aliases = Vec::new();
        for &pos in &lowers {
            let Entry::Canon(wasmparser::CanonicalFunction::Lower {
                func_index,
                options,
            }) = &entries[pos]
            else {
                return Ok(None);
            };
            for option in options.iter() {
                match option {
                    wasmparser::CanonicalOption::Memory(m) => {
                        let at = position_of(&defs, Core::Memory(*m));
                        if memory_alias.get_or_insert(at) != &at {
                            return Ok(None);
                        }
                    }
                    wasmparser::CanonicalOption::Realloc(f) => {
                        let at = position_of(&defs, Core::Func(*f));
                        if realloc_alias.get_or_insert(at) != &at {
                            return Ok(None);
                        }
                    }
                    wasmparser::CanonicalOption::UTF8
                    | wasmparser::CanonicalOption::UTF16
                    | wasmparser::CanonicalOption::CompactUTF16 => {}
                    _ => return Ok(None),
                }
            }
            let Some(alias) =
                (0..entries.len()).find(|&i| defs.component_func[i] == Some(*func_index))
            else {
                return Ok(None);
            };
            if !matches!(entries[alias], Entry::Alias(_)) || alias < main_instance {
                return Ok(None);
            }
            lowered_aliases.push(alias);
        }
        let (Some(Some(memory_alias)), Some(Some(realloc_alias))) = (memory_alias, realloc_alias)
        else {
            return Ok(None);
        };
        let alias_name = |pos: usize| match &entries[pos] {
            Entry::Alias(wasmparser::ComponentAlias::CoreInstanceExport {
                instance_index,
                name,
                ..
            }) if *instance_index == main_idx => Some(*name),
            _ => None,
        };
        let (Some(memory_name), Some(realloc_name)) =
            (alias_name(memory_alias), alias_name(realloc_alias))
        else {
            return Ok(None);
        };
        dropped.push(memory_alias);

        // The fixup's arguments are the shim and instances made for it
        // alone, between the main module's instantiation and the fixup's;
        // there, only the entries this pass moves or drops may define
        // anything: the component functions keep their numbers only then.
        let mut fixup_bags = Vec::new();
        for arg in fixup_args.iter() {
            if arg.index == shim_idx {
                continue;
            }
            match position_of(&defs, Core::Instance(arg.index)) {
                Some(at) if at > main_instance => fixup_bags.push(at),
                _ => return Ok(None),
            }
        }
        let between = entries
            .iter()
            .enumerate()
            .take(fixup_instance)
            .skip(main_instance + 1);
        for (pos, entry) in between {
            let ok = match entry {
                Entry::Module(_) => pos == modules[fixup],
                Entry::Instance(_) => fixup_bags.contains(&pos),
                Entry::Alias(wasmparser::ComponentAlias::CoreInstanceExport { .. }) => true,
                Entry::Alias(_) => lowered_aliases.contains(&pos),
                Entry::Canon(_) => lowers.contains(&pos),
                Entry::Section(..) => false,
            };
            if !ok {
                return Ok(None);
            }
        }
        dropped.extend(fixup_bags);

        // The lowered imports move before the first argument instance of
        // the main module; no component function may be defined after it
        // (before the main module), or theirs would be numbered earlier.
        let Some(first_arg_instance) =
            (shim_instance + 1..main_instance).find(|&i| matches!(entries[i], Entry::Instance(_)))
        else {
            return Ok(None);
        };
        if (first_arg_instance..main_instance).any(|i| defs.component_func[i].is_some()) {
            return Ok(None);
        }

        let main_info = &kinds[main];
        // The storage module takes over one memory and at most one table.
        if main_info.imported_memories > 0
            || main_info.imported_table.is_some()
            || main_info.tables.len() > 1
            || !main_info.tables.iter().all(storage_can_take)
        {
            return Ok(None);
        }
        let Some(&realloc_func) = main_info.func_exports.get(realloc_name) else {
            return Ok(None);
        };
        if main_info.memory_export.as_deref() != Some(memory_name) {
            return Ok(None);
        }
        let Entry::Module(main_bytes) = entries[modules[main]] else {
            unreachable!()
        };
        let (new_main, storage) = split_storage(main_bytes, main_info, realloc_func)?;
        Ok(Some(Plan {
            main_module: modules[main],
            shim_module: modules[shim],
            fixup_module: modules[fixup],
            shim_instance,
            main_instance,
            fixup_instance,
            first_arg_instance,
            shim_funcs,
            lowers,
            lowered_aliases,
            dropped,
            new_main,
            storage,
            defs,
        }))
    }

    /// The new component: entries in their order, renumbered, with the
    /// storage module in the shim's place and the lowered imports moved
    /// before the first argument instance of the main module.
    fn emit(&self, component: &[u8], entries: &[Entry]) -> Result<Vec<u8>> {
        let defs = &self.defs;
        let mut out = Output {
            bytes: header(component)?.to_vec(),
            pending: Pending::None,
        };
        let mut remap = Remap::default();
        for (pos, entry) in entries.iter().enumerate() {
            if pos == self.first_arg_instance {
                // The imports that needed the shim, lowered with the storage
                // module's memory and allocator.
                remap.lowering_moved = true;
                for (&alias, &lower) in self.lowered_aliases.iter().zip(&self.lowers) {
                    out.entry(&mut remap, &entries[alias], None)?;
                    out.entry(&mut remap, &entries[lower], defs.core[lower])?;
                }
                remap.lowering_moved = false;
            }
            let skipped = self.lowers.contains(&pos)
                || self.lowered_aliases.contains(&pos)
                || self.dropped.contains(&pos)
                || pos == self.fixup_module
                || pos == self.fixup_instance;
            if skipped {
                // The lowerings and the lifts now reach the memory through
                // the storage module.
                if let Some(Core::Memory(old)) = defs.core[pos] {
                    let (_, memory, _) = remap.storage.context("the storage module comes first")?;
                    remap.map.insert(Core::Memory(old), memory);
                }
                continue;
            }
            if pos == self.main_module {
                out.module(&mut remap, &self.new_main, defs.core[pos]);
            } else if pos == self.shim_module {
                out.module(&mut remap, &self.storage, defs.core[pos]);
            } else if pos == self.shim_instance {
                let Some(Core::Module(shim)) = defs.core[self.shim_module] else {
                    unreachable!("a module entry defines a module")
                };
                let module = remap.get(Core::Module(shim))?;
                out.instances()
                    .instantiate(module, Vec::<(&str, ModuleArg)>::new());
                let instance = remap.define(defs.core[pos]).context("an instance")?;
                let aliases = out.aliases();
                for (kind, name) in [
                    (wasm_encoder::ExportKind::Memory, "memory"),
                    (wasm_encoder::ExportKind::Func, "realloc"),
                ] {
                    aliases.alias(wasm_encoder::Alias::CoreInstanceExport {
                        instance,
                        kind,
                        name,
                    });
                }
                remap.storage = Some((instance, remap.memories, remap.funcs));
                remap.memories += 1;
                remap.funcs += 1;
            } else if pos == self.main_instance {
                let Entry::Instance(wasmparser::Instance::Instantiate { module_index, args }) =
                    entry
                else {
                    unreachable!("the main module's instantiation")
                };
                let module = remap.get(Core::Module(*module_index))?;
                let mut new_args = Vec::new();
                for a in args.iter() {
                    let instance = remap.get(Core::Instance(a.index))?;
                    new_args.push((a.name, ModuleArg::Instance(instance)));
                }
                let (storage, _, _) = remap.storage.context("the storage module comes first")?;
                new_args.push((STORAGE, ModuleArg::Instance(storage)));
                out.instances().instantiate(module, new_args);
                remap.define(defs.core[pos]);
            } else if let Entry::Instance(wasmparser::Instance::FromExports(exports)) = entry {
                let mut items = Vec::new();
                for e in exports.iter() {
                    let old = match (e.kind, self.shim_funcs.get(&e.index)) {
                        // What the shim's function called indirectly.
                        (wasmparser::ExternalKind::Func, Some(&lowered)) => {
                            defs.core[lowered].context("a lowering defines a function")?
                        }
                        _ => core_of(e.kind, e.index),
                    };
                    let kind = RoundtripReencoder.export_kind(e.kind)?;
                    items.push((e.name, kind, remap.get(old)?));
                }
                out.instances().export_items(items);
                remap.define(defs.core[pos]);
            } else {
                out.entry(&mut remap, entry, defs.core[pos])?;
            }
        }
        out.flush();
        Ok(out.bytes)
    }
}

/// The entry position that defines core item `item`.
fn position_of(defs: &Defines, item: Core) -> Option<usize> {
    defs.core.iter().position(|c| *c == Some(item))
}

/// The lowered import that core instance `instance` (made from exports)
/// exports as `field`: its entry position, if it is a `canon lower`.
fn lowered_func(entries: &[Entry], defs: &Defines, instance: u32, field: &str) -> Option<usize> {
    let at = position_of(defs, Core::Instance(instance))?;
    let Entry::Instance(wasmparser::Instance::FromExports(exports)) = &entries[at] else {
        return None;
    };
    let export = exports.iter().find(|e| e.name == field)?;
    if export.kind != wasmparser::ExternalKind::Func {
        return None;
    }
    let pos = position_of(defs, Core::Func(export.index))?;
    matches!(
        entries[pos],
        Entry::Canon(wasmparser::CanonicalFunction::Lower { .. })
    )
    .then_some(pos)
}

fn core_of(kind: wasmparser::ExternalKind, index: u32) -> Core {
    use wasmparser::ExternalKind as K;
    match kind {
        K::Func | K::FuncExact => Core::Func(index),
        K::Memory => Core::Memory(index),
        K::Table => Core::Table(index),
        K::Global => Core::Global(index),
        K::Tag => Core::Tag(index),
    }
}

/// Old to new numbers of the core items emitted so far.
#[derive(Default)]
struct Remap {
    map: HashMap<Core, u32>,
    funcs: u32,
    instances: u32,
    modules: u32,
    memories: u32,
    tables: u32,
    globals: u32,
    tags: u32,
    /// The storage module's instance, memory and `realloc` (new numbers),
    /// which replace the main module's memory and allocator in the moved
    /// lowerings.
    storage: Option<(u32, u32, u32)>,
    /// Whether options are being renumbered for a moved lowering.
    lowering_moved: bool,
    /// The first reference to an item not emitted (yet).
    missing: Option<Core>,
}

impl Remap {
    /// Number the item `item` defines (if any) as the next of its kind.
    fn define(&mut self, item: Option<Core>) -> Option<u32> {
        let item = item?;
        let counter = match item {
            Core::Func(_) => &mut self.funcs,
            Core::Instance(_) => &mut self.instances,
            Core::Module(_) => &mut self.modules,
            Core::Memory(_) => &mut self.memories,
            Core::Table(_) => &mut self.tables,
            Core::Global(_) => &mut self.globals,
            Core::Tag(_) => &mut self.tags,
        };
        let new = *counter;
        *counter += 1;
        self.map.insert(item, new);
        Some(new)
    }

    fn get(&self, item: Core) -> Result<u32> {
        self.map
            .get(&item)
            .copied()
            .with_context(|| format!("{item:?} is used before it is defined"))
    }

    fn lookup(&mut self, item: Core) -> u32 {
        match self.map.get(&item) {
            Some(&new) => new,
            None => {
                self.missing.get_or_insert(item);
                u32::MAX
            }
        }
    }
}

impl Reencode for Remap {
    type Error = std::convert::Infallible;

    fn function_index(&mut self, func: u32) -> Result<u32, wasm_encoder::reencode::Error> {
        Ok(self.lookup(Core::Func(func)))
    }
    fn memory_index(&mut self, memory: u32) -> Result<u32, wasm_encoder::reencode::Error> {
        Ok(self.lookup(Core::Memory(memory)))
    }
    fn table_index(&mut self, table: u32) -> Result<u32, wasm_encoder::reencode::Error> {
        Ok(self.lookup(Core::Table(table)))
    }
    fn global_index(&mut self, global: u32) -> Result<u32, wasm_encoder::reencode::Error> {
        Ok(self.lookup(Core::Global(global)))
    }
    fn tag_index(&mut self, tag: u32) -> Result<u32, wasm_encoder::reencode::Error> {
        Ok(self.lookup(Core::Tag(tag)))
    }
}

impl ReencodeComponent for Remap {
    fn module_index(&mut self, module: u32) -> u32 {
        self.lookup(Core::Module(module))
    }
    fn instance_index(&mut self, instance: u32) -> u32 {
        self.lookup(Core::Instance(instance))
    }
    fn canonical_option(
        &mut self,
        option: wasmparser::CanonicalOption,
    ) -> Result<wasm_encoder::CanonicalOption, wasm_encoder::reencode::Error> {
        Ok(match option {
            wasmparser::CanonicalOption::Memory(_) if self.lowering_moved => {
                wasm_encoder::CanonicalOption::Memory(self.storage.map_or(u32::MAX, |s| s.1))
            }
            wasmparser::CanonicalOption::Realloc(_) if self.lowering_moved => {
                wasm_encoder::CanonicalOption::Realloc(self.storage.map_or(u32::MAX, |s| s.2))
            }
            other => wasm_encoder::reencode::component_utils::canonical_option(self, other)?,
        })
    }
}

/// A section being filled with consecutive entries of one kind.
enum Pending {
    None,
    Instances(wasm_encoder::InstanceSection),
    Aliases(wasm_encoder::ComponentAliasSection),
    Canon(wasm_encoder::CanonicalFunctionSection),
}

struct Output {
    bytes: Vec<u8>,
    pending: Pending,
}

impl Output {
    fn flush(&mut self) {
        match std::mem::replace(&mut self.pending, Pending::None) {
            Pending::None => {}
            Pending::Instances(s) => put(&mut self.bytes, 2, &s),
            Pending::Aliases(s) => put(&mut self.bytes, 6, &s),
            Pending::Canon(s) => put(&mut self.bytes, 8, &s),
        }
    }

    /// The section being filled, if it holds entries of `get`'s kind, or a
    /// new one made by `make` after the pending one is written.
    fn pending<T: Default>(
        &mut self,
        make: fn(T) -> Pending,
        get: fn(&mut Pending) -> Option<&mut T>,
    ) -> &mut T {
        if get(&mut self.pending).is_none() {
            self.flush();
            self.pending = make(T::default());
        }
        get(&mut self.pending).expect("just made")
    }

    fn instances(&mut self) -> &mut wasm_encoder::InstanceSection {
        self.pending(Pending::Instances, |p| match p {
            Pending::Instances(s) => Some(s),
            _ => None,
        })
    }

    fn aliases(&mut self) -> &mut wasm_encoder::ComponentAliasSection {
        self.pending(Pending::Aliases, |p| match p {
            Pending::Aliases(s) => Some(s),
            _ => None,
        })
    }

    fn canon(&mut self) -> &mut wasm_encoder::CanonicalFunctionSection {
        self.pending(Pending::Canon, |p| match p {
            Pending::Canon(s) => Some(s),
            _ => None,
        })
    }

    fn module(&mut self, remap: &mut Remap, bytes: &[u8], defines: Option<Core>) {
        self.flush();
        put_raw(&mut self.bytes, 1, bytes);
        remap.define(defines);
    }

    /// An entry this pass keeps as it is, renumbered.
    fn entry(&mut self, remap: &mut Remap, entry: &Entry, defines: Option<Core>) -> Result<()> {
        match entry {
            Entry::Section(id, content) => {
                self.flush();
                put_raw(&mut self.bytes, *id, content);
            }
            Entry::Module(_) => bail!("a core module this pass does not know"),
            Entry::Instance(instance) => {
                remap.parse_instance(self.instances(), instance.clone())?;
            }
            Entry::Alias(alias) => {
                let alias = remap.component_alias(alias.clone())?;
                self.aliases().alias(alias);
            }
            Entry::Canon(func) => {
                remap.parse_component_canonical(self.canon(), func.clone())?;
            }
        }
        if let Some(item) = remap.missing {
            bail!("{item:?} is used before it is defined");
        }
        remap.define(defines);
        Ok(())
    }
}

/// What this pass needs to know of a core module.
#[derive(Default)]
struct ModuleInfo {
    /// How many imports, of any kind.
    imports: usize,
    /// The function imports as (module, name), in order (their indices).
    func_imports: Vec<(String, String)>,
    imported_table: Option<(String, String)>,
    imported_memories: u32,
    /// Defined memories and tables.
    memories: u32,
    memory: Option<wasmparser::MemoryType>,
    tables: Vec<wasmparser::TableType>,
    /// Exports.
    func_exports: HashMap<String, u32>,
    exported_table: Option<String>,
    memory_export: Option<String>,
    /// A shim: the table slot each exported function calls.
    slots: HashMap<String, u32>,
    /// A fixup: the import its element segment puts in each slot.
    slot_imports: Vec<(String, String)>,
}

impl ModuleInfo {
    fn read(bytes: &[u8]) -> Result<ModuleInfo> {
        let mut info = ModuleInfo::default();
        let mut bodies = Vec::new();
        for payload in wasmparser::Parser::new(0).parse_all(bytes) {
            match payload? {
                wasmparser::Payload::ImportSection(reader) => {
                    for import in reader.into_imports() {
                        let import = import?;
                        let at = (import.module.to_owned(), import.name.to_owned());
                        match import.ty {
                            wasmparser::TypeRef::Func(_) | wasmparser::TypeRef::FuncExact(_) => {
                                info.func_imports.push(at);
                            }
                            wasmparser::TypeRef::Table(_) => info.imported_table = Some(at),
                            wasmparser::TypeRef::Memory(_) => info.imported_memories += 1,
                            _ => {}
                        }
                        info.imports += 1;
                    }
                }
                wasmparser::Payload::MemorySection(reader) => {
                    for memory in reader {
                        info.memories += 1;
                        info.memory = Some(memory?);
                    }
                }
                wasmparser::Payload::TableSection(reader) => {
                    for table in reader {
                        info.tables.push(table?.ty);
                    }
                }
                wasmparser::Payload::ExportSection(reader) => {
                    for export in reader {
                        let export = export?;
                        match export.kind {
                            wasmparser::ExternalKind::Func
                            | wasmparser::ExternalKind::FuncExact => {
                                info.func_exports
                                    .insert(export.name.to_owned(), export.index);
                            }
                            wasmparser::ExternalKind::Table => {
                                info.exported_table = Some(export.name.to_owned())
                            }
                            wasmparser::ExternalKind::Memory if export.index == 0 => {
                                info.memory_export = Some(export.name.to_owned())
                            }
                            _ => {}
                        }
                    }
                }
                wasmparser::Payload::ElementSection(reader) => {
                    for element in reader {
                        let element = element?;
                        let wasmparser::ElementKind::Active { offset_expr, .. } = element.kind
                        else {
                            continue;
                        };
                        let mut ops = offset_expr.get_operators_reader();
                        let wasmparser::Operator::I32Const { value: 0 } = ops.read()? else {
                            continue;
                        };
                        // A fixup's segment holds its imports only.
                        if let wasmparser::ElementItems::Functions(funcs) = element.items {
                            let mut imports = Some(Vec::new());
                            for f in funcs {
                                let import = info.func_imports.get(f? as usize).cloned();
                                imports = imports.zip(import).map(|(mut v, i)| {
                                    v.push(i);
                                    v
                                });
                            }
                            info.slot_imports = imports.unwrap_or_default();
                        }
                    }
                }
                wasmparser::Payload::CodeSectionEntry(body) => bodies.push(body),
                _ => {}
            }
        }
        // A shim's functions end in `i32.const <slot>; call_indirect`.
        for (name, &index) in &info.func_exports {
            let Some(body) = (index as usize)
                .checked_sub(info.func_imports.len())
                .and_then(|i| bodies.get(i))
            else {
                continue;
            };
            let mut slot = None;
            let mut last_const = None;
            let mut ops = body.get_operators_reader()?;
            while !ops.eof() {
                match ops.read()? {
                    wasmparser::Operator::I32Const { value } => last_const = Some(value),
                    wasmparser::Operator::CallIndirect { .. } => slot = last_const,
                    _ => {}
                }
            }
            if let Some(slot) = slot.and_then(|s| u32::try_from(s).ok()) {
                info.slots.insert(name.clone(), slot);
            }
        }
        Ok(info)
    }
}

/// The canonical order of a core module's sections, by id (custom sections,
/// id 0, may come anywhere).
const SECTION_ORDER: [u8; 13] = [1, 2, 3, 4, 5, 13, 6, 7, 8, 9, 12, 10, 11];

fn rank(id: u8) -> usize {
    SECTION_ORDER.iter().position(|&x| x == id).unwrap_or(0)
}

/// Whether the storage module can define `table` in the main module's
/// place: a 32-bit, unshared table of functions (what `realloc` calls
/// through).
fn storage_can_take(table: &wasmparser::TableType) -> bool {
    table.element_type == wasmparser::RefType::FUNCREF && !table.table64 && !table.shared
}

/// The main module with its memory and table imported from the storage
/// module, and an element segment that puts `realloc_func` into the slot
/// after its table's own; and the storage module.
fn split_storage(main: &[u8], info: &ModuleInfo, realloc_func: u32) -> Result<(Vec<u8>, Vec<u8>)> {
    ensure!(
        info.imported_memories == 0 && info.imported_table.is_none() && info.tables.len() <= 1,
        "the main module imports its memory or table, or has several tables"
    );
    let memory = RoundtripReencoder.memory_type(info.memory.context("a memory")?)?;
    let slot = match info.tables.first() {
        Some(t) => {
            ensure!(
                storage_can_take(t),
                "the main module's table is not a 32-bit table of functions"
            );
            t.initial
        }
        None => 0,
    };
    let table = wasm_encoder::TableType {
        element_type: wasm_encoder::RefType::FUNCREF,
        minimum: slot + 1,
        maximum: match info.tables.first() {
            Some(t) => t.maximum.map(|max| max.max(slot + 1)),
            None => Some(1),
        },
        table64: false,
        shared: false,
    };
    let slot_i32 = i32::try_from(slot).context("a table slot")?;

    let imports = |reader: Option<BinaryReader>| -> Result<wasm_encoder::ImportSection> {
        let mut section = wasm_encoder::ImportSection::new();
        if let Some(reader) = reader {
            RoundtripReencoder.parse_import_section(
                &mut section,
                wasmparser::ImportSectionReader::new(reader)?,
            )?;
        }
        section.import(STORAGE, "memory", memory);
        section.import(STORAGE, "table", table);
        Ok(section)
    };
    let elements = |reader: Option<BinaryReader>| -> Result<wasm_encoder::ElementSection> {
        let mut section = wasm_encoder::ElementSection::new();
        if let Some(reader) = reader {
            RoundtripReencoder.parse_element_section(
                &mut section,
                wasmparser::ElementSectionReader::new(reader)?,
            )?;
        }
        section.active(
            None,
            &wasm_encoder::ConstExpr::i32_const(slot_i32),
            wasm_encoder::Elements::Functions(Cow::Owned(vec![realloc_func])),
        );
        Ok(section)
    };

    let mut out = header(main)?.to_vec();
    let (mut imported, mut elemented) = (false, false);
    for (id, content, offset) in sections(main)? {
        if id != 0 {
            if !imported && rank(id) > rank(2) {
                put(&mut out, 2, &imports(None)?);
                imported = true;
            }
            if !elemented && rank(id) > rank(9) {
                put(&mut out, 9, &elements(None)?);
                elemented = true;
            }
        }
        let reader = BinaryReader::new(content, offset);
        match id {
            2 => {
                put(&mut out, 2, &imports(Some(reader))?);
                imported = true;
            }
            4 | 5 => {}
            9 => {
                put(&mut out, 9, &elements(Some(reader))?);
                elemented = true;
            }
            _ => put_raw(&mut out, id, content),
        }
    }
    if !imported {
        put(&mut out, 2, &imports(None)?);
    }
    if !elemented {
        put(&mut out, 9, &elements(None)?);
    }

    let mut storage = wasm_encoder::Module::new();
    let mut types = wasm_encoder::TypeSection::new();
    let i32s = [wasm_encoder::ValType::I32; 4];
    types.ty().function(i32s, [wasm_encoder::ValType::I32]);
    storage.section(&types);
    let mut funcs = wasm_encoder::FunctionSection::new();
    funcs.function(0);
    storage.section(&funcs);
    let mut tables = wasm_encoder::TableSection::new();
    tables.table(table);
    storage.section(&tables);
    let mut memories = wasm_encoder::MemorySection::new();
    memories.memory(memory);
    storage.section(&memories);
    let mut exports = wasm_encoder::ExportSection::new();
    exports.export("memory", wasm_encoder::ExportKind::Memory, 0);
    exports.export("table", wasm_encoder::ExportKind::Table, 0);
    exports.export("realloc", wasm_encoder::ExportKind::Func, 0);
    storage.section(&exports);
    let mut code = wasm_encoder::CodeSection::new();
    let mut realloc = wasm_encoder::Function::new([]);
    let mut body = realloc.instructions();
    for local in 0..4 {
        body.local_get(local);
    }
    body.i32_const(slot_i32).call_indirect(0, 0).end();
    code.function(&realloc);
    storage.section(&code);
    Ok((out, storage.finish()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::minify::tests::{plugin_component_from, wit_of};

    /// A component of the `plugin` world whose core module, like the SDK's
    /// and the C plugins', has no `_initialize` (wit-component's dummy
    /// module has one, as a WASI reactor does).
    fn plugin_component() -> Vec<u8> {
        plugin_component_from(without_initialize)
    }

    /// The dummy module without its `_initialize` export.
    fn without_initialize(module: Vec<u8>) -> Vec<u8> {
        let mut out = header(&module).expect("a module").to_vec();
        for (id, content, offset) in sections(&module).expect("sections") {
            if id != 7 {
                put_raw(&mut out, id, content);
                continue;
            }
            let mut exports = wasm_encoder::ExportSection::new();
            let reader = wasmparser::ExportSectionReader::new(BinaryReader::new(content, offset))
                .expect("exports");
            for e in reader {
                let e = e.expect("an export");
                if e.name != "_initialize" {
                    let kind = RoundtripReencoder.export_kind(e.kind).expect("a kind");
                    exports.export(e.name, kind, e.index);
                }
            }
            put(&mut out, 7, &exports);
        }
        out
    }

    /// `module` with a table of external references, which the storage
    /// module does not take over.
    fn with_an_externref_table(module: Vec<u8>) -> Vec<u8> {
        let mut tables = wasm_encoder::TableSection::new();
        tables.table(wasm_encoder::TableType {
            element_type: wasm_encoder::RefType::EXTERNREF,
            minimum: 1,
            maximum: None,
            table64: false,
            shared: false,
        });
        let mut out = header(&module).expect("a module").to_vec();
        let mut added = false;
        for (id, content, _) in sections(&module).expect("sections") {
            if id == 4 {
                panic!("the dummy module has a table already");
            }
            if !added && id != 0 && rank(id) > rank(4) {
                put(&mut out, 4, &tables);
                added = true;
            }
            put_raw(&mut out, id, content);
        }
        out
    }

    /// The core modules a component instantiates, and the modules that
    /// import a table (a fixup) or a memory.
    fn core_layout(component: &[u8]) -> (usize, usize, usize) {
        let entries = entries(component).expect("a component");
        let instantiations = entries
            .iter()
            .filter(|e| matches!(e, Entry::Instance(wasmparser::Instance::Instantiate { .. })))
            .count();
        let (mut table_importers, mut memory_importers) = (0, 0);
        for e in &entries {
            if let Entry::Module(bytes) = e {
                let info = ModuleInfo::read(bytes).expect("a module");
                table_importers += usize::from(info.imported_table.is_some());
                memory_importers += usize::from(info.imported_memories > 0);
            }
        }
        (instantiations, table_importers, memory_importers)
    }

    #[test]
    fn a_plugin_gets_two_core_instances_and_keeps_its_type() {
        let original = plugin_component();
        assert_eq!(core_layout(&original), (3, 1, 0), "wit-component's layout");
        let relaid = relayout(&original)
            .expect("relays out and validates")
            .expect("the plugin world needs the shim");
        // The storage module and the main module, which imports its memory
        // and table from it.
        assert_eq!(core_layout(&relaid), (2, 1, 1));
        assert_eq!(wit_of(&relaid), wit_of(&original));
        // Shortening the names afterwards (as `componentize` does) keeps it valid.
        let minified = crate::minify::minify(&relaid).expect("minifies");
        assert_eq!(wit_of(&minified), wit_of(&original));
    }

    #[test]
    fn a_component_without_the_shim_is_left_as_it_is() {
        let relaid = relayout(&plugin_component())
            .expect("relays out")
            .expect("laid out");
        assert!(relayout(&relaid).expect("reads").is_none());
    }

    #[test]
    fn a_fixup_that_also_initialises_the_main_module_is_left_as_it_is() {
        // wit-component's fixup runs a reactor's `_initialize` once the
        // table is filled; nothing would run it without the fixup.
        let reactor = plugin_component_from(|module| module);
        assert!(relayout(&reactor).expect("reads").is_none());
    }

    #[test]
    fn a_main_module_with_a_table_the_storage_module_cannot_take_is_left_as_it_is() {
        let component =
            plugin_component_from(|module| with_an_externref_table(without_initialize(module)));
        assert_eq!(core_layout(&component), (3, 1, 0), "wit-component's layout");
        assert!(relayout(&component).expect("reads").is_none());
    }

    #[test]
    fn each_shim_slot_is_replaced_by_the_import_the_fixup_put_there() {
        // Every import that went through the shim is now lowered with the
        // storage module's memory and allocator, and passed to the main
        // module under the name it imports.
        let original = plugin_component();
        let relaid = relayout(&original).expect("relays out").expect("laid out");
        let entries = entries(&relaid).expect("a component");
        let defs = defines(&entries);
        let storage_instance = 0;
        let mut lowered_with_storage = 0;
        for e in &entries {
            if let Entry::Canon(wasmparser::CanonicalFunction::Lower { options, .. }) = e {
                let uses_memory = options
                    .iter()
                    .any(|o| matches!(o, wasmparser::CanonicalOption::Memory(_)));
                if uses_memory {
                    lowered_with_storage += 1;
                    for o in options.iter() {
                        match o {
                            wasmparser::CanonicalOption::Memory(m) => {
                                let at = position_of(&defs, Core::Memory(*m)).expect("defined");
                                assert!(matches!(
                                    entries[at],
                                    Entry::Alias(wasmparser::ComponentAlias::CoreInstanceExport {
                                        instance_index,
                                        name: "memory",
                                        ..
                                    }) if instance_index == storage_instance
                                ));
                            }
                            wasmparser::CanonicalOption::Realloc(f) => {
                                let at = position_of(&defs, Core::Func(*f)).expect("defined");
                                assert!(matches!(
                                    entries[at],
                                    Entry::Alias(wasmparser::ComponentAlias::CoreInstanceExport {
                                        instance_index,
                                        name: "realloc",
                                        ..
                                    }) if instance_index == storage_instance
                                ));
                            }
                            _ => {}
                        }
                    }
                }
            }
        }
        let original_entries = super::entries(&original).expect("a component");
        let shim_slots = original_entries
            .iter()
            .filter_map(|e| match e {
                Entry::Module(bytes) => Some(ModuleInfo::read(bytes).expect("a module")),
                _ => None,
            })
            .map(|m| m.slot_imports.len())
            .sum::<usize>();
        assert!(shim_slots > 0);
        assert_eq!(lowered_with_storage, shim_slots);
    }

    #[test]
    fn every_import_of_the_main_module_is_the_host_function_of_its_name() {
        // wit-component names the main module's imports after the host
        // functions; the relaid component must wire each one to the
        // lowering of that function, directly.
        let relaid = relayout(&plugin_component())
            .expect("relays out")
            .expect("laid out");
        let entries = entries(&relaid).expect("a component");
        let defs = defines(&entries);
        let Some(Entry::Instance(wasmparser::Instance::Instantiate { module_index, args })) =
            entries.iter().find(|e| {
                matches!(e, Entry::Instance(wasmparser::Instance::Instantiate { args, .. })
                    if args.iter().any(|a| a.name == STORAGE))
            })
        else {
            panic!("the main module is instantiated with the storage module");
        };
        let at = position_of(&defs, Core::Module(*module_index)).expect("a module");
        let Entry::Module(main) = entries[at] else {
            panic!("a module")
        };
        let info = ModuleInfo::read(main).expect("a module");
        assert!(!info.func_imports.is_empty());
        for (module, name) in &info.func_imports {
            let arg = args.iter().find(|a| a.name == module).expect("an argument");
            let bag = position_of(&defs, Core::Instance(arg.index)).expect("an instance");
            let Entry::Instance(wasmparser::Instance::FromExports(exports)) = &entries[bag] else {
                panic!("{name}: not an instance of exports");
            };
            let export = exports.iter().find(|e| e.name == name).expect("exported");
            let lower = position_of(&defs, Core::Func(export.index)).expect("a function");
            let func_index = match &entries[lower] {
                Entry::Canon(wasmparser::CanonicalFunction::Lower { func_index, .. }) => {
                    *func_index
                }
                // Resource drops and the like are not host functions.
                _ => continue,
            };
            let alias = (0..entries.len())
                .find(|&i| defs.component_func[i] == Some(func_index))
                .expect("the lowered function is defined");
            let Entry::Alias(wasmparser::ComponentAlias::InstanceExport { name: host, .. }) =
                entries[alias]
            else {
                panic!("{name}: lowers something other than a host function");
            };
            assert_eq!(host, name, "main imports {name}, gets {host}");
        }
    }
}
