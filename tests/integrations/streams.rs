//! Streams: XADD's IDs on the server clock (manual here: 2025-01-01T00:00:00Z =
//! 1735689600000 ms), ranges, trimming, consumer groups with their pending lists and
//! idle times, XREAD / XREADGROUP BLOCK woken like BLPOP and timed on the server clock,
//! XINFO, a clean restart keeping streams, and Redis 7.0.15's exact errors for bad
//! input (every text compared with redis-server 7.0.15).

use crate::support;

use std::time::Duration;
use support::*;

const T0: u64 = 1_735_689_600_000;

fn a(items: &[String]) -> String {
    format!("*{}\r\n{}", items.len(), items.concat())
}

fn m(pairs: &[(&str, String)]) -> String {
    let body: String = pairs
        .iter()
        .map(|(k, v)| format!("{}{v}", bulk(k)))
        .collect();
    format!("%{}\r\n{body}", pairs.len())
}

/// `[id, [field, value...]]`
fn entry(id: &str, fv: &[&str]) -> String {
    a(&[bulk(id), a(&fv.iter().map(|s| bulk(s)).collect::<Vec<_>>())])
}

const NIL_ARRAY: &str = "*-1\r\n";
const INVALID_ID: &str = "ERR Invalid stream ID specified as stream command argument";
const TOP: &str =
    "ERR The ID specified in XADD is equal or smaller than the target stream top item";

#[tokio::test]
async fn xadd_ids_come_from_the_server_clock() {
    let h = start().await;
    let mut r = Raw::to(&h).await;
    r.check(&["XADD", "s", "*", "f", "v"], &bulk(&format!("{T0}-0")))
        .await;
    r.check(&["XADD", "s", "*", "f", "v"], &bulk(&format!("{T0}-1")))
        .await;
    h.advance(Duration::from_millis(5));
    r.check(
        &["XADD", "s", "*", "f", "v"],
        &bulk(&format!("{}-0", T0 + 5)),
    )
    .await;
    let partial = format!("{}-*", T0 + 5);
    r.check(
        &["XADD", "s", &partial, "f", "v"],
        &bulk(&format!("{}-1", T0 + 5)),
    )
    .await;
    r.check(
        &["XADD", "s", "99999999999999-*", "f", "v"],
        &bulk("99999999999999-0"),
    )
    .await;
    // The clock behind the top: the sequence goes on.
    r.check(&["XADD", "s", "*", "f", "v"], &bulk("99999999999999-1"))
        .await;
    r.check(&["XLEN", "s"], &int(6)).await;
}

