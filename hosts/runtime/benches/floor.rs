//! The floor under a routine call: what wasmtime itself costs to call into
//! wasm, beside the same kind of call through the runtime, warm (back to
//! back) and with the caches evicted (16 MiB written before each timed call,
//! as a stack's packet work does between two calls). docs/measurements.md,
//! "the floor of a call", reads these.
//!
//! The wasm is built here with `wasm-encoder`, the smallest functions of
//! each kind:
//! - a core function `(i64) -> i64` that reads and writes one word of its
//!   memory;
//! - the same function lifted as a component function `(u64) -> u64`;
//! - a component function `(u64) -> result<bool, string>` whose result is
//!   returned through memory and freed by a post-return function, the
//!   shape of every routine's result.
//!
//! Needs the plugin components for the runtime's call: `make plugins`.

mod common;

use common::{EVICT_BYTES, bench_pair, evicted, send_ctx};
use corequic_runtime::{HostCapabilities, Runtime, RuntimeConfig};
use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use std::time::Duration;
use wasm_encoder::{
    CanonicalOption, CodeSection, ComponentBuilder, ComponentExportKind, ComponentValType,
    ExportKind, ExportSection, Function, FunctionSection, Instruction, MemArg, MemorySection,
    MemoryType, Module, ModuleArg, PrimitiveValType, TypeSection, ValType,
};
use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Engine, Instance, Store};

/// The frame type `test-bench` registers and answers `should-send-frame`
/// for.
const FRAME_MAX_DATA: u64 = 0x3f5e;

/// A memory of one page, exported as `memory` when `export` is set.
fn one_page() -> MemorySection {
    let mut memory = MemorySection::new();
    memory.memory(MemoryType {
        minimum: 1,
        maximum: None,
        memory64: false,
        shared: false,
        page_size_log2: None,
    });
    memory
}

/// A core module exporting `f: (i64) -> i64`, which adds its argument to a
/// word of its memory and returns it.
fn core_module() -> Vec<u8> {
    let mut module = Module::new();
    let mut types = TypeSection::new();
    types.ty().function([ValType::I64], [ValType::I64]);
    module.section(&types);
    let mut funcs = FunctionSection::new();
    funcs.function(0);
    module.section(&funcs);
    module.section(&one_page());
    let mut exports = ExportSection::new();
    exports.export("f", ExportKind::Func, 0);
    module.section(&exports);
    let word = MemArg {
        offset: 0,
        align: 3,
        memory_index: 0,
    };
    let mut f = Function::new([]);
    for i in [
        Instruction::I32Const(64),
        Instruction::I32Const(64),
        Instruction::I64Load(word),
        Instruction::LocalGet(0),
        Instruction::I64Add,
        Instruction::I64Store(word),
        Instruction::LocalGet(0),
        Instruction::End,
    ] {
        f.instruction(&i);
    }
    let mut code = CodeSection::new();
    code.function(&f);
    module.section(&code);
    module.finish()
}

/// A component exporting `f: func(x: u64) -> u64`, [`core_module`]'s `f`.
fn component_u64() -> Vec<u8> {
    let mut c = ComponentBuilder::default();
    let module = c.core_module_raw(None, &core_module());
    let instance = c.core_instantiate(None, module, Vec::<(&str, ModuleArg)>::new());
    let core_f = c.core_alias_export(None, instance, "f", ExportKind::Func);
    let (ty, mut func_type) = c.type_function(None);
    func_type.params([("x", ComponentValType::Primitive(PrimitiveValType::U64))]);
    func_type.result(Some(ComponentValType::Primitive(PrimitiveValType::U64)));
    let lifted = c.lift_func(None, core_f, ty, Vec::<CanonicalOption>::new());
    c.export("f", ComponentExportKind::Func, lifted, None);
    c.finish()
}

/// A component exporting `f: func(x: u64) -> result<bool, string>`: the
/// core function writes `ok(true)` into a return area in memory and returns
/// its address; an empty post-return function follows each call.
fn component_result() -> Vec<u8> {
    let mut module = Module::new();
    let mut types = TypeSection::new();
    types.ty().function([ValType::I64], [ValType::I32]);
    types.ty().function([ValType::I32], []);
    module.section(&types);
    let mut funcs = FunctionSection::new();
    funcs.function(0);
    funcs.function(1);
    module.section(&funcs);
    module.section(&one_page());
    let mut exports = ExportSection::new();
    exports.export("f", ExportKind::Func, 0);
    exports.export("post", ExportKind::Func, 1);
    exports.export("memory", ExportKind::Memory, 0);
    module.section(&exports);
    let byte = |offset| MemArg {
        offset,
        align: 0,
        memory_index: 0,
    };
    const RET_AREA: i32 = 16;
    let mut f = Function::new([]);
    for i in [
        // Discriminant 0 (`ok`) at the area, the bool at offset 4.
        Instruction::I32Const(RET_AREA),
        Instruction::I32Const(0),
        Instruction::I32Store8(byte(0)),
        Instruction::I32Const(RET_AREA),
        Instruction::I32Const(1),
        Instruction::I32Store8(byte(4)),
        Instruction::I32Const(RET_AREA),
        Instruction::End,
    ] {
        f.instruction(&i);
    }
    let mut post = Function::new([]);
    post.instruction(&Instruction::End);
    let mut code = CodeSection::new();
    code.function(&f);
    code.function(&post);
    module.section(&code);

    let mut c = ComponentBuilder::default();
    let module = c.core_module_raw(None, &module.finish());
    let instance = c.core_instantiate(None, module, Vec::<(&str, ModuleArg)>::new());
    let core_f = c.core_alias_export(None, instance, "f", ExportKind::Func);
    let core_post = c.core_alias_export(None, instance, "post", ExportKind::Func);
    let memory = c.core_alias_export(None, instance, "memory", ExportKind::Memory);
    let (result, defined) = c.type_defined(None);
    defined.result(
        Some(ComponentValType::Primitive(PrimitiveValType::Bool)),
        Some(ComponentValType::Primitive(PrimitiveValType::String)),
    );
    let (ty, mut func_type) = c.type_function(None);
    func_type.params([("x", ComponentValType::Primitive(PrimitiveValType::U64))]);
    func_type.result(Some(ComponentValType::Type(result)));
    let lifted = c.lift_func(
        None,
        core_f,
        ty,
        [
            CanonicalOption::UTF8,
            CanonicalOption::Memory(memory),
            CanonicalOption::PostReturn(core_post),
        ],
    );
    c.export("f", ComponentExportKind::Func, lifted, None);
    c.finish()
}

