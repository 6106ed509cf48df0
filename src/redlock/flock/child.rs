//! The command `redlockd lock` runs: its own session and process group, the signals
//! passed on to it, and how its whole group is stopped and known to be gone.

use std::future::Future;
use std::process::ExitStatus;
use std::task::Poll;
use std::time::Duration;

use tokio::time::Instant;

use super::{EXIT_CANNOT_EXECUTE, KILL_WAIT};
use crate::redlock::WatchedLock;
/// The command's exit status as our own: its code, or 128+N for signal N (as shells do).
pub(super) fn exit_code(status: ExitStatus) -> i32 {
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
#[cfg(unix)]
const SIGKILL: i32 = libc::SIGKILL;
#[cfg(not(unix))]
const SIGKILL: i32 = 9;

/// The command's process group: signals go to all of it, and it is SIGKILLed if
/// `redlockd lock` unwinds before the group is known to be gone.
pub(super) struct GroupKill {
    pgid: Option<i32>,
}

impl GroupKill {
    pub(super) fn new(pid: Option<u32>) -> GroupKill {
        GroupKill {
            pgid: pid.and_then(|p| i32::try_from(p).ok()).filter(|p| *p > 0),
        }
    }

    /// Sends `sig` to every process of the group. The group's id cannot name another
    /// group: it stays in use while the leader is unreaped or any member lives.
    pub(super) fn signal(&self, sig: i32) {
        #[cfg(unix)]
        if let Some(pgid) = self.pgid {
            // SAFETY: kill(2) has no memory-safety preconditions.
            unsafe {
                libc::kill(-pgid, sig);
            }
        }
        #[cfg(not(unix))]
        let _ = sig;
    }

    /// Whether any process of the group is still running (zombies waiting for their
    /// parent to reap them do not count: they run nothing).
    pub(super) fn alive(&self) -> bool {
        let Some(pgid) = self.pgid else {
            return false;
        };
        #[cfg(unix)]
        {
            // SAFETY: kill(2) with signal 0 only checks existence and permission.
            let r = unsafe { libc::kill(-pgid, 0) };
            if r != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) {
                return false;
            }
            #[cfg(target_os = "linux")]
            {
                running_in_group(pgid)
            }
            #[cfg(not(target_os = "linux"))]
            true
        }
        #[cfg(not(unix))]
        {
            let _ = pgid;
            false
        }
    }

    /// The group is known to be gone: nothing to signal on drop.
    pub(super) fn gone(&mut self) {
        self.pgid = None;
    }

    /// Stops the whole group: SIGTERM now, SIGKILL at `kill_at` (at once if that has
    /// passed) unless every process is gone by then, and waits (bounded) until none is
    /// left and the command's first process is reaped. With `guard`, gives up early
    /// (straight to SIGKILL) if the lock is lost meanwhile.
    pub(super) async fn stop(
        &mut self,
        child: &mut tokio::process::Child,
        kill_at: Instant,
        guard: Option<&WatchedLock>,
    ) {
        let mut reaped = false;
        if Instant::now() < kill_at {
            self.signal(SIGTERM);
            loop {
                if reaped && !self.alive() {
                    self.pgid = None;
                    return;
                }
                tokio::select! {
                    _ = child.wait(), if !reaped => reaped = true,
                    // Only the last of the group's processes is polled for.
                    _ = tokio::time::sleep(Duration::from_millis(10)) => {}
                    _ = tokio::time::sleep_until(kill_at) => break,
                    _ = lost_or_never(guard) => break,
                }
            }
        }
        self.signal(SIGKILL);
        let until = Instant::now() + KILL_WAIT;
        if !reaped {
            let _ = tokio::time::timeout(KILL_WAIT, child.wait()).await;
        }
        while self.alive() {
            if Instant::now() >= until {
                eprintln!(
                    "redlockd lock: warning: processes of the command's group outlived \
                     SIGKILL by {} ms",
                    KILL_WAIT.as_millis()
                );
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        self.pgid = None;
    }
}

async fn lost_or_never(guard: Option<&WatchedLock>) {
    match guard {
        Some(g) => g.lost().await,
        None => std::future::pending().await,
    }
}

impl Drop for GroupKill {
    fn drop(&mut self) {
        self.signal(SIGKILL);
    }
}

/// Linux: whether a process of group `pgid` is running (not a zombie), from /proc.
#[cfg(target_os = "linux")]
fn running_in_group(pgid: i32) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return true;
    };
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
        let Some((_, after)) = stat.rsplit_once(')') else {
            continue;
        };
        let mut fields = after.split_ascii_whitespace();
        let state = fields.next().unwrap_or("");
        let group = fields.nth(1).and_then(|g| g.parse::<i32>().ok());
        if group == Some(pgid) && state != "Z" && state != "X" {
            return true;
        }
    }
    false
}

/// The command leads a new session (so a new process group: every signal reaches what
/// it starts). Linux: its first process also gets SIGTERM when we die, even by SIGKILL,
/// because nothing would keep its lock alive any more. (PR_SET_PDEATHSIG follows the
/// thread that spawned the child; tokio's worker and block_on threads live as long as
/// the runtime.)
pub(super) fn own_session_and_parent_death_signal(cmd: &mut tokio::process::Command) {
    #[cfg(unix)]
    {
        #[cfg(target_os = "linux")]
        let parent = std::process::id();
        // SAFETY: the closure runs between fork and exec and only makes async-signal-safe
        // system calls (setsid, prctl, getppid, kill), allocating nothing.
        unsafe {
            cmd.pre_exec(move || {
                // A new session: no controlling terminal, so the command never stops on
                // SIGTTIN/SIGTTOU for being a background group at a terminal; a
                // terminal's Ctrl-C reaches it through our forwarding.
                if libc::setsid() == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                #[cfg(target_os = "linux")]
                {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                    // The parent may have died before prctl: then we were reparented.
                    if libc::getppid() as u32 != parent {
                        libc::kill(libc::getpid(), libc::SIGTERM);
                    }
                }
                Ok(())
            });
        }
    }
    #[cfg(not(unix))]
    let _ = cmd;
}

/// Signals we pass on to the command instead of dying from them: dying would leave the
/// command running with nobody extending its lock.
pub(super) struct Forwarder {
    #[cfg(unix)]
    streams: Vec<(tokio::signal::unix::Signal, i32)>,
}

impl Forwarder {
    pub(super) fn new() -> Forwarder {
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
    pub(super) fn recv(&mut self) -> impl Future<Output = i32> + '_ {
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
