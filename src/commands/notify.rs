//! Keyspace notifications (Redis's notify.c): with `notify-keyspace-events` set, a
//! command that changes a key publishes `__keyspace@<db>__:<key>` (the event name as
//! the message, class `K`) and `__keyevent@<db>__:<event>` (the key as the message,
//! class `E`) through the node's pub/sub, with Redis 7.0's event names, classes and
//! order. Each handler calls `notify` where Redis calls notifyKeyspaceEvent; a call
//! whose class is not wanted (every call, by default) costs one atomic load.
//!
//! `expired` (lazy expiry and the sweeper) and `new` are seen by the store
//! (`store::events`) and published here, before the next event of the command that
//! caused them and at the latest after it (`flush`) or after the sweep. `evicted`
//! never happens: nothing is evicted. `keymiss` (class `m`) is sent after a read-only
//! command for each of its keys that is absent (Redis sends it from every read lookup
//! that misses, which for a read-only command names the same keys); a write command
//! that reads a key first (SET ... GET, GETDEL, the STORE forms' sources) sends it
//! itself as it reads, before its own events (`key_miss`).
//!
//! Subscribing to these channels passes the ACL channel check like any SUBSCRIBE;
//! delivery, as in Redis, is to whoever holds the subscription. In cluster mode each
//! node publishes its own keys' events to its own subscribers.

use crate::commands::Ctx;
use crate::node::Shared;
use crate::store::events;
use bytes::Bytes;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

/// `K`: `__keyspace@<db>__:<key>` channels.
pub const KEYSPACE: u32 = 1;
/// `E`: `__keyevent@<db>__:<event>` channels.
pub const KEYEVENT: u32 = 1 << 1;
/// `g`: generic commands (DEL, EXPIRE, RENAME...).
pub const GENERIC: u32 = 1 << 2;
/// `$`: strings.
pub const STRING: u32 = 1 << 3;
/// `l`: lists.
pub const LIST: u32 = 1 << 4;
/// `s`: sets.
pub const SET: u32 = 1 << 5;
/// `h`: hashes.
pub const HASH: u32 = 1 << 6;
/// `z`: sorted sets.
pub const ZSET: u32 = 1 << 7;
/// `x`: expired keys.
pub const EXPIRED: u32 = 1 << 8;
/// `e`: evicted keys (never: nothing is evicted).
pub const EVICTED: u32 = 1 << 9;
/// `t`: streams.
pub const STREAM: u32 = 1 << 10;
/// `m`: key misses (not in `A`).
pub const KEY_MISS: u32 = 1 << 11;
/// `d`: module events (no module sends any).
pub const MODULE: u32 = 1 << 13;
/// `n`: new keys (not in `A`).
pub const NEW: u32 = 1 << 14;
/// `A`: every class but `m` and `n`.
pub const ALL: u32 =
    GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// The class characters of `notify-keyspace-events` but `A`, `K`, `E` and `m`, in the
/// order keyspaceEventsFlagsToString prints them.
const CLASSES: &[(char, u32)] = &[
    ('g', GENERIC),
    ('$', STRING),
    ('l', LIST),
    ('s', SET),
    ('h', HASH),
    ('z', ZSET),
    ('x', EXPIRED),
    ('e', EVICTED),
    ('t', STREAM),
    ('d', MODULE),
    ('n', NEW),
];

/// keyspaceEventsStringToFlags: `None` for a character that is no class.
pub fn parse(text: &str) -> Option<u32> {
    text.chars().try_fold(0, |flags, c| {
        Some(
            flags
                | match c {
                    'A' => ALL,
                    'K' => KEYSPACE,
                    'E' => KEYEVENT,
                    'm' => KEY_MISS,
                    _ => CLASSES.iter().find(|(ch, _)| *ch == c)?.1,
                },
        )
    })
}

/// keyspaceEventsFlagsToString: what CONFIG GET shows (with `A`, Redis 7.0 prints no
/// `n` either).
pub fn text(flags: u32) -> String {
    let mut out = String::new();
    if flags & ALL == ALL {
        out.push('A');
    } else {
        for (c, bit) in CLASSES {
            if flags & bit != 0 {
                out.push(*c);
            }
        }
    }
    for (bit, c) in [(KEYSPACE, 'K'), (KEYEVENT, 'E'), (KEY_MISS, 'm')] {
        if flags & bit != 0 {
            out.push(c);
        }
    }
    out
}

/// The node's `notify-keyspace-events`, as notify.c's bits.
#[derive(Default)]
pub struct Notify {
    flags: AtomicU32,
}

