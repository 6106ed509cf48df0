//! SORT / SORT_RO, DUMP / RESTORE and OBJECT: exact replies and errors, payloads
//! byte for byte beside redis-server 7.0 and restored in both directions, malformed
//! payloads refused with Redis's error, RESTORE's TTL under the max-ttl rule,
//! --require-ttl and the manual clock.

use crate::support;
use std::time::Duration;
use support::redis_server::RedisNode;
use support::*;

const BAD_FOOTER: &str = "ERR DUMP payload version or checksum are wrong";
const BAD_DATA: &str = "ERR Bad data format";

/// The commands that build one value of every encoding, the same on both servers.
const VALUES: &[&[&str]] = &[
    &["SET", "s:plain", "bar"],
    &["SET", "s:int", "12345"],
    &["SET", "s:big-int", "9999999999"],
    &["SET", "s:neg", "-129"],
    &["SET", "s:zeros", "007"],
    &["SET", "s:empty", ""],
    // 21 bytes and more: LZF when it saves more than 4 bytes.
    &["SET", "s:lzf", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"],
    &[
        "SET",
        "s:incompressible",
        "abcdefghijklmnopqrstuvwxyz0123456789",
    ],
    &[
        "RPUSH",
        "l:small",
        "a",
        "1",
        "-70000",
        "123456789012345",
        "xyz",
    ],
    &[
        "RPUSH",
        "l:ints",
        "0",
        "127",
        "128",
        "-4096",
        "4095",
        "32767",
        "8388607",
        "2147483647",
        "9223372036854775807",
    ],
    &["SADD", "set:int16", "1", "2", "3", "-5"],
    &["SADD", "set:int32", "100000", "1"],
    &["SADD", "set:int64", "5000000000", "-1"],
    &[
        "ZADD", "z:small", "1", "a", "2.5", "b", "-3", "c", "inf", "d", "-inf", "e", "0.1", "f",
        "1e18", "big", "1e20", "g",
    ],
    &["HSET", "h:one", "field", "value"],
    &["HSET", "h:int", "f", "1"],
    &[
        "HSET",
        "h:big",
        "field",
        "vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv",
    ],
];

/// Keys whose payload Redis determines (no hashtable iteration order inside).
const EXACT: &[&str] = &[
    "s:plain",
    "s:int",
    "s:big-int",
    "s:neg",
    "s:zeros",
    "s:empty",
    "s:lzf",
    "s:incompressible",
    "l:small",
    "l:ints",
    "l:long",
    "set:int16",
    "set:int32",
    "set:int64",
    "set:big-int",
    "z:small",
    "z:skiplist",
    "h:one",
    "h:int",
    "h:big",
];

/// The larger values, built in one pipeline each.
async fn build_big_values(c: &mut Raw) {
    // A list of several quicklist nodes (8 KiB each).
    let mut long = vec!["RPUSH".to_string(), "l:long".to_string()];
    long.extend((0..3000).map(|i| format!("item {i}")));
    // An intset of 400 members, compressed with LZF.
    let mut ints = vec!["SADD".to_string(), "set:big-int".to_string()];
    ints.extend((0..400).map(|i| (i * 3).to_string()));
    // A sorted set past the listpack's 128 entries: a skiplist, highest first.
    let mut z = vec!["ZADD".to_string(), "z:skiplist".to_string()];
    for i in 0..200 {
        z.push(format!("{}", i as f64 / 4.0));
        z.push(format!("m{i}"));
    }
    for cmd in [long, ints, z] {
        let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
        assert!(c.cmd(&args).await.starts_with(':'));
    }
}

/// A bulk frame's payload.
fn bulk_bytes(frame: &[u8]) -> Vec<u8> {
    assert_eq!(frame[0], b'$', "{:?}", String::from_utf8_lossy(frame));
    let nl = frame.iter().position(|&b| b == b'\n').unwrap();
    frame[nl + 1..frame.len() - 2].to_vec()
}

/// The key's content as a comparable text (collections sorted where unordered).
async fn content(c: &mut Raw, key: &str) -> String {
    let t = c.cmd(&["TYPE", key]).await;
    match t.as_str() {
        "+string\r\n" => c.cmd(&["GET", key]).await,
        "+list\r\n" => c.cmd(&["LRANGE", key, "0", "-1"]).await,
        "+set\r\n" => sorted_bulks(&c.cmd(&["SMEMBERS", key]).await).join(","),
        "+zset\r\n" => c.cmd(&["ZRANGE", key, "0", "-1", "WITHSCORES"]).await,
        "+hash\r\n" => sorted_bulks(&c.cmd(&["HGETALL", key]).await).join(","),
        other => panic!("{key}: {other}"),
    }
}

#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payloads_match_redis_byte_for_byte_and_restore_both_ways() {
    let redis = RedisNode::start(None);
    let ours = start().await;
    let mut r = Raw::to(&redis).await;
    let mut o = Raw::to(&ours).await;
    for c in [&mut r, &mut o] {
        for cmd in VALUES {
            let reply = c.cmd(cmd).await;
            assert!(reply.starts_with(':') || reply == OK, "{cmd:?}: {reply}");
        }
        build_big_values(c).await;
    }
    let mut keys: Vec<String> = sorted_bulks(&r.cmd(&["KEYS", "*"]).await);
    keys.sort();
    assert_eq!(keys.len(), VALUES.len() + 3);
    for key in &keys {
        let theirs = bulk_bytes(&r.cmd_bytes(&[b"DUMP", key.as_bytes()]).await);
        let mine = bulk_bytes(&o.cmd_bytes(&[b"DUMP", key.as_bytes()]).await);
        if EXACT.contains(&key.as_str()) {
            assert_eq!(mine, theirs, "DUMP {key}");
        }
        // Redis's payload into redlockd, and redlockd's into Redis.
        let copy = format!("{key}:copy");
        for (c, payload) in [(&mut o, &theirs), (&mut r, &mine)] {
            let reply = c
                .cmd_bytes(&[b"RESTORE", copy.as_bytes(), b"0", payload])
                .await;
            assert_eq!(reply, OK.as_bytes(), "RESTORE {key}");
        }
        let want = content(&mut r, key).await;
        assert_eq!(content(&mut o, &copy).await, want, "{key} restored here");
        assert_eq!(
            content(&mut r, &copy).await,
            want,
            "{key} restored in Redis"
        );
        for c in [&mut r, &mut o] {
            assert_eq!(c.cmd(&["PTTL", &copy]).await, int(-1));
        }
        // What was restored reports the encoding Redis reports.
        let enc = ["OBJECT", "ENCODING", &copy];
        assert_eq!(o.cmd(&enc).await, r.cmd(&enc).await, "{key}");
    }
    ours.shutdown().await;
}

