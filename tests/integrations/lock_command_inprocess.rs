//! The `redlockd lock` binary (a child process) against 5 in-process redlockd nodes on
//! the manual clock: keys expire and fences lift only when a test advances it.
//!
//! What stays on the real clock is `redlockd lock` itself (another process): its
//! watchdog extends every ttl/3 and a lost lock is noticed at the next extension. Tests
//! wait for events (a pid written, a command counted on the nodes, an exit) in 1 ms
//! polls, bounded by [`BOUND`]; none sleeps to let time pass.

use crate::support;

use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use redlockd::redlock::flock::{EXIT_LOCK_LOST, EXIT_NOT_ACQUIRED, EXIT_UNAVAILABLE, EXIT_USAGE};
use redlockd::testing::TestGroup;
use support::nodes::{nodes_arg, on_node, opts, redlock, NODE_TIMEOUT_MS};
use support::process::BIN;
use support::{wait_until, TempPath};
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, Command};
use tokio::time::timeout;

/// Bound on every wait for the binary or for something it does.
const BOUND: Duration = Duration::from_secs(10);

/// `redlockd lock <flags> NAME -- <command>` with no --nodes and without the
/// credential variables of the test's own environment. The per-node timeout is one a
/// node that is up meets on a loaded machine (see `NODE_TIMEOUT_MS`).
fn bare(flags: &[&str], name: &str, command: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.arg("lock")
        .args(["--node-timeout", &format!("{NODE_TIMEOUT_MS}ms")])
        .args(flags)
        .arg(name)
        .arg("--")
        .args(command)
        .env_remove("REDLOCKD_NODES")
        .env_remove("REDLOCKD_PASSWORD")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// `redlockd lock --nodes ... <flags> NAME -- <command>`.
fn lock_command(group: &TestGroup, flags: &[&str], name: &str, command: &[&str]) -> Command {
    let nodes = nodes_arg(group);
    let mut all = vec!["--nodes", &nodes];
    all.extend_from_slice(flags);
    bare(&all, name, command)
}

/// The same, started; killed if the test drops it.
fn lock(group: &TestGroup, flags: &[&str], name: &str, command: &[&str]) -> Child {
    lock_command(group, flags, name, command)
        .spawn()
        .expect("spawn redlockd lock")
}

/// Waits (bounded) for the binary to exit; returns its status and stderr (also copied
/// to the test's output).
async fn finish(child: Child) -> (ExitStatus, String) {
    let out = timeout(BOUND, child.wait_with_output())
        .await
        .expect("redlockd lock exits in time")
        .expect("wait");
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    eprint!("{err}");
    (out.status, err)
}

async fn exit_of(child: Child) -> ExitStatus {
    finish(child).await.0
}

/// Whether process `pid` runs: it exists and is not a zombie (a zombie runs nothing; it
/// only waits for its parent, or init, to reap it).
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

/// `sh` writing its own pid to `sh_pid`, starting `sleep 100` in the background (a
/// grandchild of `redlockd lock`), writing its pid to `gc_pid`, and waiting for it.
/// `prefix` runs first (e.g. a trap).
fn shell_with_grandchild(prefix: &str, sh_pid: &TempPath, gc_pid: &TempPath) -> String {
    format!(
        "{prefix} echo $$ > '{}'; sleep 100 & echo $! > '{}'; wait",
        sh_pid.0.display(),
        gc_pid.0.display()
    )
}

/// SET calls counted by every node (acquire attempts send one SET per node).
async fn set_calls(group: &TestGroup) -> u64 {
    let mut total = 0;
    for i in 0..group.len() {
        let info: String = on_node(group, i, &["INFO", "commandstats"]).await;
        total += info
            .lines()
            .find_map(|l| l.strip_prefix("cmdstat_set:calls="))
            .and_then(|rest| rest.split(',').next())
            .map_or(0, |n| n.parse::<u64>().expect("a count"));
    }
    total
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_exit_status_passes_through() {
    let group = TestGroup::start(5).await;
    let flags = ["--ttl", "10s", "--wait", "5s"];
    let status = exit_of(lock(&group, &flags, "x", &["sh", "-c", "exit 7"])).await;
    assert_eq!(status.code(), Some(7));
    let status = exit_of(lock(&group, &flags, "x", &["true"])).await;
    assert_eq!(status.code(), Some(0));
    // Released at the end of each run: the name is free.
    let rl = redlock(&group, opts(100));
    rl.try_acquire(b"x", Duration::from_secs(10))
        .await
        .expect("released after the command");
    group.shutdown().await;
}

/// Two invocations at once: the second is refused while the first's command runs (its
/// attempt is seen on the nodes while the first has not finished), and runs after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_concurrent_invocations_run_one_after_the_other() {
    let group = TestGroup::start(5).await;
    let file = TempPath::new("serial");
    let go = TempPath::new("serial-go");
    // Each command holds until the test creates `go`.
    let script = format!(
        "echo start >> '{0}'; until [ -e '{1}' ]; do sleep 0.001; done; echo end >> '{0}'",
        file.0.display(),
        go.0.display()
    );
    let flags = ["--ttl", "10s", "--wait", "5s"];
    let a = lock(&group, &flags, "job", &["sh", "-c", &script]);
    let b = lock(&group, &flags, "job", &["sh", "-c", &script]);
    wait_until("one command started", BOUND, || file.read() == "start\n").await;
    // The other one tries (SET on every node) and is refused while the first holds.
    let before = set_calls(&group).await;
    let deadline = std::time::Instant::now() + BOUND;
    while set_calls(&group).await < before + 5 {
        assert!(std::time::Instant::now() < deadline, "no second attempt");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(file.read(), "start\n", "the second did not start meanwhile");
    std::fs::write(&go.0, "").expect("go");
    let (sa, sb) = tokio::join!(exit_of(a), exit_of(b));
    assert_eq!((sa.code(), sb.code()), (Some(0), Some(0)));
    assert_eq!(file.read(), "start\nend\nstart\nend\n");
    group.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_name_exits_75_and_a_fenced_majority_exits_69_with_one_line_per_reason() {
    let group = TestGroup::start(5).await;
    let rl = redlock(&group, opts(100));
    let held = rl
        .try_acquire(b"busy", Duration::from_secs(10))
        .await
        .expect("held");
    let (status, said) = finish(lock(&group, &["--ttl", "10s"], "busy", &["true"])).await;
    assert_eq!(status.code(), Some(EXIT_NOT_ACQUIRED));
    assert_eq!(
        said,
        "redlockd lock: lock \"busy\" is held elsewhere: 0/5 nodes granted (need 3), 5 held \
         elsewhere, 0 failed\n"
    );
    rl.release(&held).await;

    for i in 0..3 {
        group.node(i).crash_restart();
    }
    let (status, said) = finish(lock(&group, &["--ttl", "10s"], "busy", &["true"])).await;
    assert_eq!(status.code(), Some(EXIT_UNAVAILABLE));
    let lines: Vec<&str> = said.lines().collect();
    assert_eq!(
        lines.len(),
        2,
        "a headline and one line for the fence: {said}"
    );
    assert_eq!(
        lines[0],
        "redlockd lock: lock \"busy\" not taken, too few nodes reachable: 2/5 nodes granted \
         (need 3), 0 held elsewhere, 3 failed"
    );
    let addrs = group.addrs();
    let fenced = format!(
        "redlockd lock:   3 nodes ({}, {}, {}): error reply: TRYAGAIN ",
        addrs[0], addrs[1], addrs[2]
    );
    assert!(lines[1].starts_with(&fenced), "{said}");
    group.advance(Duration::from_secs(31));
    let status = exit_of(lock(&group, &["--ttl", "10s"], "busy", &["true"])).await;
    assert_eq!(status.code(), Some(0), "fence lifted");
    group.shutdown().await;
}

/// A TTL every node refuses (above their max-ttl, 30 s by default) is a setting: exit
/// 64 at once, even with --wait, with the nodes' reason as the headline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ttl_above_the_nodes_max_ttl_exits_64_with_that_reason() {
    let group = TestGroup::start(5).await;
    let ran = TempPath::new("above-max-ttl");
    let touch = format!("touch '{}'", ran.0.display());
    // --wait 1h: retrying would outlast BOUND.
    let flags = ["--ttl", "60s", "--wait", "1h"];
    let (status, said) = finish(lock(&group, &flags, "long", &["sh", "-c", &touch])).await;
    assert_eq!(status.code(), Some(EXIT_USAGE));
    let headline = said.lines().next().unwrap_or("");
    assert!(
        headline.starts_with(
            "redlockd lock: lock \"long\" not taken: --ttl 60000 ms refused by 5 of 5 nodes: \
             TTL of 60000 ms is above this server's max-ttl of 30000 ms"
        ),
        "{said}"
    );
    assert!(!ran.0.exists(), "the command did not run");
    group.shutdown().await;
}

/// `--ttl 30` (a cron user meaning seconds) would be a 30 ms lock: refused, with the fix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bare_ttl_below_a_second_is_refused() {
    let group = TestGroup::start(5).await;
    let ran = TempPath::new("bare-ttl");
    let touch = format!("touch '{}'", ran.0.display());
    let (status, said) = finish(lock(&group, &["--ttl", "30"], "x", &["sh", "-c", &touch])).await;
    assert_eq!(status.code(), Some(EXIT_USAGE));
    assert!(
        said.contains("a bare number is milliseconds: 30 would be 30 ms; write 30s for seconds"),
        "{said}"
    );
    assert!(!ran.0.exists(), "the command did not run");
    // With a unit, milliseconds are taken as meant.
    let status = exit_of(lock(&group, &["--ttl", "300ms"], "x", &["true"])).await;
    assert_eq!(status.code(), Some(0));
    group.shutdown().await;
}

/// Starts `sh` with a `sleep 100` grandchild under the lock; returns `redlockd lock` and the pids of `sh` and `sleep`.
async fn grandchild_under_lock(
    group: &TestGroup,
    flags: &[&str],
    prefix: &str,
    tag: &str,
) -> (Child, i32, i32) {
    let (sh_file, gc_file) = (TempPath::new(tag), TempPath::new(&format!("{tag}-gc")));
    let script = shell_with_grandchild(prefix, &sh_file, &gc_file);
    let child = lock(group, flags, tag, &["sh", "-c", &script]);
    let sh = pid_in(&sh_file).await;
    let gc = pid_in(&gc_file).await;
    assert!(running(sh) && running(gc));
    (child, sh, gc)
}

/// After a fault that loses the lock: `redlockd lock` exits 74, and by then neither the
/// shell it ran nor the shell's `sleep 100` runs.
async fn stopped_as_lost(child: Child, sh: i32, gc: i32) -> String {
    let (status, said) = finish(child).await;
    assert_eq!(status.code(), Some(EXIT_LOCK_LOST));
    assert!(!running(sh), "the command (sh) was stopped");
    assert!(!running(gc), "the command's child (sleep 100) was stopped");
    said
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_lost_to_a_majority_crash_restart_stops_the_whole_group_before_74() {
    let group = TestGroup::start(5).await;
    let (child, sh, gc) =
        grandchild_under_lock(&group, &["--ttl", "1s", "--grace", "2s"], "", "crash").await;
    // A majority forgets the lock: the next extension is refused there.
    for i in 0..3 {
        group.node(i).crash_restart();
    }
    let said = stopped_as_lost(child, sh, gc).await;
    assert!(
        said.contains(
            "lost the lock \"crash\" while the command ran; stopping its process group ("
        ),
        "{said}"
    );
    group.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_lost_to_a_partition_stops_the_whole_group_before_74() {
    let group = TestGroup::start(5).await;
    let (child, sh, gc) =
        grandchild_under_lock(&group, &["--ttl", "1s", "--grace", "2s"], "", "cut").await;
    // One node crashes and two are cut off: no majority can be reached.
    group.node(0).crash_restart();
    group.node(1).isolate().await;
    group.node(2).isolate().await;
    stopped_as_lost(child, sh, gc).await;
    group.node(1).heal().await;
    group.node(2).heal().await;
    group.shutdown().await;
}

/// A group that ignores SIGTERM gets SIGKILL when the lock's validity ends (under 1 s
/// here), not after --grace (an hour: waiting for it would outlast BOUND).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_grace_is_capped_at_the_validity_left() {
    let group = TestGroup::start(5).await;
    let flags = ["--ttl", "1s", "--grace", "1h"];
    let (child, sh, gc) = grandchild_under_lock(&group, &flags, "trap '' TERM;", "stubborn").await;
    for i in 0..3 {
        group.node(i).crash_restart();
    }
    let said = stopped_as_lost(child, sh, gc).await;
    // The refusal comes at the next extension, with up to 2/3 of the validity left
    // (none if the machine stalled `redlockd lock` that long).
    assert!(
        said.contains(", when the lock's validity ends (--grace 3600000 ms is longer))")
            || said.contains("(SIGKILL now: the lock's validity has ended)"),
        "{said}"
    );
    group.shutdown().await;
}

/// SIGTERM to `redlockd lock` reaches every process of the command's group; the lock
/// is held until they are gone, then released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarded_sigterm_reaches_the_grandchild() {
    let group = TestGroup::start(5).await;
    let (child, sh, gc) = grandchild_under_lock(&group, &["--ttl", "10s"], "", "fwd").await;
    let pid = child.id().expect("running") as i32;
    // SAFETY: kill(2) has no memory-safety preconditions.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let (status, _) = finish(child).await;
    assert_eq!(
        status.code(),
        Some(128 + libc::SIGTERM),
        "sh died of SIGTERM"
    );
    assert!(!running(sh) && !running(gc));
    let rl = redlock(&group, opts(100));
    rl.try_acquire(b"fwd", Duration::from_secs(10))
        .await
        .expect("released");
    group.shutdown().await;
}

/// A command that exits leaving a background process: that process is stopped before
/// the lock is released (it would run on unlocked), and the command's status is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_left_behind_are_stopped_before_the_release() {
    let group = TestGroup::start(5).await;
    let gc_file = TempPath::new("left-gc");
    let script = format!("sleep 100 & echo $! > '{}'; exit 3", gc_file.0.display());
    let (status, said) = finish(lock(
        &group,
        &["--ttl", "10s"],
        "left",
        &["sh", "-c", &script],
    ))
    .await;
    assert_eq!(status.code(), Some(3));
    let gc: i32 = gc_file.read().trim().parse().expect("a pid");
    assert!(!running(gc), "sleep 100 was stopped");
    assert!(
        said.contains("the command left processes running in its process group"),
        "{said}"
    );
    group.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_tokens_reach_the_command_and_grow_from_run_to_run() {
    let group = TestGroup::start(5).await;
    let out = TempPath::new("token");
    let flags = ["--ttl", "10s", "--fencing-token", "-v"];
    let write_token = format!("echo $REDLOCKD_FENCING_TOKEN >> {}", out.0.display());
    for _ in 0..2 {
        let (status, said) = finish(lock(&group, &flags, "tok", &["sh", "-c", &write_token])).await;
        assert_eq!(status.code(), Some(0));
        assert!(said.contains("acquired \"tok\", fencing token "), "{said}");
    }
    let tokens: Vec<u64> = out.read().lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(tokens.len(), 2, "{tokens:?}");
    assert!(tokens[1] > tokens[0], "{tokens:?}");
    // Without the flag the command gets no token.
    let check = "test -z \"$REDLOCKD_FENCING_TOKEN\"";
    let status = exit_of(lock(&group, &["--ttl", "10s"], "tok", &["sh", "-c", check])).await;
    assert_eq!(status.code(), Some(0));
    group.shutdown().await;
}

/// What the command sees of REDLOCKD_PASSWORD and REDLOCKD_NODES ("unset" if absent),
/// with `redlockd lock` given both by the environment and `flags`; and its stderr.
async fn credentials_seen(group: &TestGroup, flags: &[&str]) -> (String, String) {
    let out = TempPath::new("seen");
    let script = format!(
        "echo \"${{REDLOCKD_PASSWORD-unset}} ${{REDLOCKD_NODES-unset}}\" > '{}'",
        out.0.display()
    );
    let mut all = vec!["--ttl", "10s"];
    all.extend_from_slice(flags);
    let child = bare(&all, "creds", &["sh", "-c", &script])
        .env("REDLOCKD_PASSWORD", "s3cret")
        .env("REDLOCKD_NODES", nodes_arg(group))
        .spawn()
        .expect("spawn");
    let (status, said) = finish(child).await;
    assert_eq!(status.code(), Some(0), "{said}");
    (out.read(), said)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_does_not_inherit_the_credentials_unless_asked() {
    let group = TestGroup::start_with(5, |mut c| {
        c.requirepass = Some("s3cret".into());
        c
    })
    .await;
    let (seen, said) = credentials_seen(&group, &[]).await;
    assert_eq!(seen, "unset unset\n");
    assert_eq!(said, "", "no warning for credentials from the environment");
    let (seen, _) = credentials_seen(&group, &["--inherit-credentials"]).await;
    assert_eq!(seen, format!("s3cret {}\n", nodes_arg(&group)));
    group.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passwords_on_the_command_line_are_warned_about_and_files_and_stdin_are_not() {
    let group = TestGroup::start_with(5, |mut c| {
        c.requirepass = Some("s3cret".into());
        c
    })
    .await;
    let flag_warning = "redlockd lock: warning: --password on the command line is visible to \
                        other users (ps) while the command runs; use REDLOCKD_PASSWORD or \
                        --password-file\n";
    let (status, said) = finish(lock(
        &group,
        &["--ttl", "10s", "--password", "s3cret"],
        "pw",
        &["true"],
    ))
    .await;
    assert_eq!((status.code(), said.as_str()), (Some(0), flag_warning));

    let urls: Vec<String> = group
        .addrs()
        .iter()
        .map(|a| format!("redis://:s3cret@{a}"))
        .collect();
    let (status, said) = finish(
        bare(
            &["--nodes", &urls.join(","), "--ttl", "10s"],
            "pw",
            &["true"],
        )
        .spawn()
        .expect("spawn"),
    )
    .await;
    assert_eq!(status.code(), Some(0));
    assert!(
        said.starts_with("redlockd lock: warning: a password in a --nodes URL is visible"),
        "{said}"
    );

    // A password file (mode 600): no warning.
    let file = TempPath::new("pwfile");
    std::fs::write(&file.0, "s3cret\n").expect("write");
    std::fs::set_permissions(&file.0, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .expect("chmod");
    let path = file.0.to_str().expect("utf-8 path");
    let (status, said) = finish(lock(
        &group,
        &["--ttl", "10s", "--password-file", path],
        "pw",
        &["true"],
    ))
    .await;
    assert_eq!((status.code(), said.as_str()), (Some(0), ""));

    // A wrong password in the file: every node answers WRONGPASS, no majority.
    std::fs::write(&file.0, "wrong\n").expect("write");
    let (status, _) = finish(lock(
        &group,
        &["--ttl", "10s", "--password-file", path],
        "pw",
        &["true"],
    ))
    .await;
    assert_eq!(status.code(), Some(EXIT_UNAVAILABLE));

    // From stdin: the first line is the password; the command reads the rest.
    let out = TempPath::new("stdin-rest");
    let cat = format!("cat > '{}'", out.0.display());
    let mut child = lock_command(
        &group,
        &["--ttl", "10s", "--password-file", "-"],
        "pw",
        &["sh", "-c", &cat],
    )
    .stdin(Stdio::piped())
    .spawn()
    .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(b"s3cret\nfor the command\n")
        .await
        .expect("write");
    drop(stdin);
    let (status, said) = finish(child).await;
    assert_eq!((status.code(), said.as_str()), (Some(0), ""));
    assert_eq!(out.read(), "for the command\n");
    group.shutdown().await;
}