impl Notify {
    /// The classes wanted now (0: off).
    #[inline]
    pub fn flags(&self) -> u32 {
        self.flags.load(Relaxed)
    }
}

/// Sets the node's classes, and which events the store reports (`store::events`).
pub fn configure(shared: &Shared, flags: u32) {
    shared.notify.flags.store(flags, Relaxed);
    want_store_events(shared);
}

/// Tells the store which events to report: those the classes deliver, and expired
/// locks while lock introspection is on (`families::locks`).
pub fn want_store_events(shared: &Shared) {
    let flags = shared.notify.flags();
    let delivered = flags & (KEYSPACE | KEYEVENT) != 0;
    let mut kinds = 0;
    if delivered && flags & EXPIRED != 0 {
        kinds |= events::EXPIRED;
    }
    if delivered && flags & NEW != 0 {
        kinds |= events::NEW;
    }
    if shared.locks.on() {
        kinds |= events::LOCK_EXPIRED;
    }
    shared.keyspace.events().want(kinds);
}

/// notifyKeyspaceEvent for the caller's database.
#[inline]
pub fn notify(ctx: &Ctx, class: u32, event: &'static str, key: &[u8]) {
    notify_db(ctx.shared, ctx.client.db, class, event, key);
}

/// notifyKeyspaceEvent for database `db`: one atomic load unless `class` is wanted.
#[inline]
pub fn notify_db(shared: &Shared, db: usize, class: u32, event: &'static str, key: &[u8]) {
    let flags = shared.notify.flags();
    if flags & class != 0 {
        publish_now(shared, flags, db, event, key);
    }
}

#[cold]
fn publish_now(shared: &Shared, flags: u32, db: usize, event: &str, key: &[u8]) {
    flush(shared);
    publish(shared, flags, db, event, key);
}

/// Publishes the store's waiting `expired` and `new` events, and hands expired locks
/// to lock introspection (one load when none).
#[inline]
pub fn flush(shared: &Shared) {
    if shared.keyspace.events().pending() {
        flush_store(shared);
    }
}

#[cold]
fn flush_store(shared: &Shared) {
    let flags = shared.notify.flags();
    for e in shared.keyspace.events().take() {
        if e.kind & events::EXPIRED != 0 && flags & EXPIRED != 0 {
            publish(shared, flags, e.db, "expired", &e.key);
        }
        if e.kind & events::NEW != 0 && flags & NEW != 0 {
            publish(shared, flags, e.db, "new", &e.key);
        }
        if e.kind & events::LOCK_EXPIRED != 0 {
            crate::commands::families::locks::expired(shared, e.db, e.key);
        }
    }
}

/// `keymiss` for each absent key of a read-only command (class `m`), after it ran.
pub fn key_misses<'a>(ctx: &Ctx, keys: impl Iterator<Item = &'a Bytes>) {
    let db = ctx.db();
    for key in keys {
        if db.peek(key, ctx.now_ms).is_none() {
            notify(ctx, KEY_MISS, "keymiss", key);
        }
    }
}

/// `keymiss` for `key`, which a write command read and found absent (SET ... GET,
/// GETEX, GETDEL, COPY's source), where Redis's lookupKeyRead sends it.
#[inline]
pub fn key_miss(ctx: &Ctx, key: &[u8]) {
    notify(ctx, KEY_MISS, "keymiss", key);
}

/// The two messages of one event, as notify.c sends them: keyspace first.
fn publish(shared: &Shared, flags: u32, db: usize, event: &str, key: &[u8]) {
    let limit = shared.config.pubsub_output_limit;
    if flags & KEYSPACE != 0 {
        let mut channel = format!("__keyspace@{db}__:").into_bytes();
        channel.extend_from_slice(key);
        let payload = Bytes::copy_from_slice(event.as_bytes());
        shared
            .pubsub
            .publish(&Bytes::from(channel), &payload, limit);
    }
    if flags & KEYEVENT != 0 {
        let channel = Bytes::from(format!("__keyevent@{db}__:{event}"));
        let payload = Bytes::copy_from_slice(key);
        shared.pubsub.publish(&channel, &payload, limit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_print_as_redis_prints_them() {
        assert_eq!(text(parse("KEA").unwrap()), "AKE");
        assert_eq!(text(parse("Egx$").unwrap()), "g$xE");
        assert_eq!(text(parse("KEAmn").unwrap()), "AKEm");
        assert_eq!(text(parse("Kn").unwrap()), "nK");
        assert_eq!(parse(""), Some(0));
        assert_eq!(parse("Kq"), None);
    }
}
