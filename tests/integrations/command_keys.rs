//! Where every command's keys are, and that every check reads them there: COMMAND
//! GETKEYS and COMMAND INFO's key specs against a real redis-server for the whole table
//! (subcommands included); a `~lock:*` user refused the stream subcommands on other
//! keys (issue 40: XINFO and XGROUP declared no keys, so ACL key patterns, cluster
//! routing and the slot fence skipped them); cluster routing and the slot fence on
//! the keys of container subcommands and of the writes a handler fences itself.

use crate::support;
use redis::Value;
use redlockd::config::ClusterMode as Mode;
use std::collections::BTreeSet;
use std::time::Duration;
use support::redis_server::RedisNode;
use support::*;

/// One `COMMAND GETKEYS` case per command of the table at least (the test fails for a
/// command without one), and per subcommand that has keys; words split on spaces.
/// Movable keys get more than one (numkeys, STREAMS, STORE, the `atoi` fallback).
const GETKEYS_CASES: &[&str] = &[
    "PING k1 k2",
    "ECHO k1",
    "HELLO k1 k2",
    "AUTH k1 k2 k3",
    "SELECT k1",
    "QUIT k1 k2",
    "RESET",
    "CLIENT HELP",
    "INFO k1 k2",
    "DBSIZE",
    "BGREWRITEAOF",
    "FLUSHDB k1 k2",
    "FLUSHALL k1 k2",
    "TIME",
    "COMMAND HELP",
    "CONFIG HELP",
    "SLOWLOG HELP",
    "LATENCY HELP",
    "WAIT k1 k2",
    "SHUTDOWN k1 k2",
    "ACL HELP",
    "DEBUG k1 k2 k3",
    "MONITOR",
    "GET k1",
    "SET k1 k2 k3 k4",
    "SETNX k1 k2",
    "SETEX k1 k2 k3",
    "PSETEX k1 k2 k3",
    "GETDEL k1",
    "GETEX k1 k2 k3",
    "MGET k1 k2 k3",
    "MSET k1 v1 k2 v2",
    "INCR k1",
    "DECR k1",
    "INCRBY k1 k2",
    "DECRBY k1 k2",
    "INCRBYFLOAT k1 k2",
    "GETSET k1 k2",
    "MSETNX k1 v1 k2 v2",
    "APPEND k1 k2",
    "STRLEN k1",
    "GETRANGE k1 k2 k3",
    "SUBSTR k1 k2 k3",
    "SETRANGE k1 k2 k3",
    "SETBIT k1 k2 k3",
    "GETBIT k1 k2",
    "BITCOUNT k1 k2 k3",
    "BITPOS k1 k2 k3 k4",
    "BITOP AND d k1 k2",
    "BITFIELD k1 k2 k3",
    "BITFIELD_RO k1 k2 k3",
    "PFADD k1 k2 k3",
    "PFCOUNT k1 k2 k3",
    "PFMERGE k1 k2 k3",
    "PFDEBUG k1 k2",
    "PFSELFTEST",
    "LCS k1 k2 k3 k4",
    "GEOADD k1 k2 k3 k4 k5 k6",
    "GEOPOS k1 k2 k3",
    "GEODIST k1 k2 k3 k4 k5",
    "GEOHASH k1 k2 k3",
    "GEOSEARCH k1 k2 k3 k4 k5 k6 k7 k8",
    "GEOSEARCHSTORE d k1 FROMLONLAT 0 0 BYRADIUS 1 km",
    "GEORADIUS k1 0 0 1 km STORE d1 STOREDIST d2",
    "GEORADIUS k1 0 0 1 km",
    "GEORADIUS_RO k1 k2 k3 k4 k5 k6 k7",
    "GEORADIUSBYMEMBER k1 m 1 km STOREDIST d2",
    "GEORADIUSBYMEMBER_RO k1 k2 k3 k4 k5 k6",
    "DEL k1 k2 k3",
    "UNLINK k1 k2 k3",
    "EXISTS k1 k2 k3",
    "TOUCH k1 k2 k3",
    "TYPE k1",
    "KEYS k1",
    "SCAN k1 k2 k3",
    "RENAME k1 k2",
    "RENAMENX k1 k2",
    "COPY k1 k2 k3 k4",
    "MOVE k1 k2",
    "RANDOMKEY",
    "OBJECT ENCODING k1",
    "OBJECT FREQ k1",
    "OBJECT IDLETIME k1",
    "OBJECT REFCOUNT k1",
    "OBJECT HELP",
    "MEMORY USAGE k1",
    "MEMORY HELP",
    "EXPIRE k1 k2 k3 k4",
    "PEXPIRE k1 k2 k3 k4",
    "EXPIREAT k1 k2 k3 k4",
    "PEXPIREAT k1 k2 k3 k4",
    "TTL k1",
    "PTTL k1",
    "EXPIRETIME k1",
    "PEXPIRETIME k1",
    "PERSIST k1",
    "HSET k1 k2 k3 k4 k5",
    "HMSET k1 k2 k3 k4 k5",
    "HSETNX k1 k2 k3",
    "HGET k1 k2",
    "HMGET k1 k2 k3 k4",
    "HDEL k1 k2 k3 k4",
    "HEXISTS k1 k2",
    "HINCRBY k1 k2 k3",
    "HINCRBYFLOAT k1 k2 k3",
    "HLEN k1",
    "HSTRLEN k1 k2",
    "HSCAN k1 k2 k3 k4",
    "HRANDFIELD k1 k2 k3",
    "HGETALL k1",
    "HKEYS k1",
    "HVALS k1",
    "LPUSH k1 k2 k3 k4",
    "RPUSH k1 k2 k3 k4",
    "LPUSHX k1 k2 k3 k4",
    "RPUSHX k1 k2 k3 k4",
    "LPOP k1 k2 k3",
    "RPOP k1 k2 k3",
    "LLEN k1",
    "LRANGE k1 k2 k3",
    "LINDEX k1 k2",
    "LREM k1 k2 k3",
    "LTRIM k1 k2 k3",
    "LMOVE k1 k2 k3 k4",
    "RPOPLPUSH k1 k2",
    "BLMOVE k1 k2 k3 k4 k5",
    "BRPOPLPUSH k1 k2 k3",
    "LSET k1 k2 k3",
    "LINSERT k1 k2 k3 k4",
    "LPOS k1 k2 k3 k4",
    "LMPOP 2 k1 k2 LEFT COUNT 1",
    "BLMPOP 0 2 k1 k2 LEFT",
    "BLPOP k1 k2 0",
    "BRPOP k1 k2 0",
    "ZADD k1 k2 k3 k4 k5",
    "ZINCRBY k1 k2 k3",
    "ZREM k1 k2 k3 k4",
    "ZCARD k1",
    "ZSCORE k1 k2",
    "ZMSCORE k1 k2 k3 k4",
    "ZRANK k1 m",
    "ZREVRANK k1 m",
    "ZCOUNT k1 k2 k3",
    "ZLEXCOUNT k1 k2 k3",
    "ZRANGE k1 k2 k3 k4 k5",
    "ZRANGEBYSCORE k1 k2 k3 k4 k5",
    "ZREVRANGE k1 k2 k3 k4 k5",
    "ZREVRANGEBYSCORE k1 k2 k3 k4 k5",
    "ZRANGEBYLEX k1 k2 k3 k4 k5",
    "ZREVRANGEBYLEX k1 k2 k3 k4 k5",
    "ZRANGESTORE k1 k2 k3 k4 k5 k6",
    "ZREMRANGEBYSCORE k1 k2 k3",
    "ZREMRANGEBYRANK k1 k2 k3",
    "ZREMRANGEBYLEX k1 k2 k3",
    "ZPOPMIN k1 k2 k3",
    "ZPOPMAX k1 k2 k3",
    "ZMPOP 2 k1 k2 MIN",
    "BZPOPMIN k1 k2 0",
    "BZPOPMAX k1 k2 0",
    "BZMPOP 0 2 k1 k2 MAX",
    "ZRANDMEMBER k1 k2 k3",
    "ZSCAN k1 k2 k3 k4",
    "ZUNIONSTORE d 2 k1 k2 WEIGHTS 1 2",
    "ZUNIONSTORE d 1x k1",
    "ZINTERSTORE d 2 k1 k2",
    "ZDIFFSTORE d 2 k1 k2",
    "ZUNION 2 k1 k2 WITHSCORES",
    "ZINTER 2 k1 k2",
    "ZINTER 0 k1",
    "ZDIFF 2 k1 k2",
    "ZINTERCARD 2 k1 k2 LIMIT 1",
    "SADD k1 k2 k3 k4",
    "SREM k1 k2 k3 k4",
    "SCARD k1",
    "SISMEMBER k1 k2",
    "SMISMEMBER k1 k2 k3 k4",
    "SMEMBERS k1",
    "SPOP k1 k2 k3",
    "SRANDMEMBER k1 k2 k3",
    "SMOVE k1 k2 k3",
    "SSCAN k1 k2 k3 k4",
    "SINTER k1 k2 k3",
    "SINTERCARD 2 k1 k2 LIMIT 1",
    "SUNION k1 k2 k3",
    "SDIFF k1 k2 k3",
    "SINTERSTORE k1 k2 k3 k4",
    "SUNIONSTORE k1 k2 k3 k4",
    "SDIFFSTORE k1 k2 k3 k4",
    "SUBSCRIBE k1 k2 k3",
    "UNSUBSCRIBE k1 k2",
    "PSUBSCRIBE k1 k2 k3",
    "PUNSUBSCRIBE k1 k2",
    "PUBLISH k1 k2",
    "PUBSUB HELP",
    "EVAL s 2 k1 k2 a1",
    "EVAL s 0 a1",
    "EVAL s 3 k1",
    "EVALSHA s 2 k1 k2 a1",
    "EVAL_RO s 1 k1 a1",
    "EVALSHA_RO s 1 k1 a1",
    "SCRIPT HELP",
    "FCALL f 2 k1 k2 a1",
    "FCALL f 0",
    "FCALL_RO f 1 k1 a1",
    "FUNCTION HELP",
    "XADD k1 k2 k3 k4 k5 k6",
    "XRANGE k1 k2 k3 k4 k5",
    "XREVRANGE k1 k2 k3 k4 k5",
    "XLEN k1",
    "XDEL k1 k2 k3 k4",
    "XTRIM k1 k2 k3 k4 k5",
    "XREAD COUNT 1 BLOCK 0 STREAMS k1 k2 0 0",
    "XREAD STREAMS k1 k2 0",
    "XREADGROUP GROUP g c COUNT 1 NOACK STREAMS k1 k2 > >",
    "XSETID k1 k2 k3 k4",
    "XGROUP CREATE k1 k2 k3",
    "XGROUP CREATECONSUMER k1 k2 k3",
    "XGROUP DELCONSUMER k1 k2 k3",
    "XGROUP DESTROY k1 k2",
    "XGROUP SETID k1 k2 k3",
    "XGROUP HELP",
    "XACK k1 k2 k3 k4 k5",
    "XPENDING k1 k2 k3 k4",
    "XCLAIM k1 k2 k3 k4 k5 k6 k7",
    "XAUTOCLAIM k1 k2 k3 k4 k5 k6 k7",
    "XINFO CONSUMERS k1 k2",
    "XINFO GROUPS k1",
    "XINFO STREAM k1",
    "XINFO HELP",
    "SORT k1 BY w GET # LIMIT 0 1 STORE d",
    "SORT k1",
    "SORT_RO k1 BY w",
    "DUMP k1",
    "RESTORE k1 k2 k3 k4 k5",
    "MULTI",
    "EXEC",
    "DISCARD",
    "WATCH k1 k2 k3",
    "UNWATCH",
    "CLUSTER HELP",
    "READONLY",
    "READWRITE",
    "ASKING",
    "XREAD STREAMS k1 k2 0",
    "XREAD COUNT streams STREAMS k1 0",
    "XREADGROUP GROUP streams c STREAMS k1 k2 0",
    "SORT k1 STORE d1 LIMIT 0 1 STORE d2",
    "GEORADIUSBYMEMBER k1 m 1 km STORE",
    "ZUNIONSTORE d 0 k1",
    "ZINTER 5 k1",
    "EVAL s 1x k1",
    "LMPOP 1 k1 k2 LEFT",
    "OBJECT NOSUCH k1",
    "XINFO STREAM",
    "XGROUP CREATE k1 g",
    "MEMORY USAGE k1 SAMPLES 5",
    "CONFIG GET maxmemory",
    "CLIENT ID",
    "COMMAND GETKEYS GET k1",
];

