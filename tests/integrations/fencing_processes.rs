//! Fencing tokens over the wire: five `redlockd` processes, each with its own data
//! directory, killed with SIGKILL (one or all five) and restarted on the same port and
//! directory, or restarted cleanly with SIGTERM. Redlock clients with tokens write to a
//! storage that refuses stale tokens; the checker of `fenced_writes.rs` must find
//! nothing. Nodes run a manual clock (`DEBUG CLOCK ADVANCE`), so no test sleeps.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use redlockd::redlock::{Lock, Redlock, RedlockOptions};
use std::time::Duration;
use support::process::{call, free_ports, os_args, Node};

use crate::support;

const NODES: usize = 5;
const TTL: Duration = Duration::from_secs(10);

fn start_nodes() -> Vec<Node> {
    let base = free_ports(NODES as u16);
    let args = [
        "--max-ttl",
        "10s",
        "--clock",
        "manual",
        "--enable-debug-command",
        "--log",
        "warn",
    ];
    (0..NODES)
        .map(|i| {
            let mut n = Node::new(base + i as u16, os_args(&args));
            n.start();
            n
        })
        .collect()
}

/// Moves every running node's manual clock (the processes have one clock each).
fn advance(nodes: &[Node], ms: u64) {
    for n in nodes.iter().filter(|n| n.running()) {
        assert_eq!(
            call(n.port, &["DEBUG", "CLOCK", "ADVANCE", &ms.to_string()]).as_deref(),
            Some("+OK")
        );
    }
}

fn client(nodes: &[Node]) -> Redlock {
    Redlock::new(
        nodes.iter().map(|n| n.addr().to_string()),
        RedlockOptions {
            node_timeout: Some(Duration::from_millis(200)),
            retry_count: 0,
            fencing_tokens: true,
            ..RedlockOptions::default()
        },
    )
    .expect("valid nodes")
}

