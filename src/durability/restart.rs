//! What a node does when it boots and when it shuts down cleanly.
//!
//! A clean shutdown (SIGTERM, SHUTDOWN) writes every live key with its remaining TTL,
//! the fencing-token mark and what is left of the restart fence to the data directory
//! (`durability::snapshot`), once no command can run any more, and then lowers the
//! durable token reservation to the exact mark. The next boot restores it and skips the
//! fence: the node forgot nothing, so it cannot hand out a lock someone holds.
//!
//! Every other boot (a crash, kill -9, DEBUG CRASH-RESTART, a first start) finds no
//! usable snapshot and raises the fence, as long as `durability::reach` recorded the
//! locks of the earlier lives may last (see `fence::FenceRule`).
//!
//! A snapshot is used at most once and only by the start right after the run that
//! wrote it: the node's generation is bumped at every start, and the snapshot removed,
//! both durably, before the node serves; if either fails the start fails. A snapshot
//! from another node, of another generation, with another token mark than `node.state`,
//! damaged, or breaking the rules of this run (a database out of range, a TTL above
//! max-ttl, a key without TTL under --require-ttl, a NaN score) is refused with a log
//! line saying why, and the fence applies, at least as long as its longest TTL.

use crate::config::RESTART_MARGIN;
use crate::durability::data_dir::{NodeDir, NodeState};
use crate::durability::fence::FenceRule;
use crate::durability::snapshot::{self, Snapshot};
use crate::node::Shared;
use crate::protocol::numfmt::hex;
use std::io;
use std::sync::atomic::Ordering;

/// How the node last booted (INFO fencing `last_boot`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BootKind {
    /// A boot that owes nothing to earlier lives: declared new, or the fence is off.
    Fresh,
    /// Restored from a clean-shutdown snapshot: no fence.
    Snapshot,
    /// No usable snapshot: the restart fence is up (or was over before it started).
    Fenced,
}

impl BootKind {
    pub fn name(self) -> &'static str {
        match self {
            BootKind::Fresh => "fresh",
            BootKind::Snapshot => "snapshot",
            BootKind::Fenced => "fence",
        }
    }
}

