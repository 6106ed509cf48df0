//! `redlockd lock`: a distributed flock(1). Holds a Redlock while a command runs, so a
//! job (typically from cron on several machines) never runs twice at once.

use std::ffi::OsString;
use std::future::Future;
use std::process::ExitStatus;
use std::task::Poll;
use std::time::Duration;

use super::{Redlock, RedlockError, RedlockOptions, TlsOptions};

/// Bad arguments (no nodes, an invalid duration, a TTL too small): `EX_USAGE`.
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

/// Smallest TTL the command accepts: below it the watchdog's ttl/3 cadence and the
/// per-node timeouts leave no useful validity.
const MIN_TTL: Duration = Duration::from_millis(10);

/// `redlockd lock [OPTIONS] NAME -- COMMAND [ARGS]...`: acquire NAME on a majority of
/// the nodes, run COMMAND while a watchdog keeps the lock alive, release it when the
/// command ends, and exit with the command's status.
///
/// NAME is used as the key on every node, unchanged (the key is only ever set with NX
/// and deleted by compare-and-delete, so it cannot clobber other data).
///
/// Exit codes:
/// - the command's own status; 128+N when it was killed by signal N;
/// - 64 (EX_USAGE): invalid arguments;
/// - 69 (EX_UNAVAILABLE): not acquired because a majority of nodes could not be reached
///   (down, timed out, or answering errors such as `-TRYAGAIN` during a restart fence);
/// - 74 (EX_IOERR): the lock was lost while the command ran; the command was sent
///   SIGTERM, then SIGKILL after `--grace`;
/// - 75 (EX_TEMPFAIL): the lock is held elsewhere and was not acquired within `--wait`;
/// - 126 / 127: the command could not be executed / was not found.
///
/// A message on stderr explains every code that is not the command's own.
///
/// SIGTERM, SIGINT and SIGHUP sent to `redlockd lock` are forwarded to the command,
/// and the lock is kept until it exits. On Linux the command also gets SIGTERM if
/// `redlockd lock` itself dies (even by SIGKILL), since nothing would keep the lock alive.
#[derive(Debug, Clone)]
pub struct LockCommand {
    /// Nodes, as a comma-separated list of host:port, or rediss://host:port for TLS (an
    /// odd number, 3 or 5, is usual). A URL may carry credentials:
    /// redis://user:password@host:port (they win over --user / --password).
    pub nodes: Vec<String>,
    /// CA certificates (PEM) that sign the rediss:// nodes' certificates [default: the
    /// system's trust store].
    pub tls_ca_cert_file: Option<std::path::PathBuf>,
    /// Client certificate (PEM) for nodes that require one (tls-auth-clients yes).
    pub tls_cert_file: Option<std::path::PathBuf>,
    /// The client certificate's private key (PEM).
    pub tls_key_file: Option<std::path::PathBuf>,
    /// Lock TTL: how long the lock outlives a holder that dies without releasing it.
    /// The watchdog extends it every ttl/3. Milliseconds, or with ms/s/m/h.
    pub ttl: Duration,
    /// How long to keep retrying while the lock is held elsewhere. The default, 0, makes
    /// one attempt and gives up at once (cron: skip this run if another is running).
    pub wait: Duration,
    /// Time between SIGTERM and SIGKILL when the lock is lost while the command runs.
    pub grace: Duration,
    /// Per-node timeout of each request (default: the smaller of 50 ms and ttl/10).
    pub node_timeout: Option<Duration>,
    /// Password sent with AUTH to every node (prefer the environment variable: a flag is
    /// visible in ps).
    pub password: Option<String>,
    /// ACL user to AUTH as on every node (with --password); default: the default user.
    pub user: Option<String>,
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
    let Some((program, rest)) = args.command.split_first() else {
        return usage("no command given");
    };
    let opts = RedlockOptions {
        password: args.password.clone(),
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

    let acquired = if args.wait.is_zero() {
        redlock.try_acquire(name.as_bytes(), args.ttl).await
    } else {
        redlock
            .acquire_within(name.as_bytes(), args.ttl, args.wait)
            .await
    };
    let lock = match acquired {
        Ok(lock) => lock,
        Err(e) => {
            let code = if matches!(e, RedlockError::Config(_)) {
                EXIT_USAGE
            } else if e.nodes_unavailable() {
                EXIT_UNAVAILABLE
            } else {
                EXIT_NOT_ACQUIRED
            };
            let why = match code {
                EXIT_UNAVAILABLE => "not taken, too few nodes reachable",
                EXIT_USAGE => "not taken, invalid arguments",
                _ => "is held elsewhere",
            };
            eprintln!("redlockd lock: lock {name:?} {why}: {e}");
            return code;
        }
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
    if let Some(t) = token {
        cmd.env("REDLOCKD_FENCING_TOKEN", t.to_string());
    }
    // If this future is dropped (runtime shutdown), the child must not run on unlocked.
    cmd.kill_on_drop(true);
    stop_child_when_parent_dies(&mut cmd);
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
    let pid = child.id();
    let mut forward = Forwarder::new();

    let outcome = loop {
        tokio::select! {
            status = child.wait() => break Ok(status),
            _ = guard.lost() => break Err(()),
            sig = forward.recv() => send_signal(pid, sig),
        }
    };

    match outcome {
        Ok(status) => {
            guard.release().await;
            match status {
                Ok(st) => exit_code(st),
                Err(e) => {
                    eprintln!("redlockd lock: waiting for the command failed: {e}");
                    EXIT_CANNOT_EXECUTE
                }
            }
        }
        Err(()) => {
            eprintln!(
                "redlockd lock: lost the lock {name:?} while the command ran; stopping it \
                 (SIGTERM, then SIGKILL after {} ms)",
                args.grace.as_millis()
            );
            send_signal(pid, SIGTERM);
            if tokio::time::timeout(args.grace, child.wait())
                .await
                .is_err()
            {
                let _ = child.start_kill();
                let _ = child.wait().await;
            }
            // Best effort: it may still be ours on some nodes.
            guard.release().await;
            EXIT_LOCK_LOST
        }
    }
}

fn usage(msg: &str) -> i32 {
    eprintln!("redlockd lock: {msg}");
    EXIT_USAGE
}

/// The command's exit status as our own: its code, or 128+N for signal N (as shells do).
fn exit_code(status: ExitStatus) -> i32 {
    if let Some(code) = status.code() {
        return code;
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            return 128 + sig;
        }
    }
    EXIT_CANNOT_EXECUTE
}

#[cfg(unix)]
const SIGTERM: i32 = libc::SIGTERM;
#[cfg(not(unix))]
const SIGTERM: i32 = 15;

/// Sends `sig` to the child. The pid cannot have been reused: the child is not reaped
/// until `wait` returns, and we only signal before that.
fn send_signal(pid: Option<u32>, sig: i32) {
    #[cfg(unix)]
    if let Some(pid) = pid.and_then(|p| libc::pid_t::try_from(p).ok()) {
        // SAFETY: kill(2) has no memory-safety preconditions.
        unsafe {
            libc::kill(pid, sig);
        }
    }
    #[cfg(not(unix))]
    let _ = (pid, sig);
}

/// Linux: the child gets SIGTERM when we die, even by SIGKILL, because nothing would
/// keep its lock alive any more. (PR_SET_PDEATHSIG follows the thread that spawned the
/// child; tokio's worker and block_on threads live as long as the runtime.)
fn stop_child_when_parent_dies(cmd: &mut tokio::process::Command) {
    #[cfg(target_os = "linux")]
    {
        let parent = std::process::id();
        // SAFETY: the closure runs between fork and exec and only makes async-signal-safe
        // system calls (prctl, getppid, kill), allocating nothing.
        unsafe {
            cmd.pre_exec(move || {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                // The parent may have died before prctl: then we were reparented.
                if libc::getppid() as u32 != parent {
                    libc::kill(libc::getpid(), libc::SIGTERM);
                }
                Ok(())
            });
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cmd;
}

/// Signals we pass on to the command instead of dying from them: dying would leave the
/// command running with nobody extending its lock.
struct Forwarder {
    #[cfg(unix)]
    streams: Vec<(tokio::signal::unix::Signal, i32)>,
}

impl Forwarder {
    fn new() -> Forwarder {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let mut streams = Vec::new();
            for (kind, num) in [
                (SignalKind::terminate(), libc::SIGTERM),
                (SignalKind::interrupt(), libc::SIGINT),
                (SignalKind::hangup(), libc::SIGHUP),
            ] {
                if let Ok(s) = signal(kind) {
                    streams.push((s, num));
                }
            }
            Forwarder { streams }
        }
        #[cfg(not(unix))]
        Forwarder {}
    }

    /// The next signal received (never completes if none can be received).
    fn recv(&mut self) -> impl Future<Output = i32> + '_ {
        std::future::poll_fn(move |cx| {
            #[cfg(unix)]
            for (stream, num) in self.streams.iter_mut() {
                if let Poll::Ready(Some(())) = stream.poll_recv(cx) {
                    return Poll::Ready(*num);
                }
            }
            #[cfg(not(unix))]
            let _ = cx;
            Poll::Pending
        })
    }
}
