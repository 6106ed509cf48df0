//! Lock introspection: LOCKS LIST / LOCKS INFO, and the side table behind them.
//!
//! What a lock is, is the store's: a key with the `LOCK` bit (`store/lock.rs`: created
//! or kept with a TTL by a conditional write, SET NX / IFEQ, FENCING.GRANT, or by a
//! script). LOCKS LIST and INFO read the keyspace for those; what the keyspace does not
//! keep (who took the lock, when, how often it was extended, how many were refused it)
//! is in `Locks`, a side table with one entry per lock granted while introspection is
//! on (`lock-introspection`, off by default: it costs ~130 bytes per lock and a third of
//! a pipelined SET NX PX's CPU; CONFIG SET it live). Keys that are not locks have
//! no entry and cost nothing; while it is off, every hook is one atomic load.
//!
//! The table is `SHARDS` hashbrown tables, each behind its own mutex, picked by the
//! key's hash (SipHash-1-3 with a random key, as the keyspace's shard tables hash:
//! `store/siphash.rs`), so a grant on one thread seldom waits for another, and a
//! table's growth moves a 64th of the records. An entry (`Holder`, 56 bytes in its
//! slot) is one heap block of the database's number, the key and the token, the
//! holder's `ClientInfo` (shared with the client registry: name, address and user
//! are read when listed, and stay readable after the client left), the grant's wall
//! time, the deadline, and two counters: ~130 bytes plus the key's and token's lengths
//! per lock (docs/operations.md, "Seeing the locks"). Lookups hash the key where it
//! is: nothing is allocated but the record of a new grant.
//!
//! Counted here (INFO `locks`, the metrics): locks released by a command (DEL, UNLINK,
//! DELIFEQ, DELEX, a release script's DEL), extensions (a lock's TTL set again: SET
//! IFEQ ... PX, a script's PEXPIRE), locks that expired while held (never released),
//! and overruns: a release that carries the token of a lock that had already expired
//! (DELIFEQ / DELEX IFEQ, or a script given the token as an argument, naming the key):
//! its holder kept working past its TTL, which only the server can see. The last 1024
//! expired locks' tokens are kept for that.

use crate::commands::{eq_ignore_case, int_arg, CmdResult, Ctx, Spec};
use crate::glob;
use crate::node::{ClientInfo, Shared};
use crate::protocol::{errors, Reply};
use crate::store::siphash::siphash;
use bytes::Bytes;
use hashbrown::hash_table::{Entry, HashTable};
use parking_lot::{Mutex, MutexGuard};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// How many expired locks' tokens are kept to recognise a late release.
const RECENT: usize = 1024;

/// How many tables the side table is cut into (a power of two).
const SHARDS: usize = 64;

/// A lock's bytes in one heap block: the database's number (4 bytes, little-endian),
/// the key, then the token.
struct LockBytes {
    bytes: Box<[u8]>,
    /// Where the token starts in `bytes`.
    token_at: u32,
}

impl LockBytes {
    fn new(db: usize, key: &[u8], token: &[u8]) -> LockBytes {
        let mut b = Vec::with_capacity(4 + key.len() + token.len());
        b.extend_from_slice(&(db as u32).to_le_bytes());
        b.extend_from_slice(key);
        b.extend_from_slice(token);
        LockBytes {
            bytes: b.into_boxed_slice(),
            token_at: (4 + key.len()) as u32,
        }
    }

    fn db(&self) -> usize {
        u32::from_le_bytes(self.bytes[..4].try_into().expect("4 bytes")) as usize
    }

    fn key(&self) -> &[u8] {
        &self.bytes[4..self.token_at as usize]
    }

    fn token(&self) -> &[u8] {
        &self.bytes[self.token_at as usize..]
    }

    /// Whether this is the lock at `key` of database `db`.
    fn is(&self, db: usize, key: &[u8]) -> bool {
        self.db() == db && self.key() == key
    }

    /// Gives the lock a new token (a block of the new length).
    fn set_token(&mut self, token: &[u8]) {
        if self.token() != token {
            *self = LockBytes::new(self.db(), self.key(), token);
        }
    }
}

/// One held lock's record.
struct Holder {
    lock: LockBytes,
    client: Arc<ClientInfo>,
    /// Unix ms of the grant.
    granted_unix_ms: i64,
    /// Monotonic ms the lock's TTL ends (the last extension's).
    deadline: u64,
    extensions: u32,
    refused: u32,
}

