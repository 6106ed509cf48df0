//! A checker in the style of Jepsen's fenced-write workload. Redlock clients on a
//! 5-node TestGroup take a lock, may pause (the manual clock moves) between acquiring
//! and writing, and write to a storage that refuses a token lower than the highest it
//! has accepted. A seeded schedule crash-restarts nodes (one, or all five at once),
//! pauses them, partitions them and jumps their wall clocks.
//!
//! Every write is recorded. With fencing tokens the checker proves: tokens grow in
//! acquisition order, the tokens the storage accepted are strictly increasing from one
//! holder to the next, and no accepted write came from a holder older than one already
//! accepted (no update lost to a stale holder). The same schedules, run without tokens,
//! corrupt the storage; with tokens minted by INCR on one node (Redisson's FencedLock,
//! bsm/redislock), tokens go backwards after that node restarts. So the checker can fail.
//!
//! Everything runs in one task, step by step: the same seed gives the same schedule.

use crate::support;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use redlockd::redlock::{Lock, Redlock};
use redlockd::testing::TestGroup;
use std::time::Duration;
use support::nodes::{checker_clients, checker_group, CheckerFaults, CHECKER_NODE_TIMEOUT_MS};

const NODES: usize = 5;
const CLIENTS: usize = 3;
const TTL: Duration = Duration::from_secs(10);
const RESOURCE: &[u8] = b"fenced:resource";
const SEEDS: [u64; 5] = [11, 12, 13, 14, 15];
const STEPS: usize = 300;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Tokens {
    /// FENCING.GRANT + FENCING.COMMIT on a quorum (this crate's client).
    Fencing,
    /// No token: the storage cannot tell a stale holder.
    None,
    /// INCR on node 0 after acquiring, as single-node fenced locks do.
    IncrOnNode0,
}

/// One accepted or refused write: who (the holder's acquisition number) and its token.
#[derive(Clone, Debug)]
struct Write {
    holder: usize,
    token: Option<u64>,
    #[allow(dead_code)] // shown when a violation is printed
    at_ms: u64,
}

/// The protected resource: refuses a token below the highest it has accepted.
#[derive(Default)]
struct Storage {
    highest: Option<u64>,
    accepted: Vec<Write>,
    refused: Vec<Write>,
}

impl Storage {
    fn write(&mut self, w: Write) -> bool {
        let ok = match (w.token, self.highest) {
            (Some(t), Some(h)) => t >= h,
            _ => true,
        };
        if ok {
            if let Some(t) = w.token {
                self.highest = Some(t);
            }
            self.accepted.push(w);
        } else {
            self.refused.push(w);
        }
        ok
    }
}

/// What the checker found wrong.
#[derive(Debug, Default)]
struct Violations {
    /// Consecutive accepted writes of different holders whose tokens did not increase.
    not_increasing: Vec<(Write, Write)>,
    /// An accepted write from a holder older than one whose write was accepted before.
    lost_to_stale: Vec<(Write, Write)>,
    /// Tokens handed out in acquisition order that did not grow.
    backwards: Vec<(usize, u64, usize, u64)>,
}

impl Violations {
    fn is_empty(&self) -> bool {
        self.not_increasing.is_empty() && self.lost_to_stale.is_empty() && self.backwards.is_empty()
    }
}

fn check(storage: &Storage, issued: &[(usize, u64)]) -> Violations {
    let mut v = Violations::default();
    for pair in storage.accepted.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        if a.holder != b.holder {
            if let (Some(ta), Some(tb)) = (a.token, b.token) {
                if tb <= ta {
                    v.not_increasing.push((a.clone(), b.clone()));
                }
            }
        }
        if b.holder < a.holder {
            v.lost_to_stale.push((a.clone(), b.clone()));
        }
    }
    for pair in issued.windows(2) {
        let ((ha, ta), (hb, tb)) = (pair[0], pair[1]);
        if tb <= ta {
            v.backwards.push((ha, ta, hb, tb));
        }
    }
    v
}

struct Holder {
    lock: Lock,
    /// Acquisition number: holders are numbered in the order they acquired.
    number: usize,
    token: Option<u64>,
}

struct Outcome {
    history: Vec<String>,
    storage: Storage,
    issued: Vec<(usize, u64)>,
    violations: Violations,
}

