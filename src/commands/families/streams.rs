//! Stream commands on entries: XADD, XRANGE, XREVRANGE, XLEN, XDEL, XTRIM, XSETID,
//! and the ID and trim arguments every stream command parses. The reads XREAD and
//! XREADGROUP are in `stream_reads`, consumer-group administration in `stream_groups`.
//!
//! Replies and errors are Redis 7.0's, argument by argument (t_stream.c's order of
//! checks). IDs come from the server clock's Unix time (the manual clock in tests);
//! pending entries' delivery times are Unix ms of the same clock.

use crate::commands::families::typed::{self, Collection};
use crate::commands::notify::{self as nt, notify};
use crate::commands::{eq_ignore_case, parse_i64, CmdResult, Ctx};
use crate::protocol::{errors, Reply};
use crate::store::stream::{EntryRef, NodeLimits, Trim};
use crate::store::{Stream, StreamId, Value, ValueMut, ValueRef};
use bytes::Bytes;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

impl Collection for Stream {
    fn of(value: ValueRef<'_>) -> Option<&Self> {
        match value {
            ValueRef::Stream(s) => Some(s),
            _ => None,
        }
    }
    fn of_mut(value: ValueMut<'_>) -> Option<&mut Self> {
        match value {
            ValueMut::Stream(s) => Some(s),
            _ => None,
        }
    }
    fn into_value(self) -> Value {
        Value::Stream(Box::new(self))
    }
    fn is_empty(&self) -> bool {
        Stream::is_empty(self)
    }
}

/// The node sizes (CONFIG SET stream-node-max-entries / stream-node-max-bytes).
pub struct StreamConfig {
    max_entries: AtomicU64,
    max_bytes: AtomicU64,
}

impl Default for StreamConfig {
    fn default() -> StreamConfig {
        let d = NodeLimits::default();
        StreamConfig {
            max_entries: AtomicU64::new(d.max_entries),
            max_bytes: AtomicU64::new(d.max_bytes),
        }
    }
}

impl StreamConfig {
    pub fn limits(&self) -> NodeLimits {
        NodeLimits {
            max_entries: self.max_entries.load(Relaxed),
            max_bytes: self.max_bytes.load(Relaxed),
        }
    }
    pub fn set_max_entries(&self, n: u64) {
        self.max_entries.store(n, Relaxed);
    }
    pub fn set_max_bytes(&self, n: u64) {
        self.max_bytes.store(n, Relaxed);
    }
}

pub(crate) const INVALID_ID: &str = "ERR Invalid stream ID specified as stream command argument";

