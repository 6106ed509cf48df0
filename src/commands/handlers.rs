//! The handlers, bound once to the command descriptor's rows: the one file that names
//! every command family. `command_table` describes each command (name, arity, flags,
//! categories, key specs, subcommands) and knows no handler; this table names each
//! command's handler, and `handler` finds it by the row's index (`Spec::index`), as
//! dispatch reads it: one load from a slice, no hashing. Built at first use, checked:
//! every row has exactly one handler and every handler names a row (a mismatch
//! panics there, and the tests below find it).

use super::admin::{acl_command, cluster, config_command, info, session};
use super::admin::{debug, memory, monitor, ops, server};
use super::command_table::{Spec, COMMANDS};
use super::exec::{eval, fcall, multi};
use super::families::{
    bits, cas, dump, expire, fencing, geo, hashes, hll, keys, lcs, lists, locks, object, pubsub,
    sets, sort, stream_groups, stream_reads, streams, strings, zalgebra, zranges, zsets,
};
use super::{CmdResult, Ctx};
use bytes::Bytes;
use std::sync::LazyLock;

/// What runs a command: its arguments (the name first) in, its reply (`Err`: an error
/// reply) out.
pub type Handler = fn(&mut Ctx, &[Bytes]) -> CmdResult;

/// The handler of the command `spec` describes.
#[inline]
pub fn handler(spec: &Spec) -> Handler {
    BY_INDEX[spec.index]
}

/// Every command's handler, in `COMMANDS` order.
static BY_INDEX: LazyLock<Box<[Handler]>> = LazyLock::new(|| bind(BINDINGS));

/// The handlers of `COMMANDS`, in its order, from `bindings` (name -> handler); panics
/// naming a row with no handler or two, or a handler whose name is no row.
fn bind(bindings: &[(&str, Handler)]) -> Box<[Handler]> {
    let mut by_index: Vec<Option<Handler>> = vec![None; COMMANDS.len()];
    for &(name, handler) in bindings {
        let spec = super::lookup(name.as_bytes())
            .filter(|spec| spec.name == name)
            .unwrap_or_else(|| panic!("the handler of {name:?} names no row"));
        assert!(
            by_index[spec.index].replace(handler).is_none(),
            "{name}: two handlers"
        );
    }
    by_index
        .into_iter()
        .zip(COMMANDS.iter())
        .map(|(h, spec)| h.unwrap_or_else(|| panic!("{}: no handler", spec.name)))
        .collect()
}