/// redlockd's own commands (redis-server 7.0 knows none of them), with COMMAND
/// GETKEYS's reply (FENCING.MARK takes no argument, so GETKEYS is one short, as for
/// Redis's READONLY).
const OWN_COMMANDS: &[(&str, &str)] = &[
    ("DELEX k1 IFEQ v", "*1\r\n$2\r\nk1\r\n"),
    ("DELIFEQ k1 v", "*1\r\n$2\r\nk1\r\n"),
    ("DIGEST k1", "*1\r\n$2\r\nk1\r\n"),
    ("FENCING.GRANT k1 v PX 100", "*1\r\n$2\r\nk1\r\n"),
    ("FENCING.COMMIT k1 v 1", "*1\r\n$2\r\nk1\r\n"),
    ("LOCKS INFO k1", "*1\r\n$2\r\nk1\r\n"),
    (
        "FENCING.MARK",
        "-ERR wrong number of arguments for 'command|getkeys' command\r\n",
    ),
];

/// Subcommands redis-server 7.0 does not have: redlockd's own, and two of 7.2's.
const OWN_SUBCOMMANDS: &[&str] = &[
    "cluster|setmap",
    "cluster|getmap",
    "cluster|peerstate",
    "cluster|leaving",
    "cluster|import",
    "client|setinfo",
    "client|no-touch",
];

