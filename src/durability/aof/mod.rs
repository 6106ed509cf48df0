//! The append-only log of durable keys, in Redis 7's multi-part AOF format.
//!
//! A key is *memory-only* when, at the end of the command that wrote it, its TTL is at
//! most `--memory-only-ttl` (default 60 s): the restart fence covers it, as it covers
//! every key of a node without the log. Every other key is *durable*: each change to it
//! is appended here as a Redis command (`propagate` decides which, and in what form)
//! and fsynced before any reply of the batch that made it, or of any batch that ran
//! after it, is written (group commit: one `fdatasync` for everything appended while
//! the previous one ran, across connections). Boot replays the log (`load`).
//!
//! Files (in `<dir>/<appenddirname>`, prefix `appendfilename`): `<prefix>.<n>.base.aof`
//! (a rewrite's snapshot of the durable keys, RESP commands), `<prefix>.<n>.incr.aof`
//! (commands since), and `<prefix>.manifest` naming them (`manifest`). `redis-check-aof`
//! reads them, and redis-server 7 loads them.
//!
//! Ordering: a write command that may log runs its handler and appends its entry
//! under one mutex (`Aof::order`), so the log's order is the order in which changes
//! became visible. Scripts and EXEC hold the keyspace gate exclusively and append their
//! effects, wrapped in MULTI/EXEC, when they end.
//!
//! Failure: a failed write or fsync stops the log for this life: the bytes after the
//! last good fsync are cut off (best effort), the replies waiting for them are never
//! sent (their connections are closed), and every write command gets `-MISCONF` until
//! the node restarts (a later fsync's success proves nothing: fsyncgate).

pub mod load;
pub mod manifest;
pub mod propagate;
pub mod rewrite;

use crate::config::AofConfig;
use bytes::Bytes;
use manifest::{Manifest, Part};
use parking_lot::{Condvar, Mutex};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// The log of one node.
pub struct Aof {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    /// The log's directory; `None`: the log is off.
    pub(crate) dir: Option<PathBuf>,
    pub(crate) config: AofConfig,
    /// TTLs above this (ms) are durable.
    pub(crate) threshold_ms: u64,
    /// Held by a write command from before its handler runs until its entry is
    /// appended (see the module docs).
    pub(crate) order: Mutex<()>,
    buf: Mutex<Buf>,
    filled: Condvar,
    /// The open files; the writer thread holds it while it writes and syncs.
    pub(crate) files: Mutex<Option<Files>>,
    /// Sequence number of the last entry appended to `buf`.
    appended: AtomicU64,
    /// Sequence number of the last entry the writer took from `buf` (written under
    /// the `buf` lock): a batch waiting for more than this waits for the next fsync.
    taken: AtomicU64,
    /// Every entry up to this sequence number is on disk.
    synced: AtomicU64,
    /// Entries in this range (first, last) were dropped unsynced by a crash-restart of
    /// this process: never synced, whatever `synced` says.
    lost: (AtomicU64, AtomicU64),
    failed: Mutex<Option<String>>,
    failed_flag: AtomicBool,
    woken: tokio::sync::Notify,
    /// Replaying: nothing is logged.
    loading: AtomicBool,
    /// Counts lives (boots): a rewrite of an earlier life finishes nothing.
    pub(crate) life: AtomicU64,
    pub(crate) stats: Stats,
    /// Test hook: the next fsync fails (EIO).
    fail_next_fsync: AtomicBool,
    /// Test hook: every fsync takes this much longer (ms), as on a slow disk.
    fsync_delay_ms: AtomicU64,
    /// The writer thread was started.
    pub(crate) started: AtomicBool,
}

/// Counters for INFO persistence.
#[derive(Default)]
pub(crate) struct Stats {
    pub rewrites: AtomicU64,
    pub rewrite_in_progress: AtomicBool,
    pub rewrite_failed_last: AtomicBool,
    pub rewrites_consecutive_failures: AtomicU64,
    pub last_rewrite_ms: AtomicU64,
    pub rewrite_scheduled: AtomicBool,
    pub fsyncs: AtomicU64,
    pub loaded_commands: AtomicU64,
    pub truncated_bytes: AtomicU64,
}