#[tokio::test]
async fn a_dump_of_redis_7_0_restores_exactly() {
    // redis-server 7.0.15: SET foo bar; DUMP foo. And RPUSH l a 1; DUMP l.
    let h = start().await;
    let mut c = Raw::to(&h).await;
    let string = b"\x00\x03bar\x0a\x00\xe6\xbe\x49\x60\xee\x66\xfd\x17";
    let list = b"\x12\x01\x02\x0c\x0c\x00\x00\x00\x02\x00\x81a\x02\x01\x01\xff\x0a\x00\x94\x96\x2b\x23\xac\x17\xaa\x85";
    assert_eq!(
        c.cmd_bytes(&[b"RESTORE", b"foo", b"0", string]).await,
        OK.as_bytes()
    );
    assert_eq!(
        c.cmd_bytes(&[b"RESTORE", b"l", b"0", list]).await,
        OK.as_bytes()
    );
    assert_eq!(c.cmd(&["GET", "foo"]).await, bulk("bar"));
    assert_eq!(
        c.cmd(&["LRANGE", "l", "0", "-1"]).await,
        "*2\r\n$1\r\na\r\n$1\r\n1\r\n"
    );
    assert_eq!(bulk_bytes(&c.cmd_bytes(&[b"DUMP", b"foo"]).await), string);
    assert_eq!(bulk_bytes(&c.cmd_bytes(&[b"DUMP", b"l"]).await), list);
    assert_eq!(c.cmd(&["DUMP", "nokey"]).await, NIL);
    h.shutdown().await;
}

