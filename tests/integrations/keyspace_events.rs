//! Keyspace notifications (`notify-keyspace-events`): the same messages, in the same
//! order, as redis-server 7.0 for a sequence over every command family (differential),
//! CONFIG SET / GET of the class flags as Redis prints them, expiry by the sweeper, and
//! ACL channel rules on the notification channels.

use crate::support;
use std::time::Duration;
use support::redis_server::RedisNode;
use support::*;

/// One server's two connections: commands, and a subscriber to every notification
/// channel (and the end marker).
struct Side {
    cmd: Raw,
    sub: Raw,
}

impl Side {
    async fn open(node: &impl Addressed, flags: &str) -> Side {
        let mut cmd = Raw::to(node).await;
        let mut sub = Raw::to(node).await;
        assert_eq!(cmd.cmd(&["FLUSHALL"]).await, OK);
        let set = cmd
            .cmd(&["CONFIG", "SET", "notify-keyspace-events", flags])
            .await;
        assert_eq!(set, OK);
        sub.cmd(&["PSUBSCRIBE", "__key*__:*"]).await;
        Side { cmd, sub }
    }

    /// The messages received until the end marker, as `channel payload`.
    async fn messages(&mut self) -> Vec<String> {
        let end = self
            .cmd
            .cmd(&["PUBLISH", "__keyspace@0__:zz-end", "end"])
            .await;
        assert_eq!(end, ":1\r\n");
        let mut out = Vec::new();
        loop {
            let frame = self.sub.reply().await;
            let parts: Vec<&str> = frame.split("\r\n").collect();
            assert_eq!(parts.get(2), Some(&"pmessage"), "{frame:?}");
            let (channel, payload) = (parts[6], parts[8]);
            if channel == "__keyspace@0__:zz-end" {
                return out;
            }
            out.push(format!("{channel} {payload}"));
        }
    }
}

/// A redlockd on the real clock (redis-server has no other) and a redis-server, both
/// with `flags`.
async fn both(flags: &str) -> (RedisNode, TestServer, Side, Side) {
    let redis = RedisNode::start(None);
    let ours = start_with(|c| {
        c.clock = Some(redlockd::Clock::real());
        c.max_ttl = Duration::from_secs(3600);
    })
    .await;
    let r = Side::open(&redis, flags).await;
    let o = Side::open(&ours, flags).await;
    (redis, ours, r, o)
}