fn words(case: &str) -> Vec<&str> {
    case.split(' ').collect()
}

fn getkeys(case: &str) -> Vec<&str> {
    let mut args = vec!["COMMAND", "GETKEYS"];
    args.extend(words(case));
    args
}

/// Every command's (and every keyed subcommand's) COMMAND GETKEYS is redis-server's,
/// byte for byte, keys or error; redlockd's own commands give the keys listed.
#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn getkeys_matches_redis_for_every_command() {
    let redis = RedisNode::start(None);
    let ours = start().await;
    let mut r = Raw::to(&redis).await;
    let mut o = Raw::to(&ours).await;
    // Every command has a case; so has every subcommand with keys.
    let mut c = conn(&ours).await;
    let names: Vec<String> = q(&mut c, &["COMMAND", "LIST"]).await.unwrap();
    assert!(names.len() > 200, "{}", names.len());
    let cased: BTreeSet<String> = GETKEYS_CASES
        .iter()
        .chain(OWN_COMMANDS.iter().map(|(case, _)| case))
        .map(|case| words(case)[0].to_ascii_lowercase())
        .collect();
    let mut missing: Vec<String> = names
        .iter()
        .filter(|n| !cased.contains(*n))
        .cloned()
        .collect();
    for name in &names {
        for sub in subcommands(&q(&mut c, &["COMMAND", "INFO", name]).await.unwrap()) {
            let cases = GETKEYS_CASES
                .iter()
                .chain(OWN_COMMANDS.iter().map(|(c, _)| c));
            let has_case = cases.into_iter().any(|case| {
                let w = words(case);
                w.len() > 1 && format!("{}|{}", w[0], w[1]).eq_ignore_ascii_case(&sub.name)
            });
            if !sub.key_specs.is_empty() && !has_case {
                missing.push(sub.name);
            }
        }
    }
    assert!(
        missing.is_empty(),
        "give these a case in GETKEYS_CASES: {missing:?}"
    );
    let mut diffs = Vec::new();
    for case in GETKEYS_CASES {
        let args = getkeys(case);
        let (theirs, mine) = (r.cmd(&args).await, o.cmd(&args).await);
        if mine != theirs {
            diffs.push(format!(
                "{case}: redlockd {mine:?}, redis-server {theirs:?}"
            ));
        }
    }
    for (case, want) in OWN_COMMANDS {
        let args = getkeys(case);
        assert_eq!(o.cmd(&args).await, *want, "{case}");
        if args.len() > 3 {
            assert_eq!(
                r.cmd(&args).await,
                err("ERR Invalid command specified"),
                "{case}"
            );
        }
    }
    assert!(
        diffs.is_empty(),
        "{} differences:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}

/// A COMMAND INFO entry's fields that say where the keys are.
#[derive(Debug, PartialEq)]
struct KeyInfo {
    name: String,
    /// Compared for subcommands only (acl.rs compares the commands' arity).
    arity: i64,
    range: (i64, i64, i64),
    /// Key specs without Redis's free-text `notes`.
    key_specs: Vec<Value>,
}

fn key_info(entry: &Value) -> KeyInfo {
    let Value::Array(e) = entry else {
        panic!("{entry:?}")
    };
    let int = |v: &Value| match v {
        Value::Int(n) => *n,
        other => panic!("{other:?}"),
    };
    let name = match &e[0] {
        Value::BulkString(b) => String::from_utf8(b.clone()).unwrap(),
        other => panic!("{other:?}"),
    };
    let Value::Array(specs) = &e[8] else {
        panic!("{e:?}")
    };
    let key_specs = specs
        .iter()
        .map(|spec| {
            let Value::Array(fields) = spec else {
                panic!("{spec:?}")
            };
            let mut kept = Vec::new();
            for pair in fields.chunks(2) {
                if pair[0] != Value::BulkString(b"notes".to_vec()) {
                    kept.extend_from_slice(pair);
                }
            }
            Value::Array(kept)
        })
        .collect();
    KeyInfo {
        name,
        arity: int(&e[1]),
        range: (int(&e[3]), int(&e[4]), int(&e[5])),
        key_specs,
    }
}

/// The entries of COMMAND INFO's subcommands field (its 10th).
fn subcommands(reply: &Value) -> Vec<KeyInfo> {
    let Value::Array(entries) = reply else {
        panic!("{reply:?}")
    };
    let Value::Array(e) = &entries[0] else {
        panic!("{reply:?}")
    };
    let Value::Array(subs) = &e[9] else {
        panic!("{e:?}")
    };
    let mut out: Vec<KeyInfo> = subs.iter().map(key_info).collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// COMMAND INFO's key positions (first, last, step) and key specs are redis-server's
/// for every command both have, and for every subcommand of theirs (arity too);
/// redlockd's own commands and subcommands are the named lists' and no others.
#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_info_key_specs_match_redis() {
    let redis = RedisNode::start(None);
    let ours = start().await;
    let mut r = conn(&redis).await;
    let mut o = conn(&ours).await;
    let names: Vec<String> = q(&mut o, &["COMMAND", "LIST"]).await.unwrap();
    let own: Vec<String> = OWN_COMMANDS
        .iter()
        .map(|(case, _)| words(case)[0].to_ascii_lowercase())
        .collect();
    let (mut compared, mut subs_compared) = (0, 0);
    for name in &names {
        let theirs: Value = q(&mut r, &["COMMAND", "INFO", name]).await.unwrap();
        let mine: Value = q(&mut o, &["COMMAND", "INFO", name]).await.unwrap();
        if own.contains(name) {
            assert_eq!(
                theirs,
                Value::Array(vec![Value::Nil]),
                "{name} is redlockd's own"
            );
            continue;
        }
        let (Value::Array(t), Value::Array(m)) = (&theirs, &mine) else {
            panic!("{name}: {theirs:?} / {mine:?}")
        };
        let (mut t_info, m_info) = (key_info(&t[0]), key_info(&m[0]));
        t_info.arity = m_info.arity;
        assert_eq!(m_info, t_info, "{name}");
        let t_subs = subcommands(&theirs);
        let m_subs: Vec<KeyInfo> = subcommands(&mine)
            .into_iter()
            .filter(|s| !OWN_SUBCOMMANDS.contains(&s.name.as_str()))
            .collect();
        assert_eq!(m_subs, t_subs, "{name}'s subcommands");
        compared += 1;
        subs_compared += t_subs.len();
    }
    assert!(
        compared > 200 && subs_compared > 100,
        "{compared} {subs_compared}"
    );
}

/// Redis's flags about replicas, loading and the monitor: redlockd has none of these
/// (tests/integrations/acl.rs leaves them out of the commands' flags alike).
const UNMODELLED_FLAGS: &[&str] = &[
    "loading",
    "stale",
    "skip_monitor",
    "skip_slowlog",
    "no_async_loading",
    "asking",
    "may_replicate",
];

/// A subcommand's name, flags (less `UNMODELLED_FLAGS`) and ACL categories (sorted),
/// from its container's COMMAND INFO reply.
type SubFlags = (String, Vec<String>, Vec<String>);

fn subcommand_flags(reply: &Value) -> Vec<SubFlags> {
    let texts = |v: &Value| -> Vec<String> {
        let Value::Array(items) = v else {
            panic!("{v:?}")
        };
        items
            .iter()
            .map(|i| match i {
                Value::SimpleString(s) => s.clone(),
                other => panic!("{other:?}"),
            })
            .collect()
    };
    let Value::Array(entries) = reply else {
        panic!("{reply:?}")
    };
    let Value::Array(e) = &entries[0] else {
        panic!("{reply:?}")
    };
    let Value::Array(subs) = &e[9] else {
        panic!("{e:?}")
    };
    let mut out: Vec<SubFlags> = subs
        .iter()
        .map(|sub| {
            let Value::Array(f) = sub else {
                panic!("{sub:?}")
            };
            let Value::BulkString(name) = &f[0] else {
                panic!("{f:?}")
            };
            let mut flags = texts(&f[2]);
            flags.retain(|f| !UNMODELLED_FLAGS.contains(&f.as_str()));
            let mut cats = texts(&f[6]);
            cats.sort();
            (String::from_utf8(name.clone()).unwrap(), flags, cats)
        })
        .collect();
    out.sort();
    out
}

/// Every subcommand's flags (in Redis's order, less the unmodelled ones) and ACL
/// categories are redis-server's: the checks read them (OOM above --maxmemory, WRITE
/// in read-only scripts, READONLY for client-side caching...), so a client that reads
/// COMMAND INFO (cluster clients routing reads) sees what they decide. redlockd's own
/// subcommands (`OWN_SUBCOMMANDS`) have no counterpart to compare with.
#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_info_subcommand_flags_match_redis() {
    let redis = RedisNode::start(None);
    let ours = start().await;
    let mut r = conn(&redis).await;
    let mut o = conn(&ours).await;
    let names: Vec<String> = q(&mut o, &["COMMAND", "LIST"]).await.unwrap();
    let mut compared = 0;
    let mut diffs = Vec::new();
    for name in &names {
        let theirs: Value = q(&mut r, &["COMMAND", "INFO", name]).await.unwrap();
        if theirs == Value::Array(vec![Value::Nil]) {
            continue; // redlockd's own command
        }
        let mine: Value = q(&mut o, &["COMMAND", "INFO", name]).await.unwrap();
        let mut m_subs = subcommand_flags(&mine);
        m_subs.retain(|(n, _, _)| !OWN_SUBCOMMANDS.contains(&n.as_str()));
        let t_subs = subcommand_flags(&theirs);
        if m_subs.len() != t_subs.len() {
            diffs.push(format!("{name}: {m_subs:?}\n  redis: {t_subs:?}"));
            continue;
        }
        for (m, t) in m_subs.iter().zip(&t_subs) {
            if m != t {
                diffs.push(format!("{m:?}\n  redis: {t:?}"));
            }
        }
        compared += t_subs.len();
    }
    assert!(
        diffs.is_empty(),
        "{} differ:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
    assert!(compared > 100, "{compared}");
}

/// The replies of `session`, one frame per command, from one connection.
async fn transcript(node: &impl Addressed, session: &[&[&str]]) -> Vec<String> {
    let mut c = Raw::to(node).await;
    let mut out = Vec::new();
    for args in session {
        out.push(format!("{args:?} -> {}", c.cmd(args).await));
    }
    out
}

/// Above --maxmemory a subcommand is refused by its own `denyoom` (XGROUP CREATE and
/// CREATECONSUMER, FUNCTION LOAD), directly and from a script, and its siblings run
/// (XGROUP SETID / DELCONSUMER / DESTROY, XINFO): the same replies as redis-server's.
#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subcommands_above_maxmemory_as_redis() {
    const LIB: &str = "#!lua name=lib\nredis.register_function('f', function() return 1 end)";
    let session: &[&[&str]] = &[
        &["FLUSHALL"],
        &["XADD", "s", "1-0", "f", "v"],
        &["XGROUP", "CREATE", "s", "g0", "0"],
        &["CONFIG", "SET", "maxmemory", "1"],
        &["XGROUP", "CREATE", "s", "g", "0"],
        &["XGROUP", "CREATE", "new", "g", "$", "MKSTREAM"],
        &["XGROUP", "CREATECONSUMER", "s", "g0", "c"],
        &["XGROUP", "SETID", "s", "g0", "0"],
        &["XGROUP", "DELCONSUMER", "s", "g0", "c"],
        &[
            "EVAL",
            "return #redis.call('XINFO', 'GROUPS', KEYS[1])",
            "1",
            "s",
        ],
        &[
            "EVAL",
            "return redis.call('XGROUP', 'CREATE', KEYS[1], 'g2', '0')",
            "1",
            "s",
        ],
        &[
            "EVAL",
            "return redis.call('XGROUP', 'CREATECONSUMER', KEYS[1], 'g0', 'c')",
            "1",
            "s",
        ],
        &[
            "EVAL",
            "return redis.call('XGROUP', 'SETID', KEYS[1], 'g0', '0')",
            "1",
            "s",
        ],
        &["FUNCTION", "LOAD", LIB],
        &["OBJECT", "ENCODING", "s"],
        &["XGROUP", "DESTROY", "s", "g0"],
        &["CONFIG", "SET", "maxmemory", "0"],
        &["XGROUP", "CREATE", "s", "g", "0"],
        &["EXISTS", "new"],
    ];
    let redis = RedisNode::start(None);
    let ours = start().await;
    let theirs = transcript(&redis, session).await;
    let mine = transcript(&ours, session).await;
    assert_eq!(mine, theirs);
    assert!(mine[4].ends_with("-OOM command not allowed when used memory > 'maxmemory'.\r\n"));
    let theirs = exec_above_maxmemory(&redis).await;
    let mine = exec_above_maxmemory(&ours).await;
    assert_eq!(mine, theirs);
    ours.shutdown().await;
}

