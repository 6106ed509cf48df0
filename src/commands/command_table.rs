//! The command table: name -> spec (arity, flags, key positions, handler), as in
//! Redis's own table. Arity counts the command name; negative means "at least".

use super::admin::{acl_command, session};
use super::exec::{eval, fcall};
use super::{CmdResult, Ctx};

use crate::commands::families::{cas, expire, fencing, hashes, keys, lists, pubsub, sets, strings, zalgebra, zranges, zsets};

use crate::commands::admin::{debug, memory, ops, server};

use crate::commands::exec::multi;
use bytes::Bytes;
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
    /// Redis's "movablekeys": besides any keys at first_key..last_key, the keys given
    /// by a numkeys argument at args[1], right after it (ZUNION, ZINTERCARD).
    pub const NUMKEYS_AT_1: u32 = 1 << 13;
    /// The same with numkeys at args[2] (EVAL, FCALL; ZUNIONSTORE after its
    /// destination at first_key).
    pub const NUMKEYS_AT_2: u32 = 1 << 14;
    /// No key is required (EVAL with numkeys 0): COMMAND GETKEYS then answers an empty
    /// array where it would otherwise refuse the arguments.
    pub const NO_MANDATORY_KEYS: u32 = 1 << 15;
}

/// ACL categories (Redis 7's, in its order: ACL CAT and COMMAND INFO list them so).
/// Each row carries the categories Redis 7 gives the command (checked against a real
/// redis-server's COMMAND INFO by tests/acl.rs); redlockd's own commands get the
/// categories of the Redis commands they stand beside.
pub mod cats {
    pub const NAMES: [&str; 21] = [
        "keyspace",
        "read",
        "write",
        "set",
        "sortedset",
        "list",
        "hash",
        "string",
        "bitmap",
        "hyperloglog",
        "geo",
        "stream",
        "pubsub",
        "admin",
        "fast",
        "slow",
        "blocking",
        "dangerous",
        "connection",
        "transaction",
        "scripting",
    ];
    pub const C_KEYSPACE: u32 = 1;
    pub const C_READ: u32 = 1 << 1;
    pub const C_WRITE: u32 = 1 << 2;
    pub const C_SET: u32 = 1 << 3;
    pub const C_SORTEDSET: u32 = 1 << 4;
    pub const C_LIST: u32 = 1 << 5;
    pub const C_HASH: u32 = 1 << 6;
    pub const C_STRING: u32 = 1 << 7;
    pub const C_PUBSUB: u32 = 1 << 12;
    pub const C_ADMIN: u32 = 1 << 13;
    pub const C_FAST: u32 = 1 << 14;
    pub const C_SLOW: u32 = 1 << 15;
    pub const C_BLOCKING: u32 = 1 << 16;
    pub const C_DANGEROUS: u32 = 1 << 17;
    pub const C_CONNECTION: u32 = 1 << 18;
    pub const C_TRANSACTION: u32 = 1 << 19;
    pub const C_SCRIPTING: u32 = 1 << 20;

    /// A category's bit, by name (any case).
    pub fn by_name(name: &[u8]) -> Option<u32> {
        NAMES
            .iter()
            .position(|n| n.as_bytes().eq_ignore_ascii_case(name))
            .map(|i| 1 << i)
    }

    /// The names of the categories in `bits`, in Redis's order.
    pub fn names(bits: u32) -> impl Iterator<Item = &'static str> {
        NAMES
            .iter()
            .enumerate()
            .filter(move |(i, _)| bits & (1 << i) != 0)
            .map(|(_, n)| *n)
    }
}

use cats::*;
use flags::*;

pub struct Spec {
    /// Lowercase, as Redis names commands in errors and COMMAND replies.
    pub name: &'static str,
    pub arity: i32,
    pub flags: u32,
    /// ACL categories (`cats`).
    pub cats: u32,
    pub first_key: i32,
    pub last_key: i32,
    pub step: i32,
    pub handler: Handler,
    /// Position in `COMMANDS` (for per-command stats); also its ACL id.
    pub index: usize,
    /// A container's subcommands (CONFIG GET...), for ACL rules and categories.
    pub subcommands: &'static [Subcommand],
}

/// A container command's subcommand, as ACL rules name it (`config|get`).
pub struct Subcommand {
    /// `parent|sub`, lowercase.
    pub fullname: &'static str,
    pub cats: u32,
    /// Its ACL id: after every command's (`COMMANDS.len() + ` its place in `SUBCOMMANDS`).
    pub id: usize,
}

/// How many ACL ids there are: one per command and one per subcommand.
pub fn acl_ids() -> usize {
    COMMANDS.len() + SUBCOMMANDS.len()
}

impl Spec {
    /// Flag names as COMMAND INFO lists them.
    pub fn flag_names(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        // Redis 7's order. Its `pubsub` flag marks the @pubsub commands (SUBSCRIBE,
        // PUBLISH...), not what our PUBSUB flag means (allowed while subscribed: PING,
        // QUIT, RESET too).
        let pubsub = if self.cats & cats::C_PUBSUB != 0 { u32::MAX } else { 0 };
        let names = [
            (WRITE, "write"),
            (READONLY, "readonly"),
            (DENYOOM, "denyoom"),
            (ADMIN, "admin"),
            (pubsub, "pubsub"),
            (NOSCRIPT, "noscript"),
            (BLOCKING, "blocking"),
            (FAST, "fast"),
            (NO_AUTH, "no_auth"),
            (NO_MANDATORY_KEYS, "no_mandatory_keys"),
            (NO_MULTI, "no_multi"),
            (NUMKEYS_AT_1 | NUMKEYS_AT_2, "movablekeys"),
            (ALLOW_BUSY, "allow_busy"),
        ];
        for (bits, name) in names {
            if self.flags & bits != 0 {
                out.push(name);
            }
        }
        out
    }