/// Commands over every family, with their events in Redis 7.0 (a `sleep` line waits
/// 5 ms, past the 1 ms TTLs, so the next command finds the key expired).
const SEQUENCE: &[&str] = &[
    // strings
    "SET k1 v",
    "SET k1 v2 EX 100",
    "SETNX k1 x",
    "SETNX k2 x",
    "GETSET k2 y",
    "SETEX k5 100 v",
    "MSET a 1 b 2",
    "MSETNX c 1 d 2",
    "MSETNX c 1 e 2",
    "APPEND a xyz",
    "APPEND newa q",
    "SETRANGE b 3 zz",
    "SETRANGE b 0 ''",
    "INCR n",
    "INCRBY n 5",
    "DECR n",
    "DECRBY n 2",
    "INCRBYFLOAT f 1.5",
    "GETDEL a",
    "GETEX b EX 100",
    "GETEX b PERSIST",
    "GETEX b PERSIST",
    "GETEX k5 PXAT 1",
    // generic
    "EXPIRE k2 100",
    "PEXPIRE k2 100 NX",
    "PERSIST k2",
    "PERSIST k2",
    "PEXPIRE k2 0",
    "RENAME k1 k3",
    "RENAMENX k3 c",
    "COPY k3 k4",
    "MOVE k4 1",
    "DEL k3 nosuch c",
    // onto an existing key: Redis deletes it, then adds (`new` again)
    "SET rn1 a",
    "SET rn2 b",
    "RENAME rn1 rn2",
    "SET cp1 a",
    "COPY cp1 rn2 REPLACE",
    "COPY cp1 rn2",
    "SET rx v PX 1",
    "sleep",
    "RENAME rn2 rx",
    "UNLINK d",
    // lazy expiry
    "SET e v PX 1",
    "sleep",
    "GET e",
    "SET e2 v PX 1",
    "sleep",
    "SET e2 w",
    "SET e3 v PX 1",
    "sleep",
    "DEL e3",
    // lists
    "LPUSH l a b c",
    "RPUSH l d",
    "LPUSHX nol x",
    "RPUSHX l e",
    "LPOP l",
    "RPOP l 2",
    "LINSERT l BEFORE b z",
    "LINSERT l BEFORE nothere z",
    "LSET l 0 q",
    "LREM l 1 q",
    "LTRIM l 0 0",
    "LMOVE l l2 LEFT RIGHT",
    "RPOPLPUSH l2 l3",
    "RPUSH l3 x y",
    "LMPOP 1 l3 LEFT COUNT 5",
    "RPUSH l4 a",
    "BLPOP l4 0",
    // hashes
    "HSET h f v g w",
    "HSETNX h f x",
    "HSETNX h z y",
    "HINCRBY h n 2",
    "HINCRBYFLOAT h m 1.5",
    "HDEL h nothere",
    "HDEL h f g n m z",
    // sets
    "SADD s a b c",
    "SADD s a",
    "SREM s a",
    "SMOVE s s2 b",
    "SPOP s",
    "SADD s3 x y",
    "SINTERSTORE d1 s2 s3",
    "SUNIONSTORE d1 s2 s3",
    "SDIFFSTORE d1 s2 s2",
    // sorted sets
    "ZADD z 1 a 2 b",
    "ZADD z 1 a",
    "ZADD z INCR 5 a",
    "ZINCRBY z 1 b",
    "ZINCRBY z 0 b",
    "ZREM z a",
    "ZPOPMIN z",
    "ZADD z 1 a 2 b 3 c 4 d 5 e",
    "ZPOPMAX z",
    "ZREMRANGEBYSCORE z 1 1",
    "ZREMRANGEBYRANK z 0 0",
    "ZRANGESTORE zd z 0 -1",
    "ZUNIONSTORE zu 2 z zd",
    "ZINTERSTORE zi 1 nosuch",
    "ZDIFFSTORE zu 1 nosuch",
    "ZADD zl 0 a 0 b 0 c",
    "ZREMRANGEBYLEX zl [a [b",
    "BZPOPMIN zl 0",
    // streams
    "XADD x 1-1 f v",
    "XADD x MAXLEN 1 2-1 f v",
    "XDEL x 2-1",
    "XTRIM x MAXLEN 0",
    "XADD x 3-1 f v",
    "XTRIM x MAXLEN 0",
    "XSETID x 5-0",
    "XGROUP CREATE x g1 $",
    "XGROUP CREATE xs g1 $ MKSTREAM",
    "XGROUP SETID x g1 0",
    "XGROUP CREATECONSUMER x g1 c1",
    "XGROUP CREATECONSUMER x g1 c1",
    "XGROUP DELCONSUMER x g1 c1",
    "XGROUP DELCONSUMER x g1 nosuch",
    "XGROUP DESTROY x g1",
    "XGROUP DESTROY x g1",
    // consumers created by reads and claims (not by a claim of nothing)
    "XADD xc 1-1 f v",
    "XADD xc 2-1 f v",
    "XGROUP CREATE xc g 0",
    "XREADGROUP GROUP g c1 COUNT 1 STREAMS xc >",
    "XREADGROUP GROUP g c1 COUNT 1 STREAMS xc >",
    "XREADGROUP GROUP g c2 STREAMS xc 0",
    "XCLAIM xc g c3 0 9-9",
    "XCLAIM xc g c3 0 1-1 JUSTID",
    "XAUTOCLAIM xc g c4 0 0 COUNT 1 JUSTID",
    "XAUTOCLAIM xc g c4 0 0 COUNT 1 JUSTID",
    // bitmaps, HyperLogLog, geo, sort
    "SETBIT bt 7 1",
    "BITOP NOT bn bt",
    "BITOP AND bn nosuch",
    "BITFIELD bf SET u8 0 255",
    "PFADD hl a b",
    "PFADD hl a",
    "PFMERGE hl2 hl",
    "GEOADD g 13.361389 38.115556 Palermo",
    "GEOSEARCHSTORE gs g FROMLONLAT 15 37 BYRADIUS 200 km",
    "GEORADIUS g 15 37 200 km STORE gr",
    "RPUSH sl 3 1 2",
    "SORT sl STORE sd",
    // scripts and transactions
    "EVAL \"redis.call('set', KEYS[1], 'v'); return redis.call('pexpire', KEYS[1], 1000)\" 1 sk",
    "MULTI",
    "INCR mi",
    "DEL mi",
    "EXEC",
];