/// Boots `shared` in place: `first` for the process's own start (where the config or a
/// declared-new directory may skip the fence), otherwise a restart (crash-restart, the
/// test backend). An error means this life could not be recorded durably: the node
/// must not serve (a process start fails; `Shared::boot` fences and refuses grants).
pub fn boot(shared: &Shared, first: bool) -> io::Result<BootKind> {
    let now = shared.clock.now_ms();
    let margin = RESTART_MARGIN.as_millis() as u64;
    let prev = shared.node_dir.as_deref().map(|d| d.state());
    let verdict = match shared.node_dir.as_deref() {
        Some(dir) => read_snapshot(dir, shared),
        None => Verdict::None,
    };
    shared.keyspace.flush_all();
    shared.scripts.flush();
    // Functions are not in the snapshot: every restart forgets them (docs/compatibility.md).
    shared.scripts.flush_functions();
    shared.started_ms.store(now, Ordering::Relaxed);

    // The fence, by the first rule that applies.
    let epoch = shared.reach.epoch();
    let (rule, mut len) = if let Verdict::Accepted(snap) = &verdict {
        (FenceRule::Snapshot, snap.header.fence_remaining_ms)
    } else if shared.fence.delay_ms() == 0 {
        (FenceRule::Off, 0)
    } else if first && (!shared.config.fence_at_boot || prev.is_some_and(|p| p.declared_new)) {
        (FenceRule::DeclaredNew, 0)
    } else {
        match prev.and_then(|p| p.history) {
            Some(h) if h.epoch == epoch.id => (
                FenceRule::SameBoot,
                epoch
                    .to_clock_ms(h.reach_ms)
                    .saturating_add(margin)
                    .saturating_sub(now),
            ),
            Some(h) => (FenceRule::Reboot, h.ttl_ms.saturating_add(margin)),
            None => (FenceRule::NoHistory, shared.fence.delay_ms()),
        }
    };
    // With the append-only log on, a crash forgets only keys granted a TTL of at most
    // the longest one recorded (memory-only keys; durable ones are replayed): each
    // was granted before now, so none outlives now + that TTL, whatever reservation
    // the same-boot rule reads.
    if shared.aof.enabled() && rule == FenceRule::SameBoot {
        if let Some(h) = prev.and_then(|p| p.history) {
            len = len.min(h.ttl_ms.saturating_add(margin));
        }
    }
    if let Verdict::Refused { longest_ttl_ms, .. } = &verdict {
        if rule != FenceRule::Off {
            len = len.max(longest_ttl_ms.saturating_add(margin));
        }
    }
    // How long forgotten or restored keys may still live: what this life starts its
    // record with (the margin is added again by each fence, not accumulated).
    let covered = match &verdict {
        Verdict::Accepted(snap) => snap.longest_remaining_ms().max(len),
        _ => len.saturating_sub(margin),
    };

    if let Some(dir) = shared.node_dir.as_deref() {
        record_start(dir, shared, now, covered)?;
    }
    shared.reach.start(now.saturating_add(covered), covered);
    shared.tokens.resume_after_crash();
    // The durable keys come back from the append-only log, replayed with the fence
    // down (the log's writes were all granted before); the fence is raised below.
    if shared.aof.enabled() {
        shared.fence.raise(now, 0, rule);
        crate::durability::aof::load::boot(shared)?;
    }
    let kind = match verdict {
        Verdict::Accepted(snap) => {
            let keys = snap.keys.len();
            snapshot::restore(&shared.keyspace, snap.keys, now);
            tracing::info!(
                keys,
                token_mark = shared.tokens.get(),
                "clean-shutdown snapshot restored: locks kept with their remaining TTLs; restart fence skipped"
            );
            BootKind::Snapshot
        }
        _ if len == 0 && matches!(rule, FenceRule::Off | FenceRule::DeclaredNew) => BootKind::Fresh,
        _ => BootKind::Fenced,
    };
    shared.fence.raise(now, len, rule);
    if let Some(dir) = shared.node_dir.as_deref() {
        let s = dir.state();
        tracing::info!(
            node_id = %hex(&s.node_id),
            dir = %dir.path().display(),
            generation = s.boot,
            token_mark = shared.tokens.get(),
            fence_rule = rule.name(),
            fence_ms = len,
            "node identity"
        );
        if rule == FenceRule::NoHistory && dir.created() && first {
            tracing::warn!(
                "{} had no node in it: a new identity was made, and the full restart fence applies because nothing says this node never granted a lock. If it is a brand-new node, declare it before its first start with `redlockd init --dir {}`",
                dir.path().display(),
                dir.path().display()
            );
        }
    }
    *shared.last_boot.lock() = kind;
    Ok(kind)
}

/// Makes this start durable before the node serves: the generation bumped (any
/// snapshot of an earlier one is now stale), the record of what this life starts with,
/// and the snapshot removed.
fn record_start(dir: &NodeDir, shared: &Shared, now: u64, covered: u64) -> io::Result<()> {
    let history = shared
        .reach
        .history_at_boot(now.saturating_add(covered), covered);
    dir.update(|s| {
        s.boot += 1;
        s.history = Some(history);
        s.declared_new = false;
    })
    .map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "cannot record this start in {}: {e}; the node must not serve",
                dir.path().display()
            ),
        )
    })?;
    dir.remove_snapshot().map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "cannot remove the snapshot {}: {e}; it could be trusted by a later start, so the node must not serve",
                dir.snapshot_path().display()
            ),
        )
    })
}

/// What became of the snapshot file.
enum Verdict {
    /// None there.
    None,
    Accepted(Snapshot),
    /// Refused (logged): the fence must outlast its longest TTL (0 if unreadable).
    Refused {
        longest_ttl_ms: u64,
    },
}