#[tokio::test]
async fn malformed_payloads_get_redis_errors_never_a_crash() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    let restore = async |c: &mut Raw, p: &[u8]| {
        String::from_utf8_lossy(&c.cmd_bytes(&[b"RESTORE", b"k", b"0", p, b"REPLACE"]).await)
            .into_owned()
    };
    c.cmd(&["RPUSH", "l", "a", "b", "c"]).await;
    let good = bulk_bytes(&c.cmd_bytes(&[b"DUMP", b"l"]).await);
    // Every truncation, every flipped bit: the footer no longer matches.
    for cut in 0..good.len() {
        assert_eq!(
            restore(&mut c, &good[..cut]).await,
            err(BAD_FOOTER),
            "cut at {cut}"
        );
    }
    for i in 0..good.len() {
        for bit in 0..8 {
            let mut bad = good.clone();
            bad[i] ^= 1 << bit;
            assert_eq!(
                restore(&mut c, &bad).await,
                err(BAD_FOOTER),
                "byte {i} bit {bit}"
            );
        }
    }
    // A newer RDB version (Redis 7.2's 11) is refused; older ones are read.
    assert_eq!(
        restore(&mut c, &dump_payload(b"\x00\x03bar", 11)).await,
        err(BAD_FOOTER)
    );
    assert_eq!(restore(&mut c, &dump_payload(b"\x00\x03bar", 9)).await, OK);
    // Valid footers around bad values: huge counts and lengths, unknown types, empty
    // collections, duplicates, a NaN score, a broken listpack.
    let huge = b"\x81\xff\xff\xff\xff\xff\xff\xff\xff";
    let bodies: Vec<Vec<u8>> = vec![
        [&b"\x00"[..], huge].concat(),
        [&b"\x01"[..], huge, b"\x01a"].concat(),
        [&b"\x02"[..], huge, b"\x01a"].concat(),
        [&b"\x04"[..], huge, b"\x01a\x01b"].concat(),
        [&b"\x05"[..], huge, b"\x01a"].concat(),
        [&b"\x12"[..], huge].concat(),
        b"\x00\x80\xff\xff\xff\xffabc".to_vec(),
        b"\x00\xc3\x80\xff\xff\xff\xff\x80\xff\xff\xff\xff\x01a".to_vec(),
        b"\x63\x01a".to_vec(),
        b"\x0f\x00".to_vec(),
        b"\x12\x00".to_vec(),
        b"\x02\x02\x01a\x01a".to_vec(),
        [&b"\x05\x01\x01a"[..], &f64::NAN.to_le_bytes()].concat(),
        b"\x12\x01\x02\x0c\x0c\x00\x00\x00\x02\x00\x8fa\x02\x01\x01\xff".to_vec(),
        b"\x10\x0c\x0c\x00\x00\x00\x01\x00\x81a\x02\xff".to_vec(),
        b"\x0b\x0c\x02\x00\x00\x00\xff\xff\xff\x7f\x01\x00".to_vec(),
    ];
    for body in &bodies {
        assert_eq!(
            restore(&mut c, &dump_payload(body, 10)).await,
            err(BAD_DATA),
            "{body:?}"
        );
    }
    assert_eq!(
        c.cmd(&["EXISTS", "k"]).await,
        int(1),
        "the version-9 restore"
    );
    assert_eq!(c.cmd(&["PING"]).await, "+PONG\r\n");
    h.shutdown().await;
}

#[tokio::test]
async fn restore_checks_its_arguments_in_redis_order() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["SET", "foo", "bar"]).await;
    let p = bulk_bytes(&c.cmd_bytes(&[b"DUMP", b"foo"]).await);
    let mut run = async |args: &[&[u8]]| {
        let mut full: Vec<&[u8]> = vec![b"RESTORE"];
        full.extend_from_slice(args);
        String::from_utf8_lossy(&c.cmd_bytes(&full).await).into_owned()
    };
    let busy = err("BUSYKEY Target key name already exists.");
    assert_eq!(run(&[b"foo", b"0", &p]).await, busy);
    assert_eq!(run(&[b"foo", b"0", b"..."]).await, busy);
    assert_eq!(run(&[b"new", b"0", b"..."]).await, err(BAD_FOOTER));
    assert_eq!(
        run(&[b"foo", b"0", b"...", b"bogus"]).await,
        err("ERR syntax error")
    );
    assert_eq!(
        run(&[b"new", b"-1", &p]).await,
        err("ERR Invalid TTL value, must be >= 0")
    );
    assert_eq!(
        run(&[b"new", b"x", &p]).await,
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(
        run(&[b"new", b"0", &p, b"IDLETIME", b"-1"]).await,
        err("ERR Invalid IDLETIME value, must be >= 0")
    );
    assert_eq!(
        run(&[b"new", b"0", &p, b"FREQ", b"256"]).await,
        err("ERR Invalid FREQ value, must be >= 0 and <= 255")
    );
    assert_eq!(
        run(&[b"new", b"0", &p, b"FREQ", b"1", b"IDLETIME", b"1"]).await,
        err("ERR syntax error")
    );
    assert_eq!(
        run(&[b"new", b"0", &p, b"IDLETIME"]).await,
        err("ERR syntax error")
    );
    assert_eq!(
        run(&[b"new", b"0"]).await,
        err("ERR wrong number of arguments for 'restore' command")
    );
    assert_eq!(
        run(&[b"new", b"0", &p, b"IDLETIME", b"10", b"ABSTTL"]).await,
        OK
    );
    assert_eq!(
        run(&[b"foo", b"0", &p, b"REPLACE", b"FREQ", b"7"]).await,
        OK
    );
    // A key of another type is replaced whole.
    c.cmd(&["RPUSH", "lst", "a"]).await;
    assert_eq!(
        c.cmd_bytes(&[b"RESTORE", b"lst", b"0", &p, b"REPLACE"])
            .await,
        OK.as_bytes()
    );
    assert_eq!(c.cmd(&["TYPE", "lst"]).await, "+string\r\n");
    h.shutdown().await;
}

