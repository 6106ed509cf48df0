//! LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN]: the longest common
//! subsequence of two strings, as Redis 7.0 computes it (a full dynamic-programming
//! table, walked back from the end, so ties resolve as Redis's do). The table is
//! refused, as in Redis, when it would pass `proto-max-bulk-len` bytes.

use crate::commands::{eq_ignore_case, int_arg, CmdResult, Ctx};
use crate::protocol::{errors, Reply};
use crate::store::ValueRef;
use bytes::Bytes;

fn string_at(ctx: &Ctx, key: &[u8]) -> Result<Vec<u8>, Reply> {
    match ctx.db().get(key, ctx.now_ms) {
        None => Ok(Vec::new()),
        Some(e) => match e.value() {
            ValueRef::Str(s) => Ok(s.to_vec()),
            _ => Err(Reply::error(
                "ERR The specified keys must contain string values",
            )),
        },
    }
}

pub fn lcs(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let a = string_at(ctx, &args[1]);
    let b = string_at(ctx, &args[2]);
    let (a, b) = (a?, b?);
    let (mut get_len, mut get_idx, mut with_len) = (false, false, false);
    let mut min_len: i64 = 0;
    let mut j = 3;
    while j < args.len() {
        let opt = &args[j];
        if eq_ignore_case(opt, "idx") {
            get_idx = true;
        } else if eq_ignore_case(opt, "len") {
            get_len = true;
        } else if eq_ignore_case(opt, "withmatchlen") {
            with_len = true;
        } else if eq_ignore_case(opt, "minmatchlen") && j + 1 < args.len() {
            min_len = int_arg(&args[j + 1])?.max(0);
            j += 1;
        } else {
            return Err(errors::syntax());
        }
        j += 1;
    }
    if get_len && get_idx {
        return Err(Reply::error(
            "ERR If you want both the length and indexes, please just use IDX.",
        ));
    }
    let (alen, blen) = (a.len(), b.len());
    let cells = (alen as u64 + 1) * (blen as u64 + 1);
    if cells * 4 > ctx.shared.config.proto_max_bulk_len as u64 {
        return Err(Reply::error(
            "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len",
        ));
    }
    let w = blen + 1;
    let mut t = vec![0u32; cells as usize];
    for i in 1..=alen {
        for k in 1..=blen {
            t[i * w + k] = if a[i - 1] == b[k - 1] {
                t[(i - 1) * w + k - 1] + 1
            } else {
                t[(i - 1) * w + k].max(t[i * w + k - 1])
            };
        }
    }
    let total = t[alen * w + blen];
    if get_len && !get_idx {
        return Ok(Reply::Integer(i64::from(total)));
    }
    let mut result = vec![0u8; total as usize];
    let mut idx = total as usize;
    let mut matches = Vec::new();
    // The range being grown backwards: (a start, a end, b start, b end).
    let mut range: Option<(usize, usize, usize, usize)> = None;
    let (mut i, mut k) = (alen, blen);
    while i > 0 && k > 0 {
        let mut emit = false;
        if a[i - 1] == b[k - 1] {
            result[idx - 1] = a[i - 1];
            range = match range {
                None => Some((i - 1, i - 1, k - 1, k - 1)),
                Some((sa, ea, sb, eb)) if sa == i && sb == k => Some((sa - 1, ea, sb - 1, eb)),
                Some(r) => {
                    emit = true;
                    Some(r)
                }
            };
            if let Some((sa, _, sb, _)) = range {
                emit |= sa == 0 || sb == 0;
            }
            idx -= 1;
            i -= 1;
            k -= 1;
        } else {
            if t[(i - 1) * w + k] > t[i * w + k - 1] {
                i -= 1;
            } else {
                k -= 1;
            }
            emit = range.is_some();
        }
        if let (true, Some((sa, ea, sb, eb))) = (emit, range) {
            let len = ea - sa + 1;
            if get_idx && (min_len == 0 || len as i64 >= min_len) {
                let pair = |s: usize, e: usize| {
                    Reply::Array(vec![Reply::Integer(s as i64), Reply::Integer(e as i64)])
                };
                let mut m = vec![pair(sa, ea), pair(sb, eb)];
                if with_len {
                    m.push(Reply::Integer(len as i64));
                }
                matches.push(Reply::Array(m));
            }
            range = None;
        }
    }
    if get_idx {
        return Ok(Reply::Map(vec![
            (
                Reply::Bulk(Bytes::from_static(b"matches")),
                Reply::Array(matches),
            ),
            (
                Reply::Bulk(Bytes::from_static(b"len")),
                Reply::Integer(i64::from(total)),
            ),
        ]));
    }
    Ok(Reply::Bulk(Bytes::from(result)))
}