/// Reads and checks the snapshot (if any).
fn read_snapshot(dir: &NodeDir, shared: &Shared) -> Verdict {
    let path = dir.snapshot_path();
    let shown = path.display();
    let raw = match dir.read_snapshot() {
        Ok(Some(raw)) => raw,
        Ok(None) => return Verdict::None,
        Err(e) => {
            tracing::warn!("cannot read snapshot {shown}: {e}; the restart fence applies");
            return Verdict::Refused { longest_ttl_ms: 0 };
        }
    };
    match snapshot::decode(&raw).map(|snap| only_memory_keys(snap, shared)) {
        Err(why) => {
            tracing::warn!("snapshot {shown} refused: {why}; the restart fence applies");
            Verdict::Refused { longest_ttl_ms: 0 }
        }
        Ok(snap) => match check(&snap, &dir.state(), shared) {
            Ok(()) => Verdict::Accepted(snap),
            Err(why) => {
                tracing::warn!("snapshot {shown} refused: {why}; the restart fence applies");
                Verdict::Refused {
                    longest_ttl_ms: snap.longest_remaining_ms(),
                }
            }
        },
    }
}

/// With the append-only log on, the log wins for durable keys (it holds every change
/// to them, with absolute deadlines): the snapshot gives back only the memory-only
/// keys (a TTL left at most `--memory-only-ttl`), which the log never had.
fn only_memory_keys(mut snap: Snapshot, shared: &Shared) -> Snapshot {
    if shared.aof.enabled() {
        let threshold = shared.aof.threshold_ms();
        (snap.keys).retain(|k| k.remaining_ms.is_some_and(|ms| ms <= threshold));
    }
    snap
}

/// Whether a decoded snapshot may be trusted by a node whose state is `state`.
fn check(snap: &Snapshot, state: &NodeState, shared: &Shared) -> Result<(), String> {
    let h = &snap.header;
    if h.node_id != state.node_id {
        return Err(format!(
            "written by another node (id {}, this directory's node is {})",
            hex(&h.node_id),
            hex(&state.node_id)
        ));
    }
    if h.boot != state.boot {
        return Err(format!(
            "written by generation {} but node.state is at generation {}: it is not from the run right before this start",
            h.boot, state.boot
        ));
    }
    if h.token_mark != state.token_reserved {
        return Err(format!(
            "its token mark {} is not the one node.state recorded at shutdown ({})",
            h.token_mark, state.token_reserved
        ));
    }
    let databases = shared.keyspace.dbs().len();
    let max_ttl_ms = shared.fence.max_ttl_ms();
    for k in &snap.keys {
        if k.db >= databases {
            return Err(format!(
                "a key is in database {}, and this run has {databases} (--databases)",
                k.db
            ));
        }
        match k.remaining_ms {
            // A later crash's fence without a record lasts max-ttl: it must outlast
            // every restored lock.
            Some(ms) if ms > max_ttl_ms => {
                return Err(format!(
                    "a key has {ms} ms of TTL left, above this run's max-ttl of {max_ttl_ms} ms"
                ));
            }
            None if shared.fence.require_ttl() => {
                return Err("a key has no TTL, and this run has --require-ttl".into());
            }
            _ => {}
        }
    }
    Ok(())
}

/// Writes the clean-shutdown snapshot. Call only once no command can run any more
/// (every connection has ended), or while holding the keyspace gate exclusively.
/// Without a data directory there is nothing to save to.
pub fn save(shared: &Shared) -> io::Result<()> {
    let Some(dir) = shared.node_dir.as_deref() else {
        return Ok(());
    };
    let now = shared.clock.now_ms();
    let header = snapshot::Header {
        node_id: dir.state().node_id,
        boot: dir.state().boot,
        written_unix_ms: shared.clock.wall_ms(),
        token_mark: shared.tokens.get(),
        fence_remaining_ms: shared.fence.remaining_ms(now),
    };
    let bytes = snapshot::encode(&shared.keyspace, now, &header);
    dir.write_snapshot(&bytes)?;
    // Nothing is handed out after this: the reservation comes down to the exact mark,
    // which the snapshot must match to be used.
    dir.update(|s| s.token_reserved = header.token_mark)?;
    tracing::info!(
        path = %dir.snapshot_path().display(),
        bytes = bytes.len(),
        token_mark = header.token_mark,
        "clean shutdown: live keys saved; the next boot restores them and skips the restart fence"
    );
    Ok(())
}

