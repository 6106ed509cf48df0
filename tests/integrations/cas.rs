//! Native lock commands: DIGEST, DELEX and SET's IF* conditions (Redis 8.4), DELIFEQ
//! (Valkey 9). Reached by the network and by Lua alike; the restart fence and max-ttl
//! apply to SET IF* as to any SET, never to the deletes (they release).

use crate::support;
use std::time::Duration;
use support::*;

const WRONGTYPE: &str = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
const SYNTAX: &str = "-ERR syntax error\r\n";

#[tokio::test]
async fn digest_is_the_xxh3_hex_redis_returns() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["SET", "k", "Hello world"]).await, OK);
    // The example on redis.io's DIGEST page.
    assert_eq!(c.cmd(&["DIGEST", "k"]).await, bulk("b6acb9d84a38ff74"));
    assert_eq!(c.cmd(&["DIGEST", "nokey"]).await, NIL);
    assert_eq!(c.cmd(&["SADD", "s", "a"]).await, int(1));
    assert_eq!(c.cmd(&["DIGEST", "s"]).await, WRONGTYPE);
}

#[tokio::test]
async fn set_ifeq_extends_only_the_holders_lock() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["SET", "lock", "me", "NX", "PX", "1000"]).await, OK);
    assert_eq!(
        c.cmd(&["SET", "lock", "you", "IFEQ", "you", "PX", "9000"])
            .await,
        NIL
    );
    assert_eq!(
        c.cmd(&["SET", "lock", "me", "IFEQ", "me", "PX", "9000"])
            .await,
        OK
    );
    assert_eq!(c.cmd(&["PTTL", "lock"]).await, int(9000));
    // IFEQ never creates; IFNE does.
    assert_eq!(c.cmd(&["SET", "new", "v", "IFEQ", "v"]).await, NIL);
    assert_eq!(c.cmd(&["EXISTS", "new"]).await, int(0));
    assert_eq!(c.cmd(&["SET", "new", "v", "IFNE", "x"]).await, OK);
    assert_eq!(c.cmd(&["SET", "new", "w", "IFNE", "v"]).await, NIL);
    // GET answers the old value whether or not the condition held.
    assert_eq!(
        c.cmd(&["SET", "new", "w", "IFNE", "x", "GET"]).await,
        bulk("v")
    );
    assert_eq!(
        c.cmd(&["SET", "new", "z", "IFEQ", "nope", "GET"]).await,
        bulk("w")
    );
    assert_eq!(c.cmd(&["GET", "new"]).await, bulk("w"));
}

#[tokio::test]
async fn set_ifdeq_compares_the_digest_in_any_case() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["SET", "k", "Hello world"]).await, OK);
    assert_eq!(
        c.cmd(&["SET", "k", "v", "IFDEQ", "0000000000000000"]).await,
        NIL
    );
    assert_eq!(
        c.cmd(&["SET", "k", "v", "IFDNE", "B6ACB9D84A38FF74"]).await,
        NIL
    );
    assert_eq!(
        c.cmd(&["SET", "k", "v", "IFDEQ", "B6ACB9D84A38FF74"]).await,
        OK
    );
    assert_eq!(
        c.cmd(&["SET", "k", "w", "IFDNE", "b6acb9d84a38ff74"]).await,
        OK
    );
    assert_eq!(
        c.cmd(&["SET", "n", "v", "IFDEQ", "b6acb9d84a38ff74"]).await,
        NIL
    );
    assert_eq!(
        c.cmd(&["SET", "n", "v", "IFDNE", "b6acb9d84a38ff74"]).await,
        OK
    );
}

#[tokio::test]
async fn set_conditions_exclude_each_other_and_nx_xx() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    for args in [
        &["SET", "k", "v", "NX", "IFEQ", "a"][..],
        &["SET", "k", "v", "IFEQ", "a", "XX"],
        &["SET", "k", "v", "IFEQ", "a", "IFNE", "b"],
        &["SET", "k", "v", "IFDEQ"],
        &["SET", "k", "v", "IFEQ", "a", "EX", "1", "PX", "1"],
    ] {
        assert_eq!(c.cmd(args).await, SYNTAX, "{args:?}");
    }
    assert_eq!(c.cmd(&["SADD", "s", "a"]).await, int(1));
    assert_eq!(c.cmd(&["SET", "s", "v", "IFEQ", "a"]).await, WRONGTYPE);
    assert_eq!(c.cmd(&["SET", "s", "v", "IFNE", "a"]).await, WRONGTYPE);
    assert_eq!(
        c.cmd(&["SET", "k", "v", "IFNE", "a", "PX", "30001"]).await,
        err("ERR TTL of 30001 ms is above this server's max-ttl of 30000 ms (raise --max-ttl)")
    );
}

