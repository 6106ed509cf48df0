//! A shard's table: hashbrown's `RawTable` of 4-byte handles into the shard's slab
//! (`slab.rs`), where the entries live (`packed.rs`), behind the few operations the
//! keyspace uses, plus `prefetch`. The table and the slab are one value under one
//! shard lock: a handle means something only with its slab, and a rehash reads each
//! entry's key through it.
//!
//! `HashTable` would do for everything but `prefetch`, which needs the address a
//! lookup will probe first: the control group at `hash & (buckets - 1)` and the slots
//! just below the control bytes (hashbrown 0.14's layout: slot `i` ends `i` slots
//! before `data_end`). If that layout ever changed, prefetches would load the wrong
//! lines, which costs time and nothing else: a prefetch never faults or reads.

use super::packed::{self, Leftover, Packed};
use super::slab::Slab;
use super::{Entry, Value};
use hashbrown::raw::RawTable;
use std::marker::PhantomData;
use std::ops::Deref;

/// An entry seen in a table it borrows.
pub(super) struct View<'a>(Packed, PhantomData<&'a Table>);

impl Deref for View<'_> {
    type Target = Packed;
    fn deref(&self) -> &Packed {
        &self.0
    }
}

#[derive(Default)]
pub(super) struct Table {
    map: RawTable<u32>,
    slab: Slab,
}

impl Table {
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn capacity(&self) -> usize {
        self.map.capacity()
    }

    pub fn buckets(&self) -> usize {
        self.map.buckets()
    }

    pub fn slab(&self) -> &Slab {
        &self.slab
    }

    /// The sweeper's bookkeeping on the slab (`db/reclaim.rs`): a page's minimum
    /// deadline once its live entries were read.
    pub fn set_page_min(&mut self, pi: usize, deadline_ms: u64) {
        self.slab.set_page_min(pi, deadline_ms);
    }

    /// Where the sweeper's next hold starts reading pages.
    pub fn set_sweep_cursor(&mut self, pi: usize) {
        self.slab.set_sweep_cursor(pi);
    }

    /// The slab's minimum from its pages' (after a full pass).
    pub fn recompute_min(&mut self) {
        self.slab.recompute_min();
    }