/// Two transactions queued below --maxmemory and sent EXEC above it (another client
/// lowers it): the one holding XGROUP CREATE (denyoom) is refused, the one holding
/// only XGROUP DESTROY (write, not denyoom) runs.
async fn exec_above_maxmemory(node: &impl Addressed) -> Vec<String> {
    let mut a = Raw::to(node).await;
    let mut b = Raw::to(node).await;
    let mut out = Vec::new();
    for args in [
        &["FLUSHALL"][..],
        &["XADD", "s", "1-0", "f", "v"],
        &["XGROUP", "CREATE", "s", "g0", "0"],
    ] {
        out.push(a.cmd(args).await);
    }
    for queued in [
        &["XGROUP", "CREATE", "s", "g", "0"][..],
        &["XGROUP", "DESTROY", "s", "g0"],
    ] {
        out.push(a.cmd(&["MULTI"]).await);
        out.push(a.cmd(queued).await);
        out.push(b.cmd(&["CONFIG", "SET", "maxmemory", "1"]).await);
        out.push(a.cmd(&["EXEC"]).await);
        out.push(b.cmd(&["CONFIG", "SET", "maxmemory", "0"]).await);
    }
    out
}

/// In a read-only script (EVAL_RO, `#!lua flags=no-writes`) a subcommand is refused by
/// its own `write` (XGROUP CREATE / DESTROY) and runs when it only reads (XINFO STREAM,
/// OBJECT ENCODING); a `noscript` one is refused for that first, as redis-server
/// checks `noscript` before the script's permissions and writes. Same replies as
/// redis-server's, and no group is created.
#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subcommands_in_read_only_scripts_as_redis() {
    let session: &[&[&str]] = &[
        &["FLUSHALL"],
        &["XADD", "s", "1-0", "f", "v"],
        &[
            "EVAL_RO",
            "return redis.call('XINFO', 'STREAM', KEYS[1])[2]",
            "1",
            "s",
        ],
        &[
            "EVAL_RO",
            "return #redis.call('XINFO', 'GROUPS', KEYS[1])",
            "1",
            "s",
        ],
        &[
            "EVAL_RO",
            "return redis.call('OBJECT', 'ENCODING', KEYS[1])",
            "1",
            "s",
        ],
        &[
            "EVAL_RO",
            "return redis.call('XGROUP', 'CREATE', KEYS[1], 'g', '0')",
            "1",
            "s",
        ],
        &[
            "EVAL_RO",
            "return redis.pcall('XGROUP', 'CREATE', KEYS[1], 'g', '0')",
            "1",
            "s",
        ],
        &[
            "EVAL_RO",
            "return redis.call('XGROUP', 'DESTROY', KEYS[1], 'g')",
            "1",
            "s",
        ],
        &[
            "EVAL",
            "#!lua flags=no-writes\nreturn redis.call('XGROUP', 'CREATE', KEYS[1], 'g', '0')",
            "1",
            "s",
        ],
        &[
            "EVAL",
            "#!lua flags=no-writes\nreturn redis.call('XINFO', 'STREAM', KEYS[1])[2]",
            "1",
            "s",
        ],
        &["EVAL_RO", "return redis.call('FUNCTION', 'FLUSH')", "0"],
        &["EVAL_RO", "return redis.call('BLPOP', 'l', '0')", "0"],
        &[
            "EVAL_RO",
            "return #redis.call('XINFO', 'GROUPS', KEYS[1])",
            "1",
            "s",
        ],
        &[
            "EVAL",
            "return redis.call('XGROUP', 'CREATE', KEYS[1], 'g', '0')",
            "1",
            "s",
        ],
        &[
            "EVAL_RO",
            "return #redis.call('XINFO', 'GROUPS', KEYS[1])",
            "1",
            "s",
        ],
    ];
    let redis = RedisNode::start(None);
    let ours = start().await;
    let theirs = transcript(&redis, session).await;
    let mine = transcript(&ours, session).await;
    assert_eq!(mine, theirs);
    assert!(mine[5].contains("-ERR Write commands are not allowed from read-only scripts."));
    ours.shutdown().await;
}

