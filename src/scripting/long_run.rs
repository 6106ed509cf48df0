//! How a script that runs long gives the async runtime back (kept apart from the Lua
//! hook itself, which also enforces SCRIPT KILL).
//!
//! Scripts run inline, on the async worker that read their request: most take a few
//! microseconds, and handing every one to another thread (`block_in_place` per call)
//! cost more than the script itself. Running inline is safe only
//! if a script that keeps its worker cannot freeze the rest of the server. Two tokio
//! facts made the first inline attempt hang, whole or in part:
//!
//! 1. Nobody drives I/O. The worker that runs the script was usually the one parked on
//!    tokio's I/O driver (epoll, timers, signals) when the request arrived. Tokio wakes
//!    a sibling worker only when the waking worker has more than one task queued, so the
//!    sibling stays parked on its condvar: no socket is read, no timer fires, SIGTERM is
//!    never seen while the script spins.
//! 2. The LIFO slot. A task that a worker thread wakes while it holds its worker's
//!    "core" goes into that core's LIFO slot, which no other worker may steal: only the
//!    owner runs it, when its current task returns. A script that woke the clients
//!    waiting for the keyspace gate (to answer BUSY) put them there, behind itself, so
//!    they waited for the very script they were to report. `block_in_place` moves the
//!    LIFO task into the stealable queue and hands the core to a new thread; but when it
//!    returns before that thread has started, it takes the core back, and from then on
//!    every wake from the script lands in the LIFO slot again. The first attempt proved
//!    the hand-over with a probe task, which a sibling worker could run just as well:
//!    under load, 1 run in 12 kept the core and a SIGTERM test hung.
//!
//! The fixes, one per cause:
//! - `watch` (a thread per server, `Scripts::watch`) sees a script that has run past
//!   `LEAVE_AFTER` and spawns an empty task from outside the runtime: tokio then wakes a
//!   parked worker, which takes the I/O driver when it next parks. This covers a script
//!   stuck in one C call (no hook runs there) and the first millisecond of every script.
//!   It needs a second worker, and is started only where there is one. With one (`--threads 1`, the default on two cores), a
//!   script stuck in one C call holds all I/O until the call returns, as Redis does;
//!   the calls that run long without the hook (the pattern matcher calls it) are
//!   bounded by the script's memory limit.
//! - `tick` (from the hook), past `LEAVE_AFTER`, leaves the worker: `block_in_place`
//!   offers the core to another thread, then a probe task is spawned from this thread.
//!   If this thread still held a core, the probe would sit in its unstealable LIFO slot
//!   and could not run before the next hook; so a probe that ran proves the core is
//!   gone. Until then every hook offers the core again. Wakes the hook itself makes
//!   (BUSY) are made from inside `block_in_place`, with no core, so they go to the
//!   shared queue whatever the state.

use super::engine::RunSlot;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How long a script may keep its worker before it gives the runtime back.
pub(crate) const LEAVE_AFTER: Duration = Duration::from_millis(1);

/// Bound on waiting, inside `block_in_place`, for the new thread to take the core.
const HANDOVER_WAIT: Duration = Duration::from_millis(1);

/// A run's progress in leaving its worker (in `Running`).
#[derive(Default)]
pub(crate) struct Leaving {
    /// `clock::mono_ns` at the start (the command's own reading: no clock read more).
    started_ns: u64,
    /// Set once a probe spawned after a hand-over has run: this thread has no core.
    left: AtomicBool,
    probe: parking_lot::Mutex<Option<Arc<AtomicBool>>>,
}

impl Leaving {
    /// A run that started at `started_ns` (`clock::mono_ns`).
    pub(crate) fn new(started_ns: u64) -> Leaving {
        Leaving {
            started_ns,
            ..Leaving::default()
        }
    }

    /// Real time the run has lasted.
    pub(crate) fn elapsed(&self) -> Duration {
        Duration::from_nanos(crate::clock::mono_ns().saturating_sub(self.started_ns))
    }
}

/// Called by the hook every `HOOK_EVERY` instructions while a script runs. Past
/// `LEAVE_AFTER` it leaves the async worker; once the script passes
/// `--busy-script-time`, clients waiting for the keyspace gate are woken so they answer
/// BUSY at once.
pub(super) fn tick(slot: &RunSlot) {
    let run = &slot.run;
    if run.leaving.elapsed() >= LEAVE_AFTER {
        leave_worker(&run.leaving);
    }
    // SAFETY: see `RunSlot::ctx`: the hook runs inside the run that set the pointer,
    // on its thread; only the shared server state is read.
    let shared = unsafe { (*slot.ctx).shared };
    if run.check_slow(&shared.clock) {
        without_core(|| crate::commands::exec::gate::script_turned_busy(shared));
    }
}

