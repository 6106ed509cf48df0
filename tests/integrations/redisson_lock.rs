//! A Redisson-shaped lock (RLock), as Redisson drives it (see CLIENTS.md): a hash per lock (field = client id, value =
//! hold count), `pexpire` for the lease, `publish` on `redisson_lock__channel:{name}`
//! at the final unlock, waiters that SUBSCRIBE and retry only when a message arrives,
//! and a watchdog that renews with `pexpire`.
//!
//! The three scripts are Redisson's own, sent with EVAL as Redisson sends them.

use crate::support;

use futures_util::StreamExt;
use redis::aio::MultiplexedConnection;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::*;

const LEASE_MS: i64 = 30_000;

fn channel(name: &str) -> String {
    format!("redisson_lock__channel:{{{name}}}")
}

// Redisson's RLock scripts (RedissonLock.java), as it sends them: KEYS[1] is the lock
// hash, ARGV holds the lease and the holder id "uuid:threadId".

/// tryLockInnerAsync: ARGV[1] lease ms, ARGV[2] holder. nil when held, else the pttl.
const TRY_LOCK: &str = "if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; return redis.call('pttl', KEYS[1]);";

/// unlockInnerAsync: KEYS[2] the channel; ARGV[1] message, ARGV[2] lease, ARGV[3]
/// holder, ARGV[4] the publish command (Redisson passes "publish" or "spublish").
const UNLOCK: &str = "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil;end; local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; else redis.call('del', KEYS[1]); redis.call(ARGV[4], KEYS[2], ARGV[1]); return 1; end; return nil;";

/// renewExpirationAsync: ARGV[1] lease, ARGV[2] holder.
const RENEW: &str = "if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then redis.call('pexpire', KEYS[1], ARGV[1]); return 1; end; return 0;";

async fn try_lock(c: &mut MultiplexedConnection, name: &str, id: &str) -> Option<i64> {
    let lease = LEASE_MS.to_string();
    q(c, &["eval", TRY_LOCK, "1", name, &lease, id])
        .await
        .unwrap()
}

async fn unlock(c: &mut MultiplexedConnection, name: &str, id: &str) -> Option<i64> {
    let (lease, chan) = (LEASE_MS.to_string(), channel(name));
    q(
        c,
        &["eval", UNLOCK, "2", name, &chan, "0", &lease, id, "publish"],
    )
    .await
    .unwrap()
}

async fn renew(c: &mut MultiplexedConnection, name: &str, id: &str) -> bool {
    let lease = LEASE_MS.to_string();
    q::<i64>(c, &["eval", RENEW, "1", name, &lease, id])
        .await
        .unwrap()
        == 1
}

#[tokio::test]
async fn lock_is_reentrant_and_counts_holds() {
    let h = start().await;
    let mut c = conn(&h).await;
    assert_eq!(try_lock(&mut c, "lock", "uuid:1").await, None);
    assert_eq!(try_lock(&mut c, "lock", "uuid:1").await, None);
    assert_eq!(
        q::<String>(&mut c, &["hget", "lock", "uuid:1"])
            .await
            .unwrap(),
        "2"
    );
    assert_eq!(q::<i64>(&mut c, &["pttl", "lock"]).await.unwrap(), LEASE_MS);
    // Another client gets the remaining lease.
    let mut other = conn(&h).await;
    h.clock().advance(Duration::from_millis(500));
    assert_eq!(
        try_lock(&mut other, "lock", "uuid:2").await,
        Some(LEASE_MS - 500)
    );
    assert_eq!(unlock(&mut other, "lock", "uuid:2").await, None);
    // The first unlock keeps the lock (and renews its lease); the second releases.
    assert_eq!(unlock(&mut c, "lock", "uuid:1").await, Some(0));
    assert_eq!(q::<i64>(&mut c, &["pttl", "lock"]).await.unwrap(), LEASE_MS);
    assert_eq!(unlock(&mut c, "lock", "uuid:1").await, Some(1));
    assert_eq!(q::<i64>(&mut c, &["exists", "lock"]).await.unwrap(), 0);
}

