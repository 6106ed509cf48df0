//! SORT and SORT_RO, as Redis 7.0's sort.c: the elements of a list, set or sorted set,
//! sorted as numbers (or ALPHA: as bytes) by themselves or by the values a BY pattern
//! names (`weight_*`, `obj_*->field`), cut by LIMIT, each replaced by the values of
//! its GET patterns (`#`: the element itself), returned or STOREd as a list.

use crate::commands::notify::{self as nt, notify};
use crate::commands::{eq_ignore_case, int_arg, CmdResult, Ctx};
use crate::protocol::{errors, Reply};
use crate::store::{Entry, Value, ValueRef};
use bytes::Bytes;
use std::cmp::Ordering;
use std::collections::VecDeque;

/// SORT key [BY pattern] [LIMIT offset count] [GET pattern...] [ASC|DESC] [ALPHA]
/// [STORE destination]
pub fn sort(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    sort_generic(ctx, args, false)
}

/// SORT_RO: SORT without STORE.
pub fn sort_ro(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    sort_generic(ctx, args, true)
}

/// The kind of collection sorted: lists and sorted sets have an order of their own.
#[derive(PartialEq, Clone, Copy)]
enum Kind {
    List,
    Set,
    ZSet,
}

/// An element and what it sorts by.
struct Item {
    element: Bytes,
    score: f64,
    by: Option<Bytes>,
}

/// SORT's options, read in Redis's order (an ACL refusal of BY or GET comes as the
/// option is read).
struct SortOptions<'a> {
    desc: bool,
    alpha: bool,
    /// LIMIT offset count, as given (count -1: no LIMIT).
    limit_start: i64,
    limit_count: i64,
    store: Option<&'a Bytes>,
    by: Option<&'a Bytes>,
    /// A BY pattern without `*`: the collection's own order.
    dontsort: bool,
    gets: Vec<&'a Bytes>,
}

fn parse_options<'a>(
    ctx: &mut Ctx,
    args: &'a [Bytes],
    readonly: bool,
) -> Result<SortOptions<'a>, Reply> {
    let mut o = SortOptions {
        desc: false,
        alpha: false,
        limit_start: 0,
        limit_count: -1,
        store: None,
        by: None,
        dontsort: false,
        gets: Vec::new(),
    };
    let all_keys = ctx.client.current_user(&ctx.shared.acl).all_keys();
    let mut j = 2;
    while j < args.len() {
        let left = args.len() - j - 1;
        let a = &args[j];
        if eq_ignore_case(a, "asc") {
            o.desc = false;
        } else if eq_ignore_case(a, "desc") {
            o.desc = true;
        } else if eq_ignore_case(a, "alpha") {
            o.alpha = true;
        } else if eq_ignore_case(a, "limit") && left >= 2 {
            o.limit_start = int_arg(&args[j + 1])?;
            o.limit_count = int_arg(&args[j + 2])?;
            j += 2;
        } else if !readonly && eq_ignore_case(a, "store") && left >= 1 {
            o.store = Some(&args[j + 1]);
            j += 1;
        } else if eq_ignore_case(a, "by") && left >= 1 {
            o.by = Some(&args[j + 1]);
            if !c_str(&args[j + 1]).contains(&b'*') {
                o.dontsort = true;
            } else if !all_keys {
                return Err(Reply::error(
                    "ERR BY option of SORT denied due to insufficient ACL permissions.",
                ));
            }
            j += 1;
        } else if eq_ignore_case(a, "get") && left >= 1 {
            if !all_keys {
                return Err(Reply::error(
                    "ERR GET option of SORT denied due to insufficient ACL permissions.",
                ));
            }
            o.gets.push(&args[j + 1]);
            j += 1;
        } else {
            return Err(errors::syntax());
        }
        j += 1;
    }
    Ok(o)
}

