//! The restart fence, the max-TTL rule and --require-ttl.

use crate::support;
use std::time::Duration;
use support::*;

fn tryagain(ms: u64) -> String {
    err(&format!(
        "TRYAGAIN restart fence: this node restarted and may have granted locks that are still held; it refuses writes for another {ms} ms"
    ))
}

/// The fence of a node with no record of what it granted: it says how to declare a
/// brand-new node.
fn tryagain_no_history(ms: u64) -> String {
    err(&format!(
        "TRYAGAIN restart fence: this node restarted and may have granted locks that are still held; it refuses writes for another {ms} ms (its data directory holds no record of what it granted; a brand-new node is declared with `redlockd init --dir DIR` before its first start)"
    ))
}

fn above_max(ttl_ms: i64) -> String {
    err(&format!(
        "ERR TTL of {ttl_ms} ms is above this server's max-ttl of 30000 ms (raise --max-ttl)"
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
        tryagain_no_history(1)
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
        tryagain_no_history(31_000)
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
    // The crash came right after a 1 s grant: the fence waits for it (and the 1 s
    // reserved past it) + 1 s of margin, not for max-ttl.
    assert_eq!(
        c.cmd(&["SET", "lock", "u", "PX", "1000"]).await,
        tryagain(3_000)
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
            tryagain_no_history(31_000),
            "{cmd}"
        );
    }
    assert_eq!(c.cmd(&["ZUNION", "1", "nokey"]).await, "*0\r\n");
    h.shutdown().await;
}

/// INFO fence's rule and length, as `rule/length`.
async fn fence_rule(c: &mut Raw) -> String {
    let info = c.cmd(&["INFO", "fence"]).await;
    let field = |name: &str| {
        info.split("\r\n")
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or("?")
            .to_string()
    };
    format!("{}/{}", field("fence_rule:"), field("fence_length_ms:"))
}

/// A node of the test backend with the fence as in production (a fresh directory
/// declared new, max-ttl 30 s).
async fn start_declared_new() -> TestServer {
    start_with(|c| {
        c.restart_delay = None;
        c.fence_at_boot = false;
    })
    .await
}

#[tokio::test]
async fn a_declared_new_node_serves_at_once_and_says_why() {
    let h = start_declared_new().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(fence_rule(&mut c).await, "declared-new/0");
    assert_eq!(c.cmd(&["SET", "lock", "t", "NX", "PX", "1000"]).await, OK);
    h.shutdown().await;
}

#[tokio::test]
async fn a_node_without_a_record_is_fenced_for_max_ttl_and_says_how_to_declare_one() {
    let h = start_with(|c| c.restart_delay = None).await;
    let mut c = Raw::to(&h).await;
    assert_eq!(fence_rule(&mut c).await, "no-history/31000");
    assert_eq!(
        c.cmd(&["SET", "lock", "t", "NX", "PX", "1000"]).await,
        tryagain_no_history(31_000)
    );
    h.shutdown().await;
}

/// Only 1 s locks were granted: after a crash on the same boot the fence lasts until
/// the last of them expired (+ the reservation step + margin), not max-ttl.
#[tokio::test]
async fn after_a_crash_the_fence_lasts_as_long_as_the_locks_granted() {
    let h = start_declared_new().await;
    let mut c = Raw::to(&h).await;
    for i in 0..50 {
        let key = format!("lock{i}");
        assert_eq!(c.cmd(&["SET", &key, "t", "NX", "PX", "1000"]).await, OK);
        h.advance(Duration::from_millis(20));
    }
    // The last grant was 20 ms ago, until 980 ms from now; up to 1 s reserved past one.
    h.crash_restart();
    let mut c = Raw::to(&h).await;
    let rule = fence_rule(&mut c).await;
    let len: u64 = rule
        .strip_prefix("same-boot/")
        .expect(&rule)
        .parse()
        .unwrap();
    assert!((1_980..=2_980).contains(&len), "{rule}");
    assert_eq!(
        c.cmd(&["SET", "lock0", "u", "NX", "PX", "1000"]).await,
        tryagain(len)
    );
    h.advance(Duration::from_millis(len - 1));
    assert_eq!(
        c.cmd(&["SET", "lock0", "u", "NX", "PX", "1000"]).await,
        tryagain(1)
    );
    h.advance(Duration::from_millis(1));
    assert_eq!(c.cmd(&["SET", "lock0", "u", "NX", "PX", "1000"]).await, OK);
    h.shutdown().await;
}

/// After a reboot the monotonic clock started again: the fence waits, from boot, for
/// the longest TTL the last life granted (+ margin), even if it expired long ago.
#[tokio::test]
async fn after_a_reboot_the_fence_is_the_longest_ttl_granted() {
    let h = start_declared_new().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["SET", "a", "t", "PX", "1000"]).await, OK);
    assert_eq!(c.cmd(&["SET", "b", "t", "PX", "12000"]).await, OK);
    assert_eq!(c.cmd(&["SET", "c", "t"]).await, OK);
    assert_eq!(c.cmd(&["PEXPIRE", "c", "15500"]).await, int(1));
    h.crash_restart_after_reboot();
    let mut c = Raw::to(&h).await;
    // 15.5 s rounded up to the 1 s step, + 1 s of margin.
    assert_eq!(fence_rule(&mut c).await, "reboot/17000");
    assert_eq!(
        c.cmd(&["SET", "b", "u", "NX", "PX", "1000"]).await,
        tryagain(17_000)
    );
    // A crash during that fence, on the same boot: the fence is not shortened.
    h.advance(Duration::from_millis(4_000));
    h.crash_restart();
    let mut c = Raw::to(&h).await;
    assert_eq!(fence_rule(&mut c).await, "same-boot/13000");
    // And a reboot during it: what the earlier locks may still have left (12 s) counts
    // as this life's longest TTL; the margin is added once.
    h.crash_restart_after_reboot();
    let mut c = Raw::to(&h).await;
    assert_eq!(fence_rule(&mut c).await, "reboot/13000");
    h.shutdown().await;
}

