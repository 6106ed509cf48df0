//! The lock-delay (`--lock-delay`, `src/store/lock.rs`): a lock whose TTL ran out is
//! refused to new holders for the delay; a released one is free at once; keys that are
//! not locks are never delayed. On the manual clock.

use crate::support;
use std::time::Duration;
use support::*;

/// A node with a 5 s lock-delay (max-ttl is 30 s in tests).
async fn delayed() -> TestServer {
    start_with(|c| c.lock_delay = Duration::from_secs(5)).await
}

const REDLOCK_ACQUIRE: &str =
    "for _, key in ipairs(KEYS) do if redis.call('exists', key) == 1 then return 0 end end \
     for _, key in ipairs(KEYS) do redis.call('set', key, ARGV[1], 'PX', ARGV[2]) end return #KEYS";

/// Redisson's RLock acquire script (tryLockInnerAsync).
const REDISSON_ACQUIRE: &str = "if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then \
     redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; \
     return redis.call('pttl', KEYS[1]);";

const COMPARE_AND_DELETE: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

fn info_field(info: &str, name: &str) -> String {
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("{name} in INFO: {info}"))
        .trim()
        .to_string()
}

#[tokio::test]
async fn an_expired_lock_is_refused_for_the_delay_then_granted() {
    let h = delayed().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["SET", "lock", "a", "NX", "PX", "1000"]).await, OK);
    h.advance(Duration::from_millis(1001));
    // Reads: absent.
    assert_eq!(c.cmd(&["GET", "lock"]).await, NIL);
    assert_eq!(c.cmd(&["EXISTS", "lock"]).await, int(0));
    assert_eq!(c.cmd(&["TTL", "lock"]).await, int(-2));
    assert_eq!(c.cmd(&["PTTL", "lock"]).await, int(-2));
    assert_eq!(c.cmd(&["KEYS", "*"]).await, "*0\r\n");
    assert_eq!(c.cmd(&["SCAN", "0"]).await, "*2\r\n$1\r\n0\r\n*0\r\n");
    // Writes that could take it: refused as "held elsewhere".
    assert_eq!(c.cmd(&["SET", "lock", "b", "NX", "PX", "1000"]).await, NIL);
    assert_eq!(c.cmd(&["SET", "lock", "b"]).await, NIL);
    assert_eq!(c.cmd(&["SETNX", "lock", "b"]).await, int(0));
    assert_eq!(
        c.cmd(&["FENCING.GRANT", "lock", "b", "PX", "1000"]).await,
        NIL
    );
    let tryagain = c.cmd(&["HSET", "lock", "f", "1"]).await;
    assert!(tryagain.starts_with("-TRYAGAIN lock-delay: "), "{tryagain}");
    assert!(tryagain.contains("another 5000 ms"), "{tryagain}");
    assert!(c
        .cmd(&["INCR", "lock"])
        .await
        .starts_with("-TRYAGAIN lock-delay"));
    assert!(c
        .cmd(&["SET", "lock", "b", "GET"])
        .await
        .starts_with("-TRYAGAIN lock-delay"));
    for write in [
        &["SETEX", "lock", "1", "b"][..],
        &["GETSET", "lock", "b"],
        &["MSET", "lock", "b"],
    ] {
        let reply = c.cmd(write).await;
        assert!(
            reply.starts_with("-TRYAGAIN lock-delay"),
            "{write:?}: {reply}"
        );
    }
    assert_eq!(c.cmd(&["SET", "lock", "b", "IFNE", "x"]).await, NIL);
    // Commands that create nothing answer for an absent key.
    assert_eq!(c.cmd(&["PEXPIRE", "lock", "1000"]).await, int(0));
    assert_eq!(c.cmd(&["SET", "lock", "b", "XX"]).await, NIL);
    // The old holder's own release does not end the delay (it no longer holds it).
    assert_eq!(c.cmd(&["DELIFEQ", "lock", "a"]).await, int(0));
    assert_eq!(c.cmd(&["DELEX", "lock", "IFEQ", "a"]).await, int(0));
    assert_eq!(
        c.cmd(&["EVAL", COMPARE_AND_DELETE, "1", "lock", "a"]).await,
        int(0)
    );
    // The delay ends 5 s after the deadline: the last refused millisecond, then granted.
    h.advance(Duration::from_millis(4999));
    assert_eq!(c.cmd(&["SET", "lock", "b", "NX", "PX", "1000"]).await, NIL);
    h.advance(Duration::from_millis(1));
    assert_eq!(c.cmd(&["SET", "lock", "b", "NX", "PX", "1000"]).await, OK);
    assert_eq!(c.cmd(&["GET", "lock"]).await, bulk("b"));
}

