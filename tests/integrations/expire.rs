//! Expiry: EXPIRE/PEXPIRE/EXPIREAT/PEXPIREAT with NX/XX/GT/LT, TTL/PTTL/EXPIRETIME/
//! PEXPIRETIME/PERSIST, expiry driven by the manual clock, and wall-clock jumps.

use crate::support;
use redlockd::clock::MANUAL_WALL_START_MS;
use std::time::Duration;
use support::*;

const HOUR_MS: i64 = 3_600_000;

#[tokio::test]
async fn expire_family_sets_ttls_in_their_units() {
    let h = start().await;
    let wall = h.clock().wall_ms();
    let mut c = Raw::to(&h).await;
    c.cmd(&["SET", "k", "v"]).await;
    assert_eq!(c.cmd(&["EXPIRE", "k", "10"]).await, int(1));
    assert_eq!(c.cmd(&["PTTL", "k"]).await, int(10_000));
    assert_eq!(c.cmd(&["PEXPIRE", "k", "2500"]).await, int(1));
    assert_eq!(c.cmd(&["PTTL", "k"]).await, int(2500));
    let at = ((wall + 20_000) / 1000).to_string();
    assert_eq!(c.cmd(&["EXPIREAT", "k", &at]).await, int(1));
    assert_eq!(c.cmd(&["PTTL", "k"]).await, int(20_000));
    let at = (wall + 12_345).to_string();
    assert_eq!(c.cmd(&["PEXPIREAT", "k", &at]).await, int(1));
    assert_eq!(c.cmd(&["PEXPIRETIME", "k"]).await, int(wall + 12_345));
    h.shutdown().await;
}

#[tokio::test]
async fn expire_on_a_missing_key_returns_zero() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["EXPIRE", "k", "10"]).await, int(0));
    assert_eq!(c.cmd(&["PEXPIRE", "k", "10", "NX"]).await, int(0));
    assert_eq!(c.cmd(&["EXISTS", "k"]).await, int(0));
    h.shutdown().await;
}

#[tokio::test]
async fn expire_with_a_time_in_the_past_deletes_the_key_and_returns_one() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    for args in [
        ["EXPIRE", "k", "0"],
        ["EXPIRE", "k", "-10"],
        ["PEXPIRE", "k", "-1"],
        ["EXPIREAT", "k", "1"],
        ["PEXPIREAT", "k", "-9223372036854775808"],
    ] {
        c.cmd(&["SET", "k", "v"]).await;
        assert_eq!(c.cmd(&args).await, int(1), "{args:?}");
        assert_eq!(c.cmd(&["EXISTS", "k"]).await, int(0), "{args:?}");
    }
    h.shutdown().await;
}

#[tokio::test]
async fn expire_nx_only_sets_a_ttl_on_a_key_without_one() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["SET", "k", "v"]).await;
    assert_eq!(c.cmd(&["PEXPIRE", "k", "5000", "NX"]).await, int(1));
    assert_eq!(c.cmd(&["PEXPIRE", "k", "9000", "nx"]).await, int(0));
    assert_eq!(c.cmd(&["PTTL", "k"]).await, int(5000));
    h.shutdown().await;
}

#[tokio::test]
async fn expire_xx_only_changes_an_existing_ttl() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["SET", "k", "v"]).await;
    assert_eq!(c.cmd(&["PEXPIRE", "k", "5000", "XX"]).await, int(0));
    assert_eq!(c.cmd(&["PTTL", "k"]).await, int(-1));
    c.cmd(&["PEXPIRE", "k", "5000"]).await;
    assert_eq!(c.cmd(&["PEXPIRE", "k", "7000", "XX"]).await, int(1));
    assert_eq!(c.cmd(&["PTTL", "k"]).await, int(7000));
    h.shutdown().await;
}

