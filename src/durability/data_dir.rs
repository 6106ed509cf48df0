//! A node's data directory (`--dir`): the little a lock server must not forget across
//! a restart.
//!
//! - `redlockd.lock`: held with `flock` while the node runs, so two nodes can never
//!   share a directory (each would hand out tokens from the same reservation).
//! - `node.state`: the node's identity (a random id made with the directory), its
//!   generation (bumped, fsynced, at every start: a snapshot is bound to the generation
//!   that wrote it), the fencing-token reservation (the mark may reach this value
//!   without another write), and how far the locks it granted may reach (`History`:
//!   what the restart fence after a crash waits for). Two fixed-size slots, each with a
//!   sequence number and a CRC, are written in turn and fsynced: a write torn by a crash
//!   leaves the other slot, which still covers everything that was ever handed out
//!   (nothing beyond a reservation is handed out before its fsync returns).
//!
//!   A `node.state` older than the node's last run (a backup put back) could move the
//!   token mark back and make a stale snapshot look current, so the file records what
//!   a copy cannot keep: its own inode number (a copy into a new file has another) and,
//!   in every slot, the wall-clock time just before that slot was written, which must
//!   match the time the kernel stamped on the file's inode at that write (its ctime).
//!   Any later change of the file by anything else (`cp -a` or `cat` over it, rsync,
//!   tar, a restore tool; also chmod, chown, touch) moves the ctime, which no tool can
//!   set back. Such a file is refused until an operator accepts it
//!   (`redlockd init --adopt`, which raises the token mark past anything the node can
//!   have handed out, `tokens::after_restore`). A block-level rollback (a filesystem or
//!   VM disk snapshot) restores the ctime too and is not detected.
//! - `snapshot.rdl`: written only by a clean shutdown (see `durability::snapshot`).
//!
//! The directory is created 0700 and its files 0600: the snapshot holds every lock's
//! owner value.

use crate::durability::atomic;
use crate::durability::snapshot::crc32;
use parking_lot::Mutex;
use std::fs::{File, OpenOptions};
use std::io::{self, ErrorKind};
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

const LOCK_FILE: &str = "redlockd.lock";
const STATE_FILE: &str = "node.state";
pub const SNAPSHOT_FILE: &str = "snapshot.rdl";
/// The fixed-name temporary files of earlier versions, removed at open.
const LEGACY_TMP: [&str; 3] = ["node.state.tmp", "snapshot.rdl.tmp", "cluster-map.json.tmp"];

const SLOT_MAGIC: &[u8; 8] = b"RLKDSTAT";
/// Version 1 (64-byte slots) had no history, no inode and no flags; version 2 no write
/// time. Both are read and rewritten as version 3 at the first start.
const SLOT_V1: u32 = 1;
const SLOT_V1_LEN: usize = 64;
const SLOT_V1_BODY: usize = 8 + 4 + 8 + 16 + 8 + 8;
const SLOT_V2: u32 = 2;
const SLOT_V2_BODY: usize = 96;
const SLOT_VERSION: u32 = 3;
/// Bytes per slot: magic 8, version 4, seq 8, node id 16, generation 8, reservation 8,
/// history epoch 16, reach 8, ttl 8, inode 8, flags 1, padding 3, write time 8 (ns
/// since the Unix epoch, or `UNCHECKED`), crc 4, padding.
const SLOT_LEN: usize = 128;
const SLOT_BODY: usize = 104;

/// A slot's write time on a filesystem whose ctime did not follow the wall clock at
/// that write (the write is not checked; logged when written).
const UNCHECKED: i64 = i64::MIN;
/// How far the ctime may lie before the recorded write time: filesystems that keep
/// whole seconds (or two, FAT's) and the kernel's coarse clock.
const CTIME_BEFORE_NS: i64 = 2_000_000_000;
/// How far after: the time between reading the clock and the write reaching the inode
/// (a descheduled thread). A write that took longer is written again (`write`). A
/// restore within this long of the node's last write is not told from that write.
const CTIME_AFTER_NS: i64 = 200_000_000;
/// Writes of one slot before it is left unchecked.
const WRITE_TRIES: u32 = 4;

const FLAG_HISTORY: u8 = 1;
const FLAG_DECLARED_NEW: u8 = 2;