#[tokio::test]
async fn a_released_lock_is_granted_at_once() {
    let h = delayed().await;
    let mut c = Raw::to(&h).await;
    let take = ["SET", "lock", "a", "NX", "PX", "1000"];
    let retake = ["SET", "lock", "b", "NX", "PX", "1000"];
    let releases: Vec<Vec<&str>> = vec![
        vec!["DEL", "lock"],
        vec!["UNLINK", "lock"],
        vec!["DELIFEQ", "lock", "a"],
        vec!["DELEX", "lock", "IFEQ", "a"],
        vec!["DELEX", "lock"],
        vec!["EVAL", COMPARE_AND_DELETE, "1", "lock", "a"],
    ];
    for release in &releases {
        assert_eq!(c.cmd(&take).await, OK);
        assert_eq!(c.cmd(release).await, int(1), "{release:?}");
        assert_eq!(c.cmd(&retake).await, OK, "after {release:?}");
        assert_eq!(c.cmd(&["DEL", "lock"]).await, int(1));
    }
    // SET IFEQ overwrites: the new holder's lock, still a lock.
    assert_eq!(c.cmd(&take).await, OK);
    assert_eq!(
        c.cmd(&["SET", "lock", "b", "IFEQ", "a", "PX", "1000"])
            .await,
        OK
    );
    h.advance(Duration::from_millis(1001));
    assert_eq!(c.cmd(&retake).await, NIL);
    // DEL ends a delay (an operator's way to free a lock at once); it answers 0: the
    // key reads as absent.
    assert_eq!(c.cmd(&["DEL", "lock"]).await, int(0));
    assert_eq!(c.cmd(&retake).await, OK);
}

#[tokio::test]
async fn keys_that_are_not_locks_are_never_delayed() {
    let h = delayed().await;
    let mut c = Raw::to(&h).await;
    // A cache entry and a rate limit, outside scripts.
    assert_eq!(c.cmd(&["SET", "cache", "v", "EX", "1"]).await, OK);
    assert_eq!(c.cmd(&["INCR", "rate"]).await, int(1));
    assert_eq!(c.cmd(&["EXPIRE", "rate", "1"]).await, int(1));
    // A lock rewritten unconditionally is no longer one; PERSIST unmarks too.
    assert_eq!(
        c.cmd(&["SET", "rewritten", "a", "NX", "PX", "1000"]).await,
        OK
    );
    assert_eq!(c.cmd(&["SET", "rewritten", "b", "PX", "1000"]).await, OK);
    assert_eq!(
        c.cmd(&["SET", "persisted", "a", "NX", "PX", "1000"]).await,
        OK
    );
    assert_eq!(c.cmd(&["PERSIST", "persisted"]).await, int(1));
    assert_eq!(c.cmd(&["PEXPIRE", "persisted", "1000"]).await, int(1));
    // SET NX without a TTL makes no lock.
    assert_eq!(c.cmd(&["SET", "nottl", "a", "NX"]).await, OK);
    assert_eq!(c.cmd(&["PEXPIRE", "nottl", "1000"]).await, int(1));
    h.advance(Duration::from_millis(1001));
    for key in ["cache", "rate", "rewritten", "persisted", "nottl"] {
        assert_eq!(
            c.cmd(&["SET", key, "x", "NX", "PX", "1000"]).await,
            OK,
            "{key}"
        );
    }
    assert_eq!(c.cmd(&["INCR", "rate2"]).await, int(1));
}