#[tokio::test]
async fn restore_ttls_follow_the_clock_and_the_servers_rules() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["SET", "foo", "bar"]).await;
    let p = bulk_bytes(&c.cmd_bytes(&[b"DUMP", b"foo"]).await);
    let restore = async |c: &mut Raw, key: &str, ttl: String, extra: &[&str]| {
        let mut args: Vec<&[u8]> = vec![b"RESTORE", key.as_bytes(), ttl.as_bytes(), &p];
        args.extend(extra.iter().map(|a| a.as_bytes()));
        String::from_utf8_lossy(&c.cmd_bytes(&args).await).into_owned()
    };
    assert_eq!(restore(&mut c, "rel", "5000".into(), &[]).await, OK);
    assert_eq!(c.cmd(&["PTTL", "rel"]).await, int(5000));
    h.advance(Duration::from_millis(5000));
    assert_eq!(c.cmd(&["GET", "rel"]).await, bulk("bar"));
    h.advance(Duration::from_millis(1));
    assert_eq!(c.cmd(&["GET", "rel"]).await, NIL);
    let wall = h.clock().wall_ms();
    assert_eq!(
        restore(&mut c, "abs", (wall + 3000).to_string(), &["ABSTTL"]).await,
        OK
    );
    assert_eq!(c.cmd(&["PTTL", "abs"]).await, int(3000));
    // An instant already past makes no key, and REPLACE still removes the old one.
    assert_eq!(
        restore(
            &mut c,
            "foo",
            (wall - 1).to_string(),
            &["ABSTTL", "REPLACE"]
        )
        .await,
        OK
    );
    assert_eq!(c.cmd(&["EXISTS", "foo"]).await, int(0));
    // The test server's max-ttl is 30 s.
    assert_eq!(
        restore(&mut c, "long", "30001".into(), &[]).await,
        err("ERR TTL of 30001 ms is above this server's max-ttl of 30000 ms (raise --max-ttl)")
    );
    assert_eq!(
        restore(&mut c, "long", (wall + 30001).to_string(), &["ABSTTL"]).await,
        err("ERR TTL of 30001 ms is above this server's max-ttl of 30000 ms (raise --max-ttl)")
    );
    assert_eq!(c.cmd(&["EXISTS", "long"]).await, int(0));
    h.shutdown().await;

    let h = start_with(|c| c.require_ttl = true).await;
    let mut c = Raw::to(&h).await;
    assert_eq!(
        restore(&mut c, "k", "0".into(), &[]).await,
        err("ERR this server runs with --require-ttl: every key needs a TTL (use PX, EX, PXAT or EXAT)")
    );
    assert_eq!(restore(&mut c, "k", "1000".into(), &[]).await, OK);
    h.shutdown().await;
}

#[tokio::test]
async fn a_restored_list_wakes_a_blocked_pop() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["RPUSH", "src", "x"]).await;
    let p = bulk_bytes(&c.cmd_bytes(&[b"DUMP", b"src"]).await);
    let mut waiter = Raw::to(&h).await;
    waiter.send_cmd(&["BLPOP", "dst", "0"]).await;
    wait_blocked(&h, 1).await;
    assert_eq!(
        c.cmd_bytes(&[b"RESTORE", b"dst", b"0", &p]).await,
        OK.as_bytes()
    );
    assert_eq!(waiter.reply().await, "*2\r\n$3\r\ndst\r\n$1\r\nx\r\n");
    h.shutdown().await;
}

