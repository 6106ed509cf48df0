//! MEMORY USAGE / STATS / DOCTOR / MALLOC-STATS / PURGE / HELP, with Redis 7's reply
//! shapes. The numbers are this server's own: glibc chunks, table slots, and the
//! counting allocator (`crate::alloc`).

use crate::alloc::{peak_memory, rss_bytes, startup_memory, used_memory};
use crate::commands::{eq_ignore_case, CmdResult, Ctx};
use crate::protocol::{errors, parse_int, Reply};
use crate::store::ValueRef;
use bytes::Bytes;
use std::mem::size_of;

/// Redis's OBJ_COMPUTE_SIZE_DEF_SAMPLES.
const DEFAULT_SAMPLES: usize = 5;

const HELP: &[&str] = &[
    "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DOCTOR",
    "    Return memory problems reports.",
    "MALLOC-STATS",
    "    Return internal statistics report from the memory allocator.",
    "PURGE",
    "    Attempt to purge dirty pages for reclamation by the allocator.",
    "STATS",
    "    Return information about the memory usage of the server.",
    "USAGE <key> [SAMPLES <count>]",
    "    Return memory in bytes used by <key> and its value. Nested values are",
    "    sampled up to <count> times (default: 5, 0 means sample all).",
    "HELP",
    "    Prints this help.",
];

pub fn memory(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let sub = &args[1];
    // (name, arity counting MEMORY and the subcommand; negative: at least)
    let subs: [(&str, i64); 6] = [
        ("help", 2),
        ("usage", -3),
        ("stats", 2),
        ("malloc-stats", 2),
        ("doctor", 2),
        ("purge", 2),
    ];
    let Some(&(name, arity)) = subs.iter().find(|(n, _)| eq_ignore_case(sub, n)) else {
        return Err(errors::unknown_subcommand("memory", sub));
    };
    let n = args.len() as i64;
    if (arity > 0 && n != arity) || (arity < 0 && n < -arity) {
        return Err(errors::wrong_arity(&format!("memory|{name}")));
    }
    match name {
        "help" => Ok(Reply::Array(
            HELP.iter()
                .map(|l| Reply::Status(Bytes::from_static(l.as_bytes())))
                .collect(),
        )),
        "usage" => usage(ctx, args),
        "stats" => Ok(stats(ctx)),
        "malloc-stats" => Ok(Reply::Bulk(Bytes::from_static(
            b"Stats not supported for the current allocator",
        ))),
        "doctor" => Ok(Reply::Verbatim("txt", Bytes::from(doctor(ctx)))),
        _ => {
            crate::alloc::trim();
            Ok(Reply::Ok)
        }
    }
}

/// MEMORY USAGE key [SAMPLES count]: the key's slot and its block (key, deadline and a
/// string value, or a collection's pointer), plus the collection; nested
/// values are estimated from `count` sampled elements (0: all), as Redis does.
fn usage(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let mut samples = DEFAULT_SAMPLES;
    let mut i = 3;
    while i < args.len() {
        if eq_ignore_case(&args[i], "samples") && i + 1 < args.len() {
            let n = parse_int(&args[i + 1]).ok_or_else(errors::not_integer)?;
            if n < 0 {
                return Err(errors::syntax());
            }
            samples = if n == 0 { usize::MAX } else { n as usize };
            i += 2;
        } else {
            return Err(errors::syntax());
        }
    }
    let Some(found) = ctx.db().get(&args[2], ctx.now_ms) else {
        return Ok(Reply::Null);
    };
    let (slot, block) = found.footprint();
    let bytes = slot_bytes() + slot + chunk(block) + value_bytes(found.value(), samples);
    Ok(Reply::Integer(bytes as i64))
}

/// What glibc sets aside for malloc(n): 16-byte steps with an 8-byte header, at
/// least 32 bytes (nothing for n = 0: an empty `Bytes` allocates nothing).
fn chunk(n: usize) -> usize {
    if n == 0 {
        0
    } else {
        ((n + 8 + 15) & !15).max(32)
    }
}

