//! The mutual-exclusion and token checker of Redlock over clusters while their slots
//! move (issue 41): this crate's Redlock client, with fencing tokens, takes one lock
//! over 3 clusters of 3 map-mode nodes (one vote per cluster, `cluster:` seeds), while
//! a seeded schedule moves the lock's slot live in one cluster, takes it over from a
//! killed owner, restarts a killed node with its saved map, crash-restarts nodes and
//! switches a cluster's modes (collapsed to one node as emulated or off, and back).
//! The clusters' manual clocks move together. Checked: no two clients' grant windows
//! overlap, the tokens grow from one holder to the next, and no write of a holder
//! older than an accepted one lands on the storage (`support::checker`).
//!
//! The same schedules run with each protection off by a test hook (as in
//! cluster_checker.rs) and must then find overlaps; with key migration or map
//! confirmation off, tokens going backwards too: a Redlock's token is the largest mark
//! of its quorum + 1, committed on every cluster that voted, so a cluster's mark runs
//! far above its own `version << 40`, and a receiver that gets the slot without the
//! old owner's mark (no keys moved, or a stale saved map served) falls back below it.
//! With only the takeover fence off the tokens held in these schedules: the next
//! quorum shares a cluster with the last one, which still has the mark.
//!
//! `REDLOCK_CLUSTER_CHECKER_SEED=n cargo test --test integrations
//! redlock_cluster_checker:: -- --nocapture` replays seed `n` alone with its history.

use crate::cluster_checker::{cluster, map_json, setmap, switch_mode, Off, KEY, NODES};
use crate::support;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use redlockd::redlock::{Lock, Redlock, RedlockOptions};
use redlockd::testing::TestGroup;
use std::time::Duration;
use support::checker::{check_tokens, overlaps, Grant, Storage, TokenViolations, Write};
use support::nodes::opts;

const CLUSTERS: usize = 3;
const CLIENTS: usize = 3;
const TTL: Duration = Duration::from_secs(10);
/// Each cluster node's answer, also a killed one's refused connection.
const NODE_TIMEOUT_MS: u64 = 1_000;

/// The seed list of a cluster's vote: every node.
fn spec(group: &TestGroup) -> String {
    let addrs: Vec<String> = group.addrs().iter().map(|a| a.to_string()).collect();
    format!("cluster:{}", addrs.join(","))
}

struct Holder {
    lock: Lock,
    grant: usize,
    number: usize,
    token: u64,
}

struct Outcome {
    history: Vec<String>,
    grants: Vec<Grant>,
    issued: Vec<(usize, u64)>,
    storage: Storage,
    violations: Vec<(Grant, Grant)>,
    token_violations: TokenViolations,
    moves: usize,
    takeovers: usize,
    restarts: usize,
    mode_switches: usize,
}