/// How far the locks granted by a node's lives may reach: what the restart fence after
/// a crash must outlast.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct History {
    /// The clock epoch `reach_ms` is counted in (the kernel's boot id for the real
    /// clock): a different epoch now means the machine rebooted since.
    pub epoch: [u8; 16],
    /// No key granted reaches past this instant of `epoch`'s monotonic clock.
    pub reach_ms: u64,
    /// No key alive at any moment of the last life had more than this left (the
    /// longest TTL granted, or the fence it started with): the fence after a reboot.
    pub ttl_ms: u64,
}

/// What `node.state` holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeState {
    /// Random, made with the directory: a snapshot from another node is refused.
    pub node_id: [u8; 16],
    /// The generation, incremented (and fsynced) at every start: a snapshot is only
    /// accepted by the start right after the run that wrote it.
    pub boot: u64,
    /// The fencing-token mark never exceeds this without a new fsynced write.
    pub token_reserved: u64,
    /// What the node's lives granted; `None`: unknown (a directory made without
    /// `redlockd init`, or written by a version that kept none).
    pub history: Option<History>,
    /// Made by `redlockd init`: a brand-new node that never granted anything.
    pub declared_new: bool,
}

/// An open, locked data directory.
pub struct NodeDir {
    path: PathBuf,
    /// Holds the flock for as long as the node runs (released when the file closes,
    /// or by `unlock` once the server has stopped).
    lock: Mutex<Option<File>>,
    state: Mutex<StateFile>,
    /// Whether `node.state` was made by this open (no history at all).
    created: bool,
    /// Test hook: the next state write fails as a failed fsync would.
    fail_next_write: std::sync::atomic::AtomicBool,
}

struct StateFile {
    file: File,
    current: NodeState,
    /// Sequence number of the last slot written; the next write goes to the other slot.
    seq: u64,
    /// The file's inode number, written into every slot.
    ino: u64,
}

/// A decoded slot: its sequence number, the state, the inode it was written for, and
/// when it was written (`None`: version 2, which kept no time).
#[derive(Clone)]
struct Slot {
    seq: u64,
    state: NodeState,
    ino: u64,
    written_ns: Option<i64>,
}

impl std::fmt::Debug for NodeDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NodeDir({})", self.path.display())
    }
}

