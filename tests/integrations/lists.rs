//! List commands and the blocking pops, with Redis 7's exact replies (checked against
//! redis-server 7.0.15). Blocking timeouts run on the server's manual clock.

use crate::support;

use std::time::Duration;
use support::*;

const WRONG: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

#[tokio::test]
async fn pushes_return_the_length_and_keep_order() {
    let h = start().await;
    let mut c = conn(&h).await;
    assert_eq!(
        q::<i64>(&mut c, &["LPUSH", "l", "a", "b", "c"])
            .await
            .unwrap(),
        3
    );
    assert_eq!(
        q::<i64>(&mut c, &["RPUSH", "l", "d", "e"]).await.unwrap(),
        5
    );
    let all: Vec<String> = q(&mut c, &["LRANGE", "l", "0", "-1"]).await.unwrap();
    assert_eq!(all, ["c", "b", "a", "d", "e"]);
    assert_eq!(q::<i64>(&mut c, &["LLEN", "l"]).await.unwrap(), 5);
    assert_eq!(q::<i64>(&mut c, &["LLEN", "nol"]).await.unwrap(), 0);
    assert_eq!(q::<String>(&mut c, &["TYPE", "l"]).await.unwrap(), "list");
    assert_eq!(
        query_err(&mut c, &["LPUSH", "l"]).await,
        "ERR wrong number of arguments for 'lpush' command"
    );
}

#[tokio::test]
async fn pushx_only_pushes_to_existing_lists() {
    let h = start().await;
    let mut c = conn(&h).await;
    assert_eq!(q::<i64>(&mut c, &["LPUSHX", "nol", "a"]).await.unwrap(), 0);
    assert_eq!(
        q::<i64>(&mut c, &["RPUSHX", "nol", "a", "b"])
            .await
            .unwrap(),
        0
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "nol"]).await.unwrap(), 0);
    q::<i64>(&mut c, &["RPUSH", "l", "a"]).await.unwrap();
    assert_eq!(q::<i64>(&mut c, &["LPUSHX", "l", "z"]).await.unwrap(), 2);
    assert_eq!(
        q::<i64>(&mut c, &["RPUSHX", "l", "y", "x"]).await.unwrap(),
        4
    );
    let all: Vec<String> = q(&mut c, &["LRANGE", "l", "0", "-1"]).await.unwrap();
    assert_eq!(all, ["z", "a", "y", "x"]);
}

#[tokio::test]
async fn pop_replies_match_redis_in_resp2() {
    let h = start().await;
    let mut r = Raw::to(&h).await;
    r.check(&["LPOP", "nol"], "$-1\r\n").await;
    r.check(&["LPOP", "nol", "2"], "*-1\r\n").await;
    r.check(&["LPOP", "nol", "0"], "*-1\r\n").await;
    r.check(&["RPUSH", "l", "a", "b", "c", "d"], ":4\r\n").await;
    r.check(&["LPOP", "l", "0"], "*0\r\n").await;
    r.check(&["LPOP", "l"], "$1\r\na\r\n").await;
    r.check(&["RPOP", "l"], "$1\r\nd\r\n").await;
    r.check(&["RPOP", "l", "5"], "*2\r\n$1\r\nc\r\n$1\r\nb\r\n")
        .await;
    r.check(&["EXISTS", "l"], ":0\r\n").await;
    let positive = "-ERR value is out of range, must be positive\r\n";
    r.check(&["LPOP", "l", "-1"], positive).await;
    r.check(&["LPOP", "l", "x"], positive).await;
    r.check(
        &["LPOP", "l", "1", "2"],
        "-ERR wrong number of arguments for 'lpop' command\r\n",
    )
    .await;
}

#[tokio::test]
async fn pop_replies_match_redis_in_resp3() {
    let h = start().await;
    let mut r = Raw::to(&h).await;
    r.hello3().await;
    r.check(&["LPOP", "nol"], "_\r\n").await;
    r.check(&["LPOP", "nol", "2"], "_\r\n").await;
    r.check(&["RPUSH", "l", "x"], ":1\r\n").await;
    r.check(&["LPOP", "l", "0"], "*0\r\n").await;
    r.check(&["LPOP", "l", "3"], "*1\r\n$1\r\nx\r\n").await;
}

