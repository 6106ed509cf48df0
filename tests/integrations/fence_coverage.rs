//! The fence's coverage, derived from the command table: every command that can
//! create a key or lengthen a TTL is refused with TRYAGAIN while the restart fence is
//! up, sent directly, from EVAL, from FCALL and inside MULTI, and the keyspace does not
//! change; every other write runs and neither creates a key nor lengthens a TTL.
//! The same cases, above --maxmemory, get Redis's OOM refusal exactly when the table
//! marks the command `denyoom` (a container command's case: its subcommand, XGROUP
//! CREATE is denyoom and XGROUP DESTROY is not).
//!
//! The list below must name every command of the table (COMMAND LIST): a command
//! added later fails `the_cases_cover_the_whole_table` until someone says, with a
//! case, whether it is fenced. The table's `write` and `denyoom` flags are Redis 7's
//! (tests/integrations/acl.rs compares COMMAND INFO with a real redis-server), so "Redis marks it
//! write and denyoom" is read here from our own COMMAND INFO.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use support::*;

const FENCE: Duration = Duration::from_secs(31);

fn tryagain() -> String {
    err("TRYAGAIN restart fence: this node restarted and may have granted locks that are still held; it refuses writes for another 31000 ms (its data directory holds no record of what it granted; a brand-new node is declared with `redlockd init --dir DIR` before its first start)")
}

const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";
const EXECABORT: &str = "EXECABORT Transaction discarded because of previous errors.";
const NOSCRIPT: &str = "This Redis command is not allowed from script";

#[derive(Clone, Copy, PartialEq, Debug)]
enum Expect {
    /// Refused with TRYAGAIN; nothing changes.
    Fenced,
    /// Runs (it cannot create a key nor lengthen a TTL): the keys after it are a
    /// subset of those before, none with a later deadline.
    Runs,
}
use Expect::*;

/// One way of calling a command: its arguments and what the fence does with it.
type Case = (&'static [&'static str], Expect);