/// SORT and SORT_RO (`readonly`: no STORE): the options, the collection's elements,
/// the range LIMIT keeps, in the order asked; then the reply or the stored list.
fn sort_generic(ctx: &mut Ctx, args: &[Bytes], readonly: bool) -> CmdResult {
    let mut o = parse_options(ctx, args, readonly)?;
    let (kind, elements) = elements_of(ctx, &args[1])?;
    // SORT is a write command (STORE): its read sends `keymiss` itself (SORT_RO's is
    // sent after it, as for every read-only command).
    if !readonly && !ctx.db().contains(&args[1], ctx.now_ms) {
        nt::key_miss(ctx, &args[1]);
    }
    // A set has no order of its own: when it would be stored or seen by a script
    // unsorted, it is sorted ALPHA so the result is the same everywhere.
    if o.dontsort && kind == Kind::Set && (o.store.is_some() || ctx.in_script) {
        o.dontsort = false;
        o.alpha = true;
        o.by = None;
    }
    let (mut start, mut end) = limit_range(elements.len() as i64, o.limit_start, o.limit_count);
    let mut items: Vec<Item> = if o.dontsort && kind != Kind::Set {
        // The collection's own order (reversed by DESC), just the range.
        let len = (end - start + 1).max(0) as usize;
        let picked: Vec<Bytes> = if end >= start {
            if o.desc {
                elements
                    .iter()
                    .rev()
                    .skip(start as usize)
                    .take(len)
                    .cloned()
                    .collect()
            } else {
                elements
                    .iter()
                    .skip(start as usize)
                    .take(len)
                    .cloned()
                    .collect()
            }
        } else {
            Vec::new()
        };
        start = 0;
        end = picked.len() as i64 - 1;
        picked.into_iter().map(item).collect()
    } else {
        elements.into_iter().map(item).collect()
    };
    if !o.dontsort {
        order(ctx, &mut items, &o)?;
    }
    let rows: &[Item] = if end >= start {
        &items[start as usize..=end as usize]
    } else {
        &[]
    };
    match o.store {
        None => Ok(reply(ctx, rows, &o.gets)),
        Some(dest) => store(ctx, dest, rows, &o.gets),
    }
}

/// The collection at `key` and its elements in its own order (a missing key: an
/// empty list).
fn elements_of(ctx: &Ctx, key: &[u8]) -> Result<(Kind, Vec<Bytes>), Reply> {
    Ok(match ctx.db().get(key, ctx.now_ms) {
        None => (Kind::List, Vec::new()),
        Some(e) => match e.value() {
            ValueRef::List(l) => (Kind::List, l.iter().cloned().collect()),
            ValueRef::Set(s) => (Kind::Set, s.members()),
            ValueRef::ZSet(z) => (
                Kind::ZSet,
                z.iter().map(|(m, _)| Bytes::copy_from_slice(m)).collect(),
            ),
            _ => return Err(errors::wrongtype()),
        },
    })
}

/// LIMIT over `n` elements, clamped as Redis clamps it: the first and last index kept
/// (last < first: none).
fn limit_range(n: i64, limit_start: i64, limit_count: i64) -> (i64, i64) {
    let mut start = limit_start.max(0).min(n);
    let limit_count = limit_count.max(-1).min(n);
    let mut end = if limit_count < 0 {
        n - 1
    } else {
        start + limit_count - 1
    };
    if start >= n {
        start = n - 1;
        end = n - 2;
    }
    (start, end.min(n - 1))
}

/// Sorts `items` by their scores (or ALPHA: bytes), from the elements or the values
/// the BY pattern names; DESC reverses.
fn order(ctx: &Ctx, items: &mut [Item], o: &SortOptions) -> Result<(), Reply> {
    let mut bad_score = false;
    for it in items.iter_mut() {
        let value = match o.by {
            Some(pattern) => match lookup(ctx, pattern, &it.element) {
                Some(v) => v,
                None => continue,
            },
            None => it.element.clone(),
        };
        if o.alpha {
            if o.by.is_some() {
                it.by = Some(value);
            }
        } else {
            match sort_score(&value) {
                Some(s) => it.score = s,
                None => bad_score = true,
            }
        }
    }
    if bad_score {
        return Err(Reply::error(
            "ERR One or more scores can't be converted into double",
        ));
    }
    let by_pattern = o.by.is_some();
    items.sort_by(|a, b| {
        let ord = compare(a, b, o.alpha, by_pattern);
        if o.desc {
            ord.reverse()
        } else {
            ord
        }
    });
    Ok(())
}

