//! BGREWRITEAOF and the automatic rewrite: the log replaced by a snapshot of the
//! durable keys (a new base file) and the commands since (a new incr file), so it stays
//! within about `auto-aof-rewrite-percentage` over the live durable data.
//!
//! As Redis 7 does, the switch to a new incr file comes first: under the log's locks
//! everything appended so far is written and fsynced to the old incr file, the new one
//! is created and the manifest naming it is made durable. The snapshot's instant is
//! that same point: the caller holds the keyspace gate exclusively, so no command runs
//! between the switch, the capture of the function libraries and the start of the
//! keyspace's snapshot (`store/snapshot.rs`), which is all the pause there is (the
//! switch's fsyncs and one hold of every shard's lock: BGREWRITEAOF answers in a few
//! ms with a million keys, docs/benchmarks.md). Every command after it is in the new
//! incr file; the base holds exactly the state before it.
//!
//! redlockd has no fork: a thread walks the keyspace instead, database by database and
//! shard by shard, each shard under its read lock (its writers wait that long: a few ms
//! for 16k keys), and a write to a shard not walked yet first keeps the key's
//! rendering from before it (copy on first write). The renderer writes a durable
//! key as `SET ... PXAT` / `RESTORE ... ABSTTL REPLACE` (absolute deadlines, at the
//! instant's wall-clock offset), in a base beginning with `FUNCTION RESTORE` for the
//! libraries, readable by `redis-check-aof` and loadable by redis-server. A key whose
//! TTL left at the instant is at most the threshold stays out, as a memory-only key:
//! it may be one that was durable when written and has run down since, which a crash
//! after this rewrite would forget, so once the walk is over the restart fence's record
//! is made to cover the latest such deadline (`Reach::cover`, as a grant does).
//!
//! The same thread streams the base to a temporary file as it walks (fsynced every 4
//! MB and at the end), renames it into place (`<prefix>.<n>.base.aof`), and makes a manifest naming only
//! the new base and the new incr file durable before deleting the old files. A failure
//! at any step leaves the old manifest (old base, old incrs, new incr), which still
//! holds everything.

use super::manifest::Part;
use super::{encode_command, next_incr, open_incr, part_name, sync_dir, write_manifest, Inner};
use crate::commands::{CmdResult, Ctx};
use crate::node::Shared;
use crate::protocol::Reply;
use crate::store::{Render, SnapshotWalk, ValueRef};
use bytes::Bytes;
use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// BGREWRITEAOF (runs holding the keyspace gate exclusively: its row is EXCLUSIVE).
pub fn bgrewriteaof(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    start(ctx.shared)
        .map(|()| Reply::status("Background append only file rewriting started"))
        .map_err(Reply::error)
}

/// Whether an automatic rewrite is due (the writer found the log grown past
/// `auto-aof-rewrite-*`); the connection that sees it runs `start` under the gate.
pub fn due(shared: &Shared) -> bool {
    let stats = &shared.aof.inner().stats;
    stats.rewrite_scheduled.load(Ordering::Relaxed)
        && !stats.rewrite_in_progress.load(Ordering::Relaxed)
}

/// Switches to a new incr file, starts the keyspace's snapshot and the thread that
/// walks it into the base. The caller holds the keyspace gate exclusively.
pub fn start(shared: &Shared) -> Result<(), String> {
    let aof = &shared.aof;
    let i = aof.inner();
    if i.dir.is_none() {
        return Err("ERR the append-only log is off (appendonly no, or no --dir)".into());
    }
    if i.stats.rewrite_in_progress.swap(true, Ordering::SeqCst) {
        return Err("ERR Background append only file rewriting already in progress".into());
    }
    i.stats.rewrite_scheduled.store(false, Ordering::SeqCst);
    let started = std::time::Instant::now();
    let life = i.life.load(Ordering::SeqCst);
    let switched = switch_incr(i);
    let (dir, base_seq) = match switched {
        Ok(v) => v,
        Err(e) => {
            failed(i, &format!("cannot switch to a new incr file: {e}"));
            return Err(format!("ERR cannot start the rewrite: {e}"));
        }
    };
    let mut functions = Vec::new();
    let codes: Vec<Bytes> =
        (shared.scripts).with_libraries(|libs| libs.values().map(|l| l.code.clone()).collect());
    if !codes.is_empty() {
        let payload = crate::scripting::function_dump::dump(&codes);
        encode_command(
            &mut functions,
            &[b"FUNCTION", b"RESTORE", &payload, b"REPLACE"],
        );
    }
    let left_out_until = Arc::new(AtomicU64::new(0));
    let now = shared.clock.now_ms();
    let render = renderer(shared, now, left_out_until.clone());
    let Some(walk) = shared.keyspace.begin_snapshot(now, render) else {
        failed(i, "another snapshot of the keyspace is being taken");
        return Err("ERR Background append only file rewriting already in progress".into());
    };
    let job = Job {
        inner: aof.inner().clone(),
        life,
        dir,
        base_seq,
        functions,
        left_out_until,
        reach: shared.reach.clone(),
        clock: shared.clock.clone(),
        started,
    };
    let spawned = std::thread::Builder::new()
        .name("redlockd-aof-rewrite".into())
        .spawn(move || {
            if let Err(e) = finish(&job, walk) {
                failed(&job.inner, &e);
            }
        });
    if let Err(e) = spawned {
        failed(i, &e.to_string());
        return Err(format!("ERR cannot start the rewrite: {e}"));
    }
    Ok(())
}