/// Every write command of the table, with the arguments that make it create a key or
/// lengthen a TTL (Fenced) or, for writes that cannot, a typical call (Runs), against
/// the fixture below. `@s+20` / `@ms+20000` are wall times 20 s from now.
#[rustfmt::skip]
const WRITES: &[(&str, &[Case])] = &[
    // strings
    ("set", &[(&["SET", "new", "v"], Fenced), (&["SET", "new", "v", "NX", "PX", "1000"], Fenced),
              (&["SET", "s", "w", "XX", "PX", "20000"], Fenced), (&["SET", "s", "w", "IFEQ", "v", "PX", "20000"], Fenced)]),
    ("setnx", &[(&["SETNX", "new", "v"], Fenced)]),
    ("setex", &[(&["SETEX", "new", "10", "v"], Fenced)]),
    ("psetex", &[(&["PSETEX", "new", "10000", "v"], Fenced)]),
    ("getdel", &[(&["GETDEL", "s"], Runs)]),
    ("getex", &[(&["GETEX", "s", "PX", "20000"], Fenced), (&["GETEX", "s", "EXAT", "@s+20"], Fenced),
                (&["GETEX", "s", "PERSIST"], Fenced), (&["GETEX", "s"], Runs)]),
    ("mset", &[(&["MSET", "new", "v"], Fenced)]),
    ("msetnx", &[(&["MSETNX", "new", "v"], Fenced)]),
    ("incr", &[(&["INCR", "new"], Fenced)]),
    ("decr", &[(&["DECR", "new"], Fenced)]),
    ("incrby", &[(&["INCRBY", "new", "2"], Fenced)]),
    ("decrby", &[(&["DECRBY", "new", "2"], Fenced)]),
    ("incrbyfloat", &[(&["INCRBYFLOAT", "new", "1.5"], Fenced)]),
    ("getset", &[(&["GETSET", "new", "v"], Fenced)]),
    ("append", &[(&["APPEND", "new", "v"], Fenced)]),
    ("setrange", &[(&["SETRANGE", "new", "0", "v"], Fenced)]),
    ("delex", &[(&["DELEX", "s"], Runs)]),
    ("delifeq", &[(&["DELIFEQ", "s", "v"], Runs)]),
    // keys
    ("del", &[(&["DEL", "s", "h"], Runs)]),
    ("unlink", &[(&["UNLINK", "s"], Runs)]),
    ("rename", &[(&["RENAME", "s", "new"], Fenced)]),
    ("renamenx", &[(&["RENAMENX", "s", "new"], Fenced)]),
    ("copy", &[(&["COPY", "s", "new"], Fenced)]),
    ("move", &[(&["MOVE", "s", "1"], Fenced)]),
    ("flushdb", &[(&["FLUSHDB"], Runs)]),
    ("flushall", &[(&["FLUSHALL"], Runs)]),
    // expiry
    ("expire", &[(&["EXPIRE", "s", "20"], Fenced), (&["EXPIRE", "n", "20"], Fenced)]),
    ("pexpire", &[(&["PEXPIRE", "s", "20000"], Fenced)]),
    ("expireat", &[(&["EXPIREAT", "s", "@s+20"], Fenced)]),
    ("pexpireat", &[(&["PEXPIREAT", "s", "@ms+20000"], Fenced)]),
    ("persist", &[(&["PERSIST", "s"], Fenced)]),
    // hashes
    ("hset", &[(&["HSET", "new", "f", "v"], Fenced), (&["HSET", "h", "new", "v"], Fenced)]),
    ("hmset", &[(&["HMSET", "new", "f", "v"], Fenced)]),
    ("hsetnx", &[(&["HSETNX", "new", "f", "v"], Fenced)]),
    ("hincrby", &[(&["HINCRBY", "new", "f", "1"], Fenced)]),
    ("hincrbyfloat", &[(&["HINCRBYFLOAT", "new", "f", "1.5"], Fenced)]),
    ("hdel", &[(&["HDEL", "h", "f"], Runs)]),
    // lists
    ("lpush", &[(&["LPUSH", "new", "x"], Fenced)]),
    ("rpush", &[(&["RPUSH", "new", "x"], Fenced)]),
    ("lpushx", &[(&["LPUSHX", "l", "w"], Fenced)]),
    ("rpushx", &[(&["RPUSHX", "l", "w"], Fenced)]),
    ("lpop", &[(&["LPOP", "l"], Runs)]),
    ("rpop", &[(&["RPOP", "l", "2"], Runs)]),
    ("lrem", &[(&["LREM", "l", "0", "x"], Runs)]),
    ("ltrim", &[(&["LTRIM", "l", "0", "0"], Runs)]),
    ("lmove", &[(&["LMOVE", "l", "new", "LEFT", "RIGHT"], Fenced), (&["LMOVE", "l", "l", "LEFT", "RIGHT"], Fenced)]),
    ("rpoplpush", &[(&["RPOPLPUSH", "l", "new"], Fenced)]),
    ("blmove", &[(&["BLMOVE", "l", "new", "LEFT", "RIGHT", "0"], Fenced)]),
    ("brpoplpush", &[(&["BRPOPLPUSH", "l", "new", "0"], Fenced)]),
    // LSET and LINSERT are denyoom (they grow a list) but change only a list that
    // exists: they cannot create a key nor touch a TTL.
    ("lset", &[(&["LSET", "l", "0", "w"], Runs)]),
    ("linsert", &[(&["LINSERT", "l", "BEFORE", "x", "w"], Runs)]),
    ("lmpop", &[(&["LMPOP", "1", "l", "LEFT"], Runs)]),
    ("blmpop", &[(&["BLMPOP", "0", "1", "l", "LEFT"], Runs)]),
    ("blpop", &[(&["BLPOP", "l", "0"], Runs)]),
    ("brpop", &[(&["BRPOP", "l", "0"], Runs)]),
    // sorted sets
    ("zadd", &[(&["ZADD", "new", "1", "m"], Fenced), (&["ZADD", "z", "3", "o"], Fenced)]),
    ("zincrby", &[(&["ZINCRBY", "new", "1", "m"], Fenced)]),
    ("zrem", &[(&["ZREM", "z", "m"], Runs)]),
    ("zrangestore", &[(&["ZRANGESTORE", "new", "z", "0", "-1"], Fenced)]),
    ("zremrangebyscore", &[(&["ZREMRANGEBYSCORE", "z", "0", "1"], Runs)]),
    ("zremrangebyrank", &[(&["ZREMRANGEBYRANK", "z", "0", "0"], Runs)]),
    ("zremrangebylex", &[(&["ZREMRANGEBYLEX", "z", "-", "+"], Runs)]),
    ("zpopmin", &[(&["ZPOPMIN", "z"], Runs)]),
    ("zpopmax", &[(&["ZPOPMAX", "z", "5"], Runs)]),
    ("zmpop", &[(&["ZMPOP", "1", "z", "MIN"], Runs)]),
    ("bzpopmin", &[(&["BZPOPMIN", "z", "0"], Runs)]),
    ("bzpopmax", &[(&["BZPOPMAX", "z", "0"], Runs)]),
    ("bzmpop", &[(&["BZMPOP", "0", "1", "z", "MAX"], Runs)]),
    ("zunionstore", &[(&["ZUNIONSTORE", "new", "1", "z"], Fenced)]),
    ("zinterstore", &[(&["ZINTERSTORE", "new", "1", "z"], Fenced)]),
    ("zdiffstore", &[(&["ZDIFFSTORE", "new", "1", "z"], Fenced)]),
    // sets
    ("sadd", &[(&["SADD", "new", "m"], Fenced), (&["SADD", "a", "o"], Fenced)]),
    ("srem", &[(&["SREM", "a", "m"], Runs)]),
    ("spop", &[(&["SPOP", "a"], Runs)]),
    ("smove", &[(&["SMOVE", "a", "new", "m"], Fenced), (&["SMOVE", "a", "b", "n"], Fenced)]),
    ("sinterstore", &[(&["SINTERSTORE", "new", "a"], Fenced)]),
    ("sunionstore", &[(&["SUNIONSTORE", "new", "a"], Fenced)]),
    ("sdiffstore", &[(&["SDIFFSTORE", "new", "a"], Fenced)]),
    // streams: XADD and XGROUP CREATE ... MKSTREAM create the key; the rest change a
    // stream that exists (XGROUP's other subcommands, XREADGROUP's consumers and
    // PEL, XCLAIM, XACK...).
    ("xadd", &[(&["XADD", "new", "1-1", "f", "v"], Fenced), (&["XADD", "x", "9-1", "f", "v"], Fenced)]),
    ("xgroup", &[(&["XGROUP", "CREATE", "new", "g", "$", "MKSTREAM"], Fenced), (&["XGROUP", "CREATE", "x", "g2", "0"], Runs),
                 (&["XGROUP", "CREATECONSUMER", "x", "g", "c2"], Runs), (&["XGROUP", "DESTROY", "x", "g"], Runs),
                 (&["XGROUP", "DELCONSUMER", "x", "g", "c1"], Runs), (&["XGROUP", "SETID", "x", "g", "0"], Runs)]),
    ("xdel", &[(&["XDEL", "x", "1-1"], Runs)]),
    ("xtrim", &[(&["XTRIM", "x", "MAXLEN", "0"], Runs)]),
    ("xsetid", &[(&["XSETID", "x", "9-9"], Runs)]),
    ("xreadgroup", &[(&["XREADGROUP", "GROUP", "g", "c", "STREAMS", "x", ">"], Runs)]),
    ("xack", &[(&["XACK", "x", "g", "1-1"], Runs)]),
    ("xclaim", &[(&["XCLAIM", "x", "g", "c3", "0", "1-1"], Runs)]),
    ("xautoclaim", &[(&["XAUTOCLAIM", "x", "g", "c3", "0", "0"], Runs)]),
    // bitmaps, HyperLogLog and GEO: BITFIELD and GEORADIUS[BYMEMBER] are fenced only
    // when they write (SET/INCRBY; STORE/STOREDIST).
    ("setbit", &[(&["SETBIT", "new", "7", "1"], Fenced), (&["SETBIT", "s", "100", "1"], Fenced)]),
    ("bitop", &[(&["BITOP", "OR", "new", "s"], Fenced)]),
    ("bitfield", &[(&["BITFIELD", "new", "SET", "u8", "0", "1"], Fenced),
                   (&["BITFIELD", "s", "INCRBY", "u8", "100", "1"], Fenced),
                   (&["BITFIELD", "s", "GET", "u8", "0"], Runs)]),
    ("pfadd", &[(&["PFADD", "new", "a"], Fenced), (&["PFADD", "p", "b"], Fenced)]),
    ("pfmerge", &[(&["PFMERGE", "new", "nokey"], Fenced)]),
    ("pfdebug", &[(&["PFDEBUG", "TODENSE", "p"], Runs)]),
    ("geoadd", &[(&["GEOADD", "new", "1", "1", "m"], Fenced), (&["GEOADD", "z", "1", "1", "o"], Fenced)]),
    ("geosearchstore", &[(&["GEOSEARCHSTORE", "new", "z", "FROMLONLAT", "0", "0", "BYRADIUS", "50000", "km"], Fenced)]),
    ("georadius", &[(&["GEORADIUS", "z", "0", "0", "50000", "km", "STORE", "new"], Fenced),
                    (&["GEORADIUS", "z", "0", "0", "50000", "km"], Runs)]),
    ("georadiusbymember", &[(&["GEORADIUSBYMEMBER", "z", "m", "50000", "km", "STOREDIST", "new"], Fenced),
                            (&["GEORADIUSBYMEMBER", "z", "m", "1", "km"], Runs)]),
    // fencing tokens: a grant creates the lock key; a commit only raises the token
    // mark for a key that is held (a holder's commit must work through a fence).
    ("fencing.grant", &[(&["FENCING.GRANT", "new", "tok", "PX", "1000"], Fenced)]),
    ("fencing.commit", &[(&["FENCING.COMMIT", "fk", "tok", "5"], Runs)]),
    // SORT writes only with STORE; RESTORE makes a key, with or without a TTL
    ("sort", &[(&["SORT", "l", "ALPHA", "STORE", "new"], Fenced), (&["SORT", "z", "BY", "nosort", "STORE", "l"], Fenced),
               (&["SORT", "l", "ALPHA"], Runs)]),
    ("restore", &[(&["RESTORE", "new", "0", RESTORE_PAYLOAD], Fenced), (&["RESTORE", "new", "20000", RESTORE_PAYLOAD], Fenced),
                  (&["RESTORE", "s", "20000", RESTORE_PAYLOAD, "REPLACE"], Fenced)]),
];