#[tokio::test]
async fn expire_gt_only_lengthens_and_treats_no_ttl_as_infinite() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["SET", "k", "v"]).await;
    assert_eq!(c.cmd(&["PEXPIRE", "k", "5000", "GT"]).await, int(0));
    assert_eq!(c.cmd(&["PTTL", "k"]).await, int(-1));
    c.cmd(&["PEXPIRE", "k", "5000"]).await;
    assert_eq!(c.cmd(&["PEXPIRE", "k", "4000", "GT"]).await, int(0));
    assert_eq!(c.cmd(&["PEXPIRE", "k", "5000", "GT"]).await, int(0));
    assert_eq!(c.cmd(&["PEXPIRE", "k", "6000", "gt"]).await, int(1));
    assert_eq!(c.cmd(&["PTTL", "k"]).await, int(6000));
    assert_eq!(c.cmd(&["PEXPIRE", "k", "7000", "XX", "GT"]).await, int(1));
    assert_eq!(c.cmd(&["PTTL", "k"]).await, int(7000));
    h.shutdown().await;
}

#[tokio::test]
async fn expire_lt_only_shortens_and_applies_to_a_key_without_ttl() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["SET", "k", "v"]).await;
    assert_eq!(c.cmd(&["PEXPIRE", "k", "5000", "LT"]).await, int(1));
    assert_eq!(c.cmd(&["PEXPIRE", "k", "6000", "LT"]).await, int(0));
    assert_eq!(c.cmd(&["PEXPIRE", "k", "5000", "LT"]).await, int(0));
    assert_eq!(c.cmd(&["PEXPIRE", "k", "4000", "lt"]).await, int(1));
    assert_eq!(c.cmd(&["PTTL", "k"]).await, int(4000));
    c.cmd(&["PERSIST", "k"]).await;
    assert_eq!(c.cmd(&["PEXPIRE", "k", "4000", "XX", "LT"]).await, int(0));
    h.shutdown().await;
}

#[tokio::test]
async fn expire_option_errors_match_redis() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["SET", "k", "v"]).await;
    assert_eq!(
        c.cmd(&["EXPIRE", "k", "10", "foo"]).await,
        err("ERR Unsupported option foo")
    );
    // Options are checked before the number.
    assert_eq!(
        c.cmd(&["EXPIRE", "k", "abc", "foo"]).await,
        err("ERR Unsupported option foo")
    );
    let nx = err("ERR NX and XX, GT or LT options at the same time are not compatible");
    assert_eq!(c.cmd(&["EXPIRE", "k", "10", "NX", "XX"]).await, nx);
    assert_eq!(c.cmd(&["EXPIRE", "k", "10", "GT", "NX"]).await, nx);
    assert_eq!(c.cmd(&["PEXPIRE", "k", "10", "NX", "LT"]).await, nx);
    assert_eq!(
        c.cmd(&["EXPIRE", "k", "10", "GT", "LT"]).await,
        err("ERR GT and LT options at the same time are not compatible")
    );
    assert_eq!(
        c.cmd(&["EXPIRE", "k", "abc"]).await,
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(
        c.cmd(&["EXPIRE", "k", "9223372036854775807"]).await,
        err("ERR invalid expire time in 'expire' command")
    );
    assert_eq!(
        c.cmd(&["PEXPIRE", "k", "9223372036854775807"]).await,
        err("ERR invalid expire time in 'pexpire' command")
    );
    assert_eq!(
        c.cmd(&["EXPIREAT", "k", "-9223372036854775808"]).await,
        err("ERR invalid expire time in 'expireat' command")
    );
    assert_eq!(
        c.cmd(&["EXPIRE", "k"]).await,
        err("ERR wrong number of arguments for 'expire' command")
    );
    assert_eq!(c.cmd(&["PTTL", "k"]).await, int(-1));
    h.shutdown().await;
}

#[tokio::test]
async fn ttl_and_pttl_report_missing_and_persistent_keys() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["TTL", "k"]).await, int(-2));
    assert_eq!(c.cmd(&["PTTL", "k"]).await, int(-2));
    assert_eq!(c.cmd(&["EXPIRETIME", "k"]).await, int(-2));
    assert_eq!(c.cmd(&["PEXPIRETIME", "k"]).await, int(-2));
    c.cmd(&["SET", "k", "v"]).await;
    assert_eq!(c.cmd(&["TTL", "k"]).await, int(-1));
    assert_eq!(c.cmd(&["PTTL", "k"]).await, int(-1));
    assert_eq!(c.cmd(&["EXPIRETIME", "k"]).await, int(-1));
    assert_eq!(c.cmd(&["PEXPIRETIME", "k"]).await, int(-1));
    h.shutdown().await;
}