/// Command name -> handler, grouped as the descriptor's rows are.
#[rustfmt::skip]
const BINDINGS: &[(&str, Handler)] = &[
    // connection
    ("ping", session::ping),
    ("echo", session::echo),
    ("hello", session::hello),
    ("auth", session::auth),
    ("select", session::select),
    ("quit", session::quit),
    ("reset", session::reset),
    ("client", session::client),
    // server
    ("info", info::info),
    ("dbsize", server::dbsize),
    ("flushdb", server::flushdb),
    ("flushall", server::flushall),
    ("time", server::time),
    ("command", server::command),
    ("config", config_command::config),
    ("slowlog", ops::slowlog),
    ("latency", ops::latency),
    ("wait", ops::wait),
    ("shutdown", server::shutdown),
    ("monitor", monitor::monitor),
    ("locks", locks::locks),
    ("acl", acl_command::acl),
    ("debug", debug::debug),
    ("bgrewriteaof", crate::durability::aof::rewrite::bgrewriteaof),
    // strings
    ("get", strings::get),
    ("set", strings::set),
    ("setnx", strings::setnx),
    ("setex", strings::setex),
    ("psetex", strings::psetex),
    ("getdel", strings::getdel),
    ("getex", strings::getex),
    ("mget", strings::mget),
    ("mset", strings::mset),
    ("incr", strings::incr),
    ("decr", strings::decr),
    ("incrby", strings::incrby),
    ("decrby", strings::decrby),
    ("incrbyfloat", strings::incrbyfloat),
    ("getset", strings::getset),
    ("msetnx", strings::msetnx),
    ("append", strings::append),
    ("strlen", strings::strlen),
    ("getrange", strings::getrange),
    ("substr", strings::getrange),
    ("setrange", strings::setrange),
    // native compare-and-delete (releases: not fenced)
    ("delex", cas::delex),
    ("delifeq", cas::delifeq),
    ("digest", cas::digest_cmd),
    // bitmaps, HyperLogLog and LCS (strings), GEO (sorted sets). BITFIELD and
    // GEORADIUS[BYMEMBER] are fenced by their handlers, only when they write (SET or
    // INCRBY; STORE or STOREDIST); PFDEBUG rewrites an existing string only.
    ("setbit", bits::setbit),
    ("getbit", bits::getbit),
    ("bitcount", bits::bitcount),
    ("bitpos", bits::bitpos),
    ("bitop", bits::bitop),
    ("bitfield", bits::bitfield),
    ("bitfield_ro", bits::bitfield_ro),
    ("pfadd", hll::pfadd),
    ("pfcount", hll::pfcount),
    ("pfmerge", hll::pfmerge),
    ("pfdebug", hll::pfdebug),
    ("pfselftest", hll::pfselftest),
    ("lcs", lcs::lcs),
    ("geoadd", geo::geoadd),
    ("geopos", geo::geopos),
    ("geodist", geo::geodist),
    ("geohash", geo::geohash),
    ("geosearch", geo::geosearch),
    ("geosearchstore", geo::geosearchstore),
    ("georadius", geo::georadius),
    ("georadius_ro", geo::georadius_ro),
    ("georadiusbymember", geo::georadiusbymember),
    ("georadiusbymember_ro", geo::georadiusbymember_ro),
    // keys
    ("del", keys::del),
    ("unlink", keys::del),
    ("exists", keys::exists),
    // TOUCH: EXISTS's count (no access times are kept for it to update).
    ("touch", keys::touch),
    ("type", keys::type_),
    ("keys", keys::keys),
    ("scan", keys::scan),
    ("rename", keys::rename),
    ("renamenx", keys::renamenx),
    ("copy", keys::copy),
    ("move", keys::move_),
    ("randomkey", keys::randomkey),
    ("object", object::object),
    ("memory", memory::memory),
    // expiry
    ("expire", expire::expire),
    ("pexpire", expire::pexpire),
    ("expireat", expire::expireat),
    ("pexpireat", expire::pexpireat),
    ("ttl", expire::ttl),
    ("pttl", expire::pttl),
    ("expiretime", expire::expiretime),
    ("pexpiretime", expire::pexpiretime),
    ("persist", expire::persist),
    // hashes (Redisson's RLock)
    ("hset", hashes::hset),
    ("hmset", hashes::hmset),
    ("hsetnx", hashes::hsetnx),
    ("hget", hashes::hget),
    ("hmget", hashes::hmget),
    ("hdel", hashes::hdel),
    ("hexists", hashes::hexists),
    ("hincrby", hashes::hincrby),
    ("hincrbyfloat", hashes::hincrbyfloat),
    ("hlen", hashes::hlen),
    ("hstrlen", hashes::hstrlen),
    ("hscan", hashes::hscan),
    ("hrandfield", hashes::hrandfield),
    ("hgetall", hashes::hgetall),
    ("hkeys", hashes::hkeys),
    ("hvals", hashes::hvals),
    // lists (python-redis-lock's signal list)
    ("lpush", lists::lpush),
    ("rpush", lists::rpush),
    ("lpushx", lists::lpushx),
    ("rpushx", lists::rpushx),
    ("lpop", lists::lpop),
    ("rpop", lists::rpop),
    ("llen", lists::llen),
    ("lrange", lists::lrange),
    ("lindex", lists::lindex),
    ("lrem", lists::lrem),
    ("ltrim", lists::ltrim),
    ("lmove", lists::lmove),
    ("rpoplpush", lists::rpoplpush),
    ("blmove", lists::blmove),
    ("brpoplpush", lists::brpoplpush),
    ("lset", lists::lset),
    ("linsert", lists::linsert),
    ("lpos", lists::lpos),
    // LMPOP pops from the first of numkeys keys that exists: the gate is held
    // exclusively, so no key before it is filled in between.
    ("lmpop", lists::lmpop),
    // BLMPOP: not NOSCRIPT, unlike BLPOP's neighbours in Redis 7.0: a script may call
    // it, and there it never blocks.
    ("blmpop", lists::blmpop),
    ("blpop", lists::blpop),
    ("brpop", lists::brpop),
    // sorted sets (semaphores, fair locks)
    ("zadd", zsets::zadd),
    ("zincrby", zsets::zincrby),
    ("zrem", zsets::zrem),
    ("zcard", zsets::zcard),
    ("zscore", zsets::zscore),
    ("zmscore", zsets::zmscore),
    ("zrank", zsets::zrank),
    ("zrevrank", zsets::zrevrank),
    ("zcount", zranges::zcount),
    ("zlexcount", zranges::zlexcount),
    ("zrange", zranges::zrange),
    ("zrangebyscore", zranges::zrangebyscore),
    ("zrevrange", zranges::zrevrange),
    ("zrevrangebyscore", zranges::zrevrangebyscore),
    ("zrangebylex", zranges::zrangebylex),
    ("zrevrangebylex", zranges::zrevrangebylex),
    ("zrangestore", zranges::zrangestore),
    ("zremrangebyscore", zranges::zremrangebyscore),
    ("zremrangebyrank", zranges::zremrangebyrank),
    ("zremrangebylex", zranges::zremrangebylex),
    ("zpopmin", zsets::zpopmin),
    ("zpopmax", zsets::zpopmax),
    // ZMPOP: as LMPOP
    ("zmpop", zsets::zmpop),
    ("bzpopmin", zsets::bzpopmin),
    ("bzpopmax", zsets::bzpopmax),
    // BZMPOP: as BLMPOP (scripts may call it, unlike BZPOPMIN)
    ("bzmpop", zsets::bzmpop),
    ("zrandmember", zsets::zrandmember),
    ("zscan", zsets::zscan),
    // sorted-set algebra: several keys, so the gate is held exclusively (atomic); the
    // inputs follow a numkeys argument, after the STORE forms' destination
    ("zunionstore", zalgebra::zunionstore),
    ("zinterstore", zalgebra::zinterstore),
    ("zdiffstore", zalgebra::zdiffstore),
    ("zunion", zalgebra::zunion),
    ("zinter", zalgebra::zinter),
    ("zdiff", zalgebra::zdiff),
    ("zintercard", zalgebra::zintercard),
    // sets; commands over several keys hold the gate exclusively (atomic)
    ("sadd", sets::sadd),
    ("srem", sets::srem),
    ("scard", sets::scard),
    ("sismember", sets::sismember),
    ("smismember", sets::smismember),
    ("smembers", sets::smembers),
    ("spop", sets::spop),
    ("srandmember", sets::srandmember),
    ("smove", sets::smove),
    ("sscan", sets::sscan),
    ("sinter", sets::sinter),
    ("sintercard", sets::sintercard),
    ("sunion", sets::sunion),
    ("sdiff", sets::sdiff),
    ("sinterstore", sets::sinterstore),
    ("sunionstore", sets::sunionstore),
    ("sdiffstore", sets::sdiffstore),
    // fencing tokens (redlockd's own): grant + read the mark, commit a token
    ("fencing.grant", fencing::grant),
    ("fencing.commit", fencing::commit),
    ("fencing.mark", fencing::mark),
    // pub/sub
    ("subscribe", pubsub::subscribe),
    ("unsubscribe", pubsub::unsubscribe),
    ("psubscribe", pubsub::psubscribe),
    ("punsubscribe", pubsub::punsubscribe),
    ("publish", pubsub::publish),
    ("pubsub", pubsub::pubsub),
    // scripting: scripts hold the gate exclusively (atomic); keys come from
    // numkeys, so no fixed key positions.
    ("eval", eval::eval),
    ("evalsha", eval::evalsha),
    ("eval_ro", eval::eval_ro),
    ("evalsha_ro", eval::evalsha_ro),
    ("script", eval::script),
    ("fcall", fcall::fcall),
    ("fcall_ro", fcall::fcall_ro),
    ("function", fcall::function),
    // streams (Redis 7.0's flags and key specs; XGROUP and XINFO are containers)
    ("xadd", streams::xadd),
    ("xrange", streams::xrange),
    ("xrevrange", streams::xrevrange),
    ("xlen", streams::xlen),
    ("xdel", streams::xdel),
    ("xtrim", streams::xtrim),
    ("xread", stream_reads::xread),
    ("xreadgroup", stream_reads::xreadgroup),
    ("xsetid", streams::xsetid),
    ("xgroup", stream_groups::xgroup),
    ("xack", stream_groups::xack),
    ("xpending", stream_groups::xpending),
    ("xclaim", stream_groups::xclaim),
    ("xautoclaim", stream_groups::xautoclaim),
    ("xinfo", stream_groups::xinfo),
    // SORT reads the keys its BY and GET patterns name, so it holds the gate
    // exclusively; STORE is fenced in the handler (a SORT without it writes nothing).
    ("sort", sort::sort),
    ("sort_ro", sort::sort_ro),
    // serialization: RESTORE makes a key, maybe with a TTL
    ("dump", dump::dump),
    ("restore", dump::restore),
    // transactions: EXEC runs its queue holding the gate exclusively; the others only
    // touch the client's own state (and the watch registry), so they skip the gate.
    ("multi", multi::multi),
    ("exec", multi::exec),
    ("discard", multi::discard),
    ("watch", multi::watch),
    ("unwatch", multi::unwatch),
    // Redis Cluster's protocol (crate::cluster)
    ("cluster", cluster::cluster),
    ("readonly", cluster::ok_in_cluster),
    ("readwrite", cluster::ok_in_cluster),
    ("asking", cluster::ok_in_cluster),
];

