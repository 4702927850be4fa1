//! The fused frame routines of ABI 0.2.4, `send-frame` and `receive-frame`:
//! their arguments and results as `plugin-val` lists (they are reached
//! through `call-routine`), and the values a plugin returns from them.

use crate::{Error, PluginVal, Result, RxContext, SendContext, SendPosition};
use alloc::string::String;
use alloc::vec::Vec;

/// A frame [`crate::Plugin::send_frame`] offers for the packet being built.
#[derive(Debug, Clone, PartialEq)]
pub struct SentFrame {
    /// The whole frame, type included; at most the room the packet offers.
    pub bytes: Vec<u8>,
    /// The frame's tag, which comes back to [`crate::Plugin::notify_frame`].
    pub tag: u64,
    /// A one-line description for the host's log of the frame, in place of
    /// a [`crate::Plugin::log_frame`] call.
    pub description: Option<String>,
}

impl SentFrame {
    /// The result list of `send-frame`: `[bytes, u64 tag]`, then the
    /// description as a string if there is one.
    pub(crate) fn into_vals(self) -> Vec<PluginVal> {
        results(PluginVal::Bytes(self.bytes), self.tag, self.description)
    }
}

/// A frame [`crate::Plugin::receive_frame`] took from a received packet.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedFrame {
    /// Bytes of the payload the frame occupies after its type.
    pub consumed: u64,
    /// The frame's tag, as `parse-frame` would have returned it.
    pub tag: u64,
    /// A one-line description for the host's log of the frame, in place of
    /// a [`crate::Plugin::log_frame`] call.
    pub description: Option<String>,
}

impl ReceivedFrame {
    /// The result list of `receive-frame`: `[u64 consumed, u64 tag]`, then
    /// the description as a string if there is one.
    pub(crate) fn into_vals(self) -> Vec<PluginVal> {
        results(PluginVal::U64(self.consumed), self.tag, self.description)
    }
}

/// The result list both fused routines share the form of: `first`, the
/// tag, then the description if there is one.
fn results(first: PluginVal, tag: u64, description: Option<String>) -> Vec<PluginVal> {
    let mut vals = Vec::with_capacity(3);
    vals.push(first);
    vals.push(PluginVal::U64(tag));
    if let Some(description) = description {
        vals.push(PluginVal::String(description));
    }
    vals
}

/// `send-frame`'s six arguments: packet type, space, packet number,
/// position (0 `first`, 1 `after-ack`, 2 `end`), room and now.
pub(crate) fn send_context(args: &[PluginVal]) -> Result<SendContext> {
    match *args {
        [
            PluginVal::PacketType(packet_type),
            PluginVal::PnSpace(space),
            PluginVal::U64(packet_number),
            PluginVal::U64(position),
            PluginVal::U64(room),
            PluginVal::Instant(now),
        ] => Ok(SendContext {
            packet_type,
            space,
            packet_number,
            position: match position {
                0 => SendPosition::First,
                1 => SendPosition::AfterAck,
                2 => SendPosition::End,
                _ => return Err(Error::invalid_argument("send-frame: unknown position")),
            },
            room,
            now,
        }),
        _ => Err(Error::invalid_argument(
            "send-frame takes a packet type, a space, a packet number, a position, a room and now",
        )),
    }
}

/// `receive-frame`'s arguments after the payload: packet type, space,
/// packet number and now.
pub(crate) fn rx_context(args: &[PluginVal]) -> Result<RxContext> {
    match *args {
        [
            PluginVal::PacketType(packet_type),
            PluginVal::PnSpace(space),
            PluginVal::U64(packet_number),
            PluginVal::Instant(now),
        ] => Ok(RxContext {
            packet_type,
            space,
            packet_number,
            now,
        }),
        _ => Err(Error::invalid_argument(
            "receive-frame takes a payload, a packet type, a space, a packet number and now",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{PacketType, PnSpace};

    #[test]
    fn send_context_round_trips_the_hosts_six_values() {
        let args = [
            PluginVal::PacketType(PacketType::OneRtt),
            PluginVal::PnSpace(PnSpace::ApplicationData),
            PluginVal::U64(7),
            PluginVal::U64(1),
            PluginVal::U64(1200),
            PluginVal::Instant(99),
        ];
        let ctx = send_context(&args).expect("six values");
        assert_eq!(ctx.packet_type, PacketType::OneRtt);
        assert_eq!(ctx.space, PnSpace::ApplicationData);
        assert_eq!(ctx.packet_number, 7);
        assert_eq!(ctx.position, SendPosition::AfterAck);
        assert_eq!((ctx.room, ctx.now), (1200, 99));
    }

    #[test]
    fn malformed_arguments_are_invalid_argument_not_a_panic() {
        assert!(send_context(&[]).is_err());
        let mut args = [
            PluginVal::PacketType(PacketType::OneRtt),
            PluginVal::PnSpace(PnSpace::ApplicationData),
            PluginVal::U64(7),
            PluginVal::U64(3),
            PluginVal::U64(1200),
            PluginVal::Instant(99),
        ];
        let e = send_context(&args).expect_err("position 3");
        assert_eq!(e.kind, crate::error_kind::INVALID_ARGUMENT);
        args[3] = PluginVal::U64(0);
        assert!(send_context(&args).is_ok());
        assert!(rx_context(&args[..3]).is_err());
        let rx = [
            PluginVal::PacketType(PacketType::OneRtt),
            PluginVal::PnSpace(PnSpace::ApplicationData),
            PluginVal::U64(3),
            PluginVal::Instant(5),
        ];
        assert_eq!(rx_context(&rx).expect("four values").packet_number, 3);
    }

    #[test]
    fn results_put_the_description_last_and_only_when_given() {
        let sent = SentFrame {
            bytes: alloc::vec![0x42, 1],
            tag: 1,
            description: None,
        };
        assert_eq!(sent.into_vals().len(), 2);
        let received = ReceivedFrame {
            consumed: 1,
            tag: 9,
            description: Some("d".into()),
        };
        assert!(matches!(
            received.into_vals().as_slice(),
            [PluginVal::U64(1), PluginVal::U64(9), PluginVal::String(d)] if d == "d"
        ));
    }
}
