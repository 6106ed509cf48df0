//! The mutual-exclusion checker with the operator in the schedule (issue 41): one lock
//! whose key lives in a 3-node cluster (map mode), taken and released by clients that
//! send `SET key value NX PX` to the node they believe owns the slot and follow
//! `MOVED`, while a seeded schedule moves the slot live (`CLUSTER SETMAP` on its owner,
//! what `redlockd slots move` sends), takes it over from a killed owner (the map pushed
//! to the nodes still up), kills a node so it misses map pushes and restarts it with
//! its saved map, crash-restarts nodes, and restarts them with another max-ttl. Every
//! grant is a window on the group's manual clock; no two clients' windows may overlap.
//!
//! The same schedules run with each protection turned off by a test hook, and the
//! checker must then find overlaps: keys that do not move and no fence on the slot
//! (`set_cluster_move_keys(false)` + `set_cluster_move_fence(false)`), no fence on a
//! slot taken over (`set_cluster_move_fence(false)`), a restarted node serving its
//! saved map without confirming it (`start_again_with_saved_map(false)`).
//!
//! One task, one step at a time; time moves only when the schedule says so.

use crate::support;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::time::Duration;
use support::{Raw, TestGroup};
use tokio::net::TcpStream;

const NODES: usize = 3;
const CLIENTS: usize = 3;
const TTL: Duration = Duration::from_secs(10);
/// The lock's key: slot 2906.
const KEY: &str = "job";
const SLOT: u16 = 2906;
/// How long a client waits for a node to connect and to answer.
const CONNECT_MS: u64 = 500;
const ANSWER_MS: u64 = 2_000;

/// Which protection a run turns off.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Off {
    Nothing,
    /// Slots given away lose their keys and the receiving node does not fence them.
    Migration,
    /// A slot taken over from a dead owner is not fenced.
    Fence,
    /// A restarted node serves its saved map without asking the others.
    Confirmation,
}

#[derive(Debug, Clone)]
struct Grant {
    client: usize,
    from_ms: u64,
    until_ms: u64,
}

/// Pairs of grants to different clients whose windows overlap.
fn overlaps(grants: &[Grant]) -> Vec<(Grant, Grant)> {
    let mut found = Vec::new();
    for (i, a) in grants.iter().enumerate() {
        for b in &grants[i + 1..] {
            if a.client != b.client && a.from_ms < b.until_ms && b.from_ms < a.until_ms {
                found.push((a.clone(), b.clone()));
            }
        }
    }
    found
}

fn node_id(i: usize) -> String {
    format!("{:040x}", i + 1)
}

