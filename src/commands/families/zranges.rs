//! Sorted-set ranges: ZRANGE (BYSCORE, BYLEX, REV, LIMIT, WITHSCORES) and its older
//! forms ZRANGEBYSCORE, ZREVRANGE, ZREVRANGEBYSCORE, ZRANGEBYLEX, ZREVRANGEBYLEX;
//! ZRANGESTORE; ZCOUNT, ZLEXCOUNT; ZREMRANGEBYSCORE, ZREMRANGEBYRANK, ZREMRANGEBYLEX.
//!
//! One parser (Redis's zrangeGenericCommand) serves every range command, so their
//! options, errors and checks come in the same order as in Redis 7.

use crate::commands::families::typed::index_range;
use crate::commands::families::zsets::{members_reply, modify_notify, read, store_members, strtod};
use crate::commands::notify as nt;
use crate::commands::{eq_ignore_case, int_arg, CmdResult, Ctx};
use crate::protocol::{errors, Reply};
use crate::store::{LexBound, ScoreBound, ZSet};
use bytes::Bytes;

const NOT_FLOAT_RANGE: &str = "ERR min or max is not a float";
const NOT_LEX_RANGE: &str = "ERR min or max not valid string range item";

/// A score bound as Redis's zslParseRange reads it: `(` makes it exclusive; the rest
/// goes through strtod, which also accepts leading spaces and an empty string (0).
fn score_bound(arg: &[u8]) -> Result<ScoreBound, Reply> {
    let (exclusive, text) = match arg.first() {
        Some(b'(') => (true, &arg[1..]),
        _ => (false, arg),
    };
    let value = if text.is_empty() {
        0.0
    } else {
        strtod(text)
            .map(|(v, _)| v)
            .filter(|v| !v.is_nan())
            .ok_or_else(|| Reply::error(NOT_FLOAT_RANGE))?
    };
    Ok(ScoreBound { value, exclusive })
}

fn lex_bound(arg: &[u8]) -> Result<LexBound, Reply> {
    match arg {
        b"+" => Ok(LexBound::Max),
        b"-" => Ok(LexBound::Min),
        [b'(', rest @ ..] => Ok(LexBound::Exclusive(rest.to_vec())),
        [b'[', rest @ ..] => Ok(LexBound::Inclusive(rest.to_vec())),
        _ => Err(Reply::error(NOT_LEX_RANGE)),
    }
}

fn score_range(min: &[u8], max: &[u8]) -> Result<(ScoreBound, ScoreBound), Reply> {
    match (score_bound(min), score_bound(max)) {
        (Ok(a), Ok(b)) => Ok((a, b)),
        _ => Err(Reply::error(NOT_FLOAT_RANGE)),
    }
}

fn lex_range(min: &[u8], max: &[u8]) -> Result<(LexBound, LexBound), Reply> {
    Ok((lex_bound(min)?, lex_bound(max)?))
}

#[derive(Clone, Copy, PartialEq)]
enum By {
    Rank,
    Score,
    Lex,
}

/// A parsed range request.
struct Range {
    by: By,
    rev: bool,
    offset: i64,
    /// -1: no limit.
    limit: i64,
    with_scores: bool,
}

/// Applies LIMIT as Redis does: a negative offset gives nothing, a negative count
/// means all.
fn limited<'a>(
    iter: Box<dyn Iterator<Item = (&'a [u8], f64)> + 'a>,
    offset: i64,
    limit: i64,
) -> Vec<(Vec<u8>, f64)> {
    if offset < 0 {
        return Vec::new();
    }
    let take = usize::try_from(limit).unwrap_or(usize::MAX);
    iter.skip(offset as usize)
        .take(take)
        .map(|(m, s)| (m.to_vec(), s))
        .collect()
}

