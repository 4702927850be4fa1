//! Datagram I/O with quinn-udp for the endpoints that drive a sans-IO
//! stack themselves (quiche, neqo): reads that take a GRO batch of several
//! datagrams at once, and sends that put several in one system call.
//!
//! Those stacks take and hand out one datagram at a time. With one system
//! call per datagram, the kernel's UDP path cost a loopback transfer close
//! to half of each endpoint's CPU, so the endpoints measured their socket
//! loop more than their stack (quinn and s2n-quic read with GRO and send
//! with GSO, generic segmentation offload). A [`SendBatch`] collects
//! consecutive datagrams that can go out in one GSO system call: the same
//! destination and ECN codepoint, and every datagram but the last one as
//! long as the first. The peer, or the kernel on its behalf, receives the
//! same datagrams as if they had been sent one by one.

pub use quinn_udp::{EcnCodepoint, RecvMeta};
use quinn_udp::{Transmit, UdpSocketState};
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use tokio::net::UdpSocket;

/// A UDP socket read and written through quinn-udp: reads take GRO
/// batches (split them with [`datagrams`]), sends take a [`SendBatch`].
#[derive(Debug)]
pub struct Socket {
    io: UdpSocket,
    state: UdpSocketState,
}

impl Socket {
    /// A socket bound to `addr`, with the buffers of [`crate::bind_udp`].
    pub fn bind(addr: SocketAddr) -> Result<Socket, String> {
        Socket::new(crate::bind_tokio_udp(addr)?)
    }

    /// Read and write `io` through quinn-udp. It turns GRO and the ECN
    /// codepoint of received datagrams on, so every read of the socket must
    /// go through [`Socket::recv`] or [`Socket::try_recv`] from then on.
    pub fn new(io: UdpSocket) -> Result<Socket, String> {
        let state = UdpSocketState::new((&io).into()).map_err(|e| format!("socket: {e}"))?;
        Ok(Socket { io, state })
    }

    /// The address the socket is bound to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.local_addr()
    }

    /// Read one datagram, or a GRO batch of several from one sender, into
    /// `buf`. Cancel-safe: a read either happened or did not.
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<RecvMeta> {
        loop {
            self.io.readable().await?;
            if let Some(meta) = self.try_recv(buf)? {
                return Ok(meta);
            }
        }
    }

    /// [`Socket::recv`] without waiting: `None` when nothing is queued.
    pub fn try_recv(&self, buf: &mut [u8]) -> io::Result<Option<RecvMeta>> {
        let mut meta = [RecvMeta::default()];
        let mut bufs = [IoSliceMut::new(buf)];
        match self.io.try_io(tokio::io::Interest::READABLE, || {
            self.state.recv((&self.io).into(), &mut bufs, &mut meta)
        }) {
            Ok(n) if n > 0 => Ok(Some(meta[0])),
            // A spurious wake-up.
            Ok(_) => Ok(None),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Send the datagrams of `batch` in one system call and empty it. A
    /// send the kernel refuses (other than for a full socket buffer, which
    /// is waited out) loses the datagrams, as a link would: QUIC recovers
    /// them, and quinn-udp turns GSO off on the socket if the kernel cannot
    /// do it.
    pub async fn send(&self, batch: &mut SendBatch) -> io::Result<()> {
        if let Some(transmit) = batch.transmit() {
            loop {
                self.io.writable().await?;
                match self.io.try_io(tokio::io::Interest::WRITABLE, || {
                    self.state.send((&self.io).into(), &transmit)
                }) {
                    Ok(()) => break,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e),
                }
            }
        }
        batch.clear();
        Ok(())
    }

    /// Add `datagram` to `batch`, sending the batch first when the datagram
    /// cannot join it (see [`SendBatch::push`]). Send what is left with
    /// [`Socket::send`] once the stack has nothing more to send.
    pub async fn queue(
        &self,
        batch: &mut SendBatch,
        destination: SocketAddr,
        ecn: Option<EcnCodepoint>,
        datagram: &[u8],
    ) -> io::Result<()> {
        let max_segments = self.state.max_gso_segments();
        if !batch.push(destination, ecn, datagram, max_segments) {
            self.send(batch).await?;
            // An empty batch takes any datagram.
            batch.push(destination, ecn, datagram, max_segments);
        }
        Ok(())
    }
}

