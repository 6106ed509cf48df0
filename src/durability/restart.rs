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
    match snapshot::decode(&raw) {
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
            std::fs::write(dir.join("node.state"), &state).unwrap();
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
            std::fs::write(dir.join("node.state"), &state).unwrap();
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
mod boot_rules {
    use super::save;
    use crate::clock::MANUAL_WALL_START_MS;
    use crate::config::Config;
    use crate::durability::data_dir::NodeDir;
    use crate::inmem::Session;
    use bytes::BytesMut;
    use std::path::{Path, PathBuf};
    use std::time::Duration;

    const TRYAGAIN: &str = "-TRYAGAIN restart fence: this node restarted and may have granted locks that are still held; it refuses writes for another";

    fn temp_dir() -> PathBuf {
        std::env::temp_dir().join(format!(
            "redlockd-unit-boot-{}-{}",
            std::process::id(),
            rand::random::<u64>()
        ))
    }

    /// A node on `dir` with the default fence (max-ttl 30 s + 1 s margin).
    fn node(dir: &Path) -> Session {
        Session::new(Config {
            dir: Some(dir.to_path_buf()),
            restart_delay: None,
            ..Config::for_tests()
        })
    }

    fn cmd(s: &mut Session, args: &[&str]) -> String {
        let mut out = BytesMut::new();
        s.call(args, &mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    /// INFO's `fence` and `fencing` fields that say how the node booted, one line.
    fn boot_info(s: &mut Session) -> String {
        let info = cmd(s, &["INFO", "fence"]) + &cmd(s, &["INFO", "fencing"]);
        let wanted = [
            "fence_active",
            "fence_remaining_ms",
            "fence_until_unix_ms",
            "fence_rule",
            "fence_length_ms",
            "last_boot",
        ];
        info.split("\r\n")
            .filter(|l| wanted.iter().any(|w| l.split(':').next() == Some(*w)))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Wall ms (the manual clock's) `ms` after the clock's start.
    fn wall(ms: u64) -> i64 {
        MANUAL_WALL_START_MS + ms as i64
    }

    fn generation(s: &Session) -> u64 {
        s.shared().node_dir.as_ref().unwrap().state().boot
    }

    #[test]
    fn declared_new_then_same_boot_then_reboot() {
        let dir = temp_dir();
        assert!(NodeDir::init(&dir, false).unwrap().contains("declared"));
        let mut s = node(&dir);
        assert_eq!(
            boot_info(&mut s),
            "fence_active:0 fence_remaining_ms:0 fence_until_unix_ms:0 fence_rule:declared-new fence_length_ms:0 last_boot:fresh"
        );
        assert_eq!(generation(&s), 1);
        assert_eq!(cmd(&mut s, &["SET", "a", "x", "PX", "5000"]), "+OK\r\n");

        // A crash 2 s later, on the same boot: until the recorded reach (the lock's
        // deadline + 1 s reserved ahead) + 1 s margin, that is 5 s from now.
        s.clock().advance(Duration::from_millis(2000));
        s.shared().crash_restart();
        assert_eq!(
            boot_info(&mut s),
            format!("fence_active:1 fence_remaining_ms:5000 fence_until_unix_ms:{} fence_rule:same-boot fence_length_ms:5000 last_boot:fence", wall(7000))
        );
        assert_eq!(generation(&s), 2);
        assert_eq!(cmd(&mut s, &["GET", "a"]), "$-1\r\n", "keys are forgotten");
        assert_eq!(
            cmd(&mut s, &["SET", "b", "y", "PX", "100"]),
            format!("{TRYAGAIN} 5000 ms\r\n")
        );
        s.clock().advance(Duration::from_millis(4999));
        assert!(cmd(&mut s, &["SET", "b", "y", "PX", "100"]).starts_with(TRYAGAIN));
        s.clock().advance(Duration::from_millis(1));
        assert_eq!(cmd(&mut s, &["SET", "b", "y", "PX", "100"]), "+OK\r\n");

        // Crashed again once everything it could have granted is over (that grant's
        // reach, 1.1 s from now, + margin): the same rule, nothing left to wait for.
        s.clock().advance(Duration::from_millis(2100));
        s.shared().crash_restart();
        assert_eq!(
            boot_info(&mut s),
            "fence_active:0 fence_remaining_ms:0 fence_until_unix_ms:0 fence_rule:same-boot fence_length_ms:0 last_boot:fence"
        );
        assert_eq!(cmd(&mut s, &["SET", "c", "z", "PX", "7500"]), "+OK\r\n");
        assert!(cmd(&mut s, &["INFO", "fencing"]).contains("\r\ngrant_reach_ttl_ms:8000\r\n"));

        // After a reboot the downtime is unknown: the longest TTL granted (7.5 s,
        // reserved in whole seconds) + 1 s margin, from now.
        s.shared().reach.pretend_reboot();
        s.clock().advance(Duration::from_millis(100_000));
        s.shared().crash_restart();
        assert_eq!(
            boot_info(&mut s),
            format!("fence_active:1 fence_remaining_ms:9000 fence_until_unix_ms:{} fence_rule:reboot fence_length_ms:9000 last_boot:fence", wall(2000 + 5000 + 2100 + 100_000 + 9000))
        );
        assert_eq!(generation(&s), 4);
        drop(s);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_directory_without_a_record_gets_the_full_fence_and_delay_zero_none() {
        let dir = temp_dir();
        let mut s = node(&dir);
        assert_eq!(
            boot_info(&mut s),
            format!("fence_active:1 fence_remaining_ms:31000 fence_until_unix_ms:{} fence_rule:no-history fence_length_ms:31000 last_boot:fence", wall(31_000))
        );
        assert_eq!(
            cmd(&mut s, &["SET", "a", "x", "PX", "100"]),
            format!("{TRYAGAIN} 31000 ms (its data directory holds no record of what it granted; a brand-new node is declared with `redlockd init --dir DIR` before its first start)\r\n")
        );
        drop(s);
        std::fs::remove_dir_all(&dir).unwrap();

        let dir = temp_dir();
        let mut s = Session::new(Config {
            dir: Some(dir.clone()),
            ..Config::for_tests()
        });
        assert_eq!(
            boot_info(&mut s),
            "fence_active:0 fence_remaining_ms:0 fence_until_unix_ms:0 fence_rule:off fence_length_ms:0 last_boot:fresh"
        );
        assert_eq!(cmd(&mut s, &["SET", "a", "x", "PX", "100"]), "+OK\r\n");
        s.shared().crash_restart();
        assert_eq!(
            boot_info(&mut s),
            "fence_active:0 fence_remaining_ms:0 fence_until_unix_ms:0 fence_rule:off fence_length_ms:0 last_boot:fresh"
        );
        drop(s);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_clean_restart_keeps_keys_tokens_and_what_was_left_of_the_fence() {
        let dir = temp_dir();
        NodeDir::init(&dir, false).unwrap();
        let mut s = node(&dir);
        assert_eq!(cmd(&mut s, &["SET", "a", "x", "PX", "5000"]), "+OK\r\n");
        assert_eq!(
            cmd(&mut s, &["FENCING.GRANT", "l", "me", "PX", "10000"]),
            ":0\r\n"
        );
        assert_eq!(cmd(&mut s, &["FENCING.COMMIT", "l", "me", "12"]), ":1\r\n");
        s.clock().advance(Duration::from_millis(1000));
        save(s.shared()).unwrap();
        assert_eq!(s.shared().boot().name(), "snapshot");
        assert_eq!(
            boot_info(&mut s),
            "fence_active:0 fence_remaining_ms:0 fence_until_unix_ms:0 fence_rule:snapshot fence_length_ms:0 last_boot:snapshot"
        );
        assert_eq!(cmd(&mut s, &["PTTL", "a"]), ":4000\r\n");
        assert_eq!(cmd(&mut s, &["PTTL", "l"]), ":9000\r\n");
        assert_eq!(cmd(&mut s, &["FENCING.MARK"]), ":12\r\n");
        assert!(cmd(&mut s, &["INFO", "fencing"]).contains("\r\nfencing_token_reserved:12\r\n"));
        assert!(!dir.join("snapshot.rdl").exists(), "used once");

        // A crash right after: the restored locks (9 s left) + margin.
        s.shared().crash_restart();
        assert_eq!(
            boot_info(&mut s),
            format!("fence_active:1 fence_remaining_ms:10000 fence_until_unix_ms:{} fence_rule:same-boot fence_length_ms:10000 last_boot:fence", wall(11_000))
        );
        // A clean restart 3 s into that fence keeps the 7 s left of it.
        s.clock().advance(Duration::from_millis(3000));
        save(s.shared()).unwrap();
        assert_eq!(s.shared().boot().name(), "snapshot");
        assert_eq!(
            boot_info(&mut s),
            format!("fence_active:1 fence_remaining_ms:7000 fence_until_unix_ms:{} fence_rule:snapshot fence_length_ms:7000 last_boot:snapshot", wall(11_000))
        );
        drop(s);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A new process restores a clean-shutdown snapshot, grants a short lock and
    /// crashes: the fence still outlasts the restored locks (the short grant's record
    /// does not replace theirs).
    #[test]
    fn after_a_restore_the_record_covers_the_restored_locks() {
        let dir = temp_dir();
        NodeDir::init(&dir, false).unwrap();
        let mut a = node(&dir);
        assert_eq!(cmd(&mut a, &["SET", "l", "v", "PX", "10000"]), "+OK\r\n");
        a.clock().advance(Duration::from_millis(1000));
        save(a.shared()).unwrap();
        drop(a);
        let mut b = node(&dir);
        assert_eq!(cmd(&mut b, &["PTTL", "l"]), ":9000\r\n");
        assert_eq!(cmd(&mut b, &["SET", "s", "v", "PX", "100"]), "+OK\r\n");
        b.shared().crash_restart();
        assert_eq!(
            boot_info(&mut b),
            format!("fence_active:1 fence_remaining_ms:10000 fence_until_unix_ms:{} fence_rule:same-boot fence_length_ms:10000 last_boot:fence", wall(10_000))
        );
        drop(b);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn another_nodes_snapshot_is_refused_and_the_fence_outlasts_its_keys() {
        let (a, b) = (temp_dir(), temp_dir());
        NodeDir::init(&a, false).unwrap();
        NodeDir::init(&b, false).unwrap();
        let mut na = node(&a);
        assert_eq!(cmd(&mut na, &["SET", "k", "a", "PX", "25000"]), "+OK\r\n");
        save(na.shared()).unwrap();
        drop(na);
        let mut nb = node(&b);
        std::fs::copy(a.join("snapshot.rdl"), b.join("snapshot.rdl")).unwrap();
        nb.shared().crash_restart();
        // b granted nothing (its own rule: 1 s margin), but a's keys could be held.
        assert_eq!(
            boot_info(&mut nb),
            format!("fence_active:1 fence_remaining_ms:26000 fence_until_unix_ms:{} fence_rule:same-boot fence_length_ms:26000 last_boot:fence", wall(26_000))
        );
        assert_eq!(cmd(&mut nb, &["EXISTS", "k"]), ":0\r\n");
        assert!(
            !b.join("snapshot.rdl").exists(),
            "a refused snapshot is removed"
        );
        drop(nb);
        std::fs::remove_dir_all(&a).unwrap();
        std::fs::remove_dir_all(&b).unwrap();
    }

    #[test]
    fn a_snapshot_above_this_runs_max_ttl_is_refused_and_one_at_it_is_not() {
        let dir = temp_dir();
        NodeDir::init(&dir, false).unwrap();
        let mut s = node(&dir);
        assert_eq!(cmd(&mut s, &["SET", "k", "v", "PX", "30000"]), "+OK\r\n");
        save(s.shared()).unwrap();
        assert_eq!(s.shared().boot().name(), "snapshot");
        assert_eq!(cmd(&mut s, &["PTTL", "k"]), ":30000\r\n");
        save(s.shared()).unwrap();
        // The next run has max-ttl 10 s: a lock with 30 s left would outlive the fence
        // of a crash without a record.
        s.shared().fence.reconfigure(10_000, 11_000);
        assert_eq!(s.shared().boot().name(), "fence");
        assert_eq!(cmd(&mut s, &["EXISTS", "k"]), ":0\r\n");
        assert!(cmd(&mut s, &["INFO", "fence"])
            .contains("\r\nmax_ttl_ms:10000\r\nrestart_delay_ms:11000\r\n"));
        drop(s);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Captures what this thread logs while `f` runs. One global subscriber for the
    /// whole test binary, writing into the capturing thread's buffer (a scoped one
    /// misses events: tracing caches each call site's interest across threads).
    #[cfg(feature = "cli")]
    fn logged(f: impl FnOnce()) -> String {
        use std::cell::RefCell;
        thread_local!(static CAPTURE: RefCell<Option<Vec<u8>>> = const { RefCell::new(None) });
        struct ToCapture;
        impl std::io::Write for ToCapture {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                CAPTURE.with(|c| {
                    if let Some(buf) = c.borrow_mut().as_mut() {
                        buf.extend_from_slice(b);
                    }
                });
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        static INSTALLED: std::sync::Once = std::sync::Once::new();
        INSTALLED.call_once(|| {
            let subscriber = tracing_subscriber::fmt()
                .with_writer(|| ToCapture)
                .with_ansi(false)
                .with_max_level(tracing::Level::INFO)
                .finish();
            tracing::subscriber::set_global_default(subscriber).expect("the only one");
        });
        CAPTURE.with(|c| *c.borrow_mut() = Some(Vec::new()));
        f();
        let out = CAPTURE.with(|c| c.borrow_mut().take()).unwrap_or_default();
        String::from_utf8_lossy(&out).into_owned()
    }

    /// The first start on a directory with no node in it tells the operator how to
    /// declare a brand-new node; no other start does.
    #[cfg(feature = "cli")]
    #[test]
    fn only_a_first_start_on_an_empty_directory_says_how_to_declare_a_new_node() {
        let hint = "had no node in it: a new identity was made";
        let dir = temp_dir();
        let mut node_a = None;
        let log = logged(|| node_a = Some(node(&dir)));
        assert!(log.contains(hint), "{log}");
        assert!(
            log.contains(&format!("`redlockd init --dir {}`", dir.display())),
            "{log}"
        );
        let s = node_a.unwrap();
        assert!(!logged(|| s.shared().crash_restart()).contains(hint));
        drop(s);
        let log = logged(|| drop(node(&dir)));
        assert!(log.contains("node identity"), "{log}");
        assert!(!log.contains(hint), "{log}");
        std::fs::remove_dir_all(&dir).unwrap();
        let dir = temp_dir();
        NodeDir::init(&dir, false).unwrap();
        assert!(!logged(|| drop(node(&dir))).contains(hint));
        std::fs::remove_dir_all(&dir).unwrap();
        // An empty directory, but the fence is off: nothing to declare.
        let dir = temp_dir();
        let off = || {
            drop(Session::new(Config {
                dir: Some(dir.clone()),
                ..Config::for_tests()
            }))
        };
        assert!(!logged(off).contains(hint));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
