//! The userspace link emulator: a UDP relay on loopback between one client
//! and one server, with a one-way delay, a rate limit with a drop-tail
//! bottleneck queue (in bytes), seeded random loss and a maximum datagram
//! size, that records every datagram's direction, size and times.
//!
//! The model ([`LinkModel`]) is a pure function of arrival times, so it is
//! tested with synthetic timestamps; [`Relay`] drives it with real sockets.

use std::collections::VecDeque;
use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The shape of the emulated path, the same in both directions.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkParams {
    /// One-way propagation delay (the RTT is twice this).
    pub one_way_delay: Duration,
    /// Bottleneck rate in bits per second; `None` is unlimited.
    pub rate_bits_per_second: Option<u64>,
    /// Bottleneck queue capacity in bytes, including the datagram being
    /// serialized (drop-tail). Ignored without a rate.
    pub queue_bytes: u64,
    /// Probability that a datagram is dropped at random, 0.0 ..= 1.0.
    pub loss: f64,
    /// Largest UDP payload the path carries; larger datagrams are dropped
    /// (as a path MTU would), so MTU discovery settles on this size.
    pub max_datagram_size: usize,
    /// Seed of the loss generator (each direction derives its own stream).
    pub seed: u64,
    /// The ECN codepoint (the two low bits of the IP TOS or traffic class:
    /// 0b10 ECT(0), 0b01 ECT(1), 0b11 CE) of every datagram the relay
    /// forwards, as on a path whose senders all mark; `None`: Not-ECT.
    pub ecn_mark: Option<u8>,
}

impl LinkParams {
    /// The round-trip propagation delay.
    pub fn rtt(&self) -> Duration {
        self.one_way_delay * 2
    }

    /// A short description, e.g. `20 Mbit/s, 40 ms RTT, queue 100000 B, loss 0%`.
    pub fn describe(&self) -> String {
        let rate = match self.rate_bits_per_second {
            Some(r) => format!("{} Mbit/s", r as f64 / 1e6),
            None => "unlimited".into(),
        };
        format!(
            "{rate}, {} ms RTT, queue {} B, loss {}%, max datagram {} B",
            self.rtt().as_millis(),
            self.queue_bytes,
            self.loss * 100.0,
            self.max_datagram_size
        )
    }
}

/// Which way a datagram travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// From the client to the server.
    ClientToServer,
    /// From the server to the client.
    ServerToClient,
}

impl Direction {
    /// `c2s` or `s2c`.
    pub fn label(self) -> &'static str {
        match self {
            Direction::ClientToServer => "c2s",
            Direction::ServerToClient => "s2c",
        }
    }
}

/// Why a datagram was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// Larger than [`LinkParams::max_datagram_size`].
    TooLarge,
    /// Random loss.
    Loss,
    /// The bottleneck queue was full.
    QueueFull,
}

impl DropReason {
    /// `too-large`, `loss` or `queue-full`.
    pub fn label(self) -> &'static str {
        match self {
            DropReason::TooLarge => "too-large",
            DropReason::Loss => "loss",
            DropReason::QueueFull => "queue-full",
        }
    }
}

/// What the link does with one datagram; times are since the link started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// It leaves the bottleneck at `departs` and reaches the peer at `arrives`.
    Delivered {
        /// End of its serialization at the bottleneck.
        departs: Duration,
        /// `departs` plus the one-way delay.
        arrives: Duration,
    },
    /// It is dropped.
    Dropped(DropReason),
}

/// One datagram seen by the link: the trace the checks and plots work from.
#[derive(Debug, Clone, PartialEq)]
pub struct DatagramRecord {
    /// Its direction.
    pub direction: Direction,
    /// UDP payload size in bytes.
    pub size: usize,
    /// Whether it starts with a QUIC short header (a 1-RTT packet).
    pub short_header: bool,
    /// When the sender handed it to the link (time since the link started).
    pub sent: Duration,
    /// What happened to it.
    pub fate: Fate,
}

/// A small seeded generator (SplitMix64), so loss patterns are reproducible.
#[derive(Debug, Clone)]
pub struct SeededRng(u64);

