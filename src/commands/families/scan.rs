//! SSCAN, ZSCAN and HSCAN: cursor iteration over one collection.
//!
//! Like Redis, a small collection (an intset or listpack in Redis) is returned whole
//! with cursor 0. A larger one is walked in the order of a fixed hash of each member
//! (XXH3): the cursor is the hash to resume from, so an element present for the whole
//! iteration is returned exactly once, whatever is added or removed meanwhile.

use crate::commands::{eq_ignore_case, int_arg};
use crate::glob;
use crate::protocol::{errors, Reply};
use bytes::Bytes;

pub struct ScanArgs<'a> {
    cursor: u64,
    pattern: Option<&'a [u8]>,
    count: usize,
}

/// One page: the next cursor and the members, each with what follows it in the reply
/// (a score, a hash field's value, or `()` for a set).
pub struct Page<T> {
    next: u64,
    items: Vec<(Bytes, T)>,
}

impl<'a> ScanArgs<'a> {
    /// `cursor [MATCH pattern] [COUNT count]`, with Redis's errors.
    pub fn parse(args: &'a [Bytes]) -> Result<ScanArgs<'a>, Reply> {
        let cursor = std::str::from_utf8(&args[0])
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .ok_or_else(|| Reply::error("ERR invalid cursor"))?;
        let mut out = ScanArgs {
            cursor,
            pattern: None,
            count: 10,
        };
        let mut i = 1;
        while i < args.len() {
            let Some(value) = args.get(i + 1) else {
                return Err(errors::syntax());
            };
            if eq_ignore_case(&args[i], "match") {
                out.pattern = Some(value);
            } else if eq_ignore_case(&args[i], "count") {
                let n = int_arg(value)?;
                if n < 1 {
                    return Err(errors::syntax());
                }
                out.count = n as usize;
            } else {
                return Err(errors::syntax());
            }
            i += 2;
        }
        Ok(out)
    }

    /// The page of `items` this cursor asks for; `small` collections come whole.
    pub fn page<'i, T>(&self, items: impl Iterator<Item = (&'i [u8], T)>, small: bool) -> Page<T> {
        let keep = |m: &[u8]| self.pattern.is_none_or(|p| glob::matches(p, m));
        let own = |(m, s): (&[u8], T)| (Bytes::copy_from_slice(m), s);
        if small {
            return Page {
                next: 0,
                items: items.filter(|(m, _)| keep(m)).map(own).collect(),
            };
        }
        let mut rest: Vec<(u64, &[u8], T)> = items
            .map(|(m, s)| (xxhash_rust::xxh3::xxh3_64(m), m, s))
            .filter(|(h, _, _)| *h >= self.cursor)
            .collect();
        rest.sort_unstable_by_key(|(h, _, _)| *h);
        // Take `count`, plus any member sharing the last one's hash (the cursor
        // cannot split them).
        let mut end = self.count.min(rest.len());
        while end > 0 && end < rest.len() && rest[end].0 == rest[end - 1].0 {
            end += 1;
        }
        let next = match rest.get(end) {
            Some((h, _, _)) => *h,
            None => 0,
        };
        Page {
            next,
            items: rest
                .into_iter()
                .take(end)
                .filter(|(_, m, _)| keep(m))
                .map(|(_, m, s)| own((m, s)))
                .collect(),
        }
    }
}

/// What follows a member in a scan reply: nothing (SSCAN), its score (ZSCAN, a bulk
/// string as Redis prints it) or a hash field's value (HSCAN).
pub trait Companion {
    fn into_bulk(self) -> Option<Bytes>;
}

impl Companion for () {
    fn into_bulk(self) -> Option<Bytes> {
        None
    }
}

impl Companion for f64 {
    fn into_bulk(self) -> Option<Bytes> {
        Some(Bytes::from(crate::protocol::numfmt::fmt_g(self, 17)))
    }
}

impl Companion for Bytes {
    fn into_bulk(self) -> Option<Bytes> {
        Some(self)
    }
}

/// `[cursor, [member, (companion,) ...]]`.
pub fn reply<T: Companion>(page: Option<Page<T>>) -> Reply {
    let page = page.unwrap_or(Page {
        next: 0,
        items: Vec::new(),
    });
    let mut flat = Vec::new();
    for (m, s) in page.items {
        flat.push(Reply::Bulk(m));
        if let Some(s) = s.into_bulk() {
            flat.push(Reply::Bulk(s));
        }
    }
    Reply::Array(vec![
        Reply::Bulk(Bytes::from(page.next.to_string())),
        Reply::Array(flat),
    ])
}
