//! `redlockd lock`: a distributed flock(1). Holds a Redlock while a command runs, so a
//! job (typically from cron on several machines) never runs twice at once.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::time::Instant;

mod child;

use super::{AttemptReport, NodeError, Redlock, RedlockError, RedlockOptions, TlsOptions};
use child::{exit_code, own_session_and_parent_death_signal, Forwarder, GroupKill};

/// Bad arguments (no nodes, an invalid duration, a TTL too small), or a setting every
/// node refuses (a TTL above the nodes' max-ttl): `EX_USAGE`.
pub const EXIT_USAGE: i32 = 64;
/// Not acquired because too few nodes could be reached (down, timing out, or refusing
/// with an error such as the restart fence): `EX_UNAVAILABLE`.
pub const EXIT_UNAVAILABLE: i32 = 69;
/// The lock was lost while the command ran (a majority could not be kept); the command
/// was stopped: `EX_IOERR`, the holder's I/O with the nodes failed.
pub const EXIT_LOCK_LOST: i32 = 74;
/// The lock is held elsewhere and was not acquired within `--wait`: `EX_TEMPFAIL`, "try
/// again later", which is exactly what a skipped cron run should say.
pub const EXIT_NOT_ACQUIRED: i32 = 75;
/// The command was found but could not be executed (as in sh and env).
pub const EXIT_CANNOT_EXECUTE: i32 = 126;
/// The command was not found (as in sh and env).
pub const EXIT_NOT_FOUND: i32 = 127;

/// Environment variables that carry `redlockd lock`'s own credentials; the command does
/// not get them unless [`LockCommand::inherit_credentials`] is set.
pub const CREDENTIAL_VARS: [&str; 2] = ["REDLOCKD_PASSWORD", "REDLOCKD_NODES"];

/// Smallest TTL the command accepts: below it the watchdog's ttl/3 cadence and the
/// per-node timeouts leave no useful validity.
const MIN_TTL: Duration = Duration::from_millis(10);

/// How long to wait for the command's processes to disappear after SIGKILL (they only
/// outlive it in uninterruptible sleep, e.g. on a hung NFS mount).
const KILL_WAIT: Duration = Duration::from_secs(5);

/// `redlockd lock [OPTIONS] NAME -- COMMAND [ARGS]...`: acquire NAME on a majority of
/// the nodes, run COMMAND while a watchdog keeps the lock alive, release it when the
/// command ends, and exit with the command's status.
///
/// NAME is used as the key on every node, unchanged (the key is only ever set with NX
/// and deleted by compare-and-delete, so it cannot clobber other data).
///
/// The command runs in a session (and process group) of its own: every signal
/// `redlockd lock` sends goes to the whole group, so the processes a shell script starts
/// are stopped with it. The lock is released only once no process of the group is left.
///
/// Exit codes:
/// - the command's own status; 128+N when it was killed by signal N;
/// - 64 (EX_USAGE): invalid arguments, or a setting the nodes refuse (a TTL above their
///   max-ttl);
/// - 69 (EX_UNAVAILABLE): not acquired because a majority of nodes could not be reached
///   (down, timed out, or answering errors such as `-TRYAGAIN` during a restart fence);
/// - 74 (EX_IOERR): the lock was lost while the command ran; the command's process
///   group was sent SIGTERM at once, then SIGKILL when the lock's validity ends or after
///   `--grace`, whichever comes first, and every process of it is gone;
/// - 75 (EX_TEMPFAIL): the lock is held elsewhere and was not acquired within `--wait`;
/// - 126 / 127: the command could not be executed / was not found.
///
/// A message on stderr explains every code that is not the command's own.
///
/// SIGTERM, SIGINT and SIGHUP sent to `redlockd lock` are forwarded to the command's
/// process group, and the lock is kept until it exits. On Linux the command's first
/// process also gets SIGTERM if `redlockd lock` itself dies (even by SIGKILL), since
/// nothing would keep the lock alive; its own children are not signalled then.
#[derive(Debug, Clone)]
pub struct LockCommand {
    /// Nodes, as host:port, or rediss://host:port for TLS (an odd number, 3 or 5, is
    /// usual). A URL may carry credentials: redis://user:password@host:port (they win
    /// over --user / --password).
    pub nodes: Vec<String>,
    /// CA certificates (PEM) that sign the rediss:// nodes' certificates [default: the
    /// system's trust store].
    pub tls_ca_cert_file: Option<PathBuf>,
    /// Client certificate (PEM) for nodes that require one (tls-auth-clients yes).
    pub tls_cert_file: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    pub tls_key_file: Option<PathBuf>,
    /// Lock TTL: how long the lock outlives a holder that dies without releasing it.
    /// The watchdog extends it every ttl/3.
    pub ttl: Duration,
    /// How long to keep retrying while the lock is held elsewhere. The default, 0, makes
    /// one attempt and gives up at once (cron: skip this run if another is running).
    pub wait: Duration,
    /// Longest time between SIGTERM and SIGKILL when the lock is lost while the command
    /// runs; never longer than the lock's validity left.
    pub grace: Duration,
    /// Per-node timeout of each request (default: the smaller of 50 ms and ttl/10).
    pub node_timeout: Option<Duration>,
    /// Password sent with AUTH to every node.
    pub password: Option<String>,
    /// A file whose first line is the password (`-`: the first line of stdin). Not
    /// together with `password`.
    pub password_file: Option<PathBuf>,
    /// ACL user to AUTH as on every node (with a password); default: the default user.
    pub user: Option<String>,
    /// Let the command inherit REDLOCKD_PASSWORD and REDLOCKD_NODES (removed from its
    /// environment otherwise).
    pub inherit_credentials: bool,
    /// Acquire with a fencing token (redlockd nodes only: FENCING.GRANT and
    /// FENCING.COMMIT) and pass it to the command as REDLOCKD_FENCING_TOKEN, to send with
    /// every write to the resource the lock protects.
    pub fencing_token: bool,
    /// Say on stderr when the lock is acquired, with its fencing token.
    pub verbose: bool,
    /// The lock's name (the key on every node).
    pub name: String,
    /// The command to run, and its arguments (after `--`).
    pub command: Vec<OsString>,
}

