//! Clients blocked in BLPOP / BRPOP, and how a push reaches them.
//!
//! As in Redis, a push never hands an element over itself: it marks its key "ready"
//! (only when someone waits on that key), and once the command (or the whole script)
//! has finished, `serve_ready` gives the waiting clients their elements in FIFO order.
//! A script that pushes therefore wakes its waiters after it ends, as Redis does.
//!
//! The server pops on the waiter's behalf and sends the element through a oneshot
//! channel, so an element is never seen by anyone else between the pop and the
//! hand-over. A waiter whose connection has gone (the send fails) gets nothing: the
//! element goes back where it came from and the next waiter is served.
//!
//! Lock order: a key's shard lock, then a waiter's sender lock, then the registry.
//! `signal` runs after the pushing command has released the key's shard lock.

use super::Shared;
use crate::protocol::Reply;
use crate::store::Value;
use bytes::Bytes;
use dashmap::mapref::entry::Entry as Slot;
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::oneshot;

/// Which end of the list a waiter pops from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Left,
    Right,
}

/// What a served waiter receives: the key it was served from and the element.
#[derive(Debug)]
pub struct Served {
    pub key: Bytes,
    pub value: Bytes,
}

impl Served {
    /// BLPOP's reply: the key and the element.
    pub fn into_reply(self) -> Reply {
        Reply::Array(vec![Reply::Bulk(self.key), Reply::Bulk(self.value)])
    }
}

/// One blocked client, registered under each of its keys.
pub struct Waiter {
    db: usize,
    keys: Vec<Bytes>,
    side: Side,
    /// Taken by whoever ends the wait first: `serve_ready` (sending the element while
    /// holding this lock) or `unblock` (timeout, disconnect). Whoever takes it removes
    /// the waiter from the registry, so each waiter is removed and counted once.
    tx: Mutex<Option<oneshot::Sender<Served>>>,
}

/// What BLPOP leaves in `ClientState::blocked` for the connection to wait on.
pub struct Blocked {
    pub waiter: Arc<Waiter>,
    pub rx: oneshot::Receiver<Served>,
    /// On the server clock; `None` waits forever (timeout 0).
    pub deadline_ms: Option<u64>,
}

type KeyRef = (usize, Bytes);

/// The registry of blocked clients and of keys pushed to while someone waits.
#[derive(Default)]
pub struct Blocking {
    waiters: Mutex<HashMap<KeyRef, VecDeque<Arc<Waiter>>>>,
    ready: Mutex<Vec<KeyRef>>,
    any_ready: AtomicBool,
    /// Waiters in the registry (INFO's blocked_clients); lets a push skip all locking
    /// when nobody waits.
    blocked: AtomicUsize,
}

impl Blocking {
    pub fn new() -> Blocking {
        Blocking::default()
    }

    /// Clients blocked right now.
    pub fn blocked_clients(&self) -> usize {
        self.blocked.load(Ordering::SeqCst)
    }

    /// Whether anyone waits on `key` (a new BLPOP queues behind them rather than
    /// taking an element they are owed).
    pub fn has_waiters(&self, db: usize, key: &[u8]) -> bool {
        if self.blocked.load(Ordering::SeqCst) == 0 {
            return false;
        }
        self.waiters
            .lock()
            .contains_key(&(db, Bytes::copy_from_slice(key)))
    }

    /// Registers a client waiting on `keys` (in order). The caller then re-checks
    /// the keys and `signal`s any that hold elements: a push that ran before this
    /// registration found no waiter, so the re-check is what sees its element.
    pub fn block(
        &self,
        db: usize,
        keys: Vec<Bytes>,
        side: Side,
        deadline_ms: Option<u64>,
    ) -> Blocked {
        let (tx, rx) = oneshot::channel();
        let waiter = Arc::new(Waiter {
            db,
            keys,
            side,
            tx: Mutex::new(Some(tx)),
        });
        let mut reg = self.waiters.lock();
        for key in &waiter.keys {
            let queue = reg.entry((db, key.clone())).or_default();
            // BLPOP k k: one registration per key is enough.
            if !queue.iter().any(|w| Arc::ptr_eq(w, &waiter)) {
                queue.push_back(waiter.clone());
            }
        }
        self.blocked.fetch_add(1, Ordering::SeqCst);
        drop(reg);
        Blocked {
            waiter,
            rx,
            deadline_ms,
        }
    }

