//! rslock (crates.io), with its default settings, against 5 in-process redlockd nodes:
//! it speaks RESP2, acquires with SET NX PX, and releases and extends with EVALSHA
//! (EVAL after NOSCRIPT), with raw random bytes as lock values.

use crate::support;

use rslock::{LockError, LockManager};
use std::time::Duration;
use support::nodes::{get, on_every_node};
use support::TestCluster;

fn manager(cluster: &TestCluster) -> LockManager {
    LockManager::new(cluster.urls())
}

/// The key's value on every node (rslock's values are random bytes, not text).
async fn values(cluster: &TestCluster, key: &str) -> Vec<Option<Vec<u8>>> {
    on_every_node(cluster, &["GET", key]).await
}

async fn script_flush(cluster: &TestCluster) {
    on_every_node::<()>(cluster, &["SCRIPT", "FLUSH"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rslock_acquires_on_every_node_and_releases() {
    let cluster = TestCluster::start(5).await;
    let rl = manager(&cluster);
    let lock = rl.lock("rs:res", Duration::from_secs(10)).await.unwrap();
    assert!(lock.validity_time > 9_000, "{}", lock.validity_time);
    assert_eq!(
        values(&cluster, "rs:res").await,
        vec![Some(lock.val.clone()); 5]
    );
    rl.unlock(&lock).await;
    assert_eq!(values(&cluster, "rs:res").await, vec![None; 5]);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_rslock_client_is_refused_until_the_lock_expires() {
    let cluster = TestCluster::start(5).await;
    let (a, b) = (manager(&cluster), manager(&cluster));
    let held = a.lock("rs:res", Duration::from_secs(10)).await.unwrap();
    // rslock says Unavailable whatever the cause: that the refusal is "held" shows in
    // a's value, untouched on every node.
    assert!(matches!(
        b.lock("rs:res", Duration::from_secs(10)).await,
        Err(LockError::Unavailable)
    ));
    assert_eq!(
        values(&cluster, "rs:res").await,
        vec![Some(held.val.clone()); 5]
    );
    cluster.advance(Duration::from_millis(10_001));
    assert!(b.lock("rs:res", Duration::from_secs(10)).await.is_ok());
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rslock_extend_and_unlock_survive_a_script_flush() {
    let cluster = TestCluster::start(5).await;
    let rl = manager(&cluster);
    let lock = rl.lock("rs:res", Duration::from_secs(10)).await.unwrap();
    script_flush(&cluster).await;
    cluster.advance(Duration::from_secs(8));
    let lock = rl.extend(&lock, Duration::from_secs(10)).await.unwrap();
    cluster.advance(Duration::from_secs(8));
    // Past the first TTL: only the extension keeps it.
    assert_eq!(
        values(&cluster, "rs:res").await,
        vec![Some(lock.val.clone()); 5]
    );
    script_flush(&cluster).await;
    rl.unlock(&lock).await;
    assert_eq!(values(&cluster, "rs:res").await, vec![None; 5]);
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
    assert!(matches!(
        rl.lock("rs:res", Duration::from_secs(10)).await,
        Err(LockError::Unavailable)
    ));
    // The two nodes left granted it, then rslock released them: the name is free there.
    for i in 3..5 {
        assert_eq!(get(&cluster, i, "rs:res").await, None, "node {i}");
    }
    cluster.shutdown().await;
}
