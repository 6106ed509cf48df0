//! The Redlock client against 5 in-process redlockd nodes on one manual clock.
//!
//! The nodes' TTLs and restart fences move only when a test advances the clock, so
//! expiry, extension and the fence are checked to the millisecond without sleeping.
//! The client's own validity and the watchdog's cadence run on tokio's real clock: the
//! watchdog tests use short real TTLs and bounded waits.

use crate::support;

use std::time::Duration;

use redlockd::redlock::{NodeError, Redlock, RedlockError};
use redlockd::testing::TestGroup;
use support::nodes::{
    get, on_every_node, opts, pttl, redlock, refused_by_all, scenario, text, NODE_TIMEOUT_MS,
};
use support::wait_until;
use tokio::time::{timeout, Instant};

/// Bound on every wait for something that must happen (a reply, a watchdog event).
const BOUND: Duration = Duration::from_secs(5);
const TTL: Duration = Duration::from_secs(10);

/// Every node holds `key` with `value`, and exactly `pttl_ms` left if given.
async fn held_everywhere(group: &TestGroup, key: &str, value: &str, pttl_ms: Option<i64>) {
    let values: Vec<Option<String>> = on_every_node(group, &["GET", key]).await;
    assert_eq!(values, vec![Some(value.to_string()); group.len()], "{key}");
    if let Some(ms) = pttl_ms {
        let left: Vec<i64> = on_every_node(group, &["PTTL", key]).await;
        assert_eq!(left, vec![ms; group.len()], "{key}'s PTTL on each node");
    }
}

