use super::expiry::{ExpiryIndex, SLOT_MS};
use super::watch::{WatchFlag, Watched};
use super::Entry;
use bytes::Bytes;
use dashmap::mapref::entry::Entry as MapEntry;
use dashmap::mapref::one::{Ref, RefMut};
use dashmap::DashMap;
use std::hash::{BuildHasher, DefaultHasher, Hash, Hasher};
use std::sync::Arc;

/// How many locks a database is split into. Many small shards keep both command
/// contention and the sweeper's per-shard pauses short (a million keys is ~16k a shard).
const SHARDS: usize = 64;

/// Expired keys removed per hold of a shard's write lock (a few tens of microseconds):
/// a mass expiry never stalls the commands waiting for that shard for long.
const REMOVALS_PER_LOCK: usize = 256;

/// A shard's table is shrunk once it is less than a quarter full, and never below this
/// many buckets (tiny tables are not worth rehashing).
const SHRINK_MIN_BUCKETS: usize = 256;

/// Shrinks a locked shard table that is less than a quarter full (mass expiry, DEL):
/// hashbrown never shrinks on its own. (A macro: dashmap does not name the table type.)
macro_rules! shrink_if_sparse {
    ($db:expr, $table:expr) => {
        if $table.buckets() > SHRINK_MIN_BUCKETS && $table.len() * 4 < $table.buckets() {
            let hasher = $db.map.hasher();
            let len = $table.len();
            $table.shrink_to(len * 2, |(k, _)| {
                let mut h = hasher.build_hasher();
                k.hash(&mut h);
                h.finish()
            });
        }
    };
}

/// SipHash keyed by a seed: the seed makes SCAN order repeatable in tests and
/// unpredictable (collision-resistant) in production, where it is random.
#[derive(Clone, Copy, Debug)]
pub struct SeededState(u64);

impl BuildHasher for SeededState {
    type Hasher = DefaultHasher;
    fn build_hasher(&self) -> DefaultHasher {
        let mut h = DefaultHasher::new();
        h.write_u64(self.0);
        h
    }
}

/// One database: keys to entries, expired lazily on access and by `sweep`. Every
/// path that changes a key (expiry included) touches it for WATCH (see `watch.rs`).
/// A stored key: its bytes on the heap behind a 16-byte slot field (a `Bytes` is 32).
type Key = Box<[u8]>;

pub struct Db {
    map: DashMap<Key, Entry, SeededState>,
    watched: Watched,
    expiry: ExpiryIndex,
}

impl Db {
    pub fn new(seed: u64) -> Db {
        Db {
            map: DashMap::with_hasher_and_shard_amount(SeededState(seed), SHARDS),
            watched: Watched::default(),
            expiry: ExpiryIndex::new(SHARDS),
        }
    }

    /// The hash the shard tables use for `key`.
    fn hash(&self, key: &[u8]) -> u64 {
        self.map.hasher().hash_one(key)
    }

    /// A write to `key` is coming (the caller may set its deadline): the expiry index
    /// will read it later (`expiry.rs`).
    fn note_write(&self, key: &[u8]) {
        let hash = self.hash(key);
        self.expiry
            .note(self.map.determine_shard(hash as usize), hash);
    }

    /// Removes `key` if it is expired (lazy expiry), touching it if it was.
    fn expire_now(&self, key: &[u8], now_ms: u64) {
        if self
            .map
            .remove_if(key, |_, e| e.is_expired(now_ms))
            .is_some()
        {
            self.watched.touch(key, false);
        }
    }

