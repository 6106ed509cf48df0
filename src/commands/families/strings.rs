//! String commands: SET (with Redis 8.4's IF* conditions, see cas.rs) and its
//! relatives (SETNX, SETEX, PSETEX, GETSET), GET, GETDEL, GETEX, MGET, MSET, MSETNX,
//! the INCR family with INCRBYFLOAT, APPEND, STRLEN, GETRANGE (SUBSTR), SETRANGE.

use crate::commands::families::cas::Cond;
use crate::commands::families::locks;
use crate::commands::families::long_double::LongDouble;
use crate::commands::notify::{self as nt, notify};
use crate::commands::{eq_ignore_case, int_arg, parse_i64, CmdResult, Ctx};
use crate::protocol::{errors, Reply};
use crate::store::{Entry, Slot, Value, ValueRef};
use bytes::Bytes;
use std::sync::atomic::Ordering::Relaxed;

/// An expiry option as written by the client (EX/PX/EXAT/PXAT), before validation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ExpireArg {
    /// EX seconds / PX milliseconds: relative.
    Relative { amount: i64, unit_ms: i64 },
    /// EXAT seconds / PXAT milliseconds: Unix time.
    Absolute { amount: i64, unit_ms: i64 },
}

impl ExpireArg {
    /// Parses the option keyword at `word` (EX, PX, EXAT, PXAT) with its value.
    fn parse(word: &[u8], value: &[u8]) -> Option<Result<ExpireArg, Reply>> {
        let (absolute, unit_ms) = if eq_ignore_case(word, "ex") {
            (false, 1000)
        } else if eq_ignore_case(word, "px") {
            (false, 1)
        } else if eq_ignore_case(word, "exat") {
            (true, 1000)
        } else if eq_ignore_case(word, "pxat") {
            (true, 1)
        } else {
            return None;
        };
        Some(int_arg(value).map(|amount| {
            if absolute {
                ExpireArg::Absolute { amount, unit_ms }
            } else {
                ExpireArg::Relative { amount, unit_ms }
            }
        }))
    }

    fn is_keyword(word: &[u8]) -> bool {
        ["ex", "px", "exat", "pxat"]
            .iter()
            .any(|w| eq_ignore_case(word, w))
    }

    /// The monotonic deadline, after Redis's checks ("invalid expire time in 'cmd'")
    /// and then the max-ttl check.
    pub fn deadline(self, ctx: &Ctx, cmd: &str) -> Result<u64, Reply> {
        let (amount, unit_ms) = match self {
            ExpireArg::Relative { amount, unit_ms } | ExpireArg::Absolute { amount, unit_ms } => {
                (amount, unit_ms)
            }
        };
        if amount <= 0 {
            return Err(errors::invalid_expire(cmd));
        }
        let ms = amount
            .checked_mul(unit_ms)
            .ok_or_else(|| errors::invalid_expire(cmd))?;
        match self {
            ExpireArg::Relative { .. } => {
                // Redis refuses a TTL that overflows when added to the wall clock. The
                // clock is read only for a TTL that could (the wall clock is far below
                // i64::MAX / 2): the usual SET PX reads no wall clock.
                if ms > i64::MAX / 2 && ms.checked_add(ctx.shared.clock.wall_ms()).is_none() {
                    return Err(errors::invalid_expire(cmd));
                }
                ctx.deadline_after(ms)
            }
            ExpireArg::Absolute { .. } => ctx.deadline_at_wall(ms),
        }
    }
}

pub fn get(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    match ctx.db().get(&args[1], ctx.now_ms) {
        None => Ok(Reply::Null),
        Some(e) => match e.value() {
            ValueRef::Str(s) => Ok(Reply::Bulk(Bytes::copy_from_slice(s))),
            _ => Err(errors::wrongtype()),
        },
    }
}

/// The expire options SET and GETEX share: EX/PX/EXAT/PXAT with a value, or the word
/// that keeps (SET's KEEPTTL) or drops (GETEX's PERSIST) the TTL; not both.
#[derive(Default, Clone, Copy)]
struct TtlOptions<'a> {
    /// The expire keyword and its value, parsed after all options (as Redis does, so
    /// a syntax error anywhere wins over a bad number).
    expire: Option<(&'a [u8], &'a [u8])>,
    /// KEEPTTL (SET) or PERSIST (GETEX) was given.
    keep_or_drop: bool,
}

