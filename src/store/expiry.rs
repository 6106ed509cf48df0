//! The deadline index behind active expiry: its cost follows expirations and writes,
//! never the number of keys (a full scan of a million keys cost ~17 ms, four times a
//! second, on an async worker).
//!
//! Commands set deadlines through the guards `Db::entry` / `get_mut` / `insert` hand
//! out, so the store does not see the deadline when it is written. It sees the write:
//! each of those calls notes the key's hash (8 bytes, no key copy) in its shard's
//! pending list, while the caller holds the shard lock. The sweeper later drains the
//! lists, reads each noted key's deadline under the shard lock (so after the writer
//! finished), and files its hash under the deadline's slot. A slot whose time has
//! passed is looked up hash by hash: whatever entry with that hash is expired goes.
//! An index entry that went stale (the key was deleted or given a later deadline, which
//! filed it again) finds nothing and costs one lookup.

use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

/// Deadlines are filed in slots of this many milliseconds. A slot is looked at once
/// its first millisecond has passed; a key in it not expired yet is filed again.
pub const SLOT_MS: u64 = 16;

#[repr(align(64))]
#[derive(Default)]
struct Pending(Mutex<Vec<u64>>);

pub struct ExpiryIndex {
    /// Hashes written since the last drain, one list per dashmap shard.
    pending: Box<[Pending]>,
    any_pending: AtomicBool,
    /// Slot number (deadline / SLOT_MS) -> hashes of keys due then. Only the sweeper
    /// (or `advance` on a manual clock) touches it.
    slots: Mutex<BTreeMap<u64, Vec<u64>>>,
}

impl ExpiryIndex {
    pub fn new(shards: usize) -> ExpiryIndex {
        ExpiryIndex {
            pending: (0..shards).map(|_| Pending::default()).collect(),
            any_pending: AtomicBool::new(false),
            slots: Mutex::new(BTreeMap::new()),
        }
    }

    /// A key with this hash, in this shard, was written (its deadline may have changed).
    #[inline]
    pub fn note(&self, shard: usize, hash: u64) {
        self.pending[shard].0.lock().push(hash);
        if !self.any_pending.load(Ordering::Relaxed) {
            self.any_pending.store(true, Ordering::Release);
        }
    }

    /// Takes every shard's pending hashes: (shard, hashes) for the non-empty ones.
    pub fn take_pending(&self) -> Vec<(usize, Vec<u64>)> {
        if !self.any_pending.swap(false, Ordering::AcqRel) {
            return Vec::new();
        }
        self.pending
            .iter()
            .enumerate()
            .filter_map(|(i, p)| {
                let mut list = p.0.lock();
                (!list.is_empty()).then(|| (i, std::mem::take(&mut *list)))
            })
            .collect()
    }

    /// Files `hash` under `deadline_ms`'s slot.
    pub fn file(&self, slots: &mut BTreeMap<u64, Vec<u64>>, deadline_ms: u64, hash: u64) {
        slots.entry(deadline_ms / SLOT_MS).or_default().push(hash);
    }

    pub fn slots(&self) -> parking_lot::MutexGuard<'_, BTreeMap<u64, Vec<u64>>> {
        self.slots.lock()
    }

    /// Removes and returns the hashes of every slot that may hold an expired key by
    /// `now_ms` (a key expires when now > deadline: its slot started before now).
    pub fn take_due(&self, now_ms: u64) -> Vec<u64> {
        let mut slots = self.slots.lock();
        let mut due = Vec::new();
        while let Some(entry) = slots.first_entry() {
            if entry.key() * SLOT_MS >= now_ms {
                break;
            }
            let hashes = entry.remove();
            if due.is_empty() {
                due = hashes;
            } else {
                due.extend(hashes);
            }
        }
        due
    }

    /// Due hashes a bounded pass did not get to: filed where the next pass looks first.
    pub fn refile_due(&self, hashes: Vec<u64>) {
        self.slots.lock().entry(0).or_default().extend(hashes);
    }

    /// How many hashes are filed (stale ones included): INFO / MEMORY STATS.
    pub fn filed(&self) -> usize {
        self.slots.lock().values().map(Vec::len).sum()
    }

    /// FLUSHALL / crash-restart: nothing is left to expire.
    pub fn clear(&self) {
        for p in self.pending.iter() {
            *p.0.lock() = Vec::new();
        }
        *self.slots.lock() = BTreeMap::new();
    }
}
