//! Clients blocked in BLPOP / BRPOP / BLMPOP / BLMOVE / BZPOPMIN / BZPOPMAX / BZMPOP,
//! and how a write reaches them.
//!
//! As in Redis, a push never hands an element over itself: it marks its key "ready"
//! (only when someone waits on that key), and once the command (or the whole script)
//! has finished, `serve_ready_held` gives the waiting clients their elements in FIFO order.
//! A script that pushes therefore wakes its waiters after it ends, as Redis does.
//!
//! The server pops on the waiter's behalf and sends the reply through a oneshot
//! channel, so an element is never seen by anyone else between the pop and the
//! hand-over. A waiter whose connection has gone (the send fails) gets nothing: the
//! element goes back where it came from and the next waiter is served.
//!
//! Lock order: the keyspace gate, a key's shard lock, then a waiter's sender lock, then
//! the registry. `signal` runs after the writing command has released the key's shard
//! lock.

use crate::commands::notify;
use crate::commands::{CmdResult, Ctx};

use crate::commands::families::typed::{self, Collection};
use crate::commands::families::{lists, stream_reads, zsets};

use crate::node::Shared;
use crate::protocol::{errors, Reply};
use crate::store::{Entry, Slot, Value, ValueMut, ValueRef};
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::oneshot;

/// Which end of a list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Left,
    Right,
}

/// What a blocked command takes once its key has something.
#[derive(Clone, Debug, PartialEq)]
pub enum Pop {
    /// BLPOP / BRPOP (`count` None: one element, replied `[key, element]`) or BLMPOP
    /// (up to `count`, replied `[key, [element...]]`), from this end of a list.
    List { side: Side, count: Option<usize> },
    /// BZPOPMIN / BZPOPMAX (`count` None: `[key, member, score]`) or BZMPOP (up to
    /// `count`, `[key, [[member, score]...]]`): the lowest (or highest) members of a
    /// sorted set.
    ZSet { max: bool, count: Option<usize> },
    /// BLMOVE / BRPOPLPUSH: an element from `from` of the list, pushed at `to` of `dst`.
    Move { from: Side, to: Side, dst: Bytes },
    /// XREAD / XREADGROUP BLOCK: entries after an ID of each key (`streams`).
    Stream(Box<StreamRead>),
}

/// What a client blocked in XREAD / XREADGROUP waits for.
#[derive(Clone, Debug, PartialEq)]
pub struct StreamRead {
    /// Per key (in the waiter's key order): after which ID, or the group's new entries.
    pub from: Vec<stream_reads::ReadFrom>,
    /// XREADGROUP's group, consumer and NOACK.
    pub group: Option<(Bytes, Bytes, bool)>,
    /// COUNT (1000 when not given, as Redis caps a blocked read).
    pub count: usize,
    pub resp3: bool,
}

impl Pop {
    /// Whether this waiter can be served from `value`.
    fn serves(&self, value: ValueRef<'_>) -> bool {
        matches!(
            (self, value),
            (Pop::List { .. } | Pop::Move { .. }, ValueRef::List(_))
                | (Pop::ZSet { .. }, ValueRef::ZSet(_))
        )
    }
}

/// One blocked client, registered under each of its keys.
pub struct Waiter {
    db: usize,
    keys: Vec<Bytes>,
    pop: Pop,
    /// Taken by whoever ends the wait first: `serve_ready_held` (sending the element while
    /// holding this lock) or `unblock` (timeout, disconnect). Whoever takes it removes
    /// the waiter from the registry, so each waiter is removed and counted once.
    tx: Mutex<Option<oneshot::Sender<Reply>>>,
}