/// DUMP's payload of the string "restored-613" (every byte of it is ASCII).
const RESTORE_PAYLOAD: &str = "\x00\x0crestored-613\n\x00U8@DHMWs";

/// Commands the table does not mark `write`: none of them changes a key. Listed so a
/// new command must be placed in one list or the other.
#[rustfmt::skip]
const NOT_WRITES: &[&str] = &[
    "ping", "echo", "hello", "auth", "select", "quit", "reset", "client", "info", "dbsize",
    "time", "command", "config", "slowlog", "latency", "wait", "shutdown", "acl", "debug",
    "monitor", "locks", "bgrewriteaof",
    "get", "mget", "strlen", "getrange", "substr", "digest", "exists", "touch", "type",
    "keys", "scan", "randomkey", "object", "memory", "ttl", "pttl", "expiretime",
    "pexpiretime", "hget", "hmget", "hexists", "hlen", "hstrlen", "hscan", "hrandfield",
    "hgetall", "hkeys", "hvals", "llen", "lrange", "lindex", "lpos", "zcard", "zscore",
    "zmscore", "zrank", "zrevrank", "zcount", "zlexcount", "zrange", "zrangebyscore",
    "zrevrange", "zrevrangebyscore", "zrangebylex", "zrevrangebylex", "zrandmember",
    "zscan", "zunion", "zinter", "zdiff", "zintercard", "scard", "sismember",
    "smismember", "smembers", "srandmember", "sscan", "sinter", "sintercard", "sunion",
    "sdiff", "fencing.mark", "sort_ro", "dump", "subscribe", "unsubscribe", "psubscribe",
    "punsubscribe", "publish", "pubsub", "xrange", "xrevrange", "xlen", "xread", "xpending",
    "xinfo", "cluster", "asking", "readonly", "readwrite",
    "getbit", "bitcount", "bitpos", "bitfield_ro", "pfcount",
    "pfselftest", "lcs", "geopos", "geodist", "geohash", "geosearch", "georadius_ro",
    "georadiusbymember_ro",
    // Containers: what they run is checked command by command (EVAL, FCALL and MULTI
    // below); SCRIPT and FUNCTION hold code, not keys.
    "eval", "evalsha", "eval_ro", "evalsha_ro", "script", "fcall", "fcall_ro", "function",
    "multi", "exec", "discard", "watch", "unwatch",
];

