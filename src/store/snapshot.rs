//! A point-in-time copy of the keyspace taken while it keeps serving: what the
//! append-only log's rewrite writes as its base (`durability::aof::rewrite`), without
//! a fork and without stopping the clients for the whole walk.
//!
//! `Keyspace::begin_snapshot` (called while nothing else runs: the keyspace gate held
//! exclusively) fixes the instant. A walker (`SnapshotWalk`, on its own thread) then
//! renders the keys shard by shard, each under its shard's read lock, through a
//! renderer the caller gives (the log's: a key as `SET` / `RESTORE`, or nothing for a
//! key it leaves out). Meanwhile every path that can change a key (`Db::get_mut`,
//! `entry`, `remove`, `take`, `insert`) first calls `Db::keep_before`, under the
//! shard's write lock: while a snapshot is active and the key's shard is not rendered
//! yet, the key's rendering *as it is now*, which is still as it was at the instant
//! (nothing changed it since: this is its first write), is kept as its pre-image,
//! "nothing" if the key is absent. The walker renders a shard's keys that have no
//! pre-image, then the pre-images, and marks the shard settled, all under the one
//! lock hold: after that, writes to the shard keep nothing. With no snapshot active a
//! write pays one relaxed load.
//!
//! Expiry keeps no pre-image (the sweeper and lazy expiry remove keys without
//! calling `keep_before`): a key removed for its deadline `d` had `d` before the
//! removal, and a renderer that writes the deadline as an absolute time (the log's
//! `PXAT` / `ABSTTL`) makes the key's copy expire at `d` too, wherever it is loaded
//! later; leaving it out reads the same. Whatever writes the key afterwards keeps
//! "absent" as its pre-image, which is again what a copy loaded after `d` shows.
//!
//! A database emptied whole (FLUSHDB, FLUSHALL, the reset of a crash-restart) while
//! its shards are not all rendered: each unrendered shard's table is handed to the
//! snapshot as it is (`Db::clear`), and the shard counts as settled; the walker renders
//! the detached table (with the pre-images) and frees it. The flush stays as quick as
//! without a snapshot, and the detached tables are held until the walk reaches them.

