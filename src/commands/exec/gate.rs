//! Atomicity: the keyspace gate, and the only code that takes it.
//!
//! # Design
//!
//! Single-key commands are atomic by themselves: each touches one shard of the
//! keyspace under its lock. What must be atomic against *every* other command runs
//! holding the gate exclusively: scripts (EVAL...), EXEC, and the few commands flagged EXCLUSIVE in the
//! table (MSET, RENAME, LMOVE, FLUSHDB...). Every other command holds it shared, so
//! ordinary commands run in parallel on all workers and never see half of a script or
//! of a transaction. This is what Redis gets from its single thread (script.c,
//! multi.c); here it is one reader-writer gate.
//!
//! The gate is an atomic word (readers count, EXCLUSIVE, PENDING) and not a lock with
//! a blocking wait, because it is taken on tokio's async workers: a command that finds
//! it held waits *asynchronously* (its task parks, the worker serves other
//! connections), and no worker thread ever sleeps waiting for it. Taking it
//! uncontended is one compare-and-swap, as a parking_lot read lock was.
//!
//! - Shared: allowed while no writer holds or awaits the gate.
//! - Exclusive: a writer first claims PENDING (new readers then wait, so a stream of
//!   commands cannot starve a script), waits for the readers inside to leave (each is
//!   one short command that never awaits while holding the gate), then holds it.
//! - A waiter gives up with BUSY once the script holding the gate has run past
//!   `--busy-script-time`; the script's instruction hook wakes waiters when that
//!   happens, so BUSY needs no timer. Only SCRIPT KILL, SHUTDOWN, QUIT, RESET and the
//!   transaction commands (MULTI, DISCARD, WATCH, UNWATCH) skip the gate, as Redis
//!   lets them through during a busy script (`ALLOW_BUSY`).
//!
//! Transactions (multi.rs) queue commands in the client and run them at EXEC under
//! the exclusive gate, through the same `commands::run` the network and Lua use.
//! WATCH is tracked in the store (`store::watch`): every write path touches its key.

use crate::commands::{run as run_spec, Ctx, Spec};

use crate::node::Shared;
use crate::protocol::Reply;
use bytes::Bytes;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::Notify;

use crate::commands::command_table::flags;

/// The gate's state word: bit 63 EXCLUSIVE, bit 62 PENDING, low bits readers inside.
const EXCLUSIVE: usize = 1 << (usize::BITS - 1);
const PENDING: usize = 1 << (usize::BITS - 2);

/// Longest a waiter sleeps without looking whether the script holding the gate has
/// turned busy (see `Gate::wait_for`).
const BUSY_RECHECK: Duration = Duration::from_millis(20);

/// The keyspace gate. Its methods are private: other rooms go through this module's
/// functions, which decide how each command takes it.
pub struct Gate {
    state: AtomicUsize,
    /// Tasks waiting in `wait_for` (so a release skips waking when nobody waits).
    waiting: AtomicUsize,
    /// Woken when an exclusive hold ends (and when a script turns busy).
    released: Notify,
    /// Woken when the last reader leaves while a writer is PENDING.
    drained: Notify,
}

impl Default for Gate {
    fn default() -> Self {
        Gate::new()
    }
}

impl Gate {
    pub(crate) fn new() -> Gate {
        Gate {
            state: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
            released: Notify::new(),
            drained: Notify::new(),
        }
    }