#[tokio::test]
async fn delex_deletes_only_when_the_condition_holds() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["SET", "k", "me"]).await, OK);
    assert_eq!(c.cmd(&["DELEX", "k", "IFEQ", "you"]).await, int(0));
    assert_eq!(c.cmd(&["DELEX", "k", "IFNE", "me"]).await, int(0));
    assert_eq!(
        c.cmd(&["DELEX", "k", "IFDNE", "4A8A6F1B8E0C2B0D"]).await,
        int(1)
    );
    assert_eq!(c.cmd(&["DELEX", "k", "IFEQ", "me"]).await, int(0));
    assert_eq!(c.cmd(&["SET", "k", "me"]).await, OK);
    let d = c.cmd(&["DIGEST", "k"]).await;
    let d = d.lines().nth(1).unwrap().to_string();
    assert_eq!(c.cmd(&["DELEX", "k", "IFDEQ", &d]).await, int(1));
    // Without a condition: any type, like DEL.
    assert_eq!(c.cmd(&["SADD", "s", "a"]).await, int(1));
    assert_eq!(c.cmd(&["DELEX", "s", "IFEQ", "a"]).await, WRONGTYPE);
    assert_eq!(c.cmd(&["DELEX", "s"]).await, int(1));
    assert_eq!(c.cmd(&["DELEX", "s"]).await, int(0));
    for args in [
        &["DELEX", "k", "IFEQ"][..],
        &["DELEX", "k", "IFEQ", "a", "b"],
        &["DELEX", "k", "NX", "a"],
    ] {
        assert_eq!(c.cmd(args).await, SYNTAX, "{args:?}");
    }
    assert_eq!(
        c.cmd(&["DELEX"]).await,
        err("ERR wrong number of arguments for 'delex' command")
    );
}

#[tokio::test]
async fn delifeq_is_valkeys_compare_and_delete() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["DELIFEQ", "k", "me"]).await, int(0));
    assert_eq!(c.cmd(&["SET", "k", "me"]).await, OK);
    assert_eq!(c.cmd(&["DELIFEQ", "k", "you"]).await, int(0));
    assert_eq!(c.cmd(&["DELIFEQ", "k", "me"]).await, int(1));
    assert_eq!(c.cmd(&["EXISTS", "k"]).await, int(0));
    assert_eq!(c.cmd(&["RPUSH", "l", "me"]).await, int(1));
    assert_eq!(c.cmd(&["DELIFEQ", "l", "me"]).await, WRONGTYPE);
}

#[tokio::test]
async fn lua_reaches_the_same_commands() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["SET", "k", "me"]).await, OK);
    let script = "local d = redis.call('digest', KEYS[1]); if not d then return -1 end \
                  if redis.call('set', KEYS[1], 'me', 'ifdeq', d, 'px', 5000) then \
                  return redis.call('delex', KEYS[1], 'ifeq', ARGV[1]) end return -1";
    assert_eq!(c.cmd(&["EVAL", script, "1", "k", "me"]).await, int(1));
    assert_eq!(c.cmd(&["EVAL", script, "1", "k", "me"]).await, int(-1));
}

#[tokio::test]
async fn the_fence_refuses_set_if_but_not_the_deletes() {
    let h = start_with(|c| c.restart_delay = Some(Duration::from_secs(31))).await;
    let mut c = Raw::to(&h).await;
    let refused = c.cmd(&["SET", "k", "v", "IFNE", "x", "PX", "1000"]).await;
    assert!(refused.starts_with("-TRYAGAIN restart fence"), "{refused}");
    assert_eq!(c.cmd(&["DELEX", "k", "IFEQ", "v"]).await, int(0));
    assert_eq!(c.cmd(&["DELIFEQ", "k", "v"]).await, int(0));
    assert_eq!(c.cmd(&["DIGEST", "k"]).await, NIL);
}