impl SeededRng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> SeededRng {
        SeededRng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform number in [0, 1).
    pub fn next_unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// One direction of the emulated path: decides each datagram's fate from
/// its arrival time and size alone.
#[derive(Debug, Clone)]
pub struct LinkModel {
    params: LinkParams,
    /// When the bottleneck finishes serializing what it has accepted.
    busy_until: Duration,
    rng: SeededRng,
}

impl LinkModel {
    /// The model of one direction; `stream` separates the loss streams of
    /// the two directions that share a seed.
    pub fn new(params: LinkParams, stream: u64) -> LinkModel {
        let rng = SeededRng::new(params.seed ^ stream.wrapping_mul(0xD6E8_FEB8_6659_FD93));
        LinkModel {
            params,
            busy_until: Duration::ZERO,
            rng,
        }
    }

    /// Bytes waiting at the bottleneck at `now` (including the remainder of
    /// the datagram being serialized).
    pub fn backlog_bytes(&self, now: Duration) -> u64 {
        match self.params.rate_bits_per_second {
            Some(rate) => {
                let busy = self.busy_until.saturating_sub(now);
                (busy.as_secs_f64() * rate as f64 / 8.0).ceil() as u64
            }
            None => 0,
        }
    }

    /// The fate of a datagram of `size` bytes that arrives at `now`.
    /// Arrival times must not decrease.
    pub fn admit(&mut self, now: Duration, size: usize) -> Fate {
        if size > self.params.max_datagram_size {
            return Fate::Dropped(DropReason::TooLarge);
        }
        if self.params.loss > 0.0 && self.rng.next_unit() < self.params.loss {
            return Fate::Dropped(DropReason::Loss);
        }
        let departs = match self.params.rate_bits_per_second {
            Some(rate) => {
                if self.backlog_bytes(now) + size as u64 > self.params.queue_bytes {
                    return Fate::Dropped(DropReason::QueueFull);
                }
                let start = self.busy_until.max(now);
                let serialization = Duration::from_secs_f64(size as f64 * 8.0 / rate as f64);
                self.busy_until = start + serialization;
                self.busy_until
            }
            None => now,
        };
        Fate::Delivered {
            departs,
            arrives: departs + self.params.one_way_delay,
        }
    }
}

/// The recorded trace of a relay, shared with its threads.
type Trace = Arc<Mutex<Vec<DatagramRecord>>>;

/// A datagram waiting for its delivery time.
struct InFlight {
    deliver_at: Instant,
    payload: Vec<u8>,
}

/// A running relay: the client talks to [`Relay::client_facing_addr`], the
/// relay talks to the server from its own socket.
pub struct Relay {
    client_facing_addr: SocketAddr,
    stop: Arc<AtomicBool>,
    trace: Trace,
    threads: Vec<JoinHandle<()>>,
}

/// The relay's socket buffers, bytes (the kernel caps them at
/// `net.core.rmem_max` / `wmem_max`). An endpoint may send a whole window at
/// once (quiche does not pace): with a default buffer (about 200 kB) the
/// kernel would drop part of the burst before the relay reads it, a loss
/// outside the emulated link that the trace would not show.
const SOCKET_BUFFER: usize = 16 << 20;

fn relay_socket(addr: SocketAddr, ecn_mark: Option<u8>) -> std::io::Result<UdpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    // Best effort: a smaller kernel limit is not an error.
    let _ = socket.set_recv_buffer_size(SOCKET_BUFFER);
    let _ = socket.set_send_buffer_size(SOCKET_BUFFER);
    // Every datagram the socket sends carries the mark.
    if let Some(mark) = ecn_mark {
        let tos = u32::from(mark & 0b11);
        if addr.is_ipv4() {
            socket.set_tos_v4(tos)?;
        } else {
            socket.set_tclass_v6(tos)?;
        }
    }
    socket.bind(&addr.into())?;
    Ok(socket.into())
}

/// How often the receiving threads look at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(20);

