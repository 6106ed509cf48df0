//! rslock (crates.io), with its default settings, against 5 in-process redlockd nodes:
//! it speaks RESP2, acquires with SET NX PX, and releases and extends with EVALSHA
//! (EVAL after NOSCRIPT), with raw random bytes as lock values.

use crate::support;

use rslock::{LockError, LockManager};
use std::time::Duration;
use support::nodes::{get, on_every_node};
use support::TestGroup;

fn manager(group: &TestGroup) -> LockManager {
    LockManager::new(group.urls())
}

/// The key's value on every node (rslock's values are random bytes, not text).
async fn values(group: &TestGroup, key: &str) -> Vec<Option<Vec<u8>>> {
    on_every_node(group, &["GET", key]).await
}

async fn script_flush(group: &TestGroup) {
    on_every_node::<()>(group, &["SCRIPT", "FLUSH"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rslock_acquires_on_every_node_and_releases() {
    let group = TestGroup::start(5).await;
    let rl = manager(&group);
    let lock = rl.lock("rs:res", Duration::from_secs(10)).await.unwrap();
    assert!(lock.validity_time > 9_000, "{}", lock.validity_time);
    assert_eq!(
        values(&group, "rs:res").await,
        vec![Some(lock.val.clone()); 5]
    );
    rl.unlock(&lock).await;
    assert_eq!(values(&group, "rs:res").await, vec![None; 5]);
    group.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_rslock_client_is_refused_until_the_lock_expires() {
    let group = TestGroup::start(5).await;
    let (a, b) = (manager(&group), manager(&group));
    let held = a.lock("rs:res", Duration::from_secs(10)).await.unwrap();
    // rslock says Unavailable whatever the cause: that the refusal is "held" shows in
    // a's value, untouched on every node.
    assert!(matches!(
        b.lock("rs:res", Duration::from_secs(10)).await,
        Err(LockError::Unavailable)
    ));
    assert_eq!(
        values(&group, "rs:res").await,
        vec![Some(held.val.clone()); 5]
    );
    group.advance(Duration::from_millis(10_001));
    assert!(b.lock("rs:res", Duration::from_secs(10)).await.is_ok());
    group.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rslock_extend_and_unlock_survive_a_script_flush() {
    let group = TestGroup::start(5).await;
    let rl = manager(&group);
    let lock = rl.lock("rs:res", Duration::from_secs(10)).await.unwrap();
    script_flush(&group).await;
    group.advance(Duration::from_secs(8));
    let lock = rl.extend(&lock, Duration::from_secs(10)).await.unwrap();
    group.advance(Duration::from_secs(8));
    // Past the first TTL: only the extension keeps it.
    assert_eq!(
        values(&group, "rs:res").await,
        vec![Some(lock.val.clone()); 5]
    );
    script_flush(&group).await;
    rl.unlock(&lock).await;
    assert_eq!(values(&group, "rs:res").await, vec![None; 5]);
    group.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rslock_holds_with_two_nodes_down_and_fails_with_three() {
    let group = TestGroup::start(5).await;
    group.node(0).stop().await;
    group.node(1).isolate().await;
    let rl = manager(&group);
    let lock = rl.lock("rs:res", Duration::from_secs(10)).await.unwrap();
    rl.unlock(&lock).await;
    group.node(2).stop().await;
    assert!(matches!(
        rl.lock("rs:res", Duration::from_secs(10)).await,
        Err(LockError::Unavailable)
    ));
    // The two nodes left granted it, then rslock released them: the name is free there.
    for i in 3..5 {
        assert_eq!(get(&group, i, "rs:res").await, None, "node {i}");
    }
    group.shutdown().await;
}