impl<'a> TtlOptions<'a> {
    /// Takes the option at `args[*i]` if it is one of these (`word`: "keepttl" or
    /// "persist"), moving `i` onto its value; `Ok(false)` when it is not.
    fn take(&mut self, args: &'a [Bytes], i: &mut usize, word: &str) -> Result<bool, Reply> {
        let a = &args[*i];
        if eq_ignore_case(a, word) && self.expire.is_none() {
            self.keep_or_drop = true;
            return Ok(true);
        }
        if ExpireArg::is_keyword(a)
            && !self.keep_or_drop
            && self
                .expire
                .is_none_or(|(word, _)| word.eq_ignore_ascii_case(a))
        {
            // As Redis: the same option may repeat (EX 10 EX 20) and the last one wins;
            // two different ones (EX 10 PX 100) are a syntax error.
            let Some(value) = args.get(*i + 1) else {
                return Err(errors::syntax());
            };
            self.expire = Some((a, value));
            *i += 1;
            return Ok(true);
        }
        Ok(false)
    }

    /// The deadline the expire option asks for (`None` without one), after Redis's
    /// checks and the max-ttl check.
    fn deadline(&self, ctx: &Ctx, cmd: &str) -> Result<Option<u64>, Reply> {
        self.expire
            .map(|(word, value)| {
                ExpireArg::parse(word, value)
                    .expect("keyword checked while parsing")?
                    .deadline(ctx, cmd)
            })
            .transpose()
    }
}

#[derive(Default)]
struct SetOptions<'a> {
    nx: bool,
    xx: bool,
    /// IFEQ / IFNE / IFDEQ / IFDNE (Redis 8.4): exclusive with NX, XX and each other.
    cond: Option<Cond<'a>>,
    get: bool,
    /// EX/PX/EXAT/PXAT or KEEPTTL.
    ttl: TtlOptions<'a>,
}

fn parse_set_options(args: &[Bytes]) -> Result<SetOptions<'_>, Reply> {
    let mut o = SetOptions::default();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        let no_cond = o.cond.is_none();
        if o.ttl.take(args, &mut i, "keepttl")? {
            // taken
        } else if eq_ignore_case(a, "nx") && !o.xx && no_cond {
            o.nx = true;
        } else if eq_ignore_case(a, "xx") && !o.nx && no_cond {
            o.xx = true;
        } else if Cond::is_keyword(a) && !o.nx && !o.xx && no_cond {
            let Some(value) = args.get(i + 1) else {
                return Err(errors::syntax());
            };
            o.cond = Cond::parse(a, value);
            i += 1;
        } else if eq_ignore_case(a, "get") {
            o.get = true;
        } else {
            return Err(errors::syntax());
        }
        i += 1;
    }
    Ok(o)
}

/// `SET key value [NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL]`
pub fn set(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let o = parse_set_options(&args[3..])?;
    let deadline = o.ttl.deadline(ctx, "set")?;
    let keepttl = o.ttl.keep_or_drop;
    if deadline.is_none() && !keepttl {
        ctx.shared.fence.check_has_ttl()?;
    }
    set_generic(ctx, &args[1], &args[2], &o, deadline)
}