/// One shard of the side table, on a cache line of its own.
#[repr(align(64))]
#[derive(Default)]
struct Shard(Mutex<HashTable<Holder>>);

/// The held locks' records: `SHARDS` tables, each behind its own mutex.
struct Held {
    /// The SipHash key (random).
    k0: u64,
    k1: u64,
    shards: Box<[Shard]>,
}

impl Held {
    fn new() -> Held {
        Held {
            k0: rand::random(),
            k1: rand::random(),
            shards: (0..SHARDS).map(|_| Shard::default()).collect(),
        }
    }

    fn hash(&self, db: usize, key: &[u8]) -> u64 {
        siphash::<1, 3>(self.k0 ^ db as u64, self.k1, key)
    }

    /// A rehash's hasher.
    fn hasher(&self) -> impl Fn(&Holder) -> u64 + '_ {
        |h| self.hash(h.lock.db(), h.lock.key())
    }

    /// The table that holds the record of the lock with this hash, locked. The hash's
    /// bits 32.. pick it: hashbrown uses the low bits (the bucket) and the top 7
    /// (the control byte).
    fn shard(&self, hash: u64) -> MutexGuard<'_, HashTable<Holder>> {
        self.shards[(hash >> 32) as usize % SHARDS].0.lock()
    }

    /// Records a grant at `key` of `db`: an extension (`Some` of the new token and
    /// deadline) of a recorded lock updates its record and returns true; anything
    /// else puts a `new` record in place of any there.
    fn grant(
        &self,
        db: usize,
        key: &[u8],
        extension: Option<(&[u8], u64)>,
        new: impl FnOnce() -> Holder,
    ) -> bool {
        let hash = self.hash(db, key);
        let mut table = self.shard(hash);
        match (
            table.entry(hash, |h| h.lock.is(db, key), self.hasher()),
            extension,
        ) {
            (Entry::Occupied(e), Some((token, deadline))) => {
                let h = e.into_mut();
                h.deadline = deadline;
                h.extensions += 1;
                h.lock.set_token(token);
                return true;
            }
            (Entry::Occupied(e), None) => *e.into_mut() = new(),
            (Entry::Vacant(e), _) => {
                e.insert(new());
            }
        }
        false
    }

    /// Calls `f` with the record of the lock at `key` of `db`, if there is one.
    fn with<R>(&self, db: usize, key: &[u8], f: impl FnOnce(&mut Holder) -> R) -> Option<R> {
        let hash = self.hash(db, key);
        self.shard(hash)
            .find_mut(hash, |h| h.lock.is(db, key))
            .map(f)
    }

    /// Removes the record of the lock at `key` of `db` if `cond` holds for it.
    fn remove_if(
        &self,
        db: usize,
        key: &[u8],
        cond: impl FnOnce(&Holder) -> bool,
    ) -> Option<Holder> {
        let hash = self.hash(db, key);
        let mut table = self.shard(hash);
        let found = table.find_entry(hash, |h| h.lock.is(db, key)).ok()?;
        if !cond(found.get()) {
            return None;
        }
        let (h, _) = found.remove();
        // A table emptied by releases and expiries gives its memory back (a quarter
        // full: halved).
        let len = table.len();
        if table.capacity() > 64 && len < table.capacity() / 4 {
            table.shrink_to(len * 2, self.hasher());
        }
        Some(h)
    }

    fn len(&self) -> usize {
        self.shards.iter().map(|s| s.0.lock().len()).sum()
    }

    /// Keeps only the records `keep` says yes to, shard by shard.
    fn retain(&self, mut keep: impl FnMut(&Holder) -> bool) {
        for s in self.shards.iter() {
            s.0.lock().retain(|h| keep(h));
        }
    }

    /// Forgets every record, and the tables' memory.
    fn clear(&self) {
        for s in self.shards.iter() {
            *s.0.lock() = HashTable::new();
        }
    }
}

/// The side table and the lock counters of a node.
pub struct Locks {
    on: AtomicBool,
    held: Held,
    /// Locks that expired while held, newest last: their database, key and token.
    expired: Mutex<VecDeque<LockBytes>>,
    any_expired: AtomicBool,
    /// Locks released by a command.
    pub released: AtomicU64,
    /// Lock TTLs set again by their holder.
    pub extensions: AtomicU64,
    /// Locks that reached their TTL without a release.
    pub expired_held: AtomicU64,
    /// Releases of a lock that had already expired.
    pub overruns: AtomicU64,
    /// When `prune` last ran (monotonic ms).
    last_prune_ms: AtomicU64,
}

