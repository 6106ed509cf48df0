//! BGREWRITEAOF and the automatic rewrite: the log replaced by a snapshot of the
//! durable keys (a new base file) and the commands since (a new incr file), so it stays
//! within about `auto-aof-rewrite-percentage` over the live durable data.
//!
//! As Redis 7 does, the switch to a new incr file comes first: under the log's locks
//! everything appended so far is written and fsynced to the old incr file, the new one
//! is created and the manifest naming it is made durable. The snapshot is taken at that
//! same point: the caller holds the keyspace gate exclusively, so no command runs
//! between the switch and the end of the snapshot (the pause is the time to serialise
//! the durable keys in memory; redlockd has no fork). A thread then writes the base
//! (`<prefix>.<n>.base.aof`, RESP: `SET`/`RESTORE ... ABSTTL` per key and `FUNCTION
//! RESTORE` for the libraries, readable by `redis-check-aof` and loadable by
//! redis-server), fsyncs it, renames it into place, and makes a manifest naming only
//! the new base and the new incr file durable before deleting the old files. A failure
//! at any step leaves the old manifest (old base, old incrs, new incr), which still
//! holds everything.

use super::manifest::Part;
use super::{encode_command, next_incr, open_incr, part_name, sync_dir, write_manifest, Inner};
use crate::commands::{CmdResult, Ctx};
use crate::node::Shared;
use crate::protocol::Reply;
use crate::store::ValueRef;
use bytes::Bytes;
use std::io::{self, Write};
use std::sync::atomic::Ordering;
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

/// Switches to a new incr file, snapshots the durable keys and starts the thread that
/// writes the base. The caller holds the keyspace gate exclusively.
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
    let body = match snapshot(shared) {
        Ok(body) => body,
        Err(e) => {
            failed(i, &e);
            return Err(format!("ERR cannot start the rewrite: {e}"));
        }
    };
    let inner = aof.inner().clone();
    let spawned = std::thread::Builder::new()
        .name("redlockd-aof-rewrite".into())
        .spawn(move || {
            if let Err(e) = finish(&inner, life, &dir, base_seq, &body, started) {
                failed(&inner, &e.to_string());
            }
        });
    if let Err(e) = spawned {
        failed(i, &e.to_string());
        return Err(format!("ERR cannot start the rewrite: {e}"));
    }
    Ok(())
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

/// Step 2: the durable keys (and the function libraries) as RESP commands. A key
/// whose TTL left is at most the threshold stays out, as a memory-only key: it may be
/// one that was durable when written and has run down since, which a crash after this
/// rewrite would forget, so the restart fence's record is made to cover the latest
/// such deadline first (`Reach::cover`, as a grant does).
fn snapshot(shared: &Shared) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let codes: Vec<Bytes> =
        (shared.scripts).with_libraries(|libs| libs.values().map(|l| l.code.clone()).collect());
    if !codes.is_empty() {
        let payload = crate::scripting::function_dump::dump(&codes);
        encode_command(&mut out, &[b"FUNCTION", b"RESTORE", &payload, b"REPLACE"]);
    }
    let now = shared.clock.now_ms();
    let threshold = shared.aof.threshold_ms();
    let mut left_out_until = 0u64;
    for (n, db) in shared.keyspace.dbs().iter().enumerate() {
        let mut selected = false;
        db.for_each_live(now, |key, value, deadline| {
            if let Some(d) = deadline.filter(|d| d.saturating_sub(now) <= threshold) {
                left_out_until = left_out_until.max(d);
                return;
            }
            if !selected {
                encode_command(&mut out, &[b"SELECT", n.to_string().as_bytes()]);
                selected = true;
            }
            let at = deadline.map(|d| shared.clock.mono_to_wall(d).max(1).to_string());
            match value {
                ValueRef::Str(s) => match &at {
                    Some(at) => encode_command(&mut out, &[b"SET", key, s, b"PXAT", at.as_bytes()]),
                    None => encode_command(&mut out, &[b"SET", key, s]),
                },
                value => {
                    let payload = crate::store::rdb::dump_value(value);
                    let ttl = at.as_deref().unwrap_or("0");
                    encode_command(
                        &mut out,
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
        });
    }
    if left_out_until > now {
        let delay = shared.keyspace.lock_delay().ms();
        (shared.reach)
            .cover(now, left_out_until.saturating_add(delay))
            .map_err(|e| format!("cannot record the keys left out for the fence: {e:?}"))?;
    }
    Ok(out)
}

/// Step 3 (its own thread): the base written, fsynced and renamed into place; the
/// manifest naming the new base and the current incr file made durable; the old files
/// deleted.
fn finish(
    i: &Arc<Inner>,
    life: u64,
    dir: &std::path::Path,
    base_seq: u64,
    body: &[u8],
    started: std::time::Instant,
) -> io::Result<()> {
    let prefix = &i.config.filename;
    let temp = dir.join(format!("temp-rewriteaof-bg-{}.aof", std::process::id()));
    let name = part_name(prefix, base_seq, true);
    {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&temp)?;
        f.write_all(body)?;
        f.sync_all()?;
    }
    std::fs::rename(&temp, dir.join(&name))?;
    sync_dir(dir)?;
    let mut files = i.files.lock();
    let Some(f) = files.as_mut() else {
        return Ok(());
    };
    if i.life.load(Ordering::SeqCst) != life {
        // A restart of this process reloaded the log meanwhile: its manifest stands.
        let _ = std::fs::remove_file(dir.join(&name));
        i.stats.rewrite_in_progress.store(false, Ordering::SeqCst);
        return Ok(());
    }
    let mut m = f.manifest.clone();
    let old_base = m.base.replace(Part {
        name: name.clone(),
        seq: base_seq,
    });
    let current = m.incrs.pop().expect("the log has an incr file");
    let old_incrs = std::mem::replace(&mut m.incrs, vec![current]);
    if let Err(e) = write_manifest(dir, prefix, &m) {
        let _ = std::fs::remove_file(dir.join(&name));
        return Err(e);
    }
    f.manifest = m;
    f.base_size = body.len() as u64;
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
    (s.last_rewrite_ms).store(started.elapsed().as_millis() as u64, Ordering::SeqCst);
    s.rewrite_in_progress.store(false, Ordering::SeqCst);
    tracing::info!(
        base = %name,
        bytes = body.len(),
        "append-only log rewritten"
    );
    Ok(())
}
