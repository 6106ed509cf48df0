//! One way to run a Redlock scenario against in-process nodes (`TestGroup`) and
//! against real redis-servers (`[RedisNode]`): a scenario takes `&impl Nodes` and
//! talks to the nodes only over the wire, so the same body checks both.

use super::redis_server::RedisNode;
use super::{connect_url, q, TestGroup, TestServer};
use redlockd::redlock::{Redlock, RedlockError, RedlockOptions};
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// Nodes a Redlock client can be pointed at.
pub trait Nodes {
    /// `host:port` of every node, in order.
    fn addrs(&self) -> Vec<String>;
}

impl Nodes for TestGroup {
    fn addrs(&self) -> Vec<String> {
        TestGroup::addrs(self)
            .iter()
            .map(ToString::to_string)
            .collect()
    }
}

impl Nodes for TestServer {
    fn addrs(&self) -> Vec<String> {
        vec![self.addr().to_string()]
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

/// The per-node timeout for tests that count every node's answer (a release deletes on
/// all five): a node that is up must answer within it even while the machine is
/// loaded (with 100 ms, releases counted 4 of 5 and acquires lost votes in a soak run
/// with fuzzers and builds beside it, load average 18 on 2 cores).
pub const NODE_TIMEOUT_MS: u64 = 300;

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

/// One command on every node in turn, each reply as `T`.
pub async fn on_every_node<T: redis::FromRedisValue>(nodes: &impl Nodes, args: &[&str]) -> Vec<T> {
    let mut replies = Vec::new();
    for i in 0..nodes.addrs().len() {
        replies.push(on_node(nodes, i, args).await);
    }
    replies
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
        let (a, b) = (
            redlock(nodes, opts(NODE_TIMEOUT_MS)),
            redlock(nodes, opts(NODE_TIMEOUT_MS)),
        );
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
        let (a, b) = (
            redlock(nodes, opts(NODE_TIMEOUT_MS)),
            redlock(nodes, opts(NODE_TIMEOUT_MS)),
        );
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
        let rl = redlock(nodes, opts(NODE_TIMEOUT_MS));
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

/// The group of the Jepsen-style checkers: `n` nodes with max-ttl `ttl` (so the
/// fence, max-ttl + 1 s, stays short), the restart fence on or off.
pub async fn checker_group(n: usize, ttl: Duration, fence: bool) -> TestGroup {
    TestGroup::start_with(n, |c| {
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

/// The checkers' per-node timeout: long enough that a node that is up answers within
/// it even with both cores busy. A vote lost to the scheduler would change a seed's
/// history, and take grants away from the checks that must see violations happen
/// (the fence off, no tokens). A paused node costs this much real time per request
/// (isolated and stopped nodes refuse at once), so schedules run at once and their
/// waits overlap.
pub const CHECKER_NODE_TIMEOUT_MS: u64 = 1_000;

/// `count` checker clients: one round each, per-node timeout `node_timeout_ms`
/// (`CHECKER_NODE_TIMEOUT_MS` unless a test needs longer).
pub fn checker_clients(
    group: &TestGroup,
    count: usize,
    fencing: bool,
    node_timeout_ms: u64,
) -> Vec<Redlock> {
    (0..count)
        .map(|_| {
            let opts = RedlockOptions {
                fencing_tokens: fencing,
                ..opts(node_timeout_ms)
            };
            redlock(group, opts)
        })
        .collect()
}

/// The faults both checkers inject into their group; each returns its line for the
/// history. Only the schedule draws random numbers (`wall_jump` one, from its rng), so
/// a seed still gives one history.
pub struct CheckerFaults<'c> {
    group: &'c TestGroup,
    isolated: Vec<bool>,
}

impl<'c> CheckerFaults<'c> {
    pub fn new(group: &'c TestGroup) -> CheckerFaults<'c> {
        CheckerFaults {
            group,
            isolated: vec![false; group.len()],
        }
    }

    /// Node `n` crashes and restarts at once (its fence goes up, if the group has one).
    pub fn crash_restart(&mut self, n: usize) -> String {
        self.group.node(n).crash_restart();
        self.isolated[n] = false;
        format!("crash-restart node {n}")
    }

    pub fn crash_restart_all(&mut self) -> String {
        for n in 0..self.group.len() {
            self.crash_restart(n);
        }
        format!("crash-restart all {} nodes", self.group.len())
    }

    /// Node `n` restarts as a new process with another --max-ttl (cleanly or after a
    /// crash): lowered below the clients' TTL, or back to `normal`. A lowered max-ttl
    /// must never shorten the fence below what the earlier life granted.
    pub fn max_ttl_change(
        &mut self,
        n: usize,
        normal: Duration,
        rng: &mut impl rand::Rng,
    ) -> String {
        let clean = rng.random_bool(0.5);
        let to = if rng.random_bool(0.5) {
            Duration::from_millis(rng.random_range(500..normal.as_millis() as u64))
        } else {
            normal
        };
        let restored = self.group.node(n).restart_with_max_ttl(to, clean);
        self.isolated[n] = false;
        format!(
            "restart node {n} ({}) with max-ttl {} ms (snapshot restored: {restored})",
            if clean { "clean" } else { "crash" },
            to.as_millis()
        )
    }

    /// Node `n` crashes and restarts, and its first durable write fails (a failed
    /// fsync at boot).
    pub fn crash_restart_failing_fsync(&mut self, n: usize) -> String {
        self.group.node(n).crash_restart_failing_fsync();
        self.isolated[n] = false;
        format!("crash-restart node {n}, its boot fsync fails")
    }

    /// Partitions node `n` away, or heals it if it was.
    pub async fn isolate_or_heal(&mut self, n: usize) -> String {
        let node = self.group.node(n);
        if self.isolated[n] {
            node.heal().await;
            self.isolated[n] = false;
            format!("heal node {n}")
        } else {
            node.isolate().await;
            self.isolated[n] = true;
            format!("isolate node {n}")
        }
    }

    /// Runs `action` (a client's attempt) while node `n` is paused, like a GC pause: its
    /// vote times out, and what it was sent runs when it resumes. Boxed: the attempt's
    /// future is large, and the checker's own future, on a test thread's stack in a debug
    /// build, must stay small (inline, fenced_writes overflowed its stack).
    pub fn paused_during<'a>(
        &'a self,
        n: usize,
        action: impl Future<Output = String> + 'a,
    ) -> Pin<Box<dyn Future<Output = String> + 'a>> {
        Box::pin(async move {
            let node = self.group.node(n);
            node.pause();
            let what = action.await;
            node.resume().await;
            format!("pause node {n}; {what}; resume node {n}")
        })
    }

    /// Steps the group's wall clock by up to an hour either way (TTLs must not move).
    pub fn wall_jump(&self, rng: &mut impl rand::Rng) -> String {
        let delta = rng.random_range(-3_600_000..3_600_000i64);
        self.group.jump_wall(delta);
        format!("wall jump {delta} ms")
    }
}

/// A try_acquire refused because the name is held: each of the `n` nodes answered and
/// refused (not a timeout, a NOAUTH or a node down).
#[track_caller]
pub fn refused_by_all(result: Result<redlockd::redlock::Lock, RedlockError>, n: usize) {
    match result {
        Err(RedlockError::NotAcquired { last, .. }) => {
            assert_eq!((last.granted, last.refused), (0, n), "{last}");
            assert!(last.failed.is_empty(), "{last}");
        }
        other => panic!("refused because held, by all {n} nodes: {other:?}"),
    }
}