/// C's strtoull as Redis's string2ull falls back to it: leading white space, a sign,
/// digits to the end; a '-' negates (modulo 2^64); overflow fails.
fn strtoull(s: &[u8]) -> Option<u64> {
    let start = s.iter().position(|b| !b" \t\n\x0b\x0c\r".contains(b))?;
    let s = &s[start..];
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v: u64 = 0;
    for d in digits {
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

/// Redis's string2ull: a non-negative long long, else strtoull's reading.
fn string2ull(s: &[u8]) -> Option<u64> {
    if let Some(n) = parse_i64(s) {
        return u64::try_from(n).ok();
    }
    strtoull(s)
}

/// An ID argument as Redis's streamGenericParseIDOrReply reads it: `ms-seq`, `ms`
/// (its sequence `missing_seq`), `-` and `+` unless `strict`, and with `allow_star`
/// `ms-*` (then the second value is false: the sequence is to be generated).
pub(crate) fn parse_id_full(
    arg: &[u8],
    missing_seq: u64,
    strict: bool,
    allow_star: bool,
) -> Result<(StreamId, bool), Reply> {
    let invalid = || Reply::error(INVALID_ID);
    if arg.len() > 127 {
        return Err(invalid());
    }
    // The C code copies the argument into a string: it ends at the first NUL.
    let arg = &arg[..arg.iter().position(|&b| b == 0).unwrap_or(arg.len())];
    match arg {
        b"-" | b"+" if strict => return Err(invalid()),
        b"-" => return Ok((StreamId::MIN, true)),
        b"+" => return Ok((StreamId::MAX, true)),
        _ => {}
    }
    let (ms_part, seq_part) = match arg.iter().position(|&b| b == b'-') {
        Some(i) => (&arg[..i], Some(&arg[i + 1..])),
        None => (arg, None),
    };
    let ms = string2ull(ms_part).ok_or_else(invalid)?;
    match seq_part {
        None => Ok((StreamId::new(ms, missing_seq), true)),
        Some(b"*") if allow_star => Ok((StreamId::new(ms, 0), false)),
        Some(s) => Ok((StreamId::new(ms, string2ull(s).ok_or_else(invalid)?), true)),
    }
}

/// A strict ID (`-` and `+` refused).
pub(crate) fn parse_strict_id(arg: &[u8]) -> Result<StreamId, Reply> {
    parse_id_full(arg, 0, true, false).map(|(id, _)| id)
}

/// A range bound: `(` makes it exclusive (then `-`/`+` are refused); an incomplete
/// ID gets `missing_seq`. Returns the ID and whether it was exclusive.
pub(crate) fn parse_interval(arg: &[u8], missing_seq: u64) -> Result<(StreamId, bool), Reply> {
    if arg.len() > 1 && arg[0] == b'(' {
        let id = parse_id_full(&arg[1..], missing_seq, true, false)?.0;
        return Ok((id, true));
    }
    Ok((parse_id_full(arg, missing_seq, false, false)?.0, false))
}

/// An inclusive start from a range start argument (`(` moves it up by one).
pub(crate) fn parse_start(arg: &[u8]) -> Result<StreamId, Reply> {
    let (id, ex) = parse_interval(arg, 0)?;
    if ex {
        return id
            .next()
            .ok_or_else(|| Reply::error("ERR invalid start ID for the interval"));
    }
    Ok(id)
}

/// An inclusive end from a range end argument.
pub(crate) fn parse_end(arg: &[u8]) -> Result<StreamId, Reply> {
    let (id, ex) = parse_interval(arg, u64::MAX)?;
    if ex {
        return id
            .prev()
            .ok_or_else(|| Reply::error("ERR invalid end ID for the interval"));
    }
    Ok(id)
}

/// getLongLongFromObjectOrReply with Redis's default message.
pub(crate) fn ll_arg(arg: &[u8]) -> Result<i64, Reply> {
    parse_i64(arg).ok_or_else(errors::not_integer)
}

pub(crate) fn id_reply(id: StreamId) -> Reply {
    Reply::Bulk(id.to_bytes())
}

/// One entry as replies carry it: `[id, [field, value, ...]]`.
pub(crate) fn entry_reply(entry: &EntryRef<'_>) -> Reply {
    let (id, pairs) = entry;
    let mut fv = Vec::with_capacity(pairs.len() * 2);
    for (f, v) in pairs {
        fv.push(Reply::Bulk(Bytes::copy_from_slice(f)));
        fv.push(Reply::Bulk(Bytes::copy_from_slice(v)));
    }
    Reply::Array(vec![id_reply(*id), Reply::Array(fv)])
}

pub(crate) fn entries_reply(entries: &[EntryRef<'_>]) -> Reply {
    Reply::Array(entries.iter().map(entry_reply).collect())
}

/// The server clock's Unix time in ms (IDs, delivery and seen times).
pub(crate) fn unix_ms(ctx: &Ctx) -> i64 {
    ctx.shared.clock.mono_to_wall(ctx.now_ms)
}

/// The stream at `key` for a read (None: missing; WRONGTYPE).
pub(crate) fn read<T>(
    ctx: &Ctx,
    key: &[u8],
    f: impl FnOnce(&Stream) -> T,
) -> Result<Option<T>, Reply> {
    typed::read(ctx, key, f)
}

/// The existing stream at `key`, changed in place (None: missing; WRONGTYPE).
pub(crate) fn modify<T>(
    ctx: &Ctx,
    key: &[u8],
    f: impl FnOnce(&mut Stream) -> T,
) -> Result<Option<T>, Reply> {
    typed::modify(ctx, key, f)
}

/// The trimming arguments of XADD and XTRIM.
#[derive(Default)]
struct TrimArgs {
    how: Option<Trim>,
    approx: bool,
    limit: u64,
    nomkstream: bool,
    /// XADD's ID: None for `*`; with whether its sequence was given.
    id: Option<(StreamId, bool)>,
    /// Where XADD's ID is.
    id_at: usize,
}

/// Redis's streamParseAddOrTrimArgsOrReply.
fn parse_trim_args(ctx: &Ctx, args: &[Bytes], xadd: bool) -> Result<TrimArgs, Reply> {
    let mut t = TrimArgs::default();
    let mut limit_given = false;
    let mut i = 2;
    let argc = args.len();
    while i < argc {
        let more = argc - 1 - i;
        let opt = &args[i][..];
        if xadd && opt == b"*" {
            break;
        } else if eq_ignore_case(opt, "maxlen") && more > 0 {
            if t.how.is_some() {
                return Err(Reply::error("ERR syntax error, MAXLEN and MINID options at the same time are not compatible"));
            }
            t.approx = false;
            let next = &args[i + 1][..];
            if more >= 2 && next == b"~" {
                t.approx = true;
                i += 1;
            } else if more >= 2 && next == b"=" {
                i += 1;
            }
            let n = ll_arg(&args[i + 1])?;
            if n < 0 {
                return Err(Reply::error("ERR The MAXLEN argument must be >= 0."));
            }
            i += 1;
            t.how = Some(Trim::MaxLen(n as u64));
        } else if eq_ignore_case(opt, "minid") && more > 0 {
            if t.how.is_some() {
                return Err(Reply::error("ERR syntax error, MAXLEN and MINID options at the same time are not compatible"));
            }
            t.approx = false;
            let next = &args[i + 1][..];
            if more >= 2 && next == b"~" {
                t.approx = true;
                i += 1;
            } else if more >= 2 && next == b"=" {
                i += 1;
            }
            let id = parse_strict_id(&args[i + 1])?;
            i += 1;
            t.how = Some(Trim::MinId(id));
        } else if eq_ignore_case(opt, "limit") && more > 0 {
            let n = ll_arg(&args[i + 1])?;
            if n < 0 {
                return Err(Reply::error("ERR The LIMIT argument must be >= 0."));
            }
            t.limit = n as u64;
            limit_given = true;
            i += 1;
        } else if xadd && eq_ignore_case(opt, "nomkstream") {
            t.nomkstream = true;
        } else if xadd {
            t.id = Some(parse_id_full(opt, 0, true, true)?);
            break;
        } else {
            return Err(errors::syntax());
        }
        i += 1;
    }
    t.id_at = i;
    if t.limit > 0 && t.how.is_none() {
        return Err(Reply::error(
            "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy",
        ));
    }
    if !xadd && t.how.is_none() {
        return Err(Reply::error(
            "ERR syntax error, XTRIM must be called with a trimming strategy",
        ));
    }
    if limit_given {
        if !t.approx {
            return Err(Reply::error(
                "ERR syntax error, LIMIT cannot be used without the special ~ option",
            ));
        }
    } else if t.approx {
        let per_node = ctx.shared.streams.limits().max_entries as i64;
        let limit = per_node.saturating_mul(100);
        t.limit = if limit <= 0 {
            10_000
        } else {
            limit.min(1_000_000) as u64
        };
    } else {
        t.limit = 0;
    }
    Ok(t)
}

/// XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT count]] *|id field value [field value ...]
pub fn xadd(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let t = parse_trim_args(ctx, args, true)?;
    let fields_at = t.id_at + 1;
    if args.len() < fields_at + 2 || !(args.len() - fields_at).is_multiple_of(2) {
        return Err(errors::wrong_arity("xadd"));
    }
    if let Some((id, true)) = t.id {
        if id.is_zero() {
            return Err(Reply::error(
                "ERR The ID specified in XADD must be greater than 0-0",
            ));
        }
    }
    let pairs: Vec<(&[u8], &[u8])> = args[fields_at..]
        .chunks(2)
        .map(|p| (&p[0][..], &p[1][..]))
        .collect();
    let now = u64::try_from(unix_ms(ctx)).unwrap_or(0);
    let limits = ctx.shared.streams.limits();
    let trimmed = std::cell::Cell::new(false);
    let add = |s: &mut Stream| -> Result<StreamId, Reply> {
        if s.last_id == StreamId::MAX {
            return Err(Reply::error(
                "ERR The stream has exhausted the last possible ID, unable to add more items",
            ));
        }
        let explicit = t.id.map(|(id, _)| id);
        let seq_given = t.id.is_some_and(|(_, g)| g);
        let id = s.next_id(explicit, seq_given, now).ok_or_else(|| {
            Reply::error(
                "ERR The ID specified in XADD is equal or smaller than the target stream top item",
            )
        })?;
        s.append(id, &pairs, limits);
        if let Some(how) = t.how {
            trimmed.set(s.trim(how, t.approx, t.limit) > 0);
        }
        Ok(id)
    };
    let id = if t.nomkstream {
        match modify(ctx, &args[1], add)? {
            None => return Ok(Reply::Null),
            Some(r) => r?,
        }
    } else {
        typed::write(ctx, &args[1], add)?
    };
    ctx.shared.blocking.signal(ctx.client.db, &args[1]);
    notify(ctx, nt::STREAM, "xadd", &args[1]);
    if trimmed.get() {
        notify(ctx, nt::STREAM, "xtrim", &args[1]);
    }
    Ok(id_reply(id))
}

/// XRANGE key start end [COUNT n] / XREVRANGE key end start [COUNT n]
fn range_command(ctx: &mut Ctx, args: &[Bytes], rev: bool) -> CmdResult {
    let (start_arg, end_arg) = if rev {
        (&args[3], &args[2])
    } else {
        (&args[2], &args[3])
    };
    let start = parse_start(start_arg)?;
    let end = parse_end(end_arg)?;
    let mut count: i64 = -1;
    let mut j = 4;
    while j < args.len() {
        if eq_ignore_case(&args[j], "count") && j + 1 < args.len() {
            count = ll_arg(&args[j + 1])?.max(0);
            j += 2;
        } else {
            return Err(errors::syntax());
        }
    }
    let reply = read(ctx, &args[1], |s| {
        if count == 0 {
            return Reply::NullArray;
        }
        let n = usize::try_from(count.max(0)).unwrap_or(usize::MAX);
        let (lo, hi) = (start, end);
        entries_reply(&s.range(lo, hi, n, rev))
    })?;
    Ok(reply.unwrap_or(Reply::Array(Vec::new())))
}

pub fn xrange(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    range_command(ctx, args, false)
}

pub fn xrevrange(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    range_command(ctx, args, true)
}

pub fn xlen(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    Ok(Reply::Integer(
        read(ctx, &args[1], |s| s.length())?.unwrap_or(0) as i64,
    ))
}

/// XDEL key id [id ...]
pub fn xdel(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    if read(ctx, &args[1], |_| ())?.is_none() {
        return Ok(Reply::Integer(0));
    }
    let ids = args[2..]
        .iter()
        .map(|a| parse_strict_id(a))
        .collect::<Result<Vec<_>, _>>()?;
    let deleted = modify(ctx, &args[1], |s| {
        ids.iter().filter(|id| s.delete(**id)).count()
    })?
    .unwrap_or(0);
    if deleted > 0 {
        notify(ctx, nt::STREAM, "xdel", &args[1]);
    }
    Ok(Reply::Integer(deleted as i64))
}

/// XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT count]
pub fn xtrim(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let t = parse_trim_args(ctx, args, false)?;
    let how = t.how.expect("checked by the parser");
    let deleted = modify(ctx, &args[1], |s| s.trim(how, t.approx, t.limit))?.unwrap_or(0);
    if deleted > 0 {
        notify(ctx, nt::STREAM, "xtrim", &args[1]);
    }
    Ok(Reply::Integer(deleted as i64))
}

/// XSETID key last-id [ENTRIESADDED entries-added] [MAXDELETEDID max-deleted-id]
pub fn xsetid(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let id = parse_strict_id(&args[2])?;
    let mut entries_added: Option<u64> = None;
    let mut max_deleted = StreamId::MIN;
    let mut i = 3;
    while i < args.len() {
        let more = args.len() - 1 - i;
        if eq_ignore_case(&args[i], "entriesadded") && more > 0 {
            let n = ll_arg(&args[i + 1])?;
            if n < 0 {
                return Err(Reply::error("ERR entries_added must be positive"));
            }
            entries_added = Some(n as u64);
        } else if eq_ignore_case(&args[i], "maxdeletedid") && more > 0 {
            max_deleted = parse_strict_id(&args[i + 1])?;
            if id < max_deleted {
                return Err(Reply::error("ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id"));
            }
        } else {
            return Err(errors::syntax());
        }
        i += 2;
    }
    let done = modify(ctx, &args[1], |s| {
        if s.length() > 0 {
            let top = s.edge_id(false).unwrap_or(StreamId::MIN);
            if id < top {
                return Err(Reply::error(
                    "ERR The ID specified in XSETID is smaller than the target stream top item",
                ));
            }
            if entries_added.is_some_and(|n| s.length() > n) {
                return Err(Reply::error("ERR The entries_added specified in XSETID is smaller than the target stream length"));
            }
        }
        s.last_id = id;
        if let Some(n) = entries_added {
            s.entries_added = n;
        }
        if !max_deleted.is_zero() {
            s.max_deleted_id = max_deleted;
        }
        Ok(())
    })?;
    match done {
        None => Err(Reply::error(errors::NO_SUCH_KEY)),
        Some(r) => {
            r?;
            notify(ctx, nt::STREAM, "xsetid", &args[1]);
            Ok(Reply::Ok)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_like_redis() {
        assert_eq!(
            parse_id_full(b"1-2", 0, true, false),
            Ok((StreamId::new(1, 2), true))
        );
        assert_eq!(
            parse_id_full(b"5", 7, true, false),
            Ok((StreamId::new(5, 7), true))
        );
        assert_eq!(
            parse_id_full(b"5-*", 0, true, true),
            Ok((StreamId::new(5, 0), false))
        );
        assert!(parse_id_full(b"5-*", 0, true, false).is_err());
        assert!(parse_id_full(b"-", 0, true, false).is_err());
        assert_eq!(
            parse_id_full(b"+", 0, false, false),
            Ok((StreamId::MAX, true))
        );
        assert!(parse_id_full(b"1-2-3", 0, true, false).is_err());
        assert!(parse_id_full(b"-1", 0, true, false).is_err());
        assert!(parse_id_full(b"abc", 0, true, false).is_err());
        assert!(parse_id_full(b"", 0, true, false).is_err());
        assert_eq!(
            parse_id_full(b"18446744073709551615-18446744073709551615", 0, true, false),
            Ok((StreamId::MAX, true))
        );
        assert!(parse_id_full(b"18446744073709551616", 0, true, false).is_err());
        assert_eq!(parse_start(b"(1-0"), Ok(StreamId::new(1, 1)));
        assert_eq!(parse_end(b"(1-0"), Ok(StreamId::new(0, u64::MAX)));
        assert!(parse_end(b"(0-0").is_err());
        assert!(parse_start(b"(-").is_err());
    }
}
