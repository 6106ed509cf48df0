//! Redlock over 3 redlockd clusters of 3 nodes each (map mode, in-process, one manual
//! clock per cluster): the Rust client and the `redlockd lock` binary take a cluster's
//! seed addresses as one vote, send each key to its slot's node, follow MOVED after a
//! slot move, count a fenced slot's TRYAGAIN and a down cluster as failed votes, and
//! keep locks with one whole cluster down.

use crate::support;

use std::process::Stdio;
use std::time::Duration;

use redlockd::config::ClusterMode as Mode;
use redlockd::redlock::{NodeError, Redlock, RedlockError};
use redlockd::slot::key_slot;
use redlockd::testing::{TestGroup, TestServer};
use support::nodes::{opts, NODE_TIMEOUT_MS};
use support::process::BIN;
use support::Raw;
use tokio::process::Command;
use tokio::time::timeout;

const TTL: Duration = Duration::from_secs(10);
const BOUND: Duration = Duration::from_secs(20);

/// Node `i`'s id in every test map.
fn node_id(i: usize) -> String {
    format!("{:040x}", i + 1)
}

/// Version `version` of a map giving node i the slot ranges `ranges[i]`.
fn map_json(nodes: &TestGroup, version: u64, ranges: &[Vec<(u16, u16)>]) -> String {
    let entries: Vec<String> = ranges
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let r: Vec<String> = r.iter().map(|(a, b)| format!("[{a},{b}]")).collect();
            format!(
                r#"{{"id":"{}","host":"127.0.0.1","port":{},"slots":[{}]}}"#,
                node_id(i),
                nodes.node(i).addr().port(),
                r.join(",")
            )
        })
        .collect();
    format!(r#"{{"version":{version},"nodes":[{}]}}"#, entries.join(","))
}

fn thirds() -> Vec<Vec<(u16, u16)>> {
    vec![vec![(0, 5460)], vec![(5461, 10922)], vec![(10923, 16383)]]
}

async fn push(nodes: &[&TestServer], json: &str) {
    for n in nodes {
        assert_eq!(
            Raw::to(*n).await.cmd(&["CLUSTER", "SETMAP", json]).await,
            "+OK\r\n"
        );
    }
}

/// A 3-node cluster in map mode with the even split pushed (version 1).
pub(crate) async fn cluster() -> TestGroup {
    let c = TestGroup::try_start_with(3, |i, mut c| {
        c.cluster.mode = Mode::Map;
        c.cluster.node_id = Some(node_id(i));
        c
    })
    .await
    .expect("map-mode nodes start");
    let json = map_json(&c, 1, &thirds());
    push(&c.nodes().iter().collect::<Vec<_>>(), &json).await;
    c
}

/// The vote a cluster is: `cluster:` and one seed (the others are learned).
fn spec(c: &TestGroup) -> String {
    format!("cluster:{}", c.node(0).addr())
}

fn client(clusters: &[&TestGroup]) -> Redlock {
    Redlock::new(clusters.iter().map(|c| spec(c)), opts(NODE_TIMEOUT_MS)).expect("valid nodes")
}

/// Which node of a thirds map serves `key`.
pub(crate) fn owner(key: &str) -> usize {
    match key_slot(key.as_bytes()) {
        0..=5460 => 0,
        5461..=10922 => 1,
        _ => 2,
    }
}

/// `GET key` on node `i` of `c`, as the raw reply.
async fn get_on(c: &TestGroup, i: usize, key: &str) -> String {
    Raw::to(c.node(i)).await.cmd(&["GET", key]).await
}

