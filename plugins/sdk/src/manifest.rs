//! A builder for the plugin manifest.

use alloc::vec::Vec;

use crate::{
    ABI_VERSION, Anchor, Binding, FieldId, PermissionId, PluginManifest, RoutineId, routine,
};

/// What a plugin declares: its bindings, the fields it reads and writes, and
/// the permissions it needs. Hosts refuse plugins whose needs they cannot meet.
pub struct Manifest(PluginManifest);

impl Manifest {
    /// A manifest for plugin `name` at `version`, targeting this SDK's ABI.
    pub fn new(name: &str, version: &str) -> Manifest {
        Manifest(PluginManifest {
            name: name.into(),
            version: version.into(),
            abi_version: ABI_VERSION.into(),
            bindings: Vec::new(),
            reads: Vec::new(),
            writes: Vec::new(),
            permissions: Vec::new(),
        })
    }

    /// Override the ABI version (for testing hosts' version checks).
    pub fn abi_version(mut self, version: &str) -> Manifest {
        self.0.abi_version = version.into();
        self
    }

    /// Bind `routine` for parameter `param` at `anchor`.
    pub fn bind(mut self, routine: RoutineId, anchor: Anchor, param: u64) -> Manifest {
        self.0.bindings.push(Binding {
            routine,
            anchor,
            param,
        });
        self
    }

    /// DEFINE every frame routine (send and receive) for `frame_type`.
    pub fn define_frame(self, frame_type: u64) -> Manifest {
        self.define_frame_one_in_flight(frame_type).bind(
            routine::NOTIFY_FRAME,
            Anchor::Define,
            frame_type,
        )
    }

    /// DEFINE every frame routine but `notify-frame` for `frame_type`: for
    /// a frame registered with [`crate::host::register_frame_one_in_flight`]
    /// (ABI 0.2.5), which the host offers again by itself once the frame's
    /// fate is known, so that the plugin need not hear of it.
    pub fn define_frame_one_in_flight(self, frame_type: u64) -> Manifest {
        [
            routine::SHOULD_SEND_FRAME,
            routine::WRITE_FRAME,
            routine::ON_FRAME_RESERVED,
            routine::PARSE_FRAME,
            routine::PROCESS_FRAME,
            routine::LOG_FRAME,
        ]
        .into_iter()
        .fold(self, |m, r| m.bind(r, Anchor::Define, frame_type))
    }

    /// DEFINE the fused frame routines `send-frame` and `receive-frame` for
    /// `frame_type` (ABI 0.2.4), which the host then calls in place of the
    /// separate ones that [`Manifest::define_frame`] binds; implement
    /// [`crate::Plugin::send_frame`] and [`crate::Plugin::receive_frame`]
    /// and list `call_routine` in [`crate::export_plugin!`].
    pub fn fuse_frame_routines(self, frame_type: u64) -> Manifest {
        self.bind(routine::SEND_FRAME, Anchor::Define, frame_type)
            .bind(routine::RECEIVE_FRAME, Anchor::Define, frame_type)
    }

    /// DEFINE both transport-parameter routines for `id`.
    pub fn define_transport_parameter(self, id: u64) -> Manifest {
        self.bind(routine::WRITE_TRANSPORT_PARAMETER, Anchor::Define, id)
            .bind(routine::DECODE_TRANSPORT_PARAMETER, Anchor::Define, id)
    }

    /// DEFINE plugin-control `id`.
    pub fn control(self, id: u64) -> Manifest {
        self.bind(routine::PLUGIN_CONTROL, Anchor::Define, id)
    }

    /// Declare fields read.
    pub fn reads(mut self, fields: &[FieldId]) -> Manifest {
        self.0.reads.extend_from_slice(fields);
        self
    }

    /// Declare fields written.
    pub fn writes(mut self, fields: &[FieldId]) -> Manifest {
        self.0.writes.extend_from_slice(fields);
        self
    }

    /// Declare a permission.
    pub fn permission(mut self, permission: PermissionId) -> Manifest {
        self.0.permissions.push(permission);
        self
    }

    /// The WIT record.
    pub fn into_wit(self) -> PluginManifest {
        self.0
    }
}
