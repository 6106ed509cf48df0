//! Boot: open the log (creating it on a node's first start with the log on) and
//! replay it into the keyspace, as Redis's loadAppendOnlyFiles does.
//!
//! The base then the incr files, in the manifest's order, each command run through
//! `commands::run` (the one implementation of every command) by a client of its own,
//! with nothing logged meanwhile. Deadlines are absolute Unix-time ms, converted with
//! the node's wall clock now: a key whose deadline passed while the node was down is
//! gone, as it would have been. A torn tail (a command cut short, a MULTI without its
//! EXEC, or zero bytes a crash left after the last whole command) of the last file
//! is cut off with `aof-load-truncated yes`; anywhere else, or with `no`, or any other
//! damage, the start fails with a message naming the file and offset.

use super::manifest::Manifest;
use super::{next_incr, open_incr, sync_dir, write_manifest, Aof, Files};
use crate::commands::{self, lookup, Ctx};
use crate::node::{ClientInfo, ClientState, Shared};
use crate::protocol::{parse_request_into, Limits};
use bytes::{Bytes, BytesMut};
use std::io::{self, ErrorKind};
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

fn invalid(msg: String) -> io::Error {
    io::Error::new(ErrorKind::InvalidData, msg)
}

/// Opens and replays the log of `shared` (nothing when it is off). An error means the
/// node must not start.
pub fn boot(shared: &Shared) -> io::Result<()> {
    let aof: &Aof = &shared.aof;
    let Some(dir) = aof.inner().dir.clone() else {
        return Ok(());
    };
    aof.reset_for_boot();
    aof.set_loading(true);
    let started = std::time::Instant::now();
    let result = open_and_replay(shared, &dir);
    aof.set_loading(false);
    let files = result?;
    tracing::info!(
        dir = %dir.display(),
        commands = aof.inner().stats.loaded_commands.load(Ordering::Relaxed),
        bytes = files.total_size(),
        ms = started.elapsed().as_millis() as u64,
        "append-only log replayed"
    );
    *aof.inner().files.lock() = Some(files);
    aof.start_writer();
    Ok(())
}

fn open_and_replay(shared: &Shared, dir: &Path) -> io::Result<Files> {
    let config = &shared.aof.inner().config;
    let prefix = &config.filename;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let manifest_path = dir.join(format!("{prefix}.manifest"));
    let manifest = match std::fs::read_to_string(&manifest_path) {
        Ok(text) => Manifest::parse(&text).map_err(|e| {
            invalid(format!(
                "FATAL AOF MANIFEST FILE ERROR in {}: {e}",
                manifest_path.display()
            ))
        })?,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            let m = Manifest {
                base: None,
                incrs: vec![next_incr(prefix, &Manifest::default())],
            };
            open_incr(&dir.join(&m.incrs[0].name))?.sync_all()?;
            sync_dir(dir)?;
            write_manifest(dir, prefix, &m)?;
            m
        }
        Err(e) => return Err(e),
    };
    let mut client = replay_client(shared);
    let mut parts: Vec<(&str, bool)> = Vec::new();
    if let Some(b) = &manifest.base {
        parts.push((&b.name, true));
    }
    parts.extend(manifest.incrs.iter().map(|p| (p.name.as_str(), false)));
    let mut sizes = Vec::new();
    let n = parts.len();
    for (at, (name, _)) in parts.iter().enumerate() {
        let path = dir.join(name);
        let raw = std::fs::read(&path).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("the log's file {} cannot be read: {e}", path.display()),
            )
        })?;
        // Each file starts in database 0, as Redis's fake client does.
        client.db = 0;
        let good = replay(shared, &mut client, &raw).map_err(|(offset, why)| {
            invalid(format!(
                "{}: bad AOF format at offset {offset}: {why}; check it with `redis-check-aof {}`",
                path.display(),
                manifest_path.display()
            ))
        })?;
        if good < raw.len() {
            let last = at + 1 == n;
            if !last || !config.load_truncated {
                return Err(invalid(format!(
                    "{} ends with a torn command (after offset {good} of {}): {}",
                    path.display(),
                    raw.len(),
                    if last {
                        "aof-load-truncated is no, so the node does not start; `redis-check-aof --fix` cuts it off"
                    } else {
                        "only the last file of the log may be torn"
                    }
                )));
            }
            tracing::warn!(
                file = %path.display(),
                kept = good,
                cut = raw.len() - good,
                "the log ended with a torn command (a crash during a write): cut off, as aof-load-truncated yes does"
            );
            let f = std::fs::OpenOptions::new().write(true).open(&path)?;
            f.set_len(good as u64)?;
            f.sync_all()?;
            let stats = &shared.aof.inner().stats;
            (stats.truncated_bytes).fetch_add((raw.len() - good) as u64, Ordering::Relaxed);
        }
        sizes.push(good as u64);
    }
    let last = manifest
        .incrs
        .last()
        .expect("a loaded manifest has an incr file");
    let incr = open_incr(&dir.join(&last.name))?;
    let incr_size = *sizes.last().unwrap_or(&0);
    let total: u64 = sizes.iter().sum();
    let base_size = if manifest.base.is_some() { sizes[0] } else { 0 };
    Ok(Files {
        dir: dir.to_path_buf(),
        manifest,
        incr,
        incr_size,
        earlier_size: total - incr_size,
        base_size,
        rewrite_base_size: total,
    })
}

