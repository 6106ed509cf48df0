//! Sorted-set algebra: ZUNION, ZINTER, ZDIFF, their STORE forms, and ZINTERCARD, with
//! the replies, errors and their order of Redis 7.0's zunionInterDiffGenericCommand.
//!
//! Inputs may be sorted sets or plain sets (a set member scores 1); a missing key is
//! empty. The fair semaphore of Redis in Action ages out its holders with
//! `ZINTERSTORE czset 2 czset sem WEIGHTS 1 0`. Every command here reads several keys
//! and runs holding the keyspace gate exclusively (table flag).

use crate::commands::families::zsets::{members_reply, store_members};
use crate::commands::notify as nt;
use crate::commands::{eq_ignore_case, int_arg, CmdResult, Ctx};
use crate::protocol::{errors, Reply};
use crate::store::{Set, ValueRef, ZSet};
use bytes::Bytes;
use std::cmp::Ordering;
use std::collections::hash_map::Entry as Slot;
use std::collections::HashMap;

#[derive(Clone, Copy, PartialEq)]
enum Op {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

/// What the command does with the result: the options it takes follow from it.
#[derive(Clone, Copy, PartialEq)]
enum Output {
    /// ZUNIONSTORE...: no WITHSCORES.
    Store,
    /// ZUNION...: WITHSCORES.
    Reply,
    /// ZINTERCARD: LIMIT only.
    Cardinality,
}

/// One input key's members, copied out of the keyspace.
enum Source {
    Missing,
    Set(Set),
    ZSet(ZSet),
}

impl Source {
    fn len(&self) -> usize {
        match self {
            Source::Missing => 0,
            Source::Set(s) => s.len(),
            Source::ZSet(z) => z.len(),
        }
    }

    fn score(&self, member: &[u8]) -> Option<f64> {
        match self {
            Source::Missing => None,
            Source::Set(s) => s.contains(member).then_some(1.0),
            Source::ZSet(z) => z.score(member),
        }
    }

    fn iter(&self) -> Box<dyn Iterator<Item = (&[u8], f64)> + '_> {
        match self {
            Source::Missing => Box::new(std::iter::empty()),
            Source::Set(s) => Box::new(s.iter().map(|m| (&m[..], 1.0))),
            Source::ZSet(z) => Box::new(z.iter()),
        }
    }
}

struct Input {
    source: Source,
    weight: f64,
}

/// A parsed request: its inputs (in argument order) and options.
struct Request {
    inputs: Vec<Input>,
    aggregate: Aggregate,
    with_scores: bool,
    /// ZINTERCARD's LIMIT; 0: none.
    limit: usize,
}

/// Parses `args` in Redis's order: numkeys (at `numkeys_at`), its count against the
/// arguments, the inputs' types, then the options, one by one.
fn parse(
    ctx: &Ctx,
    args: &[Bytes],
    numkeys_at: usize,
    op: Op,
    output: Output,
) -> Result<Request, Reply> {
    let numkeys = int_arg(&args[numkeys_at])?;
    if numkeys < 1 {
        return Err(Reply::error(format!(
            "ERR at least 1 input key is needed for '{}' command",
            String::from_utf8_lossy(&args[0]).to_ascii_lowercase()
        )));
    }
    let first = numkeys_at + 1;
    if numkeys as u64 > (args.len() - first) as u64 {
        return Err(errors::syntax());
    }
    let numkeys = numkeys as usize;
    let mut inputs = Vec::with_capacity(numkeys);
    for key in &args[first..first + numkeys] {
        let source = read_source(ctx, key)?;
        // The STORE forms are write commands: their reads send `keymiss` here.
        if output == Output::Store && matches!(source, Source::Missing) {
            nt::key_miss(ctx, key);
        }
        inputs.push(Input {
            source,
            weight: 1.0,
        });
    }
    let mut request = Request {
        inputs,
        aggregate: Aggregate::Sum,
        with_scores: false,
        limit: 0,
    };
    let scored = op != Op::Diff && output != Output::Cardinality;
    let mut i = first + numkeys;
    while i < args.len() {
        let (a, left) = (&args[i], args.len() - i);
        if scored && left > numkeys && eq_ignore_case(a, "weights") {
            for (input, w) in request.inputs.iter_mut().zip(&args[i + 1..]) {
                input.weight = crate::commands::families::zsets::parse_score(w)
                    .ok_or_else(|| Reply::error("ERR weight value is not a float"))?;
            }
            i += 1 + numkeys;
        } else if scored && left >= 2 && eq_ignore_case(a, "aggregate") {
            let how = &args[i + 1];
            request.aggregate = if eq_ignore_case(how, "sum") {
                Aggregate::Sum
            } else if eq_ignore_case(how, "min") {
                Aggregate::Min
            } else if eq_ignore_case(how, "max") {
                Aggregate::Max
            } else {
                return Err(errors::syntax());
            };
            i += 2;
        } else if output == Output::Reply && eq_ignore_case(a, "withscores") {
            request.with_scores = true;
            i += 1;
        } else if output == Output::Cardinality && left >= 2 && eq_ignore_case(a, "limit") {
            request.limit = match crate::commands::parse_i64(&args[i + 1]) {
                Some(n) if n >= 0 => n as usize,
                _ => return Err(Reply::error("ERR LIMIT can't be negative")),
            };
            i += 2;
        } else {
            return Err(errors::syntax());
        }
    }
    Ok(request)
}