    /// Called after a push to `key` (its shard lock released): marks the key ready if
    /// someone waits on it.
    pub fn signal(&self, db: usize, key: &[u8]) {
        if self.blocked.load(Ordering::SeqCst) == 0 {
            return;
        }
        let key = (db, Bytes::copy_from_slice(key));
        if !self.waiters.lock().contains_key(&key) {
            return;
        }
        let mut ready = self.ready.lock();
        if !ready.contains(&key) {
            ready.push(key);
        }
        self.any_ready.store(true, Ordering::SeqCst);
    }

    /// Ends a wait from the waiting side (timeout, disconnect). Returns false when the
    /// waiter was served first: its element is then already in its channel.
    pub fn unblock(&self, waiter: &Arc<Waiter>) -> bool {
        let taken = waiter.tx.lock().take();
        if taken.is_none() {
            return false;
        }
        self.forget(waiter);
        true
    }

    fn forget(&self, waiter: &Arc<Waiter>) {
        let mut reg = self.waiters.lock();
        for key in &waiter.keys {
            let k = (waiter.db, key.clone());
            if let Some(queue) = reg.get_mut(&k) {
                queue.retain(|w| !Arc::ptr_eq(w, waiter));
                if queue.is_empty() {
                    reg.remove(&k);
                }
            }
        }
        drop(reg);
        self.blocked.fetch_sub(1, Ordering::SeqCst);
    }

    /// Serves waiters on every ready key, oldest waiter first, until the key is empty
    /// or nobody waits on it. Runs after a command, outside the keyspace gate; takes
    /// the gate's shared side so it never interleaves with a script.
    pub fn serve_ready(&self, shared: &Shared) {
        // Runs after every command: a plain load keeps the common case (nothing
        // ready) from writing a cache line that every connection shares.
        if !self.any_ready.load(Ordering::Relaxed) {
            return;
        }
        while self.any_ready.swap(false, Ordering::SeqCst) {
            let batch = std::mem::take(&mut *self.ready.lock());
            let _gate = shared.keyspace.gate.read();
            let now = shared.clock.now_ms();
            for (db, key) in batch {
                self.serve_key(shared, db, &key, now);
            }
        }
    }

    fn serve_key(&self, shared: &Shared, db_index: usize, key: &Bytes, now: u64) {
        let db = shared.keyspace.db(db_index);
        let Some(mut entry) = db.get_mut(key, now) else {
            return;
        };
        let Value::List(list) = &mut entry.value else {
            return;
        };
        while !list.is_empty() {
            let front = self
                .waiters
                .lock()
                .get(&(db_index, key.clone()))
                .and_then(|q| q.front().cloned());
            let Some(waiter) = front else {
                break;
            };
            let mut slot = waiter.tx.lock();
            let Some(tx) = slot.take() else {
                // Timed out or disconnected a moment ago; `unblock` removes it.
                drop(slot);
                self.drop_from_queue(db_index, key, &waiter);
                continue;
            };
            let value = match waiter.side {
                Side::Left => list.pop_front(),
                Side::Right => list.pop_back(),
            };
            // The list is non-empty (loop condition), so there is an element.
            let Some(value) = value else { break };
            if let Err(back) = tx.send(Served {
                key: key.clone(),
                value,
            }) {
                // The waiter's connection is gone: the element stays in the list.
                match waiter.side {
                    Side::Left => list.push_front(back.value),
                    Side::Right => list.push_back(back.value),
                }
            }
            drop(slot);
            self.forget(&waiter);
        }
        if list.is_empty() {
            drop(entry);
            if let Slot::Occupied(o) = db.entry(key, now) {
                if matches!(&o.get().value, Value::List(l) if l.is_empty()) {
                    o.remove();
                }
            }
        }
    }

    fn drop_from_queue(&self, db: usize, key: &Bytes, waiter: &Arc<Waiter>) {
        let mut reg = self.waiters.lock();
        let k = (db, key.clone());
        if let Some(queue) = reg.get_mut(&k) {
            queue.retain(|w| !Arc::ptr_eq(w, waiter));
            if queue.is_empty() {
                reg.remove(&k);
            }
        }
    }
}