/// The SORT cases compared with redis-server, on this fixture.
const SORT_FIXTURE: &[&[&str]] = &[
    &["RPUSH", "l", "3", "1", "2", "10", "1.5", "-2", "abc0"],
    &[
        "RPUSH", "ln", "3", "1", "2", "10", "1.5", "-2", "1e3", " 4", "",
    ],
    &["SADD", "s", "5", "3", "9", "1"],
    &["SADD", "sa", "b", "a", "c", "aa"],
    &[
        "ZADD", "z", "1", "a", "5", "b", "2", "c", "10", "d", "3", "e",
    ],
    &[
        "MSET", "w_3", "2", "w_1", "0", "w_2", "5", "w_10", "2", "w_1.5", "1", "w_-2", "4",
        "w_abc0", "3", "w_a", "1", "w_b", "3",
    ],
    &["HSET", "h_3", "f", "0.5", "g", "x1"],
    &["HSET", "h_1", "f", "0.25", "g", "x0"],
    &["HSET", "h_2", "f", "1e2", "g", "x2"],
    &["HSET", "h_10", "f", "-1", "g", "x3"],
    &["SET", "bad_1", "notanumber"],
    &["SET", "x:a->", "100"],
    &["RPUSH", "ml", "a"],
    &["SET", "str", "x"],
    &["HSET", "hh", "a", "b"],
];

const SORT_CASES: &[&[&str]] = &[
    &["SORT", "l"],
    &["SORT", "ln"],
    &["SORT", "l", "ALPHA"],
    &["SORT", "l", "DESC", "ALPHA"],
    &["SORT", "ln", "DESC"],
    &["SORT", "s"],
    &["SORT", "s", "DESC"],
    &["SORT", "sa"],
    &["SORT", "sa", "ALPHA", "DESC", "LIMIT", "1", "2"],
    &["SORT", "z"],
    &["SORT", "z", "ALPHA"],
    &["SORT", "z", "BY", "nosort"],
    &["SORT", "z", "BY", "nosort", "DESC"],
    &["SORT", "z", "BY", "nosort", "LIMIT", "1", "2"],
    &["SORT", "z", "BY", "nosort", "DESC", "LIMIT", "1", "2"],
    &["SORT", "z", "BY", "nosort", "LIMIT", "-5", "2"],
    &["SORT", "z", "BY", "nosort", "LIMIT", "10", "2"],
    &["SORT", "l", "BY", "w_*"],
    &["SORT", "l", "BY", "w_*", "DESC"],
    &["SORT", "l", "BY", "w_*", "ALPHA"],
    &["SORT", "l", "BY", "w_*", "LIMIT", "1", "3"],
    &["SORT", "l", "BY", "h_*->f"],
    &["SORT", "l", "BY", "h_*->g", "ALPHA"],
    &["SORT", "l", "BY", "h_*->g"],
    &[
        "SORT", "l", "ALPHA", "GET", "#", "GET", "w_*", "GET", "h_*->g", "GET", "nope_*", "GET",
        "const",
    ],
    &["SORT", "l", "BY", "nosort"],
    &["SORT", "l", "BY", "nosort", "DESC", "LIMIT", "2", "3"],
    &["SORT", "l", "BY", "nosort", "GET", "#", "GET", "w_*"],
    &["SORT", "l", "LIMIT", "0", "0"],
    &["SORT", "l", "ALPHA", "LIMIT", "-1", "-1"],
    &["SORT", "l", "ALPHA", "LIMIT", "100", "3"],
    &["SORT", "l", "ALPHA", "LIMIT", "0", "9223372036854775807"],
    &["SORT", "l", "ALPHA", "LIMIT", "x", "3"],
    &["SORT", "l", "ALPHA", "LIMIT", "1"],
    &["SORT", "l", "foo"],
    &["SORT", "l", "BY"],
    &["SORT", "s", "BY", "bad_*"],
    &["SORT", "ml", "BY", "num", "GET", "x:*->"],
    &["SORT", "nokey"],
    &["SORT", "str"],
    &["SORT", "hh"],
    &["SORT", "nokey", "STORE", "dst"],
    &["SORT", "l", "ALPHA", "STORE", "dst"],
    &["LRANGE", "dst", "0", "-1"],
    &[
        "SORT", "l", "ALPHA", "STORE", "dst", "GET", "#", "GET", "nope_*",
    ],
    &["LRANGE", "dst", "0", "-1"],
    &["SORT", "sa", "BY", "nosort", "STORE", "dst2"],
    &["LRANGE", "dst2", "0", "-1"],
    &["SORT", "nokey", "STORE", "dst"],
    &["EXISTS", "dst"],
    &["SORT_RO", "l", "ALPHA"],
    &["SORT_RO", "l", "STORE", "x"],
    &[
        "EVAL",
        "return redis.call('sort', KEYS[1], 'by', 'nosort')",
        "1",
        "sa",
    ],
    &[
        "EVAL",
        "return redis.call('sort', KEYS[1], 'by', 'nosort', 'desc')",
        "1",
        "z",
    ],
    &[
        "COMMAND", "GETKEYS", "SORT", "abc", "STORE", "invalid", "STORE", "stillbad", "STORE",
        "def",
    ],
    &[
        "COMMAND", "GETKEYS", "SORT", "abc", "LIMIT", "STORE", "x", "y",
    ],
    &["COMMAND", "GETKEYS", "SORT_RO", "abc", "STORE", "x"],
];

