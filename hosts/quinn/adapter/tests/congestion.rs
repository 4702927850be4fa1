//! CQ-SEND-10 on quinn: an ACK-only packet that congestion control lets out
//! only because it is not in flight is offered the registrations that are not
//! in flight (padding), and no others (the BDP plugin's in-flight frame).
//!
//! Two quinn-proto connections are wired together in memory on a virtual
//! clock, with a congestion controller whose window the test sets, so that
//! "the window is full" is a fact the test controls rather than a race with a
//! real link. Time never advances and nothing sleeps: every step is a
//! function call, and the outcome is read from the adapter's per-type frame
//! counters, the datagram's size and quinn's bytes in flight.
//!
//! The in-flight frame is BDP's (after-ack, ack-eliciting, in flight, sent
//! by a client once plugin-control gives it a window), because the test
//! decides when it is due. test-bench's frame would do too, but test-bench
//! also writes `max-tx-data`, which would move the flow limits the test
//! leaves alone; DUMMY's is sent whenever none is in flight and toggles padding on
//! its own.

mod common;

use common::Pair;
use corequic_endpoint::testing::load_plugins;
use corequic_quinn::{AdapterExtension, Attachment, PluginFactory, QuinnPlugins};
use corequic_runtime::abi::PluginVal;
use quinn_proto::congestion::{Controller, ControllerFactory};
use quinn_proto::{Connection, ExtensionContext, TransportConfig};
use std::any::Any;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// quinn's datagram size (no MTU discovery).
const MTU: usize = 1200;
/// The BDP plugin's frame: at after-ack, ack-eliciting, in flight.
const BDP: u64 = 0xBD;
/// The BDP plugin's plugin-control: the window a client sends.
const BDP_SET_WINDOW: u64 = 0x80000;
/// The padding plugin's frame: at end, not ack-eliciting, not in flight.
const PADDING: u64 = 0x00;
/// The padding plugin's on/off plugin-control.
const PADDING_TOGGLE: u64 = 0x80001;
/// An open congestion window.
const OPEN: u64 = 1 << 20;
/// A window that every packet overflows (non-zero: quinn's pacer rejects 0).
const FULL: u64 = 1;

/// A congestion controller whose window is whatever the test stores.
#[derive(Clone)]
struct Knob(Arc<AtomicU64>);

impl Knob {
    fn set(&self, window: u64) {
        self.0.store(window, Ordering::SeqCst);
    }
}

