//! A Redlock client: a lock held on a majority of N independent Redis-compatible nodes
//! (redlockd or real Redis), written from the algorithm on redis.io's distributed-locks
//! page.
//!
//! - acquire: a fresh random value, `SET key value NX PX ttl` on every node at once, each
//!   bounded by a per-node timeout that is small against the TTL; the lock is held only
//!   with a majority *and* a positive validity `ttl - elapsed - drift`. Otherwise it is
//!   released everywhere and retried after a random delay.
//! - extend: compare-and-pexpire on every node, again a majority before validity ends.
//! - release: compare-and-delete on every node (a lock is only ever deleted by the
//!   holder of its value).
//! - [`WatchedLock`]: extends every ttl/3 and tells the holder the moment the lock can no
//!   longer be guaranteed.
//!
//! A node that is down, times out or answers with an error (such as redlockd's
//! `-TRYAGAIN` restart fence) counts as one failed vote: never as a hang.

mod cluster;
mod conn;
mod error;
mod fenced;
#[cfg(all(test, feature = "server"))]
mod five_nodes_tests;
#[cfg(feature = "cli")]
#[doc(hidden)]
pub mod flock;
mod nodes;
mod watchdog;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use rand::Rng;
use redis_protocol::resp2::types::BytesFrame;
use tokio::time::Instant;

use cluster::{ClusterVote, Vote};
pub use conn::NodeError;
use conn::{Node, Request, Script};
pub use error::{AttemptReport, RedlockError};
pub use nodes::TlsOptions;
pub use watchdog::WatchedLock;

/// Deletes the key only if it still holds our value, so a lock that expired and was
/// taken by someone else is never released by us.
const RELEASE_SCRIPT: &str = "if redis.call(\"get\",KEYS[1]) == ARGV[1] then\n    return redis.call(\"del\",KEYS[1])\nelse\n    return 0\nend\n";

/// Resets the TTL only if the key still holds our value.
const EXTEND_SCRIPT: &str = "if redis.call(\"get\",KEYS[1]) == ARGV[1] then\n    return redis.call(\"pexpire\",KEYS[1],ARGV[2])\nelse\n    return 0\nend\n";

/// Random bytes in a lock value: unguessable and unique across clients and attempts.
const VALUE_BYTES: usize = 24;

/// Settings of a [`Redlock`] client. `Default` gives values suited to TTLs of seconds.
#[derive(Debug, Clone)]
pub struct RedlockOptions {
    /// Sent with `AUTH` on every new connection (same password for all nodes), as the
    /// default user's, or `user`'s when one is given. Credentials in a node's URL
    /// (`redis://user:password@host:port`) win for that node.
    pub password: Option<String>,
    /// The ACL user (`AUTH user password`); `None`: the default user.
    pub user: Option<String>,
    /// Bound on every operation on one node (dial, AUTH, round trips). `None`: the
    /// smaller of 50 ms and ttl/10, so that slow nodes cannot eat the lock's validity.
    pub node_timeout: Option<Duration>,
    /// Attempts after the first one in [`Redlock::acquire`].
    pub retry_count: u32,
    /// Fixed part of the pause between attempts.
    pub retry_delay: Duration,
    /// Random extra (0..jitter) added to each pause, so that competing clients that
    /// failed together do not retry in lockstep (the spec's split-brain advice).
    pub retry_jitter: Duration,
    /// Acquire with a fencing token ([`Lock::token`]): two phases, `FENCING.GRANT` and
    /// `FENCING.COMMIT` (redlockd nodes only; real Redis answers "unknown command").
    /// Off by default, so the client keeps working against any Redis.
    pub fencing_tokens: bool,
    /// CA and client certificate for `rediss://` nodes.
    pub tls: TlsOptions,
}

impl Default for RedlockOptions {
    fn default() -> Self {
        RedlockOptions {
            password: None,
            user: None,
            node_timeout: None,
            retry_count: 3,
            retry_delay: Duration::from_millis(100),
            retry_jitter: Duration::from_millis(100),
            fencing_tokens: false,
            tls: TlsOptions::default(),
        }
    }
}

