//! The command table: name -> spec (arity, flags, key positions, handler), as in
//! Redis's own table. Arity counts the command name; negative means "at least".

use super::{
    cas, connection, debug, expire, fencing, functions, hashes, keys, lists, memory, multi, ops, pubsub,
    scripting, server, sets, strings, zranges, zsets, CmdResult, Ctx,
};
use bytes::Bytes;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::LazyLock;

pub type Handler = fn(&mut Ctx, &[Bytes]) -> CmdResult;

pub mod flags {
    /// Changes the keyspace.
    pub const WRITE: u32 = 1;
    /// Only reads.
    pub const READONLY: u32 = 1 << 1;
    /// Can create a key or lengthen a TTL: refused while the restart fence is up.
    pub const FENCED: u32 = 1 << 2;
    /// Not callable from a script.
    pub const NOSCRIPT: u32 = 1 << 3;
    /// Allowed before AUTH.
    pub const NO_AUTH: u32 = 1 << 4;
    /// Allowed in RESP2 subscribed mode.
    pub const PUBSUB: u32 = 1 << 5;
    pub const FAST: u32 = 1 << 6;
    pub const ADMIN: u32 = 1 << 7;
    /// May block the client (BLPOP...).
    pub const BLOCKING: u32 = 1 << 8;
    /// Allowed while a script is running past its time limit (SCRIPT KILL...).
    pub const ALLOW_BUSY: u32 = 1 << 9;
    /// Touches several keys at once: runs holding the keyspace gate exclusively, so no
    /// other command sees it half done (as scripts do).
    pub const EXCLUSIVE: u32 = 1 << 10;
    /// Refused after MULTI ("Command not allowed inside a transaction").
    pub const NO_MULTI: u32 = 1 << 11;
    /// May grow memory: refused with OOM while used memory is above `--maxmemory`
    /// (Redis's `denyoom`, on the same commands: EXPIRE, PERSIST, RENAME and SMOVE are
    /// fenced, as they can lengthen a TTL or move a key, but not denyoom).
    pub const DENYOOM: u32 = 1 << 12;
}

use flags::*;

pub struct Spec {
    /// Lowercase, as Redis names commands in errors and COMMAND replies.
    pub name: &'static str,
    pub arity: i32,
    pub flags: u32,
    pub first_key: i32,
    pub last_key: i32,
    pub step: i32,
    pub handler: Handler,
    /// Position in `COMMANDS` (for per-command stats).
    pub index: usize,
}

impl Spec {
    /// Flag names as COMMAND INFO lists them.
    pub fn flag_names(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        let names = [
            (WRITE, "write"),
            (READONLY, "readonly"),
            (DENYOOM, "denyoom"),
            (NOSCRIPT, "noscript"),
            (NO_AUTH, "no_auth"),
            (PUBSUB, "pubsub"),
            (FAST, "fast"),
            (ADMIN, "admin"),
            (BLOCKING, "blocking"),
            (ALLOW_BUSY, "allow_busy"),
            (NO_MULTI, "no_multi"),
        ];
        for (bit, name) in names {
            if self.flags & bit != 0 {
                out.push(name);
            }
        }
        out
    }
}

