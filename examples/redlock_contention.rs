//! Contended Redlock, two groups side by side in one run: lock cycles/s, how many of
//! the nodes granted each attempt (split votes), attempt latency.
//!
//! ```text
//! cargo run --release --example redlock_contention -- REDIS_NODES REDLOCKD_NODES
//! # e.g. 127.0.0.1:7101,...,127.0.0.1:7105 127.0.0.1:7201,...,127.0.0.1:7205
//! ```
//! benches/contention.sh starts both groups and runs it.
//!
//! Each cell: CLIENTS independent clients (each its own `Redlock`, so its own connection
//! to every node), one resource, SECONDS long. A client loops `try_acquire` (one round,
//! no retry pause) and releases when it wins. The nodes that granted an attempt are
//! counted exactly: a lost attempt's report says how many granted, and a won lock's
//! release says how many nodes held it. An attempt granted by 1..N-1 nodes is a split
//! vote. Latency is one `try_acquire` (won or lost, its clean-up included).
//!
//! Rounds are interleaved (ROUNDS, default 3): every round runs every cell once, the
//! order of the groups alternating, so both see the same machine load. Printed per
//! cell: the median over rounds and the spread (min-max) of cycles/s, the median of the
//! per-round ratios redlockd / redis, and split votes and latency pooled over rounds.
//! Fencing tokens (FENCING.GRANT / FENCING.COMMIT) exist on redlockd only: their row is
//! compared with Redis's plain Redlock.
//!
//! Environment: CLIENTS (default "2,8,32,128"), SECONDS (2), ROUNDS (3), FENCING
//! ("both" (default), "off", "on").

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redlockd::redlock::{Redlock, RedlockError, RedlockOptions};
use tokio::sync::Barrier;

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

fn env_num(name: &str, default: u64) -> u64 {
    env_or(name, &default.to_string())
        .parse()
        .unwrap_or_else(|_| die(&format!("{name} must be a number")))
}

fn die(msg: &str) -> ! {
    eprintln!("redlock_contention: {msg}");
    std::process::exit(64);
}

/// One cell's measurement.
#[derive(Default)]
struct Cell {
    attempts: u64,
    wins: u64,
    /// Attempts by the number of nodes that granted them.
    granted: Vec<u64>,
    errors: u64,
    latencies: Vec<Duration>,
    seconds: f64,
}

impl Cell {
    fn cycles_per_sec(&self) -> f64 {
        self.wins as f64 / self.seconds
    }

    fn merge(&mut self, other: Cell) {
        self.attempts += other.attempts;
        self.wins += other.wins;
        if self.granted.len() < other.granted.len() {
            self.granted.resize(other.granted.len(), 0);
        }
        for (a, b) in self.granted.iter_mut().zip(&other.granted) {
            *a += b;
        }
        self.errors += other.errors;
        self.latencies.extend(other.latencies);
        self.seconds += other.seconds;
    }

    /// Attempts granted by some but not all nodes, as a share of all attempts.
    fn split_share(&self) -> f64 {
        let n = self.granted.len().saturating_sub(1);
        let split: u64 = self.granted.iter().take(n).skip(1).sum();
        split as f64 / self.attempts.max(1) as f64
    }
}

