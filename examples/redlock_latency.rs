//! Redlock client latency and contended throughput against real nodes.
//!
//! ```text
//! cargo run --release --example redlock_latency -- 127.0.0.1:7001,127.0.0.1:7002,...
//! REDLOCKD_NODES=127.0.0.1:7001,... cargo run --release --example redlock_latency
//! ```
//!
//! Optional environment: CYCLES (default 2000), CLIENTS (8), SECONDS (3), FENCING (1:
//! acquire with fencing tokens, redlockd nodes only; default 0).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redlockd::redlock::{Redlock, RedlockOptions};

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

#[tokio::main]
async fn main() {
    let list = std::env::args()
        .nth(1)
        .or_else(|| std::env::var("REDLOCKD_NODES").ok());
    let Some(list) = list else {
        eprintln!("usage: redlock_latency host:port,host:port,... (or REDLOCKD_NODES)");
        std::process::exit(64);
    };
    let nodes: Vec<String> = list.split(',').map(str::to_string).collect();
    let cycles = env_num("CYCLES", 2000) as usize;
    let clients = env_num("CLIENTS", 8) as usize;
    let seconds = env_num("SECONDS", 3);
    let ttl = Duration::from_secs(10);
    let fencing = env_num("FENCING", 0) == 1;
    let opts = RedlockOptions {
        retry_count: 0,
        fencing_tokens: fencing,
        ..Default::default()
    };
    let make = || match Redlock::new(nodes.clone(), opts.clone()) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("redlock_latency: {e}");
            std::process::exit(64);
        }
    };

    // 1. Uncontended acquire + release, one client, sequential.
    let rl = make();
    let mut samples = Vec::with_capacity(cycles);
    let mut acquires = Vec::with_capacity(cycles);
    let mut failures = 0usize;
    // Warm-up: open one pooled connection per node.
    for _ in 0..50 {
        if let Ok(l) = rl.try_acquire(b"bench:latency", ttl).await {
            rl.release(&l).await;
        }
    }
    for _ in 0..cycles {
        let t = Instant::now();
        match rl.try_acquire(b"bench:latency", ttl).await {
            Ok(l) => {
                acquires.push(t.elapsed());
                rl.release(&l).await;
                samples.push(t.elapsed());
            }
            Err(_) => failures += 1,
        }
    }
    samples.sort();
    acquires.sort();
    println!(
        "fencing tokens {}: acquire alone median {:?}, p99 {:?}",
        if fencing { "on" } else { "off" },
        percentile(&acquires, 0.5),
        percentile(&acquires, 0.99)
    );
    let mean = samples.iter().sum::<Duration>() / samples.len().max(1) as u32;
    println!(
        "acquire+release on {} nodes, {} cycles: median {:?}, p99 {:?}, mean {:?}, max {:?}, failures {}",
        nodes.len(),
        samples.len(),
        percentile(&samples, 0.5),
        percentile(&samples, 0.99),
        mean,
        samples.last().copied().unwrap_or_default(),
        failures
    );

    // 2. Contended: `clients` independent clients on one resource for `seconds`.
    let won = Arc::new(AtomicU64::new(0));
    let tried = Arc::new(AtomicU64::new(0));
    let end = Instant::now() + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let rl = make();
        let (won, tried) = (won.clone(), tried.clone());
        tasks.push(tokio::spawn(async move {
            while Instant::now() < end {
                tried.fetch_add(1, Ordering::Relaxed);
                if let Ok(l) = rl.try_acquire(b"bench:contended", ttl).await {
                    won.fetch_add(1, Ordering::Relaxed);
                    rl.release(&l).await;
                }
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    let (won, tried) = (won.load(Ordering::Relaxed), tried.load(Ordering::Relaxed));
    println!(
        "{clients} clients on one resource for {seconds} s: {:.0} lock cycles/s ({:.0} attempts/s, {:.1}% won)",
        won as f64 / seconds as f64,
        tried as f64 / seconds as f64,
        100.0 * won as f64 / tried.max(1) as f64
    );
}