/// Commands that can set or lengthen a TTL without being `denyoom` in Redis: they
/// must be fenced all the same.
const TTL_SETTERS: &[&str] = &[
    "expire",
    "pexpire",
    "expireat",
    "pexpireat",
    "persist",
    "getex",
];

/// Commands and subcommands Redis marks `denyoom` that cannot create a key nor lengthen
/// a TTL (PFDEBUG rewrites an existing HyperLogLog only; XGROUP CREATECONSUMER adds a
/// consumer to a stream that exists).
const DENYOOM_UNFENCED: &[&str] = &[
    "lset",
    "linsert",
    "xsetid",
    "pfdebug",
    "xgroup|createconsumer",
];

/// Subcommands Redis marks `write` that change the function libraries, not the
/// keyspace: nothing there for the fence to refuse (`function` is in NOT_WRITES).
const CODE_WRITES: &[&str] = &[
    "function|delete",
    "function|flush",
    "function|load",
    "function|restore",
];

/// One library for FCALL: `call` runs its arguments as a command.
const LIBRARY: &str = "#!lua name=fc\nredis.register_function('call', function(keys, args) return redis.pcall(unpack(args)) end)";
/// The same for EVAL. `pcall` hands back the command's own error reply, so the text
/// compared is the command's, not a script error around it.
const CALL: &str = "return redis.pcall(unpack(ARGV))";