#[tokio::test]
async fn ttl_rounds_to_the_nearest_second() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["SET", "k", "v", "PX", "1499"]).await;
    assert_eq!(c.cmd(&["TTL", "k"]).await, int(1));
    c.cmd(&["SET", "k", "v", "PX", "1500"]).await;
    assert_eq!(c.cmd(&["TTL", "k"]).await, int(2));
    c.cmd(&["SET", "k", "v", "PX", "400"]).await;
    assert_eq!(c.cmd(&["TTL", "k"]).await, int(0));
    h.shutdown().await;
}

#[tokio::test]
async fn expiretime_rounds_to_the_nearest_second() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    // The manual clock's wall time starts on a whole second.
    let start_s = MANUAL_WALL_START_MS / 1000;
    c.cmd(&["SET", "k", "v", "PX", "1500"]).await;
    assert_eq!(
        c.cmd(&["PEXPIRETIME", "k"]).await,
        int(MANUAL_WALL_START_MS + 1500)
    );
    assert_eq!(c.cmd(&["EXPIRETIME", "k"]).await, int(start_s + 2));
    c.cmd(&["SET", "k", "v", "PX", "1499"]).await;
    assert_eq!(c.cmd(&["EXPIRETIME", "k"]).await, int(start_s + 1));
    h.shutdown().await;
}

#[tokio::test]
async fn persist_removes_the_ttl_once() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["PERSIST", "k"]).await, int(0));
    c.cmd(&["SET", "k", "v", "PX", "100"]).await;
    assert_eq!(c.cmd(&["PERSIST", "k"]).await, int(1));
    assert_eq!(c.cmd(&["PERSIST", "k"]).await, int(0));
    assert_eq!(c.cmd(&["PTTL", "k"]).await, int(-1));
    h.clock().advance(Duration::from_secs(1));
    assert_eq!(c.cmd(&["GET", "k"]).await, bulk("v"));
    h.shutdown().await;
}

#[tokio::test]
async fn pttl_counts_down_with_the_clock() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["SET", "k", "v", "PX", "1000"]).await;
    h.clock().advance(Duration::from_millis(250));
    assert_eq!(c.cmd(&["PTTL", "k"]).await, int(750));
    h.clock().advance(Duration::from_millis(750));
    assert_eq!(c.cmd(&["PTTL", "k"]).await, int(0));
    assert_eq!(c.cmd(&["GET", "k"]).await, bulk("v"));
    h.clock().advance(Duration::from_millis(1));
    assert_eq!(c.cmd(&["PTTL", "k"]).await, int(-2));
    assert_eq!(c.cmd(&["GET", "k"]).await, NIL);
    h.shutdown().await;
}

#[tokio::test]
async fn expired_keys_are_reclaimed_as_soon_as_the_clock_advances() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    for i in 0..100 {
        let ttl = if i % 2 == 0 { "100" } else { "10000" };
        c.cmd(&["SET", &format!("k{i}"), "v", "PX", ttl]).await;
    }
    c.cmd(&["SET", "forever", "v"]).await;
    assert_eq!(c.cmd(&["DBSIZE"]).await, int(101));
    h.clock().advance(Duration::from_millis(101));
    // No read touched the keys: the sweep inside `advance` reclaimed them.
    assert_eq!(c.cmd(&["DBSIZE"]).await, int(51));
    let info = c.cmd(&["INFO", "stats"]).await;
    assert!(info.contains("expired_keys:50\r\n"), "{info}");
    h.shutdown().await;
}

#[tokio::test]
async fn a_wall_clock_jump_does_not_change_pttl_or_expiry() {
    for jump in [HOUR_MS, -HOUR_MS] {
        let h = start().await;
        let mut c = Raw::to(&h).await;
        c.cmd(&["SET", "lock", "t", "PX", "10000"]).await;
        h.clock().jump_wall(jump);
        assert_eq!(c.cmd(&["PTTL", "lock"]).await, int(10_000), "jump {jump}");
        h.clock().advance(Duration::from_millis(9_999));
        assert_eq!(c.cmd(&["GET", "lock"]).await, bulk("t"), "jump {jump}");
        assert_eq!(c.cmd(&["PTTL", "lock"]).await, int(1), "jump {jump}");
        h.clock().advance(Duration::from_millis(2));
        assert_eq!(c.cmd(&["GET", "lock"]).await, NIL, "jump {jump}");
        h.shutdown().await;
    }
}