/// The loader meets damaged and crafted data directories as hostile input: a clear
/// refusal (the fence applies) or a clear start error, never a panic, never a key
/// outside this run's rules, never a lower token mark.
#[cfg(test)]
mod hostile_dirs {
    use super::*;
    use crate::config::Config;
    use crate::durability::snapshot::crc32;
    use crate::store::{Entry, Value, ValueRef, ZSet};
    use bytes::Bytes;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use std::path::{Path, PathBuf};

    fn temp_dir() -> PathBuf {
        std::env::temp_dir().join(format!(
            "redlockd-unit-hostile-{}-{}",
            std::process::id(),
            rand::random::<u64>()
        ))
    }

    fn config(dir: &Path, require_ttl: bool) -> Config {
        Config {
            dir: Some(dir.to_path_buf()),
            restart_delay: None,
            require_ttl,
            ..Config::for_tests()
        }
    }

    /// A directory whose node shut down cleanly with a string with a TTL, a string
    /// without, and a sorted set, and token mark 7. Returns node.state's and the
    /// snapshot's bytes.
    fn clean_directory(dir: &Path) -> (Vec<u8>, Vec<u8>) {
        let shared = Shared::open(config(dir, false)).unwrap();
        let now = shared.clock.now_ms();
        let db = shared.keyspace.db(0);
        db.insert(
            b"lock",
            Entry {
                value: Value::Str(Bytes::from_static(b"owner")),
                deadline_ms: Some(now + 5_000),
            },
        );
        db.insert(b"plain", Entry::new(Value::Str(Bytes::from_static(b"x"))));
        let mut z = ZSet::new();
        z.insert(b"m", 1.5);
        db.insert(
            b"z",
            Entry {
                value: Value::ZSet(Box::new(z)),
                deadline_ms: Some(now + 5_000),
            },
        );
        shared.tokens.raise(7).unwrap();
        save(&shared).unwrap();
        drop(shared);
        (
            std::fs::read(dir.join("node.state")).unwrap(),
            std::fs::read(dir.join("snapshot.rdl")).unwrap(),
        )
    }

    fn reseal(raw: &mut [u8]) {
        let n = raw.len();
        let crc = crc32(&raw[..n - 4]);
        raw[n - 4..].copy_from_slice(&crc.to_le_bytes());
    }

    /// Starts a node on `dir` with `snapshot` in place of its own; checks what any
    /// start must keep, and returns the node when it started.
    fn boot_with(dir: &Path, snapshot: &[u8], require_ttl: bool) -> Option<Shared> {
        std::fs::write(dir.join("snapshot.rdl"), snapshot).unwrap();
        let shared = Shared::open(config(dir, require_ttl)).ok()?;
        assert!(
            !dir.join("snapshot.rdl").exists(),
            "consumed before serving"
        );
        assert!(shared.tokens.get() >= 7, "the mark never goes below 7");
        let now = shared.clock.now_ms();
        for db in shared.keyspace.dbs() {
            db.for_each_live(now, |_, value, deadline| {
                if require_ttl {
                    assert!(deadline.is_some(), "a key without TTL under --require-ttl");
                }
                if let Some(d) = deadline {
                    assert!(d - now <= shared.fence.max_ttl_ms(), "a TTL above max-ttl");
                }
                if let ValueRef::ZSet(z) = value {
                    for (_, score) in z.iter() {
                        assert!(!score.is_nan(), "a NaN score");
                    }
                }
            });
        }
        Some(shared)
    }

