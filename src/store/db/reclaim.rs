//! Active expiry's side of a database: reclaiming the due keys in slices, page by page
//! of the shards' slabs, and giving back the tables that emptied.
//!
//! No index of deadlines: each slab page keeps the lowest deadline of its entries (a
//! write that sets a deadline lowers it, under the shard's write lock), and each slab
//! the lowest of its pages'. A shard whose minimum is not due costs one comparison; in
//! one that is, only the pages whose minimum is due are read, their expired entries
//! removed (each key hashed again to find its table slot), and their minimum set to
//! what is left. Idle, with every deadline far off, a sweep reads 64 numbers per
//! database.

use super::*;
use crate::store::packed::slot_is_free;

/// Slab pages read per hold of a shard's write lock (with REMOVALS_PER_LOCK, what
/// bounds a hold: each page is at most 256 slots).
const PAGES_PER_LOCK: usize = 64;

impl Db {
    /// Keys with a TTL (for INFO keyspace's `expires=`).
    pub fn count_expiring(&self) -> usize {
        self.shards
            .iter()
            .map(|s| {
                let table = s.0.read();
                table
                    .iter()
                    .filter(|(_, p)| p.deadline_ms().is_some())
                    .count()
            })
            .sum()
    }

    /// Removes the expired keys of the pages whose minimum deadline is due, about
    /// `budget` keys at most; returns how many keys went and whether due work may be
    /// left for another call.
    pub fn reclaim_due(&self, now_ms: u64, budget: usize) -> (usize, bool) {
        let mut removed = 0;
        let mut slots = Vec::new();
        for shard in self.shards.iter() {
            loop {
                // A key expires when now is past its deadline.
                if shard.0.read().slab().min_deadline() >= now_ms {
                    break;
                }
                if removed >= budget {
                    return (removed, true);
                }
                let mut gone = Vec::new();
                let done = {
                    let mut table = shard.0.write();
                    let limit = REMOVALS_PER_LOCK.min(budget - removed);
                    let done = self.reclaim_pages(&mut table, now_ms, limit, &mut gone, &mut slots);
                    self.shrink_if_sparse(&mut table);
                    done
                };
                removed += gone.len();
                // Freed outside the lock (a big value takes a while to free).
                drop(gone);
                if done {
                    break;
                }
            }
        }
        (removed, false)
    }

    /// One hold of a shard's write lock: from the slab's sweep cursor on, the pages
    /// whose minimum is due are read and their expired entries removed, up to `limit`
    /// removals and PAGES_PER_LOCK pages. Returns true when the last page was reached
    /// (the slab's minimum is then recomputed, the cursor back at the start).
    fn reclaim_pages(
        &self,
        table: &mut Table,
        now_ms: u64,
        limit: usize,
        gone: &mut Vec<Leftover>,
        slots: &mut Vec<u32>,
    ) -> bool {
        let mut visited = 0;
        let mut pi = table.slab().sweep_cursor();
        while pi < table.slab().page_count() {
            if table.slab().page_min(pi) >= now_ms {
                pi += 1;
                continue;
            }
            if visited == PAGES_PER_LOCK {
                table.set_sweep_cursor(pi);
                return false;
            }
            visited += 1;
            slots.clear();
            slots.extend(table.slab().page_slots(pi));
            let mut left_min = u64::MAX;
            for &h in slots.iter() {
                // SAFETY: a slot of page `pi`, live (`page_slots` is empty for a freed
                // page, and the loop stops when a removal frees it), handed out before.
                if unsafe { slot_is_free(table.slab(), h) } {
                    continue;
                }
                let p = table.view(h);
                match p.deadline_ms() {
                    Some(d) if now_ms > d => {
                        // A delayed lock stays until its delay ends (`store/lock.rs`).
                        if let Some(end) = self.delay.ends_at(&p).filter(|&e| now_ms <= e) {
                            left_min = left_min.min(end);
                            continue;
                        }
                        if gone.len() == limit {
                            // The page's minimum stays due: the next hold starts here.
                            table.set_sweep_cursor(pi);
                            return false;
                        }
                        self.watched.touch(p.key(), false);
                        self.tracked.changed(p.key());
                        self.expired(p.key(), p.is_lock());
                        let hash = self.hash(p.key());
                        gone.push(table.delete(hash, h));
                        if !table.slab().page_live(pi) {
                            break;
                        }
                    }
                    Some(d) => left_min = left_min.min(d),
                    None => {}
                }
            }
            if table.slab().page_live(pi) {
                table.set_page_min(pi, left_min);
            }
            pi += 1;
        }
        table.set_sweep_cursor(0);
        table.recompute_min();
        true
    }

    /// Shrinks the sparse shard tables (the sweeper calls it round-robin, for tables
    /// emptied by DEL rather than by expiry); returns how many bytes were freed.
    pub fn shrink_sparse_shards(&self) -> usize {
        let mut freed = 0;
        for shard in self.shards.iter() {
            let sparse = {
                let t = shard.0.read();
                t.capacity() > SHRINK_MIN_CAPACITY && t.len() * 4 < t.capacity()
            };
            if sparse {
                let mut table = shard.0.write();
                let before = table_size(table.buckets());
                self.shrink_if_sparse(&mut table);
                freed += before - table_size(table.buckets());
            }
        }
        freed
    }

    /// Moves entries out of slab pages left sparse by deletions, so that the pages go
    /// back to the heap: at most REMOVALS_PER_LOCK moves per hold of a shard's write
    /// lock, `budget` in all. Returns how many entries moved.
    pub fn compact_sparse_shards(&self, budget: usize) -> usize {
        let mut moved = 0;
        for shard in self.shards.iter() {
            while moved < budget && shard.0.read().slab().sparse_class().is_some() {
                let step = REMOVALS_PER_LOCK.min(budget - moved);
                let n = shard.0.write().compact(step, |k| self.hash(k));
                moved += n;
                if n == 0 {
                    break;
                }
            }
        }
        moved
    }

    /// Every expired key, now (tests, the manual clock).
    pub fn sweep(&self, now_ms: u64) -> usize {
        let mut total = 0;
        loop {
            let (n, more) = self.reclaim_due(now_ms, usize::MAX);
            total += n;
            if !more {
                return total;
            }
        }
    }
}
