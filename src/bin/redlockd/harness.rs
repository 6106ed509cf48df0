//! `redlockd harness`: the test mode for any language (docs/testing.md). N nodes on
//! ephemeral ports and one manual clock, one JSON ready line on stdout, then JSON
//! requests on stdin until it ends.

use clap::Args;
use redlockd::config::{parse_duration, parse_memory, Config};
use redlockd::testing::harness::Harness;
use std::io::Write;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Flags of the test mode. No environment variables: a server's REDLOCKD_* settings
/// in the environment must not change what a test runs.
#[derive(Args, Debug)]
pub struct HarnessArgs {
    /// How many nodes (each its own keyspace and restart fence, one clock for all).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    nodes: u16,
    /// Address the nodes listen on (each on a port the system picks).
    #[arg(long, default_value = "127.0.0.1")]
    bind: IpAddr,
    /// Longest TTL a client may set; also what the restart fence waits for.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    max_ttl: Duration,
    /// The restart fence after a restart [default: max-ttl + 1s]; 0: none. There is no
    /// fence at first start in this mode.
    #[arg(long, value_parser = parse_duration)]
    restart_delay: Option<Duration>,
    /// Refuse writes that would leave a key without a TTL.
    #[arg(long)]
    require_ttl: bool,
    /// Password for the default user.
    #[arg(long)]
    requirepass: Option<String>,
    /// Seed for the nodes' randomness (SCAN order, Lua math.random).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Keep node i's data directory in DIR/node-i (kept at exit). Default: a fresh
    /// temporary directory per node, removed at exit.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Past this, a running script makes other clients get BUSY.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    busy_script_time: Duration,
    /// Used-memory limit (0: none).
    #[arg(long, default_value = "0", value_parser = parse_memory)]
    maxmemory: u64,
    /// Log filter for stderr (stdout carries only the protocol).
    #[arg(long, default_value = "warn")]
    pub log: String,
    /// Worker threads [default: one per core beyond the first, at least one].
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub threads: Option<u16>,
}

/// Why the harness could not start: a setting (exit 64) or anything else (exit 1).
pub enum HarnessError {
    Config(String),
    Other(String),
}

/// Runs the harness until its stdin ends, `shutdown`, or SIGTERM/SIGINT.
pub async fn run(
    args: HarnessArgs,
    signals: impl std::future::Future<Output = ()>,
) -> Result<(), HarnessError> {
    let config = Config {
        bind: args.bind,
        max_ttl: args.max_ttl,
        restart_delay: args.restart_delay,
        require_ttl: args.require_ttl,
        requirepass: args.requirepass,
        seed: Some(args.seed),
        busy_script_time: args.busy_script_time,
        maxmemory: args.maxmemory,
        // The test backend's crash forgets every key (docs/testing.md).
        aof: redlockd::config::AofConfig {
            appendonly: false,
            ..Default::default()
        },
        ..Config::default()
    };
    let mut harness = match Harness::start(usize::from(args.nodes), config, args.dir).await {
        Ok(h) => h,
        Err(e) => {
            let msg = format!("cannot start the nodes: {e}");
            println!("{}", serde_json::json!({"ready": false, "error": msg}));
            return Err(match e {
                redlockd::StartError::Config(_) => HarnessError::Config(msg),
                redlockd::StartError::Io(_) => HarnessError::Other(msg),
            });
        }
    };
    {
        let mut out = std::io::stdout().lock();
        let written = writeln!(out, "{}", harness.ready_line()).and_then(|()| out.flush());
        if let Err(e) = written {
            harness.shutdown().await;
            return Err(HarnessError::Other(format!(
                "cannot write the ready line: {e}"
            )));
        }
    }
    let input = tokio::io::BufReader::new(tokio::io::stdin());
    let mut output = tokio::io::stdout();
    tokio::select! {
        r = harness.serve(input, &mut output) => {
            if let Err(e) = r {
                tracing::warn!("stdout is gone ({e}): stopping");
            }
        }
        _ = signals => tracing::info!("signal received, stopping"),
    }
    // Bounded, as for a server's shutdown: a script stuck in a C call must not keep
    // the process (and its caller's test run) alive.
    if tokio::time::timeout(Duration::from_secs(2), harness.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("nodes still busy after 2 s; exiting anyway");
    }
    Ok(())
}
