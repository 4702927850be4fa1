//! On-disk cache of compiled plugins ([`crate::RuntimeConfig::cache_dir`]).
//!
//! An entry is named by the SHA-256 of everything that decides the compiled
//! code: the engine's compatibility hash (the wasmtime version, the engine's
//! configuration and its target) and the component's bytes. Its file holds a
//! magic, the artifact's length and CRC-32, and the artifact that
//! `Component::serialize` produced. Entries are written to a temporary file
//! and renamed into place, so a reader never sees half an entry; one whose
//! length or checksum does not match (truncated, corrupt, edited) is
//! compiled again and replaced, never deserialized. wasmtime itself refuses
//! an artifact of another engine configuration.
//!
//! The checksum catches accidents, not an attacker: whoever can write the
//! cache directory can write a matching one (a cryptographic digest would
//! not change that), and a deserialized artifact runs as native code. The
//! directory must be writable by the embedder only. CRC-32 rather than a
//! second SHA-256 because the check runs on every warm load and the
//! artifacts are several times larger than the components: SHA-256 of the
//! artifacts was a fifth of the time of loading four plugins.

use sha2::{Digest, Sha256};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use wasmtime::Engine;
use wasmtime::component::Component;

/// The first bytes of every entry (format version 2).
const MAGIC: &[u8; 8] = b"cqcache2";
/// After the magic: the artifact's length (u64) and CRC-32 (u32), little-endian.
const HEADER_LEN: usize = 12;

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

/// The entry file of `component` compiled by `engine`, in `dir`.
pub(crate) fn entry_path(dir: &Path, engine: &Engine, component: &[u8]) -> PathBuf {
    let mut key = Sha256Hasher(Sha256::new());
    key.write(b"corequic-runtime compiled plugin\0");
    // The wasmtime version (wasmtime's default module-version strategy),
    // the engine's configuration and its target.
    engine.precompile_compatibility_hash().hash(&mut key);
    key.write(&(component.len() as u64).to_le_bytes());
    key.write(component);
    dir.join(format!("{:x}.cwasm", key.0.finalize()))
}

/// The component stored at `path`, if the entry is there and intact.
pub(crate) fn load(engine: &Engine, path: &Path) -> Option<Component> {
    let bytes = std::fs::read(path).ok()?;
    let artifact = verified_artifact(&bytes)?;
    // SAFETY: `artifact` is exactly what `store` wrote for this key (its
    // length and checksum match), and the key binds the wasmtime version and the engine
    // configuration; wasmtime checks the configuration again. The directory
    // is the embedder's own (see the module documentation).
    unsafe { Component::deserialize(engine, artifact) }.ok()
}

/// The header of `artifact`'s entry, after the magic.
fn header(artifact: &[u8]) -> [u8; HEADER_LEN] {
    let mut h = [0; HEADER_LEN];
    h[..8].copy_from_slice(&(artifact.len() as u64).to_le_bytes());
    h[8..].copy_from_slice(&crc32fast::hash(artifact).to_le_bytes());
    h
}

/// The artifact of an entry's bytes, if its magic, length and checksum hold.
fn verified_artifact(entry: &[u8]) -> Option<&[u8]> {
    let rest = entry.strip_prefix(MAGIC.as_slice())?;
    let (found, artifact) = rest.split_at_checked(HEADER_LEN)?;
    (found == header(artifact)).then_some(artifact)
}

/// Store `component` at `path`, atomically. The cache is an optimisation:
/// failing to write it is not an error, and a failed write leaves no entry.
pub(crate) fn store(component: &Component, path: &Path) {
    let Ok(artifact) = component.serialize() else {
        return;
    };
    let Some(dir) = path.parent() else {
        return;
    };
    let mut entry = Vec::with_capacity(MAGIC.len() + HEADER_LEN + artifact.len());
    entry.extend_from_slice(MAGIC);
    entry.extend_from_slice(&header(&artifact));
    entry.extend_from_slice(&artifact);
    // Unique per process and call, in the entry's directory so that the
    // rename stays on one file system.
    let tmp = dir.join(format!(
        ".{}.{}.{}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("entry"),
        std::process::id(),
        unique()
    ));
    let written = std::fs::create_dir_all(dir)
        .and_then(|_| std::fs::write(&tmp, &entry))
        .and_then(|_| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_with_a_wrong_checksum_length_or_magic_is_not_an_artifact() {
        let mut entry = MAGIC.to_vec();
        entry.extend_from_slice(&header(b"artifact"));
        entry.extend_from_slice(b"artifact");
        assert_eq!(verified_artifact(&entry), Some(b"artifact".as_slice()));

        let mut flipped = entry.clone();
        *flipped.last_mut().expect("bytes") ^= 1;
        assert_eq!(verified_artifact(&flipped), None);
        assert_eq!(verified_artifact(&entry[..entry.len() - 1]), None);
        assert_eq!(verified_artifact(&entry[..MAGIC.len() + 5]), None);
        let mut longer = entry.clone();
        longer.push(0);
        assert_eq!(verified_artifact(&longer), None);
        let mut other_magic = entry.clone();
        other_magic[0] = b'x';
        assert_eq!(verified_artifact(&other_magic), None);
    }

    #[test]
    fn keys_differ_by_component_and_are_hex_sha256() {
        let engine = Engine::default();
        let dir = Path::new("cache");
        let a = entry_path(dir, &engine, b"one");
        let b = entry_path(dir, &engine, b"two");
        assert_ne!(a, b);
        let name = a.file_name().and_then(|n| n.to_str()).expect("name");
        assert_eq!(name.len(), 64 + ".cwasm".len());
        assert!(
            name.trim_end_matches(".cwasm")
                .bytes()
                .all(|c| c.is_ascii_hexdigit())
        );
    }
}
