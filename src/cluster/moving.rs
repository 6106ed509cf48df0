//! The slots in flight during a live move (`migrate`): commands that name a key of one
//! of them, and commands that hold the keyspace gate exclusively (scripts, EXEC, MSET,
//! FLUSHALL...: they may touch any key), wait until the move ends and are then routed
//! again (`MOVED` if the slot went). Every other command runs on: the write pause
//! covers the moving slots, not the node.
//!
//! The old owner marks the slots, then takes and drops the gate exclusively once:
//! every command that looked before the mark has finished, every command after it
//! sees the mark, so nothing changes those slots' keys while they are read and sent.
//! One move at a time per node.

use super::slot::{key_slot, SLOTS};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use tokio::sync::Notify;

/// The slots a move has in flight on this node.
pub struct Moving {
    slots: Box<[AtomicBool]>,
    /// Slots marked (0: no move; the one load on every command's path).
    count: AtomicUsize,
    /// A move is running (marking, sending or flipping).
    busy: AtomicBool,
    /// Woken when a move ends.
    done: Notify,
}

impl Default for Moving {
    fn default() -> Self {
        Moving {
            slots: (0..SLOTS).map(|_| AtomicBool::new(false)).collect(),
            count: AtomicUsize::new(0),
            busy: AtomicBool::new(false),
            done: Notify::new(),
        }
    }
}

/// A move in flight: its slots stay marked until this is dropped.
pub struct InFlight<'a> {
    moving: &'a Moving,
}

impl Moving {
    /// Marks `slots` as moving; refused while another move runs.
    pub fn begin(&self, slots: &[bool]) -> Result<InFlight<'_>, String> {
        if self.busy.swap(true, Ordering::SeqCst) {
            return Err("another slot move is in progress on this node".into());
        }
        let mut n = 0;
        for (s, _) in slots.iter().enumerate().filter(|(_, &on)| on) {
            self.slots[s].store(true, Ordering::SeqCst);
            n += 1;
        }
        self.count.store(n, Ordering::SeqCst);
        Ok(InFlight { moving: self })
    }

    /// How many slots are in flight (INFO's `cluster_slots_moving`).
    pub fn count(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }

    /// Whether a move is in flight.
    pub fn any(&self) -> bool {
        self.count.load(Ordering::SeqCst) != 0
    }

    /// Whether a command must wait for the move: it holds the gate exclusively (it may
    /// touch any key), or one of `keys` is in a moving slot.
    pub fn blocks<'k>(&self, exclusive: bool, mut keys: impl Iterator<Item = &'k [u8]>) -> bool {
        self.any()
            && (exclusive
                || keys.any(|k| self.slots[usize::from(key_slot(k))].load(Ordering::SeqCst)))
    }

    /// Waits until no move is in flight.
    pub async fn wait(&self) {
        loop {
            let done = self.done.notified();
            tokio::pin!(done);
            done.as_mut().enable();
            if !self.any() {
                return;
            }
            done.await;
        }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let m = self.moving;
        for s in m.slots.iter() {
            s.store(false, Ordering::SeqCst);
        }
        m.count.store(0, Ordering::SeqCst);
        m.busy.store(false, Ordering::SeqCst);
        m.done.notify_waiters();
    }
}
