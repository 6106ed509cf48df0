use super::events::{KeyEvents, EXPIRED, LOCK_EXPIRED, NEW};
use super::lock::LockDelay;
use super::packed::{access_clock, Leftover};
use super::shard_table::{Table, View};
use super::siphash::siphash;
use super::snapshot::{Render, SnapshotWalk, Snapshots};
use super::tracking::TrackedKeys;
use super::watch::{WatchFlag, Watched};
use super::{Entry, ValueRef};
use bytes::Bytes;
use parking_lot::{RwLock, RwLockWriteGuard};
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::sync::Arc;

mod carried;
mod guards;
mod reclaim;

pub use carried::Carried;
pub use guards::{Ref, RefMut, Slot, Vacant};

/// How many locks a database is split into (a power of two). Many small shards keep
/// both command contention and the sweeper's per-shard pauses short (a million keys
/// is ~16k a shard).
const SHARD_BITS: u32 = 6;
pub(super) const SHARDS: usize = 1 << SHARD_BITS;

/// Expired keys removed per hold of a shard's write lock (a few tens of microseconds):
/// a mass expiry never stalls the commands waiting for that shard for long.
const REMOVALS_PER_LOCK: usize = 256;

/// A shard's table is shrunk once it is less than a quarter full, and never below this
/// capacity (tiny tables are not worth rehashing).
const SHRINK_MIN_CAPACITY: usize = 224;

/// SipHash-1-3 keyed by a seed (`siphash.rs`): the seed makes SCAN order repeatable
/// in tests and unpredictable (collision-resistant) in production, where it is
/// random. The 64-bit seed is stretched to SipHash's 128-bit key with splitmix64.
#[derive(Clone, Copy, Debug)]
struct KeyHash {
    k0: u64,
    k1: u64,
}

impl KeyHash {
    fn new(seed: u64) -> KeyHash {
        let mix = |mut z: u64| {
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        let k0 = mix(seed.wrapping_add(0x9e37_79b9_7f4a_7c15));
        KeyHash {
            k0,
            k1: mix(k0.wrapping_add(0x9e37_79b9_7f4a_7c15)),
        }
    }

    fn hash(&self, key: &[u8]) -> u64 {
        siphash::<1, 3>(self.k0, self.k1, key)
    }
}

/// A shard: a table of 4-byte handles into the shard's slab, where each entry is one
/// slot (`shard_table.rs`, `slab.rs`, `packed.rs`). Own tables rather than a
/// `DashMap<Key, Entry>`: dashmap stores (key, value) inline in the slot (72 bytes
/// here, at a load factor between 7/16 and 7/8), its `entry` wants an owned key before
/// it knows whether the key exists, and its guards give no `&mut` to the key, which is
/// where a packed entry lives.
#[repr(align(64))]
struct Shard(RwLock<Table>);

/// Bytes of a table of `buckets` (hashbrown: each a 4-byte handle and a control
/// byte, plus a group of trailing control bytes).
fn table_size(buckets: usize) -> usize {
    if buckets == 0 {
        return 0;
    }
    buckets * (size_of::<u32>() + 1) + 16
}

/// One database: keys to entries, expired lazily on access and by `sweep`. Every
/// path that changes a key (expiry included) touches it for WATCH (see `watch.rs`),
/// and every one but expiry first keeps its pre-image for an active snapshot
/// (`keep_before`, `store/snapshot.rs`).
pub struct Db {
    hasher: KeyHash,
    shards: Box<[Shard]>,
    watched: Watched,
    /// Client-side caching's key table, shared by every database (`tracking.rs`).
    tracked: Arc<TrackedKeys>,
    /// The access clock of the latest lookup: what `insert`, given no time, stamps.
    clock: AtomicU32,
    /// The lock-delay (`store/lock.rs`), shared by every database.
    delay: Arc<LockDelay>,
    /// Expired and new keys, for keyspace notifications (`events.rs`), shared.
    events: Arc<KeyEvents>,
    /// This database's number (what its events name).
    index: usize,
    /// The snapshot being taken, shared by every database (`store/snapshot.rs`).
    snapshots: Arc<Snapshots>,
}

/// What a write lookup found at a key.
enum Found {
    Live(u32),
    /// A delayed lock (`store/lock.rs`): reads as absent, but stays.
    Delayed(u32),
    Absent,
}

impl Db {
    #[cfg(test)]
    pub fn new(seed: u64) -> Db {
        Db::with_tracking(seed, Arc::default(), Arc::default())
    }

