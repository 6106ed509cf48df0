//! Key events the store sees itself, for keyspace notifications
//! (`commands::notify`): a key removed by lazy or active expiry (`expired`) and a key
//! created (`new`); and for lock introspection (`commands::families::locks`), a lock
//! that expired. The commands layer drains them in order, before publishing a
//! command's own events, so a subscriber reads them where Redis sends them
//! (`expired` before the command that found the key gone, `new` before `set`).
//!
//! While no class is wanted (the default), reporting costs one atomic load.

use bytes::Bytes;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering::Relaxed};

/// A key removed by expiry.
pub const EXPIRED: u8 = 1;
/// A key created.
pub const NEW: u8 = 2;
/// A lock (`lock.rs`) removed by expiry: reported with `EXPIRED`.
pub const LOCK_EXPIRED: u8 = 4;

/// The events wanted and those waiting to be published.
#[derive(Default)]
pub struct KeyEvents {
    wanted: AtomicU8,
    pending: AtomicBool,
    queue: Mutex<Vec<KeyEvent>>,
}

/// One event: the database index, the kinds (`EXPIRED`, `NEW`, `LOCK_EXPIRED`: the
/// wanted ones of what happened) and the key.
pub struct KeyEvent {
    pub db: usize,
    pub kind: u8,
    pub key: Bytes,
}

impl KeyEvents {
    /// Which kinds are recorded from now on (a mask of the kinds).
    pub fn want(&self, kinds: u8) {
        self.wanted.store(kinds, Relaxed);
    }

    /// Records an event of the wanted ones of `kinds`, if any is.
    #[inline]
    pub(super) fn report(&self, db: usize, kinds: u8, key: &[u8]) {
        let wanted = self.wanted.load(Relaxed) & kinds;
        if wanted != 0 {
            self.push(db, wanted, key);
        }
    }

    #[cold]
    fn push(&self, db: usize, kind: u8, key: &[u8]) {
        self.queue.lock().push(KeyEvent {
            db,
            kind,
            key: Bytes::copy_from_slice(key),
        });
        self.pending.store(true, Relaxed);
    }

    /// Whether events wait (one load).
    #[inline]
    pub fn pending(&self) -> bool {
        self.pending.load(Relaxed)
    }

    /// The waiting events, oldest first.
    pub fn take(&self) -> Vec<KeyEvent> {
        let mut queue = self.queue.lock();
        self.pending.store(false, Relaxed);
        std::mem::take(&mut *queue)
    }
}
