//! What a node does when it boots and when it shuts down cleanly.
//!
//! A clean shutdown (SIGTERM, SHUTDOWN) writes every live key with its remaining TTL,
//! the fencing-token mark and what is left of the restart fence to the data directory
//! (`durability::snapshot`), once no command can run any more. The next boot restores it and
//! skips the fence: the node forgot nothing, so it cannot hand out a lock someone holds.
//! Every other boot (a crash, kill -9, DEBUG CRASH-RESTART, a first start) finds no
//! usable snapshot and raises the fence as before.
//!
//! A snapshot is used at most once and only by the boot right after the run that wrote
//! it: the node's boot count is bumped (fsynced) at every boot, and the snapshot is
//! removed as it is read. One from another node, a damaged one, or one older than the
//! last crash is refused with a log line saying why, and the fence applies.

use crate::node::Shared;
use crate::protocol::numfmt::hex;
use crate::durability::data_dir::{NodeDir, NodeState};
use crate::durability::snapshot::{self, Snapshot};
use std::io;
use std::sync::atomic::Ordering;

/// How the node last booted (INFO fencing `last_boot`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BootKind {
    /// First boot of a process whose config skips the fence (tests' fresh nodes).
    Fresh,
    /// Restored from a clean-shutdown snapshot: no fence.
    Snapshot,
    /// No usable snapshot: the restart fence is up.
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

/// Boots `shared` in place: `first` for the process's own start (where the config may
/// skip the fence), otherwise a restart (crash-restart, the test backend).
pub fn boot(shared: &Shared, first: bool) -> BootKind {
    let now = shared.clock.now_ms();
    let max_ttl_ms = shared.fence.max_ttl_ms();
    let found = shared
        .node_dir
        .as_deref()
        .and_then(|dir| take_snapshot(dir, max_ttl_ms));
    shared.keyspace.flush_all();
    shared.scripts.flush();
    // Functions are not in the snapshot: every restart forgets them (docs/compatibility.md).
    shared.scripts.flush_functions();
    shared.started_ms.store(now, Ordering::Relaxed);
    let kind = match found {
        Some(snap) => match shared.tokens.restore(snap.header.token_mark) {
            Ok(()) => {
                let keys = snap.keys.len();
                snapshot::restore(&shared.keyspace, snap.keys, now);
                shared.fence.resume(now, snap.header.fence_remaining_ms);
                tracing::info!(
                    keys,
                    token_mark = snap.header.token_mark,
                    "clean-shutdown snapshot restored: locks kept with their remaining TTLs; restart fence skipped"
                );
                BootKind::Snapshot
            }
            Err(e) => {
                tracing::error!("cannot make the restored token mark durable ({e}): snapshot not used; the restart fence applies");
                fence_up(shared, now, first)
            }
        },
        None => fence_up(shared, now, first),
    };
    *shared.last_boot.lock() = kind;
    kind
}

fn fence_up(shared: &Shared, now: u64, first: bool) -> BootKind {
    shared.keyspace.flush_all();
    shared.tokens.resume_after_crash();
    if first && !shared.config.fence_at_boot {
        shared.fence.lift();
        BootKind::Fresh
    } else {
        shared.fence.restart(now);
        BootKind::Fenced
    }
}

/// Reads, checks and consumes the snapshot (if any), and bumps the boot count. Returns
/// the snapshot only if it is this node's, whole, and from the boot right before.
fn take_snapshot(dir: &NodeDir, max_ttl_ms: u64) -> Option<Snapshot> {
    let before = dir.state();
    let path = dir.snapshot_path();
    let shown = path.display();
    let raw = match dir.read_snapshot() {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!("cannot read snapshot {shown}: {e}; the restart fence applies");
            None
        }
    };
    let verdict = raw.map(|raw| snapshot::decode(&raw).and_then(|s| check(s, &before, max_ttl_ms)));
    // From here on, this is a new boot: a snapshot of an earlier one is stale.
    if let Err(e) = dir.update(|s| s.boot += 1) {
        tracing::error!(
            "cannot record this boot in {}: {e}; no snapshot is used",
            dir.path().display()
        );
        return None;
    }
    let found = match verdict {
        None => None,
        Some(Ok(snap)) => Some(snap),
        Some(Err(why)) => {
            tracing::warn!("snapshot {shown} refused: {why}; the restart fence applies");
            None
        }
    };
    if let Err(e) = dir.remove_snapshot() {
        // The boot count already makes it stale; say so anyway.
        tracing::warn!("cannot remove the used snapshot {shown}: {e}");
    }
    found
}

/// Whether a decoded snapshot may be trusted by a node whose state is `state`.
fn check(snap: Snapshot, state: &NodeState, max_ttl_ms: u64) -> Result<Snapshot, String> {
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
            "written by boot {} but this node booted since (boot {}) and did not shut down cleanly: it is older than the last crash",
            h.boot, state.boot
        ));
    }
    // A later crash's fence lasts about max-ttl: it must outlast every restored lock.
    if let Some(ms) = snap.keys.iter().filter_map(|k| k.remaining_ms).max() {
        if ms > max_ttl_ms {
            return Err(format!(
                "a key has {ms} ms of TTL left, above this run's max-ttl of {max_ttl_ms} ms"
            ));
        }
    }
    Ok(snap)
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
    tracing::info!(
        path = %dir.snapshot_path().display(),
        bytes = bytes.len(),
        token_mark = header.token_mark,
        "clean shutdown: live keys saved; the next boot restores them and skips the restart fence"
    );
    Ok(())
}