struct Holder {
    lock: Lock,
    number: usize,
    token: u64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_stay_ordered_through_kill_9_and_clean_restarts() {
    let mut nodes = start_nodes();
    advance(&nodes, 11_001); // past the first start's fence
    let clients: Vec<Redlock> = (0..3).map(|_| client(&nodes)).collect();
    let mut rng = SmallRng::seed_from_u64(42);
    let mut held: Vec<Option<Holder>> = vec![None, None, None];
    let mut next = 0;
    let mut issued: Vec<(usize, u64)> = Vec::new();
    let mut highest: Option<u64> = None;
    let mut accepted: Vec<(usize, u64)> = Vec::new();
    let (mut refused, mut kills, mut clean) = (0, 0, 0);
    let mut history = Vec::new();
    for step in 0..240 {
        let c = rng.random_range(0..3);
        let n = rng.random_range(0..NODES);
        let event = match rng.random_range(0..95u32) {
            0..=29 if held[c].is_none() => match clients[c].try_acquire(b"res", TTL).await {
                Ok(lock) => {
                    let token = lock.token().expect("a token");
                    issued.push((next, token));
                    held[c] = Some(Holder {
                        lock,
                        number: next,
                        token,
                    });
                    next += 1;
                    format!("client {c} acquired, token {token}")
                }
                Err(e) => format!("client {c} denied: {e}"),
            },
            0..=49 => match &held[c] {
                Some(h) => {
                    if highest.is_none_or(|top| h.token >= top) {
                        highest = Some(h.token);
                        accepted.push((h.number, h.token));
                        format!("client {c} wrote with {}", h.token)
                    } else {
                        refused += 1;
                        format!("client {c} refused with {}", h.token)
                    }
                }
                None => "nothing to write".into(),
            },
            50..=64 => match held[c].take() {
                Some(h) => {
                    clients[c].release(&h.lock).await;
                    format!("client {c} released")
                }
                None => "nothing to release".into(),
            },
            65..=84 => {
                let ms = if rng.random_range(0..2) == 0 {
                    rng.random_range(10_000..15_000)
                } else {
                    rng.random_range(100..3_000)
                };
                advance(&nodes, ms);
                format!("advance {ms} ms")
            }
            85..=88 => {
                nodes[n].kill9();
                nodes[n].start();
                kills += 1;
                format!("kill -9 node {n}, restarted")
            }
            89 => {
                for node in nodes.iter_mut() {
                    node.kill9();
                }
                for node in nodes.iter_mut() {
                    node.start();
                }
                kills += NODES;
                "kill -9 all five, restarted".into()
            }
            _ => {
                nodes[n].terminate();
                nodes[n].start();
                clean += 1;
                let info = call(nodes[n].port, &["FENCING.MARK"]).unwrap_or_default();
                format!("SIGTERM node {n}, restarted clean (mark {info})")
            }
        };
        history.push(format!("{step:3} {event}"));
    }
    // Then the textbook pause, across a kill -9 of every node: A acquires and pauses
    // past its TTL, all five nodes die and come back, B acquires and writes, A writes.
    for slot in held.iter_mut() {
        if let Some(h) = slot.take() {
            clients[0].release(&h.lock).await;
        }
    }
    advance(&nodes, 11_001);
    let a = clients[0]
        .try_acquire(b"res", TTL)
        .await
        .expect("A acquires");
    advance(&nodes, 10_001);
    for node in nodes.iter_mut() {
        node.kill9();
        node.start();
    }
    advance(&nodes, 11_001);
    let b = clients[1]
        .try_acquire(b"res", TTL)
        .await
        .expect("B acquires");
    let (ta, tb) = (a.token().unwrap(), b.token().unwrap());
    issued.push((next, ta));
    issued.push((next + 1, tb));
    for (number, token) in [(next + 1, tb), (next, ta)] {
        if highest.is_none_or(|top| token >= top) {
            highest = Some(token);
            accepted.push((number, token));
        } else {
            refused += 1;
        }
    }
    history.push(format!("pause: A token {ta}, kill -9 all, B token {tb}"));
    let show = || history.join("\n");
    for pair in issued.windows(2) {
        assert!(
            pair[1].1 > pair[0].1,
            "tokens went backwards {pair:?}\n{}",
            show()
        );
    }
    for pair in accepted.windows(2) {
        assert!(
            pair[1].0 >= pair[0].0,
            "a stale holder's write landed {pair:?}\n{}",
            show()
        );
    }
    eprintln!(
        "{} holders, {} writes accepted, {refused} stale writes refused, {kills} kill -9s, {clean} clean restarts",
        issued.len(),
        accepted.len()
    );
    assert!(
        issued.len() >= 15,
        "too few holders: {}\n{}",
        issued.len(),
        show()
    );
    assert!(
        kills >= 5 && clean >= 1,
        "the schedule did too little\n{}",
        show()
    );
    assert!(refused >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_restart_keeps_locks_and_kill_9_brings_the_fence() {
    let mut nodes = start_nodes();
    let node = &mut nodes[0];
    // A first start is fenced (max-ttl 10 s + 1 s); let it pass.
    let fenced = call(node.port, &["SET", "k", "v", "PX", "5000"]).unwrap();
    assert!(fenced.starts_with("-TRYAGAIN"), "{fenced}");
    advance(std::slice::from_ref(node), 11_001);
    assert_eq!(
        call(node.port, &["SET", "lock", "me", "PX", "8000"]).as_deref(),
        Some("+OK")
    );
    node.terminate();
    node.start();
    assert_eq!(call(node.port, &["GET", "lock"]).as_deref(), Some("$2"));
    assert_eq!(call(node.port, &["PTTL", "lock"]).as_deref(), Some(":8000"));
    assert_eq!(
        call(node.port, &["SET", "new", "x", "PX", "100"]).as_deref(),
        Some("+OK")
    );
    node.kill9();
    node.start();
    assert_eq!(call(node.port, &["GET", "lock"]).as_deref(), Some("$-1"));
    let fenced = call(node.port, &["SET", "new", "x", "PX", "100"]).unwrap();
    assert!(fenced.starts_with("-TRYAGAIN"), "{fenced}");
}