#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sort_answers_as_redis() {
    let redis = RedisNode::start(None);
    let ours = start().await;
    let mut r = Raw::to(&redis).await;
    let mut o = Raw::to(&ours).await;
    for cmd in SORT_FIXTURE {
        assert_eq!(o.cmd(cmd).await, r.cmd(cmd).await, "{cmd:?}");
    }
    for cmd in SORT_CASES {
        assert_eq!(o.cmd(cmd).await, r.cmd(cmd).await, "{cmd:?}");
    }
    ours.shutdown().await;
}

#[tokio::test]
async fn sort_sorts_by_patterns_and_stores() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["RPUSH", "ids", "1", "2", "3"]).await;
    c.cmd(&["MSET", "w_1", "30", "w_2", "10", "w_3", "20"])
        .await;
    c.cmd(&["HSET", "o_1", "name", "one"]).await;
    c.cmd(&["HSET", "o_3", "name", "three"]).await;
    assert_eq!(
        c.cmd(&["SORT", "ids", "BY", "w_*"]).await,
        "*3\r\n$1\r\n2\r\n$1\r\n3\r\n$1\r\n1\r\n"
    );
    assert_eq!(
        c.cmd(&[
            "SORT",
            "ids",
            "BY",
            "w_*",
            "DESC",
            "GET",
            "#",
            "GET",
            "o_*->name"
        ])
        .await,
        "*6\r\n$1\r\n1\r\n$3\r\none\r\n$1\r\n3\r\n$5\r\nthree\r\n$1\r\n2\r\n$-1\r\n"
    );
    assert_eq!(
        c.cmd(&["SORT", "ids", "BY", "w_*", "LIMIT", "1", "1"])
            .await,
        "*1\r\n$1\r\n3\r\n"
    );
    // STORE: a list in place of whatever was there, no TTL; GET misses store "".
    c.cmd(&["SET", "out", "old", "PX", "10000"]).await;
    assert_eq!(
        c.cmd(&["SORT", "ids", "GET", "o_*->name", "STORE", "out"])
            .await,
        int(3)
    );
    assert_eq!(
        c.cmd(&["LRANGE", "out", "0", "-1"]).await,
        "*3\r\n$3\r\none\r\n$0\r\n\r\n$5\r\nthree\r\n"
    );
    assert_eq!(c.cmd(&["PTTL", "out"]).await, int(-1));
    // An empty result removes the destination.
    assert_eq!(c.cmd(&["SORT", "missing", "STORE", "out"]).await, int(0));
    assert_eq!(c.cmd(&["EXISTS", "out"]).await, int(0));
    // Scores that are not numbers.
    c.cmd(&["RPUSH", "words", "a", "b"]).await;
    assert_eq!(
        c.cmd(&["SORT", "words"]).await,
        err("ERR One or more scores can't be converted into double")
    );
    assert_eq!(
        c.cmd(&["SORT_RO", "words", "STORE", "x"]).await,
        err("ERR syntax error")
    );
    // SORT ... STORE wakes a BLPOP on its destination.
    let mut waiter = Raw::to(&h).await;
    waiter.send_cmd(&["BLPOP", "dest", "0"]).await;
    wait_blocked(&h, 1).await;
    assert_eq!(c.cmd(&["SORT", "ids", "STORE", "dest"]).await, int(3));
    assert_eq!(waiter.reply().await, "*2\r\n$4\r\ndest\r\n$1\r\n1\r\n");
    h.shutdown().await;
}