impl Locks {
    pub fn new(on: bool) -> Locks {
        Locks {
            on: AtomicBool::new(on),
            held: Held::new(),
            expired: Mutex::default(),
            any_expired: AtomicBool::new(false),
            released: AtomicU64::new(0),
            extensions: AtomicU64::new(0),
            expired_held: AtomicU64::new(0),
            overruns: AtomicU64::new(0),
            last_prune_ms: AtomicU64::new(0),
        }
    }

    /// Whether introspection is on (one load).
    #[inline]
    pub fn on(&self) -> bool {
        self.on.load(Relaxed)
    }

    /// Locks in the side table (INFO's `locks_held`).
    pub fn held(&self) -> usize {
        self.held.len()
    }
}

/// How often the sweeper drops records whose lock went another way (`prune`).
const PRUNE_EVERY_MS: u64 = 2_000;

/// Drops the records of locks that left the keyspace without a hook seeing them go:
/// FLUSHALL / FLUSHDB, SWAPDB, RENAME or MOVE away, GETDEL, RESTORE ... REPLACE, MSET
/// over the key. A record stays while its key is a lock, expired or not (an expired
/// one is settled by the `expired` event, which counts it and keeps its token).
/// Called by INFO (so `locks_held` is exact) and by the sweeper every
/// `PRUNE_EVERY_MS`; one keyspace lookup per record.
pub fn prune(shared: &Shared) {
    let locks = &shared.locks;
    if locks.held.len() == 0 {
        return;
    }
    let now = shared.clock.now_ms();
    locks.last_prune_ms.store(now, Relaxed);
    let keyspace = &shared.keyspace;
    locks.held.retain(|h| {
        let db = h.lock.db();
        // 0: present even if its deadline passed (not yet swept).
        db < keyspace.dbs().len()
            && keyspace
                .db(db)
                .peek(h.lock.key(), 0)
                .is_some_and(|e| e.is_lock())
    });
}

/// `prune`, if `PRUNE_EVERY_MS` passed since the last one (the sweeper's pass).
pub fn prune_now_and_then(shared: &Shared) {
    let last = shared.locks.last_prune_ms.load(Relaxed);
    if shared.clock.now_ms().saturating_sub(last) >= PRUNE_EVERY_MS {
        prune(shared);
    }
}

/// Turns introspection on or off (CONFIG SET lock-introspection); off forgets the
/// table.
pub fn set_on(shared: &Shared, on: bool) {
    shared.locks.on.store(on, Relaxed);
    if !on {
        shared.locks.held.clear();
    }
    crate::commands::notify::want_store_events(shared);
}

/// A lock granted at `key` (new: `extension` false) or its TTL set again by the
/// holder (`extension`), with `token`, until `deadline`.
#[inline]
pub fn granted(ctx: &Ctx, key: &[u8], token: &[u8], deadline: u64, extension: bool) {
    if ctx.shared.locks.on() {
        record_grant(ctx, key, token, deadline, extension);
    }
}

#[cold]
fn record_grant(ctx: &Ctx, key: &[u8], token: &[u8], deadline: u64, extension: bool) {
    // A lock that expired at this key just now is settled first.
    crate::commands::notify::flush(ctx.shared);
    let locks = &ctx.shared.locks;
    let db = ctx.client.db;
    let new = || Holder {
        lock: LockBytes::new(db, key, token),
        client: ctx.client.info.clone(),
        granted_unix_ms: ctx.shared.clock.mono_to_wall(ctx.now_ms),
        deadline,
        extensions: 0,
        refused: 0,
    };
    let extended = locks
        .held
        .grant(db, key, extension.then_some((token, deadline)), new);
    if extended {
        locks.extensions.fetch_add(1, Relaxed);
    }
}

/// A request for the lock at `key` refused because it is held.
#[inline]
pub fn refused(ctx: &Ctx, key: &[u8]) {
    if ctx.shared.locks.on() {
        count_refusal(ctx, key);
    }
}

#[cold]
fn count_refusal(ctx: &Ctx, key: &[u8]) {
    ctx.shared
        .locks
        .held
        .with(ctx.client.db, key, |h| h.refused += 1);
}

