//! `redlockd lock` (run_lock_command) against 5 real redis-servers.
//!
//! redis-server runs on the real clock, and so does the lock runner (its watchdog and
//! --wait): the few real-time waits here are for what only real time does (keys
//! expiring on redis, a --wait running out); every other wait is for an event, in
//! short bounded polls.

use crate::support;

use std::ffi::OsString;
use std::time::Duration;

use redlockd::redlock::flock::{
    run_lock_command, LockCommand, EXIT_LOCK_LOST, EXIT_NOT_ACQUIRED, EXIT_NOT_FOUND,
    EXIT_UNAVAILABLE, EXIT_USAGE,
};
use redlockd::redlock::{Redlock, RedlockOptions};
use support::redis_server::{addrs, cluster, RedisNode};
use support::{wait_until, TempPath};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::time::{timeout, Instant};

/// Bound on every wait for the runner or for something it does.
const BOUND: Duration = Duration::from_secs(10);

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
        password_file: None,
        user: None,
        inherit_credentials: false,
        fencing_token: false,
        verbose: false,
        name: name.to_string(),
        command: command.iter().map(OsString::from).collect(),
    }
}

/// SET calls counted by every node (an acquire attempt sends one SET per node).
fn set_calls(nodes: &[RedisNode]) -> u64 {
    nodes
        .iter()
        .map(|n| {
            let info: String = redis::cmd("INFO")
                .arg("commandstats")
                .query(&mut n.conn())
                .expect("INFO");
            info.lines()
                .find_map(|l| l.strip_prefix("cmdstat_set:calls="))
                .and_then(|rest| rest.split(',').next())
                .map_or(0, |c| c.parse::<u64>().expect("a count"))
        })
        .sum()
}

/// Whether process `pid` runs: it exists and is not a zombie.
fn running(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, after)| after.split_ascii_whitespace().next())
        .unwrap_or("");
    state != "Z" && state != "X"
}

/// The pid a command wrote to `file` (waits, bounded, until it is there).
async fn pid_in(file: &TempPath) -> i32 {
    wait_until("the command wrote a pid", BOUND, || {
        file.read().ends_with('\n') && file.read().trim().parse::<i32>().is_ok()
    })
    .await;
    file.read().trim().parse().expect("a pid")
}

/// Two runs at once: the second is refused while the first's command runs (its attempt
/// is counted on the nodes while the first has not finished), and runs after.
#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_invocations_on_one_name_run_one_after_the_other() {
    let nodes = cluster(5);
    let file = TempPath::new("serial");
    let go = TempPath::new("serial-go");
    let script = format!(
        "echo start >> '{0}'; until [ -e '{1}' ]; do sleep 0.001; done; echo end >> '{0}'",
        file.0.display(),
        go.0.display()
    );
    let mut a = args(&addrs(&nodes), "job", &["sh", "-c", &script]);
    a.wait = Duration::from_secs(5);
    let b = a.clone();
    let (ra, rb) = (
        tokio::spawn(run_lock_command(a)),
        tokio::spawn(run_lock_command(b)),
    );
    wait_until("one command started", BOUND, || file.read() == "start\n").await;
    let before = set_calls(&nodes);
    let deadline = std::time::Instant::now() + BOUND;
    while set_calls(&nodes) < before + 5 {
        assert!(std::time::Instant::now() < deadline, "no second attempt");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(file.read(), "start\n", "the second did not start meanwhile");
    std::fs::write(&go.0, "").expect("go");
    let (ra, rb) = timeout(BOUND, async { tokio::join!(ra, rb) })
        .await
        .expect("bounded");
    assert_eq!((ra.expect("task"), rb.expect("task")), (0, 0));
    assert_eq!(file.read(), "start\nend\nstart\nend\n");
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

    // Default --wait 0: one attempt, at once (no retry: 5 SETs).
    let before = set_calls(&nodes);
    let code = run_lock_command(args(&list, "busy", &["true"])).await;
    assert_eq!(code, EXIT_NOT_ACQUIRED);
    assert_eq!(set_calls(&nodes), before + 5);

    // --wait is the runner's own real-time wait: it is measured on the real clock.
    let mut a = args(&list, "busy", &["true"]);
    a.wait = Duration::from_millis(300);
    let start = Instant::now();
    assert_eq!(run_lock_command(a).await, EXIT_NOT_ACQUIRED);
    let waited = start.elapsed();
    assert!(waited >= Duration::from_millis(300), "{waited:?}");
    assert!(waited < BOUND, "{waited:?}");
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
    let mut a = args(&list, "u", &["true"]);
    (a.password, a.password_file) = (Some("pw".into()), Some("/dev/null".into()));
    assert_eq!(run_lock_command(a).await, EXIT_USAGE, "not both");
    let mut a = args(&list, "u", &["true"]);
    a.password_file = Some("/nonexistent/password".into());
    assert_eq!(run_lock_command(a).await, EXIT_USAGE);
}