    /// A database reporting its key changes to `tracked`, under the lock-delay `delay`.
    pub fn with_tracking(seed: u64, tracked: Arc<TrackedKeys>, delay: Arc<LockDelay>) -> Db {
        Db {
            tracked,
            delay,
            hasher: KeyHash::new(seed),
            shards: (0..SHARDS).map(|_| Shard(RwLock::default())).collect(),
            watched: Watched::default(),
            clock: AtomicU32::new(0),
            events: Arc::default(),
            index: 0,
            snapshots: Arc::default(),
        }
    }

    /// Reports this database's expired and new keys, as database `index`, to `events`,
    /// and keeps pre-images for the keyspace's `snapshots`.
    fn reporting(mut self, index: usize, events: Arc<KeyEvents>, snapshots: Arc<Snapshots>) -> Db {
        self.index = index;
        self.events = events;
        self.snapshots = snapshots;
        self
    }

    /// Before a change of `key` (its shard's write lock held over `table`, nothing
    /// changed yet): its pre-image for an active snapshot. One relaxed load while none
    /// is (`store/snapshot.rs`). Expiry does not call it (the module doc says why).
    #[inline]
    fn keep_before(&self, table: &Table, hash: u64, key: &[u8]) {
        (self.snapshots).keep_before(self.index, self.shard_of(hash), table, hash, key);
    }

    /// Shard `i`'s lock (a snapshot's walk).
    pub(super) fn shard_table(&self, i: usize) -> &RwLock<Table> {
        &self.shards[i].0
    }

    /// Takes and releases every shard's write lock (a snapshot's start).
    pub(super) fn each_shard_locked_once(&self) {
        for shard in self.shards.iter() {
            drop(shard.0.write());
        }
    }

    /// The lock-delay (ms) in force.
    pub(super) fn lock_delay_ms(&self) -> u64 {
        self.delay.ms()
    }

    /// Reports an expired key, and whether it was a lock (`events.rs`).
    fn expired(&self, key: &[u8], lock: bool) {
        let kinds = if lock {
            EXPIRED | LOCK_EXPIRED
        } else {
            EXPIRED
        };
        self.events.report(self.index, kinds, key);
    }

    /// Reports a new key (`events.rs`).
    fn created(&self, key: &[u8]) {
        self.events.report(self.index, NEW, key);
    }

    /// The hash the shard tables use for `key`.
    fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash(key)
    }

    /// The shard of a hash: bits under the top 7 (hashbrown's tag) and far above the
    /// low bits that pick a bucket.
    fn shard_of(&self, hash: u64) -> usize {
        ((hash << 7) >> (64 - SHARD_BITS)) as usize
    }

    fn shard(&self, hash: u64) -> &RwLock<Table> {
        &self.shards[self.shard_of(hash)].0
    }

    /// Removes `key` if it is expired (lazy expiry) and not a delayed lock, touching it
    /// if it was. Expiry keeps no pre-image for a snapshot (`store/snapshot.rs`).
    fn expire_now(&self, key: &[u8], hash: u64, now_ms: u64) {
        let gone = {
            let mut table = self.shard(hash).write();
            table
                .find(hash, |p| {
                    p.key() == key && self.delay.reclaimable(p, now_ms)
                })
                .map(|h| (table.view(h).is_lock(), table.delete(hash, h)))
        };
        if let Some((lock, gone)) = gone {
            drop(gone);
            self.watched.touch(key, false);
            self.tracked.changed(key);
            self.expired(key, lock);
        }
    }

    /// The access clock at `now_ms`, noted for `insert`.
    fn stamp(&self, now_ms: u64) -> u32 {
        let clock = access_clock(now_ms);
        if self.clock.load(Relaxed) != clock {
            self.clock.store(clock, Relaxed);
        }
        clock
    }

