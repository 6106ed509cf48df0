//! The expiry sweeper: active expiry of due deadlines, on a thread of its own with the
//! real clock, inside every `advance` with a manual clock.

use super::Shared;
use std::io;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// How often the real-clock sweeper looks for due deadlines. With a manual clock the
/// sweep runs inside every `advance` instead. A key goes at most about this long after
/// its deadline.
const SWEEP_INTERVAL: Duration = Duration::from_millis(50);

/// Expired keys removed per hold of the keyspace gate: a script or EXEC waiting
/// for the gate waits for one slice (a few ms), not for a whole mass expiry.
const SWEEP_SLICE: usize = 20_000;

/// Entries moved out of sparse slab pages per tick, at most (one database's shards).
const COMPACT_PER_TICK: usize = 16_384;

/// Keys reclaimed by a burst of expiry after which freed heap is handed back to the
/// kernel (glibc keeps small freed chunks otherwise).
const TRIM_AFTER_KEYS: usize = 10_000;

/// With a manual clock, expired keys are reclaimed inside every `advance`, so a test
/// sees them gone (DBSIZE, INFO keyspace) as soon as `advance` returns.
pub(crate) fn install_manual_sweep(shared: &Arc<Shared>) {
    if !shared.clock.is_manual() {
        return;
    }
    let weak = Arc::downgrade(shared);
    shared.clock.on_advance(move || {
        if let Some(shared) = weak.upgrade() {
            sweep(&shared);
        }
    });
}

/// One active-expiry pass: removes the keys whose deadlines are due, in slices (`SWEEP_SLICE`). Returns how
/// many keys went.
fn sweep(shared: &Shared) -> usize {
    let dbs = shared.keyspace.dbs();
    if !shared.active_expire.load(Ordering::Relaxed) {
        return 0;
    }
    let mut total = 0;
    for db in dbs {
        loop {
            // A script holds the gate exclusively and sees time frozen at its start:
            // keys must not vanish under it, so the sweep waits for the next pass.
            let Some(gate) = crate::commands::exec::gate::try_shared(shared) else {
                return total;
            };
            let (n, more) = db.reclaim_due(shared.clock.now_ms(), SWEEP_SLICE);
            // Keyspace notifications: `expired`, under the gate as in Redis.
            crate::commands::notify::flush(shared);
            // Client-side caching: readers of the expired keys are told.
            crate::commands::admin::tracking::deliver(shared, None, true);
            // Lock introspection: records of locks that went another way.
            crate::commands::families::locks::prune_now_and_then(shared);
            drop(gate);
            total += n;
            shared
                .stats
                .expired_keys
                .fetch_add(n as u64, Ordering::Relaxed);
            if !more {
                break;
            }
        }
    }
    total
}

/// The real-clock sweeper: a thread of its own, so a mass expiry never runs on an
/// async worker (a full scan there stalled every connection of that worker). Idle, it
/// wakes every `SWEEP_INTERVAL` to find nothing due: no work per key.
pub(crate) fn spawn_sweeper(shared: &Arc<Shared>) -> io::Result<()> {
    if shared.clock.is_manual() {
        return Ok(());
    }
    let weak = Arc::downgrade(shared);
    std::thread::Builder::new()
        .name("redlockd-expiry".into())
        .spawn(move || sweeper(weak))?;
    Ok(())
}

fn sweeper(shared: Weak<Shared>) {
    let mut round = 0usize;
    let mut freed = 0usize;
    loop {
        std::thread::sleep(SWEEP_INTERVAL);
        let Some(shared) = shared.upgrade() else {
            return;
        };
        if shared.shutting_down.load(Ordering::SeqCst) {
            return;
        }
        let n = sweep(&shared);
        // Tables emptied by DEL rather than expiry: one database's shards per tick.
        let dbs = shared.keyspace.dbs();
        if !dbs.is_empty() {
            freed += dbs[round % dbs.len()].shrink_sparse_shards();
            // Slab pages left sparse by deletions: entries moved so that pages go.
            freed += dbs[round % dbs.len()].compact_sparse_shards(COMPACT_PER_TICK);
            round = round.wrapping_add(1);
        }
        freed += n;
        if n == 0 && freed >= TRIM_AFTER_KEYS {
            crate::alloc::trim();
            freed = 0;
        }
        crate::alloc::used_memory(); // keeps the peak current
    }
}