#[tokio::test]
async fn with_the_delay_off_an_expired_lock_is_granted_at_once() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "lock-delay"]).await,
        "*2\r\n$10\r\nlock-delay\r\n$1\r\n0\r\n"
    );
    assert_eq!(c.cmd(&["SET", "lock", "a", "NX", "PX", "1000"]).await, OK);
    assert_eq!(
        c.cmd(&["EVAL", REDLOCK_ACQUIRE, "1", "nr", "a", "1000"])
            .await,
        int(1)
    );
    h.advance(Duration::from_millis(1001));
    assert_eq!(c.cmd(&["SET", "lock", "b", "NX", "PX", "1000"]).await, OK);
    assert_eq!(
        c.cmd(&["EVAL", REDLOCK_ACQUIRE, "1", "nr", "b", "1000"])
            .await,
        int(1)
    );
    let info = c.cmd(&["INFO", "fence"]).await;
    assert_eq!(info_field(&info, "lock_delay_ms"), "0");
    assert_eq!(info_field(&info, "lock_delayed_refusals"), "0");
}

#[tokio::test]
async fn scripts_see_a_delayed_lock_as_held_and_multi_as_absent() {
    let h = delayed().await;
    let mut c = Raw::to(&h).await;
    // node-redlock's acquire: EXISTS then SET PX, in a script (a lock).
    assert_eq!(
        c.cmd(&["EVAL", REDLOCK_ACQUIRE, "1", "nr", "a", "1000"])
            .await,
        int(1)
    );
    // Redisson's: HINCRBY + PEXPIRE in a script (a lock).
    let redisson = ["EVAL", REDISSON_ACQUIRE, "1", "rl", "1000", "client-a:1"];
    assert_eq!(c.cmd(&redisson).await, NIL);
    h.advance(Duration::from_millis(1001));
    assert_eq!(
        c.cmd(&["EVAL", REDLOCK_ACQUIRE, "1", "nr", "b", "1000"])
            .await,
        int(0)
    );
    // Redisson waits the PTTL it is answered: the delay left.
    let other = ["EVAL", REDISSON_ACQUIRE, "1", "rl", "1000", "client-b:1"];
    assert_eq!(c.cmd(&other).await, int(5000));
    // A script's write that could take it raises.
    let raised = c
        .cmd(&[
            "EVAL",
            "return redis.call('hincrby', KEYS[1], 'f', 1)",
            "1",
            "rl",
        ])
        .await;
    assert!(raised.starts_with("-TRYAGAIN lock-delay"), "{raised}");
    let set_nx = "return redis.call('set', KEYS[1], 'b', 'NX', 'PX', 1000)";
    assert_eq!(c.cmd(&["EVAL", set_nx, "1", "nr"]).await, NIL);
    // MULTI/EXEC: as the network sees it.
    assert_eq!(c.cmd(&["MULTI"]).await, OK);
    assert_eq!(c.cmd(&["EXISTS", "nr"]).await, "+QUEUED\r\n");
    assert_eq!(
        c.cmd(&["SET", "nr", "b", "NX", "PX", "1000"]).await,
        "+QUEUED\r\n"
    );
    assert_eq!(
        c.cmd(&["SET", "fresh", "b", "NX", "PX", "1000"]).await,
        "+QUEUED\r\n"
    );
    assert_eq!(c.cmd(&["EXEC"]).await, "*3\r\n:0\r\n$-1\r\n+OK\r\n");
    h.advance(Duration::from_millis(5000));
    assert_eq!(
        c.cmd(&["EVAL", REDLOCK_ACQUIRE, "1", "nr", "b", "1000"])
            .await,
        int(1)
    );
    assert_eq!(c.cmd(&other).await, NIL);
}

