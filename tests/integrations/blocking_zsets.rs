//! BZPOPMIN / BZPOPMAX / BZMPOP: the same blocking machinery as BLPOP (FIFO among
//! waiters, woken after the writing command or script ends, timeouts on the server
//! clock).

use crate::support;

use std::time::Duration;
use support::*;

#[tokio::test]
async fn bzpopmin_pops_at_once_when_a_member_exists() {
    let h = start().await;
    let mut r = Raw::to(&h).await;
    r.check(&["ZADD", "z", "2", "b", "1", "a"], ":2\r\n").await;
    r.check(
        &["BZPOPMIN", "nokey", "z", "0"],
        "*3\r\n$1\r\nz\r\n$1\r\na\r\n$1\r\n1\r\n",
    )
    .await;
    r.check(
        &["BZPOPMAX", "z", "0"],
        "*3\r\n$1\r\nz\r\n$1\r\nb\r\n$1\r\n2\r\n",
    )
    .await;
    r.check(&["SET", "s", "v"], "+OK\r\n").await;
    r.check(
        &["BZPOPMIN", "s", "0"],
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    )
    .await;
    r.check(&["BZPOPMIN", "z", "-1"], "-ERR timeout is negative\r\n")
        .await;
}

#[tokio::test]
async fn bzpopmin_waiters_are_served_first_come_first_served() {
    let h = start().await;
    let mut first = Raw::to(&h).await;
    first.send_cmd(&["BZPOPMIN", "z", "0"]).await;
    wait_blocked(&h, 1).await;
    let mut second = Raw::to(&h).await;
    second.send_cmd(&["BZPOPMAX", "z", "0"]).await;
    wait_blocked(&h, 2).await;
    let mut c = Raw::to(&h).await;
    c.check(&["ZADD", "z", "1", "a", "2", "b", "3", "c"], ":3\r\n")
        .await;
    first
        .expect("*3\r\n$1\r\nz\r\n$1\r\na\r\n$1\r\n1\r\n")
        .await;
    second
        .expect("*3\r\n$1\r\nz\r\n$1\r\nc\r\n$1\r\n3\r\n")
        .await;
    c.check(&["ZRANGE", "z", "0", "-1"], "*1\r\n$1\r\nb\r\n")
        .await;
}

#[tokio::test]
async fn a_zadd_inside_a_script_wakes_the_waiter_after_the_script() {
    let h = start().await;
    let mut w = Raw::to(&h).await;
    w.hello3().await;
    w.send_cmd(&["BZPOPMIN", "z", "0"]).await;
    wait_blocked(&h, 1).await;
    let mut c = Raw::to(&h).await;
    c.check(
        &[
            "EVAL",
            "redis.call('zadd', KEYS[1], 5, 'm'); return redis.call('zcard', KEYS[1])",
            "1",
            "z",
        ],
        ":1\r\n",
    )
    .await;
    // RESP3: the score is a double.
    w.expect("*3\r\n$1\r\nz\r\n$1\r\nm\r\n,5\r\n").await;
}

#[tokio::test]
async fn a_list_push_does_not_wake_a_sorted_set_waiter() {
    let h = start().await;
    let mut zw = Raw::to(&h).await;
    zw.send_cmd(&["BZPOPMIN", "k", "0"]).await;
    wait_blocked(&h, 1).await;
    let mut lw = Raw::to(&h).await;
    lw.send_cmd(&["BLPOP", "k", "0"]).await;
    wait_blocked(&h, 2).await;
    let mut c = Raw::to(&h).await;
    c.check(&["RPUSH", "k", "x"], ":1\r\n").await;
    // The list waiter, though second, is the one a list can serve.
    lw.expect("*2\r\n$1\r\nk\r\n$1\r\nx\r\n").await;
    zw.expect_silence(20).await;
    c.check(&["ZADD", "k", "1", "m"], ":1\r\n").await;
    zw.expect("*3\r\n$1\r\nk\r\n$1\r\nm\r\n$1\r\n1\r\n").await;
}

