//! The Redlock client against 5 real redis-server processes (and a few fake nodes).

use crate::support;

use std::time::Duration;

use redlockd::redlock::{NodeError, Redlock, RedlockError, RedlockOptions};
use support::nodes::{opts, redlock, refused_by_all, scenario, NODE_TIMEOUT_MS};
use support::redis_server::{addrs, cluster, cluster_with_password, fake_node, Fake};
use tokio::time::{timeout, Instant};

/// How many SETs a redis-server has run.
fn set_calls(node: &support::redis_server::RedisNode) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut node.conn())
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_set:calls="))
        .map_or(0, |rest| rest.split(',').next().unwrap().parse().unwrap())
}

/// Waits (bounded, polling every millisecond) until `key` has expired on every node.
/// The nodes are real redis-servers: their clocks cannot be moved, so a test of expiry
/// against them waits for real time, and for no more than it takes.
async fn wait_expired(nodes: &[support::redis_server::RedisNode], key: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while nodes.iter().any(|n| n.pttl(key) != -2) {
        assert!(Instant::now() < deadline, "{key} still set after 10 s");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test]
async fn acquire_sets_the_key_on_every_node_with_value_and_ttl() {
    let nodes = cluster(5);
    let rl = redlock(&nodes, opts(100));
    let lock = rl
        .acquire(b"res", Duration::from_secs(10))
        .await
        .expect("acquired");
    // 24 random bytes (README), lowercase hex: 48 characters.
    assert_eq!(lock.value().len(), 48, "{:?}", lock.value());
    assert!(
        lock.value()
            .iter()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b)),
        "{:?}",
        lock.value()
    );
    assert!(lock.validity() > Duration::from_millis(9_000));
    assert!(lock.validity() <= Duration::from_millis(10_000 - 102));
    let value = String::from_utf8(lock.value().to_vec()).expect("hex");
    for n in &nodes {
        assert_eq!(n.get("res").as_deref(), Some(value.as_str()));
        let pttl = n.pttl("res");
        assert!(pttl > 9_000 && pttl <= 10_000, "pttl {pttl}");
    }
}

#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test]
async fn a_lock_expires_after_its_ttl() {
    let nodes = cluster(5);
    let a = redlock(&nodes, opts(100));
    let b = redlock(&nodes, opts(100));
    let ttl = Duration::from_millis(150);
    a.try_acquire(b"exp", ttl).await.expect("a");
    // Every node had set the key when the acquire returned, so it has expired everywhere
    // one TTL later. (The lock's validity ends earlier by the acquire's duration, which
    // is long on a loaded machine: it is no bound on the nodes' expiry.)
    refused_by_all(b.try_acquire(b"exp", ttl).await, 5);
    // redis-server has no manual clock: the test waits for its expiry, bounded, by
    // asking the nodes rather than sleeping a guessed time.
    wait_expired(&nodes, "exp").await;
    b.try_acquire(b"exp", ttl).await.expect("b after expiry");
}

#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test]
async fn extend_keeps_the_lock_past_its_original_ttl() {
    let nodes = cluster(5);
    let a = redlock(&nodes, opts(100));
    let b = redlock(&nodes, opts(100));
    let ttl = Duration::from_millis(300);
    let mut lock = a.try_acquire(b"ext", ttl).await.expect("a");
    let first_until = lock.valid_until();
    a.extend(&mut lock, Duration::from_secs(5))
        .await
        .expect("extend");
    // Real clocks: the margins are seconds, so a loaded machine that delays each step
    // by tens of milliseconds cannot fail the test.
    assert!(lock.valid_until() > first_until + Duration::from_secs(3));
    for n in &nodes {
        assert!(n.pttl("ext") > 3000);
    }
    // Every node now holds it for seconds past the original TTL (that the lock then
    // still holds is checked on the manual clock in redlock_inprocess.rs: redis-server
    // has no clock to move).
    refused_by_all(b.try_acquire(b"ext", ttl).await, 5);
    assert_eq!(a.release(&lock).await, 5);
    // Extending a lock that has expired everywhere fails without a majority.
    let mut stale = a
        .try_acquire(b"ext-short", Duration::from_millis(200))
        .await
        .expect("short");
    wait_expired(&nodes, "ext-short").await;
    assert_eq!(a.extend(&mut stale, ttl).await, Err(RedlockError::Lost));
}