fn bulk(s: &[u8]) -> String {
    format!("${}\r\n{}\r\n", s.len(), String::from_utf8_lossy(s))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_spread_over_each_clusters_nodes_and_hold_with_one_cluster_down() {
    let (a, b, c) = (cluster().await, cluster().await, cluster().await);
    let rl = client(&[&a, &b, &c]);
    let other = client(&[&a, &b, &c]);
    let keys: Vec<String> = (0..12).map(|i| format!("lock:{i}")).collect();
    assert!(
        (0..3).all(|n| keys.iter().any(|k| owner(k) == n)),
        "keys on every node"
    );
    let mut locks = Vec::new();
    for key in &keys {
        let lock = rl.try_acquire(key.as_bytes(), TTL).await.expect("all up");
        // Each cluster's node for the key's slot holds it, and no other node does
        // (they would answer MOVED).
        for cl in [&a, &b, &c] {
            assert_eq!(
                get_on(cl, owner(key), key).await,
                bulk(lock.value()),
                "{key}"
            );
            let elsewhere = get_on(cl, (owner(key) + 1) % 3, key).await;
            assert!(elsewhere.starts_with("-MOVED "), "{key}: {elsewhere}");
        }
        assert!(matches!(
            other.try_acquire(key.as_bytes(), TTL).await,
            Err(RedlockError::NotAcquired { .. })
        ));
        locks.push(lock);
    }

    // Cluster c goes down, every node of it.
    for n in c.nodes() {
        n.stop().await;
    }
    for (key, lock) in keys.iter().zip(&mut locks) {
        rl.extend(lock, TTL)
            .await
            .expect("extended on 2 of 3 clusters");
        assert!(
            other.try_acquire(key.as_bytes(), TTL).await.is_err(),
            "{key}"
        );
        assert_eq!(rl.release(lock).await, 2, "{key}");
    }
    let lock = other
        .try_acquire(b"lock:new", TTL)
        .await
        .expect("2 of 3 votes");
    assert_eq!(
        get_on(&a, owner("lock:new"), "lock:new").await,
        bulk(lock.value())
    );
    // Cluster b too: no majority, and the report names the down cluster as failed.
    for n in b.nodes() {
        n.stop().await;
    }
    match rl.try_acquire(b"lock:late", TTL).await {
        Err(RedlockError::NotAcquired { last, .. }) => {
            assert_eq!(
                (last.nodes, last.granted, last.failed.len()),
                (3, 1, 2),
                "{last}"
            );
            assert!(
                last.failed.iter().any(|(addr, _)| *addr == spec(&c)),
                "{last}"
            );
        }
        other => panic!("acquired with 1 of 3 clusters: {other:?}"),
    }
    for cl in [a, b, c] {
        cl.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_moved_slot_is_followed_and_its_fence_is_a_refused_vote() {
    let (a, b, c) = (cluster().await, cluster().await, cluster().await);
    let rl = client(&[&a, &b, &c]);
    let key = "job:{moving}";
    let from = owner(key);
    let to = (from + 1) % 3;
    let lock = rl.try_acquire(key.as_bytes(), TTL).await.expect("all up");
    rl.release(&lock).await;

    // Cluster a moves the key's whole range to another node: pushed to the node that
    // loses it first, as docs/cluster.md says. The client's map is now stale.
    let mut ranges = thirds();
    let moved = ranges[from].remove(0);
    ranges[to].push(moved);
    let json = map_json(&a, 2, &ranges);
    // A move without the keys, as when the old owner is unreachable (a live move
    // carries them and needs no fence: tests/integrations/cluster_moves.rs).
    a.node(from).handle().set_cluster_move_keys(false);
    push(&[a.node(from)], &json).await;
    push(&[a.node(to), a.node(3 - from - to)], &json).await;
    // The new owner fences the slot: cluster a's vote is TRYAGAIN, and with cluster c
    // down there is no majority.
    for n in c.nodes() {
        n.stop().await;
    }
    match rl.try_acquire(key.as_bytes(), TTL).await {
        Err(RedlockError::NotAcquired { last, .. }) => {
            assert_eq!((last.granted, last.failed.len()), (1, 2), "{last}");
            let (_, e) = last
                .failed
                .iter()
                .find(|(n, _)| *n == spec(&a))
                .expect("a failed");
            assert!(
                matches!(e, NodeError::Server(t) if t.starts_with("TRYAGAIN slot ")),
                "{e}"
            );
        }
        other => panic!("a fenced slot granted: {other:?}"),
    }
    // Once the fence is over, the client follows the map to the new owner.
    a.advance(Duration::from_secs(60));
    let lock = rl
        .try_acquire(key.as_bytes(), TTL)
        .await
        .expect("a and b vote");
    assert_eq!(get_on(&a, to, key).await, bulk(lock.value()));
    assert!(get_on(&a, from, key).await.starts_with("-MOVED "));
    for cl in [a, b, c] {
        cl.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_no_node_serves_is_a_failed_vote() {
    let (a, b, c) = (cluster().await, cluster().await, cluster().await);
    let key = "unserved";
    let mut ranges = thirds();
    ranges[owner(key)].clear();
    let json = map_json(&a, 2, &ranges);
    for n in a.nodes() {
        let reply = Raw::to(n)
            .await
            .cmd(&["CLUSTER", "SETMAP", &json, "FORCE"])
            .await;
        assert_eq!(reply, "+OK\r\n");
    }
    let rl = client(&[&a, &b, &c]);
    match rl.try_acquire(key.as_bytes(), TTL).await {
        Ok(lock) => {
            // 2 of 3: a's vote failed with CLUSTERDOWN, which a report does not show on
            // success; check the keys instead.
            for i in 0..3 {
                assert!(get_on(&a, i, key).await.starts_with("-CLUSTERDOWN "));
            }
            assert_eq!(get_on(&b, owner(key), key).await, bulk(lock.value()));
        }
        Err(e) => panic!("{e}"),
    }
    for n in b.nodes() {
        n.stop().await;
    }
    match rl.try_acquire(key.as_bytes(), TTL).await {
        Err(RedlockError::NotAcquired { last, .. }) => {
            let (_, e) = last
                .failed
                .iter()
                .find(|(n, _)| *n == spec(&a))
                .expect("a failed");
            assert!(
                matches!(e, NodeError::Server(t) if t.starts_with("CLUSTERDOWN ")),
                "{e}"
            );
        }
        other => panic!("{other:?}"),
    }
    for cl in [a, b, c] {
        cl.shutdown().await;
    }
}

/// `redlockd lock --cluster SEEDS` x3 (a child process) runs the command under a lock
/// held on 2 of 3 clusters while the third is down, and refuses with 1 of 3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlockd_lock_takes_clusters_as_votes() {
    let (a, b, c) = (cluster().await, cluster().await, cluster().await);
    let seeds = |cl: &TestGroup| {
        cl.addrs()
            .iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    let run = |clusters: Vec<String>, script: &str| {
        let mut cmd = Command::new(BIN);
        cmd.arg("lock")
            .args(["--node-timeout", &format!("{NODE_TIMEOUT_MS}ms")]);
        for s in &clusters {
            cmd.args(["--cluster", s]);
        }
        cmd.args(["--ttl", "10s", "nightly", "--", "sh", "-c", script])
            .env_remove("REDLOCKD_NODES")
            .env_remove("REDLOCKD_PASSWORD")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        cmd
    };
    let all = vec![seeds(&a), seeds(&b), seeds(&c)];
    for n in c.nodes() {
        n.stop().await;
    }
    let out = timeout(BOUND, run(all.clone(), "echo ran").output())
        .await
        .expect("bounded")
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, b"ran\n");
    // Held by another: the second runner is refused (exit 75, not acquired).
    let holder = Redlock::new([spec(&a), spec(&b)], opts(NODE_TIMEOUT_MS)).unwrap();
    let lock = holder
        .try_acquire(b"nightly", TTL)
        .await
        .expect("free again");
    let out = timeout(BOUND, run(all.clone(), "echo ran").output())
        .await
        .expect("bounded")
        .expect("runs");
    assert_eq!(
        out.status.code(),
        Some(75),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
    holder.release(&lock).await;
    // b down too: 1 of 3 clusters, too few reachable (69).
    for n in b.nodes() {
        n.stop().await;
    }
    let out = timeout(BOUND, run(all, "echo ran").output())
        .await
        .expect("bounded")
        .expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(69), "{err}");
    assert!(err.contains("cluster:"), "{err}");
    for cl in [a, b, c] {
        cl.shutdown().await;
    }
}
