//! The restart fence, the max-TTL rule and --require-ttl.

use crate::support;
use std::time::Duration;
use support::*;

fn tryagain(ms: u64) -> String {
    err(&format!(
        "TRYAGAIN restart fence: this node restarted less than max-ttl ago and refuses writes for another {ms} ms"
    ))
}

fn above_max(ttl_ms: i64) -> String {
    err(&format!(
        "ERR TTL of {ttl_ms} ms is above this server's max-ttl of 30000 ms"
    ))
}

const REQUIRE_TTL: &str =
    "ERR this server runs with --require-ttl: every key needs a TTL (use PX, EX, PXAT or EXAT)";

async fn start_fenced() -> TestServer {
    start_with(|c| c.restart_delay = Some(Duration::from_secs(31))).await
}

// Writes refused and reads allowed on keys that exist during the fence: unit tests
// in src/durability/fence.rs (they put keys in behind the fence's back).

#[tokio::test]
async fn the_fence_lifts_once_the_restart_delay_has_passed() {
    let h = start_fenced().await;
    let mut c = Raw::to(&h).await;
    h.clock().advance(Duration::from_millis(30_999));
    assert_eq!(
        c.cmd(&["SET", "lock", "t", "NX", "PX", "1000"]).await,
        tryagain(1)
    );
    h.clock().advance(Duration::from_millis(1));
    assert_eq!(c.cmd(&["SET", "lock", "t", "NX", "PX", "1000"]).await, OK);
    let info = c.cmd(&["INFO", "fence"]).await;
    assert!(
        info.contains("fence_active:0\r\nfence_remaining_ms:0\r\n"),
        "{info}"
    );
    h.shutdown().await;
}

#[tokio::test]
async fn a_wall_clock_jump_does_not_end_the_fence() {
    let h = start_fenced().await;
    let mut c = Raw::to(&h).await;
    h.clock().jump_wall(3_600_000);
    assert_eq!(
        c.cmd(&["SET", "lock", "t", "PX", "1000"]).await,
        tryagain(31_000)
    );
    h.shutdown().await;
}

#[tokio::test]
async fn crash_restart_forgets_keys_and_starts_the_fence_again() {
    let h = start_fenced().await;
    h.clock().advance(Duration::from_secs(31));
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["SET", "lock", "t", "PX", "1000"]).await, OK);
    c.cmd(&["DEBUG", "CRASH-RESTART"]).await;
    assert!(c.closed().await, "clients are disconnected by a crash");
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["GET", "lock"]).await, NIL);
    assert_eq!(
        c.cmd(&["SET", "lock", "u", "PX", "1000"]).await,
        tryagain(31_000)
    );
    h.shutdown().await;
}

#[tokio::test]
async fn ttls_above_max_ttl_are_refused() {
    let h = start().await;
    let wall = h.clock().wall_ms();
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["SET", "k", "v", "PX", "30000"]).await, OK);
    assert_eq!(
        c.cmd(&["SET", "k", "v", "PX", "30001"]).await,
        above_max(30_001)
    );
    assert_eq!(
        c.cmd(&["SET", "k", "v", "EX", "31"]).await,
        above_max(31_000)
    );
    assert_eq!(c.cmd(&["SETEX", "k", "31", "v"]).await, above_max(31_000));
    assert_eq!(
        c.cmd(&["PSETEX", "k", "30001", "v"]).await,
        above_max(30_001)
    );
    assert_eq!(c.cmd(&["EXPIRE", "k", "31"]).await, above_max(31_000));
    assert_eq!(c.cmd(&["PEXPIRE", "k", "30001"]).await, above_max(30_001));
    assert_eq!(c.cmd(&["GETEX", "k", "EX", "31"]).await, above_max(31_000));
    let far = (wall + 3_600_000).to_string();
    assert_eq!(
        c.cmd(&["SET", "k", "v", "PXAT", &far]).await,
        above_max(3_600_000)
    );
    assert_eq!(c.cmd(&["PEXPIREAT", "k", &far]).await, above_max(3_600_000));
    assert_eq!(
        c.cmd(&["EXPIREAT", "k", &((wall + 3_600_000) / 1000).to_string()])
            .await,
        above_max(3_600_000)
    );
    // None of those changed the key.
    assert_eq!(c.cmd(&["PTTL", "k"]).await, int(30_000));
    h.shutdown().await;
}

#[tokio::test]
async fn redis_invalid_expire_time_wins_over_max_ttl() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["SET", "k", "v"]).await;
    assert_eq!(
        c.cmd(&["SET", "k", "v", "EX", "9223372036854775807"]).await,
        err("ERR invalid expire time in 'set' command")
    );
    assert_eq!(
        c.cmd(&["SET", "k", "v", "PX", "9223372036854775000"]).await,
        err("ERR invalid expire time in 'set' command")
    );
    assert_eq!(
        c.cmd(&["GETEX", "k", "EX", "9223372036854775807"]).await,
        err("ERR invalid expire time in 'getex' command")
    );
    assert_eq!(
        c.cmd(&["EXPIRE", "k", "9223372036854775807"]).await,
        err("ERR invalid expire time in 'expire' command")
    );
    assert_eq!(
        c.cmd(&["SETEX", "k", "9223372036854775807", "v"]).await,
        err("ERR invalid expire time in 'setex' command")
    );
    h.shutdown().await;
}

