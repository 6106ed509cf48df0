//! rslock (crates.io), with its default settings, against 5 in-process redlockd nodes:
//! it speaks RESP2, acquires with SET NX PX, and releases and extends with EVALSHA
//! (EVAL after NOSCRIPT), with raw random bytes as lock values.

use redlockd::testing::TestCluster;
use rslock::LockManager;
use std::time::Duration;

fn manager(cluster: &TestCluster) -> LockManager {
    LockManager::new(cluster.urls())
}

async fn get(url: &str, key: &[u8]) -> Option<Vec<u8>> {
    let client = redis::Client::open(url).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    redis::cmd("GET")
        .arg(key)
        .query_async(&mut con)
        .await
        .unwrap()
}

async fn script_flush(url: &str) {
    let client = redis::Client::open(url).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut con)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rslock_acquires_on_every_node_and_releases() {
    let cluster = TestCluster::start(5).await;
    let rl = manager(&cluster);
    let lock = rl.lock("rs:res", Duration::from_secs(10)).await.unwrap();
    assert!(lock.validity_time > 9_000, "{}", lock.validity_time);
    for url in cluster.urls() {
        assert_eq!(get(&url, b"rs:res").await.as_deref(), Some(&lock.val[..]));
    }
    rl.unlock(&lock).await;
    for url in cluster.urls() {
        assert_eq!(get(&url, b"rs:res").await, None);
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_rslock_client_is_refused_until_the_lock_expires() {
    let cluster = TestCluster::start(5).await;
    let (a, b) = (manager(&cluster), manager(&cluster));
    let _held = a.lock("rs:res", Duration::from_secs(10)).await.unwrap();
    assert!(b.lock("rs:res", Duration::from_secs(10)).await.is_err());
    cluster.advance(Duration::from_millis(10_001));
    assert!(b.lock("rs:res", Duration::from_secs(10)).await.is_ok());
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rslock_extend_and_unlock_survive_a_script_flush() {
    let cluster = TestCluster::start(5).await;
    let rl = manager(&cluster);
    let lock = rl.lock("rs:res", Duration::from_secs(10)).await.unwrap();
    for url in cluster.urls() {
        script_flush(&url).await;
    }
    cluster.advance(Duration::from_secs(8));
    let lock = rl.extend(&lock, Duration::from_secs(10)).await.unwrap();
    cluster.advance(Duration::from_secs(8));
    // Past the first TTL: only the extension keeps it.
    for url in cluster.urls() {
        assert_eq!(get(&url, b"rs:res").await.as_deref(), Some(&lock.val[..]));
    }
    for url in cluster.urls() {
        script_flush(&url).await;
    }
    rl.unlock(&lock).await;
    for url in cluster.urls() {
        assert_eq!(get(&url, b"rs:res").await, None);
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rslock_holds_with_two_nodes_down_and_fails_with_three() {
    let cluster = TestCluster::start(5).await;
    cluster.node(0).stop().await;
    cluster.node(1).isolate().await;
    let rl = manager(&cluster);
    let lock = rl.lock("rs:res", Duration::from_secs(10)).await.unwrap();
    rl.unlock(&lock).await;
    cluster.node(2).stop().await;
    assert!(rl.lock("rs:res", Duration::from_secs(10)).await.is_err());
    cluster.shutdown().await;
}