#[tokio::test]
async fn xadd_refuses_bad_ids_and_arguments_as_redis() {
    let h = start().await;
    let mut r = Raw::to(&h).await;
    r.check(&["XADD", "s", "5-5", "f", "v"], &bulk("5-5")).await;
    r.check(&["XADD", "s", "5-5", "f", "v"], &err(TOP)).await;
    r.check(&["XADD", "s", "4-9", "f", "v"], &err(TOP)).await;
    r.check(&["XADD", "s", "5", "f", "v"], &err(TOP)).await;
    r.check(
        &["XADD", "s", "0-0", "f", "v"],
        &err("ERR The ID specified in XADD must be greater than 0-0"),
    )
    .await;
    for bad in [
        "abc",
        "1-2-3",
        "-",
        "+",
        "1-x",
        "18446744073709551616",
        "-1",
    ] {
        r.check(&["XADD", "s", bad, "f", "v"], &err(INVALID_ID))
            .await;
    }
    r.check(
        &["XADD", "s", "6-0", "f"],
        &err("ERR wrong number of arguments for 'xadd' command"),
    )
    .await;
    r.check(
        &["XADD", "s", "MAXLEN", "-1", "*", "f", "v"],
        &err("ERR The MAXLEN argument must be >= 0."),
    )
    .await;
    r.check(
        &["XADD", "s", "MAXLEN", "1", "MINID", "1", "*", "f", "v"],
        &err("ERR syntax error, MAXLEN and MINID options at the same time are not compatible"),
    )
    .await;
    r.check(
        &["XADD", "s", "MAXLEN", "1", "LIMIT", "1", "*", "f", "v"],
        &err("ERR syntax error, LIMIT cannot be used without the special ~ option"),
    )
    .await;
    r.check(
        &["XADD", "s", "LIMIT", "1", "*", "f", "v"],
        &err("ERR syntax error, LIMIT cannot be used without specifying a trimming strategy"),
    )
    .await;
    r.check(&["XADD", "nokey", "NOMKSTREAM", "*", "f", "v"], "$-1\r\n")
        .await;
    r.check(&["EXISTS", "nokey"], &int(0)).await;
    r.check(&["SET", "str", "x"], "+OK\r\n").await;
    r.check(
        &["XADD", "str", "*", "f", "v"],
        &err("WRONGTYPE Operation against a key holding the wrong kind of value"),
    )
    .await;
    r.check(
        &[
            "XADD",
            "max",
            "18446744073709551615-18446744073709551615",
            "f",
            "v",
        ],
        &bulk("18446744073709551615-18446744073709551615"),
    )
    .await;
    r.check(
        &["XADD", "max", "*", "f", "v"],
        &err("ERR The stream has exhausted the last possible ID, unable to add more items"),
    )
    .await;
    r.check(&["TYPE", "s"], "+stream\r\n").await;
}

#[tokio::test]
async fn ranges_counts_and_exclusive_bounds() {
    let h = start().await;
    let mut r = Raw::to(&h).await;
    for (id, v) in [("1-0", "a"), ("1-1", "b"), ("2-0", "c"), ("3-0", "d")] {
        r.check(&["XADD", "s", id, "f", v], &bulk(id)).await;
    }
    r.check(&["XADD", "s", "4-0", "g", "e", "h", "x"], &bulk("4-0"))
        .await;
    r.check(
        &["XRANGE", "s", "-", "+", "COUNT", "2"],
        &a(&[entry("1-0", &["f", "a"]), entry("1-1", &["f", "b"])]),
    )
    .await;
    r.check(
        &["XRANGE", "s", "(1-0", "2"],
        &a(&[entry("1-1", &["f", "b"]), entry("2-0", &["f", "c"])]),
    )
    .await;
    r.check(
        &["XRANGE", "s", "1", "1"],
        &a(&[entry("1-0", &["f", "a"]), entry("1-1", &["f", "b"])]),
    )
    .await;
    r.check(
        &["XREVRANGE", "s", "+", "(3-0"],
        &a(&[entry("4-0", &["g", "e", "h", "x"])]),
    )
    .await;
    r.check(
        &["XREVRANGE", "s", "3", "2", "COUNT", "9223372036854775807"],
        &a(&[entry("3-0", &["f", "d"]), entry("2-0", &["f", "c"])]),
    )
    .await;
    r.check(&["XRANGE", "s", "-", "+", "COUNT", "0"], NIL_ARRAY)
        .await;
    r.check(&["XRANGE", "s", "-", "+", "COUNT", "-5"], NIL_ARRAY)
        .await;
    r.check(&["XRANGE", "nokey", "-", "+", "COUNT", "0"], "*0\r\n")
        .await;
    r.check(
        &["XRANGE", "s", "-", "+", "COUNT", "99999999999999999999"],
        &err("ERR value is not an integer or out of range"),
    )
    .await;
    r.check(
        &["XRANGE", "s", "-", "+", "LIMIT", "1"],
        &err("ERR syntax error"),
    )
    .await;
    r.check(&["XRANGE", "s", "(-", "+"], &err(INVALID_ID)).await;
    r.check(&["XRANGE", "s", "x", "+"], &err(INVALID_ID)).await;
    r.check(
        &[
            "XRANGE",
            "s",
            "(18446744073709551615-18446744073709551615",
            "+",
        ],
        &err("ERR invalid start ID for the interval"),
    )
    .await;
    r.check(
        &["XRANGE", "s", "-", "(0-0"],
        &err("ERR invalid end ID for the interval"),
    )
    .await;
    r.check(&["XDEL", "s", "1-1", "9-9", "2-0"], &int(2)).await;
    r.check(&["XDEL", "s", "bad"], &err(INVALID_ID)).await;
    r.check(
        &["XRANGE", "s", "-", "3"],
        &a(&[entry("1-0", &["f", "a"]), entry("3-0", &["f", "d"])]),
    )
    .await;
    r.check(&["XTRIM", "s", "MAXLEN", "1"], &int(2)).await;
    r.check(
        &["XTRIM", "s", "LIMIT", "1"],
        &err("ERR syntax error, LIMIT cannot be used without specifying a trimming strategy"),
    )
    .await;
    r.check(&["XTRIM", "s", "NOMKSTREAM", "1"], &err("ERR syntax error"))
        .await;
    r.check(
        &["XTRIM", "s", "MAXLEN", "1", "extra"],
        &err("ERR syntax error"),
    )
    .await;
    r.check(&["XTRIM", "nokey", "MAXLEN", "0"], &int(0)).await;
    r.check(
        &["XRANGE", "s", "-", "+"],
        &a(&[entry("4-0", &["g", "e", "h", "x"])]),
    )
    .await;
    r.check(&["XTRIM", "s", "MAXLEN", "0"], &int(1)).await;
    // A stream emptied by trimming is kept (XADD can still see its last ID).
    r.check(&["XLEN", "s"], &int(0)).await;
    r.check(&["XADD", "s", "4-0", "f", "v"], &err(TOP)).await;
}

