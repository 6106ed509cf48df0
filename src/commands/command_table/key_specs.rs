//! Where a command's keys are, as Redis 7's key specs describe them (its command JSON's
//! `key_specs`): each spec says how to find where its keys begin (an argument index or a
//! keyword) and how many follow (a range or a numkeys argument), with flags for what
//! the command does with them. The rows carry them as data; from them come the legacy
//! first/last/step positions (`legacy_range`) and COMMAND INFO's key specs
//! (`reply`). Redis's movable keys (numkeys, STREAMS, STORE) are read by
//! `Spec::key_positions` under the row's flags (`NUMKEYS_AT_1`...).

use crate::protocol::Reply;
use bytes::Bytes;

/// A key spec's flags, in Redis's order (its CMD_KEY_* bits): COMMAND INFO lists them so.
pub mod key_flags {
    pub const K_RO: u16 = 1;
    pub const K_RW: u16 = 1 << 1;
    pub const K_OW: u16 = 1 << 2;
    pub const K_RM: u16 = 1 << 3;
    pub const K_ACCESS: u16 = 1 << 4;
    pub const K_UPDATE: u16 = 1 << 5;
    pub const K_INSERT: u16 = 1 << 6;
    pub const K_DELETE: u16 = 1 << 7;
    // 1 << 8 and 1 << 9 are not_key and incomplete: no row of Redis 7.0's has them.
    pub const K_VARIABLE_FLAGS: u16 = 1 << 10;
    pub const NAMES: [&str; 11] = [
        "RO",
        "RW",
        "OW",
        "RM",
        "access",
        "update",
        "insert",
        "delete",
        "not_key",
        "incomplete",
        "variable_flags",
    ];
}

/// Where a spec's keys begin.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Begin {
    /// At this argument (the command name is 0).
    Index(i32),
    /// After the first match of the keyword, searched from `startfrom` (negative: from
    /// the end, backwards).
    Keyword(&'static str, i32),
    /// Only the command's own parsing knows (SORT's STORE).
    Unknown,
}

/// How many keys follow the beginning.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Find {
    /// The last key relative to the first (negative: from the end), every `step`th;
    /// `limit` (when `last` is -1) takes 1/limit of what is left.
    Range {
        last: i32,
        step: i32,
        limit: i32,
    },
    /// A numkeys argument at `at` (relative to the beginning), the first key at `first`.
    Keynum {
        at: i32,
        first: i32,
        step: i32,
    },
    Unknown,
}

/// One key spec: what the command does with the keys (`key_flags`), and where they are.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KeySpec {
    pub flags: u16,
    pub begin: Begin,
    pub find: Find,
}

pub const fn ks(flags: u16, begin: Begin, find: Find) -> KeySpec {
    KeySpec { flags, begin, find }
}

pub const fn at(index: i32) -> Begin {
    Begin::Index(index)
}

pub const fn keyword(word: &'static str, startfrom: i32) -> Begin {
    Begin::Keyword(word, startfrom)
}

pub const fn range(last: i32, step: i32, limit: i32) -> Find {
    Find::Range { last, step, limit }
}

pub const fn keynum(at: i32, first: i32, step: i32) -> Find {
    Find::Keynum { at, first, step }
}

pub const UNKNOWN_BEGIN: Begin = Begin::Unknown;
pub const UNKNOWN_FIND: Find = Find::Unknown;

impl KeySpec {
    /// The keys of a keyword spec with a range (XREAD's `STREAMS`, from 1; XREADGROUP's,
    /// from 4), as Redis's getKeysUsingKeySpecs finds them: the first match of the
    /// keyword (any case) from `startfrom` up to the second last argument, then the
    /// range after it (`limit`: 1/limit of the arguments left). `None` when the spec
    /// is of another kind, the keyword is not there, or the range is out of bounds
    /// (Redis then asks the command's own getkeys function).
    pub fn keyword_range(&self, args: &[Bytes]) -> Option<std::ops::Range<usize>> {
        let (
            Begin::Keyword(word, from),
            Find::Range {
                last,
                step: 1,
                limit,
            },
        ) = (self.begin, self.find)
        else {
            return None;
        };
        let argc = args.len() as i32;
        if from < 1 {
            return None; // searched backwards: no row has one
        }
        let at =
            (from..argc - 1).find(|&i| args[i as usize].eq_ignore_ascii_case(word.as_bytes()))?;
        let first = at + 1;
        let last = match (last, limit) {
            (l, _) if l >= 0 => first + l,
            (l, 0) => argc + l,
            (l, limit) => first + (argc - first) / limit + l,
        };
        if last >= argc || last < first || first >= argc {
            return None;
        }
        Some(first as usize..last as usize + 1)
    }
}

