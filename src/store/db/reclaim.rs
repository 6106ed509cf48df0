//! Active expiry's side of a database: filing new deadlines into the index, reclaiming
//! the due keys in slices, and giving back the tables that emptied.

use super::*;

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

    /// Files the deadlines of the keys written since the last call (`expiry.rs`).
    pub fn file_pending(&self) {
        for (shard, hashes) in self.expiry.take_pending() {
            let mut found = Vec::with_capacity(hashes.len());
            {
                let table = self.shards[shard].0.read();
                for &hash in &hashes {
                    // `find` offers every slot whose 7-bit tag matches: the full hash
                    // is checked on the ones with a deadline, and the search goes on.
                    table.find(hash, |p| {
                        if let Some(d) = p.deadline_ms() {
                            if self.hash(p.key()) == hash {
                                found.push((d, hash));
                            }
                        }
                        false
                    });
                }
            }
            let mut slots = self.expiry.slots();
            for (d, hash) in found {
                self.expiry.file(&mut slots, d, hash);
            }
        }
    }

    /// Removes the expired keys whose slot is due, at most about `budget` lookups;
    /// returns how many keys went and whether due work is left for another call.
    pub fn reclaim_due(&self, now_ms: u64, budget: usize) -> (usize, bool) {
        let mut due = self.expiry.take_due(now_ms);
        if due.is_empty() {
            return (0, false);
        }
        let left = if due.len() > budget {
            due.split_off(budget)
        } else {
            Vec::new()
        };
        let more = !left.is_empty();
        if more {
            self.expiry.refile_due(left);
        }
        let mut by_shard: Vec<(usize, u64)> =
            due.into_iter().map(|h| (self.shard_of(h), h)).collect();
        by_shard.sort_unstable();
        let mut removed = 0;
        let mut not_yet = Vec::new();
        let now_slot = now_ms / SLOT_MS;
        for batch in by_shard.chunk_by(|a, b| a.0 == b.0) {
            for part in batch.chunks(REMOVALS_PER_LOCK) {
                let mut gone = Vec::new();
                let shard = part[0].0;
                {
                    let mut table = self.shards[shard].0.write();
                    for &(_, hash) in part {
                        let mine = |k: &[u8]| self.hash(k) == hash;
                        while let Some(h) =
                            table.find(hash, |p| p.is_expired(now_ms) && mine(p.key()))
                        {
                            let p = table.view(h);
                            self.watched.touch(p.key(), false);
                            self.tracked.changed(p.key());
                            drop(p);
                            gone.push(table.delete(hash, h));
                        }
                        // Due later in a slot being looked at now: file it again. (A
                        // later slot's deadline was filed when it was written.)
                        let later = table.find(hash, |p| {
                            p.deadline_ms().is_some_and(|d| d / SLOT_MS <= now_slot)
                                && mine(p.key())
                        });
                        if let Some(d) = later.and_then(|h| table.view(h).deadline_ms()) {
                            not_yet.push((d, hash));
                        }
                    }
                    removed += gone.len();
                    self.shrink_if_sparse(&mut table);
                }
                // Freed outside the lock (a big value takes a while to free).
                drop(gone);
            }
        }
        if !not_yet.is_empty() {
            let mut slots = self.expiry.slots();
            for (d, hash) in not_yet {
                self.expiry.file(&mut slots, d, hash);
            }
        }
        (removed, more)
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

    /// Every expired key whose deadline is filed, now (tests, the manual clock).
    pub fn sweep(&self, now_ms: u64) -> usize {
        self.file_pending();
        let mut total = 0;
        loop {
            let (n, more) = self.reclaim_due(now_ms, usize::MAX);
            total += n;
            if !more {
                return total;
            }
        }
    }

    /// Deadlines filed in the expiry index (stale ones included).
    pub fn expiry_filed(&self) -> usize {
        self.expiry.filed()
    }
}