/// A line of `SEQUENCE` as arguments: words, `'...'` and `"..."` quoted.
fn words_of(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line.trim();
    while !rest.is_empty() {
        let (word, next) = match rest.chars().next() {
            Some(q @ ('"' | '\'')) => {
                let end = rest[1..].find(q).expect("closing quote") + 1;
                (&rest[1..end], &rest[end + 1..])
            }
            _ => rest.split_at(rest.find(' ').unwrap_or(rest.len())),
        };
        out.push(word.to_string());
        rest = next.trim_start();
    }
    out
}

/// Runs `SEQUENCE` on both servers (replies compared too) and returns both message
/// streams.
async fn run_sequence(r: &mut Side, o: &mut Side) -> (Vec<String>, Vec<String>) {
    for line in SEQUENCE {
        if *line == "sleep" {
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        }
        let args = words_of(line);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (ra, rb) = (r.cmd.cmd(&args).await, o.cmd.cmd(&args).await);
        // A TTL-less compare: the replies themselves (XADD's explicit IDs, counts).
        assert_eq!(ra, rb, "{line}: redis {ra:?}, redlockd {rb:?}");
    }
    (r.messages().await, o.messages().await)
}

/// Every event of the sequence, with `notify-keyspace-events KEA`, is redis-server's:
/// same channels, same payloads, same order.
#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_match_redis_with_kea() {
    let (_redis, ours, mut r, mut o) = both("KEA").await;
    let (theirs, mine) = run_sequence(&mut r, &mut o).await;
    assert!(theirs.len() > 150, "{}", theirs.len());
    assert_eq!(mine, theirs, "redlockd's messages (left) vs redis-server's");
    ours.shutdown().await;
}

/// With `n` too, every key creation adds `new` where Redis sends it; with only `E`
/// and two classes, only those classes' keyevent messages come.
#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_keys_and_class_filters_match_redis() {
    for flags in ["KEAn", "Elx", "K$g"] {
        let (_redis, ours, mut r, mut o) = both(flags).await;
        let (theirs, mine) = run_sequence(&mut r, &mut o).await;
        assert!(!theirs.is_empty(), "{flags}");
        assert_eq!(
            mine, theirs,
            "{flags}: redlockd's messages (left) vs redis-server's"
        );
        ours.shutdown().await;
    }
}

/// A blocked XREADGROUP served by a later XADD creates its consumer then, with
/// `xgroup-createconsumer` after the `xadd`, as in Redis.
#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocked_group_read_creates_its_consumer_as_redis() {
    let (redis, ours, mut r, mut o) = both("KEA").await;
    let mut readers = [Raw::to(&redis).await, Raw::to(&ours).await];
    for (side, reader) in [&mut r, &mut o].into_iter().zip(&mut readers) {
        let create = ["XGROUP", "CREATE", "xb", "g", "$", "MKSTREAM"];
        assert_eq!(side.cmd.cmd(&create).await, OK);
        let read = [
            "XREADGROUP",
            "GROUP",
            "g",
            "cb",
            "BLOCK",
            "0",
            "STREAMS",
            "xb",
            ">",
        ];
        reader.send_cmd(&read).await;
        // Blocked or not yet read: either way the consumer is made by this read.
        assert_eq!(
            side.cmd.cmd(&["XADD", "xb", "1-1", "f", "v"]).await,
            "$3\r\n1-1\r\n"
        );
        assert!(reader.reply().await.contains("1-1"));
    }
    let (theirs, mine) = (r.messages().await, o.messages().await);
    assert!(
        theirs.iter().any(|m| m.ends_with("xgroup-createconsumer")),
        "{theirs:?}"
    );
    assert_eq!(mine, theirs);
    ours.shutdown().await;
}