/// A lock held on a majority of nodes. It carries no connection: pass it back to the
/// [`Redlock`] that made it to extend or release it. Dropping it does not release it
/// (the TTL does); [`WatchedLock`] is the guard that releases on drop.
#[derive(Debug, Clone)]
pub struct Lock {
    resource: Bytes,
    value: Bytes,
    ttl: Duration,
    valid_until: Instant,
    token: Option<u64>,
}

impl Lock {
    /// The fencing token, when acquired with `fencing_tokens`: larger than the token of
    /// every holder whose lock ended before this one was granted. Send it with every
    /// write to the protected resource, which must refuse a token lower than the
    /// highest it has seen. Extending the lock keeps it.
    pub fn token(&self) -> Option<u64> {
        self.token
    }

    /// The key locked on every node.
    pub fn resource(&self) -> &[u8] {
        &self.resource
    }

    /// The random value that identifies this holder (what compare-and-* scripts check).
    pub fn value(&self) -> &[u8] {
        &self.value
    }

    /// The TTL the keys were set (or last extended) with.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Until this instant the lock is guaranteed (TTL minus the time spent acquiring and
    /// the allowance for clock drift). Work protected by the lock must end before it.
    pub fn valid_until(&self) -> Instant {
        self.valid_until
    }

    /// Time left of the validity (zero once it has ended).
    pub fn validity(&self) -> Duration {
        self.valid_until.saturating_duration_since(Instant::now())
    }
}

/// The majority of `n` nodes.
fn quorum(n: usize) -> usize {
    n / 2 + 1
}

/// The spec's allowance for clock drift between nodes: 1% of the TTL plus 2 ms.
fn drift(ttl: Duration) -> Duration {
    ttl / 100 + Duration::from_millis(2)
}

/// A Redlock client over a fixed set of independent nodes. Cheap to clone (shared
/// connections), and safe to use from many tasks at once.
#[derive(Clone)]
pub struct Redlock {
    inner: Arc<Inner>,
}

struct Inner {
    nodes: Vec<Vote>,
    opts: RedlockOptions,
    release_script: Script,
    extend_script: Script,
}

impl fmt::Debug for Redlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redlock")
            .field(
                "nodes",
                &self
                    .inner
                    .nodes
                    .iter()
                    .map(|n| n.addr())
                    .collect::<Vec<_>>(),
            )
            .field("opts", &self.inner.opts)
            .finish()
    }
}

