//! LPOS, LSET, LINSERT, RPOPLPUSH, BLMOVE, BRPOPLPUSH: frame for frame as recorded from
//! redis-server 7.0.15, then the blocking moves' waits (FIFO, woken by scripts, timeouts
//! on the server clock).

use crate::support;

use std::time::Duration;
use support::*;

/// (command, the exact reply frame redis-server 7.0.15 sent).
#[rustfmt::skip]
const RECORDED: &[(&[&str], &str)] = &[
        (&["flushall"], "+OK\r\n"),
        (&["rpush", "l", "a", "b", "c", "a", "b", "c", "a"], ":7\r\n"),
        (&["lpos", "l", "a"], ":0\r\n"),
        (&["lpos", "l", "a", "rank", "2"], ":3\r\n"),
        (&["lpos", "l", "a", "rank", "-1"], ":6\r\n"),
        (&["lpos", "l", "a", "rank", "-2", "count", "0"], "*2\r\n:3\r\n:0\r\n"),
        (&["lpos", "l", "a", "count", "0"], "*3\r\n:0\r\n:3\r\n:6\r\n"),
        (&["lpos", "l", "a", "count", "2", "maxlen", "3"], "*1\r\n:0\r\n"),
        (&["lpos", "l", "a", "rank", "-1", "maxlen", "2"], ":6\r\n"),
        (&["lpos", "l", "a", "rank", "-1", "maxlen", "1", "count", "0"], "*1\r\n:6\r\n"),
        (&["lpos", "l", "z"], "$-1\r\n"),
        (&["lpos", "l", "z", "count", "1"], "*0\r\n"),
        (&["lpos", "nokey", "a"], "$-1\r\n"),
        (&["lpos", "nokey", "a", "count", "1"], "*0\r\n"),
        (&["lpos", "l", "a", "rank", "0"], "-ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list\r\n"),
        (&["lpos", "l", "a", "rank", "-9223372036854775808"], ":6\r\n"),
        (&["lpos", "l", "a", "count", "-1"], "-ERR COUNT can't be negative\r\n"),
        (&["lpos", "l", "a", "maxlen", "-1"], "-ERR MAXLEN can't be negative\r\n"),
        (&["lpos", "l", "a", "rank"], "-ERR syntax error\r\n"),
        (&["lpos", "l", "a", "foo", "1"], "-ERR syntax error\r\n"),
        (&["lpos", "l", "a", "rank", "x"], "-ERR value is not an integer or out of range\r\n"),
        (&["lset", "l", "0", "X"], "+OK\r\n"),
        (&["lset", "l", "-1", "Y"], "+OK\r\n"),
        (&["lset", "l", "7", "Z"], "-ERR index out of range\r\n"),
        (&["lset", "l", "-8", "Z"], "-ERR index out of range\r\n"),
        (&["lset", "nokey", "0", "a"], "-ERR no such key\r\n"),
        (&["lrange", "l", "0", "-1"], "*7\r\n$1\r\nX\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nY\r\n"),
        (&["linsert", "l", "before", "b", "NEW"], ":8\r\n"),
        (&["linsert", "l", "after", "Y", "END"], ":9\r\n"),
        (&["linsert", "l", "after", "nope", "x"], ":-1\r\n"),
        (&["linsert", "l", "middle", "b", "x"], "-ERR syntax error\r\n"),
        (&["linsert", "nokey", "before", "a", "b"], ":0\r\n"),
        (&["lrange", "l", "0", "-1"], "*9\r\n$1\r\nX\r\n$3\r\nNEW\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nY\r\n$3\r\nEND\r\n"),
        (&["rpoplpush", "l", "l2"], "$3\r\nEND\r\n"),
        (&["rpoplpush", "l", "l2"], "$1\r\nY\r\n"),
        (&["lrange", "l2", "0", "-1"], "*2\r\n$1\r\nY\r\n$3\r\nEND\r\n"),
        (&["rpoplpush", "nokey", "l2"], "$-1\r\n"),
        (&["set", "s", "v"], "+OK\r\n"),
        (&["rpoplpush", "l", "s"], "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        (&["rpoplpush", "s", "l"], "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        (&["lset", "s", "0", "a"], "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        (&["linsert", "s", "before", "a", "b"], "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        (&["lpos", "s", "a"], "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        (&["blmove", "l", "l2", "left", "right", "0"], "$1\r\nX\r\n"),
        (&["blmove", "l", "l2", "up", "right", "0"], "-ERR syntax error\r\n"),
        (&["brpoplpush", "l", "l2", "0"], "$1\r\nc\r\n"),
        (&["lrange", "l2", "0", "-1"], "*4\r\n$1\r\nc\r\n$1\r\nY\r\n$3\r\nEND\r\n$1\r\nX\r\n"),
        (&["blmove", "l", "s", "left", "right", "0"], "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        (&["brpoplpush", "l", "l2", "-1"], "-ERR timeout is negative\r\n"),
        (&["rpoplpush", "l", "l"], "$1\r\nb\r\n"),
        (&["lrange", "l", "0", "-1"], "*5\r\n$1\r\nb\r\n$3\r\nNEW\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\na\r\n"),
];

#[tokio::test]
async fn list_commands_reply_as_redis_does() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    for (args, expected) in RECORDED {
        c.check(args, expected).await;
    }
}

#[tokio::test]
async fn blmove_waiters_are_served_in_order_and_the_move_wakes_the_next_list() {
    let h = start().await;
    let mut first = Raw::to(&h).await;
    first
        .send_cmd(&["BLMOVE", "src", "mid", "LEFT", "RIGHT", "0"])
        .await;
    wait_blocked(&h, 1).await;
    let mut second = Raw::to(&h).await;
    second.send_cmd(&["BRPOPLPUSH", "src", "other", "0"]).await;
    wait_blocked(&h, 2).await;
    let mut popper = Raw::to(&h).await;
    popper.send_cmd(&["BLPOP", "mid", "0"]).await;
    wait_blocked(&h, 3).await;
    let mut c = Raw::to(&h).await;
    c.check(&["RPUSH", "src", "a", "b"], ":2\r\n").await;
    first.expect("$1\r\na\r\n").await;
    second.expect("$1\r\nb\r\n").await;
    // The element moved into "mid" reached the BLPOP waiter there.
    popper.expect("*2\r\n$3\r\nmid\r\n$1\r\na\r\n").await;
    c.check(&["LRANGE", "other", "0", "-1"], "*1\r\n$1\r\nb\r\n")
        .await;
    c.check(&["EXISTS", "src", "mid"], ":0\r\n").await;
}

#[tokio::test]
async fn a_push_inside_a_script_wakes_blmove_after_the_script() {
    let h = start().await;
    let mut w = Raw::to(&h).await;
    w.send_cmd(&["BLMOVE", "q", "done", "RIGHT", "LEFT", "0"])
        .await;
    wait_blocked(&h, 1).await;
    let mut c = Raw::to(&h).await;
    c.check(
        &[
            "EVAL",
            "return redis.call('lpush', KEYS[1], 'job')",
            "1",
            "q",
        ],
        ":1\r\n",
    )
    .await;
    w.expect("$3\r\njob\r\n").await;
    c.check(&["LRANGE", "done", "0", "-1"], "*1\r\n$3\r\njob\r\n")
        .await;
}

#[tokio::test]
async fn blmove_to_a_key_of_another_type_gets_wrongtype_and_the_element_stays() {
    let h = start().await;
    let mut w = Raw::to(&h).await;
    w.send_cmd(&["BLMOVE", "q", "dst", "LEFT", "LEFT", "0"])
        .await;
    wait_blocked(&h, 1).await;
    let mut c = Raw::to(&h).await;
    c.check(&["SET", "dst", "x"], "+OK\r\n").await;
    c.check(&["RPUSH", "q", "job"], ":1\r\n").await;
    w.expect("-WRONGTYPE Operation against a key holding the wrong kind of value\r\n")
        .await;
    c.check(&["LRANGE", "q", "0", "-1"], "*1\r\n$3\r\njob\r\n")
        .await;
}

#[tokio::test]
async fn blmove_times_out_on_the_server_clock_with_a_null_array() {
    let h = start().await;
    let mut r = Raw::to(&h).await;
    r.send_cmd(&["BLMOVE", "q", "d", "LEFT", "LEFT", "2"]).await;
    wait_blocked(&h, 1).await;
    h.clock().advance(Duration::from_millis(1999));
    r.expect_silence(20).await;
    h.clock().advance(Duration::from_millis(1));
    r.expect("*-1\r\n").await;
    assert_eq!(h.blocked_clients(), 0);
}