async fn run_schedule(seed: u64, steps: usize, off: Off) -> Outcome {
    let mut clusters = Vec::new();
    for _ in 0..CLUSTERS {
        clusters.push(cluster(off).await);
    }
    let redlocks: Vec<Redlock> = (0..CLIENTS)
        .map(|_| {
            let o = RedlockOptions {
                fencing_tokens: true,
                ..opts(NODE_TIMEOUT_MS)
            };
            Redlock::new(clusters.iter().map(|(g, _)| spec(g)), o).expect("valid votes")
        })
        .collect();
    let clock = clusters[0].0.clock().clone();
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut held: Vec<Option<Holder>> = (0..CLIENTS).map(|_| None).collect();
    // The last holder each client was, kept past its hold until it releases.
    let mut writer: Vec<Option<(usize, u64)>> = vec![None; CLIENTS];
    let mut grants: Vec<Grant> = Vec::new();
    let mut issued: Vec<(usize, u64)> = Vec::new();
    let mut storage = Storage::default();
    let mut history = Vec::new();
    let (mut moves, mut takeovers, mut restarts, mut mode_switches) = (0, 0, 0, 0);
    for step in 0..steps {
        let now = clock.now_ms();
        let roll = rng.random_range(0..100);
        let c = rng.random_range(0..CLIENTS);
        let k = rng.random_range(0..CLUSTERS);
        let event = match roll {
            0..=39 => {
                if let Some(h) = &held[c] {
                    if grants[h.grant].until_ms <= now {
                        held[c] = None;
                    }
                }
                if held[c].is_some() {
                    format!("client {c} already holds")
                } else {
                    match redlocks[c].try_acquire(KEY.as_bytes(), TTL).await {
                        Ok(lock) => {
                            // As in mutual_exclusion.rs: the manual clock stands still
                            // during the attempt; the drift allowance is the spec's.
                            let drift_ms = TTL.as_millis() as u64 / 100 + 2;
                            grants.push(Grant {
                                client: c,
                                from_ms: now,
                                until_ms: now + lock.ttl().as_millis() as u64 - drift_ms,
                            });
                            let token = lock.token().expect("acquired with a token");
                            let number = issued.len();
                            issued.push((number, token));
                            writer[c] = Some((number, token));
                            held[c] = Some(Holder {
                                lock,
                                grant: grants.len() - 1,
                                number,
                                token,
                            });
                            format!("client {c} granted as holder {number}, token {token}")
                        }
                        Err(_) => format!("client {c} denied"),
                    }
                }
            }
            40..=51 => match held[c].take() {
                Some(h) => {
                    grants[h.grant].until_ms = grants[h.grant].until_ms.min(now);
                    writer[c] = None;
                    let n = redlocks[c].release(&h.lock).await;
                    format!(
                        "client {c} released holder {} (token {}) on {n} votes",
                        h.number, h.token
                    )
                }
                None => format!("client {c} holds nothing"),
            },
            52..=59 => match writer[c] {
                Some((holder, token)) => {
                    let ok = storage.write(Write {
                        holder,
                        token,
                        at_ms: now,
                    });
                    let what = if ok { "accepted" } else { "refused" };
                    format!("client {c} (holder {holder}) writes with token {token}: {what}")
                }
                None => format!("client {c} has nothing to write with"),
            },
            60..=79 => {
                let ms = rng.random_range(100..4_000);
                for (group, _) in &clusters {
                    group.clock().advance(Duration::from_millis(ms));
                }
                format!("advance {ms} ms")
            }
            // A live move in cluster k (see cluster_checker.rs).
            // A mode switch in cluster k (see cluster_checker.rs): it collapses to one
            // node, switches between emulated and off, or expands back to map mode.
            80 => {
                let (group, cl) = &mut clusters[k];
                let expand = rng.random_bool(0.6);
                let (clean, to_off) = (rng.random_bool(0.5), rng.random_bool(0.5));
                let pick = rng.random_range(0..NODES);
                mode_switches += 1;
                let line = switch_mode(group, cl, off, expand, clean, to_off, pick).await;
                format!("cluster {k}: {line}")
            }
            // A collapsed cluster is brought back to map mode soon.
            81..=99 if clusters[k].1.collapsed.is_some() => {
                if roll <= 90 {
                    let (group, cl) = &mut clusters[k];
                    mode_switches += 1;
                    let clean = rng.random_bool(0.5);
                    let line = switch_mode(group, cl, off, true, clean, false, 0).await;
                    format!("cluster {k}: {line}")
                } else {
                    format!("cluster {k}: collapsed, no move nor restart")
                }
            }
            81..=85 => {
                let (group, cl) = &mut clusters[k];
                let targets = cl.others_up(cl.owner);
                if !cl.up[cl.owner] || targets.is_empty() {
                    format!("cluster {k}: no live move, the owner is down")
                } else {
                    let to = targets[rng.random_range(0..targets.len())];
                    let json = map_json(cl.version + 1, &cl.ports, to);
                    let reply = setmap(group, cl.owner, &json).await;
                    let line = format!(
                        "cluster {k}: live move v{} node {} -> {to}: {}",
                        cl.version + 1,
                        cl.owner,
                        reply.trim()
                    );
                    if reply == "+OK\r\n" {
                        for n in cl.others_up(cl.owner) {
                            setmap(group, n, &json).await;
                        }
                        cl.version += 1;
                        cl.owner = to;
                        moves += 1;
                    }
                    line
                }
            }
            // A takeover in cluster k: its owner dies, the map goes to the nodes up.
            86..=91 => {
                let (group, cl) = &mut clusters[k];
                let owner = cl.owner;
                if (0..NODES).any(|n| n != owner && !cl.up[n]) {
                    format!("cluster {k}: no takeover, another node is down")
                } else {
                    if cl.up[owner] {
                        group.node(owner).stop().await;
                        cl.up[owner] = false;
                    }
                    let targets = cl.others_up(owner);
                    let to = targets[rng.random_range(0..targets.len())];
                    let json = map_json(cl.version + 1, &cl.ports, to);
                    let first = setmap(group, to, &json).await;
                    for n in targets.into_iter().filter(|&n| n != to) {
                        setmap(group, n, &json).await;
                    }
                    let line = format!(
                        "cluster {k}: kill node {owner}, takeover v{} by node {to}: {}",
                        cl.version + 1,
                        first.trim()
                    );
                    if first == "+OK\r\n" {
                        cl.version += 1;
                        cl.owner = to;
                        takeovers += 1;
                    }
                    line
                }
            }
            92..=95 => {
                let (group, cl) = &mut clusters[k];
                match cl.down() {
                    None => format!("cluster {k}: every node is up"),
                    Some(n) => {
                        group
                            .node(n)
                            .start_again_with_saved_map(off != Off::Confirmation)
                            .await;
                        cl.up[n] = true;
                        restarts += 1;
                        format!("cluster {k}: restart node {n} with its saved map")
                    }
                }
            }
            _ => {
                let (group, cl) = &clusters[k];
                let n = rng.random_range(0..NODES);
                if cl.up[n] {
                    group.node(n).crash_restart();
                    format!("cluster {k}: crash-restart node {n}")
                } else {
                    format!("cluster {k}: node {n} is down")
                }
            }
        };
        history.push(format!("{step:4} t={now} {event}"));
    }
    for (group, cl) in clusters {
        for n in 0..NODES {
            if !cl.up[n] {
                group.node(n).start_again().await;
            }
        }
        group.shutdown().await;
    }
    let violations = overlaps(&grants);
    let token_violations = check_tokens(&storage, &issued);
    Outcome {
        history,
        grants,
        issued,
        storage,
        violations,
        token_violations,
        moves,
        takeovers,
        restarts,
        mode_switches,
    }
}

