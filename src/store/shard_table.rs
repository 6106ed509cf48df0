//! A shard's table: hashbrown's `RawTable` of 8-byte slots (a pointer to an entry's
//! block), behind the few safe operations the keyspace uses, plus `prefetch`.
//!
//! `HashTable` would do for everything but `prefetch`, which needs the address a
//! lookup will probe first: the control group at `hash & (buckets - 1)` and the slots
//! just below the control bytes (hashbrown 0.14's layout: slot `i` ends `i` slots
//! before `data_end`). If that layout ever changed, prefetches would load the wrong
//! lines, which costs time and nothing else: a prefetch never faults or reads.

use super::packed::Packed;
use hashbrown::raw::RawTable;

pub(super) struct Table(RawTable<Packed>);

impl Default for Table {
    fn default() -> Table {
        Table(RawTable::new())
    }
}

impl Table {
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn capacity(&self) -> usize {
        self.0.capacity()
    }

    /// The entry with this hash that `eq` accepts; `eq` is offered every slot whose
    /// 7-bit tag matches, until it says yes.
    pub fn find(&self, hash: u64, eq: impl FnMut(&Packed) -> bool) -> Option<&Packed> {
        self.0.get(hash, eq)
    }

    pub fn find_mut(&mut self, hash: u64, eq: impl FnMut(&Packed) -> bool) -> Option<&mut Packed> {
        self.0.get_mut(hash, eq)
    }

    /// Takes out the entry `eq` accepts.
    pub fn remove(&mut self, hash: u64, eq: impl FnMut(&Packed) -> bool) -> Option<Packed> {
        self.0.remove_entry(hash, eq)
    }

    /// Adds an entry whose key is not in the table.
    pub fn insert_unique(&mut self, hash: u64, entry: Packed, rehash: impl Fn(&Packed) -> u64) {
        self.0.insert(hash, entry, rehash);
    }

    pub fn iter(&self) -> impl Iterator<Item = &Packed> {
        // SAFETY: the iterator and the references it yields borrow the table, so it
        // outlives them and is not changed meanwhile.
        unsafe { self.0.iter().map(|bucket| bucket.as_ref()) }
    }

    pub fn shrink_to(&mut self, min_size: usize, rehash: impl Fn(&Packed) -> u64) {
        self.0.shrink_to(min_size, rehash);
    }

    /// Starts loading what a lookup of `hash` reads first: its control group and the
    /// slots under it (two cache lines: a group covers 16 slots of 8 bytes).
    pub fn prefetch(&self, hash: u64) {
        let buckets = self.0.buckets();
        let pos = hash as usize & (buckets - 1);
        let end = self.0.data_end().as_ptr().cast::<u8>();
        let slot = size_of::<Packed>();
        prefetch(end.wrapping_add(pos));
        prefetch(end.wrapping_sub((pos + 1) * slot));
        prefetch(end.wrapping_sub((pos + 16) * slot));
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