/// Every key of db 0 and 1: type, content and PTTL (one script, read-only).
const STATE: &str = r#"
local out = {}
for _, db in ipairs({0, 1}) do
  redis.call('select', db)
  local keys = redis.call('keys', '*')
  table.sort(keys)
  for _, k in ipairs(keys) do
    local t = redis.call('type', k)['ok']
    local v
    if t == 'string' then v = {redis.call('get', k)}
    elseif t == 'list' then v = redis.call('lrange', k, 0, -1)
    elseif t == 'hash' then v = redis.call('hgetall', k)
    elseif t == 'set' then v = redis.call('smembers', k); table.sort(v)
    elseif t == 'zset' then v = redis.call('zrange', k, 0, -1, 'withscores')
    elseif t == 'stream' then v = {redis.call('xlen', k)}
    else v = {'?'} end
    table.insert(out, db .. ' ' .. k)
    table.insert(out, t .. ' ' .. table.concat(v, ','))
    table.insert(out, tostring(redis.call('pttl', k)))
  end
end
return out
"#;

/// The keys every case starts from (db 0 unless said).
const FIXTURE: &str = r#"
redis.call('set', 's', 'v', 'px', 10000)
redis.call('set', 'n', '5')
redis.call('set', 'fk', 'tok', 'px', 10000)
redis.call('hset', 'h', 'f', '1', 'g', '1.5')
redis.call('rpush', 'l', 'x', 'y', 'z')
redis.call('sadd', 'a', 'm', 'n')
redis.call('sadd', 'b', 'm')
redis.call('zadd', 'z', 1, 'm', 2, 'n')
redis.call('xadd', 'x', '1-1', 'f', 'v')
redis.call('xgroup', 'create', 'x', 'g', '0')
redis.call('pfadd', 'p', 'a')
redis.call('select', 1)
redis.call('set', 'other', 'o')
return 'ok'
"#;

/// A key as the state script reports it.
#[derive(Debug, PartialEq)]
struct Key {
    content: String,
    pttl: i64,
}

type State = BTreeMap<String, Key>;

fn parse_state(frame: &str) -> State {
    let items = bulks_in_order(frame);
    assert_eq!(items.len() % 3, 0, "{frame}");
    items
        .chunks(3)
        .map(|c| {
            let pttl = c[2].parse().unwrap_or_else(|_| panic!("{frame}"));
            (
                c[0].clone(),
                Key {
                    content: c[1].clone(),
                    pttl,
                },
            )
        })
        .collect()
}

/// The bulk strings of an array frame, in order.
fn bulks_in_order(frame: &str) -> Vec<String> {
    let mut lines = frame.split("\r\n");
    let head = lines.next().unwrap();
    assert!(head.starts_with('*'), "an array: {frame}");
    let mut out = Vec::new();
    while let Some(l) = lines.next() {
        if l.starts_with('$') {
            out.push(lines.next().unwrap().to_string());
        }
    }
    out
}