/// A 20 s lock survives a clean shutdown; the next life runs with --max-ttl 2 s and
/// refuses the snapshot (a key outlives the new max-ttl): the lock is not restored,
/// and the fence still covers it, whatever the new max-ttl says.
#[tokio::test]
async fn a_lowered_max_ttl_never_shortens_the_fence() {
    for clean in [true, false] {
        let h = start_declared_new().await;
        let mut c = Raw::to(&h).await;
        assert_eq!(c.cmd(&["SET", "lock", "A", "NX", "PX", "20000"]).await, OK);
        h.advance(Duration::from_millis(1_000));
        assert!(
            !h.restart_with_max_ttl(Duration::from_secs(2), clean),
            "the snapshot is refused: a key has more TTL left than the new max-ttl"
        );
        let mut c = Raw::to(&h).await;
        assert_eq!(c.cmd(&["GET", "lock"]).await, NIL, "not restored");
        // 19 s left + 1 s reserved + 1 s margin.
        assert_eq!(fence_rule(&mut c).await, "same-boot/21000", "clean {clean}");
        h.advance(Duration::from_millis(20_999));
        assert_eq!(
            c.cmd(&["SET", "lock", "B", "NX", "PX", "2000"]).await,
            tryagain(1)
        );
        h.advance(Duration::from_millis(1));
        assert_eq!(c.cmd(&["SET", "lock", "B", "NX", "PX", "2000"]).await, OK);
        assert_eq!(
            c.cmd(&["SET", "lock", "B", "PX", "2001"]).await,
            err("ERR TTL of 2001 ms is above this server's max-ttl of 2000 ms (raise --max-ttl)")
        );
        h.shutdown().await;
    }
}

/// A raised max-ttl between lives keeps the snapshot (its keys are within the new one).
#[tokio::test]
async fn a_raised_max_ttl_keeps_the_snapshot() {
    let h = start_declared_new().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["SET", "lock", "A", "NX", "PX", "20000"]).await, OK);
    assert!(h.restart_with_max_ttl(Duration::from_secs(60), true));
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["GET", "lock"]).await, bulk("A"));
    assert_eq!(fence_rule(&mut c).await, "snapshot/0");
    h.shutdown().await;
}

/// The start's record cannot be made durable (a failed fsync): the node serves
/// nothing it could not record. It stays fenced for max-ttl and refuses grants after.
#[tokio::test]
async fn a_failed_fsync_at_boot_fences_and_refuses_grants() {
    let h = start_declared_new().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["SET", "lock", "A", "NX", "PX", "1000"]).await, OK);
    h.crash_restart_failing_fsync();
    let mut c = Raw::to(&h).await;
    assert_eq!(fence_rule(&mut c).await, "no-history/31000");
    h.advance(Duration::from_secs(31));
    assert_eq!(
        c.cmd(&["SET", "lock", "B", "NX", "PX", "1000"]).await,
        err("ERR this node could not record its start in its data directory and grants nothing (see its log); restart it")
    );
    h.crash_restart();
    let mut c = Raw::to(&h).await;
    h.advance(Duration::from_secs(31));
    assert_eq!(c.cmd(&["SET", "lock", "B", "NX", "PX", "1000"]).await, OK);
    h.shutdown().await;
}