/// A script that ran a write subcommand (XGROUP CREATE) has written, as in Redis: past
/// the busy time SCRIPT KILL refuses to stop it (UNKILLABLE).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_that_ran_a_write_subcommand_is_unkillable() {
    let server = start().await;
    let mut con = conn(&server).await;
    // The script says when it has written, so SCRIPT KILL does not race the write.
    let mut wrote = client(&server).get_async_pubsub().await.unwrap();
    wrote.subscribe("wrote").await.unwrap();
    let script = "redis.call('xgroup', 'create', 's', 'g', '$', 'mkstream') \
                  redis.call('publish', 'wrote', '1') while true do end";
    let mut looping_con = conn(&server).await;
    let looping =
        tokio::spawn(async move { q::<Value>(&mut looping_con, &["EVAL", script, "0"]).await });
    tokio::time::timeout(
        Duration::from_secs(10),
        futures_util::StreamExt::next(&mut wrote.on_message()),
    )
    .await
    .expect("the script wrote")
    .expect("a message");
    server.clock().advance(Duration::from_secs(6));
    let kill = q::<Value>(&mut con, &["SCRIPT", "KILL"]).await.unwrap_err();
    assert_eq!(
        error_text(&kill),
        "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command."
    );
    // Shutting the server down stops it (the test's way of SHUTDOWN NOSAVE).
    server.shutdown().await;
    assert!(looping.await.unwrap().is_err());
}