struct Node {
    server: TestServer,
    c: Raw,
    state_sha: String,
}

impl Node {
    async fn start(fenced: bool) -> Node {
        let server = if fenced {
            start_with(|c| c.restart_delay = Some(FENCE)).await
        } else {
            start().await
        };
        let mut c = Raw::to(&server).await;
        assert_eq!(c.cmd(&["FUNCTION", "LOAD", LIBRARY]).await, bulk("fc"));
        let sha = c.cmd(&["SCRIPT", "LOAD", STATE]).await;
        let state_sha = bulks_in_order(&format!("*1\r\n{sha}"))[0].clone();
        Node {
            server,
            c,
            state_sha,
        }
    }

    async fn state(&mut self) -> State {
        let sha = self.state_sha.clone();
        parse_state(&self.c.cmd(&["EVALSHA_RO", &sha, "0"]).await)
    }

    /// The fixture on a node whose fence is down; then, for `fenced`, the fence raised.
    async fn fixture(&mut self, fenced: bool) -> State {
        assert_eq!(self.c.cmd(&["FLUSHALL"]).await, OK);
        // Lifts a fence still up from the last case (keys of the last case expire).
        self.server.advance(FENCE);
        assert_eq!(self.c.cmd(&["EVAL", FIXTURE, "0"]).await, bulk("ok"));
        if fenced {
            self.server.raise_fence();
        }
        let state = self.state().await;
        assert_eq!(state.len(), 11, "{state:?}");
        state
    }

    fn args(&self, args: &[&str]) -> Vec<String> {
        let wall = self.server.clock().wall_ms();
        args.iter()
            .map(|a| match *a {
                "@s+20" => (wall / 1000 + 20).to_string(),
                "@ms+20000" => (wall + 20_000).to_string(),
                a => a.to_string(),
            })
            .collect()
    }
}

#[derive(Clone, Copy, Debug)]
enum Via {
    Direct,
    Eval,
    Fcall,
    Multi,
}

/// Sends `args` the way `via` says; returns the command's own reply (for MULTI: its
/// reply at queue time, then EXEC's).
async fn send(c: &mut Raw, via: Via, args: &[String]) -> (String, Option<String>) {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match via {
        Via::Direct => (c.cmd(&args).await, None),
        Via::Eval => {
            let mut full = vec!["EVAL", CALL, "0"];
            full.extend(&args);
            (c.cmd(&full).await, None)
        }
        Via::Fcall => {
            let mut full = vec!["FCALL", "call", "0"];
            full.extend(&args);
            (c.cmd(&full).await, None)
        }
        Via::Multi => {
            assert_eq!(c.cmd(&["MULTI"]).await, OK);
            let queued = c.cmd(&args).await;
            (queued, Some(c.cmd(&["EXEC"]).await))
        }
    }
}

/// Every command's and every subcommand's (`xgroup|create`) flags, as COMMAND INFO
/// lists them.
async fn flags_of(node: &TestServer) -> BTreeMap<String, BTreeSet<String>> {
    use redis::Value;
    fn text(v: &Value) -> String {
        match v {
            Value::BulkString(b) => String::from_utf8(b.clone()).unwrap(),
            Value::SimpleString(s) => s.clone(),
            other => panic!("{other:?}"),
        }
    }
    fn add(entry: &Value, out: &mut BTreeMap<String, BTreeSet<String>>) {
        let Value::Array(e) = entry else {
            panic!("{entry:?}")
        };
        let (Value::Array(flags), Value::Array(subs)) = (&e[2], &e[9]) else {
            panic!("{e:?}")
        };
        out.insert(text(&e[0]), flags.iter().map(text).collect());
        for sub in subs {
            add(sub, out);
        }
    }
    let mut c = conn(node).await;
    let mut out = BTreeMap::new();
    let Value::Array(infos) = q(&mut c, &["COMMAND", "INFO"]).await.unwrap() else {
        panic!("COMMAND INFO")
    };
    for info in &infos {
        add(info, &mut out);
    }
    out
}

/// The flags a case is called with: its subcommand's for a container command.
fn flags_of_case<'a>(
    flags: &'a BTreeMap<String, BTreeSet<String>>,
    name: &str,
    args: &[&str],
) -> &'a BTreeSet<String> {
    let sub = args
        .get(1)
        .map(|s| format!("{name}|{}", s.to_ascii_lowercase()));
    sub.and_then(|sub| flags.get(&sub)).unwrap_or(&flags[name])
}