#[tokio::test]
async fn unlock_publishes_to_the_lock_channel() {
    let h = start().await;
    let mut ps = client(&h).get_async_pubsub().await.unwrap();
    ps.subscribe(channel("lock")).await.unwrap();
    let mut c = conn(&h).await;
    try_lock(&mut c, "lock", "uuid:1").await;
    unlock(&mut c, "lock", "uuid:1").await;
    let msg = tokio::time::timeout(Duration::from_secs(5), ps.on_message().next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(msg.get_channel_name(), "redisson_lock__channel:{lock}");
    assert_eq!(msg.get_payload::<String>().unwrap(), "0");
}

#[tokio::test]
async fn waiters_are_woken_by_the_unlock_publish_not_by_polling() {
    let h = start().await;
    let mut holder = conn(&h).await;
    assert_eq!(try_lock(&mut holder, "lock", "holder").await, None);

    let waiters = 3;
    // Failed attempts of all waiters: each parks on its subscription right after one.
    let failed = Arc::new(AtomicUsize::new(0));
    let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel();
    for i in 0..waiters {
        let (failed, done_tx) = (failed.clone(), done_tx.clone());
        let addr = h.addr();
        tokio::spawn(async move {
            let handle = HandleRef(addr);
            let r = handle.lock_waiting(&format!("w{i}"), &failed).await;
            done_tx.send((format!("w{i}"), r)).unwrap();
        });
    }
    // Every waiter made its first (failing) attempt.
    let mut expected_failures = waiters;
    wait_until("first attempts", TIMEOUT, || {
        failed.load(Ordering::SeqCst) == expected_failures
    })
    .await;

    let mut latencies = Vec::new();
    let mut total_attempts = 0;
    let mut current = ("holder".to_string(), holder);
    for _ in 0..waiters {
        let released = Instant::now();
        assert_eq!(unlock(&mut current.1, "lock", &current.0).await, Some(1));
        let (id, (attempts, acquired, c)) =
            tokio::time::timeout(Duration::from_secs(5), done_rx.recv())
                .await
                .expect("no waiter acquired the lock after the unlock")
                .unwrap();
        let latency = acquired.duration_since(released);
        latencies.push(latency);
        total_attempts += attempts;
        assert!(
            latency < Duration::from_millis(100),
            "wake-up took {latency:?}"
        );
        // The losers (woken by the message, one try each) are back to waiting.
        expected_failures += waiters - latencies.len();
        wait_until("the losers' tries", TIMEOUT, || {
            failed.load(Ordering::SeqCst) == expected_failures
        })
        .await;
        current = (id, c);
    }
    unlock(&mut current.1, "lock", &current.0).await;
    // Each unlock wakes every remaining waiter once: waiter k (0-based, in acquire
    // order) tried once at first and once per unlock up to its own.
    assert_eq!(
        total_attempts,
        waiters + waiters * (waiters + 1) / 2,
        "attempts: polling?"
    );
    let mean = latencies.iter().sum::<Duration>() / latencies.len() as u32;
    println!("redisson wake-up latency (unlock -> waiter acquired): {latencies:?}, mean {mean:?}");
}

/// One waiter as Redisson's lock() does it: subscribe, try, and on failure wait for
/// an unlock message before trying again (its lease never runs out here, on the
/// manual clock, so only a message can wake it). Returns the attempts made, when it
/// acquired, and its connection. Spawned waiters reach the server by its address.
struct HandleRef(std::net::SocketAddr);

impl HandleRef {
    async fn lock_waiting(
        &self,
        id: &str,
        failed: &AtomicUsize,
    ) -> (usize, Instant, MultiplexedConnection) {
        let client = redis::Client::open(format!("redis://{}/", self.0)).unwrap();
        let mut ps = client.get_async_pubsub().await.unwrap();
        ps.subscribe(channel("lock")).await.unwrap();
        let mut c = support::multiplexed(&client).await;
        let mut attempts = 0;
        let mut messages = ps.on_message();
        loop {
            attempts += 1;
            if try_lock(&mut c, "lock", id).await.is_none() {
                return (attempts, Instant::now(), c);
            }
            // Subscribed before trying: a message published from here on is kept.
            failed.fetch_add(1, Ordering::SeqCst);
            tokio::time::timeout(Duration::from_secs(10), messages.next())
                .await
                .expect("waiter not woken by the unlock message")
                .expect("pubsub stream ended");
        }
    }
}

#[tokio::test]
async fn watchdog_renews_the_lease_with_pexpire() {
    let h = start().await;
    let mut c = conn(&h).await;
    assert_eq!(try_lock(&mut c, "lock", "uuid:1").await, None);
    // Redisson's watchdog renews every lease/3 on its own timer: here, the server
    // clock, at fixed times from the start (so the test may advance the clock before
    // the task first sleeps).
    let clock = h.clock().clone();
    let start = clock.now_ms();
    let mut wd_conn = conn(&h).await;
    let (renewed_tx, mut renewed_rx) = tokio::sync::mpsc::unbounded_channel();
    let watchdog = tokio::spawn(async move {
        for k in 1.. {
            clock.sleep_until(start + k * LEASE_MS as u64 / 3).await;
            let ok = renew(&mut wd_conn, "lock", "uuid:1").await;
            renewed_tx.send(ok).unwrap();
            if !ok {
                return;
            }
        }
    });
    for _ in 0..5 {
        h.clock()
            .advance(Duration::from_millis(LEASE_MS as u64 / 3));
        let renewed = tokio::time::timeout(TIMEOUT, renewed_rx.recv()).await;
        assert!(renewed.expect("renewed in time").unwrap());
        assert_eq!(q::<i64>(&mut c, &["pttl", "lock"]).await.unwrap(), LEASE_MS);
    }
    // Five renewals: the lock has lived 50 s on a 30 s lease.
    assert_eq!(
        q::<String>(&mut c, &["hget", "lock", "uuid:1"])
            .await
            .unwrap(),
        "1"
    );
    watchdog.abort();
    h.clock()
        .advance(Duration::from_millis(LEASE_MS as u64 + 1));
    assert_eq!(q::<i64>(&mut c, &["exists", "lock"]).await.unwrap(), 0);
}