#[tokio::test]
async fn only_keys_under_a_prefix_are_delayed_when_prefixes_are_set() {
    let h = start_with(|c| {
        c.lock_delay = Duration::from_secs(5);
        c.lock_delay_prefixes = vec!["lock:".into(), "mutex:".into()];
    })
    .await;
    let mut c = Raw::to(&h).await;
    for key in ["lock:a", "mutex:b", "other"] {
        assert_eq!(c.cmd(&["SET", key, "v", "NX", "PX", "1000"]).await, OK);
    }
    h.advance(Duration::from_millis(1001));
    assert_eq!(
        c.cmd(&["SET", "lock:a", "w", "NX", "PX", "1000"]).await,
        NIL
    );
    assert_eq!(
        c.cmd(&["SET", "mutex:b", "w", "NX", "PX", "1000"]).await,
        NIL
    );
    assert_eq!(c.cmd(&["SET", "other", "w", "NX", "PX", "1000"]).await, OK);
    // Changed live: the prefixes apply to every lock from then on.
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "lock-delay-prefix", "other"])
            .await,
        OK
    );
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "lock-delay-prefix"]).await,
        "*2\r\n$17\r\nlock-delay-prefix\r\n$5\r\nother\r\n"
    );
    assert_eq!(c.cmd(&["SET", "lock:a", "w", "NX", "PX", "1000"]).await, OK);
    h.advance(Duration::from_millis(1001));
    assert_eq!(c.cmd(&["SET", "other", "x", "NX", "PX", "1000"]).await, NIL);
}

#[tokio::test]
async fn config_set_turns_the_delay_on_and_off_within_max_ttl() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    let too_long = c.cmd(&["CONFIG", "SET", "lock-delay", "31s"]).await;
    assert_eq!(
        too_long,
        "-ERR CONFIG SET failed (possibly related to argument 'lock-delay') - argument must be at most max-ttl (30000 ms)\r\n"
    );
    let bad = c.cmd(&["CONFIG", "SET", "lock-delay", "soon"]).await;
    assert!(bad.starts_with("-ERR CONFIG SET failed"), "{bad}");
    assert_eq!(c.cmd(&["CONFIG", "SET", "lock-delay", "2s"]).await, OK);
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "lock-delay"]).await,
        "*2\r\n$10\r\nlock-delay\r\n$4\r\n2000\r\n"
    );
    assert_eq!(c.cmd(&["SET", "lock", "a", "NX", "PX", "1000"]).await, OK);
    h.advance(Duration::from_millis(1001));
    assert_eq!(c.cmd(&["SET", "lock", "b", "NX", "PX", "1000"]).await, NIL);
    assert_eq!(c.cmd(&["CONFIG", "SET", "lock-delay", "0"]).await, OK);
    assert_eq!(c.cmd(&["SET", "lock", "b", "NX", "PX", "1000"]).await, OK);
}

#[tokio::test]
async fn info_counts_delayed_locks_and_refusals_and_the_sweeper_reclaims_them() {
    let h = start_with(|c| {
        c.lock_delay = Duration::from_secs(5);
        c.metrics_addr = Some("127.0.0.1:0".parse().unwrap());
    })
    .await;
    let mut c = Raw::to(&h).await;
    for key in ["a", "b", "c"] {
        assert_eq!(c.cmd(&["SET", key, "v", "NX", "PX", "1000"]).await, OK);
    }
    assert_eq!(c.cmd(&["SET", "plain", "v", "PX", "1000"]).await, OK);
    h.advance(Duration::from_millis(1001));
    // Swept: the plain key is gone; the delayed locks stay stored (DBSIZE counts
    // stored keys, as Redis counts expired keys not yet reclaimed).
    assert_eq!(c.cmd(&["DBSIZE"]).await, int(3));
    assert_eq!(c.cmd(&["SET", "a", "w", "NX", "PX", "1000"]).await, NIL);
    assert!(c
        .cmd(&["HSET", "b", "f", "v"])
        .await
        .starts_with("-TRYAGAIN"));
    let info = c.cmd(&["INFO", "fence"]).await;
    assert_eq!(info_field(&info, "lock_delay_ms"), "5000");
    assert_eq!(info_field(&info, "lock_delay_active"), "3");
    assert_eq!(info_field(&info, "lock_delayed_refusals"), "2");
    let body = scrape(h.metrics_addr().expect("metrics bound")).await;
    assert!(
        body.contains("redlockd_lock_refusals_total{reason=\"lock_delay\"} 2\n"),
        "{body}"
    );
    h.advance(Duration::from_millis(5000));
    assert_eq!(c.cmd(&["DBSIZE"]).await, int(0));
    let info = c.cmd(&["INFO", "fence"]).await;
    assert_eq!(info_field(&info, "lock_delay_active"), "0");
}