    /// The subcommand `args` names, for a container command (`None` for a plain
    /// command, or a subcommand it does not know: the handler answers that one).
    pub fn subcommand(&self, args: &[Bytes]) -> Option<&'static Subcommand> {
        let sub = args.get(1)?;
        self.subcommands.iter().find(|s| {
            s.fullname.as_bytes()[self.name.len() + 1..].eq_ignore_ascii_case(sub)
        })
    }

    /// The positions of the keys in `args`, in Redis's order (COMMAND GETKEYS, ACL
    /// key patterns): from first_key to last_key (negative: from the end) by step, then
    /// those a numkeys argument gives (`NUMKEYS_AT_1` / `NUMKEYS_AT_2`). A numkeys
    /// that is not a positive count of the arguments left gives no keys at all (the
    /// command refuses it), except as Redis's fallback reads it with C's `atoi`
    /// ("1x", " 2"): then the numkeys keys come first and the destination last.
    pub fn key_positions(&self, args: &[Bytes]) -> impl Iterator<Item = usize> {
        let n = args.len();
        let fixed = if self.first_key <= 0 || self.first_key as usize >= n {
            0..0
        } else {
            let last = if self.last_key < 0 {
                n as i32 + self.last_key
            } else {
                self.last_key.min(n as i32 - 1)
            };
            (self.first_key as usize)..(last.max(self.first_key - 1) + 1) as usize
        };
        let fixed = fixed.step_by(self.step.max(1) as usize);
        let empty = (0..0).step_by(1);
        let at = if self.flags & NUMKEYS_AT_1 != 0 {
            1
        } else if self.flags & NUMKEYS_AT_2 != 0 {
            2
        } else {
            return fixed.chain(0..0).chain(None);
        };
        let left = n.saturating_sub(at + 1);
        // Redis's key spec: numkeys by string2ll, not negative, then as an int (its
        // low 32 bits).
        let count = args.get(at).and_then(|a| super::parse_i64(a));
        let count = count.filter(|&k| k >= 0).map(|k| k as i32);
        if let Some(k) = count.filter(|&k| k >= 1 && k as usize <= left) {
            return fixed.chain(at + 1..at + 1 + k as usize).chain(None);
        }
        // Redis's fallback, the command's own getkeys function.
        let count = args.get(at).map_or(0, |a| atoi(a));
        if count >= 1 && count as usize <= left {
            let dest = (self.first_key > 0).then_some(self.first_key as usize);
            return empty.chain(at + 1..at + 1 + count as usize).chain(dest);
        }
        empty.chain(0..0).chain(None)
    }

    /// The keys of `args`, in order (see `key_positions`).
    pub fn keys<'a>(&self, args: &'a [Bytes]) -> impl Iterator<Item = &'a Bytes> {
        self.key_positions(args).map(|i| &args[i])
    }
}

/// C's `atoi` as glibc has it: `(int) strtol(s, NULL, 10)`: leading white space, a
/// sign, then as many digits as there are (none: 0), clamped to a long, then cut to
/// its low 32 bits.
fn atoi(arg: &[u8]) -> i32 {
    let start = arg.iter().position(|b| !b" \t\n\x0b\x0c\r".contains(b));
    let s = &arg[start.unwrap_or(arg.len())..];
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let mut value: i64 = 0;
    for d in digits.iter().take_while(|b| b.is_ascii_digit()) {
        let d = i64::from(d - b'0');
        value = if neg {
            value.saturating_mul(10).saturating_sub(d)
        } else {
            value.saturating_mul(10).saturating_add(d)
        };
    }
    value as i32
}