/// Runs `redlockd lock` and returns the process exit code (see [`LockCommand`]).
pub async fn run_lock_command(args: LockCommand) -> i32 {
    let name = args.name.clone();
    if args.ttl < MIN_TTL {
        return usage(&format!(
            "--ttl must be at least {} ms",
            MIN_TTL.as_millis()
        ));
    }
    if args.nodes.is_empty() {
        return usage("no nodes: give --nodes or set REDLOCKD_NODES");
    }
    let Some((program, rest)) = args.command.split_first() else {
        return usage("no command given");
    };
    let password = match (&args.password, &args.password_file) {
        (Some(_), Some(_)) => return usage("give --password or --password-file, not both"),
        (Some(p), None) => Some(p.clone()),
        (None, Some(path)) => match read_password(path) {
            Ok(p) => Some(p),
            Err(e) => return usage(&e),
        },
        (None, None) => None,
    };
    let opts = RedlockOptions {
        password,
        user: args.user.clone(),
        node_timeout: args.node_timeout,
        retry_count: 0,
        retry_delay: Duration::from_millis(50),
        retry_jitter: Duration::from_millis(100),
        fencing_tokens: args.fencing_token,
        tls: TlsOptions {
            ca_cert_file: args.tls_ca_cert_file.clone(),
            cert_file: args.tls_cert_file.clone(),
            key_file: args.tls_key_file.clone(),
        },
    };
    let redlock = match Redlock::new(args.nodes.iter().cloned(), opts) {
        Ok(r) => r,
        Err(e) => return usage(&e.to_string()),
    };

    // One attempt first: a setting every node refuses is reported at once, not after
    // --wait of retries that cannot succeed.
    let started = Instant::now();
    let mut acquired = redlock.try_acquire(name.as_bytes(), args.ttl).await;
    if let Err(e) = &acquired {
        let left = args.wait.saturating_sub(started.elapsed());
        if !left.is_zero() && refused_for_a_setting(e).is_none() {
            acquired = redlock
                .acquire_within(name.as_bytes(), args.ttl, left)
                .await;
        }
    }
    let lock = match acquired {
        Ok(lock) => lock,
        Err(e) => return not_taken(&name, args.ttl, &e),
    };
    let token = lock.token();
    if args.verbose {
        match token {
            Some(t) => eprintln!("redlockd lock: acquired {name:?}, fencing token {t}"),
            None => eprintln!("redlockd lock: acquired {name:?}"),
        }
    }
    let guard = redlock.watch(lock);

    let mut cmd = tokio::process::Command::new(program);
    cmd.args(rest);
    if !args.inherit_credentials {
        for var in CREDENTIAL_VARS {
            cmd.env_remove(var);
        }
    }
    if let Some(t) = token {
        cmd.env("REDLOCKD_FENCING_TOKEN", t.to_string());
    }
    // If this future is dropped (runtime shutdown), the command must not run on
    // unlocked: the child is killed here, its group by `GroupKill`.
    cmd.kill_on_drop(true);
    own_session_and_parent_death_signal(&mut cmd);
    // Before the command starts: a signal for it must never find us undefended.
    let mut forward = Forwarder::new();
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            guard.release().await;
            let code = if e.kind() == std::io::ErrorKind::NotFound {
                EXIT_NOT_FOUND
            } else {
                EXIT_CANNOT_EXECUTE
            };
            eprintln!(
                "redlockd lock: cannot run {:?}: {e}",
                program.to_string_lossy()
            );
            return code;
        }
    };
    // The command leads its own session: its pid is its process group's id.
    let mut group = GroupKill::new(child.id());

    let outcome = loop {
        tokio::select! {
            status = child.wait() => break Ok(status),
            _ = guard.lost() => break Err(()),
            sig = forward.recv() => group.signal(sig),
        }
    };

    let code = match outcome {
        Ok(status) => {
            // Processes the command left behind would run on unlocked once we release.
            if group.alive() {
                let kill_at = Instant::now() + args.grace.min(guard.lock().validity());
                eprintln!(
                    "redlockd lock: the command left processes running in its process \
                     group; stopping them before releasing the lock (SIGTERM, then SIGKILL \
                     after {} ms)",
                    kill_at
                        .saturating_duration_since(Instant::now())
                        .as_millis()
                );
                group.stop(&mut child, kill_at, Some(&guard)).await;
            } else {
                group.gone();
            }
            match status {
                Ok(st) => exit_code(st),
                Err(e) => {
                    eprintln!("redlockd lock: waiting for the command failed: {e}");
                    EXIT_CANNOT_EXECUTE
                }
            }
        }
        Err(()) => {
            // From here another client may take the lock once its keys expire; the
            // command must be gone by the end of the validity (the nodes keep the key
            // a little longer: the clock-drift allowance).
            let validity = guard
                .valid_until()
                .saturating_duration_since(Instant::now());
            let grace = args.grace.min(validity);
            let how = if grace.is_zero() {
                "SIGKILL now: the lock's validity has ended".to_string()
            } else if grace < args.grace {
                format!(
                    "SIGTERM now, SIGKILL in {} ms, when the lock's validity ends (--grace {} \
                     ms is longer)",
                    grace.as_millis(),
                    args.grace.as_millis()
                )
            } else {
                format!("SIGTERM now, SIGKILL in {} ms", grace.as_millis())
            };
            eprintln!(
                "redlockd lock: lost the lock {name:?} while the command ran; stopping its \
                 process group ({how})"
            );
            group.stop(&mut child, Instant::now() + grace, None).await;
            EXIT_LOCK_LOST
        }
    };
    // After a loss too, best effort: it may still be ours on some nodes.
    guard.release().await;
    code
}