/// What the rewrite's thread needs besides the walk.
struct Job {
    inner: Arc<Inner>,
    /// The log's life at the start: a rewrite of an earlier life finishes nothing.
    life: u64,
    dir: std::path::PathBuf,
    base_seq: u64,
    /// `FUNCTION RESTORE` of the libraries at the instant (empty: none).
    functions: Vec<u8>,
    /// The latest deadline of a key left out for having run down (0: none).
    left_out_until: Arc<AtomicU64>,
    reach: crate::durability::reach::Reach,
    clock: crate::clock::Clock,
    started: std::time::Instant,
}

/// How the base writes a key (see the module doc): nothing for a key whose TTL left
/// at `now` is at most the threshold (its deadline noted in `left_out_until`), else
/// `SET` for a string, `RESTORE ... ABSTTL REPLACE` for a collection, deadlines as
/// Unix ms at the wall-clock offset of `now`.
fn renderer(shared: &Shared, now: u64, left_out_until: Arc<AtomicU64>) -> Render {
    let threshold = shared.aof.threshold_ms();
    let wall_offset = shared.clock.mono_to_wall(0);
    Box::new(
        move |out: &mut Vec<u8>, key: &[u8], value: ValueRef<'_>, deadline: Option<u64>| {
            if let Some(d) = deadline.filter(|d| d.saturating_sub(now) <= threshold) {
                left_out_until.fetch_max(d, Ordering::Relaxed);
                return;
            }
            let at = deadline.map(|d| (d as i64).saturating_add(wall_offset).max(1).to_string());
            match value {
                ValueRef::Str(s) => match &at {
                    Some(at) => encode_command(out, &[b"SET", key, s, b"PXAT", at.as_bytes()]),
                    None => encode_command(out, &[b"SET", key, s]),
                },
                value => {
                    let payload = crate::store::rdb::dump_value(value);
                    let ttl = at.as_deref().unwrap_or("0");
                    encode_command(
                        out,
                        &[
                            b"RESTORE",
                            key,
                            ttl.as_bytes(),
                            &payload,
                            b"ABSTTL",
                            b"REPLACE",
                        ],
                    );
                }
            }
        },
    )
}

fn failed(i: &Inner, why: &str) {
    tracing::error!("append-only log rewrite failed: {why}; the log is unchanged");
    i.stats.rewrite_failed_last.store(true, Ordering::SeqCst);
    i.stats
        .rewrites_consecutive_failures
        .fetch_add(1, Ordering::SeqCst);
    i.stats.rewrite_in_progress.store(false, Ordering::SeqCst);
}

/// Step 1: everything appended so far into the old incr file, fsynced; a new incr
/// file in the manifest. Returns the log's directory and the new base's seq.
fn switch_incr(i: &Inner) -> io::Result<(std::path::PathBuf, u64)> {
    let mut files = i.files.lock();
    let f = files
        .as_mut()
        .ok_or_else(|| io::Error::other("the log is not open"))?;
    let prefix = &i.config.filename;
    {
        let buf = i.take_buf_for_switch();
        if let Some((bytes, seq)) = buf {
            super::write_and_sync(i, f, &bytes)?;
            i.mark_synced(seq);
        }
    }
    let part = next_incr(prefix, &f.manifest);
    let file = open_incr(&f.dir.join(&part.name))?;
    sync_dir(&f.dir)?;
    let mut m = f.manifest.clone();
    m.incrs.push(part);
    write_manifest(&f.dir, prefix, &m)?;
    f.manifest = m;
    f.earlier_size += f.incr_size;
    f.incr = file;
    f.incr_size = 0;
    let base_seq = f.manifest.base.as_ref().map_or(1, |b| b.seq + 1);
    Ok((f.dir.clone(), base_seq))
}