async fn run_cell(nodes: &[String], clients: usize, fencing: bool, seconds: u64) -> Cell {
    let opts = RedlockOptions {
        retry_count: 0,
        fencing_tokens: fencing,
        ..Default::default()
    };
    let ttl = Duration::from_secs(10);
    let start = Arc::new(Barrier::new(clients + 1));
    let mut tasks = Vec::new();
    for i in 0..clients {
        let rl = Redlock::new(nodes.to_vec(), opts.clone()).unwrap_or_else(|e| die(&e.to_string()));
        let start = start.clone();
        let node_count = nodes.len();
        tasks.push(tokio::spawn(async move {
            // Connect to every node before the clock starts.
            let own = format!("bench:warm:{i}");
            if let Ok(l) = rl.try_acquire(own.as_bytes(), ttl).await {
                rl.release(&l).await;
            }
            start.wait().await;
            let end = Instant::now() + Duration::from_secs(seconds);
            let mut cell = Cell {
                granted: vec![0; node_count + 1],
                ..Cell::default()
            };
            while Instant::now() < end {
                let t = Instant::now();
                let outcome = rl.try_acquire(b"bench:contended", ttl).await;
                cell.latencies.push(t.elapsed());
                cell.attempts += 1;
                match outcome {
                    Ok(lock) => {
                        cell.wins += 1;
                        let held = rl.release(&lock).await;
                        cell.granted[held.min(node_count)] += 1;
                    }
                    Err(RedlockError::NotAcquired { last, .. }) => {
                        cell.granted[last.granted.min(node_count)] += 1;
                        cell.errors += last.failed.len() as u64;
                    }
                    Err(_) => cell.errors += 1,
                }
            }
            cell
        }));
    }
    start.wait().await;
    let t = Instant::now();
    let mut total = Cell::default();
    for task in tasks {
        total.merge(task.await.unwrap_or_default());
    }
    total.seconds = t.elapsed().as_secs_f64().max(seconds as f64);
    total
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn micros(d: Duration) -> String {
    format!("{:.0}", d.as_secs_f64() * 1e6)
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(redis), Some(redlockd)) = (args.next(), args.next()) else {
        die("usage: redlock_contention REDIS_NODES REDLOCKD_NODES (host:port,... each)");
    };
    let redis: Vec<String> = redis.split(',').map(str::to_string).collect();
    let redlockd: Vec<String> = redlockd.split(',').map(str::to_string).collect();
    let clients: Vec<usize> = env_or("CLIENTS", "2,8,32,128")
        .split(',')
        .map(|c| {
            c.trim()
                .parse()
                .unwrap_or_else(|_| die("CLIENTS: numbers, comma-separated"))
        })
        .collect();
    let seconds = env_num("SECONDS", 2);
    let rounds = env_num("ROUNDS", 3);
    let fencing: &[bool] = match env_or("FENCING", "both").as_str() {
        "both" => &[false, true],
        "off" => &[false],
        "on" => &[true],
        _ => die("FENCING: both, off or on"),
    };
    // (group, fencing) -> the cells' names, in print order.
    let mut configs: Vec<(&str, &[String], bool)> = vec![("redis", &redis, false)];
    for &f in fencing {
        configs.push((
            if f { "redlockd+fencing" } else { "redlockd" },
            &redlockd,
            f,
        ));
    }
    // (clients, config index) -> one Cell per round.
    let mut results: BTreeMap<(usize, usize), Vec<Cell>> = BTreeMap::new();
    println!(
        "{} rounds x {} s per cell, clients {:?}; {} + {} nodes; one machine: absolute numbers are noisy, compare the ratios",
        rounds,
        seconds,
        clients,
        redis.len(),
        redlockd.len()
    );
    for round in 0..rounds {
        for &n in &clients {
            let mut order: Vec<usize> = (0..configs.len()).collect();
            if round % 2 == 1 {
                order.reverse();
            }
            for i in order {
                let (_, nodes, f) = configs[i];
                let cell = run_cell(nodes, n, f, seconds).await;
                results.entry((n, i)).or_default().push(cell);
            }
        }
        eprintln!("round {} of {rounds} done", round + 1);
    }
    println!(
        "{:>7} {:<17} {:>9} {:>13} {:>7} {:>7} {:>7} {:>8} {:>8} {:>9} {:>6}",
        "clients",
        "group",
        "cycles/s",
        "min-max",
        "ratio",
        "won",
        "split",
        "p50 us",
        "p99 us",
        "p99.9 us",
        "errors"
    );
    for &n in &clients {
        let redis_rates: Vec<f64> = results[&(n, 0)].iter().map(Cell::cycles_per_sec).collect();
        for (i, (name, _, _)) in configs.iter().enumerate() {
            let cells = results.remove(&(n, i)).unwrap_or_default();
            let mut rates: Vec<f64> = cells.iter().map(Cell::cycles_per_sec).collect();
            let mut ratios: Vec<f64> = rates
                .iter()
                .zip(&redis_rates)
                .map(|(r, base)| r / base.max(f64::MIN_POSITIVE))
                .collect();
            let (lo, hi) = rates
                .iter()
                .fold((f64::INFINITY, 0f64), |(lo, hi), &r| (lo.min(r), hi.max(r)));
            let rate = median(&mut rates);
            let ratio = median(&mut ratios);
            let mut all = Cell::default();
            for c in cells {
                all.merge(c);
            }
            all.latencies.sort();
            println!(
                "{:>7} {:<17} {:>9.0} {:>13} {:>6.2}x {:>6.1}% {:>6.1}% {:>8} {:>8} {:>9} {:>6}",
                n,
                name,
                rate,
                format!("{lo:.0}-{hi:.0}"),
                ratio,
                100.0 * all.wins as f64 / all.attempts.max(1) as f64,
                100.0 * all.split_share(),
                micros(percentile(&all.latencies, 0.5)),
                micros(percentile(&all.latencies, 0.99)),
                micros(percentile(&all.latencies, 0.999)),
                all.errors
            );
        }
    }
    println!(
        "split: attempts granted by some but not all nodes. ratio: median of the per-round ratios to redis's cycles/s."
    );
}