fn set_generic(
    ctx: &mut Ctx,
    key: &[u8],
    value: &Bytes,
    o: &SetOptions<'_>,
    deadline: Option<u64>,
) -> CmdResult {
    let now = ctx.now_ms;
    // SET NX on a held lock (the contended case) is answered under the shard's read
    // lock: no key copy, no write lock, and nothing written, so nothing touched.
    if o.nx && !o.get && o.cond.is_none() && ctx.db().get(key, now).is_some() {
        ctx.shared.stats.locks.held.fetch_add(1, Relaxed);
        locks::refused(ctx, key);
        return Ok(Reply::Null);
    }
    let fence = &ctx.shared.fence;
    let slot = ctx.db().entry(key, now);
    // A delayed lock (`store/lock.rs`): held elsewhere. SET ... GET gets TRYAGAIN (its
    // null would read as "set"); SETEX, PSETEX and GETSET were refused before they ran
    // (`commands::check_lock_delay`).
    if let Slot::Vacant(v) = &slot {
        if let Some(left) = v.lock_delay_left(now) {
            if o.get {
                return Err(crate::commands::lock_delay_refused(ctx, left));
            }
            crate::commands::note_lock_delay_refusal(ctx);
            return Ok(Reply::Null);
        }
    }
    let old = match &slot {
        Slot::Occupied(e) => Some(e.value()),
        Slot::Vacant(_) => None,
    };
    let old_value = match old {
        Some(ValueRef::Str(s)) if o.get => Some(Bytes::copy_from_slice(s)),
        Some(ValueRef::Str(_)) => None,
        Some(_) if o.get => return Err(errors::wrongtype()),
        _ => None,
    };
    let exists = old.is_some();
    let cond_fails = match (o.cond, old) {
        (None, _) => false,
        (Some(c), None) => !c.holds_when_missing(),
        (Some(c), Some(ValueRef::Str(s))) => !c.holds(s),
        // A condition compares a string: another type is WRONGTYPE, as in Redis 8.4.
        (Some(_), Some(_)) => return Err(errors::wrongtype()),
    };
    let reply_skipped = || {
        if o.get {
            old_value.clone().map_or(Reply::Null, Reply::Bulk)
        } else {
            Reply::Null
        }
    };
    // SET ... GET reads the key first: `keymiss` when absent, sent once the slot is
    // let go, before any other event.
    let missed = o.get && !exists;
    if (o.nx && exists) || (o.xx && !exists) || cond_fails {
        if o.nx && exists {
            ctx.shared.stats.locks.held.fetch_add(1, Relaxed);
            locks::refused(ctx, key);
        }
        drop(slot);
        if missed {
            nt::key_miss(ctx, key);
        }
        return Ok(reply_skipped());
    }
    if o.nx {
        ctx.shared.stats.locks.grants.fetch_add(1, Relaxed);
    }
    // A lock (`store/lock.rs`): written with a TTL under a condition, or by a script.
    let lock = o.nx || o.cond.is_some() || ctx.in_script;
    let mut was_lock = false;
    match slot {
        Slot::Occupied(mut e) => {
            was_lock = e.is_lock();
            let keep = if o.ttl.keep_or_drop {
                e.deadline_ms()
            } else {
                None
            };
            if o.ttl.keep_or_drop && keep.is_none() {
                fence.check_has_ttl()?;
            }
            let deadline = deadline.or(keep);
            if matches!(deadline, Some(d) if d <= now) {
                e.remove();
            } else {
                e.set_str(value);
                e.set_deadline(deadline);
                e.set_lock(lock && deadline.is_some());
            }
        }
        Slot::Vacant(v) => {
            if o.ttl.keep_or_drop {
                fence.check_has_ttl()?;
            }
            if !matches!(deadline, Some(d) if d <= now) {
                let entry = Entry {
                    value: Value::Str(value.clone()),
                    deadline_ms: deadline,
                };
                v.insert_marked(entry, lock && deadline.is_some());
            }
        }
    }
    if missed {
        nt::key_miss(ctx, key);
    }
    // Lock introspection: a grant, the holder's extension, or a lock rewritten
    // into a plain key.
    match deadline {
        Some(d) if lock && d > now => locks::granted(ctx, key, value, d, was_lock),
        _ if was_lock => locks::unmarked(ctx, key),
        _ => {}
    }
    notify(ctx, nt::STRING, "set", key);
    if deadline.is_some() {
        notify(ctx, nt::GENERIC, "expire", key);
    }
    Ok(if o.get {
        old_value.map_or(Reply::Null, Reply::Bulk)
    } else {
        Reply::Ok
    })
}

/// SETNX key value -> 1 if set, 0 if the key existed.
pub fn setnx(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    ctx.shared.fence.check_has_ttl()?;
    let o = SetOptions {
        nx: true,
        ..SetOptions::default()
    };
    let r = set_generic(ctx, &args[1], &args[2], &o, None)?;
    Ok(Reply::Integer((r == Reply::Ok) as i64))
}