    #[test]
    fn crafted_snapshots_are_refused_with_the_fence_up() {
        let dir = temp_dir();
        let (state, good) = clean_directory(&dir);
        let restart = |snapshot: &[u8], require_ttl: bool| {
            crate::durability::data_dir::put_back_state_as_written(&dir, &state);
            let shared = boot_with(&dir, snapshot, require_ttl).expect("starts");
            let boot = shared.last_boot.lock().name();
            (boot, shared.keyspace.db(0).len(), shared.fence.chosen().0)
        };
        // The control: the snapshot as written is used.
        assert_eq!(restart(&good, false), ("snapshot", 3, FenceRule::Snapshot));
        // A key in database 999: past the 16 this run has.
        let first_key = 8 + 4 + 16 + 8 + 8 + 8 + 8 + 8;
        let mut bad = good.clone();
        bad[first_key..first_key + 2].copy_from_slice(&999u16.to_le_bytes());
        reseal(&mut bad);
        assert_eq!(restart(&bad, false).0, "fence");
        // A NaN score.
        let at = good
            .windows(8)
            .position(|w| w == 1.5f64.to_bits().to_le_bytes())
            .unwrap();
        let mut bad = good.clone();
        bad[at..at + 8].copy_from_slice(&f64::NAN.to_bits().to_le_bytes());
        reseal(&mut bad);
        assert_eq!(restart(&bad, false).0, "fence");
        // A key without TTL, under --require-ttl.
        assert_eq!(restart(&good, true).0, "fence");
        // A lower token mark than node.state recorded.
        let mark_at = 8 + 4 + 16 + 8 + 8;
        let mut bad = good.clone();
        bad[mark_at..mark_at + 8].copy_from_slice(&1u64.to_le_bytes());
        reseal(&mut bad);
        assert_eq!(restart(&bad, false).0, "fence");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Random damage, re-sealed so that it passes the checksum and reaches the parser
    /// and the rules, and random node.state bytes: never a panic.
    #[test]
    fn damaged_snapshots_and_state_files_never_panic_the_loader() {
        let dir = temp_dir();
        let (state, good) = clean_directory(&dir);
        let mut rng = SmallRng::seed_from_u64(33);
        for round in 0..300 {
            crate::durability::data_dir::put_back_state_as_written(&dir, &state);
            let mut bad = good.clone();
            match round % 4 {
                0 => {
                    for _ in 0..rng.random_range(1..4) {
                        let i = rng.random_range(12..bad.len() - 4);
                        bad[i] = rng.random();
                    }
                }
                1 => bad.truncate(rng.random_range(0..good.len())),
                2 => {
                    let i = rng.random_range(12..bad.len() - 4);
                    let extra: Vec<u8> =
                        (0..rng.random_range(1..64)).map(|_| rng.random()).collect();
                    bad.splice(i..i, extra);
                }
                _ => {
                    let i = rng.random_range(0..bad.len() - 4);
                    bad[i] ^= 1 << rng.random_range(0..8);
                }
            }
            if bad.len() > 16 && rng.random_bool(0.8) {
                reseal(&mut bad);
            }
            let require_ttl = rng.random_bool(0.3);
            drop(boot_with(&dir, &bad, require_ttl));
        }
        for _ in 0..100 {
            let mut raw = state.clone();
            for _ in 0..rng.random_range(1..8) {
                let i = rng.random_range(0..raw.len());
                raw[i] = rng.random();
            }
            if rng.random_bool(0.3) {
                raw.truncate(rng.random_range(0..raw.len()));
            }
            std::fs::write(dir.join("node.state"), &raw).unwrap();
            let _ = std::fs::remove_file(dir.join("snapshot.rdl"));
            // A start or a clear error; never a panic, never a mark below 7 unless the
            // file is refused or no slot survived (a new identity, said in the log).
            match Shared::open(config(&dir, false)) {
                Ok(shared) => drop(shared),
                Err(e) => assert!(!e.to_string().is_empty()),
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// Which rule sets the fence at each kind of boot, and how long, as INFO reports it to
/// an operator: one in-memory node on a data directory and a manual clock, crashed
/// (`crash_restart`) or restarted after a clean shutdown (`save`, then `boot`).
#[cfg(test)]
mod boot_rules;
