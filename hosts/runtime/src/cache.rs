//! On-disk cache of compiled plugins ([`crate::RuntimeConfig::cache_dir`]).
//!
//! An entry is named by the SHA-256 of everything that decides the compiled
//! code: the engine's compatibility hash (the wasmtime version, the engine's
//! configuration and its target) and the component's bytes. It is two files:
//!
//! - `KEY.cwasm`, exactly what `Component::serialize` produced, which
//!   wasmtime maps from the file instead of copying it into fresh memory
//!   (a third of a warm load's time was that copy and its page faults);
//! - `KEY.meta`: a magic, the artifact's length and CRC-32, and the
//!   plugin's manifest as its `manifest` export returned it, in the text
//!   form of the `core-quic:manifest` section ([`crate::embedded`]) with its
//!   own CRC-32, so that a warm load needs no throwaway instance to learn it.
//!   The manifest is validated against the grants on every load, like a
//!   fresh one; it may be cached because a plugin's `manifest` has no
//!   inputs (host calls are denied there), so the component's bytes decide
//!   it.
//!
//! Both are written to temporary files and renamed into place, the
//! artifact first, so a reader never sees half a file. An entry whose
//! artifact does not match the length and checksum its meta file records
//! (truncated, corrupt, edited, or replaced without its meta file) is
//! compiled again and replaced, never deserialized; a meta file whose
//! manifest does not decode only costs the manifest call. wasmtime itself
//! refuses an artifact of another engine configuration.
//!
//! The checksums catch accidents, not an attacker: whoever can write the
//! cache directory can write matching ones (a cryptographic digest would
//! not change that), and a deserialized artifact runs as native code. The
//! directory must be writable by the embedder only, and its files must not
//! be modified in place while a process uses them (they are mapped).
//! CRC-32 rather than a second SHA-256 because the check runs on every
//! warm load and the artifacts are several times larger than the
//! components: SHA-256 of the artifacts was a fifth of the time of loading
//! four plugins.

use crate::abi::PluginManifest;
use crate::embedded;
use sha2::{Digest, Sha256};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use wasmtime::Engine;
use wasmtime::component::Component;

/// The first bytes of every meta file (format version 4: the manifest as text).
const MAGIC: &[u8; 8] = b"cqcache4";

/// A [`Hasher`] that feeds SHA-256, to take wasmtime's compatibility hash
/// (which is only `impl Hash`) into the key.
struct Sha256Hasher(Sha256);

impl Hasher for Sha256Hasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    fn finish(&self) -> u64 {
        // Never used: the key is the full digest.
        0
    }
}

/// The two files of one cache entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    artifact: PathBuf,
    meta: PathBuf,
}

/// A component read back from the cache.
pub(crate) struct Cached {
    pub(crate) component: Component,
    /// The manifest stored with it; `None` when the meta file has none that
    /// decodes, and the plugin must be asked.
    pub(crate) manifest: Option<PluginManifest>,
}

impl Entry {
    /// The entry of `component` compiled by `engine`, in `dir`.
    pub(crate) fn new(dir: &Path, engine: &Engine, component: &[u8]) -> Entry {
        let mut key = Sha256Hasher(Sha256::new());
        key.write(b"corequic-runtime compiled plugin\0");
        // The wasmtime version (wasmtime's default module-version strategy),
        // the engine's configuration and its target.
        engine.precompile_compatibility_hash().hash(&mut key);
        key.write(&(component.len() as u64).to_le_bytes());
        key.write(component);
        let key = format!("{:x}", key.0.finalize());
        Entry {
            artifact: dir.join(format!("{key}.cwasm")),
            meta: dir.join(format!("{key}.meta")),
        }
    }

    /// The component stored in this entry, if the entry is there and intact.
    pub(crate) fn load(&self, engine: &Engine) -> Option<Cached> {
        let meta = Meta::parse(&std::fs::read(&self.meta).ok()?)?;
        let artifact = std::fs::read(&self.artifact).ok()?;
        if artifact.len() as u64 != meta.artifact_len
            || crc32fast::hash(&artifact) != meta.artifact_crc
        {
            return None;
        }
        // SAFETY: the file holds exactly what `store` wrote for this key (its
        // length and checksum match the meta file's, and files are only
        // ever replaced whole, by rename), and the key binds the wasmtime
        // version and the engine configuration, which wasmtime checks
        // again. The directory is the embedder's own (module documentation).
        let component = unsafe { Component::deserialize_file(engine, &self.artifact) }.ok()?;
        Some(Cached {
            component,
            manifest: meta.manifest,
        })
    }