/// The members of `z` a range asks for, in reply order.
fn select(z: &ZSet, r: &Range, min: &[u8], max: &[u8]) -> Result<Vec<(Vec<u8>, f64)>, Reply> {
    Ok(match r.by {
        By::Rank => {
            let (start, end) = (int_arg(min)?, int_arg(max)?);
            match index_range(start, end, z.len()) {
                Some((a, b)) => z
                    .by_rank(a, b, r.rev)
                    .into_iter()
                    .map(|(m, s)| (m.to_vec(), s))
                    .collect(),
                None => Vec::new(),
            }
        }
        By::Score => {
            let (lo, hi) = score_range(min, max)?;
            limited(z.by_score(lo, hi, r.rev), r.offset, r.limit)
        }
        By::Lex => {
            let (lo, hi) = lex_range(min, max)?;
            // The offset is skipped inside the scan (see `ZSet::by_lex`).
            match usize::try_from(r.offset) {
                Ok(offset) => limited(z.by_lex(&lo, &hi, r.rev, offset), 0, r.limit),
                Err(_) => Vec::new(),
            }
        }
    })
}

/// Redis's zrangeGenericCommand: `args` is `key min max [options]`; `by` and `rev`
/// are fixed by the older commands (which then refuse the keywords that set them).
fn zrange_generic(ctx: &mut Ctx, args: &[Bytes], by: Option<By>, rev: Option<bool>) -> CmdResult {
    range_generic(ctx, args, by, rev, None)
}

/// ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count]: stores the
/// range (an empty one deletes dst) and answers its size. It is ZRANGE's parser over
/// the arguments after dst (so args[1] is the source there), without WITHSCORES.
pub fn zrangestore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    range_generic(ctx, &args[1..], None, None, Some(&args[1]))
}

/// ZRANGE and ZRANGESTORE: `store` is ZRANGESTORE's destination.
fn range_generic(
    ctx: &mut Ctx,
    args: &[Bytes],
    by: Option<By>,
    rev: Option<bool>,
    store: Option<&Bytes>,
) -> CmdResult {
    let (mut by_opt, mut rev_opt) = (by, rev);
    let mut r = Range {
        by: By::Rank,
        rev: false,
        offset: 0,
        limit: -1,
        with_scores: false,
    };
    let mut i = 4;
    while i < args.len() {
        let a = &args[i];
        let left = args.len() - i - 1;
        if store.is_none() && eq_ignore_case(a, "withscores") {
            r.with_scores = true;
        } else if eq_ignore_case(a, "limit") && left >= 2 {
            r.offset = int_arg(&args[i + 1])?;
            r.limit = int_arg(&args[i + 2])?;
            i += 2;
        } else if rev_opt.is_none() && eq_ignore_case(a, "rev") {
            rev_opt = Some(true);
        } else if by_opt.is_none() && eq_ignore_case(a, "bylex") {
            by_opt = Some(By::Lex);
        } else if by_opt.is_none() && eq_ignore_case(a, "byscore") {
            by_opt = Some(By::Score);
        } else {
            return Err(errors::syntax());
        }
        i += 1;
    }
    r.by = by_opt.unwrap_or(By::Rank);
    r.rev = rev_opt.unwrap_or(false);
    if r.limit != -1 && r.by == By::Rank {
        return Err(Reply::error(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    if r.with_scores && r.by == By::Lex {
        return Err(Reply::error(
            "ERR syntax error, WITHSCORES not supported in combination with BYLEX",
        ));
    }
    // Reversed score and lex ranges are written max first.
    let (min, max) = if r.rev && r.by != By::Rank {
        (&args[3], &args[2])
    } else {
        (&args[2], &args[3])
    };
    // The range is parsed before the key is read, as in Redis.
    match r.by {
        By::Rank => {
            int_arg(min)?;
            int_arg(max)?;
        }
        By::Score => {
            score_range(min, max)?;
        }
        By::Lex => {
            lex_range(min, max)?;
        }
    }
    let picked = read(ctx, &args[1], |z| select(z, &r, min, max))?.transpose()?;
    // ZRANGESTORE is a write command: its read sends `keymiss` itself.
    if store.is_some() && picked.is_none() {
        nt::key_miss(ctx, &args[1]);
    }
    let picked = picked.unwrap_or_default();
    match store {
        Some(dst) => store_members(ctx, dst, picked, "zrangestore"),
        None => Ok(members_reply(ctx, picked, r.with_scores)),
    }
}

pub fn zrange(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    zrange_generic(ctx, args, None, None)
}

pub fn zrangebyscore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    zrange_generic(ctx, args, Some(By::Score), Some(false))
}

pub fn zrevrangebyscore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    zrange_generic(ctx, args, Some(By::Score), Some(true))
}

pub fn zrevrange(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    zrange_generic(ctx, args, Some(By::Rank), Some(true))
}

pub fn zrangebylex(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    zrange_generic(ctx, args, Some(By::Lex), Some(false))
}

pub fn zrevrangebylex(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    zrange_generic(ctx, args, Some(By::Lex), Some(true))
}

/// ZCOUNT key min max
pub fn zcount(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (lo, hi) = score_range(&args[2], &args[3])?;
    let n = read(ctx, &args[1], |z| z.by_score(lo, hi, false).count())?.unwrap_or(0);
    Ok(Reply::Integer(n as i64))
}

/// ZLEXCOUNT key min max
pub fn zlexcount(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (lo, hi) = lex_range(&args[2], &args[3])?;
    let n = read(ctx, &args[1], |z| z.by_lex(&lo, &hi, false, 0).count())?.unwrap_or(0);
    Ok(Reply::Integer(n as i64))
}

/// Removes the members `pick` names; the key goes with its last member.
fn remove_range(
    ctx: &mut Ctx,
    key: &[u8],
    event: &'static str,
    pick: impl FnOnce(&ZSet) -> Vec<Vec<u8>>,
) -> CmdResult {
    let removed = modify_notify(ctx, key, |z| {
        let doomed = pick(z);
        let n = doomed.iter().filter(|m| z.remove(m)).count();
        (n, (n > 0).then_some(event))
    })?;
    Ok(Reply::Integer(removed.unwrap_or(0) as i64))
}

fn owned<'a>(iter: impl Iterator<Item = (&'a [u8], f64)>) -> Vec<Vec<u8>> {
    iter.map(|(m, _)| m.to_vec()).collect()
}