/// Map `version`: the slots split in three, slot `SLOT` served by `owner`.
fn map_json(version: u64, ports: &[u16], owner: usize) -> String {
    let base = [(0u16, 5460u16), (5461, 10922), (10923, 16383)];
    let nodes: Vec<String> = (0..NODES)
        .map(|i| {
            let (a, b) = base[i];
            let mut ranges = Vec::new();
            if (a..=b).contains(&SLOT) {
                if a < SLOT {
                    ranges.push(format!("[{a},{}]", SLOT - 1));
                }
                if SLOT < b {
                    ranges.push(format!("[{},{b}]", SLOT + 1));
                }
            } else {
                ranges.push(format!("[{a},{b}]"));
            }
            if i == owner {
                ranges.push(format!("[{SLOT},{SLOT}]"));
            }
            format!(
                r#"{{"id":"{}","host":"127.0.0.1","port":{},"slots":[{}]}}"#,
                node_id(i),
                ports[i],
                ranges.join(",")
            )
        })
        .collect();
    format!(r#"{{"version":{version},"nodes":[{}]}}"#, nodes.join(","))
}

/// One command to node `n`; `None` if it cannot be reached or does not answer.
async fn ask(group: &TestGroup, n: usize, args: &[&str]) -> Option<String> {
    let addr = group.node(n).addr();
    let connect = TcpStream::connect(addr);
    let stream = tokio::time::timeout(Duration::from_millis(CONNECT_MS), connect)
        .await
        .ok()?
        .ok()?;
    Raw::from_stream(stream)
        .try_cmd(Duration::from_millis(ANSWER_MS), args)
        .await
}

/// A cluster client of one slot: it sends to the node it last learned owns the slot
/// and follows `MOVED` (a few hops). A node it cannot reach does not change its mind:
/// it tries that node again next time, as a client with a stale slot table does.
struct Client {
    guess: usize,
}

impl Client {
    async fn routed(&mut self, group: &TestGroup, args: &[&str]) -> String {
        let mut last = String::new();
        for _ in 0..3 {
            let Some(reply) = ask(group, self.guess, args).await else {
                return format!("node {} unreachable", self.guess);
            };
            let Some(moved) = reply.strip_prefix("-MOVED ") else {
                return reply;
            };
            let port: u16 = moved
                .trim()
                .rsplit(':')
                .next()
                .and_then(|p| p.parse().ok())
                .expect("MOVED names host:port");
            self.guess = group
                .addrs()
                .iter()
                .position(|a| a.port() == port)
                .expect("MOVED to a node of the group");
            last = reply;
        }
        last
    }
}

struct Outcome {
    history: Vec<String>,
    grants: Vec<Grant>,
    violations: Vec<(Grant, Grant)>,
    /// Live moves, takeovers and restarts with a saved map that were carried out.
    moves: usize,
    takeovers: usize,
    saved_map_restarts: usize,
}

/// What the operator knows of the cluster: the map's version, the slot's owner, which
/// nodes are down (missing the pushes since).
struct Operator {
    version: u64,
    owner: usize,
    up: Vec<bool>,
    ports: Vec<u16>,
}

impl Operator {
    fn down(&self) -> Option<usize> {
        self.up.iter().position(|u| !u)
    }

    fn others_up(&self, of: usize) -> Vec<usize> {
        (0..NODES).filter(|&n| n != of && self.up[n]).collect()
    }
}

async fn setmap(group: &TestGroup, n: usize, json: &str) -> String {
    ask(group, n, &["CLUSTER", "SETMAP", json])
        .await
        .unwrap_or_else(|| "no answer".into())
}

async fn cluster(off: Off) -> (TestGroup, Operator) {
    let group = TestGroup::try_start_with(NODES, |i, mut c| {
        c.cluster.mode = redlockd::config::ClusterMode::Map;
        c.cluster.node_id = Some(node_id(i));
        c.max_ttl = TTL;
        c
    })
    .await
    .expect("a 3-node map-mode group starts");
    for n in group.nodes() {
        match off {
            Off::Migration => {
                n.handle().set_cluster_move_keys(false);
                n.handle().set_cluster_move_fence(false);
            }
            Off::Fence => n.handle().set_cluster_move_fence(false),
            Off::Nothing | Off::Confirmation => {}
        }
    }
    let ports: Vec<u16> = group.addrs().iter().map(|a| a.port()).collect();
    let v1 = map_json(1, &ports, 0);
    for n in 0..NODES {
        assert_eq!(setmap(&group, n, &v1).await, "+OK\r\n");
    }
    let operator = Operator {
        version: 1,
        owner: 0,
        up: vec![true; NODES],
        ports,
    };
    (group, operator)
}

/// Runs `steps` seeded steps against a fresh cluster with `off` turned off.
async fn run_schedule(seed: u64, steps: usize, off: Off) -> Outcome {
    let (group, mut op) = cluster(off).await;
    let clock = group.clock().clone();
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut clients: Vec<Client> = (0..CLIENTS).map(|c| Client { guess: c % NODES }).collect();
    let mut held: Vec<Option<(String, usize)>> = vec![None; CLIENTS];
    let mut grants: Vec<Grant> = Vec::new();
    let mut history = Vec::new();
    let (mut moves, mut takeovers, mut saved_map_restarts) = (0, 0, 0);
    for step in 0..steps {
        let now = clock.now_ms();
        let roll = rng.random_range(0..100);
        let event = match roll {
            0..=44 | 95..=99 => {
                let c = rng.random_range(0..CLIENTS);
                if let Some((_, g)) = &held[c] {
                    if grants[*g].until_ms <= now {
                        held[c] = None;
                    }
                }
                if held[c].is_some() {
                    format!("client {c} already holds")
                } else {
                    let value = format!("c{c}s{step}");
                    let px = TTL.as_millis().to_string();
                    let reply = clients[c]
                        .routed(&group, &["SET", KEY, &value, "NX", "PX", &px])
                        .await;
                    if reply == "+OK\r\n" {
                        grants.push(Grant {
                            client: c,
                            from_ms: now,
                            until_ms: now + TTL.as_millis() as u64,
                        });
                        held[c] = Some((value, grants.len() - 1));
                        format!("client {c} granted on node {}", clients[c].guess)
                    } else {
                        format!(
                            "client {c} denied by node {}: {}",
                            clients[c].guess,
                            reply.trim()
                        )
                    }
                }
            }
            45..=59 => {
                let c = rng.random_range(0..CLIENTS);
                match held[c].take() {
                    Some((value, g)) => {
                        grants[g].until_ms = grants[g].until_ms.min(now);
                        let reply = clients[c].routed(&group, &["DELIFEQ", KEY, &value]).await;
                        format!("client {c} released: {}", reply.trim())
                    }
                    None => format!("client {c} holds nothing"),
                }
            }
            60..=79 => {
                let ms = rng.random_range(100..4_000);
                clock.advance(Duration::from_millis(ms));
                format!("advance {ms} ms")
            }
            // A live move: the owner is told, it moves the keys and pushes the map to
            // the new owner; then the map goes to every node up (what `redlockd slots
            // move` does; the same map again changes nothing).
            80..=83 => {
                let targets = op.others_up(op.owner);
                if !op.up[op.owner] || targets.is_empty() {
                    "no live move: the owner is down".into()
                } else {
                    let to = targets[rng.random_range(0..targets.len())];
                    let json = map_json(op.version + 1, &op.ports, to);
                    let reply = setmap(&group, op.owner, &json).await;
                    let line = format!(
                        "live move v{} node {} -> {to}: {}",
                        op.version + 1,
                        op.owner,
                        reply.trim()
                    );
                    if reply == "+OK\r\n" {
                        for n in op.others_up(op.owner) {
                            setmap(&group, n, &json).await;
                        }
                        op.version += 1;
                        op.owner = to;
                        moves += 1;
                    }
                    line
                }
            }
            // A takeover: the owner dies (or is dead), the map goes to the nodes up.
            84..=85 => {
                let owner = op.owner;
                if op.down().is_some_and(|d| d != owner) {
                    "no takeover: another node is down".into()
                } else {
                    if op.up[owner] {
                        group.node(owner).stop().await;
                        op.up[owner] = false;
                    }
                    let targets = op.others_up(owner);
                    let to = targets[rng.random_range(0..targets.len())];
                    let json = map_json(op.version + 1, &op.ports, to);
                    let mut replies = Vec::new();
                    for n in std::iter::once(to).chain(targets.into_iter().filter(|&n| n != to)) {
                        replies.push(setmap(&group, n, &json).await.trim().to_string());
                    }
                    let line = format!(
                        "kill node {owner}, takeover v{} by node {to}: {replies:?}",
                        op.version + 1
                    );
                    if replies[0] == "+OK" {
                        op.version += 1;
                        op.owner = to;
                        takeovers += 1;
                    }
                    line
                }
            }
            // A node other than the owner dies and misses the pushes until restarted.
            86..=87 => match op.down() {
                Some(_) => "no kill: a node is down".into(),
                None => {
                    let others = op.others_up(op.owner);
                    let n = others[rng.random_range(0..others.len())];
                    group.node(n).stop().await;
                    op.up[n] = false;
                    format!("kill node {n}")
                }
            },
            // The dead node comes back with the map it saved.
            88..=90 => match op.down() {
                None => "no restart: every node is up".into(),
                Some(n) => {
                    group
                        .node(n)
                        .start_again_with_saved_map(off != Off::Confirmation)
                        .await;
                    op.up[n] = true;
                    saved_map_restarts += 1;
                    format!(
                        "restart node {n} with its saved map (serving v{})",
                        group.node(n).handle().cluster_map_version()
                    )
                }
            },
            91..=92 => {
                let n = rng.random_range(0..NODES);
                if op.up[n] {
                    group.node(n).crash_restart();
                    format!("crash-restart node {n}")
                } else {
                    format!("node {n} is down")
                }
            }
            _ => {
                let n = rng.random_range(0..NODES);
                if op.up[n] {
                    let to = if rng.random_bool(0.5) {
                        Duration::from_millis(rng.random_range(500..TTL.as_millis() as u64))
                    } else {
                        TTL
                    };
                    let clean = rng.random_bool(0.5);
                    group.node(n).restart_with_max_ttl(to, clean);
                    format!("restart node {n} with max-ttl {} ms", to.as_millis())
                } else {
                    format!("node {n} is down")
                }
            }
        };
        history.push(format!("{step:4} t={now} {event}"));
    }
    for n in 0..NODES {
        if !op.up[n] {
            group.node(n).start_again().await;
        }
    }
    group.shutdown().await;
    let violations = overlaps(&grants);
    Outcome {
        history,
        grants,
        violations,
        moves,
        takeovers,
        saved_map_restarts,
    }
}

const SEEDS: [u64; 12] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12];
const STEPS: usize = 400;