async fn start_require_ttl() -> TestServer {
    start_with(|c| c.require_ttl = true).await
}

#[tokio::test]
async fn require_ttl_refuses_writes_that_leave_a_key_without_ttl() {
    let h = start_require_ttl().await;
    let mut c = Raw::to(&h).await;
    let refused = err(REQUIRE_TTL);
    assert_eq!(c.cmd(&["SET", "k", "v"]).await, refused);
    assert_eq!(c.cmd(&["SET", "k", "v", "NX"]).await, refused);
    assert_eq!(c.cmd(&["SETNX", "k", "v"]).await, refused);
    assert_eq!(c.cmd(&["MSET", "k", "v"]).await, refused);
    assert_eq!(c.cmd(&["INCR", "n"]).await, refused);
    assert_eq!(c.cmd(&["SET", "k", "v", "KEEPTTL"]).await, refused);
    assert_eq!(c.cmd(&["GETSET", "k", "v"]).await, refused);
    assert_eq!(c.cmd(&["MSETNX", "k", "v"]).await, refused);
    assert_eq!(c.cmd(&["INCRBYFLOAT", "n", "1.5"]).await, refused);
    assert_eq!(c.cmd(&["APPEND", "k", "v"]).await, refused);
    assert_eq!(c.cmd(&["SETRANGE", "k", "3", "v"]).await, refused);
    assert_eq!(c.cmd(&["DBSIZE"]).await, int(0));
    h.shutdown().await;
}

#[tokio::test]
async fn require_ttl_allows_writes_with_a_ttl() {
    let h = start_require_ttl().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["SET", "k", "v", "NX", "PX", "1000"]).await, OK);
    assert_eq!(c.cmd(&["SET", "k", "w", "KEEPTTL"]).await, OK);
    assert_eq!(c.cmd(&["PTTL", "k"]).await, int(1000));
    assert_eq!(c.cmd(&["SETEX", "s", "5", "v"]).await, OK);
    assert_eq!(c.cmd(&["PEXPIRE", "k", "500"]).await, int(1));
    // Changing a value in place keeps its TTL, so these are allowed on a key with one.
    assert_eq!(c.cmd(&["APPEND", "k", "x"]).await, int(2));
    assert_eq!(c.cmd(&["SETRANGE", "k", "0", "y"]).await, int(2));
    assert_eq!(c.cmd(&["SET", "n", "1", "PX", "1000"]).await, OK);
    assert_eq!(c.cmd(&["INCRBYFLOAT", "n", "0.5"]).await, bulk("1.5"));
    assert_eq!(c.cmd(&["PTTL", "k"]).await, int(500));
    assert_eq!(c.cmd(&["PTTL", "n"]).await, int(1000));
    h.shutdown().await;
}

#[tokio::test]
async fn require_ttl_refuses_removing_a_ttl() {
    let h = start_require_ttl().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["SET", "k", "v", "PX", "1000"]).await;
    assert_eq!(c.cmd(&["PERSIST", "k"]).await, err(REQUIRE_TTL));
    assert_eq!(c.cmd(&["GETEX", "k", "PERSIST"]).await, err(REQUIRE_TTL));
    assert_eq!(c.cmd(&["PTTL", "k"]).await, int(1000));
    h.shutdown().await;
}

/// A sorted-set STORE with an empty result only deletes its destination (one with a
/// result is refused: unit test in src/durability/fence.rs, as no sorted set can be made here).
#[tokio::test]
async fn require_ttl_lets_empty_sorted_set_stores_delete() {
    let h = start_require_ttl().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["ZADD", "z", "1", "a"]).await, err(REQUIRE_TTL));
    for cmd in ["ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE"] {
        assert_eq!(c.cmd(&["SET", "d", "v", "PX", "1000"]).await, OK);
        assert_eq!(c.cmd(&[cmd, "d", "1", "nokey"]).await, int(0), "{cmd}");
        assert_eq!(c.cmd(&["EXISTS", "d"]).await, int(0));
    }
    h.shutdown().await;
}

#[tokio::test]
async fn the_fence_refuses_sorted_set_stores() {
    let h = start_fenced().await;
    let mut c = Raw::to(&h).await;
    for cmd in ["ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE"] {
        assert_eq!(
            c.cmd(&[cmd, "d", "1", "nokey"]).await,
            tryagain(31_000),
            "{cmd}"
        );
    }
    assert_eq!(c.cmd(&["ZUNION", "1", "nokey"]).await, "*0\r\n");
    h.shutdown().await;
}