#[tokio::test]
async fn bzpopmax_times_out_on_the_server_clock() {
    let h = start().await;
    let mut r = Raw::to(&h).await;
    r.send_cmd(&["BZPOPMAX", "z", "1.5"]).await;
    wait_blocked(&h, 1).await;
    h.clock().advance(Duration::from_millis(1499));
    r.expect_silence(20).await;
    h.clock().advance(Duration::from_millis(1));
    r.expect("*-1\r\n").await;
    assert_eq!(h.blocked_clients(), 0);
}

/// A transaction wakes sorted-set and list waiters once EXEC has run all of it (never
/// in the middle: ZCARD inside it still sees every member), first come first served.
#[tokio::test]
async fn a_transaction_wakes_blocked_pops_after_exec_in_fifo_order() {
    let h = start().await;
    let mut first = Raw::to(&h).await;
    first.send_cmd(&["BZPOPMIN", "z", "0"]).await;
    wait_blocked(&h, 1).await;
    let mut second = Raw::to(&h).await;
    second.send_cmd(&["BZPOPMAX", "z", "0"]).await;
    wait_blocked(&h, 2).await;
    let mut mover = Raw::to(&h).await;
    mover
        .send_cmd(&["BLMOVE", "l", "d", "LEFT", "RIGHT", "0"])
        .await;
    wait_blocked(&h, 3).await;
    let mut c = Raw::to(&h).await;
    c.check(&["MULTI"], "+OK\r\n").await;
    c.check(&["ZADD", "z", "1", "a", "2", "b", "3", "c"], "+QUEUED\r\n")
        .await;
    c.check(&["LPUSH", "l", "x"], "+QUEUED\r\n").await;
    c.check(&["ZCARD", "z"], "+QUEUED\r\n").await;
    c.check(&["EXEC"], "*3\r\n:3\r\n:1\r\n:3\r\n").await;
    first
        .expect("*3\r\n$1\r\nz\r\n$1\r\na\r\n$1\r\n1\r\n")
        .await;
    second
        .expect("*3\r\n$1\r\nz\r\n$1\r\nc\r\n$1\r\n3\r\n")
        .await;
    mover.expect("$1\r\nx\r\n").await;
    c.check(&["ZRANGE", "z", "0", "-1"], "*1\r\n$1\r\nb\r\n")
        .await;
    c.check(&["LRANGE", "d", "0", "-1"], "*1\r\n$1\r\nx\r\n")
        .await;
}

/// A STORE that creates its destination wakes a waiter on it (Redis's dbAdd signals
/// the new key), as ZADD does; replies as redis-server 7.0.15 gave them.
#[tokio::test]
async fn a_zunionstore_destination_wakes_its_waiter() {
    let h = start().await;
    let mut w = Raw::to(&h).await;
    w.send_cmd(&["BZPOPMIN", "d", "0"]).await;
    wait_blocked(&h, 1).await;
    let mut c = Raw::to(&h).await;
    c.check(&["ZADD", "z", "1", "a", "2", "b"], ":2\r\n").await;
    c.check(&["SADD", "s", "a"], ":1\r\n").await;
    c.check(
        &["ZUNIONSTORE", "d", "2", "z", "s", "WEIGHTS", "3", "1"],
        ":2\r\n",
    )
    .await;
    w.expect("*3\r\n$1\r\nd\r\n$1\r\na\r\n$1\r\n4\r\n").await;
    c.check(
        &["ZRANGE", "d", "0", "-1", "WITHSCORES"],
        "*2\r\n$1\r\nb\r\n$1\r\n6\r\n",
    )
    .await;
}