/// LMPOP, recorded from redis-server 7.0.15 running the same sequence: the first key
/// that exists is popped (a key of another type before it is WRONGTYPE, none after it
/// is looked at), errors in Redis's order (numkeys, the LEFT|RIGHT word, COUNT),
/// COMMAND GETKEYS, RESP3, Lua and MULTI. "HELLO": not compared (the version differs).
#[rustfmt::skip]
const LMPOP: &[(&[&str], &str)] = &[
        (&["flushall"], "+OK\r\n"),
        (&["rpush", "l1", "a", "b", "c", "d", "e"], ":5\r\n"),
        (&["rpush", "l2", "x", "y"], ":2\r\n"),
        (&["set", "str", "v"], "+OK\r\n"),
        (&["lmpop", "1", "l1", "left"], "*2\r\n$2\r\nl1\r\n*1\r\n$1\r\na\r\n"),
        (&["lmpop", "1", "l1", "RIGHT"], "*2\r\n$2\r\nl1\r\n*1\r\n$1\r\ne\r\n"),
        (&["lmpop", "2", "nokey", "l1", "left", "count", "2"], "*2\r\n$2\r\nl1\r\n*2\r\n$1\r\nb\r\n$1\r\nc\r\n"),
        (&["lmpop", "2", "l1", "l2", "right", "COUNT", "10"], "*2\r\n$2\r\nl1\r\n*1\r\n$1\r\nd\r\n"),
        (&["exists", "l1"], ":0\r\n"),
        (&["lmpop", "3", "nokey", "l2", "str", "left"], "*2\r\n$2\r\nl2\r\n*1\r\n$1\r\nx\r\n"),
        (&["lmpop", "2", "nokey", "other", "right"], "*-1\r\n"),
        (&["lmpop", "2", "nokey", "str", "left"], "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        (&["lmpop", "1", "l2", "left", "count", "9223372036854775807"], "*2\r\n$2\r\nl2\r\n*1\r\n$1\r\ny\r\n"),
        (&["lmpop", "1", "l2"], "-ERR wrong number of arguments for 'lmpop' command\r\n"),
        (&["lmpop", "0", "l2", "left"], "-ERR numkeys should be greater than 0\r\n"),
        (&["lmpop", "-1", "l2", "left"], "-ERR numkeys should be greater than 0\r\n"),
        (&["lmpop", "x", "l2", "left"], "-ERR numkeys should be greater than 0\r\n"),
        (&["lmpop", "01", "l2", "left"], "-ERR numkeys should be greater than 0\r\n"),
        (&["lmpop", "9223372036854775808", "l2", "left"], "-ERR numkeys should be greater than 0\r\n"),
        (&["lmpop", "2", "l2", "left"], "-ERR syntax error\r\n"),
        (&["lmpop", "9223372036854775807", "l2", "left"], "-ERR syntax error\r\n"),
        (&["lmpop", "1", "l2", "middle"], "-ERR syntax error\r\n"),
        (&["lmpop", "0", "str", "middle"], "-ERR numkeys should be greater than 0\r\n"),
        (&["lmpop", "1", "str", "middle"], "-ERR syntax error\r\n"),
        (&["lmpop", "1", "l2", "left", "count"], "-ERR syntax error\r\n"),
        (&["lmpop", "1", "l2", "left", "count", "0"], "-ERR count should be greater than 0\r\n"),
        (&["lmpop", "1", "l2", "left", "count", "-1"], "-ERR count should be greater than 0\r\n"),
        (&["lmpop", "1", "l2", "left", "count", "1.5"], "-ERR count should be greater than 0\r\n"),
        (&["lmpop", "1", "str", "left", "count", "0"], "-ERR count should be greater than 0\r\n"),
        (&["lmpop", "1", "l2", "left", "count", "1", "count", "1"], "-ERR syntax error\r\n"),
        (&["lmpop", "1", "l2", "left", "bogus"], "-ERR syntax error\r\n"),
        (&["lmpop", "1", "l2", "left", "count", "1", "bogus"], "-ERR syntax error\r\n"),
        (&["lmpop", "1", "str", "left", "count", "1"], "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        (&["command", "getkeys", "lmpop", "2", "a", "b", "left", "count", "1"], "*2\r\n$1\r\na\r\n$1\r\nb\r\n"),
        (&["command", "getkeys", "lmpop", "1x", "a", "b", "left"], "*1\r\n$1\r\na\r\n"),
        (&["command", "getkeys", "lmpop", "3", "a", "b", "left"], "*3\r\n$1\r\na\r\n$1\r\nb\r\n$4\r\nleft\r\n"),
        (&["command", "getkeys", "lmpop", "0", "a", "left"], "-ERR Invalid arguments specified for command\r\n"),
        (&["rpush", "l3", "p", "q", "r"], ":3\r\n"),
        (&["hello", "3"], "HELLO"),
        (&["lmpop", "1", "l3", "right"], "*2\r\n$2\r\nl3\r\n*1\r\n$1\r\nr\r\n"),
        (&["lmpop", "1", "nokey", "right"], "_\r\n"),
        (&["eval", "return redis.call('lmpop', 2, KEYS[1], KEYS[2], 'left', 'count', 5)", "2", "nokey", "l3"], "*2\r\n$2\r\nl3\r\n*2\r\n$1\r\np\r\n$1\r\nq\r\n"),
        (&["eval", "return redis.call('lmpop', 1, KEYS[1], 'left')", "1", "nokey"], "_\r\n"),
        (&["hello", "2"], "HELLO"),
        (&["rpush", "l3", "p", "q", "r"], ":3\r\n"),
        (&["eval", "return redis.call('lmpop', 1, KEYS[1], 'left')", "1", "l3"], "*2\r\n$2\r\nl3\r\n*1\r\n$1\r\np\r\n"),
        (&["eval", "return redis.pcall('lmpop', 0, KEYS[1], 'left')", "1", "l3"], "-ERR numkeys should be greater than 0\r\n"),
        (&["multi"], "+OK\r\n"),
        (&["lmpop", "1", "l3", "left", "count", "5"], "+QUEUED\r\n"),
        (&["lmpop", "1", "l3", "left"], "+QUEUED\r\n"),
        (&["lmpop", "1", "l3", "sideways"], "+QUEUED\r\n"),
        (&["exec"], "*3\r\n*2\r\n$2\r\nl3\r\n*2\r\n$1\r\nq\r\n$1\r\nr\r\n*-1\r\n-ERR syntax error\r\n"),
];

#[tokio::test]
async fn lmpop_replies_as_redis_does() {
    let h = start().await;
    let mut r = Raw::to(&h).await;
    for (args, expected) in LMPOP {
        let got = r.cmd(args).await;
        if *expected != "HELLO" {
            assert_eq!(got, *expected, "{args:?}");
        }
    }
}

#[tokio::test]
async fn lrange_and_lindex_follow_redis_indexes() {
    let h = start().await;
    let mut c = conn(&h).await;
    q::<i64>(&mut c, &["RPUSH", "l", "a", "b", "c", "d", "e", "f"])
        .await
        .unwrap();
    let r = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        q::<Vec<String>>(&mut c, &["LRANGE", "l", "-100", "100"])
            .await
            .unwrap(),
        r(&["a", "b", "c", "d", "e", "f"])
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["LRANGE", "l", "5", "2"])
            .await
            .unwrap(),
        r(&[])
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["LRANGE", "l", "-2", "-1"])
            .await
            .unwrap(),
        r(&["e", "f"])
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["LRANGE", "nol", "0", "-1"])
            .await
            .unwrap(),
        r(&[])
    );
    assert_eq!(
        query_err(&mut c, &["LRANGE", "l", "a", "b"]).await,
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        q::<String>(&mut c, &["LINDEX", "l", "0"]).await.unwrap(),
        "a"
    );
    assert_eq!(
        q::<String>(&mut c, &["LINDEX", "l", "-1"]).await.unwrap(),
        "f"
    );
    assert_eq!(
        q::<Option<String>>(&mut c, &["LINDEX", "l", "99"])
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        q::<Option<String>>(&mut c, &["LINDEX", "l", "-99"])
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        query_err(&mut c, &["LINDEX", "l", "x"]).await,
        "ERR value is not an integer or out of range"
    );
}