    /// The entry at a handle the table holds, borrowed from the table.
    pub fn view(&self, handle: u32) -> View<'_> {
        // SAFETY: the handles the table holds are live entries of its slab; the view
        // borrows the table, so neither changes while it lives.
        View(unsafe { Packed::at(&self.slab, handle) }, PhantomData)
    }

    /// `view`, unbound from the borrow.
    ///
    /// # Safety
    /// The caller uses the view only while the table is neither changed nor dropped
    /// (a guard keeping the shard locked, renewing the view after a change).
    pub unsafe fn view_unbound(&self, handle: u32) -> Packed {
        // SAFETY: a handle the table holds is a live entry; the caller's promise.
        unsafe { Packed::at(&self.slab, handle) }
    }

    /// The handle of the entry with this hash that `eq` accepts; `eq` is offered every
    /// entry whose 7-bit tag matches, until it says yes.
    pub fn find(&self, hash: u64, mut eq: impl FnMut(&Packed) -> bool) -> Option<u32> {
        let slab = &self.slab;
        // SAFETY: every handle in the map is a live entry of the slab, unchanged
        // while `self` is borrowed.
        self.map
            .get(hash, |&h| eq(&unsafe { Packed::at(slab, h) }))
            .copied()
    }

    /// Removes the entry at `handle` (found with `hash`); returns what it owned off
    /// the slab, to drop (after unlocking, if it may be big).
    pub fn delete(&mut self, hash: u64, handle: u32) -> Leftover {
        let gone = self.map.remove_entry(hash, |&h| h == handle);
        assert_eq!(gone, Some(handle), "a handle the table holds");
        // SAFETY: the handle was in the table (a live entry) and is out of it now.
        unsafe { packed::release(&mut self.slab, handle) }
    }

    /// Removes the entry at `handle` (found with `hash`) and returns it, owned.
    pub fn take(&mut self, hash: u64, handle: u32) -> Entry {
        let gone = self.map.remove_entry(hash, |&h| h == handle);
        assert_eq!(gone, Some(handle), "a handle the table holds");
        // SAFETY: as in `delete`.
        unsafe { packed::take(&mut self.slab, handle) }
    }

    /// Adds an entry whose key is not in the table; returns its handle.
    pub fn insert_new(
        &mut self,
        hash: u64,
        key: &[u8],
        value: Value,
        deadline_ms: Option<u64>,
        hasher: impl Fn(&[u8]) -> u64,
    ) -> u32 {
        let h = packed::create(&mut self.slab, key, value, deadline_ms);
        let slab = &self.slab;
        // SAFETY: the map's handles are live entries of the slab, which the rehash
        // only reads.
        self.map
            .insert(hash, h, |&x| hasher(unsafe { Packed::at(slab, x) }.key()));
        h
    }

    /// Replaces the entry at `handle` (found with `hash`) by a new one of the same key;
    /// returns the new handle and the old entry's leftover.
    pub fn replace(
        &mut self,
        hash: u64,
        handle: u32,
        value: Value,
        deadline_ms: Option<u64>,
    ) -> (u32, Leftover) {
        let key: *const [u8] = self.view(handle).key();
        // SAFETY: the old entry stays live (and its key readable) until released,
        // after the new one has copied the key.
        let h = packed::create(&mut self.slab, unsafe { &*key }, value, deadline_ms);
        self.set_handle(hash, handle, h);
        // SAFETY: the old handle is out of the table now.
        (h, unsafe { packed::release(&mut self.slab, handle) })
    }

    /// Points the table's slot from `old` to `new` (an entry that moved).
    fn set_handle(&mut self, hash: u64, old: u32, new: u32) {
        if old != new {
            let slot = self.map.get_mut(hash, |&h| h == old);
            *slot.expect("a handle the table holds") = new;
        }
    }

    /// `packed::resize_str` on the entry at `handle`, the table following a move.
    pub fn resize_str(
        &mut self,
        hash: u64,
        handle: u32,
        len: usize,
        deadline_ms: Option<u64>,
    ) -> (u32, *mut u8) {
        // SAFETY: the handle is the table's (a live entry); `&mut self` is the write
        // lock; the slot is repointed below if the entry moved.
        let (h, at) = unsafe { packed::resize_str(&mut self.slab, handle, len, deadline_ms) };
        self.set_handle(hash, handle, h);
        (h, at)
    }

    /// `packed::set_deadline` on the entry at `handle`, the table following a move.
    pub fn set_deadline(&mut self, hash: u64, handle: u32, deadline_ms: Option<u64>) -> u32 {
        // SAFETY: as in `resize_str`.
        let h = unsafe { packed::set_deadline(&mut self.slab, handle, deadline_ms) };
        self.set_handle(hash, handle, h);
        h
    }

    /// Compacts the slab's sparse size class, if any: up to `max_moves` entries move
    /// out of its least used pages (freed once empty), the table repointed to each.
    /// Returns how many moved.
    pub fn compact(&mut self, max_moves: usize, hasher: impl Fn(&[u8]) -> u64) -> usize {
        let Some(class) = self.slab.sparse_class() else {
            return 0;
        };
        let map = &mut self.map;
        self.slab.compact(class, max_moves, |slab, old, new| {
            // SAFETY: `new` holds the live entry `old` held (its bytes copied, `old`
            // not freed yet); the map names it by `old` until repointed here.
            let p = unsafe { Packed::at(slab, new) };
            let slot = map.get_mut(hasher(p.key()), |&h| h == old);
            *slot.expect("a handle the table holds") = new;
            p.deadline_ms()
        })
    }

    /// Every entry, as (handle, view).
    pub fn iter(&self) -> impl Iterator<Item = (u32, View<'_>)> + '_ {
        // SAFETY: the iterator borrows the table, so the buckets it yields outlive
        // their reads.
        unsafe {
            self.map.iter().map(|bucket| {
                let h = *bucket.as_ref();
                (h, self.view(h))
            })
        }
    }

    pub fn shrink_to(&mut self, min_size: usize, hasher: impl Fn(&[u8]) -> u64) {
        let slab = &self.slab;
        // SAFETY: as in `insert_new`.
        self.map
            .shrink_to(min_size, |&x| hasher(unsafe { Packed::at(slab, x) }.key()));
    }

    /// Starts loading what a lookup of `hash` reads first: its control group and the
    /// slots under it (a group covers 16 slots of 4 bytes: one line, two at worst).
    pub fn prefetch(&self, hash: u64) {
        let buckets = self.map.buckets();
        let pos = hash as usize & (buckets - 1);
        let end = self.map.data_end().as_ptr().cast::<u8>();
        let slot = size_of::<u32>();
        prefetch(end.wrapping_add(pos));
        prefetch(end.wrapping_sub((pos + 1) * slot));
        prefetch(end.wrapping_sub((pos + 16) * slot));
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        // The entries' collections and out-of-line blocks; the slab frees the pages
        // (a string entry inline owns nothing else).
        // SAFETY: every handle in the map is a live entry, released at most once, and
        // the map is cleared right after (its handles mean nothing then).
        unsafe {
            for bucket in self.map.iter() {
                let h = *bucket.as_ref();
                if Packed::at(&self.slab, h).owns_heap() {
                    drop(packed::release(&mut self.slab, h));
                }
            }
        }
        self.map.clear_no_drop();
    }
}

/// A hint to load the cache line at `at`: never faults, whatever the address.
#[inline(always)]
pub(super) fn prefetch(at: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing and never faults, whatever the address.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(at.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}
