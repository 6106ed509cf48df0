//! Client-side caching's key table (Redis's TrackingTable): which clients have read
//! which keys, and the keys that changed since the commands layer last delivered
//! invalidations (`commands::tracking`).
//!
//! `Db` reports a change where an entry is written through (`RefMut`'s `deref_mut`),
//! inserted, removed or expired, not where WATCH's conservative touch fires (taking a
//! key's slot): a spurious invalidation makes a client drop its cache and, for
//! rueidislock, wake and retry, so a waiter's failed SET NX must not invalidate the
//! holder's key, and it does not. Redis reports a change per command only when one
//! happened; here a collection command that takes its value for writing and then
//! changes nothing (HDEL of a missing field, SADD of a member already there, a ZADD
//! that changes no score) still reports one: an extra invalidation, never a missing
//! one. Strings, expiry and deletion are exact.
//!
//! Each change records the client whose command made it (`Actor`, set around a
//! command's handler; 0 for the expiry sweeper): NOLOOP skips exactly those, and
//! commands of several connections run at once.
//!
//! Lock order: a key's shard lock, then this table's mutex.

use bytes::Bytes;
use parking_lot::Mutex;
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

thread_local! {
    static ACTOR: Cell<u64> = const { Cell::new(0) };
}

/// The client whose command is running on this thread, while this lives.
pub struct Actor(u64);

impl Actor {
    pub fn enter(client: u64) -> Actor {
        Actor(ACTOR.with(|a| a.replace(client)))
    }
}

impl Drop for Actor {
    fn drop(&mut self) {
        ACTOR.with(|a| a.set(self.0));
    }
}

/// The keys table and the changes waiting to be delivered.
#[derive(Default)]
pub struct TrackedKeys {
    /// Keys in the table plus broadcasting clients: while 0, a change costs one load.
    interest: AtomicUsize,
    /// Changes are waiting in `inner` (one load after every command).
    pending: AtomicBool,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Key -> ids of the clients that read it since its last invalidation.
    table: HashMap<Bytes, Vec<u64>>,
    /// Sum of the table's id lists (INFO's tracking_total_items).
    items: usize,
    /// Clients in broadcast mode: every change is recorded for them.
    bcast: usize,
    /// Tracked keys changed since the last `take`, in order (a key may repeat), with
    /// the client that changed them.
    changed: Vec<(Bytes, u64)>,
    /// Every key changed since the last `take` that drained broadcasts (with a
    /// broadcasting client only), with the client that changed it.
    broadcast: Vec<(Bytes, u64)>,
    /// A FLUSHALL / FLUSHDB since the last `take`.
    flushed: bool,
}

/// What `take` hands the commands layer.
#[derive(Default)]
pub struct Changes {
    /// Each changed key once, with the clients that had read it (now forgotten) and
    /// the client that changed it.
    pub keys: Vec<(Bytes, Vec<u64>, u64)>,
    /// Every change (key, by whom) since broadcasts were last drained, for
    /// broadcasting clients (empty without any, or when not drained this time).
    pub all: Vec<(Bytes, u64)>,
    pub flushed: bool,
}

impl TrackedKeys {
    /// `client` read `key`: it is told when the key next changes.
    pub fn remember(&self, key: &[u8], client: u64) {
        let mut inner = self.inner.lock();
        let ids = match inner.table.get_mut(key) {
            Some(ids) => ids,
            None => {
                self.interest.fetch_add(1, Ordering::SeqCst);
                inner.table.entry(Bytes::copy_from_slice(key)).or_default()
            }
        };
        if !ids.contains(&client) {
            ids.push(client);
            inner.items += 1;
        }
    }

    /// A key changed (written, removed, expired).
    #[inline]
    pub fn changed(&self, key: &[u8]) {
        if self.interest.load(Ordering::SeqCst) == 0 {
            return;
        }
        let mut inner = self.inner.lock();
        let tracked = inner.table.contains_key(key);
        if inner.bcast > 0 || tracked {
            let by = ACTOR.with(Cell::get);
            let key = Bytes::copy_from_slice(key);
            if inner.bcast > 0 {
                inner.broadcast.push((key.clone(), by));
            }
            if tracked {
                inner.changed.push((key, by));
            }
            self.pending.store(true, Ordering::SeqCst);
        }
    }