#[tokio::test]
async fn lrem_removes_from_either_end() {
    let h = start().await;
    let mut c = conn(&h).await;
    q::<i64>(&mut c, &["RPUSH", "l", "a", "x", "a", "y", "a", "z", "a"])
        .await
        .unwrap();
    assert_eq!(q::<i64>(&mut c, &["LREM", "l", "2", "a"]).await.unwrap(), 2);
    assert_eq!(
        q::<i64>(&mut c, &["LREM", "l", "-1", "a"]).await.unwrap(),
        1
    );
    let all: Vec<String> = q(&mut c, &["LRANGE", "l", "0", "-1"]).await.unwrap();
    assert_eq!(all, ["x", "y", "a", "z"]);
    assert_eq!(q::<i64>(&mut c, &["LREM", "l", "0", "a"]).await.unwrap(), 1);
    assert_eq!(
        q::<i64>(&mut c, &["LREM", "nol", "0", "a"]).await.unwrap(),
        0
    );
    assert_eq!(
        query_err(&mut c, &["LREM", "l", "x", "a"]).await,
        "ERR value is not an integer or out of range"
    );
    for v in ["x", "y", "z"] {
        q::<i64>(&mut c, &["LREM", "l", "0", v]).await.unwrap();
    }
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "l"]).await.unwrap(), 0);
}

#[tokio::test]
async fn ltrim_keeps_a_range_and_deletes_an_emptied_list() {
    let h = start().await;
    let mut c = conn(&h).await;
    q::<i64>(&mut c, &["RPUSH", "l", "b", "c", "d", "e", "f", "x", "y"])
        .await
        .unwrap();
    assert_eq!(
        q::<String>(&mut c, &["LTRIM", "l", "1", "-2"])
            .await
            .unwrap(),
        "OK"
    );
    let all: Vec<String> = q(&mut c, &["LRANGE", "l", "0", "-1"]).await.unwrap();
    assert_eq!(all, ["c", "d", "e", "f", "x"]);
    assert_eq!(
        q::<String>(&mut c, &["LTRIM", "l", "5", "1"])
            .await
            .unwrap(),
        "OK"
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "l"]).await.unwrap(), 0);
    assert_eq!(
        q::<String>(&mut c, &["LTRIM", "nol", "0", "1"])
            .await
            .unwrap(),
        "OK"
    );
}

#[tokio::test]
async fn lmove_moves_between_ends() {
    let h = start().await;
    let mut c = conn(&h).await;
    assert_eq!(
        q::<Option<String>>(&mut c, &["LMOVE", "nol", "l", "LEFT", "RIGHT"])
            .await
            .unwrap(),
        None
    );
    q::<i64>(&mut c, &["RPUSH", "src", "1", "2", "3"])
        .await
        .unwrap();
    assert_eq!(
        q::<String>(&mut c, &["LMOVE", "src", "dst", "left", "right"])
            .await
            .unwrap(),
        "1"
    );
    assert_eq!(
        query_err(&mut c, &["LMOVE", "src", "dst", "up", "right"]).await,
        "ERR syntax error"
    );
    assert_eq!(
        q::<String>(&mut c, &["LMOVE", "src", "src", "RIGHT", "LEFT"])
            .await
            .unwrap(),
        "3"
    );
    let all: Vec<String> = q(&mut c, &["LRANGE", "src", "0", "-1"]).await.unwrap();
    assert_eq!(all, ["3", "2"]);
    q::<String>(&mut c, &["SET", "s", "v"]).await.unwrap();
    assert_eq!(
        query_err(&mut c, &["LMOVE", "src", "s", "LEFT", "LEFT"]).await,
        WRONG
    );
    assert_eq!(q::<i64>(&mut c, &["LLEN", "src"]).await.unwrap(), 2);
}