#[tokio::test]
async fn a_wall_clock_jump_moves_expiretime_and_time_together() {
    for jump in [HOUR_MS, -HOUR_MS] {
        let h = start().await;
        let mut c = Raw::to(&h).await;
        c.cmd(&["SET", "lock", "t", "PX", "10000"]).await;
        assert_eq!(
            c.cmd(&["PEXPIRETIME", "lock"]).await,
            int(MANUAL_WALL_START_MS + 10_000)
        );
        h.clock().jump_wall(jump);
        let wall = MANUAL_WALL_START_MS + jump;
        assert_eq!(c.cmd(&["PEXPIRETIME", "lock"]).await, int(wall + 10_000));
        assert_eq!(c.cmd(&["EXPIRETIME", "lock"]).await, int(wall / 1000 + 10));
        let secs = (wall / 1000).to_string();
        assert_eq!(
            c.cmd(&["TIME"]).await,
            format!("*2\r\n{}{}", bulk(&secs), bulk("0"))
        );
        h.shutdown().await;
    }
}

#[tokio::test]
async fn expireat_after_a_wall_jump_uses_the_new_wall_time() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["SET", "k", "v"]).await;
    h.clock().jump_wall(-HOUR_MS);
    // An instant 5 s after the (new) wall time is a TTL of 5 s.
    let at = (MANUAL_WALL_START_MS - HOUR_MS + 5000).to_string();
    assert_eq!(c.cmd(&["PEXPIREAT", "k", &at]).await, int(1));
    assert_eq!(c.cmd(&["PTTL", "k"]).await, int(5000));
    // The original start is now an hour in the future: above the 30 s max-ttl.
    let at = MANUAL_WALL_START_MS.to_string();
    let reply = c.cmd(&["PEXPIREAT", "k", &at]).await;
    assert!(
        reply.starts_with("-ERR TTL of 3600000 ms is above"),
        "{reply}"
    );
    h.shutdown().await;
}

/// On the real clock, a Unix time given to PXAT, EXPIREAT or PEXPIREAT reads back
/// exactly from PEXPIRETIME (Redis's unit/expire checks this), and PTTL never exceeds
/// the time left to it (unit/type/string): the deadline is kept on the monotonic clock,
/// and both conversions use one offset between the clocks, rounded up.
#[tokio::test]
async fn unix_times_read_back_exactly_on_the_real_clock() {
    let h = start_with(|c| c.clock = Some(redlockd::Clock::real())).await;
    let mut c = Raw::to(&h).await;
    let wall_now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
    };
    let now = wall_now();
    for i in 0..500 {
        let at = now + 5_000 + i * 7;
        let at_s = at.to_string();
        c.cmd(&["SET", "k", "v", "PXAT", &at_s]).await;
        assert_eq!(
            c.cmd(&["PEXPIRETIME", "k"]).await,
            int(at),
            "SET PXAT, round {i}"
        );
        c.cmd(&["PEXPIREAT", "k", &(at + 3).to_string()]).await;
        assert_eq!(
            c.cmd(&["PEXPIRETIME", "k"]).await,
            int(at + 3),
            "PEXPIREAT, round {i}"
        );
        // Never longer than asked: PTTL is at most the time left to `at`.
        c.cmd(&["GETEX", "k", "PXAT", &(at + 1).to_string()]).await;
        let left = at + 1 - wall_now();
        let pttl: i64 = c.cmd(&["PTTL", "k"]).await[1..].trim_end().parse().unwrap();
        assert!(
            pttl <= left && pttl > left - 1000,
            "PTTL {pttl}, {left} left, round {i}"
        );
        let secs = at / 1000 + 10;
        c.cmd(&["EXPIREAT", "k", &secs.to_string()]).await;
        assert_eq!(
            c.cmd(&["EXPIRETIME", "k"]).await,
            int(secs),
            "EXPIREAT, round {i}"
        );
        assert_eq!(
            c.cmd(&["PEXPIRETIME", "k"]).await,
            int(secs * 1000),
            "round {i}"
        );
    }
    h.shutdown().await;
}