#[tokio::test]
async fn approximate_trimming_removes_whole_nodes_only() {
    let h = start().await;
    let mut r = Raw::to(&h).await;
    r.check(
        &["CONFIG", "SET", "stream-node-max-entries", "10"],
        "+OK\r\n",
    )
    .await;
    for i in 1..=95 {
        let id = format!("{i}-0");
        r.check(&["XADD", "s", &id, "f", "v"], &bulk(&id)).await;
    }
    r.check(&["XTRIM", "s", "MAXLEN", "~", "42"], &int(50))
        .await;
    r.check(&["XTRIM", "s", "MINID", "~", "58"], &int(0)).await;
    r.check(&["XTRIM", "s", "MINID", "58"], &int(7)).await;
    r.check(
        &[
            "XADD", "s", "MAXLEN", "~", "0", "LIMIT", "10", "96-0", "f", "v",
        ],
        &bulk("96-0"),
    )
    .await;
    r.check(&["XLEN", "s"], &int(36)).await;
}

#[tokio::test]
async fn consumer_groups_track_deliveries_on_the_server_clock() {
    let h = start().await;
    let mut r = Raw::to(&h).await;
    for id in ["1-0", "2-0", "3-0"] {
        r.check(&["XADD", "s", id, "f", id], &bulk(id)).await;
    }
    r.check(&["XGROUP", "CREATE", "s", "g", "0"], "+OK\r\n")
        .await;
    r.check(
        &["XGROUP", "CREATE", "s", "g", "0"],
        &err("BUSYGROUP Consumer Group name already exists"),
    )
    .await;
    r.check(&["XGROUP", "CREATE", "nokey", "g", "$"], &err("ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.")).await;
    r.check(
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "alice",
            "COUNT",
            "2",
            "STREAMS",
            "s",
            ">",
        ],
        &a(&[a(&[
            bulk("s"),
            a(&[entry("1-0", &["f", "1-0"]), entry("2-0", &["f", "2-0"])]),
        ])]),
    )
    .await;
    h.advance(Duration::from_millis(250));
    r.check(
        &["XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", ">"],
        &a(&[a(&[bulk("s"), a(&[entry("3-0", &["f", "3-0"])])])]),
    )
    .await;
    r.check(
        &["XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", ">"],
        NIL_ARRAY,
    )
    .await;
    h.advance(Duration::from_millis(100));
    r.check(
        &["XPENDING", "s", "g"],
        &a(&[
            int(3),
            bulk("1-0"),
            bulk("3-0"),
            a(&[a(&[bulk("alice"), bulk("2")]), a(&[bulk("bob"), bulk("1")])]),
        ]),
    )
    .await;
    r.check(
        &["XPENDING", "s", "g", "IDLE", "300", "-", "+", "10"],
        &a(&[
            a(&[bulk("1-0"), bulk("alice"), int(350), int(1)]),
            a(&[bulk("2-0"), bulk("alice"), int(350), int(1)]),
        ]),
    )
    .await;
    r.check(
        &["XPENDING", "s", "g", "-", "+", "10", "bob"],
        &a(&[a(&[bulk("3-0"), bulk("bob"), int(100), int(1)])]),
    )
    .await;
    r.check(&["XPENDING", "s", "g", "-", "+", "10", "nobody"], "*0\r\n")
        .await;
    // History: the consumer's own pending entries, delivered again.
    r.check(
        &["XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0"],
        &a(&[a(&[
            bulk("s"),
            a(&[entry("1-0", &["f", "1-0"]), entry("2-0", &["f", "2-0"])]),
        ])]),
    )
    .await;
    r.check(&["XACK", "s", "g", "1-0", "1-0", "9-0"], &int(1))
        .await;
    r.check(&["XACK", "s", "g", "bad"], &err(INVALID_ID)).await;
    r.check(&["XACK", "s", "nogroup", "bad"], &int(0)).await;
    h.advance(Duration::from_millis(1000));
    // XCLAIM: min idle met; RETRYCOUNT; JUSTID leaves the count.
    r.check(
        &["XCLAIM", "s", "g", "carol", "1000", "2-0", "3-0", "JUSTID"],
        &a(&[bulk("2-0"), bulk("3-0")]),
    )
    .await;
    r.check(&["XCLAIM", "s", "g", "carol", "1000", "2-0"], "*0\r\n")
        .await;
    r.check(
        &[
            "XCLAIM",
            "s",
            "g",
            "dave",
            "0",
            "2-0",
            "RETRYCOUNT",
            "7",
            "IDLE",
            "40",
        ],
        &a(&[entry("2-0", &["f", "2-0"])]),
    )
    .await;
    r.check(
        &["XPENDING", "s", "g", "-", "+", "10"],
        &a(&[
            a(&[bulk("2-0"), bulk("dave"), int(40), int(7)]),
            a(&[bulk("3-0"), bulk("carol"), int(0), int(1)]),
        ]),
    )
    .await;
    r.check(
        &["XCLAIM", "s", "g", "dave", "0", "2-0", "BOGUS"],
        &err("ERR Unrecognized XCLAIM option 'BOGUS'"),
    )
    .await;
    r.check(
        &["XCLAIM", "s", "g", "dave", "x", "2-0"],
        &err("ERR Invalid min-idle-time argument for XCLAIM"),
    )
    .await;
    r.check(
        &["XCLAIM", "s", "nogroup", "dave", "0", "2-0"],
        &err("NOGROUP No such key 's' or consumer group 'nogroup'"),
    )
    .await;
    // XAUTOCLAIM: a cursor, the claimed entries, the deleted IDs it dropped.
    r.check(&["XDEL", "s", "3-0"], &int(1)).await;
    r.check(
        &["XAUTOCLAIM", "s", "g", "erin", "0", "0", "COUNT", "1"],
        &a(&[
            bulk("3-0"),
            a(&[entry("2-0", &["f", "2-0"])]),
            "*0\r\n".into(),
        ]),
    )
    .await;
    r.check(
        &["XAUTOCLAIM", "s", "g", "erin", "0", "3-0"],
        &a(&[bulk("0-0"), "*0\r\n".into(), a(&[bulk("3-0")])]),
    )
    .await;
    r.check(
        &["XAUTOCLAIM", "s", "g", "erin", "0", "0", "COUNT", "0"],
        &err("ERR COUNT must be > 0"),
    )
    .await;
    r.check(
        &[
            "XAUTOCLAIM",
            "s",
            "g",
            "erin",
            "0",
            "0",
            "COUNT",
            "8070450532247928833",
        ],
        &err("ERR COUNT must be > 0"),
    )
    .await;
    r.check(&["XGROUP", "DELCONSUMER", "s", "g", "erin"], &int(1))
        .await;
    r.check(&["XGROUP", "CREATECONSUMER", "s", "g", "zed"], &int(1))
        .await;
    r.check(&["XGROUP", "CREATECONSUMER", "s", "g", "zed"], &int(0))
        .await;
    r.check(
        &["XGROUP", "SETID", "s", "nogroup", "0"],
        &err("NOGROUP No such consumer group 'nogroup' for key name 's'"),
    )
    .await;
    r.check(&["XGROUP", "DESTROY", "s", "g"], &int(1)).await;
    r.check(&["XGROUP", "DESTROY", "s", "g"], &int(0)).await;
    r.check(
        &["XREADGROUP", "GROUP", "g", "a", "STREAMS", "s", ">"],
        &err("NOGROUP No such key 's' or consumer group 'g' in XREADGROUP with GROUP option"),
    )
    .await;
    r.check(
        &["XREADGROUP", "GROUP", "g", "a", "STREAMS", "nokey", ">"],
        &err("NOGROUP No such key 'nokey' or consumer group 'g' in XREADGROUP with GROUP option"),
    )
    .await;
    r.check(
        &["XGROUP", "FOO", "s"],
        &err("ERR unknown subcommand 'FOO'. Try XGROUP HELP."),
    )
    .await;
    r.check(
        &["XGROUP", "CREATE", "s"],
        &err("ERR wrong number of arguments for 'xgroup|create' command"),
    )
    .await;
}