/// INCR on node 0, bounded: `None` when the node is down, paused or fenced.
async fn incr_on_node0(group: &TestGroup) -> Option<u64> {
    let client = redis::Client::open(group.node(0).url()).ok()?;
    let work = async {
        let mut con = client.get_multiplexed_async_connection().await.ok()?;
        redis::cmd("INCR")
            .arg("fenced:counter")
            .query_async::<u64>(&mut con)
            .await
            .ok()
    };
    tokio::time::timeout(Duration::from_millis(200), work)
        .await
        .ok()
        .flatten()
}

/// Client `c` tries once to acquire; returns a line for the history.
async fn acquire(
    group: &TestGroup,
    redlock: &Redlock,
    tokens: Tokens,
    slot: &mut Option<Holder>,
    next_number: &mut usize,
    issued: &mut Vec<(usize, u64)>,
) -> String {
    if slot.is_some() {
        return "already holds".into();
    }
    let lock = match redlock.try_acquire(RESOURCE, TTL).await {
        Ok(lock) => lock,
        Err(_) => return "denied".into(),
    };
    let token = match tokens {
        Tokens::Fencing => lock.token(),
        Tokens::None => None,
        Tokens::IncrOnNode0 => match incr_on_node0(group).await {
            Some(t) => Some(t),
            None => {
                redlock.release(&lock).await;
                return "granted, but INCR on node 0 failed: released".into();
            }
        },
    };
    let number = *next_number;
    *next_number += 1;
    if let Some(t) = token {
        issued.push((number, t));
    }
    *slot = Some(Holder {
        lock,
        number,
        token,
    });
    format!("granted as holder {number}, token {token:?}")
}

