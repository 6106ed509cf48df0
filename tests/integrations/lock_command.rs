//! `redlockd lock` (run_lock_command) against 5 real redis-servers.

use crate::support;

use std::ffi::OsString;
use std::time::Duration;

use redlockd::redlock::flock::{
    run_lock_command, LockCommand, EXIT_LOCK_LOST, EXIT_NOT_ACQUIRED, EXIT_NOT_FOUND,
    EXIT_UNAVAILABLE, EXIT_USAGE,
};
use redlockd::redlock::{Redlock, RedlockOptions};
use support::redis_server::{addrs, cluster, RedisNode};
use support::TempPath;
use tokio::time::{timeout, Instant};

fn args(nodes: &[String], name: &str, command: &[&str]) -> LockCommand {
    LockCommand {
        nodes: nodes.to_vec(),
        tls_ca_cert_file: None,
        tls_cert_file: None,
        tls_key_file: None,
        ttl: Duration::from_secs(1),
        wait: Duration::ZERO,
        grace: Duration::from_secs(5),
        // Real redis-server processes on a machine that may be loaded: a node that is
        // up must answer within this (with 100 ms, all five timed out in a soak run).
        node_timeout: Some(Duration::from_millis(300)),
        password: None,
        user: None,
        fencing_token: false,
        verbose: false,
        name: name.to_string(),
        command: command.iter().map(OsString::from).collect(),
    }
}

#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_invocations_on_one_name_run_one_after_the_other() {
    let nodes = cluster(5);
    let file = TempPath::new("serial");
    let script = format!(
        "echo start >> '{0}'; sleep 0.3; echo end >> '{0}'",
        file.0.display()
    );
    let mut a = args(&addrs(&nodes), "job", &["sh", "-c", &script]);
    a.wait = Duration::from_secs(5);
    let b = a.clone();
    let start = Instant::now();
    let (ra, rb) = timeout(Duration::from_secs(10), async {
        tokio::join!(run_lock_command(a), run_lock_command(b))
    })
    .await
    .expect("bounded");
    assert_eq!((ra, rb), (0, 0));
    assert!(
        start.elapsed() >= Duration::from_millis(600),
        "ran one after the other"
    );
    let text = std::fs::read_to_string(&file.0).expect("read");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines, ["start", "end", "start", "end"]);
    for n in &nodes {
        assert_eq!(n.get("job"), None, "released at the end");
    }
}

#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test]
async fn the_command_exit_status_passes_through() {
    let nodes = cluster(5);
    let list = addrs(&nodes);
    assert_eq!(
        run_lock_command(args(&list, "x", &["sh", "-c", "exit 7"])).await,
        7
    );
    assert_eq!(run_lock_command(args(&list, "x", &["true"])).await, 0);
    assert_eq!(
        run_lock_command(args(&list, "x", &["sh", "-c", "kill -9 $$"])).await,
        128 + 9,
        "killed by a signal: 128+N"
    );
    assert_eq!(
        run_lock_command(args(&list, "x", &["/nonexistent/command"])).await,
        EXIT_NOT_FOUND
    );
}

#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test]
async fn a_held_lock_is_not_acquired_within_wait() {
    let nodes = cluster(5);
    let list = addrs(&nodes);
    // The default per-node timeout (min(50 ms, ttl/10)) is too short for freshly
    // started redis-servers on a loaded machine (4 of 5 timed out in a soak run).
    let holder = Redlock::new(
        list.clone(),
        RedlockOptions {
            node_timeout: Some(Duration::from_millis(500)),
            ..RedlockOptions::default()
        },
    )
    .expect("client");
    let lock = holder
        .acquire(b"busy", Duration::from_secs(10))
        .await
        .expect("held");

    // Default --wait 0: one attempt, at once.
    let start = Instant::now();
    let code = run_lock_command(args(&list, "busy", &["true"])).await;
    assert_eq!(code, EXIT_NOT_ACQUIRED);
    assert!(start.elapsed() < Duration::from_millis(500));

    let mut a = args(&list, "busy", &["true"]);
    a.wait = Duration::from_millis(300);
    let start = Instant::now();
    assert_eq!(run_lock_command(a).await, EXIT_NOT_ACQUIRED);
    let waited = start.elapsed();
    assert!(waited >= Duration::from_millis(300), "{waited:?}");
    assert!(waited < Duration::from_millis(1000), "{waited:?}");
    holder.release(&lock).await;
}

#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test]
async fn unreachable_nodes_and_bad_usage_have_their_own_codes() {
    let mut nodes = cluster(3);
    let list = addrs(&nodes);
    for n in &mut nodes {
        n.kill();
    }
    assert_eq!(
        run_lock_command(args(&list, "u", &["true"])).await,
        EXIT_UNAVAILABLE
    );

    let mut a = args(&list, "u", &["true"]);
    a.ttl = Duration::from_millis(5);
    assert_eq!(run_lock_command(a).await, EXIT_USAGE);
    assert_eq!(
        run_lock_command(args(&[], "u", &["true"])).await,
        EXIT_USAGE
    );
}

/// `redlockd lock` holding `name` with a 600 ms TTL over `nodes` while it runs
/// `sh -c "<prefix> touch STARTED; exec sleep 30"`; kills three of the five nodes once
/// the command has started (the lock was won: a key on a node is no sign of that, a
/// failed attempt sets it too), and returns the lock command's exit code with how long
/// after the kill it came.
async fn run_and_lose_the_lock(
    nodes: &mut [RedisNode],
    name: &str,
    prefix: &str,
    grace: Duration,
) -> (i32, Duration) {
    let started = TempPath::new(name);
    let script = format!("{prefix} touch '{}'; exec sleep 30", started.0.display());
    let mut a = args(&addrs(nodes), name, &["sh", "-c", &script]);
    a.ttl = Duration::from_millis(600);
    a.grace = grace;
    // A try that times out on a loaded machine is retried.
    a.wait = Duration::from_secs(5);
    let run = tokio::spawn(run_lock_command(a));
    let deadline = Instant::now() + Duration::from_secs(5);
    while !started.0.exists() {
        assert!(Instant::now() < deadline, "the command never started");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for n in &mut nodes[..3] {
        n.kill();
    }
    let killed = Instant::now();
    let code = timeout(Duration::from_secs(5), run)
        .await
        .expect("stopped well before sleep 30 ends")
        .expect("task");
    (code, killed.elapsed())
}

#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_lock_stops_the_command() {
    let mut nodes = cluster(5);
    let (code, after) = run_and_lose_the_lock(&mut nodes, "lost", "", Duration::from_secs(5)).await;
    assert_eq!(code, EXIT_LOCK_LOST);
    assert!(after < Duration::from_secs(2), "{after:?}");
}

#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_ignoring_sigterm_is_killed_after_the_grace_period() {
    let mut nodes = cluster(5);
    // exec keeps the ignored disposition, so `sleep` itself ignores SIGTERM.
    let grace = Duration::from_millis(300);
    let (code, after) = run_and_lose_the_lock(&mut nodes, "stubborn", "trap '' TERM;", grace).await;
    assert_eq!(code, EXIT_LOCK_LOST);
    assert!(after >= grace, "{after:?}");
    assert!(after < Duration::from_secs(3), "{after:?}");
}