/// `key` was removed by a command: a lock there is released.
#[inline]
pub fn released(ctx: &Ctx, key: &[u8]) {
    if ctx.shared.locks.on() {
        forget(ctx, key, true);
    }
}

/// `key` was rewritten into no lock (SET without a condition): its record goes,
/// uncounted.
#[inline]
pub fn unmarked(ctx: &Ctx, key: &[u8]) {
    if ctx.shared.locks.on() {
        forget(ctx, key, false);
    }
}

#[cold]
fn forget(ctx: &Ctx, key: &[u8], release: bool) {
    let locks = &ctx.shared.locks;
    let gone = locks.held.remove_if(ctx.client.db, key, |_| true);
    if gone.is_some() && release {
        locks.released.fetch_add(1, Relaxed);
    }
}

/// A lock at `key` of database `db` expired (the store's event, `store::events`).
pub fn expired(shared: &Shared, db: usize, key: Bytes) {
    let locks = &shared.locks;
    let now = shared.clock.now_ms();
    // A new holder's record stays (it was granted after the expiry).
    let Some(h) = locks.held.remove_if(db, &key, |h| h.deadline <= now) else {
        return;
    };
    locks.expired_held.fetch_add(1, Relaxed);
    let mut expired = locks.expired.lock();
    if expired.len() == RECENT {
        expired.pop_front();
    }
    expired.push_back(h.lock);
    locks.any_expired.store(true, Relaxed);
}

/// A release attempt of the lock at `key` with `token` that found it gone: an
/// overrun if `token` is that of a lock that expired there.
#[inline]
pub fn late_release(ctx: &Ctx, key: &[u8], tokens: &[Bytes]) {
    if ctx.shared.locks.any_expired.load(Relaxed) {
        check_overrun(ctx.shared, ctx.client.db, key, tokens);
    }
}

#[cold]
fn check_overrun(shared: &Shared, db: usize, key: &[u8], tokens: &[Bytes]) {
    let locks = &shared.locks;
    let mut expired = locks.expired.lock();
    let found = expired
        .iter()
        .position(|l| l.is(db, key) && tokens.iter().any(|t| **t == *l.token()));
    if let Some(i) = found {
        expired.remove(i);
        locks.overruns.fetch_add(1, Relaxed);
    }
    locks.any_expired.store(!expired.is_empty(), Relaxed);
}

/// Whether tokens of expired locks are kept (one load): only then may a release be
/// late.
#[inline]
pub fn any_expired(shared: &Shared) -> bool {
    shared.locks.any_expired.load(Relaxed)
}

/// After a script (EVAL, EVALSHA, FCALL): each key it named whose lock expired, with
/// that lock's token among its arguments, was released late.
#[cold]
pub fn script_ran(ctx: &Ctx, spec: &Spec, args: &[Bytes]) {
    let keys: Vec<Bytes> = spec.keys(args).cloned().collect();
    for key in &keys {
        if !ctx.db().contains(key, ctx.now_ms) {
            check_overrun(ctx.shared, ctx.client.db, key, &args[2..]);
        }
    }
}

/// A copy of a record's fields LOCKS shows, read under its shard's lock.
struct Seen {
    client: Arc<ClientInfo>,
    granted_unix_ms: i64,
    extensions: u32,
    refused: u32,
}

/// What LOCKS shows of one lock: the keyspace's (value, TTL) and the side table's.
fn describe(ctx: &Ctx, key: &Bytes, value: Bytes, deadline: Option<u64>) -> Reply {
    let now = ctx.now_ms;
    let ttl = deadline.map_or(-1, |d| d.saturating_sub(now) as i64);
    let h = ctx.shared.locks.held.with(ctx.client.db, key, |h| Seen {
        client: h.client.clone(),
        granted_unix_ms: h.granted_unix_ms,
        extensions: h.extensions,
        refused: h.refused,
    });
    let h = h.as_ref();
    let text = |b: Option<Bytes>| b.map_or(Reply::Null, Reply::Bulk);
    let int = |n: Option<i64>| n.map_or(Reply::Null, Reply::Integer);
    let fields = vec![
        ("key", Reply::Bulk(key.clone())),
        ("value", Reply::Bulk(value)),
        ("ttl-ms", Reply::Integer(ttl)),
        ("client-id", int(h.map(|h| h.client.id as i64))),
        (
            "client-name",
            text(h.and_then(|h| h.client.name.lock().clone())),
        ),
        (
            "client-addr",
            text(h.map(|h| Bytes::from(h.client.addr.to_string()))),
        ),
        ("user", text(h.map(|h| h.client.user.lock().clone()))),
        (
            "client-connected",
            int(h.map(|h| ctx.shared.clients.contains_key(&h.client.id) as i64)),
        ),
        ("granted-unix-ms", int(h.map(|h| h.granted_unix_ms))),
        (
            "held-ms",
            int(h.map(|h| (ctx.shared.clock.wall_ms() - h.granted_unix_ms).max(0))),
        ),
        ("extensions", int(h.map(|h| h.extensions as i64))),
        ("refused", int(h.map(|h| h.refused as i64))),
    ];
    Reply::Map(
        fields
            .into_iter()
            .map(|(k, v)| (Reply::bulk_str(k), v))
            .collect(),
    )
}

