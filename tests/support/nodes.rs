//! One way to run a Redlock scenario against in-process nodes (`TestCluster`) and
//! against real redis-servers (`[RedisNode]`): a scenario takes `&impl Nodes` and
//! talks to the nodes only over the wire, so the same body checks both.

use super::redis_server::RedisNode;
use super::{connect_url, q, TestCluster};
use redlockd::redlock::{Redlock, RedlockError, RedlockOptions};
use std::time::Duration;

/// Nodes a Redlock client can be pointed at.
pub trait Nodes {
    /// `host:port` of every node, in order.
    fn addrs(&self) -> Vec<String>;
}

impl Nodes for TestCluster {
    fn addrs(&self) -> Vec<String> {
        TestCluster::addrs(self)
            .iter()
            .map(ToString::to_string)
            .collect()
    }
}

impl Nodes for [RedisNode] {
    fn addrs(&self) -> Vec<String> {
        super::redis_server::addrs(self)
    }
}

impl Nodes for Vec<RedisNode> {
    fn addrs(&self) -> Vec<String> {
        super::redis_server::addrs(self)
    }
}

/// Plain `host:port` addresses (nodes of any kind, fakes included).
impl Nodes for Vec<String> {
    fn addrs(&self) -> Vec<String> {
        self.clone()
    }
}

/// The node list as `redlockd lock --nodes` takes it.
pub fn nodes_arg(nodes: &impl Nodes) -> String {
    nodes.addrs().join(",")
}

/// No retries (each call is one round), and a per-node timeout generous enough for a
/// loaded 2-core machine yet small against the TTLs the tests use.
pub fn opts(node_timeout_ms: u64) -> RedlockOptions {
    RedlockOptions {
        node_timeout: Some(Duration::from_millis(node_timeout_ms)),
        retry_count: 0,
        ..RedlockOptions::default()
    }
}

pub fn redlock(nodes: &impl Nodes, opts: RedlockOptions) -> Redlock {
    Redlock::new(nodes.addrs(), opts).expect("valid nodes")
}

/// One command on node `i` over a fresh `redis` crate connection.
pub async fn on_node<T: redis::FromRedisValue>(nodes: &impl Nodes, i: usize, args: &[&str]) -> T {
    let mut c = connect_url(&format!("redis://{}/", nodes.addrs()[i])).await;
    q(&mut c, args).await.expect("the node answers")
}

pub async fn get(nodes: &impl Nodes, i: usize, key: &str) -> Option<String> {
    on_node(nodes, i, &["GET", key]).await
}

pub async fn pttl(nodes: &impl Nodes, i: usize, key: &str) -> i64 {
    on_node(nodes, i, &["PTTL", key]).await
}

/// A lock's random value as text (hex).
pub fn text(value: &[u8]) -> String {
    String::from_utf8(value.to_vec()).expect("lock values are hex")
}

/// Scenarios run against both kinds of nodes.
pub mod scenario {
    use super::*;

    /// Two clients race for 20 names: never both win, a loss is a refusal (not a node
    /// failure), and a split vote leaves nothing behind.
    pub async fn of_two_racing_clients_at_most_one_wins(nodes: &impl Nodes) {
        let n = nodes.addrs().len();
        let (a, b) = (redlock(nodes, opts(100)), redlock(nodes, opts(100)));
        let ttl = Duration::from_secs(10);
        let mut wins = 0;
        for round in 0..20 {
            let key = format!("race{round}");
            let (ra, rb) = tokio::join!(
                a.try_acquire(key.as_bytes(), ttl),
                b.try_acquire(key.as_bytes(), ttl)
            );
            assert!(!(ra.is_ok() && rb.is_ok()), "round {round}: both won");
            for e in [&ra, &rb].into_iter().filter_map(|r| r.as_ref().err()) {
                assert!(
                    matches!(e, RedlockError::NotAcquired { .. }),
                    "round {round}: {e:?}"
                );
                assert!(!e.nodes_unavailable(), "round {round}: {e}");
            }
            match (ra, rb) {
                (Ok(l), _) | (_, Ok(l)) => {
                    wins += 1;
                    let value = text(l.value());
                    for i in 0..n {
                        let on_node = get(nodes, i, &key).await;
                        assert!(on_node.is_none() || on_node.as_deref() == Some(&*value));
                    }
                }
                (Err(_), Err(_)) => {
                    for i in 0..n {
                        assert_eq!(get(nodes, i, &key).await, None, "round {round}");
                    }
                }
            }
        }
        assert!(wins > 0, "some round must have a winner");
        // Sequential: a holds, b is refused by every node.
        let held = a.try_acquire(b"seq", ttl).await.expect("a");
        match b.try_acquire(b"seq", ttl).await {
            Err(RedlockError::NotAcquired { attempts, last }) => {
                assert_eq!(attempts, 1);
                assert_eq!((last.granted, last.refused), (0, n), "{last}");
                assert!(last.failed.is_empty(), "{last}");
            }
            other => panic!("b must lose: {other:?}"),
        }
        assert_eq!(a.release(&held).await, n);
    }