/// Class `m`: a read of a missing key sends `keymiss`, as Redis's read lookups do,
/// also the reads of write commands (SET ... GET, GETEX, GETDEL, COPY, the STORE
/// forms' sources, PFMERGE, SORT, GEORADIUS), before their own events.
#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_misses_match_redis() {
    // With `A` too, each `keymiss` comes where Redis sends it among the write events.
    for flags in ["KEm", "KEAm"] {
        let (_redis, ours, mut r, mut o) = both(flags).await;
        for line in [
            "SET here v",
            "GET nosuch",
            "GET here",
            "EXISTS nosuch here nosuch2",
            "MGET a here b",
            "HGET h f",
            "LRANGE l 0 -1",
            "TTL gone",
            "SMEMBERS s",
            "ZSCORE z m",
            // reads inside write commands (a key that exists, or of another type, is no miss)
            "SET sg v GET",
            "SET here w GET",
            "SET sx v XX GET",
            "GETSET gs v",
            "GETEX gx",
            "GETEX gx EX 10",
            "GETEX here PERSIST",
            "GETDEL gd",
            "COPY cs cd",
            "SADD st x",
            "SINTERSTORE d st m1 m2",
            "SUNIONSTORE d m1 here m2",
            "SDIFFSTORE d m1 m2",
            "ZUNIONSTORE d 2 m1 m2",
            "ZINTERSTORE d 2 m1 here m2",
            "ZDIFFSTORE d 2 m1 m2 WEIGHTS 1",
            "ZRANGESTORE d m1 0 -1",
            "BITOP AND d m1 here m2",
            "PFMERGE pd m1",
            "SORT m1",
            "SORT m1 STORE d",
            "GEOSEARCHSTORE d m1 FROMLONLAT 0 0 BYRADIUS 1 km",
            "GEORADIUS m1 0 0 1 km",
            "GEORADIUSBYMEMBER m1 m 1 km STORE d",
            "XREADGROUP GROUP g c STREAMS m1 >",
            "XCLAIM m1 g c 0 1-1",
            "XAUTOCLAIM m1 g c 0 0",
            "XACK m1 g 1-1",
            "BITFIELD m1 GET u8 0",
            "BITFIELD m2 SET u8 0 1",
        ] {
            let args = words_of(line);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            assert_eq!(r.cmd.cmd(&args).await, o.cmd.cmd(&args).await, "{line}");
        }
        let (theirs, mine) = (r.messages().await, o.messages().await);
        assert!(theirs.len() >= 10, "{theirs:?}");
        assert_eq!(mine, theirs, "{flags}");
        ours.shutdown().await;
    }
}

/// CONFIG SET / GET notify-keyspace-events: Redis's printing of every flag string and
/// its error for a bad class character.
#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_flags_print_as_redis() {
    let redis = RedisNode::start(None);
    let ours = start().await;
    let mut r = Raw::to(&redis).await;
    let mut o = Raw::to(&ours).await;
    for flags in [
        "KEA",
        "AKE",
        "Kg$lshzxetd",
        "KEAmn",
        "Kn",
        "Em",
        "x",
        "",
        "AmnKEd",
        "Ag",
        "Kq",
        "K E",
    ] {
        let set = ["CONFIG", "SET", "notify-keyspace-events", flags];
        assert_eq!(r.cmd(&set).await, o.cmd(&set).await, "{flags:?}");
        let get = ["CONFIG", "GET", "notify-keyspace-events"];
        assert_eq!(r.cmd(&get).await, o.cmd(&get).await, "{flags:?}");
    }
    ours.shutdown().await;
}

