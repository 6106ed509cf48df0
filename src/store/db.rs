use super::watch::{WatchFlag, Watched};
use super::Entry;
use bytes::Bytes;
use dashmap::mapref::entry::Entry as MapEntry;
use dashmap::mapref::one::{Ref, RefMut};
use dashmap::DashMap;
use std::hash::{BuildHasher, DefaultHasher, Hasher};
use std::sync::Arc;

/// How many locks a database is split into. Many small shards keep both command
/// contention and the sweeper's per-shard pauses short (a million keys is ~16k a shard).
const SHARDS: usize = 64;

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
pub struct Db {
    map: DashMap<Bytes, Entry, SeededState>,
    watched: Watched,
}

impl Db {
    pub fn new(seed: u64) -> Db {
        Db {
            map: DashMap::with_hasher_and_shard_amount(SeededState(seed), SHARDS),
            watched: Watched::default(),
        }
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
    pub fn get(&self, key: &[u8], now_ms: u64) -> Option<Ref<'_, Bytes, Entry>> {
        let found = self.map.get(key)?;
        if !found.is_expired(now_ms) {
            return Some(found);
        }
        drop(found);
        self.expire_now(key, now_ms);
        None
    }

    /// Like `get`, for changing the entry in place (so the key counts as touched).
    pub fn get_mut(&self, key: &[u8], now_ms: u64) -> Option<RefMut<'_, Bytes, Entry>> {
        let found = self.map.get_mut(key)?;
        if !found.is_expired(now_ms) {
            self.watched.touch(key, true);
            return Some(found);
        }
        drop(found);
        self.expire_now(key, now_ms);
        None
    }

    /// The slot for `key`, holding its shard's lock: occupied only by a live entry.
    /// The key is copied, so the stored key never pins a connection's read buffer.
    /// It is copied once and moved, not cloned: cloning a `Bytes` made from a `Vec`
    /// allocates its shared header, a second allocation per write.
    /// Taking the slot counts as touching the key (the caller may write through it).
    pub fn entry(&self, key: &[u8], now_ms: u64) -> MapEntry<'_, Bytes, Entry> {
        let slot = match self.map.entry(Bytes::copy_from_slice(key)) {
            MapEntry::Occupied(o) if o.get().is_expired(now_ms) => {
                let (owned, _) = o.remove_entry();
                self.watched.touch(key, false);
                self.map.entry(owned)
            }
            slot => slot,
        };
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
        self.map.insert(Bytes::copy_from_slice(key), entry);
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
            .filter(|k| self.map.contains_key(k))
            .collect();
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
            .map(|e| e.key().clone())
            .collect()
    }

    /// Calls `f` with every live entry, one shard locked at a time (for the snapshot).
    pub fn for_each_live(&self, now_ms: u64, mut f: impl FnMut(&Bytes, &Entry)) {
        for e in self.map.iter() {
            if !e.value().is_expired(now_ms) {
                f(e.key(), e.value());
            }
        }
    }

    /// Reclaims every expired entry, one shard at a time; returns how many.
    pub fn sweep(&self, now_ms: u64) -> usize {
        let before = self.map.len();
        self.map.retain(|k, e| {
            let expired = e.is_expired(now_ms);
            if expired {
                self.watched.touch(k, false);
            }
            !expired
        });
        before.saturating_sub(self.map.len())
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
                        out.push(key.clone());
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

    pub fn is_empty(&self) -> bool {
        self.dbs.is_empty()
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