#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test]
async fn release_frees_the_lock_and_a_non_owner_release_does_nothing() {
    let nodes = cluster(5);
    let a = redlock(&nodes, opts(NODE_TIMEOUT_MS));
    let b = redlock(&nodes, opts(NODE_TIMEOUT_MS));
    let lock = a
        .try_acquire(b"rel", Duration::from_secs(5))
        .await
        .expect("a");
    assert_eq!(a.release(&lock).await, 5);
    for n in &nodes {
        assert_eq!(n.get("rel"), None);
    }
    // a's old lock expires, b takes the name; a's late release must not free b's lock.
    let short = a
        .try_acquire(b"rel2", Duration::from_millis(100))
        .await
        .expect("a");
    wait_expired(&nodes, "rel2").await;
    let held = b
        .try_acquire(b"rel2", Duration::from_secs(5))
        .await
        .expect("b");
    assert_eq!(a.release(&short).await, 0);
    let value = String::from_utf8(held.value().to_vec()).expect("hex");
    for n in &nodes {
        assert_eq!(n.get("rel2").as_deref(), Some(value.as_str()));
    }
}

#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test]
async fn with_two_nodes_down_the_lock_still_works() {
    let mut nodes = cluster(5);
    let rl = redlock(&nodes, opts(100));
    nodes[0].kill();
    nodes[3].kill();
    let mut lock = rl
        .try_acquire(b"two", Duration::from_secs(5))
        .await
        .expect("acquired");
    rl.extend(&mut lock, Duration::from_secs(5))
        .await
        .expect("extended");
    assert_eq!(rl.release(&lock).await, 3);
}

#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test]
async fn with_three_nodes_down_acquire_fails_fast() {
    let mut nodes = cluster(5);
    let rl = redlock(&nodes, opts(100));
    // Warm the pool so that the dead nodes' connections are stale, not just refused.
    let l = rl
        .try_acquire(b"warm", Duration::from_secs(5))
        .await
        .expect("warm");
    rl.release(&l).await;
    for n in &mut nodes[..3] {
        n.kill();
    }
    let start = Instant::now();
    let err = rl
        .try_acquire(b"three", Duration::from_secs(5))
        .await
        .expect_err("no majority");
    let elapsed = start.elapsed();
    assert!(err.nodes_unavailable(), "{err}");
    assert!(elapsed < Duration::from_millis(200), "took {elapsed:?}");
    // Nothing is left behind on the live nodes.
    for n in &nodes[3..] {
        assert_eq!(n.get("three"), None);
    }
}

#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test]
async fn nodes_that_never_reply_time_out_instead_of_hanging() {
    let nodes = cluster(2);
    let mut list = addrs(&nodes);
    for _ in 0..3 {
        list.push(fake_node(Fake::BlackHole).await);
    }
    let rl = redlock(&list, opts(100));
    let start = Instant::now();
    let err = timeout(
        Duration::from_secs(2),
        rl.try_acquire(b"bh", Duration::from_secs(5)),
    )
    .await
    .expect("no hang")
    .expect_err("no majority");
    let elapsed = start.elapsed();
    // One per-node timeout (100 ms) for the SET round, one for the release round: far
    // below the 5 s TTL a hung round would wait out (1 s leaves room for busy cores).
    assert!(elapsed < Duration::from_millis(1_000), "took {elapsed:?}");
    match &err {
        RedlockError::NotAcquired { last, .. } => {
            assert_eq!(last.granted, 2);
            assert_eq!(last.failed.len(), 3);
            assert!(last.failed.iter().all(|(_, e)| *e == NodeError::Timeout));
        }
        other => panic!("{other:?}"),
    }
    for n in &nodes {
        assert_eq!(n.get("bh"), None, "released after the failed round");
    }
}