impl NodeDir {
    /// Creates `path` if missing (0700), locks it, and reads (or creates) the node's
    /// state. Errors say what to do: not writable, locked by another node, a corrupt or
    /// copied state.
    pub fn open(path: &Path) -> io::Result<NodeDir> {
        let lock = lock_dir(path)?;
        atomic::remove_leftovers(path, &LEGACY_TMP)?;
        let (state, created) = StateFile::open(path, false)?;
        Ok(NodeDir {
            path: path.to_path_buf(),
            lock: Mutex::new(Some(lock)),
            state: Mutex::new(state),
            created,
            fail_next_write: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// `redlockd init --dir PATH`: declares a brand-new node (its first start serves at
    /// once), or with `adopt` accepts a `node.state` that was copied or restored: its
    /// identity is kept; its history and snapshot are not (the next start raises the
    /// full fence), and its token reservation jumps past anything the node may have
    /// handed out since the copy was taken (`tokens::after_restore`). Returns what was
    /// done, for the operator.
    pub fn init(path: &Path, adopt: bool) -> io::Result<String> {
        let _lock = lock_dir(path)?;
        let state_path = path.join(STATE_FILE);
        let shown = path.display();
        if adopt {
            if !state_path.exists() {
                return Err(io::Error::new(
                    ErrorKind::NotFound,
                    format!("{} does not exist: nothing to adopt", state_path.display()),
                ));
            }
            let (mut state, _) = StateFile::open(path, true)?;
            let before = state.current.token_reserved;
            let mut next = state.current;
            next.history = None;
            next.declared_new = false;
            next.token_reserved = crate::durability::tokens::after_restore(before, unix_ns());
            state.replace(path, next)?;
            remove_durably(path, SNAPSHOT_FILE)?;
            return Ok(format!(
                "{shown}: node {} adopted; its token mark jumps from {} to {} (past anything it can have handed out since this copy was made); its snapshot was removed and its next start raises the full restart fence",
                crate::protocol::numfmt::hex(&next.node_id),
                before,
                next.token_reserved
            ));
        }
        if state_path.exists() {
            return Err(io::Error::new(
                ErrorKind::AlreadyExists,
                format!(
                    "{} exists: {shown} already belongs to a node (a node that ran may hold locks; it is not new)",
                    state_path.display()
                ),
            ));
        }
        let (mut state, _) = StateFile::open(path, false)?;
        let mut next = state.current;
        next.declared_new = true;
        state.write(next)?;
        Ok(format!(
            "{shown}: new node {} declared; its first start serves at once",
            crate::protocol::numfmt::hex(&next.node_id)
        ))
    }

    /// Releases the directory for another node (this server has stopped and will not
    /// write to it again).
    pub fn unlock(&self) {
        self.lock.lock().take();
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether this open made `node.state` (the directory had no node in it).
    pub fn created(&self) -> bool {
        self.created
    }

    /// Where the node's snapshot file is (or will be) in the directory.
    pub fn snapshot_path(&self) -> PathBuf {
        self.path.join(SNAPSHOT_FILE)
    }

    /// The node's state record as last read or written.
    pub fn state(&self) -> NodeState {
        self.state.lock().current
    }

    /// Test hook: the next `update` fails with EIO, as a failed fsync would, and
    /// changes nothing.
    #[doc(hidden)]
    pub fn fail_next_write(&self) {
        self.fail_next_write
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Changes the state and makes it durable (one fsync) before returning.
    pub fn update(&self, change: impl FnOnce(&mut NodeState)) -> io::Result<NodeState> {
        if self
            .fail_next_write
            .swap(false, std::sync::atomic::Ordering::SeqCst)
        {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
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
        atomic::remove_leftovers(&self.path, &LEGACY_TMP)?;
        let mut s = self.state.lock();
        std::fs::remove_file(self.path.join(STATE_FILE))?;
        *s = StateFile::open(&self.path, false)?.0;
        Ok(())
    }

    /// Writes a snapshot atomically (`atomic::atomic_write`, 0600). A crash at any
    /// point leaves either no snapshot (or the earlier one) or the whole new one.
    pub fn write_snapshot(&self, bytes: &[u8]) -> io::Result<()> {
        atomic::atomic_write(&self.snapshot_path(), bytes)
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
        remove_durably(&self.path, SNAPSHOT_FILE)
    }
}

/// How many 10 ms waits `lock_dir` makes for a directory whose lock is held.
const LOCK_WAIT_STEPS: u32 = 200;

/// Creates `path` (0700) if missing and takes its flock.
fn lock_dir(path: &Path) -> io::Result<File> {
    lock_dir_waiting(path, LOCK_WAIT_STEPS, || {
        std::thread::sleep(std::time::Duration::from_millis(10))
    })
}

/// `lock_dir`, calling `wait` up to `steps` times while another holds the lock.
fn lock_dir_waiting(path: &Path, steps: u32, mut wait: impl FnMut()) -> io::Result<File> {
    let shown = path.display();
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot create data directory {shown}: {e}"),
            )
        })?;
    let lock = private_file(&path.join(LOCK_FILE), false).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("data directory {shown} is not writable: {e}"),
        )
    })?;
    // A node that is stopping lets go of its directory a moment after it stops
    // answering (its last fsync, a sweep in flight): a restart in its place (systemd's,
    // a test's) waits up to 2 s for the lock before calling the directory in use.
    let mut waited = 0;
    // SAFETY: flock on a descriptor this function owns; no memory is involved.
    while unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let e = io::Error::last_os_error();
        if e.kind() == ErrorKind::WouldBlock && waited < steps {
            waited += 1;
            wait();
            continue;
        }
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
    Ok(lock)
}

/// Opens (creating 0600, readable and writable) a file of the data directory.
fn private_file(path: &Path, truncate: bool) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .truncate(truncate)
        .read(true)
        .write(true)
        .mode(0o600)
        .open(path)
}

