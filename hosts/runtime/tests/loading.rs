//! Loading, two-phase enabling, and what a plugin set promises its stack.

mod common;

use common::*;
use corequic_mock::{FRAME_ENCODING_ERROR, HEADER_LEN, TAG_LEN};
use corequic_runtime::abi::{ExtFrame, FieldId, FrameOutcome, PluginVal, SendPosition};
use corequic_runtime::{Grants, LoadError, Plugin, PluginSet, RoutineError, Runtime};

/// Stacks move connections between threads (quinn, s2n-quic).
#[test]
fn plugin_sets_can_move_between_threads() {
    // Stacks such as quinn move connections across tasks and threads.
    fn send<T: Send>() {}
    fn send_sync<T: Send + Sync>() {}
    send::<PluginSet>();
    send_sync::<Plugin>();
    send_sync::<Runtime>();
}

/// CQ-LOAD-1, CQ-LOAD-13.
#[test]
fn a_plugin_is_compiled_once_and_attached_to_many_connections() {
    let dummy = plugin("dummy");
    let mut pairs: Vec<_> = (0..20).map(|_| pair(&["dummy"], &["dummy"])).collect();
    for p in &mut pairs {
        p.handshake();
        assert!(p.client.plugins.is_enabled("dummy"));
    }
    // Every connection has its own instance: state does not leak between them.
    assert!(
        pairs[0].run_until(2_000 * MS, |p| p.client.plugin_frames_acked.get(&0x42)
            >= Some(&3))
    );
    assert_eq!(pairs[1].client.plugin_frames_sent.get(&0x42), None);
    assert_eq!(dummy.name(), "dummy");
}

/// CQ-LOAD-16, CQ-LOAD-17.
#[test]
fn frames_are_offered_and_accepted_only_once_the_plugin_is_enabled() {
    let mut p = pair(&["dummy"], &["dummy"]);
    assert!(
        !p.server.plugins.parses_frame_type(0x42),
        "not before negotiation"
    );
    assert_eq!(
        p.server
            .plugins
            .registrations(SendPosition::AfterAck)
            .count(),
        0
    );
    p.handshake();
    assert!(p.server.plugins.parses_frame_type(0x42));
    assert_eq!(
        p.server
            .plugins
            .registrations(SendPosition::AfterAck)
            .count(),
        1
    );
}

/// CQ-LOAD-19.
#[test]
fn a_plugin_whose_peer_lacks_it_stays_disabled_and_the_connection_works() {
    let mut p = pair(&["dummy"], &[]);
    p.handshake();
    assert!(!p.client.plugins.is_enabled("dummy"));
    assert!(p.transfer(30_000, 10_000 * MS));
    assert_eq!(p.client.plugin_frames_sent.get(&0x42), None);
}

/// CQ-LOAD-20 (no negotiation: enable from init).
#[test]
fn padding_alone_on_one_side_works() {
    let mut p = pair(&["padding"], &[]);
    p.handshake();
    assert!(
        p.client.plugins.is_enabled("padding"),
        "no negotiation needed"
    );
    assert!(p.transfer(30_000, 10_000 * MS));
    assert!(p.client.datagrams.iter().all(|d| d.size as u64 == MTU));
}

/// CQ-LOAD-17, CQ-RECV-1.
#[test]
fn an_unknown_frame_type_closes_with_frame_encoding_error() {
    let mut p = pair(&[], &["dummy"]);
    p.handshake();
    // A DUMMY frame (0x42) to a server whose DUMMY plugin never enabled.
    let mut datagram = vec![0x40, 0, 0, 0, 1, 0x40, 0x42, 7];
    datagram.extend([0; TAG_LEN]);
    assert_eq!(datagram.len(), HEADER_LEN + 3 + TAG_LEN);
    p.server.recv(&datagram);
    let closed = p.server.closed.clone().expect("closed");
    assert_eq!(closed.error_code, FRAME_ENCODING_ERROR);
    assert!(closed.reason.contains("0x42"), "{}", closed.reason);
}

/// CQ-PERM-3.
#[test]
fn grants_and_manifest_bound_what_a_plugin_may_touch() {
    // The BDP plugin declares only these; a grant of everything does not
    // widen what it may do at run time.
    let bdp = plugin("bdp");
    let m = bdp.manifest();
    assert_eq!(m.reads, vec![FieldId::IsServer]);
    assert_eq!(m.writes, vec![FieldId::CongestionWindow, FieldId::Ssthresh]);
    assert_eq!(m.abi_version, corequic_runtime::abi::ABI_VERSION);
}

