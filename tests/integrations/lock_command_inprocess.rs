//! The `redlockd lock` binary (a child process) against 5 in-process redlockd nodes.

use crate::support;

use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use redlockd::redlock::flock::{EXIT_LOCK_LOST, EXIT_NOT_ACQUIRED, EXIT_UNAVAILABLE};
use redlockd::testing::TestCluster;
use support::nodes::{nodes_arg, opts, redlock};
use support::process::BIN;
use support::TempPath;
use tokio::process::{Child, Command};
use tokio::time::{timeout, Instant};

/// Bound on every wait for the binary or for something it does.
const BOUND: Duration = Duration::from_secs(10);

/// `redlockd lock --nodes ... <flags> NAME -- <command>`, killed if the test drops it.
fn lock(cluster: &TestCluster, flags: &[&str], name: &str, command: &[&str]) -> Child {
    Command::new(BIN)
        .arg("lock")
        .args(["--nodes", &nodes_arg(cluster), "--node-timeout", "100ms"])
        .args(flags)
        .arg(name)
        .arg("--")
        .args(command)
        .env_remove("REDLOCKD_NODES")
        .env_remove("REDLOCKD_PASSWORD")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn redlockd lock")
}

/// Waits (bounded) for the binary to exit; its stderr goes to the test's output.
async fn exit_of(child: Child) -> ExitStatus {
    let out = timeout(BOUND, child.wait_with_output())
        .await
        .expect("redlockd lock exits in time")
        .expect("wait");
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    out.status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_exit_status_passes_through() {
    let cluster = TestCluster::start(5).await;
    let flags = ["--ttl", "10s", "--wait", "5s"];
    let status = exit_of(lock(&cluster, &flags, "x", &["sh", "-c", "exit 7"])).await;
    assert_eq!(status.code(), Some(7));
    let status = exit_of(lock(&cluster, &flags, "x", &["true"])).await;
    assert_eq!(status.code(), Some(0));
    // Released at the end of each run: the name is free.
    let rl = redlock(&cluster, opts(100));
    rl.try_acquire(b"x", Duration::from_secs(10))
        .await
        .expect("released after the command");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_concurrent_invocations_run_one_after_the_other() {
    let cluster = TestCluster::start(5).await;
    let file = TempPath::new("serial");
    let script = format!(
        "echo start >> '{0}'; sleep 0.3; echo end >> '{0}'",
        file.0.display()
    );
    let flags = ["--ttl", "10s", "--wait", "5s"];
    let a = lock(&cluster, &flags, "job", &["sh", "-c", &script]);
    let b = lock(&cluster, &flags, "job", &["sh", "-c", &script]);
    let start = Instant::now();
    let (sa, sb) = tokio::join!(exit_of(a), exit_of(b));
    assert_eq!((sa.code(), sb.code()), (Some(0), Some(0)));
    assert!(
        start.elapsed() >= Duration::from_millis(600),
        "ran one after the other, {:?}",
        start.elapsed()
    );
    let text = file.read();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines, ["start", "end", "start", "end"]);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_name_exits_75_and_a_fenced_majority_exits_69() {
    let cluster = TestCluster::start(5).await;
    let rl = redlock(&cluster, opts(100));
    let held = rl
        .try_acquire(b"busy", Duration::from_secs(10))
        .await
        .expect("held");
    let status = exit_of(lock(&cluster, &["--ttl", "10s"], "busy", &["true"])).await;
    assert_eq!(status.code(), Some(EXIT_NOT_ACQUIRED));
    rl.release(&held).await;

    for i in 0..3 {
        cluster.node(i).crash_restart();
    }
    let status = exit_of(lock(&cluster, &["--ttl", "10s"], "busy", &["true"])).await;
    assert_eq!(status.code(), Some(EXIT_UNAVAILABLE));
    cluster.advance(Duration::from_secs(31));
    let status = exit_of(lock(&cluster, &["--ttl", "10s"], "busy", &["true"])).await;
    assert_eq!(status.code(), Some(0), "fence lifted");
    cluster.shutdown().await;
}

/// Starts `sleep 30` under the lock (1 s TTL: the watchdog extends every ~333 ms) and
/// waits until it runs; returns the child and the pid of `sleep`.
async fn sleeping_under_lock(
    cluster: &TestCluster,
    name: &str,
    pid_file: &TempPath,
) -> (Child, i32) {
    let script = format!("echo $$ > '{}'; exec sleep 30", pid_file.0.display());
    let child = lock(
        cluster,
        &["--ttl", "1s", "--grace", "2s"],
        name,
        &["sh", "-c", &script],
    );
    let deadline = Instant::now() + BOUND;
    let pid = loop {
        if let Ok(pid) = pid_file.read().trim().parse::<i32>() {
            break pid;
        }
        assert!(Instant::now() < deadline, "the command never started");
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    (child, pid)
}

/// Right after a fault that loses the lock: `redlockd lock` exits 74 within 3 s, and
/// the command it ran (`sleep 30`, process `pid`) is gone.
async fn stopped_as_lost(child: Child, pid: i32) {
    let faulted = Instant::now();
    let status = exit_of(child).await;
    assert_eq!(status.code(), Some(EXIT_LOCK_LOST));
    assert!(
        faulted.elapsed() < Duration::from_secs(3),
        "{:?}",
        faulted.elapsed()
    );
    assert!(!process_exists(pid), "sleep 30 was stopped");
}

fn process_exists(pid: i32) -> bool {
    // SAFETY: kill(2) with signal 0 only checks for existence and permission.
    unsafe { libc::kill(pid, 0) == 0 }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_lost_to_a_majority_crash_restart_stops_the_command_with_74() {
    let cluster = TestCluster::start(5).await;
    let pid_file = TempPath::new("crash");
    let (child, pid) = sleeping_under_lock(&cluster, "crashed", &pid_file).await;
    assert!(process_exists(pid));
    // A majority forgets the lock: the next extension is refused there.
    for i in 0..3 {
        cluster.node(i).crash_restart();
    }
    stopped_as_lost(child, pid).await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_lost_to_a_partition_stops_the_command_with_74() {
    let cluster = TestCluster::start(5).await;
    let pid_file = TempPath::new("partition");
    let (child, pid) = sleeping_under_lock(&cluster, "cut", &pid_file).await;
    // One node crashes and two are cut off: no majority can be reached.
    cluster.node(0).crash_restart();
    cluster.node(1).isolate().await;
    cluster.node(2).isolate().await;
    stopped_as_lost(child, pid).await;
    cluster.node(1).heal().await;
    cluster.node(2).heal().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_tokens_reach_the_command_and_grow_from_run_to_run() {
    let cluster = TestCluster::start(5).await;
    let out = TempPath::new("token");
    let flags = ["--ttl", "10s", "--fencing-token", "-v"];
    let write_token = format!("echo $REDLOCKD_FENCING_TOKEN >> {}", out.0.display());
    for _ in 0..2 {
        let child = lock(&cluster, &flags, "tok", &["sh", "-c", &write_token]);
        let done = timeout(BOUND, child.wait_with_output())
            .await
            .expect("exits in time")
            .expect("wait");
        assert!(done.status.success(), "{done:?}");
        let said = String::from_utf8_lossy(&done.stderr);
        assert!(said.contains("acquired \"tok\", fencing token "), "{said}");
    }
    let tokens: Vec<u64> = out.read().lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(tokens.len(), 2, "{tokens:?}");
    assert!(tokens[1] > tokens[0], "{tokens:?}");
    // Without the flag the command gets no token.
    let check = "test -z \"$REDLOCKD_FENCING_TOKEN\"";
    let status = exit_of(lock(
        &cluster,
        &["--ttl", "10s"],
        "tok",
        &["sh", "-c", check],
    ))
    .await;
    assert!(status.success());
    cluster.shutdown().await;
}