#[tokio::test]
async fn xinfo_reports_groups_consumers_and_lag() {
    let h = start().await;
    let mut r = Raw::to(&h).await;
    r.hello3().await;
    for id in ["1-0", "2-0", "3-0"] {
        r.check(&["XADD", "s", id, "f", "v"], &bulk(id)).await;
    }
    r.check(&["XGROUP", "CREATE", "s", "g", "0"], "+OK\r\n")
        .await;
    r.check(
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "COUNT",
            "1",
            "STREAMS",
            "s",
            ">",
        ],
        &format!("%1\r\n{}{}", bulk("s"), a(&[entry("1-0", &["f", "v"])])),
    )
    .await;
    h.advance(Duration::from_millis(70));
    r.check(
        &["XINFO", "GROUPS", "s"],
        &a(&[m(&[
            ("name", bulk("g")),
            ("consumers", int(1)),
            ("pending", int(1)),
            ("last-delivered-id", bulk("1-0")),
            ("entries-read", int(1)),
            ("lag", int(2)),
        ])]),
    )
    .await;
    r.check(
        &["XINFO", "CONSUMERS", "s", "g"],
        &a(&[m(&[
            ("name", bulk("c")),
            ("pending", int(1)),
            ("idle", int(70)),
        ])]),
    )
    .await;
    r.check(
        &["XINFO", "STREAM", "s"],
        &m(&[
            ("length", int(3)),
            ("radix-tree-keys", int(1)),
            ("radix-tree-nodes", int(1)),
            ("last-generated-id", bulk("3-0")),
            ("max-deleted-entry-id", bulk("0-0")),
            ("entries-added", int(3)),
            ("recorded-first-entry-id", bulk("1-0")),
            ("groups", int(1)),
            ("first-entry", entry("1-0", &["f", "v"])),
            ("last-entry", entry("3-0", &["f", "v"])),
        ]),
    )
    .await;
    // An XDEL ahead of the group makes its lag unknown (null), as in Redis.
    r.check(&["XDEL", "s", "2-0"], &int(1)).await;
    r.check(
        &["XINFO", "GROUPS", "s"],
        &a(&[m(&[
            ("name", bulk("g")),
            ("consumers", int(1)),
            ("pending", int(1)),
            ("last-delivered-id", bulk("1-0")),
            ("entries-read", int(1)),
            ("lag", "_\r\n".into()),
        ])]),
    )
    .await;
    r.check(&["XINFO", "STREAM", "nokey"], &err("ERR no such key"))
        .await;
    r.check(
        &["XINFO", "STREAM", "s", "FULL", "COUNT"],
        &err("ERR unknown subcommand or wrong number of arguments for 'STREAM'. Try XINFO HELP."),
    )
    .await;
    r.check(
        &["XINFO", "CONSUMERS", "s", "nogroup"],
        &err("NOGROUP No such consumer group 'nogroup' for key name 's'"),
    )
    .await;
}

