//! A node's data directory (`--dir`): the little a lock server must not forget across
//! a restart.
//!
//! - `redlockd.lock`: held with `flock` while the node runs, so two nodes can never
//!   share a directory (each would hand out tokens from the same reservation).
//! - `node.state`: the node's identity (a random id made with the directory), its boot
//!   count, and the fencing-token reservation (the mark may reach this value without
//!   another write). Two fixed-size slots, each with a sequence number and a CRC, are
//!   written in turn and fsynced: a write torn by a crash leaves the other slot, which
//!   still holds everything that was ever handed out (nothing above a reservation is
//!   handed out before its fsync returns). One fsync per update.
//! - `snapshot.rdl`: written only by a clean shutdown (see `durability::snapshot`).

use crate::durability::snapshot::crc32;
use parking_lot::Mutex;
use std::fs::{File, OpenOptions};
use std::io::{self, ErrorKind};
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

const LOCK_FILE: &str = "redlockd.lock";
const STATE_FILE: &str = "node.state";
pub const SNAPSHOT_FILE: &str = "snapshot.rdl";
const SNAPSHOT_TMP: &str = "snapshot.rdl.tmp";

const SLOT_MAGIC: &[u8; 8] = b"RLKDSTAT";
const SLOT_VERSION: u32 = 1;
/// Bytes per slot: magic 8, version 4, seq 8, node id 16, boot 8, reservation 8, crc 4,
/// padding to a round size.
const SLOT_LEN: usize = 64;
const SLOT_BODY: usize = 8 + 4 + 8 + 16 + 8 + 8;

/// What `node.state` holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeState {
    /// Random, made with the directory: a snapshot from another node is refused.
    pub node_id: [u8; 16],
    /// Incremented (and fsynced) at every boot: a snapshot is only accepted from the
    /// boot right before this one, so one older than a crash is refused.
    pub boot: u64,
    /// The fencing-token mark never exceeds this without a new fsynced write.
    pub token_reserved: u64,
}

/// An open, locked data directory.
pub struct NodeDir {
    path: PathBuf,
    /// Holds the flock for as long as the node runs (released when the file closes,
    /// or by `unlock` once the server has stopped).
    lock: Mutex<Option<File>>,
    state: Mutex<StateFile>,
}

struct StateFile {
    file: File,
    current: NodeState,
    /// Sequence number of the last slot written; the next write goes to the other slot.
    seq: u64,
}

impl std::fmt::Debug for NodeDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NodeDir({})", self.path.display())
    }
}