fn set_with_ttl(ctx: &mut Ctx, args: &[Bytes], unit_ms: i64, cmd: &str) -> CmdResult {
    let amount = int_arg(&args[2])?;
    let deadline = ExpireArg::Relative { amount, unit_ms }.deadline(ctx, cmd)?;
    set_generic(
        ctx,
        &args[1],
        &args[3],
        &SetOptions::default(),
        Some(deadline),
    )
}

/// SETEX key seconds value
pub fn setex(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    set_with_ttl(ctx, args, 1000, "setex")
}

/// PSETEX key milliseconds value
pub fn psetex(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    set_with_ttl(ctx, args, 1, "psetex")
}

/// GETSET key value: SET key value GET (the old value or null; WRONGTYPE sets
/// nothing). The key loses its TTL, as in Redis.
pub fn getset(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    ctx.shared.fence.check_has_ttl()?;
    let o = SetOptions {
        get: true,
        ..SetOptions::default()
    };
    set_generic(ctx, &args[1], &args[2], &o, None)
}

/// GETDEL key: the value, and the key removed.
pub fn getdel(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let slot = ctx.db().entry(&args[1], ctx.now_ms);
    match slot {
        Slot::Vacant(v) => {
            drop(v);
            nt::key_miss(ctx, &args[1]);
            Ok(Reply::Null)
        }
        Slot::Occupied(e) => match e.value() {
            ValueRef::Str(s) => {
                let s = Bytes::copy_from_slice(s);
                e.remove();
                locks::released(ctx, &args[1]);
                notify(ctx, nt::GENERIC, "del", &args[1]);
                Ok(Reply::Bulk(s))
            }
            _ => Err(errors::wrongtype()),
        },
    }
}

/// GETEX key [EX s|PX ms|EXAT s|PXAT ms|PERSIST]
///
/// As Redis: options are checked for syntax first, then the key is looked up (a
/// missing key is null whatever the expire value), then its type, and only then the
/// expire value (not an integer, invalid expire time, max-ttl).
pub fn getex(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let mut ttl = TtlOptions::default();
    let mut i = 2;
    while i < args.len() {
        if !ttl.take(args, &mut i, "persist")? {
            return Err(errors::syntax());
        }
        i += 1;
    }
    let persist = ttl.keep_or_drop;
    if persist {
        ctx.shared.fence.check_has_ttl()?;
    }
    let now = ctx.now_ms;
    let Some(mut e) = ctx.db().get_mut(&args[1], now) else {
        nt::key_miss(ctx, &args[1]);
        return Ok(Reply::Null);
    };
    let ValueRef::Str(s) = e.value() else {
        return Err(errors::wrongtype());
    };
    let s = Bytes::copy_from_slice(s);
    let had_ttl = e.deadline_ms().is_some();
    let mut event = None;
    if let Some(deadline) = ttl.deadline(ctx, "getex")? {
        e.set_deadline(Some(deadline));
        event = Some("expire");
    } else if persist {
        e.set_deadline(None);
        event = had_ttl.then_some("persist");
    }
    if matches!(e.deadline_ms(), Some(d) if d <= now) {
        // Deleted, as Redis deletes it: `del`, not `expired`.
        e.remove();
        event = Some("del");
    } else {
        drop(e);
    }
    if let Some(event) = event {
        notify(ctx, nt::GENERIC, event, &args[1]);
    }
    Ok(Reply::Bulk(s))
}

/// MGET key...: values, null for missing keys and keys of other types.
pub fn mget(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let db = ctx.db();
    Ok(Reply::Array(
        args[1..]
            .iter()
            .map(
                |k| match db.get(k, ctx.now_ms).as_deref().map(|e| e.value()) {
                    Some(ValueRef::Str(s)) => Reply::Bulk(Bytes::copy_from_slice(s)),
                    _ => Reply::Null,
                },
            )
            .collect(),
    ))
}

/// MSET key value [key value...]
pub fn mset(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    if args.len().is_multiple_of(2) {
        return Err(errors::wrong_arity("mset"));
    }
    ctx.shared.fence.check_has_ttl()?;
    let db = ctx.db();
    for pair in args[1..].chunks(2) {
        db.insert(&pair[0], Entry::new(Value::Str(pair[1].clone())));
        notify(ctx, nt::STRING, "set", &pair[0]);
    }
    Ok(Reply::Ok)
}