/// The rows as the reply: each element, or the values of its GET patterns (null for
/// a missing one).
fn reply(ctx: &Ctx, rows: &[Item], gets: &[&Bytes]) -> Reply {
    let mut out = Vec::with_capacity(rows.len() * gets.len().max(1));
    for row in rows {
        if gets.is_empty() {
            out.push(Reply::Bulk(row.element.clone()));
        }
        for pattern in gets {
            out.push(lookup(ctx, pattern, &row.element).map_or(Reply::Null, Reply::Bulk));
        }
    }
    Reply::Array(out)
}

/// STORE: the rows (as `reply` gives them, a missing value empty) as a list at
/// `dest`, or `dest` deleted when there are none. Replies with the list's length.
fn store(ctx: &mut Ctx, dest: &Bytes, rows: &[Item], gets: &[&Bytes]) -> CmdResult {
    let mut list = VecDeque::with_capacity(rows.len() * gets.len().max(1));
    for row in rows {
        if gets.is_empty() {
            list.push_back(row.element.clone());
        }
        for pattern in gets {
            list.push_back(lookup(ctx, pattern, &row.element).unwrap_or_default());
        }
    }
    let stored = list.len();
    if list.is_empty() {
        if ctx.db().remove(dest, ctx.now_ms) {
            notify(ctx, nt::GENERIC, "del", dest);
        }
    } else {
        ctx.shared.fence.check_has_ttl()?;
        ctx.db().insert(dest, Entry::new(Value::List(list)));
        ctx.shared.blocking.signal(ctx.client.db, dest);
        notify(ctx, nt::LIST, "sortstore", dest);
    }
    Ok(Reply::Integer(stored as i64))
}

fn item(element: Bytes) -> Item {
    Item {
        element,
        score: 0.0,
        by: None,
    }
}

/// Redis's sortCompare (before DESC): numbers, ties by the elements' bytes; ALPHA by
/// the BY values (a missing one first) or the elements.
fn compare(a: &Item, b: &Item, alpha: bool, by_pattern: bool) -> Ordering {
    if !alpha {
        return a
            .score
            .partial_cmp(&b.score)
            .unwrap_or(Ordering::Equal)
            .then_with(|| a.element.cmp(&b.element));
    }
    if by_pattern {
        return match (&a.by, &b.by) {
            (Some(x), Some(y)) => x.cmp(y),
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Less,
            (Some(_), None) => Ordering::Greater,
        };
    }
    a.element.cmp(&b.element)
}

/// A value as SORT reads a number: C's strtod over all of it, no NaN, no range error
/// (an empty string is 0, as strtod leaves it).
fn sort_score(v: &[u8]) -> Option<f64> {
    if v.is_empty() {
        return Some(0.0);
    }
    let (score, range_error) = super::zsets::strtod(v)?;
    (!range_error && !score.is_nan()).then_some(score)
}

/// A pattern up to its first NUL, as Redis's C string functions see it.
fn c_str(p: &[u8]) -> &[u8] {
    &p[..p.iter().position(|&b| b == 0).unwrap_or(p.len())]
}

/// Redis's lookupKeyByPattern: `#` is the element itself; otherwise the first `*` is
/// replaced by the element and the key read as a string, or, with `->field` after
/// the `*`, as a hash's field. No `*`, a missing key or the wrong type: `None`.
fn lookup(ctx: &Ctx, pattern: &[u8], element: &Bytes) -> Option<Bytes> {
    let cpat = c_str(pattern);
    if cpat == b"#" {
        return Some(element.clone());
    }
    let star = cpat.iter().position(|&b| b == b'*')?;
    let arrow = cpat[star + 1..]
        .windows(2)
        .position(|w| w == b"->")
        .map(|i| star + 1 + i)
        .filter(|&f| f + 2 < cpat.len());
    let key_end = arrow.unwrap_or(pattern.len());
    let mut key = Vec::with_capacity(key_end + element.len());
    key.extend_from_slice(&pattern[..star]);
    key.extend_from_slice(element);
    key.extend_from_slice(&pattern[star + 1..key_end]);
    let entry = ctx.db().get(&key, ctx.now_ms)?;
    match (entry.value(), arrow) {
        (ValueRef::Str(s), None) => Some(Bytes::copy_from_slice(s)),
        (ValueRef::Hash(h), Some(f)) => h.get(&pattern[f + 2..]).cloned(),
        _ => None,
    }
}