/// One slot of a shard table (a 4-byte handle to the entry's slab slot) and its
/// control byte, at hashbrown's 7/8 load.
fn slot_bytes() -> usize {
    (size_of::<u32>() + 1) * 8 / 7
}

/// A hash table of `len` items of `item` bytes each, at 7/8 load.
fn table_bytes(len: usize, item: usize) -> usize {
    len * (item + 1) * 8 / 7
}

/// The average of `f` over the first `samples` items, times `len`.
fn sampled<'a, T: 'a>(
    items: impl Iterator<Item = T>,
    len: usize,
    samples: usize,
    f: impl Fn(T) -> usize,
) -> usize {
    let (mut n, mut sum) = (0usize, 0usize);
    for item in items.take(samples) {
        n += 1;
        sum += f(item);
    }
    (sum * len).checked_div(n).unwrap_or(0)
}

/// What a value holds outside its entry's block (a string is inside it).
fn value_bytes(value: ValueRef<'_>, samples: usize) -> usize {
    match value {
        ValueRef::Str(_) => 0,
        ValueRef::Hash(h) => {
            table_bytes(h.capacity(), size_of::<(Bytes, Bytes)>())
                + sampled(h.iter(), h.len(), samples, |(k, v)| {
                    chunk(k.len()) + chunk(v.len())
                })
        }
        ValueRef::List(l) => {
            l.capacity() * size_of::<Bytes>()
                + sampled(l.iter(), l.len(), samples, |e| chunk(e.len()))
        }
        ValueRef::Set(s) => {
            table_bytes(s.len(), size_of::<Bytes>())
                + sampled(s.iter(), s.len(), samples, |m| chunk(m.len()))
        }
        ValueRef::Stream(st) => st.heap_bytes(),
        ValueRef::ZSet(z) => {
            // A member in the score table and in the ordered tree (score + member).
            let per = (size_of::<(Bytes, f64)>() + 1) * 8 / 7 + size_of::<(f64, Bytes)>();
            z.len() * per + sampled(z.iter(), z.len(), samples, |(m, _)| chunk(m.len()))
        }
    }
}

/// MEMORY STATS, in Redis 7.0's order and names.
fn stats(ctx: &Ctx) -> Reply {
    let used = used_memory();
    let peak = peak_memory();
    let startup = startup_memory();
    let rss = rss_bytes();
    let int = |n: usize| Reply::Integer(n as i64);
    let key = |s: &str| Reply::Bulk(Bytes::from(s.to_string()));
    let mut out: Vec<(Reply, Reply)> = vec![
        (key("peak.allocated"), int(peak)),
        (key("total.allocated"), int(used)),
        (key("startup.allocated"), int(startup)),
        (key("replication.backlog"), int(0)),
        (key("clients.slaves"), int(0)),
        (key("clients.normal"), int(0)),
        (key("cluster.links"), int(0)),
        (key("aof.buffer"), int(0)),
        (key("lua.caches"), int(0)),
        (key("functions.caches"), int(0)),
    ];
    let mut overhead = startup;
    let mut keys = 0;
    for (i, db) in ctx.shared.keyspace.dbs().iter().enumerate() {
        if db.is_empty() {
            continue;
        }
        keys += db.len();
        // The tables hold handles to the entries (no separate expires table, and no
        // deadline index: the slab pages keep their lowest deadline in their page
        // table, which is counted with the entries' slab).
        let main = db.table_bytes();
        let expires = 0;
        overhead += main + expires;
        out.push((
            key(&format!("db.{i}")),
            Reply::Map(vec![
                (key("overhead.hashtable.main"), int(main)),
                (key("overhead.hashtable.expires"), int(expires)),
                (key("overhead.hashtable.slot-to-keys"), int(0)),
            ]),
        ));
    }
    let dataset = used.saturating_sub(overhead);
    let net = used.saturating_sub(startup);
    let ratio = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    out.extend([
        (key("overhead.total"), int(overhead)),
        (key("keys.count"), int(keys)),
        (
            key("keys.bytes-per-key"),
            int(net.checked_div(keys).unwrap_or(0)),
        ),
        (key("dataset.bytes"), int(dataset)),
        (
            key("dataset.percentage"),
            Reply::Double(ratio(dataset * 100, net)),
        ),
        (
            key("peak.percentage"),
            Reply::Double(ratio(used * 100, peak)),
        ),
        // glibc has no separate "active" and "resident" figures: the allocator's
        // view is what it handed out, and everything resident is counted below.
        (key("allocator.allocated"), int(used)),
        (key("allocator.active"), int(used)),
        (key("allocator.resident"), int(rss)),
        (key("allocator-fragmentation.ratio"), Reply::Double(1.0)),
        (key("allocator-fragmentation.bytes"), int(0)),
        (key("allocator-rss.ratio"), Reply::Double(ratio(rss, used))),
        (key("allocator-rss.bytes"), int(rss.saturating_sub(used))),
        (key("rss-overhead.ratio"), Reply::Double(1.0)),
        (key("rss-overhead.bytes"), int(0)),
        (key("fragmentation"), Reply::Double(ratio(rss, used))),
        (key("fragmentation.bytes"), int(rss.saturating_sub(used))),
    ]);
    Reply::Map(out)
}