/// Step 2 (its own thread): the walk streamed into a temporary file, fsynced and
/// renamed into place as the new base; the left-out deadlines covered; the manifest
/// naming the new base and the current incr file made durable; the old files deleted.
fn finish(job: &Job, mut walk: SnapshotWalk) -> Result<(), String> {
    let i = &job.inner;
    let dir = &job.dir;
    let prefix = &i.config.filename;
    let temp = dir.join(format!("temp-rewriteaof-bg-{}.aof", std::process::id()));
    let name = part_name(prefix, job.base_seq, true);
    let base_size = write_base(&temp, &job.functions, &mut walk).map_err(|e| {
        let _ = std::fs::remove_file(&temp);
        format!("cannot write the new base: {e}")
    })?;
    let delay = walk.lock_delay_ms();
    // The walk is over: writes keep no pre-images any more.
    drop(walk);
    let until = job.left_out_until.load(Ordering::Relaxed);
    let now = job.clock.now_ms();
    if until > now {
        (job.reach)
            .cover(now, until.saturating_add(delay))
            .map_err(|e| format!("cannot record the keys left out for the fence: {e:?}"))?;
    }
    let io = |e: io::Error| e.to_string();
    std::fs::rename(&temp, dir.join(&name)).map_err(io)?;
    sync_dir(dir).map_err(io)?;
    let mut files = i.files.lock();
    let Some(f) = files.as_mut() else {
        return Ok(());
    };
    if i.life.load(Ordering::SeqCst) != job.life {
        // A restart of this process reloaded the log meanwhile: its manifest stands.
        let _ = std::fs::remove_file(dir.join(&name));
        i.stats.rewrite_in_progress.store(false, Ordering::SeqCst);
        return Ok(());
    }
    let mut m = f.manifest.clone();
    let old_base = m.base.replace(Part {
        name: name.clone(),
        seq: job.base_seq,
    });
    let current = m.incrs.pop().expect("the log has an incr file");
    let old_incrs = std::mem::replace(&mut m.incrs, vec![current]);
    if let Err(e) = write_manifest(dir, prefix, &m) {
        let _ = std::fs::remove_file(dir.join(&name));
        return Err(e.to_string());
    }
    f.manifest = m;
    f.base_size = base_size;
    f.earlier_size = f.base_size;
    f.rewrite_base_size = f.total_size();
    drop(files);
    for old in old_base.iter().chain(&old_incrs) {
        if let Err(e) = std::fs::remove_file(dir.join(&old.name)) {
            tracing::warn!("cannot delete the replaced log file {}: {e}", old.name);
        }
    }
    let s = &i.stats;
    s.rewrites.fetch_add(1, Ordering::SeqCst);
    s.rewrite_failed_last.store(false, Ordering::SeqCst);
    s.rewrites_consecutive_failures.store(0, Ordering::SeqCst);
    let took = job.started.elapsed();
    (s.last_rewrite_ms).store(took.as_millis() as u64, Ordering::SeqCst);
    s.rewrite_in_progress.store(false, Ordering::SeqCst);
    tracing::info!(
        base = %name,
        bytes = base_size,
        ms = took.as_millis() as u64,
        "append-only log rewritten"
    );
    Ok(())
}

/// Bytes of the base written between two fsyncs of it (Redis's
/// `aof-rewrite-incremental-fsync`, 4 MB): the disk's queue stays short, so the log's
/// own fsyncs, which the clients' replies wait for, do not queue behind the whole base.
const SYNC_EVERY: u64 = 4 << 20;

/// The base's bytes at `temp`: the libraries, then every database's keys (a `SELECT`
/// before the first of each), one shard at a time; fsynced. Returns its size.
fn write_base(
    temp: &std::path::Path,
    functions: &[u8],
    walk: &mut SnapshotWalk,
) -> io::Result<u64> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(temp)?;
    let mut size = 0u64;
    let mut synced = 0u64;
    let mut put = |f: &mut std::fs::File, bytes: &[u8]| {
        size += bytes.len() as u64;
        f.write_all(bytes)?;
        if size - synced >= SYNC_EVERY {
            f.sync_data()?;
            synced = size;
        }
        Ok::<(), io::Error>(())
    };
    put(&mut f, functions)?;
    let mut chunk = Vec::new();
    for db in 0..walk.dbs() {
        let mut selected = false;
        for shard in 0..walk.shards() {
            chunk.clear();
            walk.dump(db, shard, &mut chunk);
            if chunk.is_empty() {
                continue;
            }
            if !selected {
                let mut select = Vec::new();
                encode_command(&mut select, &[b"SELECT", db.to_string().as_bytes()]);
                put(&mut f, &select)?;
                selected = true;
            }
            put(&mut f, &chunk)?;
        }
    }
    f.sync_all()?;
    Ok(size)
}