#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test]
async fn a_node_replying_tryagain_counts_as_a_failure() {
    let nodes = cluster(3);
    let real = addrs(&nodes);
    let f1 = fake_node(Fake::TryAgain).await;
    let f2 = fake_node(Fake::TryAgain).await;

    // 3 real + 2 fenced: still a majority.
    let rl = redlock(
        &[real.clone(), vec![f1.clone(), f2.clone()]].concat(),
        opts(100),
    );
    let lock = rl
        .try_acquire(b"fence", Duration::from_secs(5))
        .await
        .expect("majority");
    rl.release(&lock).await;

    // 2 real + 3 fenced: no majority, and the fence's error is reported.
    let f3 = fake_node(Fake::TryAgain).await;
    let fakes = [f1, f2, f3];
    let rl = redlock(&[real[..2].to_vec(), fakes.to_vec()].concat(), opts(100));
    let err = rl
        .try_acquire(b"fence", Duration::from_secs(5))
        .await
        .expect_err("no majority");
    assert!(err.nodes_unavailable());
    match &err {
        RedlockError::NotAcquired { last, .. } => {
            for fake in &fakes {
                let (_, e) = last
                    .failed
                    .iter()
                    .find(|(addr, _)| addr == fake)
                    .expect("fenced node counted as failed");
                assert!(
                    matches!(e, NodeError::Server(s) if s.starts_with("TRYAGAIN")),
                    "{e}"
                );
            }
        }
        other => panic!("{other:?}"),
    }
}

#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test]
async fn the_watchdog_keeps_a_lock_past_its_ttl_and_signals_loss() {
    let mut nodes = cluster(5);
    // Real clocks and real processes: one extension that misses its majority loses the
    // lock, so the per-node timeout and the TTL leave room for a loaded machine (with
    // 100 ms and 300 ms, a scheduling hiccup lost it in a soak run).
    let a = redlock(&nodes, opts(500));
    let b = redlock(&nodes, opts(500));
    let ttl = Duration::from_secs(3);
    let guard = a.lock_with_watchdog(b"wd", ttl).await.expect("a");
    let first_until = guard.valid_until();
    // Kept on real time: the watchdog extends against real redis-servers, which have no
    // clock to move (redlock_inprocess.rs checks it on the manual clock).
    tokio::time::sleep_until(first_until + Duration::from_millis(500)).await;
    assert!(!guard.is_lost());
    assert!(guard.valid_until() > first_until, "extended");
    refused_by_all(b.try_acquire(b"wd", ttl).await, 5);

    let token = guard.lost_token();
    let valid_until = guard.valid_until();
    for n in &mut nodes[..3] {
        n.kill();
    }
    // The next extension (within ttl/3) fails; loss is signalled before validity ends.
    timeout(ttl, guard.lost()).await.expect("loss signalled");
    assert!(token.is_cancelled());
    assert!(
        Instant::now() <= valid_until,
        "loss signalled after validity ended"
    );
    guard.release().await;
}