/// (name, arity, flags, first key, last key, step, handler)
type Row = (&'static str, i32, u32, i32, i32, i32, Handler);

#[rustfmt::skip]
const ROWS: &[Row] = &[
    // connection
    ("ping", -1, FAST | PUBSUB, 0, 0, 0, connection::ping),
    ("echo", 2, FAST, 0, 0, 0, connection::echo),
    ("hello", -1, FAST | NO_AUTH | NOSCRIPT, 0, 0, 0, connection::hello),
    ("auth", -2, FAST | NO_AUTH | NOSCRIPT, 0, 0, 0, connection::auth),
    ("select", 2, FAST, 0, 0, 0, connection::select),
    ("quit", -1, FAST | NO_AUTH | PUBSUB | NOSCRIPT | ALLOW_BUSY, 0, 0, 0, connection::quit),
    ("reset", 1, FAST | NO_AUTH | PUBSUB | NOSCRIPT | ALLOW_BUSY, 0, 0, 0, connection::reset),
    ("client", -2, NOSCRIPT, 0, 0, 0, connection::client),
    // server
    ("info", -1, 0, 0, 0, 0, server::info),
    ("dbsize", 1, READONLY | FAST, 0, 0, 0, server::dbsize),
    ("flushdb", -1, WRITE | EXCLUSIVE, 0, 0, 0, server::flushdb),
    ("flushall", -1, WRITE | EXCLUSIVE, 0, 0, 0, server::flushall),
    ("time", 1, FAST, 0, 0, 0, server::time),
    ("command", -1, 0, 0, 0, 0, server::command),
    ("config", -2, ADMIN | NOSCRIPT, 0, 0, 0, server::config),
    ("slowlog", -2, ADMIN, 0, 0, 0, ops::slowlog),
    ("latency", -2, ADMIN | NOSCRIPT, 0, 0, 0, ops::latency),
    ("wait", 3, NOSCRIPT, 0, 0, 0, ops::wait),
    ("shutdown", -1, ADMIN | NOSCRIPT | ALLOW_BUSY | NO_MULTI, 0, 0, 0, server::shutdown),
    ("debug", -2, ADMIN | NOSCRIPT | EXCLUSIVE, 0, 0, 0, debug::debug),
    // strings
    ("get", 2, READONLY | FAST, 1, 1, 1, strings::get),
    ("set", -3, WRITE | FENCED | DENYOOM, 1, 1, 1, strings::set),
    ("setnx", 3, WRITE | FENCED | DENYOOM | FAST, 1, 1, 1, strings::setnx),
    ("setex", 4, WRITE | FENCED | DENYOOM, 1, 1, 1, strings::setex),
    ("psetex", 4, WRITE | FENCED | DENYOOM, 1, 1, 1, strings::psetex),
    ("getdel", 2, WRITE | FAST, 1, 1, 1, strings::getdel),
    ("getex", -2, WRITE | FAST, 1, 1, 1, strings::getex),
    ("mget", -2, READONLY | FAST, 1, -1, 1, strings::mget),
    ("mset", -3, WRITE | FENCED | DENYOOM | EXCLUSIVE, 1, -1, 2, strings::mset),
    ("incr", 2, WRITE | FENCED | DENYOOM | FAST, 1, 1, 1, strings::incr),
    ("decr", 2, WRITE | FENCED | DENYOOM | FAST, 1, 1, 1, strings::decr),
    ("incrby", 3, WRITE | FENCED | DENYOOM | FAST, 1, 1, 1, strings::incrby),
    ("decrby", 3, WRITE | FENCED | DENYOOM | FAST, 1, 1, 1, strings::decrby),
    // native compare-and-delete (releases: not fenced)
    ("delex", -2, WRITE | FAST, 1, 1, 1, cas::delex),
    ("delifeq", 3, WRITE | FAST, 1, 1, 1, cas::delifeq),
    ("digest", 2, READONLY | FAST, 1, 1, 1, cas::digest_cmd),
    // keys
    ("del", -2, WRITE, 1, -1, 1, keys::del),
    ("unlink", -2, WRITE | FAST, 1, -1, 1, keys::del),
    ("exists", -2, READONLY | FAST, 1, -1, 1, keys::exists),
    ("type", 2, READONLY | FAST, 1, 1, 1, keys::type_),
    ("keys", 2, READONLY, 0, 0, 0, keys::keys),
    ("scan", -2, READONLY, 0, 0, 0, keys::scan),
    ("rename", 3, WRITE | FENCED | EXCLUSIVE, 1, 2, 1, keys::rename),
    ("object", -2, READONLY, 2, 2, 1, keys::object),
    ("memory", -2, READONLY, 2, 2, 1, memory::memory),
    // expiry
    ("expire", -3, WRITE | FENCED | FAST, 1, 1, 1, expire::expire),
    ("pexpire", -3, WRITE | FENCED | FAST, 1, 1, 1, expire::pexpire),
    ("expireat", -3, WRITE | FENCED | FAST, 1, 1, 1, expire::expireat),
    ("pexpireat", -3, WRITE | FENCED | FAST, 1, 1, 1, expire::pexpireat),
    ("ttl", 2, READONLY | FAST, 1, 1, 1, expire::ttl),
    ("pttl", 2, READONLY | FAST, 1, 1, 1, expire::pttl),
    ("expiretime", 2, READONLY | FAST, 1, 1, 1, expire::expiretime),
    ("pexpiretime", 2, READONLY | FAST, 1, 1, 1, expire::pexpiretime),
    ("persist", 2, WRITE | FENCED | FAST, 1, 1, 1, expire::persist),
    // hashes (Redisson's RLock)
    ("hset", -4, WRITE | FENCED | DENYOOM | FAST, 1, 1, 1, hashes::hset),
    ("hmset", -4, WRITE | FENCED | DENYOOM | FAST, 1, 1, 1, hashes::hmset),
    ("hsetnx", 4, WRITE | FENCED | DENYOOM | FAST, 1, 1, 1, hashes::hsetnx),
    ("hget", 3, READONLY | FAST, 1, 1, 1, hashes::hget),
    ("hmget", -3, READONLY | FAST, 1, 1, 1, hashes::hmget),
    ("hdel", -3, WRITE | FAST, 1, 1, 1, hashes::hdel),
    ("hexists", 3, READONLY | FAST, 1, 1, 1, hashes::hexists),
    ("hincrby", 4, WRITE | FENCED | DENYOOM | FAST, 1, 1, 1, hashes::hincrby),
    ("hincrbyfloat", 4, WRITE | FENCED | DENYOOM | FAST, 1, 1, 1, hashes::hincrbyfloat),
    ("hlen", 2, READONLY | FAST, 1, 1, 1, hashes::hlen),
    ("hgetall", 2, READONLY, 1, 1, 1, hashes::hgetall),
    ("hkeys", 2, READONLY, 1, 1, 1, hashes::hkeys),
    ("hvals", 2, READONLY, 1, 1, 1, hashes::hvals),
    // lists (python-redis-lock's signal list)
    ("lpush", -3, WRITE | FENCED | DENYOOM | FAST, 1, 1, 1, lists::lpush),
    ("rpush", -3, WRITE | FENCED | DENYOOM | FAST, 1, 1, 1, lists::rpush),
    ("lpushx", -3, WRITE | FENCED | DENYOOM | FAST, 1, 1, 1, lists::lpushx),
    ("rpushx", -3, WRITE | FENCED | DENYOOM | FAST, 1, 1, 1, lists::rpushx),
    ("lpop", -2, WRITE | FAST, 1, 1, 1, lists::lpop),
    ("rpop", -2, WRITE | FAST, 1, 1, 1, lists::rpop),
    ("llen", 2, READONLY | FAST, 1, 1, 1, lists::llen),
    ("lrange", 4, READONLY, 1, 1, 1, lists::lrange),
    ("lindex", 3, READONLY, 1, 1, 1, lists::lindex),
    ("lrem", 4, WRITE, 1, 1, 1, lists::lrem),
    ("ltrim", 4, WRITE, 1, 1, 1, lists::ltrim),
    ("lmove", 5, WRITE | FENCED | DENYOOM | EXCLUSIVE, 1, 2, 1, lists::lmove),
    ("rpoplpush", 3, WRITE | FENCED | DENYOOM | EXCLUSIVE, 1, 2, 1, lists::rpoplpush),
    ("blmove", 6, WRITE | FENCED | DENYOOM | NOSCRIPT | BLOCKING | EXCLUSIVE, 1, 2, 1, lists::blmove),
    ("brpoplpush", 4, WRITE | FENCED | DENYOOM | NOSCRIPT | BLOCKING | EXCLUSIVE, 1, 2, 1, lists::brpoplpush),
    ("lset", 4, WRITE | DENYOOM, 1, 1, 1, lists::lset),
    ("linsert", 5, WRITE | DENYOOM, 1, 1, 1, lists::linsert),
    ("lpos", -3, READONLY, 1, 1, 1, lists::lpos),
    ("blpop", -3, WRITE | BLOCKING, 1, -2, 1, lists::blpop),
    ("brpop", -3, WRITE | BLOCKING, 1, -2, 1, lists::brpop),
    // sorted sets (semaphores, fair locks)
    ("zadd", -4, WRITE | FENCED | DENYOOM | FAST, 1, 1, 1, zsets::zadd),
    ("zincrby", 4, WRITE | FENCED | DENYOOM | FAST, 1, 1, 1, zsets::zincrby),
    ("zrem", -3, WRITE | FAST, 1, 1, 1, zsets::zrem),
    ("zcard", 2, READONLY | FAST, 1, 1, 1, zsets::zcard),
    ("zscore", 3, READONLY | FAST, 1, 1, 1, zsets::zscore),
    ("zmscore", -3, READONLY | FAST, 1, 1, 1, zsets::zmscore),
    ("zrank", -3, READONLY | FAST, 1, 1, 1, zsets::zrank),
    ("zrevrank", -3, READONLY | FAST, 1, 1, 1, zsets::zrevrank),
    ("zcount", 4, READONLY | FAST, 1, 1, 1, zranges::zcount),
    ("zlexcount", 4, READONLY | FAST, 1, 1, 1, zranges::zlexcount),
    ("zrange", -4, READONLY, 1, 1, 1, zranges::zrange),
    ("zrangebyscore", -4, READONLY, 1, 1, 1, zranges::zrangebyscore),
    ("zrevrange", -4, READONLY, 1, 1, 1, zranges::zrevrange),
    ("zrevrangebyscore", -4, READONLY, 1, 1, 1, zranges::zrevrangebyscore),
    ("zrangebylex", -4, READONLY, 1, 1, 1, zranges::zrangebylex),
    ("zrevrangebylex", -4, READONLY, 1, 1, 1, zranges::zrevrangebylex),
    ("zremrangebyscore", 4, WRITE, 1, 1, 1, zranges::zremrangebyscore),
    ("zremrangebyrank", 4, WRITE, 1, 1, 1, zranges::zremrangebyrank),
    ("zremrangebylex", 4, WRITE, 1, 1, 1, zranges::zremrangebylex),
    ("zpopmin", -2, WRITE | FAST, 1, 1, 1, zsets::zpopmin),
    ("zpopmax", -2, WRITE | FAST, 1, 1, 1, zsets::zpopmax),
    ("bzpopmin", -3, WRITE | FAST | BLOCKING | NOSCRIPT, 1, -2, 1, zsets::bzpopmin),
    ("bzpopmax", -3, WRITE | FAST | BLOCKING | NOSCRIPT, 1, -2, 1, zsets::bzpopmax),
    ("zrandmember", -2, READONLY, 1, 1, 1, zsets::zrandmember),
    ("zscan", -3, READONLY, 1, 1, 1, zsets::zscan),
    // sets; commands over several keys hold the gate exclusively (atomic)
    ("sadd", -3, WRITE | FENCED | DENYOOM | FAST, 1, 1, 1, sets::sadd),
    ("srem", -3, WRITE | FAST, 1, 1, 1, sets::srem),
    ("scard", 2, READONLY | FAST, 1, 1, 1, sets::scard),
    ("sismember", 3, READONLY | FAST, 1, 1, 1, sets::sismember),
    ("smismember", -3, READONLY | FAST, 1, 1, 1, sets::smismember),
    ("smembers", 2, READONLY, 1, 1, 1, sets::smembers),
    ("spop", -2, WRITE | FAST, 1, 1, 1, sets::spop),
    ("srandmember", -2, READONLY, 1, 1, 1, sets::srandmember),
    ("smove", 4, WRITE | FENCED | FAST | EXCLUSIVE, 1, 2, 1, sets::smove),
    ("sscan", -3, READONLY, 1, 1, 1, sets::sscan),
    ("sinter", -2, READONLY | EXCLUSIVE, 1, -1, 1, sets::sinter),
    ("sunion", -2, READONLY | EXCLUSIVE, 1, -1, 1, sets::sunion),
    ("sdiff", -2, READONLY | EXCLUSIVE, 1, -1, 1, sets::sdiff),
    ("sinterstore", -3, WRITE | FENCED | DENYOOM | EXCLUSIVE, 1, -1, 1, sets::sinterstore),
    ("sunionstore", -3, WRITE | FENCED | DENYOOM | EXCLUSIVE, 1, -1, 1, sets::sunionstore),
    ("sdiffstore", -3, WRITE | FENCED | DENYOOM | EXCLUSIVE, 1, -1, 1, sets::sdiffstore),
    // fencing tokens (redlockd's own): grant + read the mark, commit a token
    ("fencing.grant", 5, WRITE | FENCED | DENYOOM | FAST, 1, 1, 1, fencing::grant),
    ("fencing.commit", 4, WRITE | FAST, 1, 1, 1, fencing::commit),
    ("fencing.mark", 1, READONLY | FAST, 0, 0, 0, fencing::mark),
    // pub/sub
    ("subscribe", -2, PUBSUB | NOSCRIPT, 0, 0, 0, pubsub::subscribe),
    ("unsubscribe", -1, PUBSUB | NOSCRIPT, 0, 0, 0, pubsub::unsubscribe),
    ("psubscribe", -2, PUBSUB | NOSCRIPT, 0, 0, 0, pubsub::psubscribe),
    ("punsubscribe", -1, PUBSUB | NOSCRIPT, 0, 0, 0, pubsub::punsubscribe),
    ("publish", 3, FAST, 0, 0, 0, pubsub::publish),
    ("pubsub", -2, 0, 0, 0, 0, pubsub::pubsub),
    // scripting: scripts hold the gate exclusively (atomic); keys come from
    // numkeys, so no fixed key positions.
    ("eval", -3, NOSCRIPT | EXCLUSIVE, 0, 0, 0, scripting::eval),
    ("evalsha", -3, NOSCRIPT | EXCLUSIVE, 0, 0, 0, scripting::evalsha),
    ("eval_ro", -3, NOSCRIPT | READONLY | EXCLUSIVE, 0, 0, 0, scripting::eval_ro),
    ("evalsha_ro", -3, NOSCRIPT | READONLY | EXCLUSIVE, 0, 0, 0, scripting::evalsha_ro),
    ("script", -2, NOSCRIPT | ALLOW_BUSY, 0, 0, 0, scripting::script),
    ("fcall", -3, NOSCRIPT | EXCLUSIVE, 0, 0, 0, functions::fcall),
    ("fcall_ro", -3, NOSCRIPT | READONLY | EXCLUSIVE, 0, 0, 0, functions::fcall_ro),
    ("function", -2, NOSCRIPT | ALLOW_BUSY, 0, 0, 0, functions::function),
    // transactions: EXEC runs its queue holding the gate exclusively; the others only
    // touch the client's own state (and the watch registry), so they skip the gate.
    ("multi", 1, NOSCRIPT | FAST | ALLOW_BUSY, 0, 0, 0, multi::multi),
    ("exec", 1, NOSCRIPT | EXCLUSIVE, 0, 0, 0, multi::exec),
    ("discard", 1, NOSCRIPT | FAST | ALLOW_BUSY, 0, 0, 0, multi::discard),
    ("watch", -2, NOSCRIPT | FAST | ALLOW_BUSY, 1, -1, 1, multi::watch),
    ("unwatch", 1, NOSCRIPT | FAST | ALLOW_BUSY, 0, 0, 0, multi::unwatch),
];

/// Every command, in table order.
pub static COMMANDS: LazyLock<Vec<Spec>> = LazyLock::new(|| {
    ROWS.iter()
        .enumerate()
        .map(
            |(index, &(name, arity, flags, first_key, last_key, step, handler))| Spec {
                name,
                arity,
                flags,
                first_key,
                last_key,
                step,
                handler,
                index,
            },
        )
        .collect()
});

/// FNV-1a, for the name table only. Every command runs one lookup, and SipHash (the
/// default) was most of its cost. Collision attacks need inserts, and this table is
/// fixed at startup, so a keyed hash buys nothing here.
#[derive(Default)]
struct NameHasher(u64);

impl Hasher for NameHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type NameHash = BuildHasherDefault<NameHasher>;

static BY_NAME: LazyLock<HashMap<&'static [u8], usize, NameHash>> = LazyLock::new(|| {
    COMMANDS
        .iter()
        .map(|spec| (spec.name.as_bytes(), spec.index))
        .collect()
});

/// Finds a command by name, in any case.
pub fn lookup(name: &[u8]) -> Option<&'static Spec> {
    let mut lower = [0u8; 32];
    if name.len() > lower.len() {
        return None;
    }
    let lower = &mut lower[..name.len()];
    lower.copy_from_slice(name);
    lower.make_ascii_lowercase();
    BY_NAME.get(&*lower).map(|&i| &COMMANDS[i])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_is_found_in_any_case() {
        for spec in COMMANDS.iter() {
            let upper = spec.name.to_ascii_uppercase();
            assert_eq!(lookup(upper.as_bytes()).map(|s| s.index), Some(spec.index));
            assert_eq!(
                lookup(spec.name.as_bytes()).map(|s| s.index),
                Some(spec.index)
            );
        }
        assert!(lookup(b"nosuchcommand").is_none());
        assert!(lookup(b"").is_none());
        assert!(lookup(&[b'g'; 40]).is_none());
    }
}