/// The lock at `key` now: its value (a string's, else empty) and deadline.
fn lock_at(ctx: &Ctx, key: &[u8]) -> Option<(Bytes, Option<u64>)> {
    let e = ctx.db().peek(key, ctx.now_ms)?;
    if !e.is_lock() {
        return None;
    }
    let value = match e.value() {
        crate::store::ValueRef::Str(s) => Bytes::copy_from_slice(s),
        _ => Bytes::new(),
    };
    Some((value, e.deadline_ms()))
}

const HELP: &[&str] = &[
    "LOCKS <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "LIST [MATCH <pattern>] [COUNT <count>]",
    "    The locks of the current database: each one's key, value (token), TTL left,",
    "    the client that took it (id, name, address, user, still connected), when,",
    "    how long ago, how many times it was extended and how many requests for it",
    "    were refused. COUNT bounds how many are listed (default 100).",
    "INFO <key>",
    "    The same fields for the lock at <key>; null when <key> holds no lock.",
    "HELP",
    "    Print this help.",
];

/// LOCKS LIST [MATCH pattern] [COUNT n] | LOCKS INFO key | LOCKS HELP
pub fn locks(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let sub = &args[1];
    let arity = |ok: bool, name: &str| {
        ok.then_some(())
            .ok_or_else(|| errors::wrong_arity(&format!("locks|{name}")))
    };
    if eq_ignore_case(sub, "help") {
        arity(args.len() == 2, "help")?;
        return Ok(Reply::Array(
            HELP.iter().map(|l| Reply::status(l)).collect(),
        ));
    }
    if eq_ignore_case(sub, "info") {
        arity(args.len() == 3, "info")?;
        return Ok(match lock_at(ctx, &args[2]) {
            Some((value, deadline)) => describe(ctx, &args[2], value, deadline),
            None => Reply::Null,
        });
    }
    if eq_ignore_case(sub, "list") {
        let mut pattern: Option<&[u8]> = None;
        let mut count = 100usize;
        let mut i = 2;
        while i < args.len() {
            let Some(value) = args.get(i + 1) else {
                return Err(errors::syntax());
            };
            if eq_ignore_case(&args[i], "match") {
                pattern = Some(value);
            } else if eq_ignore_case(&args[i], "count") {
                count = usize::try_from(int_arg(value)?)
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| Reply::error("ERR COUNT must be positive"))?;
            } else {
                return Err(errors::syntax());
            }
            i += 2;
        }
        let mut keys = ctx.db().keys(ctx.now_ms);
        keys.sort_unstable();
        let mut out = Vec::new();
        for key in keys {
            if out.len() == count {
                break;
            }
            if pattern.is_some_and(|p| !glob::matches(p, &key)) {
                continue;
            }
            if let Some((value, deadline)) = lock_at(ctx, &key) {
                out.push(describe(ctx, &key, value, deadline));
            }
        }
        return Ok(Reply::Array(out));
    }
    Err(errors::unknown_subcommand("locks", sub))
}