#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test]
async fn dropping_the_watchdog_guard_releases_the_lock() {
    let nodes = cluster(5);
    let a = redlock(&nodes, opts(100));
    let b = redlock(&nodes, opts(100));
    let guard = a
        .lock_with_watchdog(b"drop", Duration::from_secs(10))
        .await
        .expect("a");
    drop(guard);
    let deadline = Instant::now() + Duration::from_secs(1);
    loop {
        if b.try_acquire(b"drop", Duration::from_secs(10))
            .await
            .is_ok()
        {
            break;
        }
        assert!(Instant::now() < deadline, "not released after drop");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test]
async fn password_is_sent_with_auth() {
    let nodes = cluster_with_password(3, Some("s3cret"));
    let with = Redlock::new(
        addrs(&nodes),
        RedlockOptions {
            password: Some("s3cret".into()),
            ..opts(NODE_TIMEOUT_MS)
        },
    )
    .expect("client");
    let lock = with
        .try_acquire(b"pw", Duration::from_secs(5))
        .await
        .expect("acquired");
    assert_eq!(with.release(&lock).await, 3);

    let without = redlock(&nodes, opts(NODE_TIMEOUT_MS));
    let err = without
        .try_acquire(b"pw", Duration::from_secs(5))
        .await
        .expect_err("NOAUTH");
    assert!(err.nodes_unavailable(), "{err}");
}

#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test]
async fn acquire_within_waits_for_a_release() {
    let nodes = cluster(5);
    let a = redlock(&nodes, opts(100));
    let b = redlock(&nodes, opts(100));
    let lock = a
        .try_acquire(b"wait", Duration::from_secs(5))
        .await
        .expect("a");
    let waiter = tokio::spawn(async move {
        b.acquire_within(b"wait", Duration::from_secs(5), Duration::from_secs(3))
            .await
    });
    // Released once b has been refused at least once: every node has seen a's SET and
    // b's (INFO commandstats), so b is waiting, not yet to start.
    let deadline = Instant::now() + Duration::from_secs(10);
    while nodes.iter().any(|n| set_calls(n) < 2) {
        assert!(Instant::now() < deadline, "b never tried");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    a.release(&lock).await;
    let got = timeout(Duration::from_secs(2), waiter)
        .await
        .expect("bounded")
        .expect("task");
    assert!(got.is_ok(), "{got:?}");

    // And gives up at the deadline when the lock stays held.
    let c = redlock(&nodes, opts(100));
    let start = Instant::now();
    let err = c
        .acquire_within(b"wait", Duration::from_secs(5), Duration::from_millis(300))
        .await
        .expect_err("held");
    assert!(matches!(err, RedlockError::Timeout { .. }), "{err:?}");
    assert!(start.elapsed() >= Duration::from_millis(300));
    assert!(start.elapsed() < Duration::from_millis(600));
}

#[test]
fn bad_configuration_is_rejected() {
    assert!(matches!(
        Redlock::new(Vec::<String>::new(), RedlockOptions::default()),
        Err(RedlockError::Config(_))
    ));
    assert!(matches!(
        Redlock::new(["nocolon"], RedlockOptions::default()),
        Err(RedlockError::Config(_))
    ));
}

#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test]
async fn the_watchdog_signals_loss_when_validity_ends_before_an_extension_answers() {
    let nodes = cluster(5);
    // A node timeout longer than the TTL: the extension is still waiting when the
    // validity ends, and the loss must be signalled then, not when the timeout fires.
    let rl = Redlock::new(
        addrs(&nodes),
        RedlockOptions {
            node_timeout: Some(Duration::from_secs(3)),
            ..opts(100)
        },
    )
    .expect("client");
    let ttl = Duration::from_millis(300);
    let guard = rl
        .lock_with_watchdog(b"frozen", ttl)
        .await
        .expect("acquired");
    for n in &nodes[..3] {
        n.pause();
    }
    let valid_until = guard.valid_until();
    let lost = timeout(Duration::from_secs(2), guard.lost()).await;
    let at = Instant::now();
    for n in &nodes[..3] {
        n.resume();
    }
    lost.expect("loss signalled");
    assert!(at >= valid_until, "not before the validity ends");
    // Well before the 3 s node timeout could have fired. (A tighter bound measured the
    // machine: a loaded one woke the timer 0.4 s and 1.2 s late in soak runs.)
    assert!(
        at < valid_until + Duration::from_millis(2_000),
        "at the end of the validity, {:?} late",
        at - valid_until
    );
    drop(guard);
}

#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test]
async fn a_restarted_node_is_reconnected() {
    let mut nodes = cluster(5);
    let rl = redlock(&nodes, opts(100));
    let lock = rl
        .try_acquire(b"re", Duration::from_secs(5))
        .await
        .expect("a");
    rl.release(&lock).await;
    // Every pooled connection is now stale.
    for n in &mut nodes {
        n.restart();
    }
    let lock = rl
        .try_acquire(b"re", Duration::from_secs(5))
        .await
        .expect("after restart");
    match rl.try_acquire(b"re", Duration::from_secs(5)).await {
        Err(RedlockError::NotAcquired { last, .. }) => assert_eq!(last.refused, 5),
        other => panic!("{other:?}"),
    }
    assert_eq!(rl.release(&lock).await, 5);
}

// The scenarios shared with the in-process runs (`redlock_inprocess.rs`).

#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_two_competing_clients_at_most_one_wins() {
    scenario::of_two_racing_clients_at_most_one_wins(&cluster(5)).await;
}

#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_deletes_the_key_everywhere() {
    scenario::release_deletes_the_key_everywhere(&cluster(5)).await;
}

#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_fall_back_to_eval_after_script_flush() {
    scenario::extend_and_release_fall_back_to_eval_after_script_flush(&cluster(5)).await;
}