    fn try_shared(&self) -> Option<SharedHold<'_>> {
        let mut s = self.state.load(Ordering::Relaxed);
        loop {
            if s & (EXCLUSIVE | PENDING) != 0 {
                return None;
            }
            match self
                .state
                .compare_exchange_weak(s, s + 1, Ordering::SeqCst, Ordering::Relaxed)
            {
                Ok(_) => return Some(SharedHold(self)),
                Err(now) => s = now,
            }
        }
    }

    fn try_exclusive(&self) -> Option<ExclusiveHold<'_>> {
        self.state
            .compare_exchange(0, EXCLUSIVE, Ordering::SeqCst, Ordering::Relaxed)
            .ok()
            .map(|_| ExclusiveHold(self))
    }

    /// Claims the next exclusive turn (no writer holds or awaits the gate), readers
    /// may still be inside.
    fn try_claim(&self) -> Option<PendingClaim<'_>> {
        let mut s = self.state.load(Ordering::SeqCst);
        loop {
            if s & (EXCLUSIVE | PENDING) != 0 {
                return None;
            }
            match self.state.compare_exchange_weak(
                s,
                s | PENDING,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => {
                    return Some(PendingClaim {
                        gate: self,
                        taken: false,
                    })
                }
                Err(now) => s = now,
            }
        }
    }

    /// Waits until `attempt` succeeds, or gives up with BUSY once a script has run
    /// past its limit. Never blocks the thread: the task parks on `released`.
    async fn wait_for<T>(
        &self,
        shared: &Shared,
        mut attempt: impl FnMut() -> Option<T>,
    ) -> Result<T, Reply> {
        loop {
            let _waiting = Waiting::new(&self.waiting);
            let released = self.released.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            if let Some(got) = attempt() {
                return Ok(got);
            }
            // Bounded by a timer too: the script may be about to start, or stuck in one
            // long C call, and then no hook wakes us when it turns busy. On a manual
            // clock the ms do not pass by themselves: look again every BUSY_RECHECK.
            let wait = match shared.scripts.ms_until_busy(shared.clock.now_ms()) {
                Some(0) => return Err(shared.scripts.busy_reply()),
                Some(ms) => Duration::from_millis(ms).min(BUSY_RECHECK),
                None => BUSY_RECHECK,
            };
            let _ = tokio::time::timeout(wait, released).await;
        }
    }

    async fn shared(&self, shared: &Shared) -> Result<SharedHold<'_>, Reply> {
        if let Some(hold) = self.try_shared() {
            return Ok(hold);
        }
        self.wait_for(shared, || self.try_shared()).await
    }

    async fn exclusive(&self, shared: &Shared) -> Result<ExclusiveHold<'_>, Reply> {
        if let Some(hold) = self.try_exclusive() {
            return Ok(hold);
        }
        let mut claim = self.wait_for(shared, || self.try_claim()).await?;
        // Readers inside finish their one command each; the last one out wakes us.
        loop {
            let drained = self.drained.notified();
            tokio::pin!(drained);
            drained.as_mut().enable();
            if let Some(hold) = claim.try_take() {
                return Ok(hold);
            }
            drained.await;
        }
    }

    /// Wakes every waiter so it looks again (a release, or a script turning busy).
    fn wake_waiters(&self) {
        if self.waiting.load(Ordering::SeqCst) > 0 {
            self.released.notify_waiters();
        }
    }
}

/// Counts a waiter for as long as it waits (also if its future is dropped).
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn new(count: &'a AtomicUsize) -> Waiting<'a> {
        count.fetch_add(1, Ordering::SeqCst);
        Waiting(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The gate held shared; released on drop.
pub struct SharedHold<'a>(&'a Gate);

impl Drop for SharedHold<'_> {
    fn drop(&mut self) {
        let before = self.0.state.fetch_sub(1, Ordering::SeqCst);
        if before == PENDING | 1 {
            self.0.drained.notify_one();
        }
    }
}

/// The gate held exclusively; released on drop.
struct ExclusiveHold<'a>(&'a Gate);

impl Drop for ExclusiveHold<'_> {
    fn drop(&mut self) {
        self.0.state.fetch_and(!EXCLUSIVE, Ordering::SeqCst);
        self.0.wake_waiters();
    }
}

/// A writer's claimed turn while readers drain. Dropped before it became a hold (the
/// waiting task went away), it gives the turn back.
struct PendingClaim<'a> {
    gate: &'a Gate,
    taken: bool,
}

impl<'a> PendingClaim<'a> {
    fn try_take(&mut self) -> Option<ExclusiveHold<'a>> {
        self.gate
            .state
            .compare_exchange(PENDING, EXCLUSIVE, Ordering::SeqCst, Ordering::SeqCst)
            .ok()?;
        self.taken = true;
        Some(ExclusiveHold(self.gate))
    }
}

impl Drop for PendingClaim<'_> {
    fn drop(&mut self) {
        if !self.taken {
            self.gate.state.fetch_and(!PENDING, Ordering::SeqCst);
            self.gate.wake_waiters();
        }
    }
}