/// MSETNX key value [key value...]: 1 and every key set when none exists, else 0 and
/// nothing set (atomic: runs holding the keyspace gate, as MSET does). Acquires
/// several locks at once, all or none; like MSET it sets no TTL.
pub fn msetnx(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    if args.len().is_multiple_of(2) {
        return Err(errors::wrong_arity("msetnx"));
    }
    ctx.shared.fence.check_has_ttl()?;
    let now = ctx.now_ms;
    let db = ctx.db();
    if args[1..].chunks(2).any(|pair| db.contains(&pair[0], now)) {
        return Ok(Reply::Integer(0));
    }
    for pair in args[1..].chunks(2) {
        db.insert(&pair[0], Entry::new(Value::Str(pair[1].clone())));
        notify(ctx, nt::STRING, "set", &pair[0]);
    }
    Ok(Reply::Integer(1))
}

/// STRLEN key: the string's length, 0 for a missing key.
pub fn strlen(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    match ctx.db().get(&args[1], ctx.now_ms) {
        None => Ok(Reply::Integer(0)),
        Some(e) => match e.value() {
            ValueRef::Str(s) => Ok(Reply::Integer(s.len() as i64)),
            _ => Err(errors::wrongtype()),
        },
    }
}

/// The longest string APPEND and SETRANGE may make: `proto-max-bulk-len`, as in Redis
/// (and never past what an entry can hold).
fn check_string_length(ctx: &Ctx, size: usize, append: usize) -> Result<usize, Reply> {
    let max = ctx.shared.config.proto_max_bulk_len.min(u32::MAX as usize);
    match size.checked_add(append) {
        Some(total) if total <= max => Ok(total),
        _ => Err(Reply::error(
            "ERR string exceeds maximum allowed size (proto-max-bulk-len)",
        )),
    }
}

/// APPEND key value: the new length. A missing key is created (without a TTL); an
/// existing one keeps its TTL.
pub fn append(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let now = ctx.now_ms;
    let tail = &args[2];
    let slot = ctx.db().entry(&args[1], now);
    match slot {
        Slot::Occupied(mut e) => {
            let ValueRef::Str(s) = e.value() else {
                return Err(errors::wrongtype());
            };
            let old = s.len();
            let total = check_string_length(ctx, old, tail.len())?;
            e.str_resize(total)[old..].copy_from_slice(tail);
            drop(e);
            notify(ctx, nt::STRING, "append", &args[1]);
            Ok(Reply::Integer(total as i64))
        }
        Slot::Vacant(v) => {
            ctx.shared.fence.check_has_ttl()?;
            v.insert(Entry::new(Value::Str(tail.clone())));
            notify(ctx, nt::STRING, "append", &args[1]);
            Ok(Reply::Integer(tail.len() as i64))
        }
    }
}

/// GETRANGE key start end (and its old name SUBSTR): the bytes from start to end,
/// both included, negative counting from the end; "" for a missing key.
pub fn getrange(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let start = int_arg(&args[2])?;
    let end = int_arg(&args[3])?;
    let Some(e) = ctx.db().get(&args[1], ctx.now_ms) else {
        return Ok(Reply::Bulk(Bytes::new()));
    };
    let ValueRef::Str(s) = e.value() else {
        return Err(errors::wrongtype());
    };
    let len = s.len() as i64;
    if start < 0 && end < 0 && start > end {
        return Ok(Reply::Bulk(Bytes::new()));
    }
    let start = if start < 0 { len + start } else { start }.max(0);
    let end = if end < 0 { len + end } else { end }.max(0).min(len - 1);
    if start > end || len == 0 {
        return Ok(Reply::Bulk(Bytes::new()));
    }
    Ok(Reply::Bulk(Bytes::copy_from_slice(
        &s[start as usize..=end as usize],
    )))
}

