//! The guards a database hands out: a live entry read (`Ref`) or changed (`RefMut`)
//! with its shard locked, and a missing key's place (`Vacant`), as `Db::entry`'s
//! `Slot`.

use super::Db;
use crate::store::packed::Packed;
use crate::store::shard_table::Table;
use crate::store::{Entry, ValueMut, ValueRef};
use parking_lot::{RwLockReadGuard, RwLockWriteGuard};
use std::ops::Deref;

/// A live entry, read: the shard stays read-locked while this lives.
pub struct Ref<'a> {
    // Declared first: the view is never used after the guard is dropped.
    pub(super) entry: Packed,
    pub(super) _guard: RwLockReadGuard<'a, Table>,
}

impl Deref for Ref<'_> {
    type Target = Packed;
    fn deref(&self) -> &Packed {
        // The view is of an entry in the table the guard keeps read-locked.
        &self.entry
    }
}

/// A live entry, for changing: the shard stays write-locked while this lives. Reads
/// through `Deref`; writes through its own methods (an entry may move to another slot
/// when its size changes, and the guard repoints the table).
pub struct RefMut<'a> {
    pub(super) entry: Packed,
    pub(super) guard: RwLockWriteGuard<'a, Table>,
    pub(super) handle: u32,
    pub(super) hash: u64,
    pub(super) db: &'a Db,
    /// Written through: reported to client-side caching once.
    pub(super) changed: bool,
}

impl Deref for RefMut<'_> {
    type Target = Packed;
    fn deref(&self) -> &Packed {
        // The view is of the entry at `handle`, in the table the guard keeps locked;
        // every change that moves the entry renews the view.
        &self.entry
    }
}

impl RefMut<'_> {
    fn changing(&mut self) {
        if !self.changed {
            self.changed = true;
            self.db.tracked.changed(self.entry.key());
        }
    }

    fn moved(&mut self, handle: u32) {
        self.handle = handle;
        // SAFETY: the guard keeps the table write-locked; this renewal follows every
        // change of the entry.
        self.entry = unsafe { self.guard.view_unbound(handle) };
    }

    /// Removes the entry (what it owns off the slab freed once its shard is unlocked).
    pub fn remove(mut self) {
        self.db.tracked.changed(self.entry.key());
        let gone = self.guard.delete(self.hash, self.handle);
        drop(self.guard);
        drop(gone);
    }

    /// A collection, for changing in place (`ValueMut::Str` for a string, which is
    /// replaced whole: `set_str`).
    pub fn value_mut(&mut self) -> ValueMut<'_> {
        self.changing();
        // SAFETY: the guard holds the shard's write lock; the borrow of `self` keeps
        // the entry where it is while the collection is borrowed.
        unsafe { self.entry.value_mut() }
    }

    /// Replaces the value by the string `value`, keeping the key and the deadline (a
    /// collection is dropped). In place while the entry's slot class holds.
    pub fn set_str(&mut self, value: &[u8]) {
        self.changing();
        let d = self.entry.deadline_ms();
        let (h, at) = self
            .guard
            .resize_str(self.hash, self.handle, value.len(), d);
        self.moved(h);
        // SAFETY: `resize_str` made the value `value.len()` bytes at `at`.
        unsafe { std::ptr::copy_nonoverlapping(value.as_ptr(), at, value.len()) };
    }

    /// Resizes a string value to `len` bytes, keeping its first bytes (bytes added are
    /// zero, the padding SETRANGE writes), and returns it for writing: APPEND and
    /// SETRANGE change a string in place, with no copy of the bytes they keep.
    /// Panics on a collection (callers check the kind first).
    pub fn str_resize(&mut self, len: usize) -> &mut [u8] {
        let ValueRef::Str(old) = self.entry.value() else {
            panic!("str_resize of a collection");
        };
        let old_len = old.len();
        self.changing();
        let d = self.entry.deadline_ms();
        let (h, at) = self.guard.resize_str(self.hash, self.handle, len, d);
        self.moved(h);
        // SAFETY: the value is `len` bytes at `at`, its first `min(old_len, len)`
        // kept; the rest is zeroed before the slice is made; the slice borrows `self`
        // (the guard), so the entry stays put while it lives.
        unsafe {
            if len > old_len {
                std::ptr::write_bytes(at.add(old_len), 0, len - old_len);
            }
            std::slice::from_raw_parts_mut(at, len)
        }
    }

    /// Makes the entry read as idle for `secs` seconds as of `now_ms` (RESTORE ...
    /// IDLETIME). Not a change of the key.
    pub fn set_idle_seconds(&self, secs: u64, now_ms: u64) {
        self.entry.set_idle_seconds(secs, now_ms);
    }

    /// Sets or clears the deadline.
    pub fn set_deadline(&mut self, deadline_ms: Option<u64>) {
        self.changing();
        let h = self.guard.set_deadline(self.hash, self.handle, deadline_ms);
        self.moved(h);
    }

    /// Marks the key as a lock or not (`store/lock.rs` says which writes do).
    pub fn set_lock(&mut self, on: bool) {
        self.entry.set_lock(on);
    }
}

/// A missing key's place, its shard write-locked.
pub struct Vacant<'a, 'k> {
    pub(super) guard: RwLockWriteGuard<'a, Table>,
    pub(super) hash: u64,
    pub(super) key: &'k [u8],
    pub(super) db: &'a Db,
    /// The access clock the new entry starts with.
    pub(super) clock: u32,
    /// A delayed lock stored at the key (`store/lock.rs`), which an insert replaces.
    pub(super) delayed: Option<u32>,
}

impl Vacant<'_, '_> {
    /// The milliseconds left of the lock-delay of the delayed lock at the key (at
    /// least 1), if there is one (`store/lock.rs`): what `Db::lock_delay_left` says,
    /// without a second lookup.
    pub fn lock_delay_left(&self, now_ms: u64) -> Option<u64> {
        let p = self.guard.view(self.delayed?);
        let end = self.db.delay.ends_at(&p)?;
        (now_ms <= end).then(|| end - now_ms + 1)
    }

    /// Stores `entry` at the key (its bytes copied into the entry's slot).
    pub fn insert(self, entry: Entry) {
        self.insert_marked(entry, false);
    }

    /// `insert`, marking the new entry as a lock when `lock` (`store/lock.rs`).
    pub fn insert_marked(mut self, entry: Entry, lock: bool) {
        self.db.tracked.changed(self.key);
        // A delayed lock reads as absent: replacing it creates the key too.
        self.db.created(self.key);
        let db = self.db;
        let (h, old) = match self.delayed {
            Some(old) => {
                let (h, left) =
                    (self.guard).replace(self.hash, old, entry.value, entry.deadline_ms);
                (h, Some(left))
            }
            None => (
                self.guard
                    .insert_new(self.hash, self.key, entry.value, entry.deadline_ms, |k| {
                        db.hash(k)
                    }),
                None,
            ),
        };
        // SAFETY: the write guard is held while the view is used, and dropped after.
        let mut p = unsafe { self.guard.view_unbound(h) };
        p.touch(self.clock);
        p.set_lock(lock);
        drop(self.guard);
        drop(old);
    }
}

/// `Db::entry`'s answer: the live entry or the missing key's place.
pub enum Slot<'a, 'k> {
    Occupied(RefMut<'a>),
    Vacant(Vacant<'a, 'k>),
}