/// The datagrams of one read into `buf`: with GRO, `meta.stride` bytes each,
/// the last maybe shorter; without, one of `meta.len` bytes.
pub fn datagrams<'a>(buf: &'a mut [u8], meta: &RecvMeta) -> std::slice::ChunksMut<'a, u8> {
    let stride = match meta.stride {
        0 => meta.len,
        stride => stride,
    };
    let len = meta.len.min(buf.len());
    buf[..len].chunks_mut(stride.max(1))
}

/// The most payload bytes one batch carries. A GSO send hands the kernel one
/// UDP datagram: over IPv4 its 16-bit total length covers the 20-byte IP
/// and 8-byte UDP headers too (IPv6 allows 20 bytes more). A larger batch is
/// refused with `EMSGSIZE`, which quinn-udp takes for a lost probe.
pub const MAX_BATCH_BYTES: usize = 65_507;

/// Datagrams to one destination, to be sent with one system call.
#[derive(Debug, Default)]
pub struct SendBatch {
    contents: Vec<u8>,
    /// Where the batch goes: `None` exactly while it is empty.
    destination: Option<SocketAddr>,
    ecn: Option<EcnCodepoint>,
    /// The length of the first datagram: the segment size.
    segment_size: usize,
    segments: usize,
}

impl SendBatch {
    /// An empty batch.
    pub fn new() -> SendBatch {
        SendBatch::default()
    }

    /// Whether the batch holds no datagram.
    pub fn is_empty(&self) -> bool {
        self.segments == 0
    }

    /// How many datagrams the batch holds.
    pub fn len(&self) -> usize {
        self.segments
    }

    /// Append `datagram`, to be sent to `destination` with `ecn`, if it can
    /// go out in the same system call as the datagrams already in the batch:
    /// same destination and ECN codepoint, no longer than the first, after a
    /// datagram as long as the first (a shorter one ends the batch), within
    /// `max_segments` datagrams (the socket's GSO limit, 1 without GSO) and
    /// [`MAX_BATCH_BYTES`]. Returns `false`, with the batch unchanged, when
    /// it cannot; an empty batch takes any datagram.
    pub fn push(
        &mut self,
        destination: SocketAddr,
        ecn: Option<EcnCodepoint>,
        datagram: &[u8],
        max_segments: usize,
    ) -> bool {
        if self.segments == 0 {
            // Empty since `new` or `clear`.
            self.contents.extend_from_slice(datagram);
            self.destination = Some(destination);
            self.ecn = ecn;
            self.segment_size = datagram.len();
            self.segments = 1;
            return true;
        }
        let joins = self.destination == Some(destination)
            && self.ecn == ecn
            && self.segment_size > 0
            && datagram.len() <= self.segment_size
            && self.contents.len() == self.segments * self.segment_size
            && self.segments < max_segments
            && self.contents.len() + datagram.len() <= MAX_BATCH_BYTES;
        if joins {
            self.contents.extend_from_slice(datagram);
            self.segments += 1;
        }
        joins
    }