use super::db::{Db, SHARDS};
use super::shard_table::Table;
use super::ValueRef;
use bytes::Bytes;
use parking_lot::{Condvar, Mutex, RwLock};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Renders one live key (key, value, deadline in the keyspace's ms) by appending its
/// bytes to the buffer; appending nothing leaves the key out.
pub type Render = Box<dyn Fn(&mut Vec<u8>, &[u8], ValueRef<'_>, Option<u64>) + Send + Sync>;

/// What every database of a keyspace shares: the snapshot being taken, if any.
#[derive(Default)]
pub(super) struct Snapshots {
    /// Whether a snapshot is active: the one load a write pays while none is.
    active: AtomicBool,
    current: RwLock<Option<Arc<Snapshot>>>,
    /// Test hook: the walker stops before this many shards are rendered.
    hold: Mutex<Hold>,
    held: Condvar,
}

#[derive(Default)]
struct Hold {
    after: Option<usize>,
    /// The walker is waiting at the hold.
    waiting: bool,
}

/// One snapshot being taken.
struct Snapshot {
    /// Its instant (keyspace ms): keys expired at it are not in it.
    now_ms: u64,
    render: Render,
    /// Per database, per shard.
    shards: Box<[ShardCopy]>,
}

#[derive(Default)]
struct ShardCopy {
    /// Rendered, or its table detached: writes keep no pre-image any more. Read and
    /// set with the shard's lock held.
    settled: AtomicBool,
    state: Mutex<ShardState>,
}

#[derive(Default)]
struct ShardState {
    /// Keys written since the instant, with their rendering at it (empty: absent or
    /// left out).
    before: HashMap<Bytes, Vec<u8>>,
    /// The shard's table as a flush took it away.
    detached: Option<Table>,
}

impl Snapshots {
    /// While a snapshot is active, keeps `key`'s pre-image if its shard is not
    /// settled and it has none yet. The caller holds the shard's write lock over
    /// `table` and has changed nothing since taking it.
    #[inline]
    pub(super) fn keep_before(
        &self,
        db: usize,
        shard: usize,
        table: &Table,
        hash: u64,
        key: &[u8],
    ) {
        if self.active.load(Ordering::Relaxed) {
            self.keep_before_slow(db, shard, table, hash, key);
        }
    }

    #[cold]
    #[inline(never)]
    fn keep_before_slow(&self, db: usize, shard: usize, table: &Table, hash: u64, key: &[u8]) {
        let Some(snap) = self.current.read().clone() else {
            return;
        };
        let copy = &snap.shards[db * SHARDS + shard];
        if copy.settled.load(Ordering::Relaxed) {
            return;
        }
        let mut state = copy.state.lock();
        if state.before.contains_key(key) {
            return;
        }
        let mut image = Vec::new();
        if let Some(h) = table.find(hash, |p| p.key() == key) {
            let p = table.view(h);
            if !p.is_expired(snap.now_ms) {
                (snap.render)(&mut image, key, p.value(), p.deadline_ms());
            }
        }
        state.before.insert(Bytes::copy_from_slice(key), image);
    }

    /// A flush took `table` from shard `shard` of database `db` (its write lock still
    /// held): kept by the active snapshot if that shard is not rendered yet, else
    /// handed back (to be freed).
    pub(super) fn detach(&self, db: usize, shard: usize, table: Table) -> Option<Table> {
        if !self.active.load(Ordering::Relaxed) {
            return Some(table);
        }
        let Some(snap) = self.current.read().clone() else {
            return Some(table);
        };
        let copy = &snap.shards[db * SHARDS + shard];
        if copy.settled.load(Ordering::Relaxed) {
            return Some(table);
        }
        copy.state.lock().detached = Some(table);
        copy.settled.store(true, Ordering::Relaxed);
        None
    }

    /// Test hook: the walker stops before rendering shard number `after` (counting
    /// every database's shards in walk order); `None` lets it go on.
    pub(super) fn hold_walk(&self, after: Option<usize>) {
        let mut hold = self.hold.lock();
        hold.after = after;
        if after.is_none() {
            hold.waiting = false;
        }
        self.held.notify_all();
    }

    /// Whether the walker waits at the test hook's hold.
    pub(super) fn walk_held(&self) -> bool {
        self.hold.lock().waiting
    }

    fn wait_for_hold(&self, done: usize) {
        let mut hold = self.hold.lock();
        while hold.after.is_some_and(|n| done >= n) {
            hold.waiting = true;
            self.held.wait(&mut hold);
        }
        hold.waiting = false;
    }
}

/// The walk of an active snapshot: renders its shards (`dump`), in any order, each
/// once. Dropping it ends the snapshot (the pre-images and detached tables not
/// rendered are freed; writes keep nothing any more).
pub struct SnapshotWalk {
    dbs: Arc<[Db]>,
    snapshots: Arc<Snapshots>,
    snap: Arc<Snapshot>,
    /// Shards rendered so far (for the test hook).
    done: usize,
}

impl SnapshotWalk {
    pub(super) fn begin(
        dbs: Arc<[Db]>,
        snapshots: Arc<Snapshots>,
        now_ms: u64,
        render: Render,
    ) -> Option<SnapshotWalk> {
        let snap = Arc::new(Snapshot {
            now_ms,
            render,
            shards: (0..dbs.len() * SHARDS)
                .map(|_| ShardCopy::default())
                .collect(),
        });
        {
            let mut current = snapshots.current.write();
            if current.is_some() {
                return None;
            }
            *current = Some(snap.clone());
        }
        snapshots.active.store(true, Ordering::SeqCst);
        // Every shard's lock taken once: a write that takes one after this sees the
        // snapshot, whether or not it went through the keyspace gate.
        for db in dbs.iter() {
            db.each_shard_locked_once();
        }
        Some(SnapshotWalk {
            dbs,
            snapshots,
            snap,
            done: 0,
        })
    }

    /// Databases, each of `shards()` shards.
    pub fn dbs(&self) -> usize {
        self.dbs.len()
    }

    pub fn shards(&self) -> usize {
        SHARDS
    }

    /// The lock-delay (ms) the keyspace applies now.
    pub fn lock_delay_ms(&self) -> u64 {
        self.dbs.first().map_or(0, Db::lock_delay_ms)
    }

    /// Appends the renderings of shard `shard` of database `db` as it was at the
    /// instant to `out`, and settles the shard. Holds the shard's read lock (writers
    /// of the shard wait, readers do not) for as long as rendering its keys takes.
    pub fn dump(&mut self, db: usize, shard: usize, out: &mut Vec<u8>) {
        self.snapshots.wait_for_hold(self.done);
        self.done += 1;
        let snap = &*self.snap;
        let copy = &snap.shards[db * SHARDS + shard];
        let render_table = |table: &Table, before: &HashMap<Bytes, Vec<u8>>, out: &mut Vec<u8>| {
            for (_, p) in table.iter() {
                if p.is_expired(snap.now_ms) || (!before.is_empty() && before.contains_key(p.key()))
                {
                    continue;
                }
                (snap.render)(out, p.key(), p.value(), p.deadline_ms());
            }
        };
        let (before, detached) = {
            let table = self.dbs[db].shard_table(shard).read();
            let mut state = copy.state.lock();
            match state.detached.take() {
                // Flushed: the live table holds only what was written since.
                Some(old) => {
                    drop(table);
                    render_table(&old, &state.before, out);
                    (std::mem::take(&mut state.before), Some(old))
                }
                None => {
                    render_table(&table, &state.before, out);
                    copy.settled.store(true, Ordering::Relaxed);
                    (std::mem::take(&mut state.before), None)
                }
            }
        };
        for image in before.values() {
            out.extend_from_slice(image);
        }
        // Freed with no lock held.
        drop(before);
        drop(detached);
    }
}

impl Drop for SnapshotWalk {
    fn drop(&mut self) {
        self.snapshots.active.store(false, Ordering::SeqCst);
        let mut current = self.snapshots.current.write();
        if current.as_ref().is_some_and(|c| Arc::ptr_eq(c, &self.snap)) {
            *current = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Entry, Keyspace, Slot, Value};

    fn string(v: &str, deadline_ms: Option<u64>) -> Entry {
        Entry {
            value: Value::Str(Bytes::copy_from_slice(v.as_bytes())),
            deadline_ms,
        }
    }

    /// A renderer that writes `key=value;` for strings, `key=<type>;` for the rest,
    /// and leaves out keys with a deadline before 1000.
    fn render() -> Render {
        Box::new(
            |out: &mut Vec<u8>, key: &[u8], value: ValueRef<'_>, deadline: Option<u64>| {
                if deadline.is_some_and(|d| d < 1000) {
                    return;
                }
                out.extend_from_slice(key);
                out.push(b'=');
                match value {
                    ValueRef::Str(s) => out.extend_from_slice(s),
                    other => out.extend_from_slice(other.type_name().as_bytes()),
                }
                out.push(b';');
            },
        )
    }

    /// Every shard of every database rendered; the renderings sorted.
    fn walk_all(walk: &mut SnapshotWalk) -> Vec<Vec<String>> {
        (0..walk.dbs())
            .map(|db| {
                let mut out = Vec::new();
                for shard in 0..walk.shards() {
                    walk.dump(db, shard, &mut out);
                }
                let mut keys: Vec<String> = String::from_utf8(out)
                    .unwrap()
                    .split_terminator(';')
                    .map(str::to_string)
                    .collect();
                keys.sort();
                keys
            })
            .collect()
    }

    #[test]
    fn a_walk_shows_the_instant_whatever_is_written_meanwhile() {
        let ks = Keyspace::new(2, 7);
        let db = ks.db(0);
        for i in 0..200 {
            db.insert(format!("k{i}").as_bytes(), string(&format!("v{i}"), None));
        }
        db.insert(b"short", string("s", Some(500)));
        db.insert(b"expired", string("e", Some(5)));
        ks.db(1).insert(b"other", string("o", None));
        let mut walk = ks.begin_snapshot(10, render()).unwrap();
        assert!(ks.begin_snapshot(10, render()).is_none(), "one at a time");
        // Half of db 0's shards rendered before the writes.
        let mut first = Vec::new();
        for shard in 0..SHARDS / 2 {
            walk.dump(0, shard, &mut first);
        }
        // Every kind of write, in shards rendered and not.
        for i in 0..50 {
            match db.entry(format!("k{i}").as_bytes(), 20) {
                Slot::Occupied(mut e) => e.set_str(b"changed"),
                Slot::Vacant(_) => unreachable!(),
            }
        }
        for i in 50..100 {
            assert!(db.remove(format!("k{i}").as_bytes(), 20));
        }
        for i in 100..120 {
            let e = db.take(format!("k{i}").as_bytes(), 20).unwrap();
            db.insert(format!("moved{i}").as_bytes(), e);
        }
        db.get_mut(b"k150", 20).unwrap().set_deadline(Some(50_000));
        for i in 0..30 {
            db.insert(format!("new{i}").as_bytes(), string("n", None));
        }
        // A write twice keeps the first pre-image.
        db.insert(b"k160", string("once", None));
        db.insert(b"k160", string("twice", None));
        // The other database flushed whole: its tables go to the snapshot.
        ks.db(1).clear();
        ks.db(1).insert(b"after", string("a", None));
        // The rest of db 0, and db 1.
        let mut rest = Vec::new();
        for shard in SHARDS / 2..SHARDS {
            walk.dump(0, shard, &mut rest);
        }
        first.extend_from_slice(&rest);
        let mut db0: Vec<String> = String::from_utf8(first)
            .unwrap()
            .split_terminator(';')
            .map(str::to_string)
            .collect();
        db0.sort();
        let mut want: Vec<String> = (0..200).map(|i| format!("k{i}=v{i}")).collect();
        want.sort();
        assert_eq!(db0, want, "the short-TTL and the expired keys left out");
        let mut db1 = Vec::new();
        for shard in 0..SHARDS {
            walk.dump(1, shard, &mut db1);
        }
        assert_eq!(db1, b"other=o;");
        drop(walk);
        // Ended: writes keep nothing, and a new snapshot shows the present.
        db.insert(b"k0", string("later", None));
        let mut walk = ks.begin_snapshot(20, render()).unwrap();
        let all = walk_all(&mut walk);
        assert!(all[0].contains(&"k0=later".to_string()));
        assert!(all[0].contains(&"moved100=v100".to_string()));
        assert!(!all[0].iter().any(|k| k.starts_with("k50=")));
        assert_eq!(all[1], vec!["after=a".to_string()]);
    }

    #[test]
    fn writes_after_their_shard_is_rendered_keep_nothing() {
        let ks = Keyspace::new(1, 3);
        let db = ks.db(0);
        db.insert(b"a", string("1", None));
        let mut walk = ks.begin_snapshot(0, render()).unwrap();
        let mut out = Vec::new();
        for shard in 0..SHARDS {
            walk.dump(0, shard, &mut out);
        }
        db.insert(b"a", string("2", None));
        let copies: usize = walk
            .snap
            .shards
            .iter()
            .map(|c| c.state.lock().before.len())
            .sum();
        assert_eq!(copies, 0);
        assert_eq!(out, b"a=1;");
    }

    #[test]
    fn the_hold_stops_the_walk_until_released() {
        let ks = Arc::new(Keyspace::new(1, 3));
        ks.db(0).insert(b"a", string("1", None));
        ks.hold_snapshot_walk(Some(3));
        let mut walk = ks.begin_snapshot(0, render()).unwrap();
        let walker = std::thread::spawn(move || {
            let mut out = Vec::new();
            for shard in 0..SHARDS {
                walk.dump(0, shard, &mut out);
            }
            out
        });
        let mut held = false;
        for _ in 0..10_000 {
            if ks.snapshot_walk_held() {
                held = true;
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(held, "the walker reached the hold");
        ks.db(0).insert(b"a", string("2", None));
        ks.hold_snapshot_walk(None);
        assert_eq!(walker.join().unwrap(), b"a=1;");
    }
}