struct Buf {
    bytes: Vec<u8>,
    /// The database the last appended entry ran in (`None`: a SELECT goes first).
    db: Option<usize>,
    /// Connections' batches waiting (`Aof::wait_synced`) for what `bytes` holds.
    waiting: usize,
    /// Batches waiting for the fsync in progress (what the writer took last).
    released: usize,
    /// How many waiting batches the writer gathers before its next fsync; the last
    /// to register wakes it.
    target: usize,
}

/// The open log: the manifest in force and the incr file appended to.
pub(crate) struct Files {
    pub dir: PathBuf,
    pub manifest: Manifest,
    pub incr: File,
    pub incr_size: u64,
    /// Bytes of every incr file but the open one, and of the base.
    pub earlier_size: u64,
    pub base_size: u64,
    /// The log's size right after the last rewrite (or at boot): the auto rewrite's
    /// measure of growth.
    pub rewrite_base_size: u64,
}

impl Files {
    pub fn total_size(&self) -> u64 {
        self.earlier_size + self.incr_size
    }
}

/// One logged command: its database and arguments.
pub type Entry = (usize, Vec<Bytes>);

/// Appends `args` as a RESP array to `out` (formatted in place: a rewrite renders a
/// shard's keys with this while it holds the shard's lock).
pub fn encode_command(out: &mut Vec<u8>, args: &[&[u8]]) {
    // Writing to a Vec cannot fail.
    let _ = write!(out, "*{}\r\n", args.len());
    for a in args {
        let _ = write!(out, "${}\r\n", a.len());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

fn encode_entry(out: &mut Vec<u8>, last_db: &mut Option<usize>, (db, args): &Entry) {
    if *last_db != Some(*db) {
        encode_command(out, &[b"SELECT", db.to_string().as_bytes()]);
        *last_db = Some(*db);
    }
    let refs: Vec<&[u8]> = args.iter().map(|a| &a[..]).collect();
    encode_command(out, &refs);
}

impl Aof {
    /// The log of a node with `config`: off without `appendonly` or a data directory.
    pub fn new(config: &crate::config::Config) -> Aof {
        let dir = (config.aof_enabled())
            .then(|| config.dir.as_ref().map(|d| d.join(&config.aof.dirname)))
            .flatten();
        Aof {
            inner: Arc::new(Inner {
                dir,
                config: config.aof.clone(),
                threshold_ms: config.aof.memory_only_ttl.as_millis() as u64,
                order: Mutex::new(()),
                buf: Mutex::new(Buf {
                    bytes: Vec::new(),
                    db: None,
                    waiting: 0,
                    released: 0,
                    target: 0,
                }),
                filled: Condvar::new(),
                files: Mutex::new(None),
                appended: AtomicU64::new(0),
                taken: AtomicU64::new(0),
                synced: AtomicU64::new(0),
                lost: (AtomicU64::new(1), AtomicU64::new(0)),
                failed: Mutex::new(None),
                failed_flag: AtomicBool::new(false),
                woken: tokio::sync::Notify::new(),
                loading: AtomicBool::new(false),
                life: AtomicU64::new(0),
                stats: Stats::default(),
                fail_next_fsync: AtomicBool::new(false),
                fsync_delay_ms: AtomicU64::new(0),
                started: AtomicBool::new(false),
            }),
        }
    }

    pub(crate) fn inner(&self) -> &Arc<Inner> {
        &self.inner
    }

    /// Whether the log is on (`appendonly` with a data directory).
    pub fn enabled(&self) -> bool {
        self.inner.dir.is_some()
    }

    /// Whether commands are logged now: on, and not replaying.
    #[inline]
    pub fn logging(&self) -> bool {
        self.inner.dir.is_some() && !self.inner.loading.load(Ordering::Relaxed)
    }

    /// The memory-only threshold (ms): a key with a TTL above it is durable.
    pub fn threshold_ms(&self) -> u64 {
        self.inner.threshold_ms
    }

    /// The mutex a logging write holds from its handler to its append.
    pub fn order(&self) -> parking_lot::MutexGuard<'_, ()> {
        self.inner.order.lock()
    }

    /// The error every command that reads or writes keys gets once the log has failed
    /// (`-MISCONF`, Redis's words): the keyspace may hold changes that are not on disk,
    /// so nothing is told of it until a restart reloads the log.
    pub fn refusal(&self) -> Option<String> {
        if !self.inner.failed_flag.load(Ordering::Relaxed) {
            return None;
        }
        let why = self.inner.failed.lock().clone().unwrap_or_default();
        Some(format!(
            "MISCONF Errors writing to the AOF file: {why}; this node acknowledges no write until it is restarted"
        ))
    }

    /// Appends `entries` (wrapped in MULTI/EXEC when more than one) for the writer
    /// thread; returns their sequence number, which `wait_synced` waits for.
    pub fn append(&self, entries: &[Entry]) -> u64 {
        let i = &self.inner;
        let mut buf = i.buf.lock();
        let Buf { bytes, db, .. } = &mut *buf;
        let was_empty = bytes.is_empty();
        let wrap = entries.len() > 1;
        if wrap {
            encode_command(bytes, &[b"MULTI"]);
        }
        for e in entries {
            encode_entry(bytes, db, e);
        }
        if wrap {
            encode_command(bytes, &[b"EXEC"]);
        }
        let seq = i.appended.fetch_add(1, Ordering::SeqCst) + 1;
        drop(buf);
        // The writer waits for a first byte, or for waiting batches (`register_wait`).
        if was_empty {
            i.filled.notify_one();
        }
        seq
    }

    /// The sequence number of the last entry appended: a batch's replies are written
    /// only once it is synced (they may have read what it wrote).
    #[inline]
    pub fn appended(&self) -> u64 {
        self.inner.appended.load(Ordering::SeqCst)
    }

    /// This process's count of boots of the node: a batch that ran in an earlier life
    /// (before a crash-restart of the test backend) is never answered.
    #[inline]
    pub fn life(&self) -> u64 {
        self.inner.life.load(Ordering::SeqCst)
    }

    /// Whether everything up to `seq` is on disk already.
    #[inline]
    pub fn is_synced(&self, seq: u64) -> bool {
        self.inner.synced.load(Ordering::SeqCst) >= seq && !self.is_lost(seq)
    }

    /// Whether `seq` was dropped unsynced by a crash-restart of this process.
    #[inline]
    fn is_lost(&self, seq: u64) -> bool {
        let (first, last) = &self.inner.lost;
        seq >= first.load(Ordering::SeqCst) && seq <= last.load(Ordering::SeqCst)
    }

    /// Waits until everything up to `seq` is on disk; `Err` (the reason) if it never
    /// will be: the log failed, or a crash-restart dropped it.
    pub async fn wait_synced(&self, seq: u64) -> Result<(), String> {
        let i = &self.inner;
        self.register_wait(seq);
        loop {
            let woken = i.woken.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            if self.is_lost(seq) {
                return Err("dropped by a restart before it was on disk".into());
            }
            if i.synced.load(Ordering::SeqCst) >= seq {
                return Ok(());
            }
            if let Some(e) = i.failed.lock().clone() {
                return Err(e);
            }
            woken.await;
        }
    }

    /// Counts a batch waiting for `seq` for the fsync that will release it: the writer
    /// gathers, before it fsyncs, about as many batches as its last fsync released
    /// (`writer`).
    fn register_wait(&self, seq: u64) {
        let i = &self.inner;
        if i.synced.load(Ordering::SeqCst) >= seq {
            return;
        }
        let mut buf = i.buf.lock();
        if seq > i.taken.load(Ordering::SeqCst) {
            buf.waiting += 1;
            let gathered = buf.waiting >= buf.target;
            drop(buf);
            if gathered {
                i.filled.notify_one();
            }
        } else {
            buf.released += 1;
        }
    }

    /// Test hook: the next fsync of the log fails with EIO.
    pub fn fail_next_fsync(&self) {
        self.inner.fail_next_fsync.store(true, Ordering::SeqCst);
    }

    /// Test hook: every fsync of the log takes `ms` longer, as on a slow disk.
    pub fn delay_fsyncs(&self, ms: u64) {
        self.inner.fsync_delay_ms.store(ms, Ordering::SeqCst);
    }

    /// The log's size in bytes (base and incr files), its base's size, and its size
    /// right after the last rewrite.
    pub fn sizes(&self) -> Option<(u64, u64, u64)> {
        let f = self.inner.files.lock();
        f.as_ref()
            .map(|f| (f.total_size(), f.base_size, f.rewrite_base_size))
    }

    /// Unsynced bytes waiting for the writer.
    pub fn buffered(&self) -> usize {
        self.inner.buf.lock().bytes.len()
    }

    pub fn is_failed(&self) -> bool {
        self.inner.failed_flag.load(Ordering::Relaxed)
    }

    pub(crate) fn set_loading(&self, on: bool) {
        self.inner.loading.store(on, Ordering::SeqCst);
    }

    pub fn is_loading(&self) -> bool {
        self.inner.loading.load(Ordering::Relaxed)
    }

    /// Drops what was appended but not written (a crash loses it: nobody was
    /// answered), forgets a failure, and closes the files: the start of a new life.
    /// Waiters for the dropped entries get an error.
    pub(crate) fn reset_for_boot(&self) {
        let i = &self.inner;
        let mut files = i.files.lock();
        let mut buf = i.buf.lock();
        buf.bytes.clear();
        buf.db = None;
        buf.waiting = 0;
        buf.released = 0;
        buf.target = 0;
        // The life first, then the lost range, then the counters: a connection that
        // reads `appended` and then finds the same life knows its batch's entries are
        // either synced or in the lost range (`wait_synced`).
        i.life.fetch_add(1, Ordering::SeqCst);
        let appended = i.appended.load(Ordering::SeqCst);
        let synced = i.synced.load(Ordering::SeqCst);
        if appended > synced {
            // Last first: a reader never sees a range wider than the truth.
            i.lost.1.store(0, Ordering::SeqCst);
            i.lost.0.store(synced + 1, Ordering::SeqCst);
            i.lost.1.store(appended, Ordering::SeqCst);
        }
        // A new life starts synced, one past what was lost: its batches wait only for
        // what it appends itself.
        i.appended.store(appended + 1, Ordering::SeqCst);
        i.synced.store(appended + 1, Ordering::SeqCst);
        *i.failed.lock() = None;
        i.failed_flag.store(false, Ordering::SeqCst);
        *files = None;
        drop(buf);
        drop(files);
        i.woken.notify_waiters();
    }

    /// Starts the writer thread once (it lives as long as the node).
    pub(crate) fn start_writer(&self) {
        if self.inner.started.swap(true, Ordering::SeqCst) {
            return;
        }
        let inner = Arc::downgrade(&self.inner);
        std::thread::Builder::new()
            .name("redlockd-aof".into())
            .spawn(move || writer(inner))
            .expect("the log's writer thread starts");
    }

    /// Test hook, a power cut: what was appended but not written is dropped, what was
    /// written but not fsynced is cut off the incr file, and the log is closed (the
    /// next boot reopens it).
    pub fn power_cut(&self) {
        let i = &self.inner;
        let mut files = i.files.lock();
        i.buf.lock().bytes.clear();
        if let Some(f) = files.as_ref() {
            if let Err(e) = f.incr.set_len(f.incr_size) {
                tracing::warn!("power-cut simulation: cannot cut the log: {e}");
            }
        }
        *files = None;
    }
}

impl Aof {
    /// INFO persistence: Redis 7.0's fields, the log's where they mean the same.
    pub fn info(&self, out: &mut String) {
        use std::fmt::Write as _;
        let s = &self.inner.stats;
        let on = self.enabled();
        let _ = write!(
            out,
            "loading:{}\r\nasync_loading:0\r\nrdb_changes_since_last_save:0\r\nrdb_bgsave_in_progress:0\r\naof_enabled:{}\r\naof_rewrite_in_progress:{}\r\naof_rewrite_scheduled:{}\r\naof_last_rewrite_time_sec:{}\r\naof_last_bgrewrite_status:{}\r\naof_rewrites:{}\r\naof_rewrites_consecutive_failures:{}\r\naof_last_write_status:{}\r\n",
            u8::from(self.is_loading()),
            u8::from(on),
            u8::from(s.rewrite_in_progress.load(Ordering::Relaxed)),
            u8::from(s.rewrite_scheduled.load(Ordering::Relaxed)),
            if s.rewrites.load(Ordering::Relaxed) == 0 {
                -1
            } else {
                (s.last_rewrite_ms.load(Ordering::Relaxed) / 1000) as i64
            },
            if s.rewrite_failed_last.load(Ordering::Relaxed) { "err" } else { "ok" },
            s.rewrites.load(Ordering::Relaxed),
            s.rewrites_consecutive_failures.load(Ordering::Relaxed),
            if self.is_failed() { "err" } else { "ok" },
        );
        if let (true, Some((size, base, _))) = (on, self.sizes()) {
            let _ = write!(
                out,
                "aof_current_size:{size}\r\naof_base_size:{base}\r\naof_pending_rewrite:0\r\naof_buffer_length:{}\r\naof_pending_bio_fsync:0\r\naof_delayed_fsync:0\r\naof_fsyncs:{}\r\naof_loaded_commands:{}\r\naof_truncated_bytes:{}\r\nmemory_only_ttl_ms:{}\r\n",
                self.buffered(),
                s.fsyncs.load(Ordering::Relaxed),
                s.loaded_commands.load(Ordering::Relaxed),
                s.truncated_bytes.load(Ordering::Relaxed),
                self.threshold_ms(),
            );
        }
    }
}

impl Drop for Aof {
    fn drop(&mut self) {
        // Wakes the writer, which then sees the node is gone.
        self.inner.filled.notify_all();
    }
}

/// The longest the writer waits for batches to come back before an fsync: the last
/// fsync's time, at most this.
const GATHER_MAX: std::time::Duration = std::time::Duration::from_millis(2);

/// The writer thread: takes everything appended, writes it, fsyncs it, publishes the
/// synced sequence number, and wakes the waiting connections; meanwhile the next
/// batch fills.
///
/// Gathering: the connections an fsync released mostly send their next write within
/// a client round trip. Starting the next fsync at the first of them would split the
/// clients into two groups fsynced in turn, each waiting for the other's fsync: two
/// fsyncs per round of requests where one does (measured: ~26 requests per fsync with
/// 50 clients at P=1, against redis-server's ~50). So before an fsync the writer waits
/// until as many batches wait for the buffer as the last fsync released plus those
/// that were waiting already (`Buf::target`), or as long as the last fsync took has
/// passed since it ended (at most `GATHER_MAX`), whichever comes first: a batch whose
/// peers do not come back waits at most one more fsync's time, as it would behind the
/// other group. A lone client never waits: its one batch is the whole target.
fn writer(inner: std::sync::Weak<Inner>) {
    // When the last fsync ended and how long it took.
    let mut ended = std::time::Instant::now();
    let mut took = std::time::Duration::ZERO;
    loop {
        let Some(i) = inner.upgrade() else { return };
        {
            let mut buf = i.buf.lock();
            if buf.bytes.is_empty() {
                // Timed, so a dropped node's thread ends.
                i.filled
                    .wait_for(&mut buf, std::time::Duration::from_millis(200));
                if buf.bytes.is_empty() {
                    continue;
                }
            }
            let deadline = ended + took.min(GATHER_MAX);
            while buf.waiting < buf.target && !i.filled.wait_until(&mut buf, deadline).timed_out() {
            }
        }
        let mut files = i.files.lock();
        let (bytes, seq) = {
            let mut buf = i.buf.lock();
            let seq = i.appended.load(Ordering::SeqCst);
            i.taken.store(seq, Ordering::SeqCst);
            buf.released = std::mem::take(&mut buf.waiting);
            (std::mem::take(&mut buf.bytes), seq)
        };
        if bytes.is_empty() {
            continue;
        }
        if i.failed_flag.load(Ordering::SeqCst) {
            continue;
        }
        let Some(f) = files.as_mut() else {
            continue;
        };
        let started = std::time::Instant::now();
        match write_and_sync(&i, f, &bytes) {
            Ok(()) => {
                i.synced.fetch_max(seq, Ordering::SeqCst);
                if auto_rewrite_due(&i.config, f) {
                    i.stats.rewrite_scheduled.store(true, Ordering::SeqCst);
                }
            }
            Err(e) => {
                tracing::error!(
                    "cannot write the append-only log: {e}; this node acknowledges no write until it is restarted"
                );
                // Best effort: what was not synced goes, so no reader trusts it.
                let _ = f.incr.set_len(f.incr_size);
                *i.failed.lock() = Some(e.to_string());
                i.failed_flag.store(true, Ordering::SeqCst);
            }
        }
        drop(files);
        ended = std::time::Instant::now();
        took = ended - started;
        {
            let mut buf = i.buf.lock();
            buf.target = buf.released + buf.waiting;
        }
        i.woken.notify_waiters();
    }
}

pub(crate) fn write_and_sync(i: &Inner, f: &mut Files, bytes: &[u8]) -> io::Result<()> {
    f.incr.write_all(bytes)?;
    if i.fail_next_fsync.swap(false, Ordering::SeqCst) {
        return Err(io::Error::from_raw_os_error(libc::EIO));
    }
    let delay = i.fsync_delay_ms.load(Ordering::Relaxed);
    if delay > 0 {
        std::thread::sleep(std::time::Duration::from_millis(delay));
    }
    f.incr.sync_data()?;
    i.stats.fsyncs.fetch_add(1, Ordering::Relaxed);
    f.incr_size += bytes.len() as u64;
    Ok(())
}

/// Redis's rule: past `auto-aof-rewrite-min-size` and grown by the percentage over
/// the size after the last rewrite.
fn auto_rewrite_due(c: &AofConfig, f: &Files) -> bool {
    let size = f.total_size();
    if c.rewrite_percentage == 0 || size < c.rewrite_min_size {
        return false;
    }
    let base = f.rewrite_base_size.max(1);
    (size.saturating_sub(base)) * 100 / base >= c.rewrite_percentage
}

impl Inner {
    /// What is appended and not yet written, with its last sequence number, for a
    /// rewrite's switch (the caller holds `files`); the next entry starts with SELECT.
    pub(crate) fn take_buf_for_switch(&self) -> Option<(Vec<u8>, u64)> {
        let mut buf = self.buf.lock();
        buf.db = None;
        // The switch releases them, not the writer's next fsync.
        buf.waiting = 0;
        let seq = self.appended.load(Ordering::SeqCst);
        self.taken.store(seq, Ordering::SeqCst);
        if buf.bytes.is_empty() {
            return None;
        }
        Some((std::mem::take(&mut buf.bytes), seq))
    }

    /// Everything up to `seq` is on disk: waiters are answered.
    pub(crate) fn mark_synced(&self, seq: u64) {
        self.synced.fetch_max(seq, Ordering::SeqCst);
        self.woken.notify_waiters();
    }
}

/// The name of a base or incr file.
pub(crate) fn part_name(prefix: &str, seq: u64, base: bool) -> String {
    format!("{prefix}.{seq}.{}.aof", if base { "base" } else { "incr" })
}

/// Opens (creating) an incr file for appending.
pub(crate) fn open_incr(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
}

/// fsyncs a directory, so a new or renamed file in it survives a crash.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Writes the manifest durably (temporary file, fsync, rename, directory fsync).
pub(crate) fn write_manifest(dir: &Path, prefix: &str, m: &Manifest) -> io::Result<()> {
    crate::durability::atomic_write(
        &dir.join(format!("{prefix}.manifest")),
        m.encode().as_bytes(),
    )
}

/// A new incr file after `m`'s last.
pub(crate) fn next_incr(prefix: &str, m: &Manifest) -> Part {
    let seq = m.incrs.last().map_or(1, |p| p.seq + 1);
    Part {
        name: part_name(prefix, seq, false),
        seq,
    }
}