impl Redlock {
    /// A client for `nodes`: `host:port`, `redis://host:port`, or `rediss://host:port`
    /// for TLS (with `opts.tls`; its files are read here). Nothing is dialled here:
    /// connections are made on first use and remade after any failure.
    ///
    /// A Redis Cluster counts as one node (one vote): `cluster:` and its seed addresses,
    /// comma-separated (`cluster:10.0.0.1:7001,10.0.0.2:7001`). The client learns its
    /// slot map (`CLUSTER SLOTS`), sends each key to its slot's node and follows
    /// `MOVED`; the first seed's scheme and credentials are used for every node of that
    /// cluster.
    pub fn new<I, S>(nodes: I, opts: RedlockOptions) -> Result<Redlock, RedlockError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut list = Vec::new();
        // Built (its files read) once, for the first rediss:// node.
        let mut tls: Option<tokio_rustls::TlsConnector> = None;
        let mut connector = || match &tls {
            Some(c) => Ok(c.clone()),
            None => {
                let c = nodes::connector(&opts.tls)?;
                tls = Some(c.clone());
                Ok(c)
            }
        };
        for addr in nodes {
            let addr: String = addr.into();
            let addr = addr.trim().to_string();
            if addr.is_empty() {
                return Err(RedlockError::Config("empty node address".into()));
            }
            let mut target = |a: &str| {
                nodes::Target::new(
                    a,
                    &mut connector,
                    opts.user.as_deref(),
                    opts.password.as_deref(),
                )
                .map_err(RedlockError::Config)
            };
            if let Some(seeds) = addr.strip_prefix(cluster::PREFIX) {
                let seeds = seeds
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(&mut target)
                    .collect::<Result<Vec<_>, _>>()?;
                let vote = ClusterVote::new(addr, seeds).map_err(RedlockError::Config)?;
                list.push(Vote::Cluster(vote));
            } else {
                let t = target(&addr)?;
                list.push(Vote::Node(Node::new(addr, t)));
            }
        }
        if list.is_empty() {
            return Err(RedlockError::Config("no nodes given".into()));
        }
        if let Some(t) = opts.node_timeout {
            if t.is_zero() {
                return Err(RedlockError::Config("node timeout must be positive".into()));
            }
        }
        Ok(Redlock {
            inner: Arc::new(Inner {
                nodes: list,
                opts,
                release_script: Script::new(RELEASE_SCRIPT),
                extend_script: Script::new(EXTEND_SCRIPT),
            }),
        })
    }

    /// Number of nodes.
    pub fn node_count(&self) -> usize {
        self.inner.nodes.len()
    }

    /// Nodes needed for a majority.
    pub fn quorum(&self) -> usize {
        quorum(self.inner.nodes.len())
    }

    /// The per-node timeout used with `ttl`.
    pub fn node_timeout(&self, ttl: Duration) -> Duration {
        self.inner
            .opts
            .node_timeout
            .unwrap_or_else(|| Duration::from_millis(50).min(ttl / 10))
            .max(Duration::from_millis(1))
    }

    /// Acquires `resource` for `ttl`, trying once and then up to `retry_count` more times
    /// after random pauses.
    pub async fn acquire(&self, resource: &[u8], ttl: Duration) -> Result<Lock, RedlockError> {
        check_ttl(ttl)?;
        let attempts = self.inner.opts.retry_count.saturating_add(1);
        let mut last = None;
        for attempt in 1..=attempts {
            match self.attempt(resource, ttl).await {
                Ok(lock) => return Ok(lock),
                Err(report) => last = Some(report),
            }
            if attempt < attempts {
                tokio::time::sleep(self.retry_pause()).await;
            }
        }
        Err(RedlockError::NotAcquired {
            attempts,
            last: last.unwrap_or_else(|| self.empty_report()),
        })
    }

    /// One attempt, no retry: what a cron job that must simply skip a held lock wants.
    pub async fn try_acquire(&self, resource: &[u8], ttl: Duration) -> Result<Lock, RedlockError> {
        check_ttl(ttl)?;
        self.attempt(resource, ttl)
            .await
            .map_err(|last| RedlockError::NotAcquired { attempts: 1, last })
    }

    /// Retries (ignoring `retry_count`) until the lock is won or `wait` has passed. The
    /// last pause is cut short at the deadline and followed by one final attempt, so a
    /// zero `wait` means exactly one attempt.
    pub async fn acquire_within(
        &self,
        resource: &[u8],
        ttl: Duration,
        wait: Duration,
    ) -> Result<Lock, RedlockError> {
        check_ttl(ttl)?;
        let start = Instant::now();
        let deadline = start + wait;
        let mut attempts = 0u32;
        loop {
            attempts = attempts.saturating_add(1);
            let report = match self.attempt(resource, ttl).await {
                Ok(lock) => return Ok(lock),
                Err(report) => report,
            };
            let now = Instant::now();
            if now >= deadline {
                return Err(RedlockError::Timeout {
                    waited: start.elapsed(),
                    attempts,
                    last: Some(report),
                });
            }
            tokio::time::sleep_until((now + self.retry_pause()).min(deadline)).await;
        }
    }

    /// Extends `lock` to `ttl` from now on every node. On success `lock`'s validity is
    /// renewed; on failure it is left as it was and the caller must treat the lock as
    /// lost once `lock.valid_until()` passes (it may still hold on some nodes).
    pub async fn extend(&self, lock: &mut Lock, ttl: Duration) -> Result<(), RedlockError> {
        check_ttl(ttl)?;
        let start = Instant::now();
        if start >= lock.valid_until {
            return Err(RedlockError::Lost);
        }
        let ttl_ms = ms_arg(ttl);
        let req = Request::Script {
            script: &self.inner.extend_script,
            key: &lock.resource,
            args: &[&lock.value, ttl_ms.as_bytes()],
        };
        let (granted, _, _) = self
            .on_all(ttl, &req, |f| matches!(f, BytesFrame::Integer(1)))
            .await;
        let end = Instant::now();
        let validity = ttl
            .checked_sub(end - start)
            .and_then(|v| v.checked_sub(drift(ttl)))
            .unwrap_or(Duration::ZERO);
        if granted >= self.quorum() && end < lock.valid_until && !validity.is_zero() {
            lock.ttl = ttl;
            lock.valid_until = start + validity;
            Ok(())
        } else {
            Err(RedlockError::Lost)
        }
    }

    /// Releases `lock` on every node (compare-and-delete) and returns how many nodes
    /// deleted it. Failures are not errors: the keys expire with their TTL anyway.
    pub async fn release(&self, lock: &Lock) -> usize {
        release_value(self, &lock.resource, &lock.value, lock.ttl).await
    }

    /// Acquires like [`Redlock::acquire`] and hands the lock to a watchdog that keeps it
    /// alive until the guard is released or dropped.
    pub async fn lock_with_watchdog(
        &self,
        resource: &[u8],
        ttl: Duration,
    ) -> Result<WatchedLock, RedlockError> {
        let lock = self.acquire(resource, ttl).await?;
        Ok(self.watch(lock))
    }

    /// Puts an already acquired lock under a watchdog (extends every ttl/3). Must be
    /// called inside a tokio runtime.
    pub fn watch(&self, lock: Lock) -> WatchedLock {
        WatchedLock::start(self.clone(), lock)
    }

    /// One round of the algorithm. On failure the value is released everywhere (a node
    /// may have granted it without us hearing back) and the round's report is returned.
    async fn attempt(&self, resource: &[u8], ttl: Duration) -> Result<Lock, AttemptReport> {
        if self.inner.opts.fencing_tokens {
            return self.attempt_fenced(resource, ttl).await;
        }
        let value = random_value();
        let ttl_ms = ms_arg(ttl);
        let args: [&[u8]; 6] = [b"SET", resource, &value, b"NX", b"PX", ttl_ms.as_bytes()];
        let start = Instant::now();
        let (granted, refused, failed) = self
            .on_all(
                ttl,
                &Request::Command(&args),
                |f| matches!(f, BytesFrame::SimpleString(s) if s.as_ref() == b"OK"),
            )
            .await;
        let elapsed = start.elapsed();
        let validity = ttl
            .checked_sub(elapsed)
            .and_then(|v| v.checked_sub(drift(ttl)))
            .unwrap_or(Duration::ZERO);
        let majority = granted >= self.quorum();
        if majority && !validity.is_zero() {
            return Ok(Lock {
                resource: Bytes::copy_from_slice(resource),
                value,
                ttl,
                valid_until: start + validity,
                token: None,
            });
        }
        if granted > 0 || !failed.is_empty() {
            release_value(self, resource, &value, ttl).await;
        }
        Err(AttemptReport {
            nodes: self.node_count(),
            granted,
            refused,
            failed,
            expired: majority,
        })
    }

    /// Sends `req` to every node at once and waits for all (each bounded by the per-node
    /// timeout). Returns (granted, refused, failed) where `granted` counts the replies
    /// `ok` accepts.
    async fn on_all(
        &self,
        ttl: Duration,
        req: &Request<'_>,
        ok: impl Fn(&BytesFrame) -> bool,
    ) -> (usize, usize, Vec<(String, NodeError)>) {
        let all: Vec<usize> = (0..self.node_count()).collect();
        let (mut granted, mut refused, mut failed) = (0, 0, Vec::new());
        for (i, r) in self.on_nodes(&all, ttl, req).await {
            match r {
                Ok(f) if ok(&f) => granted += 1,
                Ok(_) => refused += 1,
                Err(e) => failed.push((self.inner.nodes[i].addr().to_string(), e)),
            }
        }
        (granted, refused, failed)
    }

    /// Sends `req` to the nodes at `indices` at once; their replies, in that order.
    async fn on_nodes(
        &self,
        indices: &[usize],
        ttl: Duration,
        req: &Request<'_>,
    ) -> Vec<(usize, Result<BytesFrame, NodeError>)> {
        let timeout = self.node_timeout(ttl);
        let futs = indices
            .iter()
            .map(|&i| self.inner.nodes[i].run(timeout, req))
            .collect();
        indices.iter().copied().zip(join_all(futs).await).collect()
    }

    fn retry_pause(&self) -> Duration {
        let o = &self.inner.opts;
        let jitter_ms = o.retry_jitter.as_millis().min(u64::MAX as u128) as u64;
        let extra = if jitter_ms == 0 {
            0
        } else {
            rand::rng().random_range(0..jitter_ms)
        };
        o.retry_delay + Duration::from_millis(extra)
    }

    fn empty_report(&self) -> AttemptReport {
        AttemptReport {
            nodes: self.node_count(),
            granted: 0,
            refused: 0,
            failed: Vec::new(),
            expired: false,
        }
    }
}

