//! What the store calls a lock, and the lock-delay (Chubby's lock-delay, Consul's
//! `lock-delay`): a lock whose TTL ran out is refused to new holders for a while.
//!
//! **A lock** is a key that a *conditional* write created or kept with a TTL: SET ... NX
//! or SET ... IFEQ/IFNE/IFDEQ/IFDNE with EX/PX/EXAT/PXAT, FENCING.GRANT, and any
//! command run by a script (EVAL, EVALSHA, FCALL) that leaves the key with a TTL
//! (SET ... PX, PEXPIRE after HINCRBY: node-redlock, Redisson). It is the `LOCK` bit of
//! the key's packed entry (`packed.rs`, a spare bit of the tag byte: 0 bytes per lock).
//! An unconditional rewrite (SET without a condition outside a script, and every
//! command that replaces the whole entry: MSET, RENAME's destination, RESTORE...) and
//! PERSIST clear it; changes in place (APPEND, HINCRBY on the existing hash, EXPIRE
//! outside a script) keep it. So a cache or rate-limit key written with `SET k v EX 10`
//! or `INCR` + `EXPIRE` outside a script is never a lock. A script that writes a key
//! with a TTL makes a lock even when it is a rate limiter: that is what
//! `--lock-delay-prefix` is for. Lock introspection (LOCKS, `commands::families::locks`)
//! lists the keys with the bit, and the store reports their expiry to it
//! (`events::LOCK_EXPIRED`).
//!
//! **Delayed**: a lock whose deadline has passed on the node's clock, while the
//! lock-delay is on and the key matches one of `--lock-delay-prefix` (any key when
//! none is set), stays stored until its deadline plus the delay. Meanwhile it reads as
//! absent and every write that could take it is refused (`commands::check_lock_delay`).
//! A lock that is released (DEL, UNLINK, DELIFEQ, DELEX, a compare-and-delete script)
//! is gone at once, as before; DEL / UNLINK of a delayed key end its delay.

use bytes::Bytes;
use parking_lot::RwLock;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::packed::Packed;

/// The lock-delay in force: its length and the key prefixes it applies to. One per
/// keyspace, shared by its databases; CONFIG SET changes it live.
#[derive(Debug, Default)]
pub struct LockDelay {
    /// Milliseconds; 0 is off.
    ms: AtomicU64,
    /// The prefixes a key must start with to be delayed; empty: every lock.
    prefixes: RwLock<Vec<Bytes>>,
}

impl LockDelay {
    /// Sets the delay (0: off) and the prefixes it applies to (empty: every lock).
    pub fn set(&self, ms: u64, prefixes: Vec<Bytes>) {
        self.set_prefixes(prefixes);
        self.set_ms(ms);
    }

    pub fn set_ms(&self, ms: u64) {
        self.ms.store(ms, Relaxed);
    }

    pub fn set_prefixes(&self, prefixes: Vec<Bytes>) {
        *self.prefixes.write() = prefixes;
    }

    /// The delay in milliseconds (0: off).
    pub fn ms(&self) -> u64 {
        self.ms.load(Relaxed)
    }

    pub fn prefixes(&self) -> Vec<Bytes> {
        self.prefixes.read().clone()
    }

    /// Whether the delay applies to `key` (whatever its state).
    pub fn applies_to(&self, key: &[u8]) -> bool {
        let prefixes = self.prefixes.read();
        prefixes.is_empty() || prefixes.iter().any(|p| key.starts_with(p))
    }

    /// When the entry's delay ends (the last millisecond it is refused), if it is a
    /// lock the delay applies to.
    pub(super) fn ends_at(&self, p: &Packed) -> Option<u64> {
        let ms = self.ms();
        if ms == 0 || !p.is_lock() {
            return None;
        }
        let deadline = p.deadline_ms()?;
        self.applies_to(p.key())
            .then(|| deadline.saturating_add(ms))
    }

    /// Whether the entry is a delayed lock at `now_ms`: expired, and its delay not over.
    pub(super) fn holds(&self, p: &Packed, now_ms: u64) -> bool {
        p.is_expired(now_ms) && self.ends_at(p).is_some_and(|end| now_ms <= end)
    }

    /// Whether the entry is gone at `now_ms`: expired and not delayed (what lazy and
    /// active expiry remove).
    pub(super) fn reclaimable(&self, p: &Packed, now_ms: u64) -> bool {
        p.is_expired(now_ms) && !self.holds(p, now_ms)
    }
}
