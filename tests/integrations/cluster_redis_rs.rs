//! redis-rs's cluster clients with their defaults, given one seed address, against a
//! 3-node redlockd cluster (map mode): the sync `ClusterConnection` (commands and
//! `cluster_pipe`) and the async `cluster_async` connection (commands, pipelines and
//! MULTI on hash-tagged keys). Keys spread over the three nodes, SET NX PX grants once,
//! a lock on hash-tagged keys is taken and released with a script, and requests whose
//! keys span slots get the server's CROSSSLOT.

use redis::cluster::{cluster_pipe, ClusterClient};
use redis::{RedisResult, Script};
use redlockd::slot::key_slot;

use super::redlock_clusters::{cluster, owner};
use support::Raw;

use crate::support;

const RELEASE: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

/// Keys on every node of the cluster, `n` of them.
fn keys(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}:{i}")).collect()
}

/// DBSIZE of each node.
async fn sizes(c: &redlockd::testing::TestGroup) -> Vec<i64> {
    let mut out = Vec::new();
    for n in c.nodes() {
        let reply = Raw::to(n).await.cmd(&["DBSIZE"]).await;
        out.push(
            reply
                .trim_start_matches(':')
                .trim_end()
                .parse()
                .expect("an integer"),
        );
    }
    out
}

/// Two keys that one node serves but whose slots differ (the server, not the client's
/// routing, must refuse them together).
fn same_node_other_slots() -> (String, String) {
    let a = "{tx}a".to_string();
    let b = (0..)
        .map(|i| format!("other{i}"))
        .find(|k| owner(k) == owner(&a) && key_slot(k.as_bytes()) != key_slot(a.as_bytes()))
        .expect("some key");
    (a, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sync_cluster_client_routes_pipelines_and_locks() {
    let c = cluster().await;
    let seed = format!("redis://{}/", c.node(0).addr());
    let (a, b) = same_node_other_slots();
    let result = tokio::task::spawn_blocking(move || -> RedisResult<()> {
        let client = ClusterClient::new(vec![seed])?;
        let mut con = client.get_connection()?;
        for k in keys("sync", 60) {
            let granted: Option<String> = redis::cmd("SET")
                .arg(&k)
                .arg("t1")
                .arg("NX")
                .arg("PX")
                .arg(30_000)
                .query(&mut con)?;
            assert_eq!(granted.as_deref(), Some("OK"), "{k}");
            let again: Option<String> = redis::cmd("SET")
                .arg(&k)
                .arg("t2")
                .arg("NX")
                .arg("PX")
                .arg(30_000)
                .query(&mut con)?;
            assert_eq!(again, None, "{k}: granted twice");
        }
        // A pipeline over all slots: the client splits it by node.
        let mut pipe = cluster_pipe();
        for k in keys("piped", 60) {
            pipe.cmd("SET")
                .arg(&k)
                .arg("v")
                .arg("NX")
                .arg("PX")
                .arg(30_000);
        }
        for k in keys("sync", 60) {
            pipe.cmd("GET").arg(k);
        }
        let replies: Vec<Option<String>> = pipe.query(&mut con)?;
        assert_eq!(replies[..60], vec![Some("OK".to_string()); 60]);
        assert_eq!(replies[60..], vec![Some("t1".to_string()); 60]);
        // A lock on hash-tagged keys: one slot, one node; released by its holder only.
        let lock = Script::new(RELEASE);
        let set: Option<String> = redis::cmd("SET")
            .arg("{order:7}:lock")
            .arg("me")
            .arg("NX")
            .arg("PX")
            .arg(10_000)
            .query(&mut con)?;
        assert_eq!(set.as_deref(), Some("OK"));
        let n: i64 = lock.key("{order:7}:lock").arg("other").invoke(&mut con)?;
        assert_eq!(n, 0);
        let n: i64 = lock.key("{order:7}:lock").arg("me").invoke(&mut con)?;
        assert_eq!(n, 1);
        // Keys of two slots in one EVAL: the server's CROSSSLOT.
        let err = redis::cmd("EVAL")
            .arg("return 1")
            .arg(2)
            .arg(&a)
            .arg(&b)
            .query::<i64>(&mut con)
            .expect_err("cross-slot");
        assert_eq!(err.code(), Some("CROSSSLOT"), "{err}");
        Ok(())
    })
    .await
    .expect("no panic");
    result.expect("the sync cluster client works");
    let sizes = sizes(&c).await;
    assert!(
        sizes.iter().all(|&n| n > 10),
        "keys on every node: {sizes:?}"
    );
    assert_eq!(sizes.iter().sum::<i64>(), 120);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_async_cluster_client_routes_pipelines_transactions_and_locks() {
    let c = cluster().await;
    let client = ClusterClient::new(vec![format!("redis://{}/", c.node(0).addr())]).unwrap();
    let mut con = client.get_async_connection().await.expect("connects");
    for k in keys("async", 60) {
        let granted: Option<String> = redis::cmd("SET")
            .arg(&k)
            .arg("t1")
            .arg("NX")
            .arg("PX")
            .arg(30_000)
            .query_async(&mut con)
            .await
            .unwrap();
        assert_eq!(granted.as_deref(), Some("OK"), "{k}");
        let again: Option<String> = redis::cmd("SET")
            .arg(&k)
            .arg("t2")
            .arg("NX")
            .arg("PX")
            .arg(30_000)
            .query_async(&mut con)
            .await
            .unwrap();
        assert_eq!(again, None, "{k}: granted twice");
    }
    let sizes = sizes(&c).await;
    assert!(
        sizes.iter().all(|&n| n > 10),
        "keys on every node: {sizes:?}"
    );
    // A pipeline and a transaction on one hash tag: one slot, one node.
    let (ok1, ok2, got): (String, String, String) = redis::pipe()
        .set("{batch}a", "1")
        .set("{batch}b", "2")
        .get("{batch}a")
        .query_async(&mut con)
        .await
        .expect("pipeline");
    assert_eq!(
        (ok1.as_str(), ok2.as_str(), got.as_str()),
        ("OK", "OK", "1")
    );
    let (lock, n): (Option<String>, i64) = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("{order:8}:lock")
        .arg("me")
        .arg("NX")
        .arg("PX")
        .arg(10_000)
        .incr("{order:8}:fence", 1)
        .query_async(&mut con)
        .await
        .expect("MULTI on one slot");
    assert_eq!((lock.as_deref(), n), (Some("OK"), 1));
    let release = Script::new(RELEASE);
    let n: i64 = release
        .key("{order:8}:lock")
        .arg("me")
        .invoke_async(&mut con)
        .await
        .unwrap();
    assert_eq!(n, 1);
    // MULTI over two slots of one node: the server refuses the EXEC with CROSSSLOT.
    let (a, b) = same_node_other_slots();
    let err = redis::pipe()
        .atomic()
        .set(&a, "1")
        .set(&b, "2")
        .query_async::<()>(&mut con)
        .await
        .expect_err("cross-slot transaction");
    assert_eq!(err.code(), Some("CROSSSLOT"), "{err}");
    assert_eq!(
        Raw::to(c.node(owner(&a))).await.cmd(&["EXISTS", &a]).await,
        ":0\r\n"
    );
    c.shutdown().await;
}