/// SETRANGE key offset value: writes value at offset (zero bytes fill any gap) and
/// answers the new length. An empty value changes nothing (and creates no key).
pub fn setrange(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let offset = int_arg(&args[2])?;
    let Ok(offset) = usize::try_from(offset) else {
        return Err(Reply::error("ERR offset is out of range"));
    };
    let value = &args[3];
    let now = ctx.now_ms;
    let slot = ctx.db().entry(&args[1], now);
    match slot {
        Slot::Vacant(v) => {
            if value.is_empty() {
                return Ok(Reply::Integer(0));
            }
            let total = check_string_length(ctx, offset, value.len())?;
            ctx.shared.fence.check_has_ttl()?;
            let mut s = vec![0; total];
            s[offset..].copy_from_slice(value);
            v.insert(Entry::new(Value::Str(Bytes::from(s))));
            notify(ctx, nt::STRING, "setrange", &args[1]);
            Ok(Reply::Integer(total as i64))
        }
        Slot::Occupied(mut e) => {
            let ValueRef::Str(s) = e.value() else {
                return Err(errors::wrongtype());
            };
            let old = s.len();
            if value.is_empty() {
                return Ok(Reply::Integer(old as i64));
            }
            let end = check_string_length(ctx, offset, value.len())?;
            let total = old.max(end);
            e.str_resize(total)[offset..end].copy_from_slice(value);
            drop(e);
            notify(ctx, nt::STRING, "setrange", &args[1]);
            Ok(Reply::Integer(total as i64))
        }
    }
}

/// INCRBYFLOAT key increment: the new value, computed and printed as Redis does (C's
/// long double: long_double.rs). Keeps the TTL.
pub fn incrbyfloat(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let not_float = || Reply::error(errors::NOT_FLOAT);
    let nan_or_inf = || Reply::error("ERR increment would produce NaN or Infinity");
    let now = ctx.now_ms;
    let slot = ctx.db().entry(&args[1], now);
    match slot {
        Slot::Occupied(mut e) => {
            let ValueRef::Str(s) = e.value() else {
                return Err(errors::wrongtype());
            };
            let current = LongDouble::parse(s).ok_or_else(not_float)?;
            let incr = LongDouble::parse(&args[2]).ok_or_else(not_float)?;
            let next = current.add(&incr).ok_or_else(nan_or_inf)?;
            e.set_str(&next);
            drop(e);
            notify(ctx, nt::STRING, "incrbyfloat", &args[1]);
            Ok(Reply::Bulk(next))
        }
        Slot::Vacant(v) => {
            let incr = LongDouble::parse(&args[2]).ok_or_else(not_float)?;
            let next = LongDouble::zero().add(&incr).ok_or_else(nan_or_inf)?;
            ctx.shared.fence.check_has_ttl()?;
            v.insert(Entry::new(Value::Str(next.clone())));
            notify(ctx, nt::STRING, "incrbyfloat", &args[1]);
            Ok(Reply::Bulk(next))
        }
    }
}

/// Adds `delta` to the integer at `key` (0 if missing), keeping its TTL.
fn incr_by(ctx: &mut Ctx, key: &[u8], delta: i64) -> CmdResult {
    let now = ctx.now_ms;
    let fence = &ctx.shared.fence;
    match ctx.db().entry(key, now) {
        Slot::Occupied(mut e) => {
            let ValueRef::Str(s) = e.value() else {
                return Err(errors::wrongtype());
            };
            let current = parse_i64(s).ok_or_else(errors::not_integer)?;
            let next = current
                .checked_add(delta)
                .ok_or_else(|| Reply::error(errors::OVERFLOW))?;
            e.set_str(itoa::Buffer::new().format(next).as_bytes());
            drop(e);
            notify(ctx, nt::STRING, "incrby", key);
            Ok(Reply::Integer(next))
        }
        Slot::Vacant(v) => {
            fence.check_has_ttl()?;
            v.insert(Entry::new(Value::Str(Bytes::from(delta.to_string()))));
            notify(ctx, nt::STRING, "incrby", key);
            Ok(Reply::Integer(delta))
        }
    }
}

pub fn incr(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    incr_by(ctx, &args[1], 1)
}

pub fn decr(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    incr_by(ctx, &args[1], -1)
}

pub fn incrby(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let delta = int_arg(&args[2])?;
    incr_by(ctx, &args[1], delta)
}

pub fn decrby(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let delta = int_arg(&args[2])?;
    let delta = delta
        .checked_neg()
        .ok_or_else(|| Reply::error("ERR decrement would overflow"))?;
    incr_by(ctx, &args[1], delta)
}