/// CQ-LOAD-2.
#[test]
fn a_file_that_is_not_a_plugin_is_refused_with_a_clear_error() {
    let err = runtime().load_bytes("garbage.wasm", b"\0asm garbage", &Grants::all());
    match err {
        Err(LoadError::Compile { plugin, message }) => {
            assert_eq!(plugin, "garbage.wasm");
            assert!(!message.is_empty());
        }
        other => panic!("expected a compile error, got {other:?}"),
    }
    let missing = runtime().load_file("no/such/plugin.wasm".as_ref(), &Grants::all());
    assert!(matches!(missing, Err(LoadError::Compile { .. })));
}

/// CQ-LOAD-16, CQ-CTRL-4.
#[test]
fn plugin_control_runs_before_the_plugin_is_enabled() {
    let mut p = pair(&["bdp"], &["bdp"]);
    assert!(!p.client.plugins.is_enabled("bdp"));
    let r = p
        .client
        .plugins
        .plugin_control(&mut p.client.conn, 0x80000, &[PluginVal::U64(50_000)]);
    assert_eq!(r, Ok(vec![]));
}

/// CQ-LOAD-1 (compile once per process; optional disk cache).
#[test]
fn precompiled_artifacts_are_cached_on_disk_and_rebuilt_when_bad() {
    use corequic_runtime::{HostCapabilities, RuntimeConfig};
    let dir = std::env::temp_dir().join(format!("corequic-cache-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let config = RuntimeConfig {
        pooling: false,
        cache_dir: Some(dir.clone()),
        ..Default::default()
    };
    let rt = Runtime::new(config, HostCapabilities::full()).expect("runtime");
    let load = || {
        rt.load_file(&plugin_path("probe"), &Grants::all())
            .expect("load")
    };

    load();
    let mut names = entry_names(&dir);
    names.sort();
    assert_eq!(names.len(), 2, "one artifact and its meta file: {names:?}");
    let (artifact, meta) = (dir.join(&names[0]), dir.join(&names[1]));
    assert!(
        names[0].ends_with(".cwasm") && names[1].ends_with(".meta"),
        "{names:?}"
    );
    let mtime = |p: &std::path::Path| {
        std::fs::metadata(p)
            .and_then(|m| m.modified())
            .expect("mtime")
    };
    let written = (mtime(&artifact), mtime(&meta));

    // A second load maps the artifact and takes the manifest from the meta
    // file instead of compiling and writing.
    let probe = load();
    assert_eq!(
        written,
        (mtime(&artifact), mtime(&meta)),
        "the entry was reused, not rewritten"
    );
    assert_eq!(probe.name(), "probe", "the cached manifest");
    let mut conn = corequic_mock::MockPair::new(&rt, &[], &[], MTU, MS)
        .expect("pair")
        .client
        .conn;
    let mut works = |probe| {
        let mut set = rt.connection(&[probe]).expect("attach");
        set.init(&mut conn);
        assert_eq!(
            set.plugin_control(&mut conn, 2, &[]),
            Ok(vec![PluginVal::None])
        );
    };
    works(probe);

    // A corrupt entry is ignored and replaced: an artifact that is not one
    // at all, and one with a single byte of its compiled code flipped, which
    // only the meta file's checksum reveals (deserializing it would run it).
    std::fs::write(&artifact, b"not an artifact").expect("corrupt");
    load();
    assert!(
        std::fs::metadata(&artifact).expect("artifact").len() > 100,
        "rewritten"
    );
    let mut flipped = std::fs::read(&artifact).expect("entry");
    let middle = flipped.len() / 2;
    flipped[middle] ^= 0x55;
    std::fs::write(&artifact, &flipped).expect("corrupt");
    let probe = load();
    assert_ne!(
        std::fs::read(&artifact).expect("entry"),
        flipped,
        "the corrupt entry was compiled again and replaced"
    );
    works(probe);

    // A meta file that is garbage, or whose manifest is damaged, is
    // replaced too; the plugin is asked for its manifest again.
    std::fs::write(&meta, b"cqcache4 but nothing else").expect("corrupt");
    let probe = load();
    assert_eq!(probe.name(), "probe");
    let mut damaged = std::fs::read(&meta).expect("meta");
    assert!(damaged.len() > 40, "rewritten with the manifest");
    *damaged.last_mut().expect("bytes") ^= 1;
    std::fs::write(&meta, &damaged).expect("corrupt");
    let probe = load();
    assert_eq!(probe.name(), "probe");
    assert_ne!(std::fs::read(&meta).expect("meta"), damaged, "rewritten");
    works(probe);

    // Files are written to a temporary file and renamed: none is left.
    assert_eq!(entry_names(&dir).len(), 2, "{:?}", entry_names(&dir));
    let _ = std::fs::remove_dir_all(&dir);
}

fn entry_names(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .expect("cache dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// CQ-API-16: a plugin can stop being asked about a frame it has no use for.
/// What the set offers to hosts before each packet (`offers_frames_at`,
/// `offers_ack_eliciting_frames`) follows the registrations.
#[test]
fn a_frame_in_flight_is_unregistered_until_acknowledged() {
    let offered = |set: &PluginSet| {
        // The shared reader the adapters read without locking agrees.
        let reader = set.summary_reader();
        for at in [
            SendPosition::First,
            SendPosition::AfterAck,
            SendPosition::End,
        ] {
            assert_eq!(reader.offers_frames_at(at), set.offers_frames_at(at));
        }
        assert_eq!(
            reader.offers_ack_eliciting_frames(),
            set.offers_ack_eliciting_frames()
        );
        assert_eq!(reader.next_timeout(), set.next_timeout());
        (
            set.registrations(SendPosition::AfterAck).count(),
            set.offers_frames_at(SendPosition::AfterAck),
            set.offers_ack_eliciting_frames(),
        )
    };
    let mut p = pair(&["dummy"], &["dummy"]);
    p.handshake();
    assert_eq!(offered(&p.client.plugins), (1, true, true));
    assert!(!p.client.plugins.offers_frames_at(SendPosition::First));
    assert!(!p.client.plugins.offers_frames_at(SendPosition::End));
    assert!(p.client.poll_transmit().is_some(), "a DUMMY packet");
    assert_eq!(p.client.plugin_frames_sent.get(&0x42), Some(&1));
    assert_eq!(
        offered(&p.client.plugins),
        (0, false, false),
        "not offered while in flight"
    );
    // That datagram never reached the link (the test took it), so the frame
    // is declared lost; then it is registered again and the next DUMMY follows.
    assert!(
        p.run_until(1_000 * MS, |p| p.client.plugin_frames_sent.get(&0x42)
            >= Some(&2))
    );
    assert_eq!(p.client.plugin_frames_lost.get(&0x42), Some(&1));
    assert_eq!(p.client.max_in_flight_by_type.get(&0x42), Some(&1));
    // At every step of an exchange in which DUMMY frames are acknowledged
    // and registered again, what is offered is what is registered.
    p.run_until(p.now + 1_000 * MS, |p| {
        let (registered, at, ack_eliciting) = offered(&p.client.plugins);
        assert_eq!((at, ack_eliciting), (registered == 1, registered == 1));
        false
    });
    assert!(p.client.plugin_frames_acked.contains_key(&0x42));
}

/// A registration made in a routine call (`notify-frame` of DUMMY as built
/// against 0.2.0, which registers its frame again there) is offered to the
/// host right after the call.
#[test]
fn a_frame_registered_again_is_offered_again() {
    let mut p = pair_in(Some("0.2.0"), &["dummy"], &["dummy"]);
    p.handshake();
    assert!(p.client.poll_transmit().is_some(), "a DUMMY packet");
    assert!(!p.client.plugins.offers_frames_at(SendPosition::AfterAck));
    let client = &mut p.client;
    client
        .plugins
        .notify_frame(&mut client.conn, DUMMY_FRAME, FrameOutcome::Acked)
        .expect("notify-frame");
    assert!(client.plugins.offers_frames_at(SendPosition::AfterAck));
    assert!(client.plugins.offers_ack_eliciting_frames());
}

/// A registration held while its frame is in flight (DUMMY's,
/// `register-frame-one-in-flight`, ABI 0.2.5) is offered to the host again
/// when the frame's fate is known, though DUMMY binds no `notify-frame`
/// (CQ-API-22).
#[test]
fn a_held_frame_registration_is_offered_again_without_notify_frame() {
    let mut p = pair(&["dummy"], &["dummy"]);
    p.handshake();
    assert!(p.client.poll_transmit().is_some(), "a DUMMY packet");
    assert!(!p.client.plugins.offers_frames_at(SendPosition::AfterAck));
    let client = &mut p.client;
    let notified = client
        .plugins
        .notify_frame(&mut client.conn, DUMMY_FRAME, FrameOutcome::Lost);
    assert!(
        matches!(notified, Err(RoutineError::NotBound)),
        "{notified:?}"
    );
    assert!(client.plugins.offers_frames_at(SendPosition::AfterAck));
    assert!(client.plugins.offers_ack_eliciting_frames());
}

/// A DUMMY frame, as the host reports its fate.
const DUMMY_FRAME: ExtFrame = ExtFrame {
    frame_type: 0x42,
    tag: 0,
};
