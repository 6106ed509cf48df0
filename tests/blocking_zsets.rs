//! BZPOPMIN / BZPOPMAX: the same blocking machinery as BLPOP (FIFO among waiters, woken
//! after the writing command or script ends, timeouts on the server clock).

mod support;

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