/// The sorted set or set at `key`, copied; WRONGTYPE for any other type.
fn read_source(ctx: &Ctx, key: &[u8]) -> Result<Source, Reply> {
    let Some(entry) = ctx.db().get(key, ctx.now_ms) else {
        return Ok(Source::Missing);
    };
    match entry.value() {
        ValueRef::ZSet(z) => Ok(Source::ZSet(z.clone())),
        ValueRef::Set(s) => Ok(Source::Set(s.clone())),
        _ => Err(errors::wrongtype()),
    }
}

/// `weight * score`, with NaN (0 * inf) as 0.
fn weighted(input: &Input, score: f64) -> f64 {
    let v = input.weight * score;
    if v.is_nan() {
        0.0
    } else {
        v
    }
}

/// Folds `value` into `target` (Redis's zunionInterAggregate): a SUM of inf and -inf
/// is 0; MIN and MAX keep `target` against a NaN `value`.
fn aggregate(target: &mut f64, value: f64, how: Aggregate) {
    match how {
        Aggregate::Sum => {
            *target += value;
            if target.is_nan() {
                *target = 0.0;
            }
        }
        Aggregate::Min => {
            if value < *target {
                *target = value;
            }
        }
        Aggregate::Max => {
            if value > *target {
                *target = value;
            }
        }
    }
}

/// The members of every input with their aggregated scores. As in Redis, the inputs
/// are taken smallest first (`sorted_by_size`): the first is walked and each member
/// looked up in the others, in that order, which fixes how the scores add up. Only
/// the first weighted score has NaN turned to 0.
fn inter(inputs: &[Input], how: Aggregate) -> impl Iterator<Item = (&[u8], f64)> {
    let (first, rest) = inputs.split_first().expect("at least one input");
    first.source.iter().filter_map(move |(m, s)| {
        let mut score = weighted(first, s);
        for input in rest {
            aggregate(&mut score, input.source.score(m)? * input.weight, how);
        }
        Some((m, score))
    })
}

/// Every member of any input with its aggregated score, inputs taken smallest first
/// (see `inter`); each weighted score has NaN turned to 0.
fn union(inputs: &[Input], how: Aggregate) -> Vec<(Vec<u8>, f64)> {
    let mut acc: HashMap<&[u8], f64> = HashMap::new();
    for input in inputs {
        for (m, s) in input.source.iter() {
            let score = weighted(input, s);
            match acc.entry(m) {
                Slot::Occupied(e) => aggregate(e.into_mut(), score, how),
                Slot::Vacant(e) => {
                    e.insert(score);
                }
            }
        }
    }
    acc.into_iter().map(|(m, s)| (m.to_vec(), s)).collect()
}

/// The first input's members (with their scores) that no other input has.
fn diff(inputs: &[Input]) -> Vec<(Vec<u8>, f64)> {
    let (first, rest) = inputs.split_first().expect("at least one input");
    first
        .source
        .iter()
        .filter(|(m, _)| rest.iter().all(|i| i.source.score(m).is_none()))
        .map(|(m, s)| (m.to_vec(), s))
        .collect()
}

/// Orders the inputs by size, smallest first, keeping argument order between equal
/// sizes (Redis's qsort, glibc's merge sort).
fn sorted_by_size(mut inputs: Vec<Input>) -> Vec<Input> {
    inputs.sort_by_key(|i| i.source.len());
    inputs
}