#[tokio::test]
async fn xread_block_is_woken_by_xadd_and_times_out_on_the_server_clock() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.check(&["XADD", "s", "1-0", "old", "x"], &bulk("1-0"))
        .await;
    let mut w = Raw::to(&h).await;
    w.send_cmd(&["XREAD", "BLOCK", "0", "STREAMS", "other", "s", "$", "$"])
        .await;
    wait_blocked(&h, 1).await;
    c.check(&["XADD", "s", "2-0", "new", "y"], &bulk("2-0"))
        .await;
    w.expect(&a(&[a(&[bulk("s"), a(&[entry("2-0", &["new", "y"])])])]))
        .await;
    // A timeout follows the manual clock.
    w.send_cmd(&["XREAD", "BLOCK", "1500", "STREAMS", "s", "$"])
        .await;
    wait_blocked(&h, 1).await;
    h.advance(Duration::from_millis(1499));
    w.expect_silence(20).await;
    h.advance(Duration::from_millis(2));
    w.expect(NIL_ARRAY).await;
    // An XDEL or a DEL does not wake a plain reader; the next XADD does.
    w.send_cmd(&["XREAD", "COUNT", "1", "BLOCK", "0", "STREAMS", "s", "2-0"])
        .await;
    wait_blocked(&h, 1).await;
    c.check(&["XDEL", "s", "1-0"], &int(1)).await;
    c.check(&["DEL", "s"], &int(1)).await;
    w.expect_silence(20).await;
    c.check(&["XADD", "s", "3-0", "a", "1"], &bulk("3-0")).await;
    w.expect(&a(&[a(&[bulk("s"), a(&[entry("3-0", &["a", "1"])])])]))
        .await;
    c.check(
        &["XREAD", "BLOCK", "-1", "STREAMS", "s", "$"],
        &err("ERR timeout is negative"),
    )
    .await;
    c.check(
        &["XREAD", "BLOCK", "x", "STREAMS", "s", "$"],
        &err("ERR timeout is not an integer or out of range"),
    )
    .await;
    c.check(&["XREAD", "STREAMS", "s", "t", "u"], &err("ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.")).await;
    c.check(&["XREAD", "STREAMS", "s", ">"], &err("ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.")).await;
}