/// MEMORY DOCTOR: Redis's report, with the checks that mean something here (peak,
/// RSS overhead, client buffers are not tracked, scripts cached).
fn doctor(ctx: &Ctx) -> String {
    let used = used_memory();
    if used < 5 << 20 {
        return "Hi Sam, this instance is empty or is using very little memory, my issues detector can't be used in these conditions. Please, leave for your mission on Earth and fill it with some data. The new Sam and I will be back to our programming as soon as I finished rebooting.\n".into();
    }
    let peak = peak_memory();
    let rss = rss_bytes();
    let mut found = Vec::new();
    if peak as f64 / used as f64 > 1.5 {
        found.push(" * Peak memory: In the past this instance used more than 150% the memory that is currently using. The allocator is normally not able to release memory after a peak, so you can expect to see a big fragmentation ratio, however this is actually harmless and is only due to the memory peak, and if the Redis instance Resident Set Size (RSS) is currently bigger than expected, the memory will be used as soon as you fill the Redis instance with more data. If the memory peak was only occasional and you want to try to reclaim memory, please try the MEMORY PURGE command, otherwise the only other option is to shutdown and restart the instance.\n\n".to_string());
    }
    if rss as f64 / used as f64 > 1.4 && rss.saturating_sub(used) > 10 << 20 {
        found.push(format!(" * High total RSS: This instance has a memory fragmentation and RSS overhead greater than 1.4 (this means that the Resident Set Size of the Redis process is much larger than the sum of the logical allocations Redis performed). This problem is usually due either to a large peak memory (check if there is a peak memory entry above in the report) or may result from a workload that causes the allocator to fragment memory a lot. If the problem is a large peak memory, then there is no issue. Otherwise, make sure you are using the Jemalloc allocator and not the default libc malloc. Note: The currently used allocator is \"{}\".\n\n", crate::alloc::ALLOCATOR_NAME));
    }
    if ctx.shared.scripts.counts().0 > 1000 {
        found.push(" * Many scripts: There seem to be many cached scripts in this instance (more than 1000). This may be because scripts are generated and `EVAL`ed, instead of being parameterized (with KEYS and ARGV), `SCRIPT LOAD`ed and `EVALSHA`ed. Unless `SCRIPT FLUSH` is called periodically, the scripts' caches may end up consuming most of your memory.\n\n".to_string());
    }
    if found.is_empty() {
        return "Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this base.\n".into();
    }
    let mut s =
        "Sam, I detected a few issues in this Redis instance memory implants:\n\n".to_string();
    for f in found {
        s.push_str(&f);
    }
    s.push_str("I'm here to keep you safe, Sam. I want to help you.\n");
    s
}

#[cfg(test)]
mod tests {
    use super::chunk;

    #[test]
    fn chunks_follow_glibc() {
        assert_eq!(chunk(0), 0);
        assert_eq!(chunk(1), 32);
        assert_eq!(chunk(24), 32);
        assert_eq!(chunk(25), 48);
        assert_eq!(chunk(40), 48);
        assert_eq!(chunk(41), 64);
    }
}