const ACL_FILE: &str = "\
user admin on >adminpw ~* &* +@all
user app on >pw ~lock:* resetchannels +@read +@write +@stream +@connection +@transaction -@dangerous +eval
";

const NOPERM_KEY: &str = "NOPERM No permissions to access a key";

/// The eight stream subcommands of issue 40's repro: refused with NOPERM on a key
/// outside the user's patterns (nothing changes), run on one inside them; and from a
/// script and in a transaction alike (one ACL check serves all three).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_user_runs_stream_subcommands_only_on_its_keys() {
    let file = TempPath::new("aclfile");
    std::fs::write(&file.0, ACL_FILE).unwrap();
    let path = file.0.clone();
    let node = start_with(move |c| c.aclfile = Some(path)).await;
    let mut admin = Raw::to(&node).await;
    admin.check(&["AUTH", "admin", "adminpw"], OK).await;
    let mut app = Raw::to(&node).await;
    app.check(&["AUTH", "app", "pw"], OK).await;
    for key in ["secret:payroll", "lock:s"] {
        admin.cmd(&["XADD", key, "1-1", "employee", "ceo"]).await;
        admin.check(&["XGROUP", "CREATE", key, "g", "0"], OK).await;
        admin
            .cmd(&["XREADGROUP", "GROUP", "g", "bob", "STREAMS", key, ">"])
            .await;
    }
    let cases = |key: &'static str, new: &'static str| -> Vec<Vec<&'static str>> {
        vec![
            vec!["XINFO", "STREAM", key, "FULL"],
            vec!["XINFO", "STREAM", key],
            vec!["XINFO", "GROUPS", key],
            vec!["XINFO", "CONSUMERS", key, "g"],
            vec!["XGROUP", "CREATE", new, "g", "$", "MKSTREAM"],
            vec!["XGROUP", "CREATECONSUMER", key, "g", "carol"],
            vec!["XGROUP", "SETID", key, "g", "0"],
            vec!["XGROUP", "DELCONSUMER", key, "g", "bob"],
            vec!["XGROUP", "DESTROY", key, "g"],
        ]
    };
    let before = admin
        .cmd(&["XINFO", "STREAM", "secret:payroll", "FULL"])
        .await;
    for args in cases("secret:payroll", "secret:new") {
        app.check(&args, &err(NOPERM_KEY)).await;
    }
    // From a script, and queued after MULTI (which fails the transaction).
    let script = "return redis.call('xinfo', 'stream', ARGV[1])";
    app.check(
        &["EVAL", script, "0", "secret:payroll"],
        &err("ERR ACL failure in script: No permissions to access a key script: f1fd7cc11b743a68d3c6efd57de144e19c36a04c, on @user_script:1."),
    )
    .await;
    app.check(&["MULTI"], OK).await;
    app.check(
        &["XGROUP", "DESTROY", "secret:payroll", "g"],
        &err(NOPERM_KEY),
    )
    .await;
    app.check(
        &["EXEC"],
        &err("EXECABORT Transaction discarded because of previous errors."),
    )
    .await;
    assert_eq!(
        admin
            .cmd(&["XINFO", "STREAM", "secret:payroll", "FULL"])
            .await,
        before,
        "refused calls changed nothing"
    );
    admin.check(&["EXISTS", "secret:new"], &int(0)).await;
    // Inside the patterns every one runs.
    let replies: Vec<String> = {
        let mut out = Vec::new();
        for args in cases("lock:s", "lock:new") {
            out.push(app.cmd(&args).await);
        }
        out
    };
    for (args, reply) in cases("lock:s", "lock:new").iter().zip(&replies) {
        assert!(!reply.starts_with('-'), "{args:?}: {reply:?}");
    }
    assert_eq!(replies[4], OK, "XGROUP CREATE ... MKSTREAM");
    assert_eq!(replies[8], int(1), "XGROUP DESTROY");
    admin.check(&["EXISTS", "lock:new"], &int(1)).await;
    node.shutdown().await;
}