    /// The live entry at `key`; an expired one is removed and reads as absent.
    pub fn get(&self, key: &[u8], now_ms: u64) -> Option<Ref<'_, Key, Entry>> {
        let found = self.map.get(key)?;
        if !found.is_expired(now_ms) {
            return Some(found);
        }
        drop(found);
        self.expire_now(key, now_ms);
        None
    }

    /// Like `get`, for changing the entry in place (so the key counts as touched).
    pub fn get_mut(&self, key: &[u8], now_ms: u64) -> Option<RefMut<'_, Key, Entry>> {
        let found = self.map.get_mut(key)?;
        if !found.is_expired(now_ms) {
            self.note_write(key);
            self.watched.touch(key, true);
            return Some(found);
        }
        drop(found);
        self.expire_now(key, now_ms);
        None
    }

    /// The slot for `key`, holding its shard's lock: occupied only by a live entry.
    /// The key is copied, so the stored key never pins a connection's read buffer.
    /// It is copied once (one allocation) and moved, never cloned.
    /// Taking the slot counts as touching the key (the caller may write through it).
    pub fn entry(&self, key: &[u8], now_ms: u64) -> MapEntry<'_, Key, Entry> {
        let slot = match self.map.entry(Key::from(key)) {
            MapEntry::Occupied(o) if o.get().is_expired(now_ms) => {
                let (owned, _) = o.remove_entry();
                self.watched.touch(key, false);
                self.map.entry(owned)
            }
            slot => slot,
        };
        self.note_write(key);
        self.watched.touch(key, true);
        slot
    }

    /// Removes `key`, returning its entry if it was live.
    pub fn remove(&self, key: &[u8], now_ms: u64) -> Option<Entry> {
        let (_, entry) = self.map.remove(key)?;
        self.watched.touch(key, false);
        (!entry.is_expired(now_ms)).then_some(entry)
    }

    /// Stores `entry` at `key`, replacing whatever was there.
    pub fn insert(&self, key: &[u8], entry: Entry) {
        let has_deadline = entry.deadline_ms.is_some();
        self.map.insert(Key::from(key), entry);
        if has_deadline {
            self.note_write(key);
        }
        self.watched.touch(key, true);
    }

    /// WATCH: registers `flag` to be dirtied when `key` changes. A key already expired
    /// but not yet reclaimed is watched as "stale": its reclaiming is no change.
    pub fn watch(&self, key: &[u8], flag: &Arc<WatchFlag>, now_ms: u64) {
        // Registered first, checked after: a write in between dirties the flag (the
        // watch starts as not stale), never goes unseen.
        if !self.watched.add(key, flag) {
            return;
        }
        let stale = self.map.get(key).is_some_and(|e| e.is_expired(now_ms));
        if stale {
            self.watched.mark_stale(key, flag);
        }
    }

    pub fn unwatch(&self, key: &[u8], flag: &Arc<WatchFlag>) {
        self.watched.remove(key, flag);
    }

    /// EXEC's check (Redis's isWatchedKeyExpired): a key live when watched that has
    /// expired since, whether or not anything reclaimed it yet.
    pub fn watched_key_expired(&self, key: &[u8], flag: &Arc<WatchFlag>, now_ms: u64) -> bool {
        !self.watched.is_stale(key, flag) && self.map.get(key).is_some_and(|e| e.is_expired(now_ms))
    }

    pub fn contains(&self, key: &[u8], now_ms: u64) -> bool {
        self.get(key, now_ms).is_some()
    }

    /// Keys stored, including expired ones the sweeper has not reclaimed yet (as Redis).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Keys with a TTL (for INFO keyspace's `expires=`).
    pub fn count_expiring(&self) -> usize {
        self.map
            .iter()
            .filter(|e| e.value().deadline_ms.is_some())
            .count()
    }

    /// FLUSHDB: watched keys that existed are touched (Redis's touchAllWatchedKeysInDb).
    pub fn clear(&self) {
        let existed: Vec<Bytes> = self
            .watched
            .keys()
            .into_iter()
            .filter(|k| self.map.contains_key(&k[..]))
            .collect();
        self.expiry.clear();
        self.map.clear();
        // clear keeps every shard's table: give the memory back (FLUSHALL on a
        // million keys otherwise leaves ~200 MB of empty buckets).
        self.map.shrink_to_fit();
        for key in existed {
            self.watched.touch(&key, false);
        }
    }

    /// Every live key (for KEYS). Each shard is locked only while it is read.
    pub fn keys(&self, now_ms: u64) -> Vec<Bytes> {
        self.map
            .iter()
            .filter(|e| !e.value().is_expired(now_ms))
            .map(|e| Bytes::copy_from_slice(e.key()))
            .collect()
    }

    /// Calls `f` with every live entry, one shard locked at a time (for the snapshot).
    pub fn for_each_live(&self, now_ms: u64, mut f: impl FnMut(&[u8], &Entry)) {
        for e in self.map.iter() {
            if !e.value().is_expired(now_ms) {
                f(e.key(), e.value());
            }
        }
    }

    /// Files the deadlines of the keys written since the last call (`expiry.rs`).
    pub fn file_pending(&self) {
        let shards = self.map.shards();
        for (shard, hashes) in self.expiry.take_pending() {
            let mut found = Vec::with_capacity(hashes.len());
            {
                let table = shards[shard].read();
                for &hash in &hashes {
                    // SAFETY: the read lock is held while the buckets are read.
                    unsafe {
                        // iter_hash yields every bucket whose 7-bit tag matches: the
                        // full hash is checked on the ones with a deadline.
                        for bucket in table.iter_hash(hash) {
                            let (k, e) = bucket.as_ref();
                            if let Some(d) = e.get().deadline_ms {
                                if self.hash(k) == hash {
                                    found.push((d, hash));
                                }
                            }
                        }
                    }
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
        let shards = self.map.shards();
        let mut by_shard: Vec<(usize, u64)> = due
            .into_iter()
            .map(|h| (self.map.determine_shard(h as usize), h))
            .collect();
        by_shard.sort_unstable();
        let mut removed = 0;
        let mut not_yet = Vec::new();
        let now_slot = now_ms / SLOT_MS;
        for batch in by_shard.chunk_by(|a, b| a.0 == b.0) {
            for part in batch.chunks(REMOVALS_PER_LOCK) {
                let mut gone = Vec::new();
                let shard = part[0].0;
                {
                    let mut table = shards[shard].write();
                    for &(_, hash) in part {
                        let mine = |k: &[u8]| self.hash(k) == hash;
                        while let Some(b) =
                            table.find(hash, |(k, e)| e.get().is_expired(now_ms) && mine(&k[..]))
                        {
                            // SAFETY: the bucket was just found in this table, under
                            // its write lock.
                            let ((k, e), _) = unsafe { table.remove(b) };
                            self.watched.touch(&k, false);
                            gone.push((k, e));
                        }
                        // Due later in a slot being looked at now: file it again. (A
                        // later slot's deadline was filed when it was written.)
                        let later = table.find(hash, |(k, e)| {
                            e.get().deadline_ms.is_some_and(|d| d / SLOT_MS <= now_slot) && mine(&k[..])
                        });
                        if let Some(b) = later {
                            // SAFETY: found in this table, under its lock.
                            let d = unsafe { b.as_ref() }.1.get().deadline_ms;
                            not_yet.extend(d.map(|d| (d, hash)));
                        }
                    }
                    removed += gone.len();
                    shrink_if_sparse!(self, table);
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
    /// emptied by DEL rather than by expiry); returns how many buckets were freed.
    pub fn shrink_sparse_shards(&self) -> usize {
        let shards = self.map.shards();
        let mut freed = 0;
        for shard in shards.iter() {
            let sparse = {
                let t = shard.read();
                t.buckets() > SHRINK_MIN_BUCKETS && t.len() * 4 < t.buckets()
            };
            if sparse {
                let mut table = shard.write();
                let before = table.buckets();
                shrink_if_sparse!(self, table);
                freed += before - table.buckets();
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

    /// Bytes held by the shard tables themselves (buckets and control bytes).
    pub fn table_bytes(&self) -> usize {
        self.map
            .shards()
            .iter()
            .map(|s| {
                let t = s.read();
                if t.buckets() <= 1 {
                    0
                } else {
                    t.allocation_info().1.size()
                }
            })
            .sum()
    }

    /// One SCAN step: the cursor is a shard index; whole shards are returned until at
    /// least `count` keys are gathered. Returns the next cursor (0 when done) and the
    /// live keys seen. A key present for the whole iteration is returned exactly once.
    pub fn scan(&self, cursor: u64, count: usize, now_ms: u64) -> (u64, Vec<Bytes>) {
        let shards = self.map.shards();
        let mut out = Vec::new();
        let mut shard = cursor as usize;
        while shard < shards.len() {
            let table = shards[shard].read();
            // SAFETY: the shard's read lock is held for the whole iteration, so the
            // table cannot be mutated or freed while its buckets are read.
            unsafe {
                for bucket in table.iter() {
                    let (key, value) = bucket.as_ref();
                    if !value.get().is_expired(now_ms) {
                        out.push(Bytes::copy_from_slice(key));
                    }
                }
            }
            shard += 1;
            if out.len() >= count {
                break;
            }
        }
        let next = if shard >= shards.len() {
            0
        } else {
            shard as u64
        };
        (next, out)
    }
}

/// All databases. What makes several commands atomic together (scripts, MULTI/EXEC)
/// is not here but in `commands::atomic`.
pub struct Keyspace {
    dbs: Vec<Db>,
}

impl Keyspace {
    pub fn new(databases: usize, seed: u64) -> Keyspace {
        Keyspace {
            dbs: (0..databases).map(|_| Db::new(seed)).collect(),
        }
    }

    pub fn db(&self, index: usize) -> &Db {
        &self.dbs[index]
    }

    pub fn len(&self) -> usize {
        self.dbs.len()
    }

    pub fn dbs(&self) -> &[Db] {
        &self.dbs
    }

    /// Reclaims expired entries in every database.
    pub fn sweep(&self, now_ms: u64) -> usize {
        self.dbs.iter().map(|db| db.sweep(now_ms)).sum()
    }

    /// FLUSHALL (and crash-restart): every database emptied, tables shrunk, and the
    /// freed heap handed back to the kernel.
    pub fn flush_all(&self) {
        self.dbs.iter().for_each(Db::clear);
        crate::memory::trim_soon();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Value;

    fn entry_with_deadline(d: Option<u64>) -> Entry {
        Entry {
            value: Value::Str(Bytes::from("v")),
            deadline_ms: d,
        }
    }

    #[test]
    fn expired_entries_read_as_absent_and_are_removed() {
        let db = Db::new(1);
        db.insert(b"k", entry_with_deadline(Some(100)));
        assert!(db.get(b"k", 100).is_some());
        assert!(db.get(b"k", 101).is_none());
        assert_eq!(db.len(), 0);
    }

    #[test]
    fn sweep_reclaims_expired_keys_only() {
        let db = Db::new(1);
        for i in 0..1000u32 {
            let d = if i % 2 == 0 { Some(10) } else { None };
            db.insert(&i.to_be_bytes(), entry_with_deadline(d));
        }
        assert_eq!(db.sweep(11), 500);
        assert_eq!(db.len(), 500);
    }

    #[test]
    fn deadlines_set_through_guards_are_indexed() {
        let db = Db::new(3);
        db.insert(b"a", entry_with_deadline(None));
        db.get_mut(b"a", 0).unwrap().deadline_ms = Some(50);
        match db.entry(b"b", 0) {
            MapEntry::Vacant(v) => {
                v.insert(entry_with_deadline(Some(70)));
            }
            MapEntry::Occupied(_) => unreachable!(),
        }
        // Extended before its first deadline: the old index entry finds nothing due.
        db.insert(b"c", entry_with_deadline(Some(40)));
        db.get_mut(b"c", 0).unwrap().deadline_ms = Some(1000);
        assert_eq!(db.sweep(100), 2);
        assert_eq!(db.len(), 1);
        assert!(db.get(b"c", 100).is_some());
        assert_eq!(db.sweep(1001), 1);
        assert!(db.is_empty());
    }

    #[test]
    fn nothing_due_means_no_work_and_mass_expiry_shrinks_tables() {
        let db = Db::new(5);
        for i in 0..100_000u32 {
            let d = if i % 10 == 0 { 1_000_000 } else { 500 };
            db.insert(&i.to_be_bytes(), entry_with_deadline(Some(d)));
        }
        assert_eq!(db.sweep(400), 0);
        assert_eq!(db.len(), 100_000);
        let full = db.table_bytes();
        assert_eq!(db.sweep(600), 90_000);
        assert_eq!(db.len(), 10_000);
        assert!(db.table_bytes() * 3 < full, "{full} -> {}", db.table_bytes());
        assert_eq!(db.expiry_filed(), 10_000);
    }

    #[test]
    fn scan_returns_every_key_once() {
        let db = Db::new(7);
        for i in 0..500u32 {
            db.insert(format!("k{i}").as_bytes(), entry_with_deadline(None));
        }
        let mut seen = std::collections::HashSet::new();
        let mut cursor = 0;
        loop {
            let (next, keys) = db.scan(cursor, 10, 0);
            for k in keys {
                assert!(seen.insert(k));
            }
            if next == 0 {
                break;
            }
            cursor = next;
        }
        assert_eq!(seen.len(), 500);
    }
}