/// The runtime's handle if this thread is in a multi-thread runtime (elsewhere, in the
/// in-memory session or a current-thread runtime, there is no worker to leave).
fn multi_thread() -> Option<tokio::runtime::Handle> {
    let handle = tokio::runtime::Handle::try_current().ok()?;
    (handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread).then_some(handle)
}

/// Runs `f` holding no worker core, so the tasks it wakes go to the shared queue.
fn without_core(f: impl FnOnce()) {
    if multi_thread().is_some() {
        tokio::task::block_in_place(f)
    } else {
        f()
    }
}

/// One step of leaving the worker (see the module comment): done once a probe spawned
/// after a hand-over has run; else offer the core again and send a new probe.
fn leave_worker(leaving: &Leaving) {
    if leaving.left.load(Ordering::Relaxed) {
        return;
    }
    let Some(runtime) = multi_thread() else {
        leaving.left.store(true, Ordering::Relaxed);
        return;
    };
    let mut probe = leaving.probe.lock();
    if probe
        .as_ref()
        .is_some_and(|ran| ran.load(Ordering::Acquire))
    {
        leaving.left.store(true, Ordering::Relaxed);
        return;
    }
    tokio::task::block_in_place(|| {
        // Give the new thread a moment to take the core before this returns (returning
        // first takes it back). A probe spawned here, with no core, may run on any
        // worker, so it only bounds the wait; it proves nothing.
        let (ran, wait) = std::sync::mpsc::sync_channel::<()>(1);
        runtime.spawn(async move {
            let _ = ran.send(());
        });
        let _ = wait.recv_timeout(HANDOVER_WAIT);
    });
    let ran = Arc::new(AtomicBool::new(false));
    let flag = ran.clone();
    runtime.spawn(async move { flag.store(true, Ordering::Release) });
    *probe = Some(ran);
}

/// Starts `watch` for a server on a multi-thread runtime with more than one worker.
/// With one worker (or a current-thread runtime) there is no parked worker for its
/// nudge to wake: the script holds the only one, and the hook's `tick` is what hands
/// the core over. The watcher would only cost a wake-up a millisecond (measured: ~1% of
/// the server's CPU under EVALSHA load, and the context switches it forces).
pub(crate) fn spawn_watch(shared: &Arc<crate::node::Shared>) -> std::io::Result<()> {
    let Some(runtime) = multi_thread() else {
        return Ok(());
    };
    if runtime.metrics().num_workers() < 2 {
        return Ok(());
    }
    let weak = Arc::downgrade(shared);
    std::thread::Builder::new()
        .name("redlockd-scripts".into())
        .spawn(move || watch(weak, runtime))?;
    Ok(())
}

/// The per-server watcher: every `LEAVE_AFTER` (every 20 ms while no script has run
/// for a second), if one script run has lasted past `LEAVE_AFTER`, spawns an empty task
/// from outside the runtime so that a parked worker wakes and drives I/O (cause 1 in
/// the module comment). Ends with the server.
fn watch(shared: std::sync::Weak<crate::node::Shared>, runtime: tokio::runtime::Handle) {
    let mut idle_polls = 0u32;
    let mut last_tick = u64::MAX;
    // The run (`Running::run`) nudged last.
    let mut nudged = None;
    loop {
        let pause = if idle_polls > 1000 {
            Duration::from_millis(20)
        } else {
            LEAVE_AFTER
        };
        std::thread::sleep(pause);
        let Some(shared) = shared.upgrade() else {
            return;
        };
        if shared.shutting_down.load(Ordering::SeqCst) {
            return;
        }
        let scripts = &shared.scripts;
        let tick = scripts.tick.load(Ordering::Relaxed);
        idle_polls = if tick == last_tick { idle_polls + 1 } else { 0 };
        last_tick = tick;
        let Some((run, started_ns)) = scripts
            .running
            .lock()
            .as_ref()
            .map(|r| (r.run, r.started_ns))
        else {
            nudged = None;
            continue;
        };
        idle_polls = 0;
        let ran = Duration::from_nanos(crate::clock::mono_ns().saturating_sub(started_ns));
        if nudged != Some(run) && ran >= LEAVE_AFTER {
            runtime.spawn(async {});
            nudged = Some(run);
        }
    }
}