    /// Store `component` and its `manifest`, atomically. The cache is an
    /// optimisation: failing to write it is not an error, and a failed write
    /// leaves no file of the entry half-written.
    pub(crate) fn store(&self, component: &Component, manifest: &PluginManifest) {
        let Ok(artifact) = component.serialize() else {
            return;
        };
        let meta = Meta::encode(&artifact, manifest);
        // The artifact first: a meta file never describes a missing
        // artifact for long, and a mismatch only costs a compilation.
        if write_atomically(&self.artifact, &artifact) {
            write_atomically(&self.meta, &meta);
        }
    }
}

/// Write `bytes` to `path` through a temporary file and a rename.
fn write_atomically(path: &Path, bytes: &[u8]) -> bool {
    let Some(dir) = path.parent() else {
        return false;
    };
    // Unique per process and call, in the entry's directory so that the
    // rename stays on one file system.
    let tmp = dir.join(format!(
        ".{}.{}.{}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("entry"),
        std::process::id(),
        unique()
    ));
    let written = std::fs::create_dir_all(dir)
        .and_then(|_| std::fs::write(&tmp, bytes))
        .and_then(|_| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written.is_ok()
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// A meta file: `MAGIC`, the artifact's length (u64) and CRC-32 (u32), the
/// manifest's length (u32) and CRC-32 (u32), the manifest; little-endian.
#[derive(Debug, PartialEq)]
struct Meta {
    artifact_len: u64,
    artifact_crc: u32,
    manifest: Option<PluginManifest>,
}

impl Meta {
    fn encode(artifact: &[u8], manifest: &PluginManifest) -> Vec<u8> {
        // A manifest the text form cannot carry (a name with a line break,
        // say) is not kept: the plugin is asked on every load.
        let manifest = embedded::encode(manifest).unwrap_or_default().into_bytes();
        let mut out = Vec::with_capacity(MAGIC.len() + 16 + manifest.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&(artifact.len() as u64).to_le_bytes());
        out.extend_from_slice(&crc32fast::hash(artifact).to_le_bytes());
        out.extend_from_slice(&(manifest.len() as u32).to_le_bytes());
        out.extend_from_slice(&crc32fast::hash(&manifest).to_le_bytes());
        out.extend_from_slice(&manifest);
        out
    }

    /// The meta file's content; `None` if its magic or header is wrong. A
    /// manifest that is damaged is dropped, not the entry.
    fn parse(bytes: &[u8]) -> Option<Meta> {
        let mut r = Reader(bytes.strip_prefix(MAGIC.as_slice())?);
        let artifact_len = r.u64()?;
        let artifact_crc = r.u32()?;
        let manifest_len = r.u32()? as usize;
        let manifest_crc = r.u32()?;
        let manifest = (r.0.len() == manifest_len && crc32fast::hash(r.0) == manifest_crc)
            .then(|| embedded::decode(r.0).ok())
            .flatten();
        Some(Meta {
            artifact_len,
            artifact_crc,
            manifest,
        })
    }
}

/// Reads from the front of a byte slice; every read fails past its end.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head)
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::{Anchor, Binding, FieldId, Permission, Routine};

    fn manifest() -> PluginManifest {
        PluginManifest {
            name: "probe".into(),
            version: "0.1.0".into(),
            abi_version: "0.1.0".into(),
            bindings: vec![
                Binding {
                    routine: Routine::PluginControl,
                    anchor: Anchor::Define,
                    param: 0x80000,
                },
                Binding {
                    routine: Routine::ProcessFrame,
                    anchor: Anchor::After,
                    param: u64::MAX,
                },
            ],
            reads: FieldId::ALL.to_vec(),
            writes: vec![FieldId::ALL[24]],
            permissions: Permission::ALL.to_vec(),
        }
    }

    /// A meta file for `artifact` whose manifest part is `manifest` as given,
    /// with a matching length and CRC-32.
    fn meta_with(artifact: &[u8], manifest: &[u8]) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&(artifact.len() as u64).to_le_bytes());
        out.extend_from_slice(&crc32fast::hash(artifact).to_le_bytes());
        out.extend_from_slice(&(manifest.len() as u32).to_le_bytes());
        out.extend_from_slice(&crc32fast::hash(manifest).to_le_bytes());
        out.extend_from_slice(manifest);
        out
    }

    #[test]
    fn a_manifest_survives_its_encoding() {
        let m = manifest();
        let kept =
            |m: &PluginManifest| Meta::parse(&Meta::encode(b"a", m)).and_then(|p| p.manifest);
        assert_eq!(kept(&m), Some(m));
        let empty = PluginManifest {
            name: String::new(),
            version: String::new(),
            abi_version: String::new(),
            bindings: vec![],
            reads: vec![],
            writes: vec![],
            permissions: vec![],
        };
        assert_eq!(kept(&empty), Some(empty));
    }

    #[test]
    fn a_damaged_manifest_does_not_decode() {
        let text = embedded::encode(&manifest()).expect("text").into_bytes();
        let header = meta_with(b"a", &text).len() - text.len();
        let meta = Meta::encode(b"a", &manifest());
        for cut in header..meta.len() {
            let parsed = Meta::parse(&meta[..cut]).map(|p| p.manifest);
            assert_eq!(parsed, Some(None), "cut at {cut}");
        }
        let mut longer = meta.clone();
        longer.push(0);
        assert_eq!(Meta::parse(&longer).map(|p| p.manifest), Some(None));
        // A routine that does not exist, under a matching checksum.
        let bad_case = String::from_utf8(text.clone())
            .expect("utf-8")
            .replace("plugin-control", "plugin-teleport");
        let parsed = Meta::parse(&meta_with(b"a", bad_case.as_bytes())).expect("meta");
        assert_eq!(parsed.manifest, None);
        // A manifest length that claims more bytes than the file has.
        let mut huge = meta;
        huge[MAGIC.len() + 12..MAGIC.len() + 16].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(Meta::parse(&huge).map(|p| p.manifest), Some(None));
    }

    #[test]
    fn a_meta_file_checks_its_magic_header_and_manifest() {
        let m = manifest();
        let meta = Meta::encode(b"artifact", &m);
        let parsed = Meta::parse(&meta).expect("meta");
        assert_eq!(parsed.artifact_len, 8);
        assert_eq!(parsed.artifact_crc, crc32fast::hash(b"artifact"));
        assert_eq!(parsed.manifest, Some(m));

        let mut other_magic = meta.clone();
        other_magic[0] = b'x';
        assert_eq!(Meta::parse(&other_magic), None);
        assert_eq!(Meta::parse(&meta[..MAGIC.len() + 10]), None);
        // A flipped manifest byte drops the manifest, not the artifact's check.
        let mut flipped = meta.clone();
        *flipped.last_mut().expect("bytes") ^= 1;
        let parsed = Meta::parse(&flipped).expect("meta");
        assert_eq!((parsed.artifact_len, parsed.manifest), (8, None));
        let parsed = Meta::parse(&meta[..meta.len() - 1]).expect("meta");
        assert_eq!(parsed.manifest, None);
    }

    #[test]
    fn keys_differ_by_component_and_are_hex_sha256() {
        let engine = Engine::default();
        let dir = Path::new("cache");
        let a = Entry::new(dir, &engine, b"one");
        let b = Entry::new(dir, &engine, b"two");
        assert_ne!(a, b);
        let name = a
            .artifact
            .file_name()
            .and_then(|n| n.to_str())
            .expect("name");
        assert_eq!(name.len(), 64 + ".cwasm".len());
        assert!(
            name.trim_end_matches(".cwasm")
                .bytes()
                .all(|c| c.is_ascii_hexdigit())
        );
        assert_eq!(a.meta.with_extension("cwasm"), a.artifact);
    }
}