#[tokio::test]
async fn a_lock_delay_above_max_ttl_is_refused_at_start() {
    let config = redlockd::Config {
        lock_delay: Duration::from_secs(31),
        ..redlockd::Config::for_tests()
    };
    let e = config.validate().expect_err("lock-delay above max-ttl");
    assert_eq!(
        e.to_string(),
        "lock-delay (31000 ms) is longer than max-ttl (30000 ms)"
    );
}

/// The restart fence and the delay compose: a node that crashed while a lock was
/// delayed keeps refusing it until the delay would have ended (the reach it records
/// covers each deadline plus the delay), then grants it.
#[tokio::test]
async fn after_a_crash_the_fence_outlasts_a_delay_the_node_forgot() {
    let h = start_with(|c| {
        c.restart_delay = None;
        c.fence_at_boot = false;
        c.lock_delay = Duration::from_secs(5);
    })
    .await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["SET", "lock", "a", "NX", "PX", "1000"]).await, OK);
    h.advance(Duration::from_millis(1001));
    assert_eq!(c.cmd(&["SET", "lock", "b", "NX", "PX", "1000"]).await, NIL);
    h.crash_restart();
    let mut c = Raw::to(&h).await;
    // The delay would end 4999 ms from now; the fence lasts at least that.
    let refused = c.cmd(&["SET", "lock", "b", "NX", "PX", "1000"]).await;
    assert!(refused.starts_with("-TRYAGAIN restart fence"), "{refused}");
    h.advance(Duration::from_millis(4999));
    let refused = c.cmd(&["SET", "lock", "b", "NX", "PX", "1000"]).await;
    assert!(refused.starts_with("-TRYAGAIN restart fence"), "{refused}");
    h.advance(h.fence_remaining());
    assert_eq!(c.cmd(&["SET", "lock", "b", "NX", "PX", "1000"]).await, OK);
    h.shutdown().await;
}

/// Without a record the fence is max-ttl + the lock-delay + 1 s.
#[tokio::test]
async fn the_default_fence_without_a_record_adds_the_delay() {
    let h = start_with(|c| {
        c.restart_delay = None;
        c.lock_delay = Duration::from_secs(5);
    })
    .await;
    let mut c = Raw::to(&h).await;
    let info = c.cmd(&["INFO", "fence"]).await;
    assert_eq!(info_field(&info, "fence_length_ms"), "36000");
    h.shutdown().await;
}

/// The writes that find only as they run that they create a key (SORT ... STORE,
/// BITFIELD SET, GEORADIUS ... STORE, XGROUP CREATE ... MKSTREAM) cannot replace a
/// delayed lock either; GETEX, which creates nothing, reads it as absent.
#[tokio::test]
async fn conditional_writers_cannot_take_a_delayed_lock() {
    let h = delayed().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["SET", "lock", "a", "NX", "PX", "1000"]).await, OK);
    assert_eq!(c.cmd(&["RPUSH", "src", "3", "1", "2"]).await, int(3));
    assert_eq!(c.cmd(&["GEOADD", "geo", "0", "0", "m"]).await, int(1));
    h.advance(Duration::from_millis(1001));
    for cmd in [
        &["SORT", "src", "STORE", "lock"][..],
        &["BITFIELD", "lock", "SET", "u8", "0", "1"],
        &["GEORADIUS", "geo", "0", "0", "1", "km", "STORE", "lock"],
        &["XGROUP", "CREATE", "lock", "g", "$", "MKSTREAM"],
    ] {
        let reply = c.cmd(cmd).await;
        assert!(
            reply.starts_with("-TRYAGAIN lock-delay: "),
            "{cmd:?}: {reply}"
        );
    }
    assert_eq!(c.cmd(&["GETEX", "lock", "PX", "100"]).await, NIL);
    assert_eq!(c.cmd(&["EXISTS", "lock"]).await, int(0));
    h.advance(Duration::from_millis(5000));
    assert_eq!(c.cmd(&["SORT", "src", "STORE", "lock"]).await, int(3));
}