#[tokio::test]
async fn list_commands_on_other_types_are_wrongtype() {
    let h = start().await;
    let mut c = conn(&h).await;
    q::<String>(&mut c, &["SET", "s", "v"]).await.unwrap();
    for args in [
        &["LPUSH", "s", "a"][..],
        &["RPUSH", "s", "a"],
        &["LPUSHX", "s", "a"],
        &["LPOP", "s"],
        &["LPOP", "s", "0"],
        &["RPOP", "s"],
        &["LLEN", "s"],
        &["LRANGE", "s", "0", "-1"],
        &["LINDEX", "s", "0"],
        &["LREM", "s", "0", "a"],
        &["LTRIM", "s", "0", "1"],
        &["BLPOP", "s", "0"],
        &["BRPOP", "s", "0"],
    ] {
        assert_eq!(query_err(&mut c, args).await, WRONG, "{args:?}");
    }
}

#[tokio::test]
async fn creating_a_list_is_fenced_but_popping_is_not() {
    let h = start_with(|c| c.restart_delay = Some(Duration::from_secs(31))).await;
    let mut c = conn(&h).await;
    assert!(query_err(&mut c, &["LPUSH", "l", "a"])
        .await
        .starts_with("TRYAGAIN "));
    assert!(query_err(&mut c, &["RPUSH", "l", "a"])
        .await
        .starts_with("TRYAGAIN "));
    assert_eq!(
        q::<Option<String>>(&mut c, &["LPOP", "l"]).await.unwrap(),
        None
    );
    // Nor is LMPOP (a pop); BLPOP is not fenced either: it blocks, and times out on
    // the node's clock.
    let mut raw = Raw::to(&h).await;
    raw.check(&["LMPOP", "1", "l", "LEFT"], "*-1\r\n").await;
    raw.send_cmd(&["BLPOP", "l", "0.001"]).await;
    wait_blocked(&h, 1).await;
    h.advance(Duration::from_millis(2));
    raw.expect("*-1\r\n").await;
}

#[tokio::test]
async fn require_ttl_refuses_creating_a_list() {
    let h = start_with(|c| c.require_ttl = true).await;
    let mut c = conn(&h).await;
    assert!(query_err(&mut c, &["LPUSH", "l", "a"])
        .await
        .contains("--require-ttl"));
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "l"]).await.unwrap(), 0);
}

// ---- blocking pops ----

#[tokio::test]
async fn blpop_pops_at_once_from_the_first_non_empty_key() {
    let h = start().await;
    let mut c = conn(&h).await;
    q::<i64>(&mut c, &["RPUSH", "k2", "a", "b"]).await.unwrap();
    let got: (String, String) = q(&mut c, &["BLPOP", "k1", "k2", "0"]).await.unwrap();
    assert_eq!(got, ("k2".into(), "a".into()));
    let got: (String, String) = q(&mut c, &["BRPOP", "k1", "k2", "0"]).await.unwrap();
    assert_eq!(got, ("k2".into(), "b".into()));
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "k2"]).await.unwrap(), 0);
}

#[tokio::test]
async fn blpop_timeout_errors_match_redis() {
    let h = start().await;
    let mut r = Raw::to(&h).await;
    let not_float = "-ERR timeout is not a float or out of range\r\n";
    let negative = "-ERR timeout is negative\r\n";
    r.check(&["BLPOP", "l", "abc"], not_float).await;
    r.check(&["BLPOP", "l", " 1"], not_float).await;
    r.check(&["BLPOP", "l", "nan"], not_float).await;
    r.check(&["BLPOP", "l", "-1"], negative).await;
    r.check(&["BRPOP", "l", "-0.5"], negative).await;
    r.check(&["BLPOP", "l", "1e30"], negative).await;
    r.check(
        &["BLPOP", "l"],
        "-ERR wrong number of arguments for 'blpop' command\r\n",
    )
    .await;
}

#[tokio::test]
async fn blocked_client_times_out_on_the_server_clock() {
    let h = start().await;
    let mut r = Raw::to(&h).await;
    r.send_cmd(&["BLPOP", "l", "2"]).await;
    wait_blocked(&h, 1).await;
    h.clock().advance(Duration::from_millis(1999));
    r.expect_silence(20).await;
    assert_eq!(h.blocked_clients(), 1);
    h.clock().advance(Duration::from_millis(1));
    r.expect("*-1\r\n").await;
    assert_eq!(h.blocked_clients(), 0);
}

#[tokio::test]
async fn timeout_reply_is_null_in_resp3() {
    let h = start().await;
    let mut r = Raw::to(&h).await;
    r.hello3().await;
    r.send_cmd(&["BRPOP", "l", "1"]).await;
    wait_blocked(&h, 1).await;
    h.clock().advance(Duration::from_millis(1000));
    r.expect("_\r\n").await;
}

#[tokio::test]
async fn fractional_timeouts_are_milliseconds() {
    let h = start().await;
    let mut r = Raw::to(&h).await;
    r.send_cmd(&["BLPOP", "l", "0.25"]).await;
    wait_blocked(&h, 1).await;
    h.clock().advance(Duration::from_millis(249));
    r.expect_silence(20).await;
    h.clock().advance(Duration::from_millis(1));
    r.expect("*-1\r\n").await;
    // 0.0001 s rounds up to 1 ms, as in Redis (not 0, which would mean forever).
    r.send_cmd(&["BLPOP", "l", "0.0001"]).await;
    wait_blocked(&h, 1).await;
    h.clock().advance(Duration::from_millis(1));
    r.expect("*-1\r\n").await;
}

#[tokio::test]
async fn timeout_zero_blocks_forever() {
    let h = start().await;
    let mut r = Raw::to(&h).await;
    r.send_cmd(&["BLPOP", "l", "0"]).await;
    wait_blocked(&h, 1).await;
    h.clock().advance(Duration::from_secs(365 * 24 * 3600));
    r.expect_silence(20).await;
    let mut c = conn(&h).await;
    q::<i64>(&mut c, &["RPUSH", "l", "v"]).await.unwrap();
    r.expect("*2\r\n$1\r\nl\r\n$1\r\nv\r\n").await;
}