/// Runs one seeded schedule with `tokens`.
async fn run_schedule(seed: u64, tokens: Tokens, fence: bool) -> Outcome {
    let group = checker_group(NODES, TTL, fence).await;
    let redlocks = checker_clients(
        &group,
        CLIENTS,
        tokens == Tokens::Fencing,
        CHECKER_NODE_TIMEOUT_MS,
    );
    let clock = group.clock().clone();
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut held: Vec<Option<Holder>> = (0..CLIENTS).map(|_| None).collect();
    let mut storage = Storage::default();
    let mut issued = Vec::new();
    let mut next_number = 0;
    let mut history = Vec::new();
    let mut faults = CheckerFaults::new(&group);
    for step in 0..STEPS {
        let now = clock.now_ms();
        let roll = rng.random_range(0..100);
        let c = rng.random_range(0..CLIENTS);
        let n = rng.random_range(0..NODES);
        let event = match roll {
            0..=29 => {
                let r = acquire(
                    &group,
                    &redlocks[c],
                    tokens,
                    &mut held[c],
                    &mut next_number,
                    &mut issued,
                )
                .await;
                format!("client {c} acquire: {r}")
            }
            // The holder writes in good faith, however long it was paused since it
            // acquired (the clock may have passed its validity meanwhile).
            30..=54 => match &held[c] {
                Some(h) => {
                    let ok = storage.write(Write {
                        holder: h.number,
                        token: h.token,
                        at_ms: now,
                    });
                    let what = if ok { "accepted" } else { "refused" };
                    format!(
                        "client {c} (holder {}) writes with {:?}: {what}",
                        h.number, h.token
                    )
                }
                None => format!("client {c} has nothing to write with"),
            },
            55..=64 => match held[c].take() {
                Some(h) => {
                    let deleted = redlocks[c].release(&h.lock).await;
                    format!("client {c} releases holder {}: {deleted} nodes", h.number)
                }
                None => format!("client {c} holds nothing"),
            },
            65..=79 => {
                // Short steps, and now and then a pause past the TTL.
                let ms = if rng.random_range(0..4) == 0 {
                    rng.random_range(10_000..25_000)
                } else {
                    rng.random_range(100..3_000)
                };
                clock.advance(Duration::from_millis(ms));
                format!("advance {ms} ms")
            }
            80..=82 => faults.crash_restart(n),
            83..=84 => faults.max_ttl_change(n, TTL, &mut rng),
            85 => faults.crash_restart_failing_fsync(n),
            86..=87 => faults.crash_restart_all(),
            88..=92 => faults.isolate_or_heal(n).await,
            93..=96 => {
                let r = acquire(
                    &group,
                    &redlocks[c],
                    tokens,
                    &mut held[c],
                    &mut next_number,
                    &mut issued,
                );
                faults
                    .paused_during(n, async { format!("client {c} acquire: {}", r.await) })
                    .await
            }
            _ => faults.wall_jump(&mut rng),
        };
        history.push(format!("{step:4} t={now} {event}"));
    }
    group.shutdown().await;
    let violations = check(&storage, &issued);
    Outcome {
        history,
        storage,
        issued,
        violations,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_tokens_protect_the_storage_and_the_checker_can_fail() {
    let (mut accepted, mut refused, mut holders) = (0, 0, 0);
    let (mut corrupted, mut backwards) = (0, 0);
    // Every schedule runs on its own group, all at once: a paused node costs a
    // per-node timeout of real time, and the waits overlap.
    let runs = futures_util::future::join_all(SEEDS.map(|seed| async move {
        tokio::join!(
            run_schedule(seed, Tokens::Fencing, true),
            run_schedule(seed, Tokens::Fencing, false),
            run_schedule(seed, Tokens::None, true),
            run_schedule(seed, Tokens::IncrOnNode0, true),
        )
    }))
    .await;
    for (seed, (with_fence, without_fence, no_tokens, incr)) in SEEDS.into_iter().zip(runs) {
        // With tokens, with and without the restart fence: tokens alone protect the
        // storage, even when two clients believe they hold the lock.
        for (fence, out) in [(true, with_fence), (false, without_fence)] {
            assert!(
                out.violations.is_empty(),
                "seed {seed}, fence {fence}: {:?}\nissued {:?}\n{}",
                out.violations,
                out.issued,
                out.history.join("\n")
            );
            accepted += out.storage.accepted.len();
            refused += out.storage.refused.len();
            holders += out.issued.len();
        }
        // The same schedule without tokens: stale holders overwrite newer ones.
        let out = no_tokens;
        if let Some((a, b)) = out.violations.lost_to_stale.first() {
            eprintln!("seed {seed} without tokens: {b:?} landed after {a:?}");
        }
        corrupted += out.violations.lost_to_stale.len();
        // Tokens from INCR on one node: its restart sends them backwards.
        let out = incr;
        if let Some(b) = out.violations.backwards.first() {
            eprintln!("seed {seed} with INCR tokens: went backwards {b:?}");
        }
        backwards += out.violations.backwards.len();
    }
    eprintln!(
        "fencing tokens: {holders} holders, {accepted} writes accepted, {refused} stale writes refused; \
         without tokens: {corrupted} writes lost to stale holders; INCR tokens: {backwards} went backwards"
    );
    assert!(holders >= 30, "too few holders to mean anything: {holders}");
    assert!(
        refused > 0,
        "no stale write was ever attempted: the schedule is too tame"
    );
    assert!(
        corrupted > 0,
        "without tokens the storage was never corrupted: the checker is blind"
    );
    assert!(
        backwards > 0,
        "INCR tokens never went backwards: the schedule never restarted node 0 usefully"
    );
}

/// The textbook pause (Kleppmann's figure): A acquires, pauses past its TTL, B
/// acquires and writes, A wakes up and writes. Only the token stops A.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_holder_is_refused_by_its_token() {
    let group = checker_group(NODES, TTL, true).await;
    let rl = checker_clients(&group, CLIENTS, true, CHECKER_NODE_TIMEOUT_MS);
    let a = rl[0].try_acquire(RESOURCE, TTL).await.expect("A acquires");
    group.advance(TTL + Duration::from_millis(1));
    let b = rl[1].try_acquire(RESOURCE, TTL).await.expect("B acquires");
    let (ta, tb) = (a.token().unwrap(), b.token().unwrap());
    assert!(tb > ta, "{tb} > {ta}");
    let mut storage = Storage::default();
    assert!(storage.write(Write {
        holder: 1,
        token: Some(tb),
        at_ms: 0
    }));
    assert!(!storage.write(Write {
        holder: 0,
        token: Some(ta),
        at_ms: 0
    }));
    // Extending keeps the token; all five nodes crashing keeps the order.
    let mut b = b;
    rl[1].extend(&mut b, TTL).await.expect("extend");
    assert_eq!(b.token(), Some(tb));
    for i in 0..NODES {
        group.node(i).crash_restart();
    }
    group.advance(TTL + Duration::from_secs(2));
    let c = rl[2]
        .try_acquire(RESOURCE, TTL)
        .await
        .expect("C acquires after the fence");
    assert!(c.token().unwrap() > tb);
    group.shutdown().await;
}
