//! What a slot move carries (`cluster::migrate`): every live entry with whether it is
//! a lock, and the delayed locks (`store/lock.rs`), which read as absent but must go on
//! refusing new holders on the node that serves the slot next.

use super::Db;
use crate::store::ValueRef;

/// How an entry a move carries stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Carried {
    /// A live entry: its deadline, and whether it is a lock.
    Live {
        deadline_ms: Option<u64>,
        lock: bool,
    },
    /// A delayed lock: the milliseconds left of its delay (at least 1).
    Delayed { left_ms: u64 },
}

impl Db {
    /// Calls `f` with every entry a move must carry (see the module doc), one shard
    /// locked at a time.
    pub fn for_each_carried(&self, now_ms: u64, mut f: impl FnMut(&[u8], ValueRef<'_>, Carried)) {
        for shard in self.shards.iter() {
            let table = shard.0.read();
            for (_, p) in table.iter() {
                let how = if !p.is_expired(now_ms) {
                    Carried::Live {
                        deadline_ms: p.deadline_ms(),
                        lock: p.is_lock(),
                    }
                } else if self.delay.holds(&p, now_ms) {
                    match self.delay.ends_at(&p) {
                        Some(end) => Carried::Delayed {
                            left_ms: end - now_ms + 1,
                        },
                        None => continue,
                    }
                } else {
                    continue;
                };
                f(p.key(), p.value(), how);
            }
        }
    }
}

impl Db {
    /// Stores what a move carried to `key`, replacing whatever was there: a live entry
    /// (its deadline on this node's clock), marked as a lock if it was one; a delayed
    /// lock as a lock that expired just now, delayed for what was left of its delay,
    /// or less if this node's lock-delay is shorter (none if it is off here or does
    /// not apply to the key: this node's setting rules what it refuses).
    pub fn insert_carried(
        &self,
        key: &[u8],
        value: crate::store::Value,
        how: Carried,
        now_ms: u64,
    ) {
        self.remove(key, now_ms);
        let (deadline_ms, lock) = match how {
            Carried::Live { deadline_ms, lock } => (deadline_ms, lock),
            Carried::Delayed { left_ms } => {
                let ms = self.delay.ms();
                if ms == 0 || now_ms == 0 || !self.delay.applies_to(key) {
                    return;
                }
                let end = now_ms.saturating_add(left_ms - 1);
                (Some(end.saturating_sub(ms).min(now_ms - 1)), true)
            }
        };
        let entry = crate::store::Entry { value, deadline_ms };
        match self.entry(key, now_ms) {
            super::Slot::Vacant(v) => v.insert_marked(entry, lock),
            // Removed above, under no lock since: another write got there first, which
            // only a client of a slot this node does not serve yet could make.
            super::Slot::Occupied(r) => {
                drop(r);
                self.insert(key, entry);
            }
        }
    }
}
