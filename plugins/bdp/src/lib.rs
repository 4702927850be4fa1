//! BDP frame (Core QUIC paper, section VI-D).
//!
//! Both sides advertise the empty transport parameter `0xBF`; once the peer
//! has it, the plugin enables. A client given a remembered congestion window
//! through plugin-control `0x80000(u64)` sends it once in frame `0xBD` (an
//! 8-byte big-endian value), again if that frame is lost. A server receiving
//! it sets its congestion window and slow-start threshold to the value — if
//! the value is plausible: unlike the paper's version, absurd values are
//! refused (logged and ignored), so a peer cannot make the server flood.

#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use alloc::{string::String, vec::Vec};
use corequic_sdk::*;

const TP_BDP: u64 = 0xBF;
const FRAME_BDP: u64 = 0xBD;
/// plugin-control: the remembered congestion window (u64 bytes).
const CONTROL_SET_WINDOW: u64 = 0x80000;
/// Frame type (2-byte varint) plus the 8-byte value.
const FRAME_LEN: usize = 10;
/// Accepted windows: at least two full-size datagrams, at most 1 GiB.
const MIN_WINDOW: u64 = 2 * 1200;
const MAX_WINDOW: u64 = 1 << 30;

fn register_frame() -> Result<()> {
    host::register_frame(FrameRegistration {
        frame_type: FRAME_BDP,
        position: SendPosition::AfterAck,
        ack_eliciting: true,
        in_flight: true,
    })
}

#[derive(Default)]
struct Bdp {
    is_server: bool,
    /// Client: the window to send, until the frame is acknowledged.
    to_send: Option<u64>,
    in_flight: bool,
}

impl Plugin for Bdp {
    fn manifest() -> Manifest {
        Manifest::new("bdp", "0.2.0")
            .define_transport_parameter(TP_BDP)
            .define_frame(FRAME_BDP)
            .control(CONTROL_SET_WINDOW)
            .reads(&[field::IS_SERVER])
            .writes(&[field::CONGESTION_WINDOW, field::SSTHRESH])
            .permission(permission::REGISTRATION)
            .permission(permission::LOGGING)
    }

    fn init(&mut self) -> Result<()> {
        self.is_server = matches!(host::get(field::IS_SERVER)?, PluginVal::Bool(true));
        // The frame is registered only while there is a window to send, so
        // the host does not ask about it for every packet.
        host::register_transport_parameter(TP_BDP)
    }

    fn write_transport_parameter(&mut self, _: Anchor, _: u64, _: &OutBuf) -> Result<()> {
        Ok(()) // empty value: presence is the whole message
    }

    fn decode_transport_parameter(&mut self, _: Anchor, _: u64, _: &InBuf) -> Result<()> {
        host::enable();
        Ok(())
    }

    fn should_send_frame(&mut self, _: Anchor, _: u64, ctx: SendContext) -> Result<bool> {
        Ok(!self.is_server
            && self.to_send.is_some()
            && !self.in_flight
            && ctx.packet_type == PacketType::OneRtt)
    }

    fn write_frame(
        &mut self,
        _: Anchor,
        _: u64,
        _: SendContext,
        out: &OutBuf,
    ) -> Result<Option<u64>> {
        let Some(window) = self.to_send else {
            return Ok(None);
        };
        let mut bytes = Vec::with_capacity(FRAME_LEN);
        varint::encode(FRAME_BDP, &mut bytes);
        bytes.extend_from_slice(&window.to_be_bytes());
        out.put(&bytes)?;
        Ok(Some(window))
    }

    fn on_frame_reserved(&mut self, _: Anchor, _: ExtFrame, _: SendContext) -> Result<()> {
        self.in_flight = true;
        host::unregister_frame(FRAME_BDP)
    }

    fn notify_frame(&mut self, _: Anchor, _: ExtFrame, outcome: FrameOutcome) -> Result<()> {
        self.in_flight = false;
        match outcome {
            FrameOutcome::Acked => {
                self.to_send = None;
                Ok(())
            }
            FrameOutcome::Lost => register_frame(),
        }
    }

    fn parse_frame(&mut self, _: Anchor, _: u64, payload: &InBuf) -> Result<ParsedFrame> {
        let bytes = payload.read(0, 8)?;
        let mut value = [0u8; 8];
        value.copy_from_slice(&bytes);
        Ok(ParsedFrame {
            frame: ExtFrame {
                frame_type: FRAME_BDP,
                tag: u64::from_be_bytes(value),
            },
            consumed: 8,
        })
    }

    fn process_frame(&mut self, _: Anchor, frame: Frame, _: RxContext) -> Result<()> {
        let Some(ExtFrame { tag: window, .. }) = frame.ext() else {
            return Ok(());
        };
        if !self.is_server {
            return Ok(());
        }
        if !(MIN_WINDOW..=MAX_WINDOW).contains(&window) {
            return host::log(
                LogLevel::Warn,
                "refusing implausible BDP window",
                &[("window", PluginVal::U64(window))],
            );
        }
        // A controller without a window to set (CQ-FIELD-8) refuses the
        // write: the connection then goes on as if no window was remembered,
        // since failing the routine would close it.
        match host::set(field::CONGESTION_WINDOW, PluginVal::U64(window))
            .and_then(|()| host::set(field::SSTHRESH, PluginVal::U64(window)))
        {
            Ok(()) => host::log(
                LogLevel::Info,
                "congestion window resumed",
                &[("window", PluginVal::U64(window))],
            ),
            Err(e) => host::log(
                LogLevel::Warn,
                "congestion window not resumed",
                &[
                    ("window", PluginVal::U64(window)),
                    ("error", PluginVal::String(text::error_kind(&e).into())),
                ],
            ),
        }
    }

    fn log_frame(&mut self, _: Anchor, frame: Frame) -> Result<String> {
        match frame.ext() {
            Some(f) => Ok(String::from("BDP window=") + &text::decimal(f.tag)),
            None => Err(Error::invalid_argument("not a BDP frame")),
        }
    }

    fn plugin_control(&mut self, id: u64, args: Vec<PluginVal>) -> Result<Vec<PluginVal>> {
        match (id, args.as_slice()) {
            (CONTROL_SET_WINDOW, [PluginVal::U64(w)]) => {
                self.to_send = Some(*w);
                if !self.is_server {
                    register_frame()?;
                }
                Ok(Vec::new())
            }
            (CONTROL_SET_WINDOW, _) => Err(Error::invalid_argument("expected one u64")),
            _ => Err(Error::not_found("unknown plugin-control id")),
        }
    }
}

export_plugin!(
    Bdp,
    routines: [define_transport_parameter, define_frame, plugin_control]
);