/// The result of `op`, ordered as a sorted set: by score (-0 equal to 0), then member.
fn combine(request: Request, op: Op) -> Vec<(Vec<u8>, f64)> {
    let mut out = match op {
        Op::Diff => diff(&request.inputs),
        Op::Union => union(&sorted_by_size(request.inputs), request.aggregate),
        Op::Inter => inter(&sorted_by_size(request.inputs), request.aggregate)
            .map(|(m, s)| (m.to_vec(), s))
            .collect(),
    };
    out.sort_by(|(am, a), (bm, b)| {
        a.partial_cmp(b)
            .unwrap_or(Ordering::Equal)
            .then_with(|| am.cmp(bm))
    });
    out
}

/// ZUNION / ZINTER / ZDIFF numkeys key... [options]: the result's members, with their
/// scores under WITHSCORES (as ZRANGE replies them).
fn reply(ctx: &mut Ctx, args: &[Bytes], op: Op) -> CmdResult {
    let request = parse(ctx, args, 1, op, Output::Reply)?;
    let with_scores = request.with_scores;
    Ok(members_reply(ctx, combine(request, op), with_scores))
}

/// The STORE forms: the result replaces `destination` whatever it held (its TTL
/// goes); an empty result deletes it. A stored result has no TTL, so it is refused
/// under `--require-ttl`, as ZADD's new keys are.
fn store(ctx: &mut Ctx, args: &[Bytes], op: Op) -> CmdResult {
    let request = parse(ctx, args, 2, op, Output::Store)?;
    let members = combine(request, op);
    let event = match op {
        Op::Union => "zunionstore",
        Op::Inter => "zinterstore",
        Op::Diff => "zdiffstore",
    };
    store_members(ctx, &args[1], members, event)
}

pub fn zunion(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    reply(ctx, args, Op::Union)
}

pub fn zinter(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    reply(ctx, args, Op::Inter)
}

pub fn zdiff(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    reply(ctx, args, Op::Diff)
}

pub fn zunionstore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    store(ctx, args, Op::Union)
}

pub fn zinterstore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    store(ctx, args, Op::Inter)
}

pub fn zdiffstore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    store(ctx, args, Op::Diff)
}

/// ZINTERCARD numkeys key... [LIMIT limit]: how many members every input has,
/// counting no further than a non-zero limit.
pub fn zintercard(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let request = parse(ctx, args, 1, Op::Inter, Output::Cardinality)?;
    let limit = match request.limit {
        0 => usize::MAX,
        n => n,
    };
    let inputs = sorted_by_size(request.inputs);
    let n = inter(&inputs, request.aggregate).take(limit).count();
    Ok(Reply::Integer(n as i64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zset_input(pairs: &[(&str, f64)], weight: f64) -> Input {
        let mut z = ZSet::new();
        for (m, s) in pairs {
            z.insert(m.as_bytes(), *s);
        }
        Input {
            source: Source::ZSet(z),
            weight,
        }
    }

    /// Redis adds the inputs' scores smallest input first, and a SUM of inf and -inf
    /// is 0 at each step, so the order shows: 2-member inputs after the 1-member one.
    #[test]
    fn sums_follow_input_size_order() {
        let a = zset_input(&[("m", f64::INFINITY), ("x", 1.0)], 1.0);
        let b = zset_input(&[("m", f64::INFINITY), ("y", 1.0)], 1.0);
        let c = zset_input(&[("m", f64::NEG_INFINITY)], 1.0);
        let inputs = sorted_by_size(vec![a, b, c]);
        // (-inf + inf) -> 0, then + inf.
        let got: Vec<_> = inter(&inputs, Aggregate::Sum).collect();
        assert_eq!(got, [(&b"m"[..], f64::INFINITY)]);
    }

    #[test]
    fn nan_weights_count_as_zero_or_are_skipped() {
        let a = zset_input(&[("m", 5.0)], 1.0);
        let b = zset_input(&[("m", f64::INFINITY), ("n", 1.0)], 0.0);
        let inputs = sorted_by_size(vec![a, b]);
        // ZINTER: 0 * inf is NaN, which MIN ignores...
        assert_eq!(
            inter(&inputs, Aggregate::Min).next().map(|p| p.1),
            Some(5.0)
        );
        // ...and ZUNION counts as 0.
        let u = union(&inputs, Aggregate::Min);
        assert!(u.contains(&(b"m".to_vec(), 0.0)));
    }
}