    /// Every key went (FLUSHALL, FLUSHDB): each tracking client is told so, whether
    /// or not it has read anything.
    pub fn flushed(&self) {
        self.inner.lock().flushed = true;
        self.pending.store(true, Ordering::SeqCst);
    }

    /// Whether changes wait for `take`.
    #[inline]
    pub fn pending(&self) -> bool {
        self.pending.load(Ordering::SeqCst)
    }

    /// The changes since the last call; a changed key leaves the table (its readers
    /// are told once), and a flush empties it. Broadcasts are drained only when
    /// `broadcasts` is set (at the end of a client's request, or of a sweep): Redis
    /// sends a prefix's changes of one event loop turn as one message.
    pub fn take(&self, broadcasts: bool) -> Changes {
        let mut inner = self.inner.lock();
        let changed = std::mem::take(&mut inner.changed);
        let mut out = Changes {
            flushed: std::mem::take(&mut inner.flushed),
            ..Changes::default()
        };
        for (key, by) in &changed {
            if let Some(ids) = inner.table.remove(key) {
                inner.items -= ids.len();
                self.interest.fetch_sub(1, Ordering::SeqCst);
                out.keys.push((key.clone(), ids, *by));
            }
        }
        if out.flushed {
            let gone = inner.table.len();
            inner.table = HashMap::new();
            inner.items = 0;
            self.interest.fetch_sub(gone, Ordering::SeqCst);
        }
        if broadcasts {
            out.all = std::mem::take(&mut inner.broadcast);
        }
        self.pending
            .store(!inner.broadcast.is_empty(), Ordering::SeqCst);
        out
    }

    /// A client entered (true) or left (false) broadcast mode.
    pub fn broadcasting(&self, on: bool) {
        let mut inner = self.inner.lock();
        if on {
            inner.bcast += 1;
            self.interest.fetch_add(1, Ordering::SeqCst);
        } else {
            inner.bcast -= 1;
            self.interest.fetch_sub(1, Ordering::SeqCst);
            if inner.bcast == 0 {
                inner.broadcast.clear();
            }
        }
    }

    /// INFO's tracking_total_keys and tracking_total_items.
    pub fn counts(&self) -> (usize, usize) {
        let inner = self.inner.lock();
        (inner.table.len(), inner.items)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_reaches_the_readers_once() {
        let t = TrackedKeys::default();
        t.changed(b"k");
        assert!(!t.pending(), "nobody reads k: nothing recorded");
        t.remember(b"k", 1);
        t.remember(b"k", 2);
        t.remember(b"k", 1);
        assert_eq!(t.counts(), (1, 2));
        t.changed(b"other");
        assert!(!t.pending());
        {
            let _by = Actor::enter(9);
            t.changed(b"k");
            t.changed(b"k");
        }
        assert!(t.pending());
        let c = t.take(true);
        assert_eq!(c.keys, vec![(Bytes::from("k"), vec![1, 2], 9)]);
        assert!(c.all.is_empty() && !c.flushed);
        assert_eq!(t.counts(), (0, 0));
        t.changed(b"k");
        assert!(!t.pending(), "told once: k is no longer tracked");
    }

    #[test]
    fn broadcasting_records_every_change_and_a_flush_empties_the_table() {
        let t = TrackedKeys::default();
        t.broadcasting(true);
        t.remember(b"a", 7);
        t.changed(b"x");
        t.flushed();
        let c = t.take(false);
        assert!(
            c.all.is_empty() && c.flushed,
            "broadcasts wait for the end of the request"
        );
        assert!(t.pending());
        t.changed(b"z");
        let c = t.take(true);
        assert_eq!(c.all, vec![(Bytes::from("x"), 0), (Bytes::from("z"), 0)]);
        assert!(!t.pending());
        assert_eq!(t.counts(), (0, 0));
        t.broadcasting(false);
        t.changed(b"y");
        assert!(!t.pending());
    }
}