const SEEDS: [u64; 6] = [1, 2, 3, 4, 5, 6];
const STEPS: usize = 300;

fn seeds() -> Vec<u64> {
    match std::env::var("REDLOCK_CLUSTER_CHECKER_SEED") {
        Ok(s) => vec![s.parse().expect("REDLOCK_CLUSTER_CHECKER_SEED is a number")],
        Err(_) => SEEDS.to_vec(),
    }
}

/// Runs every seed with `off`; prints each seed's first violations (with its
/// history) and the totals. Returns (grants, overlapping pairs, token violations).
async fn run_all(off: Off) -> (usize, usize, usize) {
    let seeds = seeds();
    let runs =
        futures_util::future::join_all(seeds.iter().map(|&s| run_schedule(s, STEPS, off))).await;
    let replay = seeds.len() == 1;
    let (mut grants, mut found, mut tokens) = (0, 0, 0);
    let (mut accepted, mut refused, mut moves, mut takeovers, mut restarts) = (0, 0, 0, 0, 0);
    let mut mode_switches = 0;
    for (seed, out) in seeds.iter().zip(runs) {
        if replay || !out.violations.is_empty() || !out.token_violations.is_empty() {
            eprintln!(
                "{off:?} off, seed {seed}: overlaps {:?}\ntokens {:?}\nissued {:?}\n{}",
                out.violations.first(),
                out.token_violations,
                out.issued,
                out.history.join("\n")
            );
        }
        grants += out.grants.len();
        found += out.violations.len();
        tokens += out.token_violations.len();
        accepted += out.storage.accepted.len();
        refused += out.storage.refused.len();
        moves += out.moves;
        takeovers += out.takeovers;
        restarts += out.restarts;
        mode_switches += out.mode_switches;
    }
    eprintln!(
        "Redlock over {CLUSTERS} clusters, {off:?} off, {} seeds x {STEPS} steps: {grants} grants, \
         {accepted} writes accepted, {refused} refused, {moves} live moves, {takeovers} takeovers, \
         {restarts} restarts with a saved map, {mode_switches} mode switches; {found} overlapping pairs, {tokens} token violations",
        seeds.len()
    );
    (grants, found, tokens)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_over_clusters_keeps_tokens_growing_while_slots_move() {
    let (grants, found, tokens) = run_all(Off::Nothing).await;
    assert_eq!(found, 0, "overlapping grants (histories above)");
    assert_eq!(tokens, 0, "tokens went wrong (histories above)");
    if seeds().len() == SEEDS.len() {
        assert!(grants >= 30, "only {grants} grants");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_over_clusters_without_key_migration_overlaps_and_sends_tokens_backwards() {
    let (_, found, tokens) = run_all(Off::Migration).await;
    assert!(found > 0, "the checker is blind");
    assert!(tokens > 0, "the token check is blind");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_over_clusters_without_the_takeover_fence_overlaps() {
    let (_, found, _) = run_all(Off::Fence).await;
    assert!(found > 0, "the checker is blind");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_over_clusters_without_map_confirmation_overlaps_and_sends_tokens_backwards() {
    let (_, found, tokens) = run_all(Off::Confirmation).await;
    assert!(found > 0, "the checker is blind");
    assert!(tokens > 0, "the token check is blind");
}