fn remove_durably(dir: &Path, name: &str) -> io::Result<()> {
    match std::fs::remove_file(dir.join(name)) {
        Ok(()) => sync_dir(dir),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

fn sync_dir(path: &Path) -> io::Result<()> {
    File::open(path)?.sync_all()
}

impl StateFile {
    /// Reads `node.state`, or makes a new identity when there is none. `adopting`
    /// accepts a file that was copied or changed by something else (see
    /// `NodeDir::init`). Returns whether the file was made now.
    fn open(dir: &Path, adopting: bool) -> io::Result<(StateFile, bool)> {
        let path = dir.join(STATE_FILE);
        let file = private_file(&path, false)?;
        let meta = file.metadata()?;
        let ino = meta.ino();
        let mut raw = vec![0u8; 2 * SLOT_LEN];
        let n = (meta.len() as usize).min(raw.len());
        file.read_exact_at(&mut raw[..n], 0)?;
        let slots: Vec<Slot> = [decode_slot(&raw[..SLOT_LEN]), decode_slot(&raw[SLOT_LEN..])]
            .into_iter()
            .flatten()
            .collect();
        if let Some(latest) = slots.iter().max_by_key(|s| s.seq) {
            if !adopting {
                if let Some(why) = not_as_written(latest, &slots, ino, ctime_ns(&meta)) {
                    return Err(io::Error::new(
                        ErrorKind::InvalidData,
                        format!(
                            "{} {why}: a directory restored from a backup may hold a token mark below tokens this node already handed out, and a stale snapshot. Accept it with `redlockd init --dir {} --adopt` (its token mark then jumps past anything it can have handed out, and the next start raises the full restart fence); see the operations guide, \"Backups and restores\"",
                            path.display(),
                            dir.display()
                        ),
                    ));
                }
            }
            let latest = latest.clone();
            let mut state = StateFile {
                file,
                current: latest.state,
                seq: latest.seq,
                ino,
            };
            if latest.written_ns.is_none() {
                // A version 2 file (no write time): rewritten whole.
                state.replace(dir, latest.state)?;
            }
            return Ok((state, false));
        }
        let v1 = [
            decode_v1_slot(&raw[..SLOT_V1_LEN]),
            decode_v1_slot(&raw[SLOT_V1_LEN..2 * SLOT_V1_LEN]),
        ];
        if let Some((_, old)) = v1.iter().flatten().max_by_key(|(seq, _)| *seq).copied() {
            // An older version's file: no history, no inode. Rewritten whole.
            let mut state = StateFile {
                file,
                current: old,
                seq: 0,
                ino,
            };
            state.replace(dir, old)?;
            return Ok((state, false));
        }
        // No valid slot. Only a first write cut short by a crash leaves that, and then
        // nothing was ever handed out: slot 0 (written second) is still untouched.
        if raw[..SLOT_LEN].iter().any(|&b| b != 0) {
            return Err(io::Error::new(
                ErrorKind::InvalidData,
                format!(
                    "{} is corrupt (no slot passes its checksum): the fencing-token mark is unknown, so tokens could go backwards. Move it away to start this node with a new identity and the full restart fence (its token mark then restarts at 0); see the operations guide, \"Backups and restores\"",
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
                history: None,
                declared_new: false,
            },
            seq: 0,
            ino,
        };
        state.write(state.current)?;
        sync_dir(dir)?;
        Ok((state, true))
    }

    /// Writes `next` into the older slot and fsyncs it with the file's metadata (the
    /// ctime must be as durable as the slot that names it). A write whose ctime is not
    /// within `CTIME_AFTER_NS` of the time read before it is written again with a new
    /// time; after `WRITE_TRIES` the slot is left unchecked (logged).
    fn write(&mut self, next: NodeState) -> io::Result<()> {
        let seq = self.seq + 1;
        let at = (seq % 2) * SLOT_LEN as u64;
        let mut tries = 0;
        loop {
            tries += 1;
            let written_ns = unix_ns();
            self.file
                .write_all_at(&encode_slot(seq, &next, self.ino, written_ns), at)?;
            let ctime = ctime_ns(&self.file.metadata()?);
            if ctime_matches(written_ns, ctime) {
                break;
            }
            if tries == WRITE_TRIES {
                static WARNED: std::sync::atomic::AtomicBool =
                    std::sync::atomic::AtomicBool::new(false);
                if !WARNED.swap(true, std::sync::atomic::Ordering::Relaxed) {
                    tracing::warn!(
                        "node.state's inode change time ({ctime} ns) does not follow the wall clock ({written_ns} ns when written) on this filesystem: such writes are left unchecked, and a backup of one put back would not be recognised (said once)"
                    );
                }
                self.file
                    .write_all_at(&encode_slot(seq, &next, self.ino, UNCHECKED), at)?;
                break;
            }
        }
        self.file.sync_all()?;
        self.seq = seq;
        self.current = next;
        Ok(())
    }

    /// Writes `next` as a whole new file (`atomic::replace_with`): for a change of
    /// format or of inode, where writing slots in place could tear the only good copy.
    /// The slot names the new file's inode. The rename changes the new file's ctime,
    /// so `next` is then written once more in place, stamped after it.
    fn replace(&mut self, dir: &Path, next: NodeState) -> io::Result<()> {
        let (file, ino) = atomic::replace_with(&dir.join(STATE_FILE), |file| {
            let ino = file.metadata()?.ino();
            let slot = encode_slot(1, &next, ino, UNCHECKED);
            file.write_all_at(&slot, SLOT_LEN as u64)?;
            file.set_len(2 * SLOT_LEN as u64)?;
            Ok(ino)
        })?;
        self.file = file;
        self.ino = ino;
        self.seq = 1;
        self.current = next;
        self.write(next)
    }
}

/// Why the file whose newest slot is `latest` is not the one this node last wrote
/// (`None`: it is): another inode (a copy into a new file), or an inode changed after
/// the last write (a copy over it, or any other change by another program). The ctime
/// may also be that of the other slot's write: a power loss after the newest slot
/// reached the disk but before its inode change was made durable.
fn not_as_written(latest: &Slot, slots: &[Slot], ino: u64, ctime: i64) -> Option<String> {
    if latest.ino != ino {
        return Some(format!(
            "is a copy (its inode is {ino}, it was written as {})",
            latest.ino
        ));
    }
    let stamped = |s: &Slot| {
        s.written_ns
            .is_some_and(|w| w != UNCHECKED && ctime_matches(w, ctime))
    };
    match latest.written_ns {
        // A version 2 slot, or a write this filesystem's ctime did not follow: nothing
        // to check.
        None | Some(UNCHECKED) => None,
        Some(w) if !slots.iter().any(stamped) => Some(format!(
            "was changed by something other than this node after its last write (a backup restored over it, a copy, a chmod or chown: its inode changed at {} but the node last wrote it at {})",
            show_unix_ns(ctime),
            show_unix_ns(w)
        )),
        _ => None,
    }
}

/// Whether an inode change at `ctime` is the write stamped `written` (both ns since
/// the Unix epoch).
fn ctime_matches(written: i64, ctime: i64) -> bool {
    let d = ctime.saturating_sub(written);
    (-CTIME_BEFORE_NS..=CTIME_AFTER_NS).contains(&d)
}

/// The inode change time, ns since the Unix epoch.
fn ctime_ns(meta: &std::fs::Metadata) -> i64 {
    meta.ctime()
        .saturating_mul(1_000_000_000)
        .saturating_add(meta.ctime_nsec())
}

/// The wall clock (the one the kernel stamps inodes with), ns since the Unix epoch.
pub(crate) fn unix_ns() -> i64 {
    match std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_nanos()).unwrap_or(i64::MAX),
    }
}

/// Tests: writes `bytes` as `dir`'s `node.state`, in place, as if the node had just
/// written them: each slot's write time is made now (and its checksum sealed again),
/// so the file is not taken for a restored one. For tests that put an earlier state
/// back to reach a case behind that check.
#[cfg(test)]
pub(crate) fn put_back_state_as_written(dir: &Path, bytes: &[u8]) {
    let mut bytes = bytes.to_vec();
    let now = unix_ns();
    for slot in bytes.chunks_exact_mut(SLOT_LEN) {
        if decode_slot(slot).is_some_and(|s| s.written_ns.is_some()) {
            slot[96..104].copy_from_slice(&now.to_le_bytes());
            let crc = crc32(&slot[..SLOT_BODY]);
            slot[SLOT_BODY..SLOT_BODY + 4].copy_from_slice(&crc.to_le_bytes());
        }
    }
    std::fs::write(dir.join(STATE_FILE), bytes).unwrap();
}

/// `s.nnnnnnnnn` seconds since the Unix epoch, for the refusal message.
fn show_unix_ns(ns: i64) -> String {
    format!(
        "{}.{:09} s (Unix time)",
        ns.div_euclid(1_000_000_000),
        ns.rem_euclid(1_000_000_000)
    )
}

fn encode_slot(seq: u64, s: &NodeState, ino: u64, written_ns: i64) -> [u8; SLOT_LEN] {
    let mut out = [0u8; SLOT_LEN];
    out[..8].copy_from_slice(SLOT_MAGIC);
    out[8..12].copy_from_slice(&SLOT_VERSION.to_le_bytes());
    out[12..20].copy_from_slice(&seq.to_le_bytes());
    out[20..36].copy_from_slice(&s.node_id);
    out[36..44].copy_from_slice(&s.boot.to_le_bytes());
    out[44..52].copy_from_slice(&s.token_reserved.to_le_bytes());
    let mut flags = 0;
    if let Some(h) = &s.history {
        flags |= FLAG_HISTORY;
        out[52..68].copy_from_slice(&h.epoch);
        out[68..76].copy_from_slice(&h.reach_ms.to_le_bytes());
        out[76..84].copy_from_slice(&h.ttl_ms.to_le_bytes());
    }
    if s.declared_new {
        flags |= FLAG_DECLARED_NEW;
    }
    out[84..92].copy_from_slice(&ino.to_le_bytes());
    out[92] = flags;
    out[96..104].copy_from_slice(&written_ns.to_le_bytes());
    let crc = crc32(&out[..SLOT_BODY]);
    out[SLOT_BODY..SLOT_BODY + 4].copy_from_slice(&crc.to_le_bytes());
    out
}

/// A version 3 slot, or a version 2 one (same layout without the write time, its
/// checksum at 96).
fn decode_slot(raw: &[u8]) -> Option<Slot> {
    let u64_at = |i: usize| u64::from_le_bytes(raw[i..i + 8].try_into().expect("8 bytes"));
    if &raw[..8] != SLOT_MAGIC {
        return None;
    }
    let version = u32::from_le_bytes(raw[8..12].try_into().expect("4 bytes"));
    let body = match version {
        SLOT_VERSION => SLOT_BODY,
        SLOT_V2 => SLOT_V2_BODY,
        _ => return None,
    };
    let crc = u32::from_le_bytes(raw[body..body + 4].try_into().expect("4 bytes"));
    if crc != crc32(&raw[..body]) {
        return None;
    }
    let mut node_id = [0u8; 16];
    node_id.copy_from_slice(&raw[20..36]);
    let flags = raw[92];
    let history = (flags & FLAG_HISTORY != 0).then(|| {
        let mut epoch = [0u8; 16];
        epoch.copy_from_slice(&raw[52..68]);
        History {
            epoch,
            reach_ms: u64_at(68),
            ttl_ms: u64_at(76),
        }
    });
    Some(Slot {
        seq: u64_at(12),
        state: NodeState {
            node_id,
            boot: u64_at(36),
            token_reserved: u64_at(44),
            history,
            declared_new: flags & FLAG_DECLARED_NEW != 0,
        },
        ino: u64_at(84),
        written_ns: (version == SLOT_VERSION).then(|| u64_at(96) as i64),
    })
}

fn decode_v1_slot(raw: &[u8]) -> Option<(u64, NodeState)> {
    let u64_at = |i: usize| u64::from_le_bytes(raw[i..i + 8].try_into().expect("8 bytes"));
    if &raw[..8] != SLOT_MAGIC || raw[8..12] != SLOT_V1.to_le_bytes() {
        return None;
    }
    let crc = u32::from_le_bytes(
        raw[SLOT_V1_BODY..SLOT_V1_BODY + 4]
            .try_into()
            .expect("4 bytes"),
    );
    if crc != crc32(&raw[..SLOT_V1_BODY]) {
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
            history: None,
            declared_new: false,
        },
    ))
}

#[cfg(test)]
mod tests;