/// Runs one network command under the gate as its flags ask: EXCLUSIVE commands (and
/// EXEC, scripts) hold it exclusively, ALLOW_BUSY commands skip it, the rest hold it
/// shared. Returns `Err` with BUSY when it waited on a script past its limit.
pub async fn run(ctx: &mut Ctx<'_>, spec: &'static Spec, args: &[Bytes]) -> Result<Reply, Reply> {
    let shared = ctx.shared;
    if spec.allows_busy(args) {
        ctx.restart_clock();
        return Ok(run_spec(ctx, spec, args));
    }
    let gate = &shared.gate;
    let exclusive = spec.flags_of(args) & flags::EXCLUSIVE != 0;
    if exclusive && is_setmap(spec, args) {
        let plan = crate::commands::admin::cluster::plan_move(ctx, args)?;
        if plan.moves() {
            return run_move(ctx, args, plan).await;
        }
    }
    loop {
        if exclusive {
            let _exclusive = held(ctx, gate.try_exclusive(), || gate.exclusive(shared)).await?;
            if let Some(moved) = route_again(ctx, spec, args) {
                return Ok(moved);
            }
            if !waits_for_move(ctx, spec, args, true) {
                // Inline, with no thread hand-off: a script that runs long gives the
                // runtime back from its instruction hook (scripting/long_run.rs).
                return Ok(run_spec(ctx, spec, args));
            }
        } else {
            let _shared = held(ctx, gate.try_shared(), || gate.shared(shared)).await?;
            if let Some(moved) = route_again(ctx, spec, args) {
                return Ok(moved);
            }
            if !waits_for_move(ctx, spec, args, false) {
                return Ok(run_spec(ctx, spec, args));
            }
        }
        // A live move has this command's slot in flight (or the command may touch any
        // key): it waits, without the gate, then is routed again.
        Box::pin(shared.cluster.moving.wait()).await;
        ctx.restart_clock();
    }
}

fn is_setmap(spec: &Spec, args: &[Bytes]) -> bool {
    spec.name == "cluster"
        && args
            .get(1)
            .is_some_and(|a| a.eq_ignore_ascii_case(b"setmap"))
}

/// Whether a live move makes this command wait (`cluster::moving`).
fn waits_for_move(ctx: &Ctx<'_>, spec: &'static Spec, args: &[Bytes], exclusive: bool) -> bool {
    let moving = &ctx.shared.cluster.moving;
    if !moving.any() {
        return false;
    }
    if spec.name == "exec" {
        return ctx.client.multi.is_some();
    }
    moving.blocks(exclusive, spec.keys(args).map(|k| &k[..]))
}

/// `CLUSTER SETMAP` with a map that gives slots away (`cluster::migrate`), in steps,
/// so that only the moving slots pause (`cluster::moving`): the slots are marked and
/// the gate taken and dropped once (the commands already running on them finish,
/// later ones wait); the keys are sent without the gate; then, holding it
/// exclusively, the map is installed and pushed; the copies are dropped and the marks
/// cleared. Waiting commands are then routed again (`MOVED`).
async fn run_move(
    ctx: &mut Ctx<'_>,
    args: &[Bytes],
    plan: crate::commands::admin::cluster::MovePlan,
) -> Result<Reply, Reply> {
    use crate::commands::admin::cluster::{drop_moved, finish_move, send_moving};
    let shared = ctx.shared;
    let gate = &shared.gate;
    let in_flight = (shared.cluster.moving)
        .begin(&plan.slots())
        .map_err(|e| Reply::error(format!("ERR map refused: {e}")))?;
    let started = std::time::Instant::now();
    drop(held(ctx, gate.try_exclusive(), || gate.exclusive(shared)).await?);
    let sent = send_moving(ctx, args, &plan)?;
    let exclusive = held(ctx, gate.try_exclusive(), || gate.exclusive(shared)).await?;
    let reply = finish_move(ctx, args, &plan, sent, started);
    drop(exclusive);
    // Routed elsewhere now: the copies go with other slots' commands running; scripts
    // and EXEC (which may name no key) wait until they are gone.
    drop_moved(ctx, &plan);
    drop(in_flight);
    Ok(reply.unwrap_or_else(|e| e))
}

/// The cluster routing check again, now that the gate is held: a map that gives the
/// slot away is installed under the exclusive gate (CLUSTER SETMAP, a live move), and
/// may have been between `commands::check` and this hold (a command that waited while
/// its slot moved). Run anyway, it would write a key this node no longer serves, and
/// grant a lock the new owner knows nothing of. `None`: the command runs.
fn route_again(ctx: &mut Ctx<'_>, spec: &'static Spec, args: &[Bytes]) -> Option<Reply> {
    let cluster = &ctx.shared.cluster;
    if !cluster.enabled() {
        return None;
    }
    if spec.name == "exec" {
        let refused = cluster.route(ctx.client.multi.as_ref()?.keys()).err()?;
        super::multi::discard_now(ctx);
        return Some(refused.reply());
    }
    cluster
        .route(spec.keys(args).map(|k| &k[..]))
        .err()
        .map(|r| r.reply())
}