    /// A release deletes the key on every node and frees the name at once.
    pub async fn release_deletes_the_key_everywhere(nodes: &impl Nodes) {
        let n = nodes.addrs().len();
        let (a, b) = (redlock(nodes, opts(100)), redlock(nodes, opts(100)));
        let ttl = Duration::from_secs(10);
        let lock = a.try_acquire(b"rel", ttl).await.expect("a");
        assert_eq!(a.release(&lock).await, n);
        for i in 0..n {
            assert_eq!(get(nodes, i, "rel").await, None, "node {i}");
        }
        b.try_acquire(b"rel", ttl)
            .await
            .expect("free again at once");
    }

    /// Extend and release use EVALSHA and fall back to EVAL after SCRIPT FLUSH.
    pub async fn extend_and_release_fall_back_to_eval_after_script_flush(nodes: &impl Nodes) {
        let n = nodes.addrs().len();
        let rl = redlock(nodes, opts(100));
        let ttl = Duration::from_secs(10);
        let mut lock = rl.try_acquire(b"ns", ttl).await.expect("a");
        rl.extend(&mut lock, ttl)
            .await
            .expect("extend (EVAL, cached)");
        for i in 0..n {
            let () = on_node(nodes, i, &["SCRIPT", "FLUSH"]).await;
        }
        rl.extend(&mut lock, ttl).await.expect("extend after flush");
        for i in 0..n {
            let pttl = pttl(nodes, i, "ns").await;
            assert!(pttl > 9_000 && pttl <= 10_000, "node {i}: {pttl}");
        }
        for i in 0..n {
            let () = on_node(nodes, i, &["SCRIPT", "FLUSH"]).await;
        }
        assert_eq!(rl.release(&lock).await, n, "release after flush");
        for i in 0..n {
            assert_eq!(get(nodes, i, "ns").await, None);
        }
    }
}

/// The cluster of the Jepsen-style checkers: `n` nodes with max-ttl `ttl` (so the
/// fence, max-ttl + 1 s, stays short), the restart fence on or off.
pub async fn checker_cluster(n: usize, ttl: Duration, fence: bool) -> TestCluster {
    TestCluster::start_with(n, |c| {
        let c = redlockd::Config { max_ttl: ttl, ..c };
        if fence {
            c
        } else {
            redlockd::Config {
                restart_delay: Some(Duration::ZERO),
                ..c
            }
        }
    })
    .await
}

/// The checkers' per-node timeout. A paused node costs this much real time per request
/// (isolated and stopped nodes refuse at once), and a node that is up must always answer
/// within it, also on a loaded 2-core machine: else a vote is lost to the scheduler and
/// a seed no longer gives one history.
pub const CHECKER_NODE_TIMEOUT_MS: u64 = 150;

/// `count` checker clients: one round each, per-node timeout `CHECKER_NODE_TIMEOUT_MS`.
pub fn checker_clients(cluster: &TestCluster, count: usize, fencing: bool) -> Vec<Redlock> {
    (0..count)
        .map(|_| {
            let opts = RedlockOptions {
                fencing_tokens: fencing,
                ..opts(CHECKER_NODE_TIMEOUT_MS)
            };
            redlock(cluster, opts)
        })
        .collect()
}
