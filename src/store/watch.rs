//! WATCH's per-key modification tracking: which clients watch which keys of one
//! database, and the "touch" every write path of `Db` calls.
//!
//! Why a registry of watchers rather than a version per key: a version would cost
//! every key memory and every write a store, whether anyone watches or not. Here a
//! write to a database nobody watches costs one atomic load (`watchers == 0`), as
//! Redis's `touchWatchedKey` costs one dict-size check.
//!
//! Touches are conservative: a write path that could change the key touches it (for
//! example SET NX on a key that exists takes the write slot and touches it, though it
//! changes nothing, where Redis does not). A spurious touch only makes EXEC answer the
//! null array and the client retry; a missed one would lose an update.
//!
//! Lock order: a key's shard lock, then this registry's mutex. Nothing here takes a
//! shard lock while holding the mutex.

use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// One client's watch state: set once any key it watches is modified (Redis's
/// CLIENT_DIRTY_CAS). Shared between the client and the registries of the databases
/// its keys live in.
#[derive(Default, Debug)]
pub struct WatchFlag {
    dirty: AtomicBool,
}

impl WatchFlag {
    pub fn is_dirty(&self) -> bool {
        self.dirty.load(Ordering::SeqCst)
    }

    pub fn set_dirty(&self) {
        self.dirty.store(true, Ordering::SeqCst);
    }

    pub fn clear(&self) {
        self.dirty.store(false, Ordering::SeqCst);
    }
}

struct Watcher {
    flag: Arc<WatchFlag>,
    /// The key was already expired (but not yet reclaimed) when WATCH ran: its removal
    /// is no logical change, so it clears this instead of dirtying the client.
    stale: bool,
}

/// The watchers of one database's keys.
#[derive(Default)]
pub struct Watched {
    /// Registrations (key, client) in `keys`; lets an unwatched write skip the mutex.
    watchers: AtomicUsize,
    keys: Mutex<HashMap<Bytes, Vec<Watcher>>>,
}

impl Watched {
    /// Called by every write path: `present_after` says whether the key still exists
    /// once the write is done (false for deletions and expiry).
    #[inline]
    pub fn touch(&self, key: &[u8], present_after: bool) {
        if self.watchers.load(Ordering::SeqCst) == 0 {
            return;
        }
        self.touch_watched(key, present_after);
    }

    fn touch_watched(&self, key: &[u8], present_after: bool) {
        let mut keys = self.keys.lock();
        let Some(watchers) = keys.get_mut(key) else {
            return;
        };
        for w in watchers {
            if w.stale && !present_after {
                w.stale = false;
                continue;
            }
            w.flag.set_dirty();
        }
    }

    /// Registers `flag` as watching `key`. Returns false if it already did.
    pub fn add(&self, key: &[u8], flag: &Arc<WatchFlag>) -> bool {
        let mut keys = self.keys.lock();
        let watchers = keys.entry(Bytes::copy_from_slice(key)).or_default();
        if watchers.iter().any(|w| Arc::ptr_eq(&w.flag, flag)) {
            return false;
        }
        watchers.push(Watcher {
            flag: flag.clone(),
            stale: false,
        });
        self.watchers.fetch_add(1, Ordering::SeqCst);
        true
    }

    /// Marks `flag`'s watch of `key` as one of a key already expired at WATCH time.
    pub fn mark_stale(&self, key: &[u8], flag: &Arc<WatchFlag>) {
        if let Some(w) = self.find(&mut self.keys.lock(), key, flag) {
            w.stale = true;
        }
    }

    /// Whether `flag`'s watch of `key` started on an already expired key.
    pub fn is_stale(&self, key: &[u8], flag: &Arc<WatchFlag>) -> bool {
        self.find(&mut self.keys.lock(), key, flag)
            .is_some_and(|w| w.stale)
    }

    fn find<'m>(
        &self,
        keys: &'m mut HashMap<Bytes, Vec<Watcher>>,
        key: &[u8],
        flag: &Arc<WatchFlag>,
    ) -> Option<&'m mut Watcher> {
        keys.get_mut(key)?
            .iter_mut()
            .find(|w| Arc::ptr_eq(&w.flag, flag))
    }

    /// Forgets `flag`'s watch of `key`.
    pub fn remove(&self, key: &[u8], flag: &Arc<WatchFlag>) {
        let mut keys = self.keys.lock();
        let Some(watchers) = keys.get_mut(key) else {
            return;
        };
        let before = watchers.len();
        watchers.retain(|w| !Arc::ptr_eq(&w.flag, flag));
        let removed = before - watchers.len();
        if watchers.is_empty() {
            keys.remove(key);
        }
        self.watchers.fetch_sub(removed, Ordering::SeqCst);
    }

    /// Every watched key (for FLUSHDB, which touches those that exist).
    pub fn keys(&self) -> Vec<Bytes> {
        if self.watchers.load(Ordering::SeqCst) == 0 {
            return Vec::new();
        }
        self.keys.lock().keys().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_touch_dirties_every_watcher_of_the_key_only() {
        let w = Watched::default();
        let (a, b) = (
            Arc::new(WatchFlag::default()),
            Arc::new(WatchFlag::default()),
        );
        assert!(w.add(b"k", &a));
        assert!(!w.add(b"k", &a));
        w.add(b"other", &b);
        w.touch(b"k", true);
        assert!(a.is_dirty());
        assert!(!b.is_dirty());
    }

    #[test]
    fn removing_a_stale_key_is_no_change_but_writing_it_is() {
        let w = Watched::default();
        let a = Arc::new(WatchFlag::default());
        w.add(b"k", &a);
        w.mark_stale(b"k", &a);
        w.touch(b"k", false);
        assert!(!a.is_dirty());
        assert!(!w.is_stale(b"k", &a));
        w.touch(b"k", false);
        assert!(a.is_dirty());
    }

    #[test]
    fn unwatched_registry_is_empty_again() {
        let w = Watched::default();
        let a = Arc::new(WatchFlag::default());
        w.add(b"k", &a);
        w.remove(b"k", &a);
        assert!(w.keys().is_empty());
        w.touch(b"k", true);
        assert!(!a.is_dirty());
    }
}