#[tokio::test]
async fn blocked_group_readers_get_entries_or_redis_errors() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.check(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"], "+OK\r\n")
        .await;
    let mut w = Raw::to(&h).await;
    w.hello3().await;
    w.send_cmd(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "c",
        "BLOCK",
        "0",
        "STREAMS",
        "s",
        ">",
    ])
    .await;
    wait_blocked(&h, 1).await;
    c.check(&["XADD", "s", "5-0", "f", "v"], &bulk("5-0")).await;
    w.expect(&format!(
        "%1\r\n{}{}",
        bulk("s"),
        a(&[entry("5-0", &["f", "v"])])
    ))
    .await;
    c.check(
        &["XPENDING", "s", "g"],
        &a(&[
            int(1),
            bulk("5-0"),
            bulk("5-0"),
            a(&[a(&[bulk("c"), bulk("1")])]),
        ]),
    )
    .await;
    w.send_cmd(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "c",
        "BLOCK",
        "0",
        "STREAMS",
        "s",
        ">",
    ])
    .await;
    wait_blocked(&h, 1).await;
    c.check(&["XGROUP", "DESTROY", "s", "g"], &int(1)).await;
    w.expect(&err(
        "NOGROUP the consumer group this client was blocked on no longer exists",
    ))
    .await;
    c.check(&["XGROUP", "CREATE", "s", "g", "$"], "+OK\r\n")
        .await;
    w.send_cmd(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "c",
        "BLOCK",
        "0",
        "STREAMS",
        "s",
        ">",
    ])
    .await;
    wait_blocked(&h, 1).await;
    c.check(&["DEL", "s"], &int(1)).await;
    w.expect(&err("UNBLOCKED the stream key no longer exists"))
        .await;
    // In a transaction and a script there is no blocking.
    c.check(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"], "+OK\r\n")
        .await;
    c.check(&["MULTI"], "+OK\r\n").await;
    c.check(
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "BLOCK",
            "0",
            "STREAMS",
            "s",
            ">",
        ],
        "+QUEUED\r\n",
    )
    .await;
    c.check(&["EXEC"], &a(&[NIL_ARRAY.into()])).await;
    c.check(
        &[
            "EVAL",
            "return redis.pcall('XREAD', 'BLOCK', '0', 'STREAMS', KEYS[1], '$')",
            "1",
            "s",
        ],
        &err("ERR xread command is not allowed with BLOCK option from scripts"),
    )
    .await;
    c.check(&["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "$"], &err("ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.")).await;
    c.check(
        &["XREADGROUP", "COUNT", "1", "NOACK", "STREAMS", "s", ">"],
        &err("ERR Missing GROUP option for XREADGROUP"),
    )
    .await;
}

#[tokio::test]
async fn a_clean_restart_keeps_streams_and_their_groups() {
    let h = start().await;
    let mut r = Raw::to(&h).await;
    r.check(&["XADD", "s", "1-0", "f", "v", "g", "w"], &bulk("1-0"))
        .await;
    r.check(&["XADD", "s", "2-0", "f", "x"], &bulk("2-0")).await;
    r.check(&["XADD", "s", "3-0", "f", "y"], &bulk("3-0")).await;
    r.check(&["XDEL", "s", "3-0"], &int(1)).await;
    r.check(&["XGROUP", "CREATE", "s", "g", "0"], "+OK\r\n")
        .await;
    r.check(
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "COUNT",
            "1",
            "STREAMS",
            "s",
            ">",
        ],
        &a(&[a(&[bulk("s"), a(&[entry("1-0", &["f", "v", "g", "w"])])])]),
    )
    .await;
    r.check(&["PEXPIRE", "s", "10000"], &int(1)).await;
    let info = r.cmd(&["XINFO", "STREAM", "s", "FULL"]).await;
    drop(r);
    assert!(h.restart_clean(), "the clean restart used its snapshot");
    let mut r = Raw::to(&h).await;
    r.check(
        &["XRANGE", "s", "-", "+"],
        &a(&[
            entry("1-0", &["f", "v", "g", "w"]),
            entry("2-0", &["f", "x"]),
        ]),
    )
    .await;
    assert_eq!(r.cmd(&["XINFO", "STREAM", "s", "FULL"]).await, info);
    r.check(&["XADD", "s", "3-0", "f", "v"], &err(TOP)).await;
    r.check(&["PTTL", "s"], &int(10000)).await;
}