/// INFO's `locks` section.
pub fn info_section(shared: &Shared, out: &mut String) {
    use std::fmt::Write;
    prune(shared);
    let l = &shared.locks;
    let s = &shared.stats.locks;
    let _ = write!(
        out,
        "lock_introspection:{}\r\nlocks_held:{}\r\nlock_grants:{}\r\nlock_refusals_held:{}\r\nlock_releases:{}\r\nlock_extensions:{}\r\nlock_expired_held:{}\r\nlock_overruns:{}\r\n",
        l.on() as u8,
        l.held(),
        s.grants.load(Relaxed),
        s.held.load(Relaxed),
        l.released.load(Relaxed),
        l.extensions.load(Relaxed),
        l.expired_held.load(Relaxed),
        l.overruns.load(Relaxed),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(db: usize, key: &[u8], token: &[u8], client: &Arc<ClientInfo>) -> Holder {
        Holder {
            lock: LockBytes::new(db, key, token),
            client: client.clone(),
            granted_unix_ms: 7,
            deadline: 1000,
            extensions: 0,
            refused: 0,
        }
    }

    fn token_of(held: &Held, db: usize, key: &[u8]) -> Option<Vec<u8>> {
        held.with(db, key, |h| h.lock.token().to_vec())
    }

    /// The same key in two databases is two locks; every record is found by its
    /// database and key across the shards, before and after tables shrink.
    #[test]
    fn records_are_found_by_database_and_key() {
        let addr = "127.0.0.1:1".parse().unwrap();
        let client = Arc::new(ClientInfo::new(5, addr, addr, 0));
        let held = Held::new();
        let n = 20_000;
        for i in 0..n {
            for db in [0, 1] {
                let key = format!("lock:{i}");
                let token = format!("{db}-{i}");
                let new = || holder(db, key.as_bytes(), token.as_bytes(), &client);
                assert!(!held.grant(db, key.as_bytes(), None, new));
            }
        }
        assert_eq!(held.len(), 2 * n);
        let capacity =
            |held: &Held| -> usize { held.shards.iter().map(|s| s.0.lock().capacity()).sum() };
        let full = capacity(&held);
        // Database 0's locks go, and half of database 1's (odd keys).
        for i in 0..n {
            let key = format!("lock:{i}");
            assert!(held.remove_if(0, key.as_bytes(), |_| true).is_some());
            if i % 2 == 1 {
                let gone = held.remove_if(1, key.as_bytes(), |h| h.deadline <= 1000);
                assert_eq!(gone.unwrap().lock.token(), format!("1-{i}").as_bytes());
            }
        }
        assert_eq!(held.len(), n / 2);
        // Without the shrink, the capacity stays `full`.
        assert!(
            capacity(&held) < full * 3 / 4,
            "{} of {full}",
            capacity(&held)
        );
        for i in 0..n {
            let key = format!("lock:{i}");
            assert_eq!(token_of(&held, 0, key.as_bytes()), None);
            let want = (i % 2 == 0).then(|| format!("1-{i}").into_bytes());
            assert_eq!(token_of(&held, 1, key.as_bytes()), want, "{key}");
        }
        // A condition that does not hold leaves the record.
        assert!(held
            .remove_if(1, b"lock:0", |h| h.deadline <= 999)
            .is_none());
        assert_eq!(token_of(&held, 1, b"lock:0"), Some(b"1-0".to_vec()));
        held.clear();
        assert_eq!((held.len(), capacity(&held)), (0, 0));
    }

    /// An extension keeps the record (grant time, refusals) and takes the new token
    /// and deadline; a new grant over a record replaces it.
    #[test]
    fn extensions_update_and_grants_replace() {
        let addr = "127.0.0.1:1".parse().unwrap();
        let client = Arc::new(ClientInfo::new(5, addr, addr, 0));
        let held = Held::new();
        let new = |token: &'static [u8]| {
            let client = &client;
            move || holder(3, b"k", token, client)
        };
        assert!(!held.grant(3, b"k", Some((b"t1", 2000)), new(b"t1")));
        held.with(3, b"k", |h| h.refused += 2);
        assert!(held.grant(3, b"k", Some((b"longer-token", 5000)), new(b"x")));
        let seen = held.with(3, b"k", |h| {
            (
                h.lock.db(),
                h.lock.key().to_vec(),
                h.lock.token().to_vec(),
                h.deadline,
            )
        });
        assert_eq!(
            seen,
            Some((3, b"k".to_vec(), b"longer-token".to_vec(), 5000))
        );
        assert_eq!(
            held.with(3, b"k", |h| (h.extensions, h.refused)),
            Some((1, 2))
        );
        assert!(!held.grant(3, b"k", None, new(b"t2")));
        let seen = held.with(3, b"k", |h| {
            (h.lock.token().to_vec(), h.extensions, h.refused)
        });
        assert_eq!(seen, Some((b"t2".to_vec(), 0, 0)));
        assert_eq!(held.len(), 1);
    }
}