impl Relay {
    /// Start a relay on loopback towards `server`.
    pub fn start(server: SocketAddr, params: LinkParams) -> std::io::Result<Relay> {
        let loopback: SocketAddr = if server.is_ipv4() {
            "127.0.0.1:0".parse().expect("literal")
        } else {
            "[::1]:0".parse().expect("literal")
        };
        let front = relay_socket(loopback, params.ecn_mark)?;
        let back = relay_socket(loopback, params.ecn_mark)?;
        back.connect(server)?;
        for s in [&front, &back] {
            s.set_read_timeout(Some(STOP_POLL))?;
        }
        let client_facing_addr = front.local_addr()?;
        let front = Arc::new(front);
        let back = Arc::new(back);
        let stop = Arc::new(AtomicBool::new(false));
        let trace: Trace = Arc::default();
        let epoch = Instant::now();
        let client_addr: Arc<Mutex<Option<SocketAddr>>> = Arc::default();

        let (to_server, to_server_queue) = mpsc::channel::<InFlight>();
        let (to_client, to_client_queue) = mpsc::channel::<InFlight>();
        let mut threads = Vec::new();

        // Client -> relay: learn the client's address, admit, queue.
        {
            let (front, stop, trace) = (front.clone(), stop.clone(), trace.clone());
            let client_addr = client_addr.clone();
            let mut model = LinkModel::new(params.clone(), 1);
            threads.push(std::thread::spawn(move || {
                receive_loop(
                    &stop,
                    |buf| {
                        let (len, from) = front.recv_from(buf)?;
                        *client_addr.lock().unwrap_or_else(|e| e.into_inner()) = Some(from);
                        Ok(len)
                    },
                    |payload| {
                        admit(
                            &mut model,
                            &trace,
                            epoch,
                            Direction::ClientToServer,
                            payload,
                            &to_server,
                        )
                    },
                );
            }));
        }
        // Server -> relay.
        {
            let (back, stop, trace) = (back.clone(), stop.clone(), trace.clone());
            let mut model = LinkModel::new(params, 2);
            threads.push(std::thread::spawn(move || {
                receive_loop(
                    &stop,
                    |buf| back.recv(buf),
                    |payload| {
                        admit(
                            &mut model,
                            &trace,
                            epoch,
                            Direction::ServerToClient,
                            payload,
                            &to_client,
                        )
                    },
                );
            }));
        }
        // Delivery threads: each direction's datagrams leave in admission
        // order, which is also the order of their delivery times.
        threads.push(std::thread::spawn(move || {
            deliver_loop(to_server_queue, |payload| {
                let _ = back.send(payload);
            })
        }));
        {
            let client_addr = client_addr.clone();
            threads.push(std::thread::spawn(move || {
                deliver_loop(to_client_queue, |payload| {
                    let addr = *client_addr.lock().unwrap_or_else(|e| e.into_inner());
                    if let Some(addr) = addr {
                        let _ = front.send_to(payload, addr);
                    }
                })
            }));
        }
        Ok(Relay {
            client_facing_addr,
            stop,
            trace,
            threads,
        })
    }

    /// Where the client should send.
    pub fn client_facing_addr(&self) -> SocketAddr {
        self.client_facing_addr
    }