/// The client the log's commands run as: authenticated as the default user, which
/// every command is allowed to (ACL applies to clients, not to the log).
fn replay_client(shared: &Shared) -> ClientState {
    let addr: std::net::SocketAddr = ([127, 0, 0, 1], 0).into();
    let info = Arc::new(ClientInfo::new(0, addr, addr, shared.clock.now_ms()));
    let mut client = ClientState::new(info, &shared.acl);
    client.authed = true;
    client
}

/// Replays the commands of one file; returns how many bytes of it were whole commands
/// (a MULTI without its EXEC is not), or the offset and what is wrong.
fn replay(shared: &Shared, client: &mut ClientState, raw: &[u8]) -> Result<usize, (usize, String)> {
    let limits = Limits {
        max_bulk_len: usize::MAX / 2,
        max_args: usize::MAX / 2,
        unauthenticated: false,
    };
    let mut buf = BytesMut::from(raw);
    let mut args: Vec<Bytes> = Vec::new();
    let mut multi: Option<(usize, Vec<Vec<Bytes>>)> = None;
    let mut good = 0;
    loop {
        let offset = raw.len() - buf.len();
        if buf.is_empty() {
            break;
        }
        if buf[0] != b'*' {
            if buf.iter().all(|b| *b == 0) {
                // Zeros a crash left past the last write: a torn tail.
                break;
            }
            return Err((offset, "not a RESP array".into()));
        }
        match parse_request_into(&mut buf, &limits, &mut args) {
            Ok(false) => break,
            Ok(true) if args.is_empty() => return Err((offset, "an empty command".into())),
            Ok(true) => {}
            Err(e) => {
                if buf.iter().skip(1).all(|b| *b == 0) {
                    break;
                }
                return Err((offset, e.to_string()));
            }
        }
        let cmd = std::mem::take(&mut args);
        if commands::eq_ignore_case(&cmd[0], "multi") {
            if multi.is_some() {
                return Err((offset, "MULTI inside MULTI".into()));
            }
            multi = Some((offset, Vec::new()));
            continue;
        }
        if commands::eq_ignore_case(&cmd[0], "exec") {
            let Some((_, queued)) = multi.take() else {
                return Err((offset, "EXEC without MULTI".into()));
            };
            for c in queued {
                run_one(shared, client, &c).map_err(|e| (offset, e))?;
            }
            good = raw.len() - buf.len();
            continue;
        }
        match &mut multi {
            Some((_, queued)) => queued.push(cmd),
            None => {
                run_one(shared, client, &cmd).map_err(|e| (offset, e))?;
                good = raw.len() - buf.len();
            }
        }
    }
    // A MULTI without EXEC is cut off with the tail (valkey#4342: else the next
    // restart would replay later writes inside a dangling MULTI).
    if let Some((start, _)) = multi {
        good = good.min(start);
    }
    Ok(good)
}

fn run_one(shared: &Shared, client: &mut ClientState, args: &[Bytes]) -> Result<(), String> {
    let Some(spec) = lookup(&args[0]) else {
        return Err(format!(
            "unknown command '{}'",
            String::from_utf8_lossy(&args[0])
        ));
    };
    if !commands::arity_ok(spec.arity, args.len()) {
        return Err(format!("wrong number of arguments for '{}'", spec.name));
    }
    let mut ctx = Ctx::new(shared, client);
    let reply = commands::run(&mut ctx, spec, args);
    let stats = &shared.aof.inner().stats;
    stats.loaded_commands.fetch_add(1, Ordering::Relaxed);
    if let crate::protocol::Reply::Error(e) = &reply {
        // As Redis: a command's error reply while loading is not the log's damage.
        tracing::debug!(
            "the log's {} answered {}",
            spec.name,
            String::from_utf8_lossy(e)
        );
    }
    Ok(())
}