#[cfg(test)]
mod tests {
    use super::*;

    /// Every row has exactly one handler and every handler names a row.
    #[test]
    fn every_row_has_one_handler_and_every_handler_a_row() {
        assert_eq!(BINDINGS.len(), COMMANDS.len());
        let mut names: Vec<&str> = BINDINGS.iter().map(|(name, _)| *name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), BINDINGS.len(), "a command bound twice");
        assert_eq!(bind(BINDINGS).len(), COMMANDS.len());
        for spec in COMMANDS.iter() {
            let bound = BINDINGS.iter().find(|(name, _)| *name == spec.name);
            assert!(
                bound.is_some_and(|&(_, h)| std::ptr::fn_addr_eq(h, handler(spec))),
                "{}",
                spec.name
            );
        }
    }

    /// A binding table that misses a row, binds one twice or names no row is refused.
    #[test]
    fn a_bad_binding_is_refused() {
        let missing = &BINDINGS[1..];
        let twice: Vec<_> = BINDINGS.iter().chain(&BINDINGS[..1]).copied().collect();
        let mut unknown = BINDINGS.to_vec();
        unknown[0].0 = "nosuchcommand";
        let mut case = BINDINGS.to_vec();
        case[0].0 = "PING";
        for bad in [missing, &twice[..], &unknown[..], &case[..]] {
            assert!(std::panic::catch_unwind(|| bind(bad)).is_err());
        }
    }
}