/// The runner holding `name` with a 3 s TTL over `nodes` while it runs `sh` (which
/// runs `prefix`, then a `sleep 30` child, and waits); kills three of the five nodes
/// once both processes run (the lock was won), and returns the runner's exit code (it
/// must come within BOUND) and the pids of `sh` and `sleep`. The runner notices the
/// loss at its next renewal (a third of the TTL) and sends SIGTERM, or SIGKILL at once
/// if the validity has already ended: the TTL leaves seconds between the two, so a
/// runner slowed by a busy machine still sends SIGTERM first. (Real time: the nodes
/// are redis-server processes, and the runner measures validity on its own clock.)
async fn run_and_lose_the_lock(
    nodes: &mut [RedisNode],
    name: &str,
    prefix: &str,
    grace: Duration,
) -> (i32, i32, i32) {
    let (sh_file, gc_file) = (TempPath::new(name), TempPath::new(&format!("{name}-gc")));
    let script = format!(
        "{prefix} echo $$ > '{}'; sleep 30 & echo $! > '{}'; wait; exec sleep 30",
        sh_file.0.display(),
        gc_file.0.display()
    );
    let mut a = args(&addrs(nodes), name, &["sh", "-c", &script]);
    a.ttl = Duration::from_secs(3);
    a.grace = grace;
    // A try that times out on a loaded machine is retried.
    a.wait = Duration::from_secs(5);
    let run = tokio::spawn(run_lock_command(a));
    let sh = pid_in(&sh_file).await;
    let gc = pid_in(&gc_file).await;
    assert!(running(sh) && running(gc));
    for n in &mut nodes[..3] {
        n.kill();
    }
    let code = timeout(BOUND, run)
        .await
        .expect("stopped well before sleep 30 ends")
        .expect("task");
    (code, sh, gc)
}

#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_lock_stops_the_command_and_its_children() {
    let mut nodes = cluster(5);
    let (code, sh, gc) =
        run_and_lose_the_lock(&mut nodes, "lost", "", Duration::from_secs(5)).await;
    assert_eq!(code, EXIT_LOCK_LOST);
    assert!(!running(sh), "the command (sh) is gone");
    assert!(!running(gc), "its child (sleep 30) is gone");
}

/// A command that handles SIGTERM and carries on: it got SIGTERM (it says so), and then
/// SIGKILL when the lock's validity ended, well before --grace (an hour) would end.
#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_that_carries_on_after_sigterm_is_killed_when_the_validity_ends() {
    let mut nodes = cluster(5);
    let said = TempPath::new("said-term");
    let trap = format!("trap 'echo TERM >> {}' TERM;", said.0.display());
    let (code, sh, gc) =
        run_and_lose_the_lock(&mut nodes, "stubborn", &trap, Duration::from_secs(3600)).await;
    assert_eq!(code, EXIT_LOCK_LOST);
    assert_eq!(said.read(), "TERM\n", "SIGTERM came first");
    assert!(!running(sh) && !running(gc));
}

/// A TCP relay to a node that can be cut: once cut, relayed connections are closed and
/// new ones are closed at once. Stops with the test's runtime.
struct Relay {
    addr: String,
    cut: watch::Sender<bool>,
}

impl Relay {
    async fn start(target: std::net::SocketAddr) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let (cut, is_cut) = watch::channel(false);
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if *is_cut.borrow() {
                    continue;
                }
                let mut is_cut = is_cut.clone();
                tokio::spawn(async move {
                    let Ok(mut outbound) = TcpStream::connect(target).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = is_cut.wait_for(|c| *c) => {}
                    }
                });
            }
        });
        Relay { addr, cut }
    }
}

/// The safety promise end to end: holder A (through relays) loses its path to the
/// nodes while its command's background loop writes to a log; B (direct) waits for the
/// lock and writes once it holds it. Not one line of A's after B's: A's whole process
/// group was stopped before B could acquire (B gets it only when A's keys expire).
/// A holds a 3 s TTL: the runner stops A's group when it notices the loss, at its next
/// renewal, and a runner slowed by a busy machine must still do that before A's keys
/// expire (with 1 s, a stall of ~0.7 s on a loaded machine would let B in first, the
/// process pause no lock client can rule out).
#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_holder_has_stopped_before_the_next_holder_starts() {
    let nodes = cluster(5);
    let mut relays = Vec::new();
    for n in &nodes {
        relays.push(Relay::start(n.addr()).await);
    }
    let log = TempPath::new("next-log");
    let gc_file = TempPath::new("next-gc");
    let a_script = format!(
        "(while :; do echo A >> '{0}'; sleep 0.002; done) & echo $! > '{1}'; wait",
        log.0.display(),
        gc_file.0.display()
    );
    let via_relays: Vec<String> = relays.iter().map(|r| r.addr.clone()).collect();
    let mut a = args(&via_relays, "next", &["sh", "-c", &a_script]);
    a.ttl = Duration::from_secs(3);
    a.grace = Duration::from_secs(3600);
    a.wait = Duration::from_secs(5);
    let a = tokio::spawn(run_lock_command(a));
    let gc = pid_in(&gc_file).await;
    wait_until("A's loop writes", BOUND, || log.read().starts_with("A\n")).await;

    for r in &relays {
        r.cut.send_replace(true);
    }
    let mut b = args(
        &addrs(&nodes),
        "next",
        &["sh", "-c", &format!("echo B >> '{}'", log.0.display())],
    );
    b.wait = Duration::from_secs(8);
    let b = run_lock_command(b);
    let (ra, rb) = timeout(BOUND, async { tokio::join!(a, b) })
        .await
        .expect("bounded");
    assert_eq!((ra.expect("task"), rb), (EXIT_LOCK_LOST, 0));
    assert!(!running(gc), "A's loop is gone");
    let text = log.read();
    let after_b: Vec<&str> = text.lines().skip_while(|l| *l != "B").collect();
    assert_eq!(after_b, ["B"], "nothing of A's after B started");
}