/// A 40-hex node id.
fn node_id(i: usize) -> String {
    format!("{:040x}", i + 1)
}

/// A slot map: `(port, slot ranges)` per node.
fn map_json(version: u64, nodes: &[(u16, &[(u16, u16)])]) -> String {
    let nodes: Vec<String> = nodes
        .iter()
        .enumerate()
        .map(|(i, (port, ranges))| {
            let ranges: Vec<String> = ranges.iter().map(|(a, b)| format!("[{a},{b}]")).collect();
            format!(
                r#"{{"id":"{}","host":"127.0.0.1","port":{port},"slots":[{}]}}"#,
                node_id(i),
                ranges.join(",")
            )
        })
        .collect();
    format!(r#"{{"version":{version},"nodes":[{}]}}"#, nodes.join(","))
}

/// A key of `slot` with the given prefix.
fn key_in(slot: u16, prefix: &str) -> String {
    (0..1_000_000)
        .map(|i| format!("{prefix}{i}"))
        .find(|k| redlockd::slot::key_slot(k.as_bytes()) == slot)
        .expect("a key of the slot")
}

/// In map mode: XINFO STREAM, XGROUP, OBJECT and MEMORY USAGE of a key another node
/// serves get MOVED; on a slot this node just took over, XGROUP CREATE ... MKSTREAM and
/// the writes whose handlers fence themselves (SORT STORE, GEORADIUS STORE,
/// BITFIELD SET, GETEX PX) get the slot fence's TRYAGAIN until it ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subcommand_keys_are_routed_and_slot_fenced() {
    let nodes = TestGroup::try_start_with(2, |i, mut c| {
        c.cluster.mode = Mode::Map;
        c.cluster.node_id = Some(node_id(i));
        c
    })
    .await
    .expect("map-mode nodes start");
    let p = |i: usize| nodes.node(i).addr().port();
    let v1 = map_json(1, &[(p(0), &[(0, 8191)]), (p(1), &[(8192, 16383)])]);
    for n in nodes.nodes() {
        Raw::to(n)
            .await
            .check(&["CLUSTER", "SETMAP", &v1], OK)
            .await;
    }
    let mut n0 = Raw::to(nodes.node(0)).await;
    let far = key_in(9000, "s");
    let moved = err(&format!("MOVED 9000 {}", nodes.node(1).addr()));
    for args in [
        vec!["XINFO", "STREAM", &far, "FULL"],
        vec!["XINFO", "GROUPS", &far],
        vec!["XINFO", "CONSUMERS", &far, "g"],
        vec!["XGROUP", "CREATE", &far, "g", "$", "MKSTREAM"],
        vec!["XGROUP", "SETID", &far, "g", "0"],
        vec!["XGROUP", "DESTROY", &far, "g"],
        vec!["XGROUP", "CREATECONSUMER", &far, "g", "c"],
        vec!["XGROUP", "DELCONSUMER", &far, "g", "c"],
        vec!["OBJECT", "ENCODING", &far],
        vec!["MEMORY", "USAGE", &far],
    ] {
        n0.check(&args, &moved).await;
    }
    // A key of its own runs; keyless subcommands are not routed.
    let near = key_in(100, "s");
    n0.check(&["XINFO", "STREAM", &near], &err("ERR no such key"))
        .await;
    assert!(n0.cmd(&["XINFO", "HELP"]).await.starts_with('*'));
    // Version 2 moves slot 100 to node 1 without its keys (as when node 0 is
    // unreachable), so node 1 fences it.
    nodes.node(0).handle().set_cluster_move_keys(false);
    let v2 = map_json(
        2,
        &[
            (p(0), &[(0, 99), (101, 8191)]),
            (p(1), &[(100, 100), (8192, 16383)]),
        ],
    );
    for n in nodes.nodes() {
        Raw::to(n)
            .await
            .check(&["CLUSTER", "SETMAP", &v2], OK)
            .await;
    }
    let mut n1 = Raw::to(nodes.node(1)).await;
    let tag = |k: &str| format!("{{{near}}}{k}");
    let (src, geo) = (tag("src"), tag("geo"));
    let fenced = err("TRYAGAIN slot 100 moved to this node at map version 2: its previous owner may still hold locks in it; writes to it are refused for another 31000 ms");
    let writes = [
        vec!["XGROUP", "CREATE", near.as_str(), "g", "$", "MKSTREAM"],
        vec!["SORT", &src, "STORE", &near],
        vec!["GEORADIUS", &geo, "0", "0", "10", "km", "STORE", &near],
        vec!["BITFIELD", &near, "SET", "u8", "0", "1"],
        vec!["GETEX", &near, "PX", "1000"],
    ];
    for args in &writes {
        n1.check(args, &fenced).await;
    }
    n1.check(&["EXISTS", &near], &int(0)).await;
    nodes.advance(Duration::from_millis(31_000));
    n1.check(&["XGROUP", "CREATE", &near, "g", "$", "MKSTREAM"], OK)
        .await;
    let groups = n1.cmd(&["XINFO", "GROUPS", &near]).await;
    assert!(groups.starts_with("*1\r\n"), "{groups:?}");
}