#[tokio::test]
async fn sort_store_is_fenced_and_keeps_the_ttl_rules() {
    let fence = Duration::from_secs(31);
    let h = start_with(|c| c.restart_delay = Some(fence)).await;
    h.advance(fence); // past the boot's fence
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["RPUSH", "l", "2", "1"]).await, int(2));
    h.raise_fence();
    let refused = c.cmd(&["SORT", "l", "STORE", "dst"]).await;
    assert!(refused.starts_with("-TRYAGAIN restart fence"), "{refused}");
    assert_eq!(c.cmd(&["EXISTS", "dst"]).await, int(0));
    // Without STORE it only reads, fence or not.
    assert_eq!(c.cmd(&["SORT", "l"]).await, "*2\r\n$1\r\n1\r\n$1\r\n2\r\n");
    h.shutdown().await;

    // Under --require-ttl the stored list (no TTL) is refused; a list made with a
    // TTL (RESTORE) still sorts.
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["RPUSH", "l", "2", "1"]).await;
    let p = bulk_bytes(&c.cmd_bytes(&[b"DUMP", b"l"]).await);
    h.shutdown().await;
    let h = start_with(|c| c.require_ttl = true).await;
    let mut c = Raw::to(&h).await;
    assert_eq!(
        c.cmd_bytes(&[b"RESTORE", b"l", b"10000", &p]).await,
        OK.as_bytes()
    );
    assert_eq!(
        c.cmd(&["SORT", "l", "STORE", "dst"]).await,
        err("ERR this server runs with --require-ttl: every key needs a TTL (use PX, EX, PXAT or EXAT)")
    );
    assert_eq!(c.cmd(&["EXISTS", "dst"]).await, int(0));
    assert_eq!(c.cmd(&["SORT", "l"]).await, "*2\r\n$1\r\n1\r\n$1\r\n2\r\n");
    h.shutdown().await;
}

#[tokio::test]
async fn sort_by_and_get_need_access_to_every_key() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(
        c.cmd(&["ACL", "SETUSER", "u", "on", "nopass", "~l*", "+@all"])
            .await,
        OK
    );
    c.cmd(&["RPUSH", "l", "1"]).await;
    assert_eq!(c.cmd(&["AUTH", "u", "x"]).await, OK);
    assert_eq!(
        c.cmd(&["SORT", "l", "BY", "w_*"]).await,
        err("ERR BY option of SORT denied due to insufficient ACL permissions.")
    );
    assert_eq!(
        c.cmd(&["SORT", "l", "GET", "#"]).await,
        err("ERR GET option of SORT denied due to insufficient ACL permissions.")
    );
    assert_eq!(
        c.cmd(&["SORT", "l", "BY", "nosort"]).await,
        "*1\r\n$1\r\n1\r\n"
    );
    // STORE's destination is a key the user must be allowed.
    let denied = c.cmd(&["SORT", "l", "STORE", "other"]).await;
    assert!(denied.starts_with("-NOPERM"), "{denied}");
    assert_eq!(c.cmd(&["SORT", "l", "STORE", "l2"]).await, int(1));
    h.shutdown().await;
}