    /// The live entry at `key`, its access clock stamped (every command's read, as
    /// Redis's lookupKey); an expired one is removed and reads as absent.
    pub fn get(&self, key: &[u8], now_ms: u64) -> Option<Ref<'_>> {
        let found = self.peek(key, now_ms)?;
        found.touch(self.stamp(now_ms));
        Some(found)
    }

    /// `get` without stamping the access clock (OBJECT, which reports it).
    pub fn peek(&self, key: &[u8], now_ms: u64) -> Option<Ref<'_>> {
        let hash = self.hash(key);
        let table = self.shard(hash).read();
        let h = table.find(hash, |p| p.key() == key)?;
        if !table.view(h).is_expired(now_ms) {
            // SAFETY: the Ref keeps the guard, so the table stays read-locked
            // (unchanged) while the view is used.
            let entry = unsafe { table.view_unbound(h) };
            return Some(Ref {
                entry,
                _guard: table,
            });
        }
        if self.delay.holds(&table.view(h), now_ms) {
            return None;
        }
        drop(table);
        self.expire_now(key, hash, now_ms);
        None
    }

    /// Pipelined lookups, made ahead of time so that their cache misses overlap
    /// instead of stalling one after another (see the connection loop): call
    /// `prefetch_slots` for every key of a batch, then `prefetch_entry` for each. The
    /// first starts loading the table lines a lookup reads; by the time the second
    /// reads them they have arrived, and it starts loading the entries' blocks the
    /// slots point to. Returns the key's hash, for `prefetch_entry`. Both are hints:
    /// they change nothing, and skip a shard another thread holds.
    pub fn prefetch_slots(&self, key: &[u8]) -> u64 {
        let hash = self.hash(key);
        if let Some(table) = self.shard(hash).try_read() {
            table.prefetch(hash);
        }
        hash
    }

    /// See `prefetch_slots`.
    pub fn prefetch_entry(&self, hash: u64) {
        if let Some(table) = self.shard(hash).try_read() {
            table.find(hash, |p| {
                p.prefetch();
                false
            });
        }
    }

    /// Like `get`, for changing the entry in place (so the key counts as touched).
    pub fn get_mut(&self, key: &[u8], now_ms: u64) -> Option<RefMut<'_>> {
        let (table, hash, found) = self.find_live_mut(key, now_ms);
        let Found::Live(handle) = found else {
            return None;
        };
        self.watched.touch(key, true);
        table.view(handle).touch(self.stamp(now_ms));
        Some(RefMut {
            // SAFETY: the RefMut keeps the write guard, and renews the view after
            // every change of the entry (`moved`).
            entry: unsafe { table.view_unbound(handle) },
            guard: table,
            handle,
            hash,
            db: self,
            changed: false,
        })
    }

    /// Write-locks `key`'s shard and finds its entry; an expired one is removed
    /// (touched) and reads as absent, unless it is a delayed lock, which stays.
    fn find_live_mut(&self, key: &[u8], now_ms: u64) -> (RwLockWriteGuard<'_, Table>, u64, Found) {
        let hash = self.hash(key);
        let mut table = self.shard(hash).write();
        self.keep_before(&table, hash, key);
        let found = match table.find(hash, |p| p.key() == key) {
            Some(h) if table.view(h).is_expired(now_ms) => {
                if self.delay.holds(&table.view(h), now_ms) {
                    return (table, hash, Found::Delayed(h));
                }
                // Dropped under the lock: an expired entry here is rare (the sweeper
                // reclaims them), and a write lock is held either way.
                let lock = table.view(h).is_lock();
                drop(table.delete(hash, h));
                self.watched.touch(key, false);
                self.tracked.changed(key);
                self.expired(key, lock);
                Found::Absent
            }
            Some(h) => Found::Live(h),
            None => Found::Absent,
        };
        (table, hash, found)
    }

    /// The slot for `key`, holding its shard's write lock: occupied only by a live
    /// entry (an expired one is removed first; a delayed lock is vacant, and an insert
    /// replaces it: `commands::check_lock_delay` keeps the writes that could take it
    /// from getting here). Nothing is copied unless the caller inserts. Taking the
    /// slot counts as touching the key (the caller may write through it).
    pub fn entry<'k>(&self, key: &'k [u8], now_ms: u64) -> Slot<'_, 'k> {
        let (table, hash, found) = self.find_live_mut(key, now_ms);
        self.watched.touch(key, true);
        let clock = self.stamp(now_ms);
        if let Found::Live(h) = found {
            table.view(h).touch(clock);
        }
        match found {
            Found::Live(handle) => Slot::Occupied(RefMut {
                // SAFETY: as in `get_mut`.
                entry: unsafe { table.view_unbound(handle) },
                guard: table,
                handle,
                hash,
                db: self,
                changed: false,
            }),
            Found::Delayed(h) => Slot::Vacant(Vacant {
                guard: table,
                hash,
                key,
                db: self,
                clock,
                delayed: Some(h),
            }),
            Found::Absent => Slot::Vacant(Vacant {
                guard: table,
                hash,
                key,
                db: self,
                clock,
                delayed: None,
            }),
        }
    }

    /// Removes `key`; whether it was live. Removing a delayed lock ends its delay.
    pub fn remove(&self, key: &[u8], now_ms: u64) -> bool {
        let hash = self.hash(key);
        let (live, gone) = {
            let mut table = self.shard(hash).write();
            self.keep_before(&table, hash, key);
            let Some(h) = table.find(hash, |p| p.key() == key) else {
                return false;
            };
            let live = !table.view(h).is_expired(now_ms);
            let lock = table.view(h).is_lock();
            (live, (lock, table.delete(hash, h)))
        };
        let (lock, gone) = gone;
        drop(gone);
        self.watched.touch(key, false);
        self.tracked.changed(key);
        if !live {
            self.expired(key, lock);
        }
        live
    }

    /// Removes `key`, returning its entry if it was live (RENAME, MOVE). A delayed lock
    /// stays.
    pub fn take(&self, key: &[u8], now_ms: u64) -> Option<Entry> {
        let hash = self.hash(key);
        let entry = {
            let mut table = self.shard(hash).write();
            self.keep_before(&table, hash, key);
            let h = table.find(hash, |p| p.key() == key)?;
            if self.delay.holds(&table.view(h), now_ms) {
                return None;
            }
            if table.view(h).is_expired(now_ms) {
                let lock = table.view(h).is_lock();
                drop(table.delete(hash, h));
                self.expired(key, lock);
                None
            } else {
                Some(table.take(hash, h))
            }
        };
        self.watched.touch(key, false);
        self.tracked.changed(key);
        entry
    }

    /// Stores `entry` at `key`, replacing whatever was there.
    pub fn insert(&self, key: &[u8], entry: Entry) {
        let hash = self.hash(key);
        let Entry { value, deadline_ms } = entry;
        let old = {
            let mut table = self.shard(hash).write();
            self.keep_before(&table, hash, key);
            let (h, old) = match table.find(hash, |p| p.key() == key) {
                Some(h) => {
                    let (h, old) = table.replace(hash, h, value, deadline_ms);
                    (h, Some(old))
                }
                None => {
                    self.created(key);
                    (
                        table.insert_new(hash, key, value, deadline_ms, |k| self.hash(k)),
                        None,
                    )
                }
            };
            table.view(h).touch(self.clock.load(Relaxed));
            old
        };
        drop(old);
        self.watched.touch(key, true);
        self.tracked.changed(key);
    }

    /// The milliseconds left of `key`'s lock-delay (at least 1), if it is a delayed lock
    /// now (`store/lock.rs`).
    pub fn lock_delay_left(&self, key: &[u8], now_ms: u64) -> Option<u64> {
        let hash = self.hash(key);
        let table = self.shard(hash).read();
        let h = table.find(hash, |p| p.key() == key)?;
        let p = table.view(h);
        if !self.delay.holds(&p, now_ms) {
            return None;
        }
        self.delay.ends_at(&p).map(|end| end - now_ms + 1)
    }

    /// Delayed locks stored now (INFO's `lock_delay_active`): reads every entry, as
    /// `count_expiring` does, unless the delay is off.
    pub fn count_delayed(&self, now_ms: u64) -> usize {
        if self.delay.ms() == 0 {
            return 0;
        }
        self.shards
            .iter()
            .map(|s| {
                let table = s.0.read();
                table
                    .iter()
                    .filter(|(_, p)| self.delay.holds(p, now_ms))
                    .count()
            })
            .sum()
    }

    /// WATCH: registers `flag` to be dirtied when `key` changes. A key already expired
    /// but not yet reclaimed is watched as "stale": its reclaiming is no change.
    pub fn watch(&self, key: &[u8], flag: &Arc<WatchFlag>, now_ms: u64) {
        // Registered first, checked after: a write in between dirties the flag (the
        // watch starts as not stale), never goes unseen.
        if !self.watched.add(key, flag) {
            return;
        }
        if self.stored_expired(key, now_ms) {
            self.watched.mark_stale(key, flag);
        }
    }

    /// Whether `key` is stored but expired (not reclaimed yet).
    fn stored_expired(&self, key: &[u8], now_ms: u64) -> bool {
        let hash = self.hash(key);
        let table = self.shard(hash).read();
        table
            .find(hash, |p| p.key() == key)
            .is_some_and(|h| table.view(h).is_expired(now_ms))
    }

    pub fn unwatch(&self, key: &[u8], flag: &Arc<WatchFlag>) {
        self.watched.remove(key, flag);
    }

    /// EXEC's check (Redis's isWatchedKeyExpired): a key live when watched that has
    /// expired since, whether or not anything reclaimed it yet.
    pub fn watched_key_expired(&self, key: &[u8], flag: &Arc<WatchFlag>, now_ms: u64) -> bool {
        !self.watched.is_stale(key, flag) && self.stored_expired(key, now_ms)
    }

    /// Whether `key` is live; not an access (EXISTS leaves OBJECT IDLETIME alone).
    pub fn contains(&self, key: &[u8], now_ms: u64) -> bool {
        self.peek(key, now_ms).is_some()
    }

    /// Keys stored, including expired ones the sweeper has not reclaimed yet (as Redis).
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.0.read().len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.shards.iter().all(|s| s.0.read().is_empty())
    }

    /// FLUSHDB: watched keys that existed are touched (Redis's touchAllWatchedKeysInDb).
    /// Every table is dropped, not cleared (a cleared table keeps its buckets: ~200
    /// MB at a million keys before the tables were packed), or handed as it is to an
    /// active snapshot that has not rendered it yet (`store/snapshot.rs`).
    pub fn clear(&self) {
        let existed: Vec<Bytes> = self
            .watched
            .keys()
            .into_iter()
            .filter(|k| {
                let hash = self.hash(k);
                self.shard(hash)
                    .read()
                    .find(hash, |p| p.key() == &k[..])
                    .is_some()
            })
            .collect();
        for (i, shard) in self.shards.iter().enumerate() {
            let old = {
                let mut table = shard.0.write();
                let old = std::mem::take(&mut *table);
                self.snapshots.detach(self.index, i, old)
            };
            // Freed outside the lock.
            drop(old);
        }
        for key in existed {
            self.watched.touch(&key, false);
        }
        self.tracked.flushed();
    }

    /// Every live key (for KEYS). Each shard is locked only while it is read.
    pub fn keys(&self, now_ms: u64) -> Vec<Bytes> {
        let mut out = Vec::new();
        self.for_each_live(now_ms, |key, _, _| out.push(Bytes::copy_from_slice(key)));
        out
    }

    /// Calls `f` with every live entry's key, value and deadline, one shard locked at a
    /// time (KEYS, the snapshot).
    pub fn for_each_live(&self, now_ms: u64, mut f: impl FnMut(&[u8], ValueRef<'_>, Option<u64>)) {
        for shard in self.shards.iter() {
            let table = shard.0.read();
            for (_, p) in table.iter().filter(|(_, p)| !p.is_expired(now_ms)) {
                f(p.key(), p.value(), p.deadline_ms());
            }
        }
    }

    /// Shrinks a locked table that is less than a quarter full (mass expiry, DEL):
    /// hashbrown never shrinks on its own.
    fn shrink_if_sparse(&self, table: &mut Table) {
        if table.capacity() > SHRINK_MIN_CAPACITY && table.len() * 4 < table.capacity() {
            let len = table.len();
            table.shrink_to(len * 2, |k| self.hash(k));
        }
    }

    /// Bytes held by the shard tables themselves (handles and control bytes).
    pub fn table_bytes(&self) -> usize {
        self.shards
            .iter()
            .map(|s| table_size(s.0.read().buckets()))
            .sum()
    }

    /// Bytes of the shards' slab pages and page tables (the entries live there).
    #[cfg(test)]
    pub fn slab_bytes(&self) -> usize {
        self.shards.iter().map(|s| s.0.read().slab().bytes()).sum()
    }

    /// One SCAN step: the cursor is a shard index; whole shards are returned until at
    /// least `count` keys are gathered. Returns the next cursor (0 when done) and the
    /// live keys seen. A key present for the whole iteration is returned exactly once.
    /// A live key chosen at random (RANDOMKEY): a shard picked in proportion to its
    /// entries, then an entry in it. O(entries of one shard); expired entries not yet
    /// reclaimed are passed over (the next live one is taken).
    pub fn random_key(&self, now_ms: u64, rng: &mut impl rand::Rng) -> Option<Bytes> {
        let lens: Vec<usize> = self.shards.iter().map(|s| s.0.read().len()).collect();
        let total: usize = lens.iter().sum();
        if total == 0 {
            return None;
        }
        let mut pick = rng.random_range(0..total);
        let first = lens
            .iter()
            .position(|&n| {
                if pick < n {
                    return true;
                }
                pick -= n;
                false
            })
            .unwrap_or(0);
        // From the picked entry on, through every shard once: the first live key.
        (0..self.shards.len()).find_map(|i| {
            let table = self.shards[(first + i) % self.shards.len()].0.read();
            let skip = if i == 0 { pick } else { 0 };
            let live = |(_, p): &(u32, View<'_>)| !p.is_expired(now_ms);
            let key = |(_, p): (u32, View<'_>)| Bytes::copy_from_slice(p.key());
            let found = table
                .iter()
                .skip(skip)
                .find(live)
                .or_else(|| table.iter().take(skip).find(live))
                .map(key);
            found
        })
    }

    pub fn scan(&self, cursor: u64, count: usize, now_ms: u64) -> (u64, Vec<Bytes>) {
        let mut out = Vec::new();
        let mut shard = cursor as usize;
        while shard < self.shards.len() {
            let table = self.shards[shard].0.read();
            out.extend(
                table
                    .iter()
                    .filter(|(_, p)| !p.is_expired(now_ms))
                    .map(|(_, p)| Bytes::copy_from_slice(p.key())),
            );
            shard += 1;
            if out.len() >= count {
                break;
            }
        }
        let next = if shard >= self.shards.len() {
            0
        } else {
            shard as u64
        };
        (next, out)
    }
}

/// All databases. What makes several commands atomic together (scripts, MULTI/EXEC)
/// is not here but in `commands::exec::gate`.
pub struct Keyspace {
    /// Shared with a snapshot's walk (`begin_snapshot`).
    dbs: Arc<[Db]>,
    tracked: Arc<TrackedKeys>,
    delay: Arc<LockDelay>,
    events: Arc<KeyEvents>,
    snapshots: Arc<Snapshots>,
}

impl Keyspace {
    pub fn new(databases: usize, seed: u64) -> Keyspace {
        let tracked = Arc::new(TrackedKeys::default());
        let delay = Arc::new(LockDelay::default());
        let events = Arc::new(KeyEvents::default());
        let snapshots = Arc::new(Snapshots::default());
        Keyspace {
            dbs: (0..databases)
                .map(|i| {
                    Db::with_tracking(seed, tracked.clone(), delay.clone()).reporting(
                        i,
                        events.clone(),
                        snapshots.clone(),
                    )
                })
                .collect(),
            tracked,
            delay,
            events,
            snapshots,
        }
    }

    /// Starts a snapshot of every database as it is now (`store/snapshot.rs`), keys
    /// expired at `now_ms` left out and the others rendered by `render`; `None` while
    /// another is being taken. Call it while no command runs (the keyspace gate held
    /// exclusively): the snapshot is the state at this call.
    pub fn begin_snapshot(&self, now_ms: u64, render: Render) -> Option<SnapshotWalk> {
        SnapshotWalk::begin(self.dbs.clone(), self.snapshots.clone(), now_ms, render)
    }

    /// Test hook: a snapshot's walk stops before rendering its `after`-th shard (in
    /// walk order, every database's shards counted) until called with `None`.
    pub fn hold_snapshot_walk(&self, after: Option<usize>) {
        self.snapshots.hold_walk(after);
    }

    /// Whether a snapshot's walk waits at the test hook's hold.
    pub fn snapshot_walk_held(&self) -> bool {
        self.snapshots.walk_held()
    }

    /// Expired and new keys of every database, for keyspace notifications.
    pub fn events(&self) -> &KeyEvents {
        &self.events
    }

    /// The lock-delay every database follows (`store/lock.rs`).
    pub fn lock_delay(&self) -> &LockDelay {
        &self.delay
    }

    pub fn db(&self, index: usize) -> &Db {
        &self.dbs[index]
    }

    /// Client-side caching's key table, shared by every database.
    pub fn tracked(&self) -> &TrackedKeys {
        &self.tracked
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
        crate::alloc::trim_soon();
    }
}

#[cfg(test)]
mod tests;