    /// A copy of the trace so far.
    pub fn trace(&self) -> Vec<DatagramRecord> {
        self.trace.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Stop the relay (datagrams still in flight are dropped) and return
    /// the whole trace.
    pub fn stop(mut self) -> Vec<DatagramRecord> {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        self.trace()
    }
}

fn receive_loop(
    stop: &AtomicBool,
    mut receive: impl FnMut(&mut [u8]) -> std::io::Result<usize>,
    mut handle: impl FnMut(&[u8]) -> bool,
) {
    let mut buf = vec![0u8; 65536];
    while !stop.load(Ordering::SeqCst) {
        match receive(&mut buf) {
            Ok(len) => {
                if !handle(&buf[..len]) {
                    return;
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            // ICMP port unreachable from a peer that has gone is not fatal.
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => {}
            Err(_) => return,
        }
    }
}

/// Decide and record the fate of one datagram; false once the delivery
/// thread has gone.
fn admit(
    model: &mut LinkModel,
    trace: &Trace,
    epoch: Instant,
    direction: Direction,
    payload: &[u8],
    deliver: &mpsc::Sender<InFlight>,
) -> bool {
    let sent = epoch.elapsed();
    let fate = model.admit(sent, payload.len());
    trace
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(DatagramRecord {
            direction,
            size: payload.len(),
            short_header: payload.first().is_some_and(|b| b & 0x80 == 0),
            sent,
            fate,
        });
    match fate {
        Fate::Delivered { arrives, .. } => deliver
            .send(InFlight {
                deliver_at: epoch + arrives,
                payload: payload.to_vec(),
            })
            .is_ok(),
        Fate::Dropped(_) => true,
    }
}

fn deliver_loop(queue: mpsc::Receiver<InFlight>, mut send: impl FnMut(&[u8])) {
    let mut pending: VecDeque<InFlight> = VecDeque::new();
    // The channel closes when the receiving thread stops.
    while let Ok(first) = queue.recv() {
        pending.push_back(first);
        while let Some(next) = pending.pop_front() {
            // Waiting for a datagram's delivery time is the emulated delay
            // itself, not a synchronization.
            let now = Instant::now();
            if next.deliver_at > now {
                std::thread::sleep(next.deliver_at - now);
            }
            send(&next.payload);
            pending.extend(queue.try_iter());
        }
    }
}

/// The trace as CSV (`direction,size,short_header,sent_us,fate,departs_us,arrives_us`).
pub fn trace_csv(trace: &[DatagramRecord]) -> String {
    let mut out = String::from("direction,size,short_header,sent_us,fate,departs_us,arrives_us\n");
    for r in trace {
        let (fate, departs, arrives) = match r.fate {
            Fate::Delivered { departs, arrives } => (
                "delivered",
                departs.as_micros().to_string(),
                arrives.as_micros().to_string(),
            ),
            Fate::Dropped(reason) => (reason.label(), String::new(), String::new()),
        };
        out.push_str(&format!(
            "{},{},{},{},{fate},{departs},{arrives}\n",
            r.direction.label(),
            r.size,
            r.short_header,
            r.sent.as_micros()
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> LinkParams {
        LinkParams {
            one_way_delay: Duration::from_millis(20),
            rate_bits_per_second: Some(8_000_000), // 1 byte per µs
            queue_bytes: 10_000,
            loss: 0.0,
            max_datagram_size: 1500,
            seed: 7,
            ecn_mark: None,
        }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_lone_datagram_is_delayed_by_serialization_plus_the_one_way_delay() {
        let mut link = LinkModel::new(params(), 1);
        let fate = link.admit(ms(5), 1000);
        // 1000 bytes at 1 byte/µs take 1 ms.
        assert_eq!(
            fate,
            Fate::Delivered {
                departs: ms(6),
                arrives: ms(26)
            }
        );
    }

    #[test]
    fn a_burst_leaves_at_the_bottleneck_rate() {
        let mut link = LinkModel::new(params(), 1);
        let departures: Vec<Duration> = (0..8)
            .map(|_| match link.admit(ms(0), 1000) {
                Fate::Delivered { departs, .. } => departs,
                other => panic!("{other:?}"),
            })
            .collect();
        for (i, d) in departures.iter().enumerate() {
            assert_eq!(*d, ms(i as u64 + 1), "datagram {i}");
        }
        // An idle link starts again from the arrival time.
        assert_eq!(
            link.admit(ms(100), 500),
            Fate::Delivered {
                departs: Duration::from_micros(100_500),
                arrives: Duration::from_micros(120_500)
            }
        );
    }

    #[test]
    fn a_full_queue_drops_the_tail() {
        let mut link = LinkModel::new(params(), 1);
        let fates: Vec<Fate> = (0..30).map(|_| link.admit(ms(0), 1000)).collect();
        let delivered = fates
            .iter()
            .filter(|f| matches!(f, Fate::Delivered { .. }))
            .count();
        // 10 000 bytes of queue hold ten 1000-byte datagrams.
        assert_eq!(delivered, 10);
        assert!(
            fates[10..]
                .iter()
                .all(|f| *f == Fate::Dropped(DropReason::QueueFull))
        );
        assert_eq!(link.backlog_bytes(ms(0)), 10_000);
        // Once 3 ms have drained, three more fit, and no fourth.
        assert_eq!(link.backlog_bytes(ms(3)), 7_000);
        let later: Vec<bool> = (0..4)
            .map(|_| matches!(link.admit(ms(3), 1000), Fate::Delivered { .. }))
            .collect();
        assert_eq!(later, [true, true, true, false]);
    }

    #[test]
    fn random_loss_matches_the_rate_and_the_seed() {
        let lossy = LinkParams {
            loss: 0.1,
            rate_bits_per_second: None,
            ..params()
        };
        let run = |seed: u64| -> Vec<bool> {
            let mut link = LinkModel::new(
                LinkParams {
                    seed,
                    ..lossy.clone()
                },
                1,
            );
            (0..20_000)
                .map(|i| {
                    link.admit(Duration::from_micros(i), 100) == Fate::Dropped(DropReason::Loss)
                })
                .collect()
        };
        let a = run(1);
        let lost = a.iter().filter(|l| **l).count();
        // Binomial(20 000, 0.1): mean 2000, sd 42; ±5 sd.
        assert!((1790..=2210).contains(&lost), "{lost} lost");
        assert_eq!(a, run(1), "same seed, same losses");
        assert_ne!(a, run(2), "another seed, other losses");
        // The two directions of one link draw different streams.
        let mut up = LinkModel::new(lossy.clone(), 1);
        let mut down = LinkModel::new(lossy, 2);
        let (u, d): (Vec<Fate>, Vec<Fate>) = (0..200)
            .map(|_| (up.admit(ms(0), 10), down.admit(ms(0), 10)))
            .unzip();
        assert_ne!(u, d);
    }

    #[test]
    fn datagrams_above_the_path_size_are_dropped() {
        let mut link = LinkModel::new(params(), 1);
        assert_eq!(link.admit(ms(0), 1501), Fate::Dropped(DropReason::TooLarge));
        assert!(matches!(link.admit(ms(0), 1500), Fate::Delivered { .. }));
    }

    #[test]
    fn the_relay_delays_drops_and_records_real_datagrams() {
        let server = UdpSocket::bind("127.0.0.1:0").expect("bind");
        // 800 kbit/s: a datagram of 1,000 bytes takes 10 ms to leave the
        // queue, so the burst below fills it even when the relay's thread
        // is scheduled late on a loaded machine (at 8 Mbit/s a stall of
        // 1 ms let a sixth datagram in).
        let link = LinkParams {
            one_way_delay: ms(30),
            rate_bits_per_second: Some(800_000),
            queue_bytes: 5_000,
            loss: 0.0,
            max_datagram_size: 1200,
            seed: 1,
            ecn_mark: None,
        };
        let relay = Relay::start(server.local_addr().expect("addr"), link).expect("relay");
        let client = UdpSocket::bind("127.0.0.1:0").expect("bind");
        client.connect(relay.client_facing_addr()).expect("connect");

        // A burst of 10 x 1000 bytes: 5 fit the 5000-byte queue.
        let sent_at = Instant::now();
        for i in 0..10u8 {
            client.send(&[i & 0x7f; 1000]).expect("send");
        }
        client.send(&[0u8; 1300]).expect("send"); // above the path size
        let mut buf = [0u8; 2000];
        let mut arrivals = Vec::new();
        let mut relay_addr = None;
        for _ in 0..5 {
            let (len, from) = server.recv_from(&mut buf).expect("delivered datagram");
            arrivals.push((Instant::now(), len, buf[0]));
            relay_addr = Some(from);
        }
        // Each delivered datagram reached the server no earlier than the
        // one-way delay after it was sent, in order.
        for (i, (at, len, first)) in arrivals.iter().enumerate() {
            assert!(at.duration_since(sent_at) >= ms(30), "datagram {i}");
            assert_eq!((*len, *first), (1000, i as u8));
        }
        // The reverse direction: the server answers to the relay, which
        // forwards to the client.
        server
            .send_to(b"x", relay_addr.expect("the relay's server-facing address"))
            .expect("send");
        let len = client.recv(&mut buf).expect("reply");
        assert_eq!(&buf[..len], b"x");

        let trace = relay.stop();
        let c2s: Vec<&DatagramRecord> = trace
            .iter()
            .filter(|r| r.direction == Direction::ClientToServer)
            .collect();
        assert_eq!(c2s.len(), 11);
        let queue_drops = c2s
            .iter()
            .filter(|r| r.fate == Fate::Dropped(DropReason::QueueFull))
            .count();
        assert_eq!(queue_drops, 5);
        assert_eq!(c2s[10].fate, Fate::Dropped(DropReason::TooLarge));
        let s2c: Vec<&DatagramRecord> = trace
            .iter()
            .filter(|r| r.direction == Direction::ServerToClient)
            .collect();
        assert_eq!(s2c.len(), 1);
        assert_eq!(s2c[0].size, 1);
        let csv = trace_csv(&trace);
        assert_eq!(csv.lines().count(), 13);
        assert!(csv.contains("c2s,1300,true,"));
    }
}