/// The gate's hold: `now` if it was free, else what `wait` gets. Uncontended (the
/// common case), the time `Ctx::new` read a moment ago stands: no second clock read.
/// After a wait, the command's time is read again. The wait's future (its timer and
/// notification) is boxed: inline, it would sit in every connection's task, idle ones
/// included, for a path taken only while a script or transaction holds the gate.
async fn held<H, F: std::future::Future<Output = Result<H, Reply>>>(
    ctx: &mut Ctx<'_>,
    now: Option<H>,
    wait: impl FnOnce() -> F,
) -> Result<H, Reply> {
    if let Some(hold) = now {
        return Ok(hold);
    }
    let hold = Box::pin(wait()).await?;
    ctx.restart_clock();
    Ok(hold)
}

/// The gate held shared if it is free right now, for background work that must not
/// interleave with a script or a transaction but can wait for its next turn (the
/// expiry sweeper). `None` while a writer holds or awaits it.
pub fn try_shared(shared: &Shared) -> Option<SharedHold<'_>> {
    shared.gate.try_shared()
}

/// After a command: serves clients blocked (BLPOP, BLMOVE...) on keys it made ready,
/// holding the gate exclusively. If a script holds the gate past its limit, the keys
/// stay ready and the script's own connection serves them once it ends.
pub async fn serve_blocked(shared: &Shared) {
    if !shared.blocking.has_ready() {
        return;
    }
    // Boxed, as `held`'s wait.
    if let Ok(_exclusive) = Box::pin(shared.gate.exclusive(shared)).await {
        shared.blocking.serve_ready_held(shared);
    }
}

/// Runs `f` holding the gate exclusively, once no command runs (the append-only log's
/// automatic rewrite, started by the connection that finds it due). `None`: a script
/// held the gate past its limit.
pub async fn with_exclusive<R>(shared: &Shared, f: impl FnOnce() -> R) -> Option<R> {
    let _exclusive = Box::pin(shared.gate.exclusive(shared)).await.ok()?;
    Some(f())
}

/// `serve_blocked` for a caller that cannot wait (the in-memory session, alone on its
/// server, always finds the gate free).
pub fn try_serve_blocked(shared: &Shared) {
    if !shared.blocking.has_ready() {
        return;
    }
    if let Some(_exclusive) = shared.gate.try_exclusive() {
        shared.blocking.serve_ready_held(shared);
    }
}

/// The gate held exclusively, waiting by yielding the thread: only for the test
/// controls (`TestServer::restart_clean`), which are synchronous and act on the whole
/// node the way a process restart would. The request path never calls this.
pub fn hold_exclusive_for_test_control(shared: &Shared) -> impl Drop + '_ {
    loop {
        if let Some(mut claim) = shared.gate.try_claim() {
            loop {
                if let Some(hold) = claim.try_take() {
                    return hold;
                }
                std::thread::yield_now();
            }
        }
        std::thread::yield_now();
    }
}

/// Called by the script hook when the running script passes its time limit: waiters
/// look again and answer BUSY.
pub fn script_turned_busy(shared: &Shared) {
    shared.gate.wake_waiters();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_holds_coexist_and_exclude_a_writer() {
        let gate = Gate::new();
        let a = gate.try_shared().unwrap();
        let b = gate.try_shared().unwrap();
        assert!(gate.try_exclusive().is_none());
        drop((a, b));
        let w = gate.try_exclusive().unwrap();
        assert!(gate.try_shared().is_none());
        drop(w);
        assert!(gate.try_shared().is_some());
    }

    #[test]
    fn a_pending_writer_keeps_new_readers_out_until_it_is_done() {
        let gate = Gate::new();
        let reader = gate.try_shared().unwrap();
        let mut claim = gate.try_claim().unwrap();
        assert!(gate.try_shared().is_none());
        assert!(claim.try_take().is_none());
        drop(reader);
        let hold = claim.try_take().unwrap();
        assert!(gate.try_shared().is_none());
        drop(hold);
        drop(claim);
        assert_eq!(gate.state.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_dropped_claim_gives_the_turn_back() {
        let gate = Gate::new();
        let reader = gate.try_shared().unwrap();
        drop(gate.try_claim().unwrap());
        assert!(gate.try_shared().is_some());
        drop(reader);
        assert_eq!(gate.state.load(Ordering::SeqCst), 0);
    }
}
