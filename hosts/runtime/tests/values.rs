//! Every case of `plugin-val` crosses the ABI unchanged in both directions
//! through the SDK's glue (`plugins/sdk/src/abi.rs`, which lifts and lowers
//! these values by hand): a control's arguments and results, one plugin's
//! call of another plugin's control, and a log record's fields. The host
//! side is wasmtime's canonical ABI, so a layout the SDK gets wrong shows up
//! here as a value that differs or a call that fails.

mod common;

use common::pair;
use corequic_mock::MockPair;
use corequic_runtime::RoutineError;
use corequic_runtime::abi::{
    Error, Frame, IpAddr, NewConnectionIdFrame, PacketType, PluginVal, PnSpace, SocketAddr,
};

/// test-bench: returns its arguments.
const BENCH_ECHO: u64 = 3;
/// test-observer: calls the control its first argument names with the
/// other arguments, through the host, and returns what that returned.
const OBSERVER_CALL_CONTROL: u64 = 0x4f_0008;
/// test-observer: logs its arguments as the fields of one record.
const OBSERVER_LOG_ARGS: u64 = 0x4f_0009;

/// Call the client's plugin-control `id` with `args`.
fn control(p: &mut MockPair, id: u64, args: &[PluginVal]) -> Result<Vec<PluginVal>, RoutineError> {
    p.client
        .plugins
        .plugin_control(&mut p.client.conn, id, args)
}

/// Each case of `plugin-val`, with the edges of its payload.
fn every_case() -> Vec<PluginVal> {
    vec![
        PluginVal::None,
        PluginVal::Bool(true),
        PluginVal::Bool(false),
        PluginVal::U32(u32::MAX),
        PluginVal::U64(u64::MAX - 1),
        PluginVal::S64(-3),
        PluginVal::F64(-2.5),
        PluginVal::Bytes(Vec::new()),
        PluginVal::Bytes(vec![0, 1, 0xff]),
        PluginVal::String(String::new()),
        PluginVal::String("héllo".into()),
        PluginVal::Duration(7_000_000),
        PluginVal::Instant(u64::MAX),
        PluginVal::SocketAddr(SocketAddr {
            ip: IpAddr::V4((192, 0, 2, 1)),
            port: 443,
        }),
        PluginVal::SocketAddr(SocketAddr {
            ip: IpAddr::V6((0x2001, 0xdb8, 0, 1, 2, 3, 0xfffe, 0xffff)),
            port: 65535,
        }),
        PluginVal::Frame(Frame::NewConnectionId(NewConnectionIdFrame {
            sequence: 5,
            retire_prior_to: 2,
            connection_id: vec![0xc1; 8],
            stateless_reset_token: (0..16).collect(),
        })),
        PluginVal::Frame(Frame::MaxData(1 << 40)),
        PluginVal::PacketType(PacketType::OneRtt),
        PluginVal::PacketType(PacketType::VersionNegotiation),
        PluginVal::PnSpace(PnSpace::Initial),
        PluginVal::PnSpace(PnSpace::ApplicationData),
    ]
}

#[test]
fn every_value_case_comes_back_from_a_control_unchanged() {
    let mut p = pair(&["test-bench"], &[]);
    let values = every_case();
    let back = control(&mut p, BENCH_ECHO, &values);
    assert_eq!(back.expect("the echo answers"), values);
    // Nothing at all is a list too.
    let back = control(&mut p, BENCH_ECHO, &[]);
    assert_eq!(back.expect("the echo answers"), Vec::new());
}

#[test]
fn every_value_case_reaches_another_plugins_control_and_comes_back() {
    let mut p = pair(&["test-bench", "test-observer"], &[]);
    let values = every_case();
    let mut args = vec![PluginVal::U64(BENCH_ECHO)];
    args.extend(values.iter().cloned());
    let back = control(&mut p, OBSERVER_CALL_CONTROL, &args);
    assert_eq!(back.expect("both controls answer"), values);
}

#[test]
fn a_control_that_fails_returns_its_error_through_another_plugin() {
    let mut p = pair(&["test-bench", "test-observer"], &[]);
    // test-bench has no control 0x99: the host says `not-found`, and the
    // observer returns that error as its own.
    let back = control(
        &mut p,
        OBSERVER_CALL_CONTROL,
        &[PluginVal::U64(0x99), PluginVal::U64(1)],
    );
    assert!(
        matches!(
            &back,
            Err(RoutineError::Plugin {
                error: Error::NotFound(_),
                ..
            })
        ),
        "{back:?}"
    );
}

#[test]
fn every_value_case_is_logged_as_sent() {
    let mut p = pair(&["test-observer"], &[]);
    let values = every_case();
    let back = control(&mut p, OBSERVER_LOG_ARGS, &values);
    assert_eq!(back.expect("the record is sent"), Vec::new());
    let records = p.client.conn.logs_of("observer");
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0].message, "arguments");
    let names: Vec<_> = records[0].fields.iter().map(|(k, _)| k.as_str()).collect();
    let logged: Vec<_> = records[0].fields.iter().map(|(_, v)| v.clone()).collect();
    assert_eq!(logged, values);
    assert_eq!(names.first(), Some(&"a"));
    assert_eq!(names.last(), Some(&"u"));
}

/// CQ-LIMIT-12: a record keeps its first 32 fields; the ones after them are
/// checked and dropped, and the record is still passed on.
#[test]
fn a_record_keeps_its_first_32_fields() {
    let mut p = pair(&["test-observer"], &[]);
    let values: Vec<PluginVal> = (0..40).map(PluginVal::U64).collect();
    let back = control(&mut p, OBSERVER_LOG_ARGS, &values);
    assert_eq!(back.expect("the record is sent"), Vec::new());
    // A second record with fewer fields reuses the first one's strings.
    let back = control(&mut p, OBSERVER_LOG_ARGS, &values[..3]);
    assert_eq!(back.expect("the record is sent"), Vec::new());
    let records = p.client.conn.logs_of("observer");
    assert_eq!(records.len(), 2, "{records:?}");
    let names: Vec<_> = records[0].fields.iter().map(|(k, _)| k.as_str()).collect();
    let logged: Vec<_> = records[0].fields.iter().map(|(_, v)| v.clone()).collect();
    assert_eq!(logged, values[..32]);
    assert_eq!(names.len(), 32);
    assert_eq!((names[25], names[26], names[31]), ("z", "aa", "af"));
    let names: Vec<_> = records[1].fields.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(names, ["a", "b", "c"]);
    assert_eq!(
        records[1]
            .fields
            .iter()
            .map(|(_, v)| v.clone())
            .collect::<Vec<_>>(),
        values[..3]
    );
}