impl NodeDir {
    /// Creates `path` if missing, locks it, and reads (or creates) the node's state.
    /// Errors say what to do: not writable, locked by another node, a corrupt state.
    pub fn open(path: &Path) -> io::Result<NodeDir> {
        let shown = path.display();
        std::fs::create_dir_all(path).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot create data directory {shown}: {e}"),
            )
        })?;
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(path.join(LOCK_FILE))
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("data directory {shown} is not writable: {e}"),
                )
            })?;
        // SAFETY: flock on a descriptor this function owns; no memory is involved.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let e = io::Error::last_os_error();
            if e.kind() == ErrorKind::WouldBlock {
                return Err(io::Error::new(
                    ErrorKind::AddrInUse,
                    format!(
                        "data directory {shown} is in use by another redlockd node ({} is locked); give each node its own --dir",
                        path.join(LOCK_FILE).display()
                    ),
                ));
            }
            return Err(io::Error::new(
                e.kind(),
                format!("cannot lock data directory {shown}: {e}"),
            ));
        }
        let state = StateFile::open(path)?;
        Ok(NodeDir {
            path: path.to_path_buf(),
            lock: Mutex::new(Some(lock)),
            state: Mutex::new(state),
        })
    }

    /// Releases the directory for another node (this server has stopped and will not
    /// write to it again).
    pub fn unlock(&self) {
        self.lock.lock().take();
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn snapshot_path(&self) -> PathBuf {
        self.path.join(SNAPSHOT_FILE)
    }

    pub fn state(&self) -> NodeState {
        self.state.lock().current
    }

    /// Changes the state and makes it durable (one fsync) before returning.
    pub fn update(&self, change: impl FnOnce(&mut NodeState)) -> io::Result<NodeState> {
        let mut s = self.state.lock();
        let mut next = s.current;
        change(&mut next);
        s.write(next)?;
        Ok(next)
    }

    /// Forgets everything but the lock: what a lost disk looks like to the next boot
    /// (tests only). The state file is made again, as for a new directory.
    pub fn wipe(&self) -> io::Result<()> {
        let _ = std::fs::remove_file(self.snapshot_path());
        let _ = std::fs::remove_file(self.path.join(SNAPSHOT_TMP));
        let mut s = self.state.lock();
        std::fs::remove_file(self.path.join(STATE_FILE))?;
        *s = StateFile::open(&self.path)?;
        Ok(())
    }

    /// Writes a snapshot atomically: a temporary file, fsync, rename, fsync of the
    /// directory. A crash at any point leaves either no snapshot or the whole one.
    pub fn write_snapshot(&self, bytes: &[u8]) -> io::Result<()> {
        let tmp = self.path.join(SNAPSHOT_TMP);
        {
            let f = File::create(&tmp)?;
            f.write_all_at(bytes, 0)?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, self.snapshot_path())?;
        sync_dir(&self.path)
    }

    /// The snapshot's bytes, if there is one.
    pub fn read_snapshot(&self) -> io::Result<Option<Vec<u8>>> {
        match std::fs::read(self.snapshot_path()) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Removes the snapshot (consumed or refused) durably, so no later boot sees it.
    pub fn remove_snapshot(&self) -> io::Result<()> {
        match std::fs::remove_file(self.snapshot_path()) {
            Ok(()) => sync_dir(&self.path),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    }
}

fn sync_dir(path: &Path) -> io::Result<()> {
    File::open(path)?.sync_all()
}

impl StateFile {
    fn open(dir: &Path) -> io::Result<StateFile> {
        let path = dir.join(STATE_FILE);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)?;
        let mut raw = [0u8; 2 * SLOT_LEN];
        let len = file.metadata()?.len() as usize;
        let n = len.min(raw.len());
        file.read_exact_at(&mut raw[..n], 0)?;
        let slots = [decode_slot(&raw[..SLOT_LEN]), decode_slot(&raw[SLOT_LEN..])];
        let best = slots.iter().flatten().max_by_key(|(seq, _)| *seq).copied();
        if let Some((seq, current)) = best {
            return Ok(StateFile { file, current, seq });
        }
        // No valid slot. Only a first write cut short by a crash leaves that, and then
        // nothing was ever handed out: slot 1 (written second) is still untouched.
        if raw[SLOT_LEN..].iter().any(|&b| b != 0) {
            return Err(io::Error::new(
                ErrorKind::InvalidData,
                format!(
                    "{} is corrupt (no slot passes its checksum): the fencing-token mark is unknown, so tokens could go backwards; restore it from a backup, or move it away to start this node as new",
                    path.display()
                ),
            ));
        }
        let mut node_id = [0u8; 16];
        rand::Rng::fill(&mut rand::rng(), &mut node_id[..]);
        let mut state = StateFile {
            file,
            current: NodeState {
                node_id,
                boot: 0,
                token_reserved: 0,
            },
            seq: 0,
        };
        state.write(state.current)?;
        sync_dir(dir)?;
        Ok(state)
    }

    fn write(&mut self, next: NodeState) -> io::Result<()> {
        let seq = self.seq + 1;
        let slot = encode_slot(seq, &next);
        self.file.write_all_at(&slot, (seq % 2) * SLOT_LEN as u64)?;
        self.file.sync_data()?;
        self.seq = seq;
        self.current = next;
        Ok(())
    }
}

fn encode_slot(seq: u64, s: &NodeState) -> [u8; SLOT_LEN] {
    let mut out = [0u8; SLOT_LEN];
    out[..8].copy_from_slice(SLOT_MAGIC);
    out[8..12].copy_from_slice(&SLOT_VERSION.to_le_bytes());
    out[12..20].copy_from_slice(&seq.to_le_bytes());
    out[20..36].copy_from_slice(&s.node_id);
    out[36..44].copy_from_slice(&s.boot.to_le_bytes());
    out[44..52].copy_from_slice(&s.token_reserved.to_le_bytes());
    let crc = crc32(&out[..SLOT_BODY]);
    out[SLOT_BODY..SLOT_BODY + 4].copy_from_slice(&crc.to_le_bytes());
    out
}

fn decode_slot(raw: &[u8]) -> Option<(u64, NodeState)> {
    let u64_at = |i: usize| u64::from_le_bytes(raw[i..i + 8].try_into().expect("8 bytes"));
    if &raw[..8] != SLOT_MAGIC || raw[8..12] != SLOT_VERSION.to_le_bytes() {
        return None;
    }
    let crc = u32::from_le_bytes(raw[SLOT_BODY..SLOT_BODY + 4].try_into().expect("4 bytes"));
    if crc != crc32(&raw[..SLOT_BODY]) {
        return None;
    }
    let mut node_id = [0u8; 16];
    node_id.copy_from_slice(&raw[20..36]);
    Some((
        u64_at(12),
        NodeState {
            node_id,
            boot: u64_at(36),
            token_reserved: u64_at(44),
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!(
            "redlockd-unit-{name}-{}-{}",
            std::process::id(),
            rand::random::<u64>()
        ))
    }

    #[test]
    fn state_survives_reopen_and_a_torn_slot() {
        let p = temp_dir("state");
        let id = {
            let d = NodeDir::open(&p).unwrap();
            d.update(|s| s.token_reserved = 10).unwrap();
            d.update(|s| s.token_reserved = 20).unwrap();
            d.state().node_id
        };
        // Tear the newest slot (seq 3 lives in slot 1): the older one (10) is used.
        let f = OpenOptions::new()
            .write(true)
            .open(p.join(STATE_FILE))
            .unwrap();
        f.write_all_at(&[0xff; 8], SLOT_LEN as u64 + 40).unwrap();
        drop(f);
        let d = NodeDir::open(&p).unwrap();
        assert_eq!(d.state().node_id, id);
        assert_eq!(d.state().token_reserved, 10);
        drop(d);
        std::fs::remove_dir_all(&p).unwrap();
    }

    #[test]
    fn a_locked_directory_is_refused() {
        let p = temp_dir("lock");
        let first = NodeDir::open(&p).unwrap();
        let err = NodeDir::open(&p).unwrap_err();
        assert!(
            err.to_string().contains("in use by another redlockd node"),
            "{err}"
        );
        drop(first);
        assert!(NodeDir::open(&p).is_ok());
        std::fs::remove_dir_all(&p).unwrap();
    }

    #[test]
    fn a_state_file_with_no_valid_slot_is_refused() {
        let p = temp_dir("corrupt");
        NodeDir::open(&p).unwrap().update(|s| s.boot = 5).unwrap();
        std::fs::write(p.join(STATE_FILE), [7u8; 2 * SLOT_LEN]).unwrap();
        let err = NodeDir::open(&p).unwrap_err();
        assert!(err.to_string().contains("corrupt"), "{err}");
        std::fs::remove_dir_all(&p).unwrap();
    }
}