/// Keys removed by the sweeper send `expired` (on the manual clock: `advance` sweeps);
/// with notifications off, nothing is published.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweeper_expiry_sends_expired() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    let mut sub = Raw::to(&h).await;
    sub.check(
        &["SUBSCRIBE", "__keyevent@0__:expired"],
        "*3\r\n$9\r\nsubscribe\r\n$22\r\n__keyevent@0__:expired\r\n:1\r\n",
    )
    .await;
    assert_eq!(c.cmd(&["SET", "quiet", "v", "PX", "10"]).await, OK);
    h.clock().advance(Duration::from_millis(20));
    sub.expect_silence(20).await;
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "notify-keyspace-events", "Ex"])
            .await,
        OK
    );
    assert_eq!(
        c.cmd(&["SET", "lock:a", "tok", "NX", "PX", "100"]).await,
        OK
    );
    h.clock().advance(Duration::from_millis(150));
    sub.expect("*3\r\n$7\r\nmessage\r\n$22\r\n__keyevent@0__:expired\r\n$6\r\nlock:a\r\n")
        .await;
    // The key is gone from the store, not only from reads.
    assert_eq!(c.cmd(&["DBSIZE"]).await, ":0\r\n");
    h.shutdown().await;
}

/// A user whose channel rules exclude the notification channels cannot subscribe to
/// them (the same check as any SUBSCRIBE); one allowed `__keyspace@*` gets its events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acl_channel_rules_apply_to_notification_channels() {
    let h = start().await;
    let mut admin = Raw::to(&h).await;
    for rule in [
        &[
            "ACL",
            "SETUSER",
            "app",
            "on",
            ">pw",
            "+@all",
            "~*",
            "resetchannels",
            "&app:*",
        ][..],
        &[
            "ACL",
            "SETUSER",
            "ops",
            "on",
            ">pw",
            "+@all",
            "~*",
            "resetchannels",
            "&__keyspace@*",
        ],
        &["CONFIG", "SET", "notify-keyspace-events", "K$"],
    ] {
        assert_eq!(admin.cmd(rule).await, OK);
    }
    let mut app = Raw::to(&h).await;
    assert_eq!(app.cmd(&["AUTH", "app", "pw"]).await, OK);
    let refused = app.cmd(&["PSUBSCRIBE", "__keyspace@0__:*"]).await;
    assert!(refused.starts_with("-NOPERM"), "{refused:?}");
    let mut ops = Raw::to(&h).await;
    assert_eq!(ops.cmd(&["AUTH", "ops", "pw"]).await, OK);
    ops.cmd(&["SUBSCRIBE", "__keyspace@0__:lock:b"]).await;
    assert_eq!(
        admin.cmd(&["SET", "lock:b", "t", "NX", "PX", "1000"]).await,
        OK
    );
    ops.expect("*3\r\n$7\r\nmessage\r\n$21\r\n__keyspace@0__:lock:b\r\n$3\r\nset\r\n")
        .await;
    h.shutdown().await;
}

/// RESP3 subscribers get the same events as push frames.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resp3_subscribers_get_push_frames() {
    let h = start_with(|c| c.notify_keyspace_events = "KEA".into()).await;
    let mut c = Raw::to(&h).await;
    let mut sub = Raw::to(&h).await;
    sub.hello3().await;
    sub.cmd(&["SUBSCRIBE", "__keyevent@0__:del"]).await;
    assert_eq!(c.cmd(&["SET", "k", "v"]).await, OK);
    assert_eq!(c.cmd(&["DEL", "k"]).await, ":1\r\n");
    sub.expect(">3\r\n$7\r\nmessage\r\n$18\r\n__keyevent@0__:del\r\n$1\r\nk\r\n")
        .await;
    sub.expect_silence(10).await;
    h.shutdown().await;
}