/// Every seed's schedule, each on its own cluster, all at once.
async fn all_seeds(off: Off) -> Vec<Outcome> {
    futures_util::future::join_all(SEEDS.map(|seed| run_schedule(seed, STEPS, off))).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_overlapping_grants_while_the_slot_moves() {
    let (mut grants, mut moves, mut takeovers, mut restarts) = (0, 0, 0, 0);
    for (seed, out) in SEEDS.into_iter().zip(all_seeds(Off::Nothing).await) {
        assert!(
            out.violations.is_empty(),
            "seed {seed}: overlapping grants: {:?}\n{}",
            out.violations,
            out.history.join("\n")
        );
        grants += out.grants.len();
        moves += out.moves;
        takeovers += out.takeovers;
        restarts += out.saved_map_restarts;
    }
    eprintln!(
        "{grants} grants, {moves} live moves, {takeovers} takeovers, {restarts} restarts with a saved map over {} seeds, no overlap",
        SEEDS.len()
    );
    // Enough of each to mean something (the 12 seeds gave 166 grants, 207 live moves,
    // 37 takeovers, 76 restarts with a saved map).
    assert!(grants >= 80, "only {grants} grants");
    assert!(moves >= 50 && takeovers >= 10 && restarts >= 20);
}

/// Runs every seed with `off` and returns how many overlapping pairs were found.
async fn violations_with(off: Off) -> usize {
    let mut found = 0;
    for (seed, out) in SEEDS.into_iter().zip(all_seeds(off).await) {
        if let Some((a, b)) = out.violations.first() {
            eprintln!(
                "{off:?} off, seed {seed}: {a:?} overlaps {b:?}\n{}",
                out.history.join("\n")
            );
        }
        found += out.violations.len();
    }
    eprintln!("{off:?} off: {found} overlapping pairs");
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_checker_finds_overlaps_when_keys_do_not_move() {
    assert!(
        violations_with(Off::Migration).await > 0,
        "the checker is blind"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_checker_finds_overlaps_without_the_takeover_fence() {
    assert!(
        violations_with(Off::Fence).await > 0,
        "the checker is blind"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_checker_finds_overlaps_without_map_confirmation() {
    assert!(
        violations_with(Off::Confirmation).await > 0,
        "the checker is blind"
    );
}

/// Found by the schedule (seed 2): the owner crash-restarts (its keys, and the lock
/// it granted, are gone; its restart fence is up) and the slot then moves live. The
/// new owner gets no key for the lock, so it must refuse grants for what is left of
/// the old owner's fence; it granted at once before `CLUSTER IMPORT` carried it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_move_from_a_fenced_node_carries_its_fence() {
    let (group, op) = cluster(Off::Nothing).await;
    let mut a = Raw::to(group.node(0)).await;
    a.check(&["SET", KEY, "X", "NX", "PX", "10000"], "+OK\r\n")
        .await;
    group.node(0).crash_restart();
    group.advance(Duration::from_millis(2_000));
    let left = group.node(0).fence_remaining();
    assert!(left > Duration::ZERO);
    let v2 = map_json(2, &op.ports, 1);
    assert_eq!(setmap(&group, 0, &v2).await, "+OK\r\n");
    assert_eq!(group.node(1).handle().cluster_map_version(), 2);
    let mut b = Raw::to(group.node(1)).await;
    let refused = b.cmd(&["SET", KEY, "Y", "NX", "PX", "10000"]).await;
    assert!(
        refused.starts_with("-TRYAGAIN slot 2906")
            && refused.contains(&format!("another {} ms", left.as_millis())),
        "{refused}"
    );
    group.advance(left - Duration::from_millis(1));
    assert!(b
        .cmd(&["SET", KEY, "Y", "NX", "PX", "10000"])
        .await
        .contains("another 1 ms"));
    group.advance(Duration::from_millis(1));
    b.check(&["SET", KEY, "Y", "NX", "PX", "10000"], "+OK\r\n")
        .await;
    group.shutdown().await;
}

/// Found by benches/cluster_move.sh (CONTENDED=1: releases that found no lock after a
/// move): a SET that passed the routing check while a live move held the gate ran
/// after the map flipped, on the old owner, which then held a lock in a slot it no
/// longer serves. The check runs again under the gate: the SET gets MOVED.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_that_waited_out_a_move_is_redirected() {
    let (group, op) = cluster(Off::Nothing).await;
    let a = group.node(0);
    let mut c = Raw::to(a).await;
    let gate = a.hold_gate();
    c.send_cmd(&["SET", KEY, "X", "NX", "PX", "10000"]).await;
    // Time for the SET to be read and checked; then it waits for the gate. (Were it
    // later, it would be routed with the new map: the test could only pass.)
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let v2 = map_json(2, &op.ports, 1);
    a.handle().set_cluster_map(&v2, false).expect("v2 installs");
    drop(gate);
    let port = op.ports[1];
    assert_eq!(
        c.reply().await,
        format!("-MOVED {SLOT} 127.0.0.1:{port}\r\n")
    );
    c.check(&["DBSIZE"], ":0\r\n").await;
    group.shutdown().await;
}