pub fn zremrangebyscore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (lo, hi) = score_range(&args[2], &args[3])?;
    remove_range(ctx, &args[1], "zremrangebyscore", |z| {
        owned(z.by_score(lo, hi, false))
    })
}

pub fn zremrangebylex(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (lo, hi) = lex_range(&args[2], &args[3])?;
    remove_range(ctx, &args[1], "zremrangebylex", |z| {
        owned(z.by_lex(&lo, &hi, false, 0))
    })
}

pub fn zremrangebyrank(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (start, end) = (int_arg(&args[2])?, int_arg(&args[3])?);
    remove_range(ctx, &args[1], "zremrangebyrank", |z| {
        match index_range(start, end, z.len()) {
            Some((a, b)) => owned(z.by_rank(a, b, false).into_iter()),
            None => Vec::new(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn score_bounds_parse_like_zslparserange() {
        let b = |s: &str| score_bound(s.as_bytes()).ok();
        assert_eq!(b("(1.5").map(|x| (x.value, x.exclusive)), Some((1.5, true)));
        assert_eq!(b("-inf").map(|x| x.value), Some(f64::NEG_INFINITY));
        assert_eq!(b("+inf").map(|x| x.value), Some(f64::INFINITY));
        assert_eq!(b("").map(|x| x.value), Some(0.0));
        assert_eq!(b(" 2").map(|x| x.value), Some(2.0));
        assert_eq!(b("0x10").map(|x| x.value), Some(16.0));
        assert!(b("nan").is_none());
        assert!(b("1x").is_none());
        assert!(b("((1").is_none());
    }

    #[test]
    fn lex_bounds_need_a_prefix() {
        assert!(lex_bound(b"a").is_err());
        assert!(lex_bound(b"+a").is_err());
        assert_eq!(lex_bound(b"[a"), Ok(LexBound::Inclusive(b"a".to_vec())));
        assert_eq!(lex_bound(b"-"), Ok(LexBound::Min));
    }

    #[test]
    fn rank_ranges_normalise_like_redis() {
        assert_eq!(index_range(0, -1, 3), Some((0, 2)));
        assert_eq!(index_range(-10, 10, 3), Some((0, 2)));
        assert_eq!(index_range(2, 1, 3), None);
        assert_eq!(index_range(3, 5, 3), None);
        assert_eq!(index_range(0, -1, 0), None);
    }
}