    /// The batch as one send: `None` when it is empty.
    fn transmit(&self) -> Option<Transmit<'_>> {
        Some(Transmit {
            destination: self.destination?,
            ecn: self.ecn,
            contents: &self.contents,
            segment_size: (self.segments > 1).then_some(self.segment_size),
            src_ip: None,
        })
    }

    /// Empty the batch, keeping its buffer.
    pub fn clear(&mut self) {
        self.contents.clear();
        self.destination = None;
        self.segments = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PEER: &str = "127.0.0.1:4433";
    const OTHER: &str = "127.0.0.1:4434";

    fn addr(a: &str) -> SocketAddr {
        a.parse().expect("address")
    }

    /// Push datagrams of these lengths to `PEER`; the pushes' results.
    fn push_all(batch: &mut SendBatch, lens: &[usize], max_segments: usize) -> Vec<bool> {
        lens.iter()
            .enumerate()
            .map(|(i, &len)| batch.push(addr(PEER), None, &vec![i as u8; len], max_segments))
            .collect()
    }

    #[test]
    fn datagrams_of_one_size_go_in_one_send_in_order() {
        let mut batch = SendBatch::new();
        assert!(batch.transmit().is_none());
        assert_eq!(push_all(&mut batch, &[1200, 1200, 1200], 64), [true; 3]);
        let t = batch.transmit().expect("a send");
        assert_eq!(t.destination, addr(PEER));
        assert_eq!(t.segment_size, Some(1200));
        assert_eq!(t.contents.len(), 3600);
        assert_eq!(&t.contents[1200..1203], &[1, 1, 1]);
        assert_eq!(t.contents[3599], 2);
    }

    #[test]
    fn a_single_datagram_is_sent_without_a_segment_size() {
        let mut batch = SendBatch::new();
        assert!(batch.push(addr(PEER), Some(EcnCodepoint::Ect0), &[7; 40], 64));
        let t = batch.transmit().expect("a send");
        assert_eq!(t.segment_size, None);
        assert_eq!(t.ecn, Some(EcnCodepoint::Ect0));
        assert_eq!(t.contents, &[7; 40][..]);
    }

    #[test]
    fn a_shorter_datagram_ends_the_batch_and_a_longer_one_starts_the_next() {
        let mut batch = SendBatch::new();
        assert_eq!(
            push_all(&mut batch, &[1200, 1000, 1000], 64),
            [true, true, false]
        );
        batch.clear();
        assert_eq!(push_all(&mut batch, &[1000, 1200], 64), [true, false]);
        assert_eq!(batch.len(), 1);
    }

    #[test]
    fn another_destination_or_ecn_codepoint_needs_another_send() {
        let mut batch = SendBatch::new();
        assert!(batch.push(addr(PEER), None, &[0; 1200], 64));
        assert!(!batch.push(addr(OTHER), None, &[0; 1200], 64));
        assert!(!batch.push(addr(PEER), Some(EcnCodepoint::Ect0), &[0; 1200], 64));
        assert!(batch.push(addr(PEER), None, &[0; 1200], 64));
        assert_eq!(batch.len(), 2);
    }

    #[test]
    fn a_batch_stays_within_the_gso_segments_and_the_udp_length() {
        let mut batch = SendBatch::new();
        // Without GSO, every datagram is its own send.
        assert_eq!(push_all(&mut batch, &[1200, 1200], 1), [true, false]);
        batch.clear();
        assert_eq!(
            push_all(&mut batch, &[1200; 5], 4),
            [true, true, true, true, false]
        );
        batch.clear();
        let fits = MAX_BATCH_BYTES / 1500;
        let pushed = push_all(&mut batch, &vec![1500; fits + 1], 1000);
        assert_eq!(pushed.iter().filter(|&&p| p).count(), fits);
        assert!(!pushed[fits]);
        assert!(batch.transmit().expect("a send").contents.len() <= MAX_BATCH_BYTES);
    }

    #[test]
    fn a_cleared_batch_sends_nothing_and_takes_any_datagram() {
        let mut batch = SendBatch::new();
        push_all(&mut batch, &[1200, 1200], 64);
        batch.clear();
        assert!(batch.is_empty());
        assert!(batch.transmit().is_none());
        assert!(batch.push(addr(OTHER), None, &[1; 2000], 64));
        let t = batch.transmit().expect("a send");
        assert_eq!((t.destination, t.contents.len()), (addr(OTHER), 2000));
    }

    #[test]
    fn empty_datagrams_are_never_batched() {
        let mut batch = SendBatch::new();
        assert!(batch.push(addr(PEER), None, &[], 64));
        assert!(!batch.push(addr(PEER), None, &[], 64));
    }

    /// Queue datagrams of `lens` bytes (datagram `i` filled with `i`) on a
    /// loopback `Socket` to a plain socket without GRO, send what is left,
    /// and return what arrives: (length, first byte) per datagram.
    async fn send_to_a_plain_socket(lens: &[usize]) -> Vec<(usize, u8)> {
        let receiver = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        receiver
            .set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .expect("timeout");
        let to = receiver.local_addr().expect("address");
        let sender = Socket::bind(addr("127.0.0.1:0")).expect("bind");
        let mut batch = SendBatch::new();
        for (i, &len) in lens.iter().enumerate() {
            sender
                .queue(&mut batch, to, None, &vec![i as u8; len])
                .await
                .expect("queue");
        }
        sender.send(&mut batch).await.expect("send");
        assert!(batch.is_empty());
        let mut buf = [0u8; 2048];
        lens.iter()
            .map(|_| {
                let n = receiver.recv(&mut buf).expect("every datagram arrives");
                assert!(buf[..n].iter().all(|&b| b == buf[0]), "a datagram intact");
                (n, buf[0])
            })
            .collect()
    }

    /// Three datagrams queued on a loopback socket arrive as three
    /// datagrams, whether the kernel did GSO or quinn-udp sent them apart.
    #[tokio::test]
    async fn a_batch_arrives_as_its_datagrams() {
        let received = send_to_a_plain_socket(&[1200, 1200, 700]).await;
        assert_eq!(received, [(1200, 0), (1200, 1), (700, 2)]);
    }

    /// A GRO read of three datagrams splits into the three.
    #[test]
    fn a_gro_read_splits_into_its_datagrams() {
        let mut buf = [0u8; 4096];
        let meta = RecvMeta {
            addr: addr(PEER),
            len: 2500,
            stride: 1000,
            ecn: None,
            dst_ip: None,
        };
        let lens: Vec<usize> = datagrams(&mut buf, &meta).map(|d| d.len()).collect();
        assert_eq!(lens, [1000, 1000, 500]);
        let single = RecvMeta {
            stride: 0,
            len: 40,
            ..meta
        };
        let lens: Vec<usize> = datagrams(&mut buf, &single).map(|d| d.len()).collect();
        assert_eq!(lens, [40]);
    }

    /// A batch sent on loopback is received, with GRO, as its datagrams.
    #[tokio::test]
    async fn a_batch_sent_is_received_as_its_datagrams() {
        let receiver = Socket::bind(addr("127.0.0.1:0")).expect("bind");
        let to = receiver.local_addr().expect("address");
        let sender = Socket::bind(addr("127.0.0.1:0")).expect("bind");
        let mut batch = SendBatch::new();
        let sent = [1200, 1200, 1200, 300];
        for (i, len) in sent.into_iter().enumerate() {
            sender
                .queue(&mut batch, to, None, &vec![i as u8; len])
                .await
                .expect("queue");
        }
        sender.send(&mut batch).await.expect("send");
        let mut received = Vec::new();
        let mut buf = vec![0u8; 65_536];
        while received.len() < sent.len() {
            let meta = receiver.recv(&mut buf).await.expect("recv");
            received.extend(datagrams(&mut buf, &meta).map(|d| d.to_vec()));
        }
        let lens: Vec<usize> = received.iter().map(Vec::len).collect();
        assert_eq!(lens, sent);
        for (i, d) in received.iter().enumerate() {
            assert!(d.iter().all(|&b| b == i as u8), "datagram {i} intact");
        }
    }

    /// A batch as large as [`MAX_BATCH_BYTES`] allows still fits an IPv4
    /// datagram: 49 datagrams of 1,337 bytes would be 65,513 bytes, which the
    /// kernel refuses (and quinn-udp drops quietly), so 48 go in the first
    /// send and every datagram arrives.
    #[tokio::test]
    async fn the_largest_batch_fits_an_ipv4_datagram() {
        let received = send_to_a_plain_socket(&[1337; 49]).await;
        let want: Vec<(usize, u8)> = (0..49).map(|i| (1337, i)).collect();
        assert_eq!(received, want);
    }
}