fn benches(c: &mut Criterion) {
    let mut config = Config::new();
    config.epoch_interruption(true);
    config.wasm_component_model(true);
    let engine = Engine::new(&config).expect("engine");
    let mut other = vec![0u8; EVICT_BYTES];
    let mut group = c.benchmark_group("call floor");

    let module = wasmtime::Module::new(&engine, core_module()).expect("core module");
    let mut store = Store::new(&engine, ());
    store.set_epoch_deadline(u64::MAX / 2);
    let instance = Instance::new(&mut store, &module, &[]).expect("instantiate");
    let core_f = instance
        .get_typed_func::<u64, u64>(&mut store, "f")
        .expect("f");
    group.bench_function("core function", |b| {
        b.iter(|| core_f.call(&mut store, black_box(1)).expect("call"))
    });
    group.bench_function("core function, caches evicted", |b| {
        b.iter_custom(|iters| {
            evicted(&mut other, iters, || {
                core_f.call(&mut store, 1).expect("call")
            })
        })
    });

    let linker = Linker::<()>::new(&engine);
    let component = Component::new(&engine, component_u64()).expect("component");
    let mut store = Store::new(&engine, ());
    store.set_epoch_deadline(u64::MAX / 2);
    let instance = linker
        .instantiate(&mut store, &component)
        .expect("instantiate");
    let u64_f = instance
        .get_typed_func::<(u64,), (u64,)>(&mut store, "f")
        .expect("f");
    group.bench_function("component function", |b| {
        b.iter(|| u64_f.call(&mut store, (black_box(1),)).expect("call"))
    });
    group.bench_function("component function, caches evicted", |b| {
        b.iter_custom(|iters| {
            evicted(&mut other, iters, || {
                u64_f.call(&mut store, (1,)).expect("call")
            })
        })
    });

    let component = Component::new(&engine, component_result()).expect("component");
    let mut store = Store::new(&engine, ());
    store.set_epoch_deadline(u64::MAX / 2);
    let instance = linker
        .instantiate(&mut store, &component)
        .expect("instantiate");
    let result_f = instance
        .get_typed_func::<(u64,), (Result<bool, String>,)>(&mut store, "f")
        .expect("f");
    assert_eq!(
        result_f.call(&mut store, (1,)).expect("call").0,
        Ok(true),
        "the result is read back from memory"
    );
    group.bench_function("component function, result in memory", |b| {
        b.iter(|| result_f.call(&mut store, (black_box(1),)).expect("call"))
    });
    group.bench_function(
        "component function, result in memory, caches evicted",
        |b| {
            b.iter_custom(|iters| {
                evicted(&mut other, iters, || {
                    result_f.call(&mut store, (1,)).expect("call")
                })
            })
        },
    );

    // The same kind of call as a routine: `should-send-frame` of the
    // `test-bench` plugin through the runtime (route, anchors, the CPU
    // deadline, the call scope), the plugin's SDK glue and its types.
    let runtime =
        Runtime::new(RuntimeConfig::default(), HostCapabilities::full()).expect("runtime");
    let mut pair = bench_pair(&runtime);
    let ctx = send_ctx(1);
    let ep = &mut pair.client;
    assert_eq!(
        ep.plugins
            .should_send_frame(&mut ep.conn, FRAME_MAX_DATA, ctx),
        Ok(true)
    );
    group.bench_function("should-send-frame through the runtime", |b| {
        b.iter(|| {
            ep.plugins
                .should_send_frame(&mut ep.conn, black_box(FRAME_MAX_DATA), ctx)
                .expect("call")
        })
    });
    group.bench_function(
        "should-send-frame through the runtime, caches evicted",
        |b| {
            b.iter_custom(|iters| {
                evicted(&mut other, iters, || {
                    ep.plugins
                        .should_send_frame(&mut ep.conn, FRAME_MAX_DATA, ctx)
                        .expect("call")
                })
            })
        },
    );

    // What some of those calls pay on top: the runtime reads the thread's
    // CPU clock (a system call) at the start of a call when its last
    // reading on the thread is half a tick old, as it is before about a
    // third of the evicted calls above.
    #[cfg(unix)]
    group.bench_function("thread CPU clock read, caches evicted", |b| {
        b.iter_custom(|iters| evicted(&mut other, iters, thread_cpu_time))
    });
    group.finish();
}

/// The calling thread's CPU time, as the runtime's call deadline reads it.
#[cfg(unix)]
fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

criterion_group!(floor_benches, benches);
criterion_main!(floor_benches);