/// What a blocking command leaves in `ClientState::blocked` for the connection to wait
/// on: the reply arrives through `rx`.
pub struct Blocked {
    pub waiter: Arc<Waiter>,
    pub rx: oneshot::Receiver<Reply>,
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
    /// Of those, the ones in XREAD / XREADGROUP: while there are any, every write
    /// marks its keys ready (`signal_write`), since a deleted or replaced stream, a
    /// RENAME onto a waited key or a destroyed group changes what they get.
    stream_waiters: AtomicUsize,
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
        pop: Pop,
        deadline_ms: Option<u64>,
    ) -> Blocked {
        let (tx, rx) = oneshot::channel();
        let waiter = Arc::new(Waiter {
            db,
            keys,
            pop,
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
        if matches!(waiter.pop, Pop::Stream(_)) {
            self.stream_waiters.fetch_add(1, Ordering::SeqCst);
        }
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
        if matches!(waiter.pop, Pop::Stream(_)) {
            self.stream_waiters.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// After a write command while clients wait in XREAD / XREADGROUP: marks the
    /// command's keys ready (or, for a write without keys such as FLUSHALL, every key
    /// a stream reader waits on), so a group reader whose key went away is answered
    /// as Redis answers it. One atomic load when nobody waits on a stream.
    pub fn signal_write(&self, db: usize, keys: impl Iterator<Item = Bytes>) {
        if self.stream_waiters.load(Ordering::SeqCst) == 0 {
            return;
        }
        let mut any = false;
        for key in keys {
            any = true;
            self.signal(db, &key);
        }
        if any {
            return;
        }
        let waited: Vec<KeyRef> = self
            .waiters
            .lock()
            .iter()
            .filter(|(_, q)| q.iter().any(|w| matches!(w.pop, Pop::Stream(_))))
            .map(|(k, _)| k.clone())
            .collect();
        let mut ready = self.ready.lock();
        for key in waited {
            if !ready.contains(&key) {
                ready.push(key);
            }
        }
        self.any_ready.store(true, Ordering::SeqCst);
    }

    /// Serves the XREAD / XREADGROUP waiters on `key`, oldest first: each gets the
    /// entries past its ID (or its group's last delivered one), or an error when its
    /// group or stream went away; the others keep waiting.
    fn serve_stream_key(&self, shared: &Shared, db_index: usize, key: &Bytes, now: u64) {
        let waiters: Vec<Arc<Waiter>> = match self.waiters.lock().get(&(db_index, key.clone())) {
            Some(q) => q
                .iter()
                .filter(|w| matches!(w.pop, Pop::Stream(_)))
                .cloned()
                .collect(),
            None => return,
        };
        let db = shared.keyspace.db(db_index);
        let unix = shared.clock.mono_to_wall(now);
        for waiter in waiters {
            let Pop::Stream(read) = &waiter.pop else {
                continue;
            };
            let Some(at) = waiter.keys.iter().position(|k| k == key) else {
                continue;
            };
            let mut tx = waiter.tx.lock();
            if tx.is_none() {
                continue;
            }
            let Some((reply, created)) = stream_reads::serve_blocked(db, key, read, at, now, unix)
            else {
                continue;
            };
            if created {
                let event = "xgroup-createconsumer";
                notify::notify_db(shared, db_index, notify::STREAM, event, key);
            }
            let tx = tx.take().expect("checked above");
            self.forget(&waiter);
            if let Some((group, consumer, _)) = &read.group {
                // The group's delivery, in the append-only log.
                let log = crate::durability::aof::propagate::log_group_read;
                log(shared, db_index, key, group, consumer, created, &reply);
            }
            // A reader whose connection went away has nothing to give back: entries
            // a group read assigned stay pending for its consumer, as after a reply
            // that reached a client which then died.
            let _ = tx.send(reply);
        }
    }

    /// Whether a write has made keys ready for blocked clients (checked after every
    /// command, so a plain load).
    pub fn has_ready(&self) -> bool {
        self.any_ready.load(Ordering::SeqCst)
    }

    /// Serves waiters on every ready key, oldest waiter first, until the key has
    /// nothing for them or nobody waits on it. The caller holds the keyspace gate
    /// exclusively (`gate::serve_blocked`), so that a move (BLMOVE) between two keys
    /// is seen by nobody half done, and nothing interleaves with a script.
    pub fn serve_ready_held(&self, shared: &Shared) {
        while self.any_ready.swap(false, Ordering::SeqCst) {
            let batch = std::mem::take(&mut *self.ready.lock());
            let now = shared.clock.now_ms();
            for (db, key) in batch {
                self.serve_key(shared, db, &key, now);
            }
        }
    }

    /// The oldest waiter on `key` that its current value can serve.
    fn first_servable(&self, db: usize, key: &Bytes, value: ValueRef<'_>) -> Option<Arc<Waiter>> {
        let reg = self.waiters.lock();
        let queue = reg.get(&(db, key.clone()))?;
        queue.iter().find(|w| w.pop.serves(value)).cloned()
    }

    fn serve_key(&self, shared: &Shared, db_index: usize, key: &Bytes, now: u64) {
        if self.stream_waiters.load(Ordering::SeqCst) > 0 {
            self.serve_stream_key(shared, db_index, key, now);
        }
        let db = shared.keyspace.db(db_index);
        loop {
            let Some(entry) = db.get(key, now) else {
                return;
            };
            let waiter = self.first_servable(db_index, key, entry.value());
            drop(entry);
            let Some(waiter) = waiter else {
                return;
            };
            // The gate is held exclusively and the value can serve this waiter, so
            // there is something to take.
            let Some((reply, undo)) = take_for(db, key, &waiter.pop, now) else {
                return;
            };
            let taken = waiter.tx.lock().take();
            let Some(tx) = taken else {
                // Timed out or disconnected a moment ago; `unblock` removes it.
                undo(db, now);
                self.drop_from_queue(db_index, key, &waiter);
                continue;
            };
            self.forget(&waiter);
            if tx.send(reply).is_err() {
                // The waiter's connection is gone: the element goes back.
                undo(db, now);
            } else {
                if let Pop::Move { dst, .. } = &waiter.pop {
                    // The moved element may be what a waiter on `dst` waits for.
                    self.signal(db_index, dst);
                    crate::durability::aof::propagate::log_key_states(
                        shared,
                        db_index,
                        &[key, dst],
                    );
                } else {
                    crate::durability::aof::propagate::log_key_states(shared, db_index, &[key]);
                }
                notify_served(shared, db_index, key, &waiter.pop, now);
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

/// Puts an element back (or removes a moved one) when its waiter has gone.
type Undo = Box<dyn FnOnce(&crate::store::Db, u64)>;

/// Pops up to `count` elements from `side` of the list at `key` (none when it is not a
/// list), removing the key when it empties.
fn pop_list(db: &crate::store::Db, key: &[u8], side: Side, count: usize, now: u64) -> Vec<Bytes> {
    let Slot::Occupied(mut e) = db.entry(key, now) else {
        return Vec::new();
    };
    let ValueMut::List(list) = e.value_mut() else {
        return Vec::new();
    };
    let popped = lists::pop_many(list, side, count);
    if list.is_empty() {
        e.remove();
    }
    popped
}

/// Pops up to `count` of the lowest (or highest) members of the sorted set at `key`
/// (none when it is not a sorted set), removing the key when it empties.
fn pop_zset(
    db: &crate::store::Db,
    key: &[u8],
    max: bool,
    count: usize,
    now: u64,
) -> Vec<(Vec<u8>, f64)> {
    let Slot::Occupied(mut e) = db.entry(key, now) else {
        return Vec::new();
    };
    let ValueMut::ZSet(z) = e.value_mut() else {
        return Vec::new();
    };
    let popped = zsets::pop_many(z, max, count);
    if z.is_empty() {
        e.remove();
    }
    popped
}

/// Pushes `value` at `side` of the list at `key`, creating it; false (nothing done)
/// when `key` holds another type.
fn push_list(db: &crate::store::Db, key: &[u8], side: Side, value: Bytes, now: u64) -> bool {
    match db.entry(key, now) {
        Slot::Occupied(mut e) => {
            let ValueMut::List(list) = e.value_mut() else {
                return false;
            };
            match side {
                Side::Left => list.push_front(value),
                Side::Right => list.push_back(value),
            }
        }
        Slot::Vacant(v) => {
            v.insert(Entry::new(Value::List(VecDeque::from([value]))));
        }
    }
    true
}

/// The keyspace event (class, name) of a list or sorted-set pop.
fn pop_event(pop: &Pop) -> Option<(u32, &'static str)> {
    use crate::commands::notify as nt;
    match pop {
        Pop::List {
            side: Side::Left, ..
        } => Some((nt::LIST, "lpop")),
        Pop::List {
            side: Side::Right, ..
        } => Some((nt::LIST, "rpop")),
        Pop::ZSet { max: true, .. } => Some((nt::ZSET, "zpopmax")),
        Pop::ZSet { max: false, .. } => Some((nt::ZSET, "zpopmin")),
        Pop::Move { .. } | Pop::Stream(_) => None,
    }
}

/// The keyspace events of a served waiter, in Redis's order: a move's push, the pop,
/// and `del` when the key went.
fn notify_served(shared: &Shared, db: usize, key: &Bytes, pop: &Pop, now: u64) {
    use crate::commands::notify::{self as nt, notify_db};
    let side_event = |side: &Side, left: &'static str, right: &'static str| match side {
        Side::Left => left,
        Side::Right => right,
    };
    match pop {
        Pop::Move { from, to, dst } => {
            notify_db(shared, db, nt::LIST, side_event(to, "lpush", "rpush"), dst);
            notify_db(shared, db, nt::LIST, side_event(from, "lpop", "rpop"), key);
        }
        Pop::Stream(_) => return,
        _ => {
            if let Some((class, event)) = pop_event(pop) {
                notify_db(shared, db, class, event, key);
            }
        }
    }
    if shared.notify.flags() & nt::GENERIC != 0 && shared.keyspace.db(db).peek(key, now).is_none() {
        notify_db(shared, db, nt::GENERIC, "del", key);
    }
}

/// Takes what `pop` wants from `key` (holding the gate exclusively): the waiter's
/// reply and how to undo it. `None` when the key has nothing for it.
fn take_for(db: &crate::store::Db, key: &Bytes, pop: &Pop, now: u64) -> Option<(Reply, Undo)> {
    match pop {
        Pop::List { side, count } => {
            let side = *side;
            let popped = pop_list(db, key, side, count.unwrap_or(1), now);
            if popped.is_empty() {
                return None;
            }
            let reply = lists::keyed_reply(key, popped.clone(), count.is_some());
            let key = key.clone();
            // Back in the order they were: the last one popped goes back first.
            let undo: Undo = Box::new(move |db, now| {
                for value in popped.into_iter().rev() {
                    push_list(db, &key, side, value, now);
                }
            });
            Some((reply, undo))
        }
        Pop::ZSet { max, count } => {
            let popped = pop_zset(db, key, *max, count.unwrap_or(1), now);
            if popped.is_empty() {
                return None;
            }
            let reply = zsets::keyed_reply(key, popped.clone(), count.is_some());
            let key = key.clone();
            let undo: Undo = Box::new(move |db, now| match db.entry(&key, now) {
                Slot::Occupied(mut e) => {
                    if let ValueMut::ZSet(z) = e.value_mut() {
                        for (member, score) in &popped {
                            z.insert(member, *score);
                        }
                    }
                }
                Slot::Vacant(v) => {
                    let mut z = crate::store::ZSet::new();
                    for (member, score) in &popped {
                        z.insert(member, *score);
                    }
                    v.insert(Entry::new(Value::ZSet(Box::new(z))));
                }
            });
            Some((reply, undo))
        }
        Pop::Stream(_) => None,
        Pop::Move { from, to, dst } => {
            let noop: Undo = Box::new(|_, _| {});
            if db
                .get(dst, now)
                .is_some_and(|e| !matches!(e.value(), ValueRef::List(_)))
            {
                // As Redis: the waiter gets WRONGTYPE and the element stays.
                return Some((errors::wrongtype(), noop));
            }
            let value = pop_list(db, key, *from, 1, now).pop()?;
            push_list(db, dst, *to, value.clone(), now);
            let (src, dst, from, to) = (key.clone(), dst.clone(), *from, *to);
            let undo: Undo = Box::new(move |db, now| {
                if let Some(v) = pop_list(db, &dst, to, 1, now).pop() {
                    push_list(db, &src, from, v, now);
                }
            });
            Some((Reply::Bulk(value), undo))
        }
    }
}

/// The blocking pops' one body (BLPOP, BRPOP, BLMPOP, BZPOPMIN, BZPOPMAX, BZMPOP):
/// pops up to `count` (one when `None`) with `pop_n` from the first key that exists
/// and replies `keyed(key, popped, nested)`, nested when a count was given; else
/// blocks as `pop_or_block` does, and a transaction or script gets a null array.
pub fn blocking_pop<C: Collection, P>(
    ctx: &mut Ctx,
    keys: &[Bytes],
    pop: Pop,
    count: Option<usize>,
    timeout_ms: u64,
    pop_n: impl Fn(&mut C, usize) -> P,
    keyed: impl Fn(&Bytes, P, bool) -> Reply,
) -> CmdResult {
    let (class, event) = pop_event(&pop).expect("a list or sorted-set pop");
    pop_or_block(
        ctx,
        keys,
        pop,
        timeout_ms,
        Reply::NullArray,
        |ctx, key, take| {
            if !take {
                return typed::read(ctx, key, |_: &C| ()).map(|_| None);
            }
            let popped = typed::modify_notify(ctx, key, class, |c: &mut C| {
                (pop_n(c, count.unwrap_or(1)), Some(event))
            })?;
            Ok(popped.map(|popped| keyed(key, popped, count.is_some())))
        },
    )
}

/// The shared body of every blocking pop: try each key in order (a key someone
/// already waits on is only type-checked, so the newcomer queues behind them, FIFO);
/// inside a script or transaction answer `nonblocking` instead of blocking; else
/// register the wait (the connection sends the reply when it ends).
///
/// `try_pop(ctx, key, take)` type-checks `key` and, when `take`, pops from it.
pub fn pop_or_block(
    ctx: &mut Ctx,
    keys: &[Bytes],
    pop: Pop,
    timeout_ms: u64,
    nonblocking: Reply,
    mut try_pop: impl FnMut(&Ctx, &Bytes, bool) -> Result<Option<Reply>, Reply>,
) -> CmdResult {
    let db = ctx.client.db;
    for key in keys {
        let queued = ctx.may_block() && ctx.shared.blocking.has_waiters(db, key);
        if let Some(reply) = try_pop(ctx, key, !queued)? {
            return Ok(reply);
        }
    }
    if !ctx.may_block() {
        return Ok(nonblocking);
    }
    let deadline = (timeout_ms > 0).then(|| ctx.now_ms.saturating_add(timeout_ms));
    let owned = keys.iter().map(|k| Bytes::copy_from_slice(k)).collect();
    let blocked = ctx.shared.blocking.block(db, owned, pop, deadline);
    // A write that ran before the registration found nobody waiting: look again.
    for key in keys {
        ctx.shared.blocking.signal(db, key);
    }
    ctx.client.blocked = Some(blocked);
    // Not sent: the connection replies when the wait ends.
    Ok(Reply::NullArray)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Db, ZSet};

    fn list(db: &Db, key: &[u8]) -> Vec<Bytes> {
        match db.get(key, 0).as_ref().map(|e| e.value()) {
            Some(ValueRef::List(l)) => l.iter().cloned().collect(),
            _ => Vec::new(),
        }
    }

    fn zset(db: &Db, key: &[u8]) -> Vec<(Vec<u8>, f64)> {
        match db.get(key, 0).as_ref().map(|e| e.value()) {
            Some(ValueRef::ZSet(z)) => z.iter().map(|(m, s)| (m.to_vec(), s)).collect(),
            _ => Vec::new(),
        }
    }

    /// A served waiter whose connection has gone gets its elements put back where
    /// they were, in their order (BLMPOP's several at either end).
    #[test]
    fn undoing_a_counted_list_pop_restores_the_list() {
        let db = Db::new(1);
        let items: Vec<Bytes> = [&b"a"[..], b"b", b"c", b"d"]
            .map(Bytes::from_static)
            .to_vec();
        db.insert(
            b"q",
            Entry::new(Value::List(items.iter().cloned().collect())),
        );
        let key = Bytes::from_static(b"q");
        for side in [Side::Left, Side::Right] {
            let pop = Pop::List {
                side,
                count: Some(3),
            };
            let (reply, undo) = take_for(&db, &key, &pop, 0).expect("elements");
            let taken = if side == Side::Left {
                ["a", "b", "c"]
            } else {
                ["d", "c", "b"]
            };
            let taken = taken.map(|v| Reply::Bulk(Bytes::from_static(v.as_bytes())));
            let want = Reply::Array(vec![Reply::Bulk(key.clone()), Reply::Array(taken.to_vec())]);
            assert_eq!(reply, want);
            assert_eq!(list(&db, b"q").len(), 1);
            undo(&db, 0);
            assert_eq!(list(&db, b"q"), items);
        }
        // All of it taken: the key goes, and comes back whole.
        let pop = Pop::List {
            side: Side::Right,
            count: Some(9),
        };
        let (_, undo) = take_for(&db, &key, &pop, 0).expect("elements");
        assert!(db.get(b"q", 0).is_none());
        undo(&db, 0);
        assert_eq!(list(&db, b"q"), items);
    }

    #[test]
    fn undoing_a_counted_zset_pop_restores_the_set() {
        let db = Db::new(1);
        let mut z = ZSet::new();
        for (m, s) in [("a", 1.0), ("b", 2.0), ("c", 3.0)] {
            z.insert(m.as_bytes(), s);
        }
        db.insert(b"z", Entry::new(Value::ZSet(Box::new(z))));
        let before = zset(&db, b"z");
        let key = Bytes::from_static(b"z");
        for count in [Some(2), Some(5), None] {
            let pop = Pop::ZSet { max: true, count };
            let (_, undo) = take_for(&db, &key, &pop, 0).expect("members");
            assert_ne!(zset(&db, b"z"), before);
            undo(&db, 0);
            assert_eq!(zset(&db, b"z"), before);
        }
    }
}