/// Compare-and-delete of `value` on every node; returns how many deleted it.
async fn release_value(rl: &Redlock, resource: &[u8], value: &[u8], ttl: Duration) -> usize {
    let req = Request::Script {
        script: &rl.inner.release_script,
        key: resource,
        args: &[value],
    };
    let (deleted, _, _) = rl
        .on_all(ttl, &req, |f| matches!(f, BytesFrame::Integer(1)))
        .await;
    deleted
}

fn check_ttl(ttl: Duration) -> Result<(), RedlockError> {
    if ttl < Duration::from_millis(1) {
        return Err(RedlockError::Config("TTL must be at least 1 ms".into()));
    }
    Ok(())
}

/// A TTL as the decimal milliseconds PX and PEXPIRE take.
fn ms_arg(ttl: Duration) -> String {
    ttl.as_millis().to_string()
}

/// A fresh lock value: random bytes, hex-encoded so that it reads well in MONITOR and
/// redis-cli (the spec only asks for uniqueness).
fn random_value() -> Bytes {
    let mut raw = [0u8; VALUE_BYTES];
    rand::rng().fill(&mut raw[..]);
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = Vec::with_capacity(VALUE_BYTES * 2);
    for b in raw {
        out.push(HEX[(b >> 4) as usize]);
        out.push(HEX[(b & 15) as usize]);
    }
    Bytes::from(out)
}