/// BZMPOP's forms that answer at once, recorded from redis-server 7.0.15: the timeout
/// is read after numkeys, MIN|MAX and COUNT; pairs are nested in every protocol;
/// inside Lua (Redis 7.0 lets scripts call it, unlike BZPOPMIN) and MULTI it never
/// blocks and answers a null array.
#[rustfmt::skip]
const BZMPOP: &[(&[&str], &str)] = &[
        (&["flushall"], "+OK\r\n"),
        (&["set", "str", "v"], "+OK\r\n"),
        (&["rpush", "lst", "v"], ":1\r\n"),
        (&["zadd", "z1", "1", "a", "2", "b", "3", "c", "1.5", "d", "0.1", "e"], ":5\r\n"),
        (&["bzmpop", "0", "1", "z1", "min"], "*2\r\n$2\r\nz1\r\n*1\r\n*2\r\n$1\r\ne\r\n$19\r\n0.10000000000000001\r\n"),
        (&["bzmpop", "0.5", "2", "nokey", "z1", "max", "count", "2"], "*2\r\n$2\r\nz1\r\n*2\r\n*2\r\n$1\r\nc\r\n$1\r\n3\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n"),
        (&["bzmpop", "0", "3", "nokey", "str", "z1", "min"], "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        (&["bzmpop", "0", "3", "nokey", "z1", "str", "min", "count", "10"], "*2\r\n$2\r\nz1\r\n*2\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n*2\r\n$1\r\nd\r\n$3\r\n1.5\r\n"),
        (&["exists", "z1"], ":0\r\n"),
        (&["bzmpop", "0", "1", "lst"], "-ERR wrong number of arguments for 'bzmpop' command\r\n"),
        (&["bzmpop", "x", "1", "lst", "min"], "-ERR timeout is not a float or out of range\r\n"),
        (&["bzmpop", "-1", "1", "lst", "min"], "-ERR timeout is negative\r\n"),
        (&["bzmpop", "x", "0", "lst", "min"], "-ERR numkeys should be greater than 0\r\n"),
        (&["bzmpop", "x", "2", "lst", "min"], "-ERR syntax error\r\n"),
        (&["bzmpop", "x", "1", "lst", "left"], "-ERR syntax error\r\n"),
        (&["bzmpop", "x", "1", "lst", "min", "count", "0"], "-ERR count should be greater than 0\r\n"),
        (&["bzmpop", "x", "1", "str", "min"], "-ERR timeout is not a float or out of range\r\n"),
        (&["bzmpop", "0", "1", "str", "min"], "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        (&["bzmpop", "0", "1", "lst", "min"], "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        (&["bzmpop", "x", "1", "lst", "min", "count", "1", "count", "1"], "-ERR syntax error\r\n"),
        (&["bzmpop", "0", "9223372036854775807", "lst", "min"], "-ERR syntax error\r\n"),
        (&["bzmpop", "1e30", "1", "lst", "min"], "-ERR timeout is negative\r\n"),
        (&["command", "getkeys", "bzmpop", "0", "2", "a", "b", "min", "count", "1"], "*2\r\n$1\r\na\r\n$1\r\nb\r\n"),
        (&["command", "getkeys", "bzmpop", "0", "1x", "a", "b", "max"], "*1\r\n$1\r\na\r\n"),
        (&["zadd", "z2", "1", "a", "2", "b", "3", "c", "1.5", "d", "0.1", "e"], ":5\r\n"),
        (&["hello", "3"], "HELLO"),
        (&["bzmpop", "0", "1", "z2", "min", "count", "2"], "*2\r\n$2\r\nz2\r\n*2\r\n*2\r\n$1\r\ne\r\n,0.10000000000000001\r\n*2\r\n$1\r\na\r\n,1\r\n"),
        (&["bzmpop", "0", "1", "z2", "max"], "*2\r\n$2\r\nz2\r\n*1\r\n*2\r\n$1\r\nc\r\n,3\r\n"),
        (&["eval", "return redis.call('bzmpop', 0, 1, KEYS[1], 'min')", "1", "nokey"], "_\r\n"),
        (&["hello", "2"], "HELLO"),
        (&["eval", "return redis.call('bzmpop', 0, 1, KEYS[1], 'min', 'count', 3)", "1", "z2"], "*2\r\n$2\r\nz2\r\n*2\r\n*2\r\n$1\r\nd\r\n$3\r\n1.5\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n"),
        (&["eval", "return redis.call('bzmpop', 0, 1, KEYS[1], 'min')", "1", "nokey"], "$-1\r\n"),
        (&["eval", "return redis.pcall('bzmpop', -1, 1, KEYS[1], 'min')", "1", "nokey"], "-ERR timeout is negative\r\n"),
        (&["zadd", "z2", "5", "m"], ":1\r\n"),
        (&["multi"], "+OK\r\n"),
        (&["bzmpop", "0", "1", "nokey", "min"], "+QUEUED\r\n"),
        (&["bzmpop", "0", "1", "z2", "max", "count", "3"], "+QUEUED\r\n"),
        (&["exec"], "*2\r\n*-1\r\n*2\r\n$2\r\nz2\r\n*1\r\n*2\r\n$1\r\nm\r\n$1\r\n5\r\n"),
];

#[tokio::test]
async fn bzmpop_replies_at_once_as_redis_does() {
    let h = start().await;
    let mut r = Raw::to(&h).await;
    for (args, expected) in BZMPOP {
        let got = r.cmd(args).await;
        if *expected != "HELLO" {
            assert_eq!(got, *expected, "{args:?}");
        }
    }
    assert_eq!(h.blocked_clients(), 0);
}

/// Waiters are served in the order they blocked: each BZMPOP takes up to its count, a
/// RESP3 one gets its scores as doubles, and a BZPOPMIN after them gets nothing once
/// the set is gone (as redis-server 7.0.15 serves them).
#[tokio::test]
async fn bzmpop_waiters_take_up_to_their_count_in_fifo_order() {
    let h = start().await;
    let mut first = Raw::to(&h).await;
    first
        .send_cmd(&["BZMPOP", "0", "1", "z", "MAX", "COUNT", "2"])
        .await;
    wait_blocked(&h, 1).await;
    let mut second = Raw::to(&h).await;
    second.hello3().await;
    second
        .send_cmd(&["BZMPOP", "0", "2", "y", "z", "MIN", "COUNT", "10"])
        .await;
    wait_blocked(&h, 2).await;
    let mut third = Raw::to(&h).await;
    third.send_cmd(&["BZPOPMIN", "z", "0"]).await;
    wait_blocked(&h, 3).await;
    let mut c = Raw::to(&h).await;
    c.check(
        &[
            "ZADD", "z", "1", "a", "2", "b", "3", "c", "1.5", "d", "0.1", "e",
        ],
        ":5\r\n",
    )
    .await;
    first
        .expect("*2\r\n$1\r\nz\r\n*2\r\n*2\r\n$1\r\nc\r\n$1\r\n3\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n")
        .await;
    second
        .expect("*2\r\n$1\r\nz\r\n*3\r\n*2\r\n$1\r\ne\r\n,0.10000000000000001\r\n*2\r\n$1\r\na\r\n,1\r\n*2\r\n$1\r\nd\r\n,1.5\r\n")
        .await;
    third.expect_silence(20).await;
    c.check(&["ZADD", "z", "7", "m"], ":1\r\n").await;
    third
        .expect("*3\r\n$1\r\nz\r\n$1\r\nm\r\n$1\r\n7\r\n")
        .await;
    assert_eq!(h.blocked_clients(), 0);
}

/// A ZADD inside a script wakes a BZMPOP after the script; a list pushed to its key
/// does not.
#[tokio::test]
async fn bzmpop_wakes_after_the_script_and_only_for_a_sorted_set() {
    let h = start().await;
    let mut w = Raw::to(&h).await;
    w.send_cmd(&["BZMPOP", "0", "2", "k", "z", "MIN", "COUNT", "2"])
        .await;
    wait_blocked(&h, 1).await;
    let mut c = Raw::to(&h).await;
    c.check(&["RPUSH", "k", "x"], ":1\r\n").await;
    w.expect_silence(20).await;
    c.check(
        &[
            "EVAL",
            "redis.call('zadd', KEYS[1], 5, 'm', 6, 'n', 7, 'o'); return redis.call('zcard', KEYS[1])",
            "1",
            "z",
        ],
        ":3\r\n",
    )
    .await;
    w.expect("*2\r\n$1\r\nz\r\n*2\r\n*2\r\n$1\r\nm\r\n$1\r\n5\r\n*2\r\n$1\r\nn\r\n$1\r\n6\r\n")
        .await;
    c.check(&["ZRANGE", "z", "0", "-1"], "*1\r\n$1\r\no\r\n")
        .await;
}

#[tokio::test]
async fn bzmpop_times_out_on_the_server_clock() {
    let h = start().await;
    let mut r = Raw::to(&h).await;
    r.send_cmd(&["BZMPOP", "0.25", "1", "z", "MAX"]).await;
    wait_blocked(&h, 1).await;
    h.clock().advance(Duration::from_millis(249));
    r.expect_silence(20).await;
    h.clock().advance(Duration::from_millis(1));
    r.expect("*-1\r\n").await;
    assert_eq!(h.blocked_clients(), 0);
}