#[tokio::test]
async fn object_answers_as_redis_without_eviction() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["SET", "foo", "bar"]).await;
    c.cmd(&["SET", "n", "5"]).await;
    c.cmd(&["SET", "big", "10000"]).await;
    let help = c.cmd(&["OBJECT", "HELP"]).await;
    assert!(
        help.starts_with(
            "*15\r\n+OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n"
        ),
        "{help}"
    );
    assert!(
        help.ends_with("+HELP\r\n+    Prints this help.\r\n"),
        "{help}"
    );
    assert_eq!(c.cmd(&["OBJECT", "ENCODING", "foo"]).await, bulk("embstr"));
    assert_eq!(c.cmd(&["OBJECT", "REFCOUNT", "foo"]).await, int(1));
    assert_eq!(c.cmd(&["OBJECT", "REFCOUNT", "n"]).await, int(2147483647));
    assert_eq!(c.cmd(&["OBJECT", "REFCOUNT", "big"]).await, int(1));
    assert_eq!(
        c.cmd(&["OBJECT", "FREQ", "foo"]).await,
        err("ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.")
    );
    assert_eq!(c.cmd(&["OBJECT", "IDLETIME", "foo"]).await, int(0));
    for sub in ["ENCODING", "FREQ", "IDLETIME", "REFCOUNT"] {
        assert_eq!(c.cmd(&["OBJECT", sub, "nokey"]).await, NIL);
    }
    assert_eq!(
        c.cmd(&["OBJECT", "foo", "bar"]).await,
        err("ERR unknown subcommand 'foo'. Try OBJECT HELP.")
    );
    assert_eq!(
        c.cmd(&["OBJECT", "ENCODING"]).await,
        err("ERR wrong number of arguments for 'object|encoding' command")
    );
    assert_eq!(
        c.cmd(&["OBJECT", "HELP", "x"]).await,
        err("ERR wrong number of arguments for 'object|help' command")
    );
    h.shutdown().await;
}

/// OBJECT IDLETIME counts the seconds since a command last read or wrote the key, on
/// the node's clock, as Redis's LRU clock does: reads, writes and TOUCH reset it;
/// OBJECT, TTL and its family, TYPE, EXISTS, SCAN and KEYS do not (Redis's
/// LOOKUP_NOTOUCH); RESTORE ... IDLETIME sets it, as DEBUG OBJECT's lru_seconds_idle shows.
#[tokio::test]
async fn idle_time_follows_the_clock_and_only_real_accesses() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["SET", "foo", "bar"]).await;
    c.cmd(&["RPUSH", "l", "a"]).await;
    h.advance(Duration::from_millis(5_400));
    assert_eq!(c.cmd(&["OBJECT", "IDLETIME", "foo"]).await, int(5));
    for cmd in [
        &["TTL", "foo"][..],
        &["PTTL", "foo"],
        &["EXPIRETIME", "foo"],
        &["PEXPIRETIME", "foo"],
        &["TYPE", "foo"],
        &["EXISTS", "foo"],
        &["OBJECT", "ENCODING", "foo"],
        &["SCAN", "0", "TYPE", "string"],
        &["KEYS", "*"],
    ] {
        c.cmd(cmd).await;
        assert_eq!(
            c.cmd(&["OBJECT", "IDLETIME", "foo"]).await,
            int(5),
            "{cmd:?} counted as an access"
        );
    }
    let debug = c.cmd(&["DEBUG", "OBJECT", "foo"]).await;
    assert!(debug.contains(" lru_seconds_idle:5\r\n"), "{debug}");
    assert_eq!(c.cmd(&["GET", "foo"]).await, bulk("bar"));
    assert_eq!(c.cmd(&["OBJECT", "IDLETIME", "foo"]).await, int(0));
    h.advance(Duration::from_millis(3_000));
    assert_eq!(c.cmd(&["OBJECT", "IDLETIME", "foo"]).await, int(3));
    assert_eq!(c.cmd(&["TOUCH", "foo"]).await, int(1));
    assert_eq!(c.cmd(&["OBJECT", "IDLETIME", "foo"]).await, int(0));
    // A write resets it too; the list untouched since the start is 8 s idle.
    assert_eq!(c.cmd(&["OBJECT", "IDLETIME", "l"]).await, int(8));
    c.cmd(&["LPUSH", "l", "b"]).await;
    assert_eq!(c.cmd(&["OBJECT", "IDLETIME", "l"]).await, int(0));
    // RESTORE ... IDLETIME, then the clock goes on from there.
    let payload = bulk_bytes(&c.cmd_bytes(&[b"DUMP", b"foo"]).await);
    let restored = c
        .cmd_bytes(&[b"RESTORE", b"copy", b"0", &payload, b"IDLETIME", b"1000"])
        .await;
    assert_eq!(restored, b"+OK\r\n");
    assert_eq!(c.cmd(&["OBJECT", "IDLETIME", "copy"]).await, int(1000));
    h.advance(Duration::from_millis(2_000));
    assert_eq!(c.cmd(&["OBJECT", "IDLETIME", "copy"]).await, int(1002));
    assert_eq!(c.cmd(&["GET", "copy"]).await, bulk("bar"));
    assert_eq!(c.cmd(&["OBJECT", "IDLETIME", "copy"]).await, int(0));
    h.shutdown().await;
}