#[tokio::test]
async fn three_waiters_are_served_in_fifo_order() {
    let h = start().await;
    let mut waiters = Vec::new();
    for i in 0..3 {
        let mut r = Raw::to(&h).await;
        r.send_cmd(&["BLPOP", "q", "0"]).await;
        wait_blocked(&h, i + 1).await;
        waiters.push(r);
    }
    let mut c = conn(&h).await;
    // One push of three elements: served in waiter order, each from the head.
    assert_eq!(
        q::<i64>(&mut c, &["RPUSH", "q", "a", "b", "c"])
            .await
            .unwrap(),
        3
    );
    waiters[0].expect("*2\r\n$1\r\nq\r\n$1\r\na\r\n").await;
    waiters[1].expect("*2\r\n$1\r\nq\r\n$1\r\nb\r\n").await;
    waiters[2].expect("*2\r\n$1\r\nq\r\n$1\r\nc\r\n").await;
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "q"]).await.unwrap(), 0);
}

#[tokio::test]
async fn one_push_at_a_time_wakes_the_oldest_waiter() {
    let h = start().await;
    let mut waiters = Vec::new();
    for i in 0..3 {
        let mut r = Raw::to(&h).await;
        r.send_cmd(&["BRPOP", "q", "0"]).await;
        wait_blocked(&h, i + 1).await;
        waiters.push(r);
    }
    let mut c = conn(&h).await;
    for (i, v) in ["x", "y", "z"].iter().enumerate() {
        q::<i64>(&mut c, &["LPUSH", "q", v]).await.unwrap();
        waiters[i]
            .expect(&format!("*2\r\n$1\r\nq\r\n$1\r\n{v}\r\n"))
            .await;
        for later in &mut waiters[i + 1..] {
            later.expect_silence(10).await;
        }
    }
}

#[tokio::test]
async fn a_new_blpop_queues_behind_existing_waiters() {
    let h = start().await;
    let mut first = Raw::to(&h).await;
    first.send_cmd(&["BLPOP", "q", "0"]).await;
    wait_blocked(&h, 1).await;
    let mut c = conn(&h).await;
    q::<i64>(&mut c, &["RPUSH", "q", "a"]).await.unwrap();
    first.expect("*2\r\n$1\r\nq\r\n$1\r\na\r\n").await;
}

#[tokio::test]
async fn blpop_on_several_keys_wakes_on_any() {
    let h = start().await;
    let mut r = Raw::to(&h).await;
    r.send_cmd(&["BLPOP", "k1", "k2", "k3", "0"]).await;
    wait_blocked(&h, 1).await;
    let mut c = conn(&h).await;
    q::<i64>(&mut c, &["RPUSH", "k3", "v"]).await.unwrap();
    r.expect("*2\r\n$2\r\nk3\r\n$1\r\nv\r\n").await;
    // Served once: a later push to another of its keys stays in the list.
    q::<i64>(&mut c, &["RPUSH", "k1", "w"]).await.unwrap();
    assert_eq!(q::<i64>(&mut c, &["LLEN", "k1"]).await.unwrap(), 1);
    assert_eq!(h.blocked_clients(), 0);
}

#[tokio::test]
async fn a_waiter_that_disconnects_is_forgotten_and_loses_nothing() {
    let h = start().await;
    let mut gone = Raw::to(&h).await;
    gone.send_cmd(&["BLPOP", "q", "0"]).await;
    wait_blocked(&h, 1).await;
    let mut next = Raw::to(&h).await;
    next.send_cmd(&["BLPOP", "q", "0"]).await;
    wait_blocked(&h, 2).await;
    drop(gone);
    wait_blocked(&h, 1).await;
    let mut c = conn(&h).await;
    q::<i64>(&mut c, &["RPUSH", "q", "a"]).await.unwrap();
    next.expect("*2\r\n$1\r\nq\r\n$1\r\na\r\n").await;
    // With nobody waiting, a push stays in the list.
    let mut alone = Raw::to(&h).await;
    alone.send_cmd(&["BLPOP", "r", "0"]).await;
    wait_blocked(&h, 1).await;
    drop(alone);
    wait_blocked(&h, 0).await;
    q::<i64>(&mut c, &["RPUSH", "r", "b"]).await.unwrap();
    assert_eq!(q::<i64>(&mut c, &["LLEN", "r"]).await.unwrap(), 1);
}