impl Controller for Knob {
    fn on_congestion_event(&mut self, _: Instant, _: Instant, _: bool, _: u64) {}
    fn on_mtu_update(&mut self, _: u16) {}
    fn window(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(self.clone())
    }
    fn initial_window(&self) -> u64 {
        OPEN
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

impl ControllerFactory for Knob {
    fn build(self: Arc<Self>, _: Instant, _: u16) -> Box<dyn Controller> {
        Box::new((*self).clone())
    }
}

/// A window that starts open.
fn open_window() -> Knob {
    Knob(Arc::new(AtomicU64::new(OPEN)))
}

/// A transport with `plugins` attached and `knob` as its congestion window.
fn transport(plugins: &[&str], knob: &Knob) -> TransportConfig {
    let paths: Vec<_> = plugins
        .iter()
        .map(|p| corequic_endpoint::testing::plugin_path(p))
        .collect();
    let (runtime, plugins) = load_plugins(corequic_quinn::capabilities(), &paths);
    let mut t = common::transport();
    t.congestion_controller_factory(Arc::new(knob.clone()));
    t.extension_factory(Some(Arc::new(PluginFactory(Attachment::new(
        runtime, plugins,
    )))));
    t
}

/// Run `f` with a connection's plugins.
fn plugins<R>(
    conn: &mut Connection,
    now: Instant,
    f: impl FnOnce(&mut QuinnPlugins, &mut ExtensionContext<'_>) -> R,
) -> R {
    conn.with_extension(now, |ext, cx| {
        f(
            QuinnPlugins::from_any(ext.as_any_mut()).expect("corequic plugins"),
            cx,
        )
    })
    .expect("an extension")
}

/// Frames of `frame_type` the adapter has written so far.
fn sent(conn: &mut Connection, now: Instant, frame_type: u64) -> u64 {
    plugins(conn, now, |p, _| p.frame_counts(frame_type).sent)
}

fn bytes_in_flight(conn: &mut Connection, now: Instant) -> u64 {
    plugins(conn, now, |_, cx| cx.bytes_in_flight())
}

/// Exchange datagrams until neither side sends any more, at most `rounds`
/// times; returns whether they went quiet.
fn settle(p: &mut Pair, rounds: usize) -> bool {
    for _ in 0..rounds {
        let c = p.client_transmit(usize::MAX);
        let quiet_client = c.is_empty();
        p.deliver_to_server(c, None);
        let s = p.server_transmit(usize::MAX);
        if quiet_client && s.is_empty() {
            return true;
        }
        p.deliver_to_client(s, None);
    }
    false
}

fn control(conn: &mut Connection, now: Instant, id: u64, arg: PluginVal) -> Vec<PluginVal> {
    plugins(conn, now, |p, cx| p.plugin_control(cx, id, &[arg])).expect("plugin-control")
}

fn set_padding(conn: &mut Connection, now: Instant, on: bool) {
    let r = control(conn, now, PADDING_TOGGLE, PluginVal::Bool(on));
    assert_eq!(r, vec![PluginVal::Bool(on)]);
}

#[test]
fn an_ack_only_packet_under_a_full_window_is_padded_without_in_flight_frames() {
    let client_window = open_window();
    let server = transport(&["bdp"], &open_window());
    let client = transport(&["bdp", "padding"], &client_window);
    let mut p = Pair::new(client, server);
    let now = p.now;
    // Handshake with padding off, so that the client never halts (a halt
    // ends on a plugin timer, and time does not advance here).
    set_padding(p.client(), now, false);
    assert!(settle(&mut p, 100), "the handshake went quiet");
    assert!(!p.client().is_handshaking() && !p.server().is_handshaking());

    // Two server PINGs make an ACK due at the client: once with the window
    // open, so that the client's replies settle what the handshake left
    // (connection IDs), then with the window full.
    for window in [OPEN, FULL] {
        client_window.set(window);
        for _ in 0..2 {
            p.server().ping();
            let s = p.server_transmit(usize::MAX);
            assert!(!s.is_empty());
            p.deliver_to_client(s, None);
        }
        if window == OPEN {
            assert!(settle(&mut p, 100), "quiet again");
        }
    }
    // BDP now has an in-flight frame to send, and padding is on.
    let client = p.client();
    control(client, now, BDP_SET_WINDOW, PluginVal::U64(100_000));
    set_padding(client, now, true);
    let (bdp, padding) = (sent(client, now, BDP), sent(client, now, PADDING));
    let in_flight = bytes_in_flight(client, now);

    // The ACK goes, padded to the MTU, without BDP's frame, out of flight.
    let datagrams = p.client_transmit(usize::MAX);
    let client = p.client();
    assert_eq!(datagrams.len(), 1, "the ACK goes under a full window");
    assert_eq!(datagrams[0].len(), MTU, "padded");
    assert_eq!(sent(client, now, PADDING), padding + 1);
    assert_eq!(
        sent(client, now, BDP),
        bdp,
        "no in-flight frame in a packet let out because it is not in flight"
    );
    assert_eq!(bytes_in_flight(client, now), in_flight);

    // Control: once the window opens, BDP's frame goes (turning padding off
    // ends the halt that followed the padded packet).
    set_padding(client, now, false);
    client_window.set(OPEN);
    assert_eq!(p.client_transmit(1).len(), 1);
    let client = p.client();
    assert_eq!(sent(client, now, BDP), bdp + 1);
    assert!(bytes_in_flight(client, now) > in_flight);
}