/// The write cases of one command name, or of one subcommand (`xgroup|create`: its
/// container's cases that call it).
fn cases_of(name: &str) -> Vec<Case> {
    let (parent, sub) = match name.split_once('|') {
        Some((parent, sub)) => (parent, Some(sub)),
        None => (name, None),
    };
    let cases = WRITES
        .iter()
        .find(|(n, _)| *n == parent)
        .map_or(&[][..], |(_, c)| *c);
    cases
        .iter()
        .filter(|(args, _)| sub.is_none_or(|sub| args[1].eq_ignore_ascii_case(sub)))
        .copied()
        .collect()
}

/// What a Runs case changed that it may not: a key that appeared, a deadline moved
/// later or a TTL dropped.
fn created_or_lengthened(before: &State, after: &State) -> Option<String> {
    for (key, k) in after {
        let Some(was) = before.get(key) else {
            return Some(format!("created {key:?}"));
        };
        let later = match (was.pttl, k.pttl) {
            (-1, _) => false,
            (_, -1) => true,
            (w, a) => a > w,
        };
        if later {
            return Some(format!("lengthened the TTL of {key:?}: {was:?} -> {k:?}"));
        }
    }
    None
}

/// Every command of the table has its place here, and the lists agree with the
/// table's flags: every `write` command and subcommand has cases, nothing else does;
/// every `denyoom` command or subcommand and every TTL setter has a Fenced case unless
/// it is named as one that cannot create a key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cases_cover_the_whole_table() {
    let node = Node::start(false).await;
    let flags = flags_of(&node.server).await;
    assert!(flags.len() > 250, "COMMAND INFO: {}", flags.len());
    let listed: BTreeSet<&str> = WRITES.iter().map(|(n, _)| *n).collect();
    let not_writes: BTreeSet<&str> = NOT_WRITES.iter().copied().collect();
    assert_eq!(listed.len(), WRITES.len(), "a command listed twice");
    let mut subs_with_cases = 0;
    for (name, f) in &flags {
        let write = f.contains("write");
        let name = name.as_str();
        if name.contains('|') {
            // A subcommand: its writes have cases among its container's.
            if CODE_WRITES.contains(&name) {
                assert!(write, "{name} is not a write: take it off CODE_WRITES");
            } else if write {
                assert!(
                    !cases_of(name).is_empty(),
                    "{name} is a write: give it cases in WRITES under its command"
                );
                subs_with_cases += 1;
            } else {
                assert!(cases_of(name).is_empty(), "{name} is not a write");
            }
        } else if write {
            assert!(
                listed.contains(name),
                "{name} is a write: give it cases in WRITES (Fenced if it can create a key or lengthen a TTL)"
            );
        } else {
            // A container (XGROUP) has no flags of its own; its writing subcommands
            // give it cases in WRITES.
            assert!(
                not_writes.contains(name) || listed.contains(name),
                "{name} is not in the lists: put it in WRITES or NOT_WRITES"
            );
        }
        let fenced_case = cases_of(name).iter().any(|(_, e)| *e == Fenced);
        if f.contains("denyoom")
            && !DENYOOM_UNFENCED.contains(&name)
            && !CODE_WRITES.contains(&name)
        {
            assert!(
                fenced_case,
                "{name} is write + denyoom in Redis: it needs a Fenced case"
            );
        }
        if TTL_SETTERS.contains(&name) {
            assert!(fenced_case, "{name} can set a TTL: it needs a Fenced case");
        }
    }
    assert!(subs_with_cases >= 5, "XGROUP's writes: {subs_with_cases}");
    for name in listed
        .iter()
        .chain(&not_writes)
        .chain(DENYOOM_UNFENCED)
        .chain(CODE_WRITES)
    {
        assert!(flags.contains_key(*name), "{name} is not in the table");
    }
    for name in &not_writes {
        assert!(!listed.contains(name), "{name} is in both lists");
    }
}