/// Polls every future in place (no task spawned per node, so no allocation beyond the
/// boxes and no scheduling delay) and returns their outputs in order.
async fn join_all<F: Future>(futs: Vec<F>) -> Vec<F::Output> {
    let mut pending: Vec<Pin<Box<F>>> = futs.into_iter().map(Box::pin).collect();
    let mut outs: Vec<Option<F::Output>> = pending.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut all_done = true;
        for (fut, out) in pending.iter_mut().zip(outs.iter_mut()) {
            if out.is_none() {
                match fut.as_mut().poll(cx) {
                    Poll::Ready(v) => *out = Some(v),
                    Poll::Pending => all_done = false,
                }
            }
        }
        if all_done {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;
    outs.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quorum_is_a_strict_majority() {
        assert_eq!(quorum(1), 1);
        assert_eq!(quorum(3), 2);
        assert_eq!(quorum(4), 3);
        assert_eq!(quorum(5), 3);
    }

    #[test]
    fn drift_is_one_percent_plus_two_ms() {
        assert_eq!(drift(Duration::from_secs(10)), Duration::from_millis(102));
    }

    #[test]
    fn values_are_fresh_and_long() {
        let a = random_value();
        let b = random_value();
        assert_eq!(a.len(), 2 * VALUE_BYTES);
        assert_ne!(a, b);
    }

    #[test]
    fn default_node_timeout_is_small_against_the_ttl() {
        let rl = Redlock::new(["127.0.0.1:1"], RedlockOptions::default()).unwrap();
        assert_eq!(
            rl.node_timeout(Duration::from_secs(10)),
            Duration::from_millis(50)
        );
        assert_eq!(
            rl.node_timeout(Duration::from_millis(200)),
            Duration::from_millis(20)
        );
    }
}