fn client(group: &TestGroup) -> Redlock {
    redlock(group, opts(NODE_TIMEOUT_MS))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_sets_the_value_on_every_node_with_the_exact_ttl() {
    let group = TestGroup::start(5).await;
    let rl = client(&group);
    let lock = rl.acquire(b"res", TTL).await.expect("acquired");
    assert!(lock.validity() > Duration::from_secs(9));
    assert!(lock.validity() <= TTL - Duration::from_millis(102), "drift");
    let value = text(lock.value());
    // The manual clock has not moved since the SET.
    held_everywhere(&group, "res", &value, Some(10_000)).await;
    group.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_client_is_refused_by_every_node_while_the_lock_is_held() {
    let group = TestGroup::start(5).await;
    let a = client(&group);
    let b = client(&group);
    let lock = a.try_acquire(b"held", TTL).await.expect("a");
    match b.try_acquire(b"held", TTL).await {
        Err(RedlockError::NotAcquired { attempts, last }) => {
            assert_eq!(attempts, 1);
            assert_eq!((last.granted, last.refused), (0, 5), "{last}");
            assert!(last.failed.is_empty(), "{last}");
        }
        other => panic!("b must lose: {other:?}"),
    }
    let value = text(lock.value());
    held_everywhere(&group, "held", &value, None).await;
    group.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_expires_on_the_nodes_exactly_after_its_ttl() {
    let group = TestGroup::start(5).await;
    let a = client(&group);
    let b = client(&group);
    a.try_acquire(b"exp", TTL).await.expect("a");
    group.advance(TTL);
    // A key expires when now > deadline, as in Redis: at the deadline it still holds.
    refused_by_all(b.try_acquire(b"exp", TTL).await, 5);
    group.advance(Duration::from_millis(1));
    let lock = b.try_acquire(b"exp", TTL).await.expect("b after expiry");
    held_everywhere(&group, "exp", &text(lock.value()), None).await;
    group.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extend_keeps_the_lock_past_its_original_ttl() {
    let group = TestGroup::start(5).await;
    let a = client(&group);
    let b = client(&group);
    let mut lock = a.try_acquire(b"ext", TTL).await.expect("a");
    group.advance(Duration::from_secs(6));
    a.extend(&mut lock, TTL).await.expect("extend");
    for i in 0..5 {
        assert_eq!(pttl(&group, i, "ext").await, 10_000, "reset on node {i}");
    }
    // 12 s after the acquire, 2 s past the original TTL.
    group.advance(Duration::from_secs(6));
    refused_by_all(b.try_acquire(b"ext", TTL).await, 5);
    let value = text(lock.value());
    held_everywhere(&group, "ext", &value, Some(4_000)).await;
    group.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extend_fails_once_the_lock_expired_and_another_client_took_it() {
    let group = TestGroup::start(5).await;
    let a = client(&group);
    let b = client(&group);
    let mut stale = a.try_acquire(b"ext2", TTL).await.expect("a");
    group.advance(TTL + Duration::from_millis(1));
    let held = b.try_acquire(b"ext2", TTL).await.expect("b after expiry");
    group.advance(Duration::from_secs(1));
    assert_eq!(a.extend(&mut stale, TTL).await, Err(RedlockError::Lost));
    // b's lock is untouched: same value, TTL not reset by a's attempt.
    let value = text(held.value());
    held_everywhere(&group, "ext2", &value, Some(9_000)).await;
    group.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_by_a_former_holder_leaves_the_new_holders_lock_alone() {
    let group = TestGroup::start(5).await;
    let a = client(&group);
    let b = client(&group);
    let old = a.try_acquire(b"rel2", TTL).await.expect("a");
    group.advance(TTL + Duration::from_millis(1));
    let held = b.try_acquire(b"rel2", TTL).await.expect("b");
    assert_eq!(a.release(&old).await, 0, "not a's value any more");
    let value = text(held.value());
    held_everywhere(&group, "rel2", &value, None).await;
    refused_by_all(a.try_acquire(b"rel2", TTL).await, 5);
    group.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_one_node_stopped_and_one_isolated_the_lock_still_works() {
    let group = TestGroup::start(5).await;
    let rl = client(&group);
    // Warm the pool, so that the lost nodes' connections go stale rather than absent.
    let warm = rl.try_acquire(b"warm", TTL).await.expect("warm");
    rl.release(&warm).await;
    group.node(0).stop().await;
    group.node(3).isolate().await;
    let mut lock = rl.try_acquire(b"two", TTL).await.expect("acquired");
    rl.extend(&mut lock, TTL).await.expect("extended");
    let value = text(lock.value());
    for i in [1, 2, 4] {
        assert_eq!(get(&group, i, "two").await.as_deref(), Some(&*value));
    }
    assert_eq!(rl.release(&lock).await, 3);
    group.node(3).heal().await;
    assert_eq!(get(&group, 3, "two").await, None, "never reached node 3");
    group.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_three_nodes_down_acquire_fails_within_a_bound_and_leaves_nothing() {
    let group = TestGroup::start(5).await;
    // The per-node timeout bounds the wait on the isolated node; the live nodes must
    // answer within it even with both cores busy (at 50 ms they did not always).
    let rl = redlock(&group, opts(NODE_TIMEOUT_MS));
    let warm = rl.try_acquire(b"warm", TTL).await.expect("warm");
    rl.release(&warm).await;
    group.node(0).stop().await;
    group.node(1).stop().await;
    group.node(2).isolate().await;
    let start = Instant::now();
    let err = rl
        .try_acquire(b"three", TTL)
        .await
        .expect_err("no majority");
    let elapsed = start.elapsed();
    // One per-node timeout for the SET round, one for the release round, and slack.
    let bound = Duration::from_millis(2 * NODE_TIMEOUT_MS + 1000);
    assert!(elapsed < bound, "took {elapsed:?}");
    assert!(err.nodes_unavailable(), "{err}");
    match &err {
        RedlockError::NotAcquired { last, .. } => {
            assert_eq!(last.granted, 2, "{last}");
            assert_eq!(last.failed.len(), 3, "{last}");
        }
        other => panic!("{other:?}"),
    }
    // The two grants were released after the failed round.
    for i in [3, 4] {
        assert_eq!(get(&group, i, "three").await, None, "node {i}");
    }
    group.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_two_nodes_paused_the_lock_is_still_acquired() {
    let group = TestGroup::start(5).await;
    let rl = redlock(&group, opts(50));
    group.node(1).pause();
    group.node(4).pause();
    let start = Instant::now();
    let lock = rl.try_acquire(b"p2", TTL).await.expect("majority of 3");
    assert!(start.elapsed() < Duration::from_millis(500));
    let value = text(lock.value());
    for i in [0, 2, 3] {
        assert_eq!(get(&group, i, "p2").await.as_deref(), Some(&*value));
    }
    group.node(1).resume().await;
    group.node(4).resume().await;
    // Whatever the paused nodes ran late, the holder's release clears every node.
    rl.release(&lock).await;
    for i in 0..5 {
        assert_eq!(get(&group, i, "p2").await, None, "node {i}");
    }
    group.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_three_nodes_paused_acquire_times_out_within_a_bound() {
    let group = TestGroup::start(5).await;
    let rl = redlock(&group, opts(50));
    for i in 0..3 {
        group.node(i).pause();
    }
    let start = Instant::now();
    let err = timeout(BOUND, rl.try_acquire(b"p3", TTL))
        .await
        .expect("no hang")
        .expect_err("no majority");
    let elapsed = start.elapsed();
    // One node timeout for the SET round, one for the release round.
    assert!(elapsed >= Duration::from_millis(50), "{elapsed:?}");
    assert!(elapsed < Duration::from_millis(500), "took {elapsed:?}");
    assert!(err.nodes_unavailable(), "{err}");
    match &err {
        RedlockError::NotAcquired { last, .. } => {
            assert_eq!(last.granted, 2, "{last}");
            assert_eq!(last.failed.len(), 3, "{last}");
            assert!(last.failed.iter().all(|(_, e)| *e == NodeError::Timeout));
        }
        other => panic!("{other:?}"),
    }
    for i in 0..3 {
        group.node(i).resume().await;
    }
    // What the paused nodes executed late expires with the TTL; then the name is free.
    group.advance(TTL + Duration::from_millis(1));
    let lock = rl.try_acquire(b"p3", TTL).await.expect("after resume");
    assert_eq!(rl.release(&lock).await, 5);
    group.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_in_their_restart_fence_count_as_failed_until_it_lifts() {
    let group = TestGroup::start(5).await;
    let rl = client(&group);
    let warm = rl.try_acquire(b"fence", TTL).await.expect("warm");
    rl.release(&warm).await;
    for i in 0..3 {
        group.node(i).crash_restart();
    }
    let err = rl.try_acquire(b"fence", TTL).await.expect_err("fenced");
    assert!(err.nodes_unavailable(), "{err}");
    let addrs: Vec<String> = group.addrs().iter().map(|a| a.to_string()).collect();
    match &err {
        RedlockError::NotAcquired { last, .. } => {
            assert_eq!((last.granted, last.refused), (2, 0), "{last}");
            assert_eq!(last.failed.len(), 3, "{last}");
            for (addr, e) in &last.failed {
                assert!(addrs[..3].contains(addr), "{addr} is not a fenced node");
                assert!(
                    matches!(e, NodeError::Server(s) if s.starts_with("TRYAGAIN ")),
                    "{addr}: {e}"
                );
            }
        }
        other => panic!("{other:?}"),
    }
    for i in 3..5 {
        assert_eq!(get(&group, i, "fence").await, None, "released on node {i}");
    }
    // The fence covers the lock these nodes granted before the crash (same boot: until
    // its recorded deadline + margin), and not a millisecond less.
    let left = group.node(0).fence_remaining();
    assert!(
        left > TTL,
        "a fence of {left:?} does not cover the {TTL:?} lock"
    );
    group.advance(left - Duration::from_millis(1));
    match rl.try_acquire(b"fence", TTL).await {
        Err(RedlockError::NotAcquired { last, .. }) => {
            assert_eq!((last.granted, last.refused), (2, 0), "{last}");
            assert_eq!(last.failed.len(), 3, "{last}");
            let one_ms = "TRYAGAIN restart fence: this node restarted and may have granted locks that are still held; it refuses writes for another 1 ms";
            for (addr, e) in &last.failed {
                assert_eq!(*e, NodeError::Server(one_ms.into()), "{addr}");
            }
        }
        other => panic!("fenced for 1 ms more: {other:?}"),
    }
    group.advance(Duration::from_millis(1));
    let lock = rl.try_acquire(b"fence", TTL).await.expect("fence lifted");
    assert_eq!(rl.release(&lock).await, 5);
    group.shutdown().await;
}

/// The watchdog extends every ttl/3 of real time. Between extensions the test moves the
/// nodes' clock by less than ttl/3, until the nodes have seen more than 1.5 TTLs: the
/// key must still be there, with a PTTL that was reset by the last extension.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_keeps_the_lock_while_the_nodes_clock_passes_its_ttl() {
    let group = TestGroup::start(5).await;
    let a = client(&group);
    let b = client(&group);
    let ttl = Duration::from_millis(600);
    let step = Duration::from_millis(150);
    let guard = a.lock_with_watchdog(b"wd", ttl).await.expect("a");
    let value = text(guard.lock().value());
    let mut advanced = Duration::ZERO;
    while advanced <= ttl + ttl / 2 {
        group.advance(step);
        advanced += step;
        let before = guard.valid_until();
        wait_until("an extension", BOUND, || guard.valid_until() != before).await;
        assert!(!guard.is_lost());
        for i in 0..5 {
            let left = pttl(&group, i, "wd").await;
            // 600 if extended after the last step, 450 if the step came mid-extension.
            assert!(left >= (ttl - step).as_millis() as i64, "node {i}: {left}");
            assert_eq!(get(&group, i, "wd").await.as_deref(), Some(&*value));
        }
    }
    refused_by_all(b.try_acquire(b"wd", ttl).await, 5);
    assert_eq!(guard.release().await, 5);
    b.try_acquire(b"wd", ttl).await.expect("free after release");
    group.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_signals_loss_soon_after_a_majority_is_isolated() {
    let group = TestGroup::start(5).await;
    let a = client(&group);
    let ttl = Duration::from_millis(600);
    let guard = a.lock_with_watchdog(b"wd2", ttl).await.expect("a");
    let token = guard.lost_token();
    let before = guard.valid_until();
    wait_until("a first extension", BOUND, || guard.valid_until() != before).await;
    let valid_until = guard.valid_until();
    for i in 0..3 {
        group.node(i).isolate().await;
    }
    let isolated = Instant::now();
    timeout(BOUND, guard.lost()).await.expect("loss signalled");
    let at = Instant::now();
    assert!(guard.is_lost());
    assert!(token.is_cancelled());
    // The next extension (due within ttl/3) fails at once on refused connections; the
    // holder hears of it before its validity would have ended anyway.
    assert!(
        at - isolated < ttl / 3 + Duration::from_millis(150),
        "{:?} after isolation",
        at - isolated
    );
    assert!(at <= valid_until, "{:?} late", at - valid_until);
    guard.release().await;
    for i in 0..3 {
        group.node(i).heal().await;
    }
    group.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_signals_loss_when_the_key_expired_and_another_client_took_it() {
    let group = TestGroup::start(5).await;
    let a = client(&group);
    let b = client(&group);
    let ttl = Duration::from_millis(600);
    let guard = a.lock_with_watchdog(b"wd3", ttl).await.expect("a");
    // The nodes see the TTL pass before any extension (as if the holder stalled).
    group.advance(ttl + Duration::from_millis(1));
    let held = b.try_acquire(b"wd3", TTL).await.expect("b after expiry");
    timeout(Duration::from_secs(2), guard.lost())
        .await
        .expect("the next extension fails and loss is signalled");
    assert_eq!(guard.release().await, 0, "b's lock is not a's to delete");
    let value = text(held.value());
    held_everywhere(&group, "wd3", &value, Some(10_000)).await;
    group.shutdown().await;
}

// The scenarios shared with the real redis-server runs (`redlock_client.rs`).

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_two_clients_racing_for_a_name_at_most_one_wins() {
    let group = TestGroup::start(5).await;
    scenario::of_two_racing_clients_at_most_one_wins(&group).await;
    group.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_deletes_the_key_on_every_node_and_frees_the_name() {
    let group = TestGroup::start(5).await;
    scenario::release_deletes_the_key_everywhere(&group).await;
    group.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extend_and_release_fall_back_to_eval_after_script_flush() {
    let group = TestGroup::start(5).await;
    scenario::extend_and_release_fall_back_to_eval_after_script_flush(&group).await;
    group.shutdown().await;
}