/// BLMPOP's forms that answer at once, recorded from redis-server 7.0.15: the timeout
/// is read after numkeys, LEFT|RIGHT and COUNT; inside Lua (Redis 7.0 lets scripts
/// call it) and MULTI it never blocks and answers a null array.
#[rustfmt::skip]
const BLMPOP: &[(&[&str], &str)] = &[
        (&["flushall"], "+OK\r\n"),
        (&["rpush", "l1", "a", "b", "c", "d", "e"], ":5\r\n"),
        (&["rpush", "l2", "x", "y"], ":2\r\n"),
        (&["set", "str", "v"], "+OK\r\n"),
        (&["zadd", "z1", "1", "a"], ":1\r\n"),
        (&["blmpop", "0", "1", "l1", "left"], "*2\r\n$2\r\nl1\r\n*1\r\n$1\r\na\r\n"),
        (&["blmpop", "0.5", "2", "nokey", "l1", "right", "count", "2"], "*2\r\n$2\r\nl1\r\n*2\r\n$1\r\ne\r\n$1\r\nd\r\n"),
        (&["blmpop", "0", "3", "nokey", "str", "l1", "left"], "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        (&["blmpop", "0", "3", "nokey", "l1", "str", "left", "count", "10"], "*2\r\n$2\r\nl1\r\n*2\r\n$1\r\nb\r\n$1\r\nc\r\n"),
        (&["blmpop", "0", "1", "l2"], "-ERR wrong number of arguments for 'blmpop' command\r\n"),
        (&["blmpop", "x", "1", "l2", "left"], "-ERR timeout is not a float or out of range\r\n"),
        (&["blmpop", "-1", "1", "l2", "left"], "-ERR timeout is negative\r\n"),
        (&["blmpop", "nan", "1", "l2", "left"], "-ERR timeout is not a float or out of range\r\n"),
        (&["blmpop", "1e30", "1", "l2", "left"], "-ERR timeout is negative\r\n"),
        (&["blmpop", " 1", "1", "l2", "left"], "-ERR timeout is not a float or out of range\r\n"),
        (&["blmpop", "-0.0001", "1", "l2", "left", "count", "1"], "*2\r\n$2\r\nl2\r\n*1\r\n$1\r\nx\r\n"),
        (&["blmpop", "x", "0", "l2", "left"], "-ERR numkeys should be greater than 0\r\n"),
        (&["blmpop", "-1", "0", "l2", "left"], "-ERR numkeys should be greater than 0\r\n"),
        (&["blmpop", "x", "2", "l2", "left"], "-ERR syntax error\r\n"),
        (&["blmpop", "x", "1", "l2", "middle"], "-ERR syntax error\r\n"),
        (&["blmpop", "x", "1", "l2", "left", "count"], "-ERR syntax error\r\n"),
        (&["blmpop", "x", "1", "l2", "left", "count", "0"], "-ERR count should be greater than 0\r\n"),
        (&["blmpop", "x", "1", "l2", "left", "count", "1", "count", "1"], "-ERR syntax error\r\n"),
        (&["blmpop", "x", "1", "str", "left"], "-ERR timeout is not a float or out of range\r\n"),
        (&["blmpop", "-1", "1", "str", "left"], "-ERR timeout is negative\r\n"),
        (&["blmpop", "0", "1", "str", "left"], "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        (&["blmpop", "0", "1", "z1", "left"], "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        (&["blmpop", "9223372036854775807", "1", "l2", "left"], "-ERR timeout is negative\r\n"),
        (&["blmpop", "0", "9223372036854775807", "l2", "left"], "-ERR syntax error\r\n"),
        (&["command", "getkeys", "blmpop", "0", "2", "a", "b", "left", "count", "1"], "*2\r\n$1\r\na\r\n$1\r\nb\r\n"),
        (&["command", "getkeys", "blmpop", "5", "1x", "a", "b", "left"], "*1\r\n$1\r\na\r\n"),
        (&["command", "getkeys", "blmpop", "0", "3", "a", "b", "left"], "*3\r\n$1\r\na\r\n$1\r\nb\r\n$4\r\nleft\r\n"),
        (&["command", "getkeys", "blmpop", "0", "0", "a", "left"], "-ERR Invalid arguments specified for command\r\n"),
        (&["command", "getkeys", "blmpop", "0", "x", "a", "left"], "-ERR Invalid arguments specified for command\r\n"),
        (&["exists", "z1"], ":1\r\n"),
        (&["hello", "3"], "HELLO"),
        (&["blmpop", "0", "1", "l2", "left", "count", "5"], "*2\r\n$2\r\nl2\r\n*1\r\n$1\r\ny\r\n"),
        (&["eval", "return redis.call('blmpop', 0, 1, KEYS[1], 'left')", "1", "nokey"], "_\r\n"),
        (&["hello", "2"], "HELLO"),
        (&["rpush", "l2", "x", "y"], ":2\r\n"),
        (&["eval", "return redis.call('blmpop', 0, 2, KEYS[1], KEYS[2], 'left', 'count', 5)", "2", "nokey", "l2"], "*2\r\n$2\r\nl2\r\n*2\r\n$1\r\nx\r\n$1\r\ny\r\n"),
        (&["eval", "return redis.call('blmpop', 0, 1, KEYS[1], 'left')", "1", "nokey"], "$-1\r\n"),
        (&["eval", "return redis.pcall('blmpop', 0, 0, KEYS[1], 'left')", "1", "nokey"], "-ERR numkeys should be greater than 0\r\n"),
        (&["eval", "return redis.pcall('blmpop', 0, 1, KEYS[1], 'left')", "1", "str"], "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
        (&["rpush", "l2", "x"], ":1\r\n"),
        (&["multi"], "+OK\r\n"),
        (&["blmpop", "0", "1", "nokey", "left"], "+QUEUED\r\n"),
        (&["blmpop", "0", "1", "l2", "left", "count", "3"], "+QUEUED\r\n"),
        (&["blmpop", "-1", "1", "nokey", "left"], "+QUEUED\r\n"),
        (&["exec"], "*3\r\n*-1\r\n*2\r\n$2\r\nl2\r\n*1\r\n$1\r\nx\r\n-ERR timeout is negative\r\n"),
];

#[tokio::test]
async fn blmpop_replies_at_once_as_redis_does() {
    let h = start().await;
    let mut r = Raw::to(&h).await;
    for (args, expected) in BLMPOP {
        let got = r.cmd(args).await;
        if *expected != "HELLO" {
            assert_eq!(got, *expected, "{args:?}");
        }
    }
    assert_eq!(h.blocked_clients(), 0);
}

/// Waiters are served in the order they blocked, whatever their command: each BLMPOP
/// takes up to its count from the pushed list (as redis-server 7.0.15 serves them).
#[tokio::test]
async fn blmpop_waiters_take_up_to_their_count_in_fifo_order() {
    let h = start().await;
    let mut first = Raw::to(&h).await;
    first.send_cmd(&["BLPOP", "q", "0"]).await;
    wait_blocked(&h, 1).await;
    let mut second = Raw::to(&h).await;
    second
        .send_cmd(&["BLMPOP", "0", "2", "a", "q", "LEFT", "COUNT", "2"])
        .await;
    wait_blocked(&h, 2).await;
    let mut third = Raw::to(&h).await;
    third
        .send_cmd(&["BLMPOP", "0", "1", "q", "RIGHT", "COUNT", "5"])
        .await;
    wait_blocked(&h, 3).await;
    let mut c = Raw::to(&h).await;
    c.check(&["RPUSH", "q", "1", "2", "3", "4", "5"], ":5\r\n")
        .await;
    first.expect("*2\r\n$1\r\nq\r\n$1\r\n1\r\n").await;
    second
        .expect("*2\r\n$1\r\nq\r\n*2\r\n$1\r\n2\r\n$1\r\n3\r\n")
        .await;
    third
        .expect("*2\r\n$1\r\nq\r\n*2\r\n$1\r\n5\r\n$1\r\n4\r\n")
        .await;
    c.check(&["EXISTS", "q"], ":0\r\n").await;
    assert_eq!(h.blocked_clients(), 0);
}

/// BLMPOP on several keys wakes on whichever is pushed to first, once the transaction
/// that pushes has ended; a sorted set on its key does not wake it.
#[tokio::test]
async fn blmpop_wakes_on_any_of_its_keys_after_exec() {
    let h = start().await;
    let mut w = Raw::to(&h).await;
    w.send_cmd(&["BLMPOP", "0", "2", "k1", "k2", "RIGHT", "COUNT", "5"])
        .await;
    wait_blocked(&h, 1).await;
    let mut c = Raw::to(&h).await;
    c.check(&["ZADD", "k1", "1", "m"], ":1\r\n").await;
    w.expect_silence(20).await;
    c.check(&["MULTI"], "+OK\r\n").await;
    c.check(&["RPUSH", "k2", "x", "y"], "+QUEUED\r\n").await;
    c.check(&["LLEN", "k2"], "+QUEUED\r\n").await;
    c.check(&["EXEC"], "*2\r\n:2\r\n:2\r\n").await;
    w.expect("*2\r\n$2\r\nk2\r\n*2\r\n$1\r\ny\r\n$1\r\nx\r\n")
        .await;
    c.check(&["EXISTS", "k2"], ":0\r\n").await;
}

/// The timeout runs on the server clock; Redis 7.0 answers it with a null array (a
/// RESP3 null).
#[tokio::test]
async fn blmpop_times_out_on_the_server_clock() {
    let h = start().await;
    let mut r = Raw::to(&h).await;
    r.send_cmd(&["BLMPOP", "1.5", "1", "q", "LEFT"]).await;
    wait_blocked(&h, 1).await;
    let mut r3 = Raw::to(&h).await;
    r3.hello3().await;
    r3.send_cmd(&["BLMPOP", "1.5", "1", "q", "LEFT", "COUNT", "2"])
        .await;
    wait_blocked(&h, 2).await;
    h.clock().advance(Duration::from_millis(1499));
    r.expect_silence(20).await;
    h.clock().advance(Duration::from_millis(1));
    r.expect("*-1\r\n").await;
    r3.expect("_\r\n").await;
    assert_eq!(h.blocked_clients(), 0);
}

#[tokio::test]
async fn client_kill_ends_a_blocked_client() {
    let h = start().await;
    let mut r = Raw::to(&h).await;
    r.send_cmd(&["CLIENT", "ID"]).await;
    let mut buf = [0u8; 32];
    use tokio::io::AsyncReadExt;
    let n = r.stream.read(&mut buf).await.unwrap();
    let id = String::from_utf8_lossy(&buf[1..n - 2]).to_string();
    r.send_cmd(&["BLPOP", "q", "0"]).await;
    wait_blocked(&h, 1).await;
    let mut c = conn(&h).await;
    assert_eq!(
        q::<i64>(&mut c, &["CLIENT", "KILL", "ID", &id])
            .await
            .unwrap(),
        1
    );
    assert!(r.read_to_close().await.is_empty());
    assert_eq!(h.blocked_clients(), 0);
}

#[tokio::test]
async fn pipelined_commands_wait_behind_a_blocked_blpop() {
    use tokio::io::AsyncWriteExt;
    let h = start().await;
    let mut r = Raw::to(&h).await;
    r.stream
        .write_all(b"*3\r\n$5\r\nBLPOP\r\n$1\r\nq\r\n$1\r\n0\r\n*1\r\n$4\r\nPING\r\n")
        .await
        .unwrap();
    wait_blocked(&h, 1).await;
    r.expect_silence(20).await;
    let mut c = conn(&h).await;
    q::<i64>(&mut c, &["RPUSH", "q", "a"]).await.unwrap();
    r.expect("*2\r\n$1\r\nq\r\n$1\r\na\r\n+PONG\r\n").await;
}

#[tokio::test]
async fn info_counts_blocked_clients() {
    let h = start().await;
    let mut r = Raw::to(&h).await;
    r.send_cmd(&["BLPOP", "q", "0"]).await;
    wait_blocked(&h, 1).await;
    let mut c = conn(&h).await;
    let info: String = q(&mut c, &["INFO", "clients"]).await.unwrap();
    assert!(info.contains("blocked_clients:1\r\n"), "{info}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_pushes_and_waiters_lose_and_duplicate_nothing() {
    let h = start().await;
    let waiters = 40;
    let mut tasks = Vec::new();
    for _ in 0..waiters {
        let mut c = conn(&h).await;
        tasks.push(tokio::spawn(async move {
            let (_, v): (String, String) = q(&mut c, &["BLPOP", "q", "other", "0"]).await.unwrap();
            v
        }));
    }
    let mut pushers = Vec::new();
    for p in 0..8 {
        let mut c = conn(&h).await;
        pushers.push(tokio::spawn(async move {
            for i in 0..5 {
                let key = if i % 2 == 0 { "q" } else { "other" };
                q::<i64>(&mut c, &["RPUSH", key, &format!("{p}-{i}")])
                    .await
                    .unwrap();
            }
        }));
    }
    for p in pushers {
        p.await.unwrap();
    }
    let mut got = Vec::new();
    for t in tasks {
        got.push(
            tokio::time::timeout(Duration::from_secs(10), t)
                .await
                .expect("a waiter was never served")
                .unwrap(),
        );
    }
    got.sort();
    got.dedup();
    assert_eq!(got.len(), waiters);
    let mut c = conn(&h).await;
    assert_eq!(
        q::<i64>(&mut c, &["EXISTS", "q", "other"]).await.unwrap(),
        0
    );
    assert_eq!(h.blocked_clients(), 0);
}

/// A list renamed, copied or moved into place serves a BLPOP waiting on its new name,
/// as in Redis (Redis's unit/type/list hung on the RENAME case: nothing woke the
/// waiter). A sorted set copied into place serves BZPOPMIN the same way.
#[tokio::test]
async fn keys_moved_into_place_serve_their_waiters() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    let mut w = Raw::to(&h).await;
    w.send_cmd(&["BLPOP", "foo", "0"]).await;
    wait_blocked(&h, 1).await;
    c.cmd(&["LPUSH", "bob", "abc", "def", "hij"]).await;
    assert_eq!(c.cmd(&["RENAME", "bob", "foo"]).await, OK);
    w.expect("*2\r\n$3\r\nfoo\r\n$3\r\nhij\r\n").await;

    w.send_cmd(&["BLPOP", "copied", "0"]).await;
    wait_blocked(&h, 1).await;
    assert_eq!(c.cmd(&["COPY", "foo", "copied"]).await, int(1));
    w.expect("*2\r\n$6\r\ncopied\r\n$3\r\ndef\r\n").await;

    w.send_cmd(&["BZPOPMIN", "z2", "0"]).await;
    wait_blocked(&h, 1).await;
    c.cmd(&["ZADD", "z1", "1", "a"]).await;
    assert_eq!(c.cmd(&["RENAMENX", "z1", "z2"]).await, int(1));
    w.expect("*3\r\n$2\r\nz2\r\n$1\r\na\r\n$1\r\n1\r\n").await;

    // MOVE serves a waiter in the target database.
    assert_eq!(w.cmd(&["SELECT", "1"]).await, OK);
    w.send_cmd(&["BLPOP", "foo", "0"]).await;
    wait_blocked(&h, 1).await;
    assert_eq!(c.cmd(&["MOVE", "foo", "1"]).await, int(1));
    w.expect("*2\r\n$3\r\nfoo\r\n$3\r\ndef\r\n").await;
    h.shutdown().await;
}

/// CLIENT UNBLOCK ends a client's BLPOP as its timeout would (or with Redis's
/// UNBLOCKED error); the element pushed afterwards stays in the list.
#[tokio::test]
async fn client_unblock_ends_a_blocking_wait() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    let mut w = Raw::to(&h).await;
    let id = w.cmd(&["CLIENT", "ID"]).await[1..].trim_end().to_string();
    assert_eq!(c.cmd(&["CLIENT", "UNBLOCK", &id]).await, int(0));
    for (reason, answer) in [
        (None, "*-1\r\n"),
        (Some("TIMEOUT"), "*-1\r\n"),
        (
            Some("error"),
            "-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n",
        ),
    ] {
        w.send_cmd(&["BLPOP", "l", "0"]).await;
        wait_blocked(&h, 1).await;
        let list = c.cmd(&["CLIENT", "LIST", "ID", &id]).await;
        assert!(list.contains(" flags=b "), "{list}");
        let mut args = vec!["CLIENT", "UNBLOCK", id.as_str()];
        args.extend(reason);
        assert_eq!(c.cmd(&args).await, int(1));
        w.expect(answer).await;
    }
    assert_eq!(c.cmd(&["RPUSH", "l", "x"]).await, int(1));
    assert_eq!(c.cmd(&["LLEN", "l"]).await, int(1));
    assert!(c
        .cmd(&["CLIENT", "LIST", "ID", &id])
        .await
        .contains(" flags=N "));
    assert_eq!(
        c.cmd(&["CLIENT", "UNBLOCK", &id, "later"]).await,
        err("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR")
    );
    assert_eq!(
        c.cmd(&["CLIENT", "UNBLOCK", "x"]).await,
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(c.cmd(&["CLIENT", "UNBLOCK", "424242"]).await, int(0));
    // The connection goes on normally.
    assert_eq!(w.cmd(&["LPOP", "l"]).await, bulk("x"));
    h.shutdown().await;
}