/// A command's legacy (first, last, step), derived from its key specs as Redis's
/// populateCommandLegacyRangeSpec derives them: a lone index + range spec as it is;
/// otherwise the span of the consecutive index + range specs of step 1 (a negative
/// last key wins over any positive one); (0, 0, 0) when there is none.
pub fn legacy_range(specs: &[KeySpec]) -> (i32, i32, i32) {
    if let [KeySpec {
        begin: Begin::Index(pos),
        find: Find::Range { last, step, .. },
        ..
    }] = specs
    {
        let last = if *last >= 0 { last + pos } else { *last };
        return (*pos, last, *step);
    }
    let mut first = i32::MAX;
    let mut last_abs: i32 = 0;
    let mut prev_last = 0;
    for spec in specs {
        let (Begin::Index(pos), Find::Range { last, step, .. }) = (spec.begin, spec.find) else {
            continue;
        };
        if step != 1 || (prev_last != 0 && prev_last != pos - 1) {
            continue;
        }
        first = first.min(pos);
        let abs = if last >= 0 { last + pos } else { last };
        // Unsigned, as Redis compares them: -1 is above every positive index.
        if abs as u32 > last_abs as u32 {
            last_abs = abs;
        }
        prev_last = last_abs;
    }
    if first == i32::MAX {
        return (0, 0, 0);
    }
    (first, last_abs, 1)
}

/// COMMAND INFO's key specs (its 9th field): one map per spec, as Redis's
/// addReplyCommandKeySpecs writes it (Redis's free-text `notes` are not kept).
pub fn reply(specs: &[KeySpec]) -> Reply {
    let text = |s: &str| Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()));
    let int = |n: i32| Reply::Integer(i64::from(n));
    let typed = |kind: &str, spec: Vec<(Reply, Reply)>| {
        Reply::Map(vec![
            (text("type"), text(kind)),
            (text("spec"), Reply::Map(spec)),
        ])
    };
    Reply::Array(
        specs
            .iter()
            .map(|s| {
                let flags = key_flags::NAMES
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| s.flags & (1 << i) != 0)
                    .map(|(_, n)| Reply::Status(Bytes::from_static(n.as_bytes())))
                    .collect();
                let begin = match s.begin {
                    Begin::Index(i) => typed("index", vec![(text("index"), int(i))]),
                    Begin::Keyword(word, from) => typed(
                        "keyword",
                        vec![
                            (text("keyword"), text(word)),
                            (text("startfrom"), int(from)),
                        ],
                    ),
                    Begin::Unknown => typed("unknown", vec![]),
                };
                let find = match s.find {
                    Find::Range { last, step, limit } => typed(
                        "range",
                        vec![
                            (text("lastkey"), int(last)),
                            (text("keystep"), int(step)),
                            (text("limit"), int(limit)),
                        ],
                    ),
                    Find::Keynum { at, first, step } => typed(
                        "keynum",
                        vec![
                            (text("keynumidx"), int(at)),
                            (text("firstkey"), int(first)),
                            (text("keystep"), int(step)),
                        ],
                    ),
                    Find::Unknown => typed("unknown", vec![]),
                };
                Reply::Map(vec![
                    (text("flags"), Reply::Set(flags)),
                    (text("begin_search"), begin),
                    (text("find_keys"), find),
                ])
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::key_flags::*;
    use super::*;

    #[test]
    fn legacy_ranges_are_derived_as_redis_derives_them() {
        // GET; MSET (step 2); BLPOP (to the second last); LMOVE (two consecutive
        // specs); ZUNIONSTORE (the destination, then numkeys: not a range); XREAD
        // (a keyword: none); GEORADIUS (the key, then keyword specs).
        let get = [ks(K_RO | K_ACCESS, at(1), range(0, 1, 0))];
        assert_eq!(legacy_range(&get), (1, 1, 1));
        let mset = [ks(K_OW | K_UPDATE, at(1), range(-1, 2, 0))];
        assert_eq!(legacy_range(&mset), (1, -1, 2));
        let blpop = [ks(K_RW | K_ACCESS | K_DELETE, at(1), range(-2, 1, 0))];
        assert_eq!(legacy_range(&blpop), (1, -2, 1));
        let lmove = [
            ks(K_RW | K_ACCESS | K_DELETE, at(1), range(0, 1, 0)),
            ks(K_RW | K_INSERT, at(2), range(0, 1, 0)),
        ];
        assert_eq!(legacy_range(&lmove), (1, 2, 1));
        let zunionstore = [
            ks(K_OW | K_UPDATE, at(1), range(0, 1, 0)),
            ks(K_RO | K_ACCESS, at(2), keynum(0, 1, 1)),
        ];
        assert_eq!(legacy_range(&zunionstore), (1, 1, 1));
        let xread = [ks(K_RO | K_ACCESS, keyword("STREAMS", 1), range(-1, 1, 2))];
        assert_eq!(legacy_range(&xread), (0, 0, 0));
        // SINTERSTORE-like: the destination, then every key after it to the end.
        let store = [
            ks(K_OW | K_UPDATE, at(1), range(0, 1, 0)),
            ks(K_RO | K_ACCESS, at(2), range(-1, 1, 0)),
        ];
        assert_eq!(legacy_range(&store), (1, -1, 1));
        assert_eq!(legacy_range(&[]), (0, 0, 0));
    }
}