/// (name, arity, flags, ACL categories, first key, last key, step, handler)
type Row = (&'static str, i32, u32, u32, i32, i32, i32, Handler);

#[rustfmt::skip]
const ROWS: &[Row] = &[
    // connection
    ("ping", -1, FAST | PUBSUB, C_FAST | C_CONNECTION, 0, 0, 0, session::ping),
    ("echo", 2, FAST, C_FAST | C_CONNECTION, 0, 0, 0, session::echo),
    ("hello", -1, FAST | NO_AUTH | NOSCRIPT | ALLOW_BUSY, C_FAST | C_CONNECTION, 0, 0, 0, session::hello),
    ("auth", -2, FAST | NO_AUTH | NOSCRIPT | ALLOW_BUSY, C_FAST | C_CONNECTION, 0, 0, 0, session::auth),
    ("select", 2, FAST, C_FAST | C_CONNECTION, 0, 0, 0, session::select),
    ("quit", -1, FAST | NO_AUTH | PUBSUB | NOSCRIPT | ALLOW_BUSY, C_FAST | C_CONNECTION, 0, 0, 0, session::quit),
    ("reset", 1, FAST | NO_AUTH | PUBSUB | NOSCRIPT | ALLOW_BUSY, C_FAST | C_CONNECTION, 0, 0, 0, session::reset),
    ("client", -2, NOSCRIPT, C_SLOW, 0, 0, 0, session::client),
    // server
    ("info", -1, 0, C_SLOW | C_DANGEROUS, 0, 0, 0, server::info),
    ("dbsize", 1, READONLY | FAST, C_KEYSPACE | C_READ | C_FAST, 0, 0, 0, server::dbsize),
    ("flushdb", -1, WRITE | EXCLUSIVE, C_KEYSPACE | C_WRITE | C_SLOW | C_DANGEROUS, 0, 0, 0, server::flushdb),
    ("flushall", -1, WRITE | EXCLUSIVE, C_KEYSPACE | C_WRITE | C_SLOW | C_DANGEROUS, 0, 0, 0, server::flushall),
    ("time", 1, FAST, C_FAST, 0, 0, 0, server::time),
    ("command", -1, 0, C_SLOW | C_CONNECTION, 0, 0, 0, server::command),
    ("config", -2, ADMIN | NOSCRIPT, C_SLOW, 0, 0, 0, server::config),
    ("slowlog", -2, ADMIN, C_SLOW, 0, 0, 0, ops::slowlog),
    ("latency", -2, ADMIN | NOSCRIPT, C_SLOW, 0, 0, 0, ops::latency),
    ("wait", 3, NOSCRIPT, C_SLOW | C_CONNECTION, 0, 0, 0, ops::wait),
    ("shutdown", -1, ADMIN | NOSCRIPT | ALLOW_BUSY | NO_MULTI, C_ADMIN | C_SLOW | C_DANGEROUS, 0, 0, 0, server::shutdown),
    ("acl", -2, NOSCRIPT, C_SLOW, 0, 0, 0, acl_command::acl),
    ("debug", -2, ADMIN | NOSCRIPT | EXCLUSIVE, C_ADMIN | C_SLOW | C_DANGEROUS, 0, 0, 0, debug::debug),
    // strings
    ("get", 2, READONLY | FAST, C_READ | C_STRING | C_FAST, 1, 1, 1, strings::get),
    ("set", -3, WRITE | FENCED | DENYOOM, C_WRITE | C_STRING | C_SLOW, 1, 1, 1, strings::set),
    ("setnx", 3, WRITE | FENCED | DENYOOM | FAST, C_WRITE | C_STRING | C_FAST, 1, 1, 1, strings::setnx),
    ("setex", 4, WRITE | FENCED | DENYOOM, C_WRITE | C_STRING | C_SLOW, 1, 1, 1, strings::setex),
    ("psetex", 4, WRITE | FENCED | DENYOOM, C_WRITE | C_STRING | C_SLOW, 1, 1, 1, strings::psetex),
    ("getdel", 2, WRITE | FAST, C_WRITE | C_STRING | C_FAST, 1, 1, 1, strings::getdel),
    ("getex", -2, WRITE | FAST, C_WRITE | C_STRING | C_FAST, 1, 1, 1, strings::getex),
    ("mget", -2, READONLY | FAST, C_READ | C_STRING | C_FAST, 1, -1, 1, strings::mget),
    ("mset", -3, WRITE | FENCED | DENYOOM | EXCLUSIVE, C_WRITE | C_STRING | C_SLOW, 1, -1, 2, strings::mset),
    ("incr", 2, WRITE | FENCED | DENYOOM | FAST, C_WRITE | C_STRING | C_FAST, 1, 1, 1, strings::incr),
    ("decr", 2, WRITE | FENCED | DENYOOM | FAST, C_WRITE | C_STRING | C_FAST, 1, 1, 1, strings::decr),
    ("incrby", 3, WRITE | FENCED | DENYOOM | FAST, C_WRITE | C_STRING | C_FAST, 1, 1, 1, strings::incrby),
    ("decrby", 3, WRITE | FENCED | DENYOOM | FAST, C_WRITE | C_STRING | C_FAST, 1, 1, 1, strings::decrby),
    ("incrbyfloat", 3, WRITE | FENCED | DENYOOM | FAST, C_WRITE | C_STRING | C_FAST, 1, 1, 1, strings::incrbyfloat),
    ("getset", 3, WRITE | FENCED | DENYOOM | FAST, C_WRITE | C_STRING | C_FAST, 1, 1, 1, strings::getset),
    ("msetnx", -3, WRITE | FENCED | DENYOOM | EXCLUSIVE, C_WRITE | C_STRING | C_SLOW, 1, -1, 2, strings::msetnx),
    ("append", 3, WRITE | FENCED | DENYOOM | FAST, C_WRITE | C_STRING | C_FAST, 1, 1, 1, strings::append),
    ("strlen", 2, READONLY | FAST, C_READ | C_STRING | C_FAST, 1, 1, 1, strings::strlen),
    ("getrange", 4, READONLY, C_READ | C_STRING | C_SLOW, 1, 1, 1, strings::getrange),
    ("substr", 4, READONLY, C_READ | C_STRING | C_SLOW, 1, 1, 1, strings::getrange),
    ("setrange", 4, WRITE | FENCED | DENYOOM, C_WRITE | C_STRING | C_SLOW, 1, 1, 1, strings::setrange),
    // native compare-and-delete (releases: not fenced)
    ("delex", -2, WRITE | FAST, C_WRITE | C_STRING | C_FAST, 1, 1, 1, cas::delex),
    ("delifeq", 3, WRITE | FAST, C_WRITE | C_STRING | C_FAST, 1, 1, 1, cas::delifeq),
    ("digest", 2, READONLY | FAST, C_READ | C_STRING | C_FAST, 1, 1, 1, cas::digest_cmd),
    // keys
    ("del", -2, WRITE, C_KEYSPACE | C_WRITE | C_SLOW, 1, -1, 1, keys::del),
    ("unlink", -2, WRITE | FAST, C_KEYSPACE | C_WRITE | C_FAST, 1, -1, 1, keys::del),
    ("exists", -2, READONLY | FAST, C_KEYSPACE | C_READ | C_FAST, 1, -1, 1, keys::exists),
    // TOUCH: EXISTS's count (no access times are kept for it to update).
    ("touch", -2, READONLY | FAST, C_KEYSPACE | C_READ | C_FAST, 1, -1, 1, keys::exists),
    ("type", 2, READONLY | FAST, C_KEYSPACE | C_READ | C_FAST, 1, 1, 1, keys::type_),
    ("keys", 2, READONLY, C_KEYSPACE | C_READ | C_SLOW | C_DANGEROUS, 0, 0, 0, keys::keys),
    ("scan", -2, READONLY, C_KEYSPACE | C_READ | C_SLOW, 0, 0, 0, keys::scan),
    ("rename", 3, WRITE | FENCED | EXCLUSIVE, C_KEYSPACE | C_WRITE | C_SLOW, 1, 2, 1, keys::rename),
    ("renamenx", 3, WRITE | FENCED | FAST | EXCLUSIVE, C_KEYSPACE | C_WRITE | C_FAST, 1, 2, 1, keys::renamenx),
    ("copy", -3, WRITE | FENCED | DENYOOM | EXCLUSIVE, C_KEYSPACE | C_WRITE | C_SLOW, 1, 2, 1, keys::copy),
    ("move", 3, WRITE | FENCED | FAST | EXCLUSIVE, C_KEYSPACE | C_WRITE | C_FAST, 1, 1, 1, keys::move_),
    ("randomkey", 1, READONLY, C_KEYSPACE | C_READ | C_SLOW, 0, 0, 0, keys::randomkey),
    ("object", -2, READONLY, C_SLOW, 2, 2, 1, keys::object),
    ("memory", -2, READONLY, C_SLOW, 2, 2, 1, memory::memory),
    // expiry
    ("expire", -3, WRITE | FENCED | FAST, C_KEYSPACE | C_WRITE | C_FAST, 1, 1, 1, expire::expire),
    ("pexpire", -3, WRITE | FENCED | FAST, C_KEYSPACE | C_WRITE | C_FAST, 1, 1, 1, expire::pexpire),
    ("expireat", -3, WRITE | FENCED | FAST, C_KEYSPACE | C_WRITE | C_FAST, 1, 1, 1, expire::expireat),
    ("pexpireat", -3, WRITE | FENCED | FAST, C_KEYSPACE | C_WRITE | C_FAST, 1, 1, 1, expire::pexpireat),
    ("ttl", 2, READONLY | FAST, C_KEYSPACE | C_READ | C_FAST, 1, 1, 1, expire::ttl),
    ("pttl", 2, READONLY | FAST, C_KEYSPACE | C_READ | C_FAST, 1, 1, 1, expire::pttl),
    ("expiretime", 2, READONLY | FAST, C_KEYSPACE | C_READ | C_FAST, 1, 1, 1, expire::expiretime),
    ("pexpiretime", 2, READONLY | FAST, C_KEYSPACE | C_READ | C_FAST, 1, 1, 1, expire::pexpiretime),
    ("persist", 2, WRITE | FENCED | FAST, C_KEYSPACE | C_WRITE | C_FAST, 1, 1, 1, expire::persist),
    // hashes (Redisson's RLock)
    ("hset", -4, WRITE | FENCED | DENYOOM | FAST, C_WRITE | C_HASH | C_FAST, 1, 1, 1, hashes::hset),
    ("hmset", -4, WRITE | FENCED | DENYOOM | FAST, C_WRITE | C_HASH | C_FAST, 1, 1, 1, hashes::hmset),
    ("hsetnx", 4, WRITE | FENCED | DENYOOM | FAST, C_WRITE | C_HASH | C_FAST, 1, 1, 1, hashes::hsetnx),
    ("hget", 3, READONLY | FAST, C_READ | C_HASH | C_FAST, 1, 1, 1, hashes::hget),
    ("hmget", -3, READONLY | FAST, C_READ | C_HASH | C_FAST, 1, 1, 1, hashes::hmget),
    ("hdel", -3, WRITE | FAST, C_WRITE | C_HASH | C_FAST, 1, 1, 1, hashes::hdel),
    ("hexists", 3, READONLY | FAST, C_READ | C_HASH | C_FAST, 1, 1, 1, hashes::hexists),
    ("hincrby", 4, WRITE | FENCED | DENYOOM | FAST, C_WRITE | C_HASH | C_FAST, 1, 1, 1, hashes::hincrby),
    ("hincrbyfloat", 4, WRITE | FENCED | DENYOOM | FAST, C_WRITE | C_HASH | C_FAST, 1, 1, 1, hashes::hincrbyfloat),
    ("hlen", 2, READONLY | FAST, C_READ | C_HASH | C_FAST, 1, 1, 1, hashes::hlen),
    ("hstrlen", 3, READONLY | FAST, C_READ | C_HASH | C_FAST, 1, 1, 1, hashes::hstrlen),
    ("hscan", -3, READONLY, C_READ | C_HASH | C_SLOW, 1, 1, 1, hashes::hscan),
    ("hrandfield", -2, READONLY, C_READ | C_HASH | C_SLOW, 1, 1, 1, hashes::hrandfield),
    ("hgetall", 2, READONLY, C_READ | C_HASH | C_SLOW, 1, 1, 1, hashes::hgetall),
    ("hkeys", 2, READONLY, C_READ | C_HASH | C_SLOW, 1, 1, 1, hashes::hkeys),
    ("hvals", 2, READONLY, C_READ | C_HASH | C_SLOW, 1, 1, 1, hashes::hvals),
    // lists (python-redis-lock's signal list)
    ("lpush", -3, WRITE | FENCED | DENYOOM | FAST, C_WRITE | C_LIST | C_FAST, 1, 1, 1, lists::lpush),
    ("rpush", -3, WRITE | FENCED | DENYOOM | FAST, C_WRITE | C_LIST | C_FAST, 1, 1, 1, lists::rpush),
    ("lpushx", -3, WRITE | FENCED | DENYOOM | FAST, C_WRITE | C_LIST | C_FAST, 1, 1, 1, lists::lpushx),
    ("rpushx", -3, WRITE | FENCED | DENYOOM | FAST, C_WRITE | C_LIST | C_FAST, 1, 1, 1, lists::rpushx),
    ("lpop", -2, WRITE | FAST, C_WRITE | C_LIST | C_FAST, 1, 1, 1, lists::lpop),
    ("rpop", -2, WRITE | FAST, C_WRITE | C_LIST | C_FAST, 1, 1, 1, lists::rpop),
    ("llen", 2, READONLY | FAST, C_READ | C_LIST | C_FAST, 1, 1, 1, lists::llen),
    ("lrange", 4, READONLY, C_READ | C_LIST | C_SLOW, 1, 1, 1, lists::lrange),
    ("lindex", 3, READONLY, C_READ | C_LIST | C_SLOW, 1, 1, 1, lists::lindex),
    ("lrem", 4, WRITE, C_WRITE | C_LIST | C_SLOW, 1, 1, 1, lists::lrem),
    ("ltrim", 4, WRITE, C_WRITE | C_LIST | C_SLOW, 1, 1, 1, lists::ltrim),
    ("lmove", 5, WRITE | FENCED | DENYOOM | EXCLUSIVE, C_WRITE | C_LIST | C_SLOW, 1, 2, 1, lists::lmove),
    ("rpoplpush", 3, WRITE | FENCED | DENYOOM | EXCLUSIVE, C_WRITE | C_LIST | C_SLOW, 1, 2, 1, lists::rpoplpush),
    ("blmove", 6, WRITE | FENCED | DENYOOM | NOSCRIPT | BLOCKING | EXCLUSIVE, C_WRITE | C_LIST | C_SLOW | C_BLOCKING, 1, 2, 1, lists::blmove),
    ("brpoplpush", 4, WRITE | FENCED | DENYOOM | NOSCRIPT | BLOCKING | EXCLUSIVE, C_WRITE | C_LIST | C_SLOW | C_BLOCKING, 1, 2, 1, lists::brpoplpush),
    ("lset", 4, WRITE | DENYOOM, C_WRITE | C_LIST | C_SLOW, 1, 1, 1, lists::lset),
    ("linsert", 5, WRITE | DENYOOM, C_WRITE | C_LIST | C_SLOW, 1, 1, 1, lists::linsert),
    ("lpos", -3, READONLY, C_READ | C_LIST | C_SLOW, 1, 1, 1, lists::lpos),
    // LMPOP pops from the first of numkeys keys that exists: the gate is held
    // exclusively, so no key before it is filled in between.
    ("lmpop", -4, WRITE | EXCLUSIVE | NUMKEYS_AT_1, C_WRITE | C_LIST | C_SLOW, 0, 0, 0, lists::lmpop),
    // BLMPOP: not NOSCRIPT, unlike BLPOP's neighbours in Redis 7.0: a script may call
    // it, and there it never blocks.
    ("blmpop", -5, WRITE | BLOCKING | EXCLUSIVE | NUMKEYS_AT_2, C_WRITE | C_LIST | C_SLOW | C_BLOCKING, 0, 0, 0, lists::blmpop),
    ("blpop", -3, WRITE | NOSCRIPT | BLOCKING, C_WRITE | C_LIST | C_SLOW | C_BLOCKING, 1, -2, 1, lists::blpop),
    ("brpop", -3, WRITE | NOSCRIPT | BLOCKING, C_WRITE | C_LIST | C_SLOW | C_BLOCKING, 1, -2, 1, lists::brpop),
    // sorted sets (semaphores, fair locks)
    ("zadd", -4, WRITE | FENCED | DENYOOM | FAST, C_WRITE | C_SORTEDSET | C_FAST, 1, 1, 1, zsets::zadd),
    ("zincrby", 4, WRITE | FENCED | DENYOOM | FAST, C_WRITE | C_SORTEDSET | C_FAST, 1, 1, 1, zsets::zincrby),
    ("zrem", -3, WRITE | FAST, C_WRITE | C_SORTEDSET | C_FAST, 1, 1, 1, zsets::zrem),
    ("zcard", 2, READONLY | FAST, C_READ | C_SORTEDSET | C_FAST, 1, 1, 1, zsets::zcard),
    ("zscore", 3, READONLY | FAST, C_READ | C_SORTEDSET | C_FAST, 1, 1, 1, zsets::zscore),
    ("zmscore", -3, READONLY | FAST, C_READ | C_SORTEDSET | C_FAST, 1, 1, 1, zsets::zmscore),
    ("zrank", -3, READONLY | FAST, C_READ | C_SORTEDSET | C_FAST, 1, 1, 1, zsets::zrank),
    ("zrevrank", -3, READONLY | FAST, C_READ | C_SORTEDSET | C_FAST, 1, 1, 1, zsets::zrevrank),
    ("zcount", 4, READONLY | FAST, C_READ | C_SORTEDSET | C_FAST, 1, 1, 1, zranges::zcount),
    ("zlexcount", 4, READONLY | FAST, C_READ | C_SORTEDSET | C_FAST, 1, 1, 1, zranges::zlexcount),
    ("zrange", -4, READONLY, C_READ | C_SORTEDSET | C_SLOW, 1, 1, 1, zranges::zrange),
    ("zrangebyscore", -4, READONLY, C_READ | C_SORTEDSET | C_SLOW, 1, 1, 1, zranges::zrangebyscore),
    ("zrevrange", -4, READONLY, C_READ | C_SORTEDSET | C_SLOW, 1, 1, 1, zranges::zrevrange),
    ("zrevrangebyscore", -4, READONLY, C_READ | C_SORTEDSET | C_SLOW, 1, 1, 1, zranges::zrevrangebyscore),
    ("zrangebylex", -4, READONLY, C_READ | C_SORTEDSET | C_SLOW, 1, 1, 1, zranges::zrangebylex),
    ("zrevrangebylex", -4, READONLY, C_READ | C_SORTEDSET | C_SLOW, 1, 1, 1, zranges::zrevrangebylex),
    ("zrangestore", -5, WRITE | FENCED | DENYOOM | EXCLUSIVE, C_WRITE | C_SORTEDSET | C_SLOW, 1, 2, 1, zranges::zrangestore),
    ("zremrangebyscore", 4, WRITE, C_WRITE | C_SORTEDSET | C_SLOW, 1, 1, 1, zranges::zremrangebyscore),
    ("zremrangebyrank", 4, WRITE, C_WRITE | C_SORTEDSET | C_SLOW, 1, 1, 1, zranges::zremrangebyrank),
    ("zremrangebylex", 4, WRITE, C_WRITE | C_SORTEDSET | C_SLOW, 1, 1, 1, zranges::zremrangebylex),
    ("zpopmin", -2, WRITE | FAST, C_WRITE | C_SORTEDSET | C_FAST, 1, 1, 1, zsets::zpopmin),
    ("zpopmax", -2, WRITE | FAST, C_WRITE | C_SORTEDSET | C_FAST, 1, 1, 1, zsets::zpopmax),
    // ZMPOP: as LMPOP
    ("zmpop", -4, WRITE | EXCLUSIVE | NUMKEYS_AT_1, C_WRITE | C_SORTEDSET | C_SLOW, 0, 0, 0, zsets::zmpop),
    ("bzpopmin", -3, WRITE | FAST | BLOCKING | NOSCRIPT, C_WRITE | C_SORTEDSET | C_FAST | C_BLOCKING, 1, -2, 1, zsets::bzpopmin),
    ("bzpopmax", -3, WRITE | FAST | BLOCKING | NOSCRIPT, C_WRITE | C_SORTEDSET | C_FAST | C_BLOCKING, 1, -2, 1, zsets::bzpopmax),
    // BZMPOP: as BLMPOP (scripts may call it, unlike BZPOPMIN)
    ("bzmpop", -5, WRITE | BLOCKING | EXCLUSIVE | NUMKEYS_AT_2, C_WRITE | C_SORTEDSET | C_SLOW | C_BLOCKING, 0, 0, 0, zsets::bzmpop),
    ("zrandmember", -2, READONLY, C_READ | C_SORTEDSET | C_SLOW, 1, 1, 1, zsets::zrandmember),
    ("zscan", -3, READONLY, C_READ | C_SORTEDSET | C_SLOW, 1, 1, 1, zsets::zscan),
    // sorted-set algebra: several keys, so the gate is held exclusively (atomic); the
    // inputs follow a numkeys argument, after the STORE forms' destination
    ("zunionstore", -4, WRITE | FENCED | DENYOOM | EXCLUSIVE | NUMKEYS_AT_2, C_WRITE | C_SORTEDSET | C_SLOW, 1, 1, 1, zalgebra::zunionstore),
    ("zinterstore", -4, WRITE | FENCED | DENYOOM | EXCLUSIVE | NUMKEYS_AT_2, C_WRITE | C_SORTEDSET | C_SLOW, 1, 1, 1, zalgebra::zinterstore),
    ("zdiffstore", -4, WRITE | FENCED | DENYOOM | EXCLUSIVE | NUMKEYS_AT_2, C_WRITE | C_SORTEDSET | C_SLOW, 1, 1, 1, zalgebra::zdiffstore),
    ("zunion", -3, READONLY | EXCLUSIVE | NUMKEYS_AT_1, C_READ | C_SORTEDSET | C_SLOW, 0, 0, 0, zalgebra::zunion),
    ("zinter", -3, READONLY | EXCLUSIVE | NUMKEYS_AT_1, C_READ | C_SORTEDSET | C_SLOW, 0, 0, 0, zalgebra::zinter),
    ("zdiff", -3, READONLY | EXCLUSIVE | NUMKEYS_AT_1, C_READ | C_SORTEDSET | C_SLOW, 0, 0, 0, zalgebra::zdiff),
    ("zintercard", -3, READONLY | EXCLUSIVE | NUMKEYS_AT_1, C_READ | C_SORTEDSET | C_SLOW, 0, 0, 0, zalgebra::zintercard),
    // sets; commands over several keys hold the gate exclusively (atomic)
    ("sadd", -3, WRITE | FENCED | DENYOOM | FAST, C_WRITE | C_SET | C_FAST, 1, 1, 1, sets::sadd),
    ("srem", -3, WRITE | FAST, C_WRITE | C_SET | C_FAST, 1, 1, 1, sets::srem),
    ("scard", 2, READONLY | FAST, C_READ | C_SET | C_FAST, 1, 1, 1, sets::scard),
    ("sismember", 3, READONLY | FAST, C_READ | C_SET | C_FAST, 1, 1, 1, sets::sismember),
    ("smismember", -3, READONLY | FAST, C_READ | C_SET | C_FAST, 1, 1, 1, sets::smismember),
    ("smembers", 2, READONLY, C_READ | C_SET | C_SLOW, 1, 1, 1, sets::smembers),
    ("spop", -2, WRITE | FAST, C_WRITE | C_SET | C_FAST, 1, 1, 1, sets::spop),
    ("srandmember", -2, READONLY, C_READ | C_SET | C_SLOW, 1, 1, 1, sets::srandmember),
    ("smove", 4, WRITE | FENCED | FAST | EXCLUSIVE, C_WRITE | C_SET | C_FAST, 1, 2, 1, sets::smove),
    ("sscan", -3, READONLY, C_READ | C_SET | C_SLOW, 1, 1, 1, sets::sscan),
    ("sinter", -2, READONLY | EXCLUSIVE, C_READ | C_SET | C_SLOW, 1, -1, 1, sets::sinter),
    ("sintercard", -3, READONLY | EXCLUSIVE | NUMKEYS_AT_1, C_READ | C_SET | C_SLOW, 0, 0, 0, sets::sintercard),
    ("sunion", -2, READONLY | EXCLUSIVE, C_READ | C_SET | C_SLOW, 1, -1, 1, sets::sunion),
    ("sdiff", -2, READONLY | EXCLUSIVE, C_READ | C_SET | C_SLOW, 1, -1, 1, sets::sdiff),
    ("sinterstore", -3, WRITE | FENCED | DENYOOM | EXCLUSIVE, C_WRITE | C_SET | C_SLOW, 1, -1, 1, sets::sinterstore),
    ("sunionstore", -3, WRITE | FENCED | DENYOOM | EXCLUSIVE, C_WRITE | C_SET | C_SLOW, 1, -1, 1, sets::sunionstore),
    ("sdiffstore", -3, WRITE | FENCED | DENYOOM | EXCLUSIVE, C_WRITE | C_SET | C_SLOW, 1, -1, 1, sets::sdiffstore),
    // fencing tokens (redlockd's own): grant + read the mark, commit a token
    ("fencing.grant", 5, WRITE | FENCED | DENYOOM | FAST, C_WRITE | C_STRING | C_FAST, 1, 1, 1, fencing::grant),
    ("fencing.commit", 4, WRITE | FAST, C_WRITE | C_STRING | C_FAST, 1, 1, 1, fencing::commit),
    ("fencing.mark", 1, READONLY | FAST, C_READ | C_FAST, 0, 0, 0, fencing::mark),
    // pub/sub
    ("subscribe", -2, PUBSUB | NOSCRIPT, C_PUBSUB | C_SLOW, 0, 0, 0, pubsub::subscribe),
    ("unsubscribe", -1, PUBSUB | NOSCRIPT, C_PUBSUB | C_SLOW, 0, 0, 0, pubsub::unsubscribe),
    ("psubscribe", -2, PUBSUB | NOSCRIPT, C_PUBSUB | C_SLOW, 0, 0, 0, pubsub::psubscribe),
    ("punsubscribe", -1, PUBSUB | NOSCRIPT, C_PUBSUB | C_SLOW, 0, 0, 0, pubsub::punsubscribe),
    ("publish", 3, FAST, C_PUBSUB | C_FAST, 0, 0, 0, pubsub::publish),
    ("pubsub", -2, 0, C_SLOW, 0, 0, 0, pubsub::pubsub),
    // scripting: scripts hold the gate exclusively (atomic); keys come from
    // numkeys, so no fixed key positions.
    ("eval", -3, NOSCRIPT | NUMKEYS_AT_2 | NO_MANDATORY_KEYS | EXCLUSIVE, C_SLOW | C_SCRIPTING, 0, 0, 0, eval::eval),
    ("evalsha", -3, NOSCRIPT | NUMKEYS_AT_2 | NO_MANDATORY_KEYS | EXCLUSIVE, C_SLOW | C_SCRIPTING, 0, 0, 0, eval::evalsha),
    ("eval_ro", -3, NOSCRIPT | NUMKEYS_AT_2 | NO_MANDATORY_KEYS | READONLY | EXCLUSIVE, C_SLOW | C_SCRIPTING, 0, 0, 0, eval::eval_ro),
    ("evalsha_ro", -3, NOSCRIPT | NUMKEYS_AT_2 | NO_MANDATORY_KEYS | READONLY | EXCLUSIVE, C_SLOW | C_SCRIPTING, 0, 0, 0, eval::evalsha_ro),
    ("script", -2, NOSCRIPT | ALLOW_BUSY, C_SLOW, 0, 0, 0, eval::script),
    ("fcall", -3, NOSCRIPT | NUMKEYS_AT_2 | NO_MANDATORY_KEYS | EXCLUSIVE, C_SLOW | C_SCRIPTING, 0, 0, 0, fcall::fcall),
    ("fcall_ro", -3, NOSCRIPT | NUMKEYS_AT_2 | NO_MANDATORY_KEYS | READONLY | EXCLUSIVE, C_SLOW | C_SCRIPTING, 0, 0, 0, fcall::fcall_ro),
    ("function", -2, NOSCRIPT | ALLOW_BUSY, C_SLOW, 0, 0, 0, fcall::function),
    // transactions: EXEC runs its queue holding the gate exclusively; the others only
    // touch the client's own state (and the watch registry), so they skip the gate.
    ("multi", 1, NOSCRIPT | FAST | ALLOW_BUSY, C_FAST | C_TRANSACTION, 0, 0, 0, multi::multi),
    ("exec", 1, NOSCRIPT | EXCLUSIVE, C_SLOW | C_TRANSACTION, 0, 0, 0, multi::exec),
    ("discard", 1, NOSCRIPT | FAST | ALLOW_BUSY, C_FAST | C_TRANSACTION, 0, 0, 0, multi::discard),
    ("watch", -2, NOSCRIPT | FAST | ALLOW_BUSY, C_FAST | C_TRANSACTION, 1, -1, 1, multi::watch),
    ("unwatch", 1, NOSCRIPT | FAST | ALLOW_BUSY, C_FAST | C_TRANSACTION, 0, 0, 0, multi::unwatch),
];

/// Subcommands of the container commands, as Redis 7 lists them (with their ACL
/// categories, which differ between siblings: CLIENT ID is @connection, CLIENT KILL
/// @admin @dangerous too). Some are subcommands redlockd does not run (CLIENT PAUSE):
/// rules may still name them, as in Redis.
#[rustfmt::skip]
const SUB_ROWS: &[(&str, u32)] = &[
    ("client|caching", C_SLOW | C_CONNECTION),
    ("client|getname", C_SLOW | C_CONNECTION),
    ("client|getredir", C_SLOW | C_CONNECTION),
    ("client|help", C_SLOW | C_CONNECTION),
    ("client|id", C_SLOW | C_CONNECTION),
    ("client|info", C_SLOW | C_CONNECTION),
    ("client|kill", C_ADMIN | C_SLOW | C_DANGEROUS | C_CONNECTION),
    ("client|list", C_ADMIN | C_SLOW | C_DANGEROUS | C_CONNECTION),
    ("client|no-evict", C_ADMIN | C_SLOW | C_DANGEROUS | C_CONNECTION),
    ("client|no-touch", C_SLOW | C_CONNECTION),
    ("client|pause", C_ADMIN | C_SLOW | C_DANGEROUS | C_CONNECTION),
    ("client|reply", C_SLOW | C_CONNECTION),
    ("client|setinfo", C_SLOW | C_CONNECTION),
    ("client|setname", C_SLOW | C_CONNECTION),
    ("client|tracking", C_SLOW | C_CONNECTION),
    ("client|trackinginfo", C_SLOW | C_CONNECTION),
    ("client|unblock", C_ADMIN | C_SLOW | C_DANGEROUS | C_CONNECTION),
    ("client|unpause", C_ADMIN | C_SLOW | C_DANGEROUS | C_CONNECTION),
    ("command|count", C_SLOW | C_CONNECTION),
    ("command|docs", C_SLOW | C_CONNECTION),
    ("command|getkeys", C_SLOW | C_CONNECTION),
    ("command|getkeysandflags", C_SLOW | C_CONNECTION),
    ("command|help", C_SLOW | C_CONNECTION),
    ("command|info", C_SLOW | C_CONNECTION),
    ("command|list", C_SLOW | C_CONNECTION),
    ("config|get", C_ADMIN | C_SLOW | C_DANGEROUS),
    ("config|help", C_SLOW),
    ("config|resetstat", C_ADMIN | C_SLOW | C_DANGEROUS),
    ("config|rewrite", C_ADMIN | C_SLOW | C_DANGEROUS),
    ("config|set", C_ADMIN | C_SLOW | C_DANGEROUS),
    ("slowlog|get", C_ADMIN | C_SLOW | C_DANGEROUS),
    ("slowlog|help", C_SLOW),
    ("slowlog|len", C_ADMIN | C_SLOW | C_DANGEROUS),
    ("slowlog|reset", C_ADMIN | C_SLOW | C_DANGEROUS),
    ("latency|doctor", C_ADMIN | C_SLOW | C_DANGEROUS),
    ("latency|graph", C_ADMIN | C_SLOW | C_DANGEROUS),
    ("latency|help", C_SLOW),
    ("latency|histogram", C_ADMIN | C_SLOW | C_DANGEROUS),
    ("latency|history", C_ADMIN | C_SLOW | C_DANGEROUS),
    ("latency|latest", C_ADMIN | C_SLOW | C_DANGEROUS),
    ("latency|reset", C_ADMIN | C_SLOW | C_DANGEROUS),
    ("object|encoding", C_KEYSPACE | C_READ | C_SLOW),
    ("object|freq", C_KEYSPACE | C_READ | C_SLOW),
    ("object|help", C_KEYSPACE | C_SLOW),
    ("object|idletime", C_KEYSPACE | C_READ | C_SLOW),
    ("object|refcount", C_KEYSPACE | C_READ | C_SLOW),
    ("memory|doctor", C_SLOW),
    ("memory|help", C_SLOW),
    ("memory|malloc-stats", C_SLOW),
    ("memory|purge", C_SLOW),
    ("memory|stats", C_SLOW),
    ("memory|usage", C_READ | C_SLOW),
    ("pubsub|channels", C_PUBSUB | C_SLOW),
    ("pubsub|help", C_SLOW),
    ("pubsub|numpat", C_PUBSUB | C_SLOW),
    ("pubsub|numsub", C_PUBSUB | C_SLOW),
    ("pubsub|shardchannels", C_PUBSUB | C_SLOW),
    ("pubsub|shardnumsub", C_PUBSUB | C_SLOW),
    ("script|debug", C_SLOW | C_SCRIPTING),
    ("script|exists", C_SLOW | C_SCRIPTING),
    ("script|flush", C_SLOW | C_SCRIPTING),
    ("script|help", C_SLOW | C_SCRIPTING),
    ("script|kill", C_SLOW | C_SCRIPTING),
    ("script|load", C_SLOW | C_SCRIPTING),
    ("function|delete", C_WRITE | C_SLOW | C_SCRIPTING),
    ("function|dump", C_SLOW | C_SCRIPTING),
    ("function|flush", C_WRITE | C_SLOW | C_SCRIPTING),
    ("function|help", C_SLOW | C_SCRIPTING),
    ("function|kill", C_SLOW | C_SCRIPTING),
    ("function|list", C_SLOW | C_SCRIPTING),
    ("function|load", C_WRITE | C_SLOW | C_SCRIPTING),
    ("function|restore", C_WRITE | C_SLOW | C_SCRIPTING),
    ("function|stats", C_SLOW | C_SCRIPTING),
    ("acl|cat", C_SLOW),
    ("acl|deluser", C_ADMIN | C_SLOW | C_DANGEROUS),
    ("acl|dryrun", C_ADMIN | C_SLOW | C_DANGEROUS),
    ("acl|genpass", C_SLOW),
    ("acl|getuser", C_ADMIN | C_SLOW | C_DANGEROUS),
    ("acl|help", C_SLOW),
    ("acl|list", C_ADMIN | C_SLOW | C_DANGEROUS),
    ("acl|load", C_ADMIN | C_SLOW | C_DANGEROUS),
    ("acl|log", C_ADMIN | C_SLOW | C_DANGEROUS),
    ("acl|save", C_ADMIN | C_SLOW | C_DANGEROUS),
    ("acl|setuser", C_ADMIN | C_SLOW | C_DANGEROUS),
    ("acl|users", C_ADMIN | C_SLOW | C_DANGEROUS),
    ("acl|whoami", C_SLOW),
];

/// Every subcommand, in `SUB_ROWS` order (grouped by parent).
pub static SUBCOMMANDS: LazyLock<Vec<Subcommand>> = LazyLock::new(|| {
    SUB_ROWS
        .iter()
        .enumerate()
        .map(|(i, &(fullname, cats))| Subcommand {
            fullname,
            cats,
            id: ROWS.len() + i,
        })
        .collect()
});

/// Every command, in table order.
pub static COMMANDS: LazyLock<Vec<Spec>> = LazyLock::new(|| {
    ROWS.iter()
        .enumerate()
        .map(
            |(index, &(name, arity, flags, cats, first_key, last_key, step, handler))| {
                let subs = &SUBCOMMANDS[..];
                let start = subs
                    .iter()
                    .position(|s| is_sub_of(s.fullname, name))
                    .unwrap_or(0);
                let len = subs[start..]
                    .iter()
                    .take_while(|s| is_sub_of(s.fullname, name))
                    .count();
                Spec {
                    name,
                    arity,
                    flags,
                    cats,
                    first_key,
                    last_key,
                    step,
                    handler,
                    index,
                    subcommands: &SUBCOMMANDS[start..start + len],
                }
            },
        )
        .collect()
});

/// Whether `fullname` (`parent|sub`) is a subcommand of `parent`.
fn is_sub_of(fullname: &str, parent: &str) -> bool {
    fullname
        .strip_prefix(parent)
        .is_some_and(|rest| rest.starts_with('|'))
}

/// The name table: open addressing over a power-of-two array of `COMMANDS` indices
/// (+1; 0 is empty), at most a quarter full, looked up without copying the name.
/// The hash folds ASCII case (`b | 0x20`), so "GET", "get" and "GeT" probe the same
/// slots, and a candidate is confirmed with `eq_ignore_ascii_case`. Unkeyed: the
/// table is fixed at startup, so no input can add collisions to it. It replaced a
/// HashMap keyed by the lowercased name (a copy, then FNV over a length prefix and
/// the bytes): ~190 instructions per lookup, and every command runs one.
static BY_NAME: LazyLock<Box<[u16]>> = LazyLock::new(|| {
    let size = (COMMANDS.len() * 4).next_power_of_two();
    let mut slots = vec![0u16; size].into_boxed_slice();
    for spec in COMMANDS.iter() {
        let mut at = name_hash(spec.name.as_bytes()) & (size - 1);
        while slots[at] != 0 {
            at = (at + 1) & (size - 1);
        }
        slots[at] = u16::try_from(spec.index + 1).expect("fewer than 65535 commands");
    }
    slots
});

/// Eight bytes at a time (most names are one or two words), case folded by setting
/// bit 5 of every byte.
fn name_hash(name: &[u8]) -> usize {
    const FOLD: u64 = 0x2020_2020_2020_2020;
    const MIX: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h = name.len() as u64;
    for chunk in name.chunks(8) {
        let mut word = [0u8; 8];
        word[..chunk.len()].copy_from_slice(chunk);
        h = (h ^ (u64::from_le_bytes(word) | FOLD)).wrapping_mul(MIX).rotate_left(29);
    }
    (h.wrapping_mul(MIX) >> 32) as usize
}

/// Finds a command by name, in any case.
pub fn lookup(name: &[u8]) -> Option<&'static Spec> {
    let slots = &*BY_NAME;
    let mask = slots.len() - 1;
    let mut at = name_hash(name) & mask;
    loop {
        let spec = &COMMANDS[usize::from(slots[at]).checked_sub(1)?];
        if spec.name.as_bytes().eq_ignore_ascii_case(name) {
            return Some(spec);
        }
        at = (at + 1) & mask;
    }
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
        assert_eq!(lookup(b"EvalSha").map(|s| s.name), Some("evalsha"));
        // A name that folds to a command's under `| 0x20` but is not it ('_' and
        // DEL fold alike), and one that is not ASCII.
        assert_eq!(lookup(b"EVAL_RO").map(|s| s.name), Some("eval_ro"));
        assert!(lookup(b"eval\x7fro").is_none());
        assert!(lookup(b"g\xc5t").is_none());
        assert!(lookup(b"").is_none());
        assert!(lookup(&[b'x'; 100]).is_none());
        assert!(lookup(b"").is_none());
        assert!(lookup(&[b'g'; 40]).is_none());
    }
}