fn usage(msg: &str) -> i32 {
    eprintln!("redlockd lock: {msg}");
    EXIT_USAGE
}

/// The password from `path`'s first line (`-`: stdin's first line, read byte by byte
/// so the command gets the rest of stdin).
fn read_password(path: &Path) -> Result<String, String> {
    let text = if path == Path::new("-") {
        read_stdin_line().map_err(|e| format!("--password-file -: cannot read stdin: {e}"))?
    } else {
        warn_if_others_can_read(path);
        std::fs::read_to_string(path)
            .map_err(|e| format!("--password-file {}: {e}", path.display()))?
    };
    let line = text.lines().next().unwrap_or("");
    if line.is_empty() {
        return Err(format!(
            "--password-file {}: the first line (the password) is empty",
            path.display()
        ));
    }
    Ok(line.to_string())
}

#[cfg(unix)]
fn read_stdin_line() -> std::io::Result<String> {
    use std::io::Read;
    use std::os::fd::FromRawFd;
    // SAFETY: fd 0 stays open for the process's life; ManuallyDrop never closes it.
    let mut stdin = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(0) });
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while line.len() < 64 * 1024 {
        match stdin.read(&mut byte) {
            Ok(0) => break,
            Ok(_) if byte[0] == b'\n' => break,
            Ok(_) => line.push(byte[0]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    String::from_utf8(line)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8"))
}

#[cfg(not(unix))]
fn read_stdin_line() -> std::io::Result<String> {
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    Ok(line.trim_end_matches(['\r', '\n']).to_string())
}

fn warn_if_others_can_read(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(path) {
            if meta.permissions().mode() & 0o077 != 0 {
                eprintln!(
                    "redlockd lock: warning: --password-file {} can be read by other users \
                     (chmod 600 it)",
                    path.display()
                );
            }
        }
    }
    #[cfg(not(unix))]
    let _ = path;
}

/// Why the lock was not taken, on stderr, and the exit code for it: a setting a majority
/// refuses (64) headlines its reason; "unreachable" (69) and "held elsewhere" (75) give
/// one line per distinct node failure.
fn not_taken(name: &str, ttl: Duration, e: &RedlockError) -> i32 {
    let last = match e {
        RedlockError::NotAcquired { last, .. } => Some(last),
        RedlockError::Timeout { last, .. } => last.as_ref(),
        RedlockError::Config(_) => {
            eprintln!("redlockd lock: lock {name:?} not taken, invalid arguments: {e}");
            return EXIT_USAGE;
        }
        _ => None,
    };
    let Some(last) = last else {
        eprintln!("redlockd lock: lock {name:?} is held elsewhere: {e}");
        return EXIT_NOT_ACQUIRED;
    };
    let waited = match e {
        RedlockError::Timeout {
            waited, attempts, ..
        } => format!(
            "waited {} ms ({attempts} attempt(s)); last: ",
            waited.as_millis()
        ),
        _ => String::new(),
    };
    let summary = format!(
        "{waited}{}/{} nodes granted (need {}), {} held elsewhere, {} failed",
        last.granted,
        last.nodes,
        majority(last.nodes),
        last.refused,
        last.failed.len()
    );
    let code = if let Some((count, reason)) = refused_for_a_setting(e) {
        eprintln!(
            "redlockd lock: lock {name:?} not taken: --ttl {} ms refused by {count} of {} \
             nodes: {reason}",
            ttl.as_millis(),
            last.nodes
        );
        eprintln!("redlockd lock: ({summary})");
        EXIT_USAGE
    } else if e.nodes_unavailable() {
        eprintln!("redlockd lock: lock {name:?} not taken, too few nodes reachable: {summary}");
        EXIT_UNAVAILABLE
    } else {
        eprintln!("redlockd lock: lock {name:?} is held elsewhere: {summary}");
        EXIT_NOT_ACQUIRED
    };
    for line in failure_lines(last) {
        eprintln!("redlockd lock:   {line}");
    }
    code
}

/// When so many nodes refuse the request for a setting (the TTL above their max-ttl)
/// that no majority is possible without changing it: how many, and the reason (the
/// error text without its `ERR` code).
fn refused_for_a_setting(e: &RedlockError) -> Option<(usize, String)> {
    let last = match e {
        RedlockError::NotAcquired { last, .. } => last,
        RedlockError::Timeout { last: Some(l), .. } => l,
        _ => return None,
    };
    let reasons: Vec<&str> = last
        .failed
        .iter()
        .filter_map(|(_, err)| match err {
            NodeError::Server(text) if is_setting_refusal(text) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let could_grant = last.nodes.saturating_sub(reasons.len());
    if reasons.is_empty() || could_grant >= majority(last.nodes) {
        return None;
    }
    let reason = reasons[0];
    let reason = reason.strip_prefix("ERR ").unwrap_or(reason);
    Some((reasons.len(), reason.to_string()))
}

/// The majority of `n` nodes (as the client counts it).
fn majority(n: usize) -> usize {
    n / 2 + 1
}

/// A node's error reply that refuses the TTL itself, not the moment: the max-ttl check
/// ("... above this server's max-ttl of N ms", with or without a hint after it) or
/// Redis's own "invalid expire time".
fn is_setting_refusal(text: &str) -> bool {
    text.contains("above this server's max-ttl") || text.starts_with("ERR invalid expire time")
}

/// One line per distinct failure reason: how many nodes, which, and the reason. Reasons
/// that differ only in numbers (the fence's "for another N ms") are one; the line shows
/// the largest numbers (the longest wait).
fn failure_lines(report: &AttemptReport) -> Vec<String> {
    struct Group<'a> {
        key: String,
        addrs: Vec<&'a str>,
        text: String,
        numbers: Vec<u64>,
    }
    let mut groups: Vec<Group<'_>> = Vec::new();
    for (addr, err) in &report.failed {
        let text = err.to_string();
        let key = without_numbers(&text);
        let numbers = numbers_in(&text);
        match groups.iter_mut().find(|g| g.key == key) {
            Some(g) => {
                g.addrs.push(addr);
                if numbers > g.numbers {
                    g.numbers = numbers;
                    g.text = text;
                }
            }
            None => groups.push(Group {
                key,
                addrs: vec![addr],
                text,
                numbers,
            }),
        }
    }
    groups
        .into_iter()
        .map(|g| {
            let nodes = if g.addrs.len() == 1 { "node" } else { "nodes" };
            format!(
                "{} {nodes} ({}): {}",
                g.addrs.len(),
                g.addrs.join(", "),
                g.text
            )
        })
        .collect()
}

fn without_numbers(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii_digit() {
            if !out.ends_with('#') {
                out.push('#');
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn numbers_in(text: &str) -> Vec<u64> {
    text.split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap_or(u64::MAX))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(failed: &[(&str, NodeError)]) -> AttemptReport {
        AttemptReport {
            nodes: 5,
            granted: 0,
            refused: 0,
            failed: failed
                .iter()
                .map(|(a, e)| (a.to_string(), e.clone()))
                .collect(),
            expired: false,
        }
    }

    fn server(text: &str) -> NodeError {
        NodeError::Server(text.to_string())
    }

    #[test]
    fn a_fence_on_five_nodes_is_one_line_with_the_longest_wait() {
        let fence = |ms: u32| {
            server(&format!(
                "TRYAGAIN restart fence: this node restarted less than max-ttl ago and \
                 refuses writes for another {ms} ms"
            ))
        };
        let r = report(&[
            ("a:1", fence(29990)),
            ("a:2", fence(30000)),
            ("a:3", NodeError::Timeout),
            ("a:4", fence(29000)),
            ("a:5", NodeError::Timeout),
        ]);
        assert_eq!(
            failure_lines(&r),
            [
                "3 nodes (a:1, a:2, a:4): error reply: TRYAGAIN restart fence: this node \
                 restarted less than max-ttl ago and refuses writes for another 30000 ms",
                "2 nodes (a:3, a:5): timed out",
            ]
        );
    }

    #[test]
    fn a_ttl_above_max_ttl_on_a_majority_is_a_setting_in_both_wordings() {
        let today = "ERR TTL of 60000 ms is above this server's max-ttl of 30000 ms";
        let hinted =
            "ERR TTL of 60000 ms is above this server's max-ttl of 30000 ms (raise --max-ttl)";
        for text in [today, hinted, "ERR invalid expire time in 'set' command"] {
            let e = RedlockError::NotAcquired {
                attempts: 1,
                last: report(&[
                    ("a:1", server(text)),
                    ("a:2", server(text)),
                    ("a:3", server(text)),
                    ("a:4", NodeError::Timeout),
                ]),
            };
            let (count, reason) = refused_for_a_setting(&e).expect("a setting");
            assert_eq!(count, 3);
            assert_eq!(reason, text.strip_prefix("ERR ").unwrap());
        }
        // Two of five refusing leaves a majority possible: not a setting problem.
        let e = RedlockError::NotAcquired {
            attempts: 1,
            last: report(&[("a:1", server(today)), ("a:2", server(today))]),
        };
        assert_eq!(refused_for_a_setting(&e), None);
        // The fence's text names max-ttl too, but is about the moment, not the TTL.
        let fence = "TRYAGAIN restart fence: this node restarted less than max-ttl ago and refuses writes for another 5 ms";
        let e = RedlockError::NotAcquired {
            attempts: 1,
            last: report(&[
                ("a:1", server(fence)),
                ("a:2", server(fence)),
                ("a:3", server(fence)),
            ]),
        };
        assert_eq!(refused_for_a_setting(&e), None);
    }
}