/// Runs every case through `via` on a fenced node holding the fixture. Failures are
/// collected, not stopped at: the message lists every case that slipped through.
async fn fenced_via(via: Via) {
    let mut node = Node::start(true).await;
    let flags = flags_of(&node.server).await;
    let mut failures = Vec::new();
    let mut checked = 0;
    for (name, cases) in WRITES {
        for (args, expect) in *cases {
            let noscript = flags_of_case(&flags, name, args).contains("noscript");
            let before = node.fixture(true).await;
            let args = node.args(args);
            let what = format!("{via:?} {args:?}");
            let (reply, exec) = send(&mut node.c, via, &args).await;
            let after = node.state().await;
            let scripted = matches!(via, Via::Eval | Via::Fcall);
            let failure = match expect {
                _ if scripted && noscript => (reply != err(&format!("ERR {NOSCRIPT}"))
                    || after != before)
                    .then(|| format!("{what}: {reply:?}, keyspace {after:?}")),
                // In MULTI, refused at queue time (a FENCED row) or, for a command
                // whose handler decides by its arguments (GETEX), by EXEC.
                Fenced => (!(reply == tryagain()
                    && exec.as_ref().is_none_or(|e| *e == err(EXECABORT))
                    || reply == "+QUEUED\r\n" && exec == Some(format!("*1\r\n{}", tryagain())))
                    || after != before)
                    .then(|| format!("{what} not fenced: {reply:?} {exec:?}, keyspace {after:?}")),
                Runs => {
                    let refused = reply.starts_with('-')
                        || exec.as_ref().is_some_and(|e| {
                            reply != "+QUEUED\r\n" || !e.starts_with('*') || e.contains("TRYAGAIN")
                        });
                    if refused {
                        Some(format!("{what} did not run: {reply:?} {exec:?}"))
                    } else {
                        created_or_lengthened(&before, &after)
                            .map(|why| format!("{what} {why} during the fence"))
                    }
                }
            };
            failures.extend(failure);
            checked += 1;
        }
    }
    assert!(checked > 80, "{checked} cases: the list lost its cases?");
    assert!(
        failures.is_empty(),
        "{} case(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    node.server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_key_creating_write_is_fenced_sent_directly() {
    fenced_via(Via::Direct).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_key_creating_write_is_fenced_inside_eval() {
    fenced_via(Via::Eval).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_key_creating_write_is_fenced_inside_fcall() {
    fenced_via(Via::Fcall).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_key_creating_write_is_fenced_inside_multi() {
    fenced_via(Via::Multi).await;
}

/// Above --maxmemory, each case gets Redis's OOM refusal, directly and from a script,
/// exactly when the table marks its command (a container's: the subcommand) `denyoom`;
/// a refused one changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_cases_above_maxmemory() {
    let mut node = Node::start(false).await;
    let flags = flags_of(&node.server).await;
    let mut failures = Vec::new();
    let mut refused = BTreeSet::new();
    for (name, cases) in WRITES {
        for (args, _) in *cases {
            let own = flags_of_case(&flags, name, args);
            let (denyoom, noscript) = (own.contains("denyoom"), own.contains("noscript"));
            for via in [Via::Direct, Via::Eval] {
                if matches!(via, Via::Eval) && noscript {
                    continue;
                }
                assert_eq!(node.c.cmd(&["CONFIG", "SET", "maxmemory", "0"]).await, OK);
                let before = node.fixture(false).await;
                assert_eq!(node.c.cmd(&["CONFIG", "SET", "maxmemory", "1"]).await, OK);
                let args = node.args(args);
                let what = format!("{via:?} {args:?}");
                let (reply, _) = send(&mut node.c, via, &args).await;
                if denyoom {
                    let after = node.state().await;
                    if reply != err(OOM) || after != before {
                        failures.push(format!("{what} not refused: {reply:?}, keyspace {after:?}"));
                    }
                    refused.insert(args[..2].join(" "));
                } else if reply.starts_with("-OOM") {
                    failures.push(format!("{what} is not denyoom but got {reply:?}"));
                }
            }
        }
    }
    assert_eq!(node.c.cmd(&["CONFIG", "SET", "maxmemory", "0"]).await, OK);
    // Redis 7.0's denyoom subcommands are refused, their write siblings are not.
    assert!(refused.contains("XGROUP CREATE"), "{refused:?}");
    assert!(refused.contains("XGROUP CREATECONSUMER"), "{refused:?}");
    assert!(!refused.contains("XGROUP DESTROY"), "{refused:?}");
    assert!(
        failures.is_empty(),
        "{} case(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    node.server.shutdown().await;
}
