//! Lua scripting (EVAL and friends): a Lua 5.1 VM per server, Redis's `redis.*` API,
//! its conversion rules, its sandbox, and the time limit (BUSY / SCRIPT KILL).
//!
//! Why one VM per server, not per thread: a script runs holding the keyspace gate
//! exclusively, so at most one script of a server executes at any moment and one VM
//! is never contended. A per-server VM also keeps servers that share a process (tests,
//! clusters) from seeing each other's state or random seeds.

mod args;
mod bit;
mod cache;
use cache::Cache;
pub use cache::ScriptMeta;
mod cjson;
mod cjson_decode;
mod cmsgpack;
mod convert;
mod engine;
mod flags;
pub mod function_dump;
pub mod functions;
mod keys_argv;
mod limit;
mod long_run;
mod lua_errors;
pub(crate) use long_run::spawn_watch as spawn_long_run_watch;

/// Whether the script running on this thread asked for RESP3 (redis.setresp(3)):
/// commands whose reply shape differs by protocol (XREAD) read it.
pub(crate) fn script_resp3() -> bool {
    engine::RunSlot::with(|slot| slot.resp3.get()).unwrap_or(false)
}
mod lstruct;
mod lua_numfmt;
mod redis_api;
mod sandbox;

use crate::clock::Clock;
use crate::commands::Ctx;
use crate::protocol::{errors, Reply};
use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Scripts created by EVAL beyond this many are evicted, least recently used first;
/// those loaded with SCRIPT LOAD stay until SCRIPT FLUSH. This is Redis 7.4's rule (and
/// its number): clients that inline values into script text create a new script per
/// call, and without a bound each one stays compiled forever.
pub const EVAL_SCRIPTS_KEPT: usize = 500;

/// After a script that left the VM this large (a script that ran out of memory always
/// has), the VM collects its garbage; if a full collection cannot bring it under
/// `MEMORY_LIMIT / 2`, the VM is dropped and built again on next use (the cache of
/// script bodies survives). Lua 5.1 has no emergency collection: without this, the
/// garbage of a script that hit the limit fails every allocation after it. A script
/// that merely failed is not a reason: a full collection walks every compiled script,
/// and scripts that answer with `redis.error_reply` are ordinary traffic.
const RECLAIM_ABOVE: usize = 32 * 1024 * 1024;

/// A server's scripting state: the script cache EVALSHA reads, the VM, and the script
/// running now (what BUSY and SCRIPT KILL look at).
pub struct Scripts {
    /// sha1 (lowercase hex) -> script. Authoritative for EVALSHA / SCRIPT EXISTS.
    cache: RwLock<Cache>,
    /// Created on first use and dropped by SCRIPT FLUSH (Redis resets its VM there too),
    /// or after a panic while it ran (rebuilt on next use).
    vm: Mutex<Option<engine::Vm>>,
    running: Mutex<Option<Running>>,
    /// The running script's flags (see `RunFlags`).
    flags: RunFlags,
    /// Runs so far (written under the `running` lock): numbers each `Running`.
    runs: AtomicU64,
    /// Advances on every script run: the LRU clock of EVAL scripts.
    tick: AtomicU64,
    /// The time limit (CONFIG SET busy-reply-threshold / lua-time-limit changes it).
    busy_ms: AtomicU64,
    seed: Option<u64>,
    /// Flags of cached scripts that have a shebang (the others run in compat mode).
    shebang_flags: RwLock<HashMap<String, u32>>,
    /// Whether `shebang_flags` has anything: EVALSHA of a plain script skips the map.
    any_shebang: AtomicBool,
    /// FUNCTION libraries and their VM (see `functions.rs`).
    functions: Mutex<Option<functions::Registry>>,
    /// Libraries << 32 | functions, readable while a function runs (FUNCTION STATS).
    function_counts: AtomicU64,
}

/// A function being run by FCALL: what FUNCTION STATS shows, and why SCRIPT KILL and
/// FUNCTION KILL each stop only their own kind.
pub struct FunctionRun {
    pub name: String,
    pub command: Vec<Bytes>,
}

/// The script executing now, as the clients around it see it (BUSY, SCRIPT KILL,
/// FUNCTION STATS, the long-run watcher): `Scripts::running`, set when a run starts and
/// cleared when it ends, under that lock. Held inline, not in an Arc: a run costs a
/// lock taken twice, and no allocation.
pub struct Running {
    /// Server-clock ms when the script started, so a manual clock drives BUSY in tests.
    pub started_ms: u64,
    busy_ms: u64,
    /// Set when this is a function (FCALL), not an EVAL script.
    pub function: Option<FunctionRun>,
    /// `clock::mono_ns` at the start: the watcher's measure of a long run.
    started_ns: u64,
    /// Which run this is (`Scripts::runs`): the watcher nudges once per run.
    run: u64,
}

impl Running {
    fn is_busy(&self, now_ms: u64) -> bool {
        now_ms.saturating_sub(self.started_ms) > self.busy_ms
    }
}

/// What the running script and the clients around it both change. They live as long
/// as `Scripts` and are set back when a run is put in the `running` slot, under its
/// lock; SCRIPT KILL sets `killed` under the same lock, only while the slot holds a
/// run, so a kill never reaches a later run.
#[derive(Default)]
struct RunFlags {
    killed: AtomicBool,
    /// A write command has run: SCRIPT KILL must refuse (UNKILLABLE), as in Redis.
    wrote: AtomicBool,
}

/// What a run keeps for itself, on the thread that runs it (in its `RunSlot`).
pub(crate) struct ScriptRun {
    started_ms: u64,
    busy_ms: u64,
    /// Commands that may grow memory are refused until the first write (`Call`).
    deny_oom: bool,
    /// The slow-script warning was logged.
    warned: std::cell::Cell<bool>,
    /// Leaving the async worker when the run lasts (`long_run`).
    leaving: long_run::Leaving,
}

impl ScriptRun {
    /// Called from the Lua hook: logs once when the script passes the time limit, and
    /// returns true that once.
    fn check_slow(&self, clock: &Clock) -> bool {
        let ran = clock.now_ms().saturating_sub(self.started_ms);
        if ran > self.busy_ms && !self.warned.replace(true) {
            tracing::warn!(
                busy_ms = self.busy_ms,
                "slow script detected: still running; other clients get BUSY, SCRIPT KILL can stop it"
            );
            return true;
        }
        false
    }
}

/// How a script was named by the caller.
pub enum Source<'a> {
    /// EVAL: the body; cached under its sha1 once it compiles.
    Body(&'a Bytes),
    /// EVALSHA: a sha1 already checked to be 40 bytes.
    Sha(&'a [u8]),
}

/// What the caller passed besides the script.
pub struct Call<'a> {
    pub keys: &'a [Bytes],
    pub argv: &'a [Bytes],
    /// EVAL_RO / EVALSHA_RO: write commands are refused.
    pub read_only: bool,
    /// EVAL sets KEYS and ARGV as globals. A function takes them as parameters and the
    /// globals do not exist (reading one is the sandbox's nonexistent-global error), as
    /// in Redis.
    pub globals: bool,
    /// Memory was above --maxmemory when the script started: its commands that may
    /// grow memory are refused until it writes (set by the flags check, `check_oom`).
    pub deny_oom: bool,
}

impl Scripts {
    pub fn new(busy_ms: u64, seed: Option<u64>) -> Scripts {
        Scripts {
            cache: RwLock::new(Cache::default()),
            vm: Mutex::new(None),
            running: Mutex::new(None),
            flags: RunFlags::default(),
            runs: AtomicU64::new(0),
            tick: AtomicU64::new(0),
            busy_ms: AtomicU64::new(busy_ms),
            seed,
            shebang_flags: RwLock::new(HashMap::new()),
            any_shebang: AtomicBool::new(false),
            functions: Mutex::new(None),
            function_counts: AtomicU64::new(0),
        }
    }

    /// True while a script has run longer than the time limit: other commands get BUSY.
    pub fn is_busy(&self, now_ms: u64) -> bool {
        self.running
            .lock()
            .as_ref()
            .is_some_and(|r| r.is_busy(now_ms))
    }

    /// While a script runs and is not yet busy: how many ms (server clock) until it is.
    /// `Some(0)` once it is busy; `None` when no script runs.
    pub fn ms_until_busy(&self, now_ms: u64) -> Option<u64> {
        self.running.lock().as_ref().map(|r| {
            let ran = now_ms.saturating_sub(r.started_ms);
            (r.busy_ms + 1).saturating_sub(ran)
        })
    }

    /// True while a script executes (tests wait for this before driving the clock).
    /// What a client waiting for a busy script gets: Redis names the command that can
    /// stop it (SCRIPT KILL for EVAL, FUNCTION KILL for FCALL).
    pub fn busy_reply(&self) -> Reply {
        let function = self
            .running
            .lock()
            .as_ref()
            .is_some_and(|r| r.function.is_some());
        Reply::error(if function {
            errors::BUSY_FUNCTION
        } else {
            errors::BUSY
        })
    }

    /// The time limit past which a script makes other clients get BUSY.
    pub fn busy_ms(&self) -> u64 {
        self.busy_ms.load(Ordering::Relaxed)
    }

    /// CONFIG SET busy-reply-threshold: applies to scripts started from now on.
    pub fn set_busy_ms(&self, ms: u64) {
        self.busy_ms.store(ms, Ordering::Relaxed);
    }

    pub fn is_running(&self) -> bool {
        self.running.lock().is_some()
    }

    /// SCRIPT KILL (`function` false) or FUNCTION KILL (true): each stops only its
    /// own kind, as in Redis.
    pub fn kill(&self, function: bool) -> Reply {
        match self.running.lock().as_ref() {
            None => Reply::error(errors::NOTBUSY),
            Some(_) if self.flags.wrote.load(Ordering::SeqCst) => Reply::error(errors::UNKILLABLE),
            Some(r) if r.function.is_some() && !function => Reply::error(errors::BUSY_FUNCTION),
            Some(r) if r.function.is_none() && function => Reply::error(errors::BUSY),
            Some(_) => {
                self.flags.killed.store(true, Ordering::SeqCst);
                Reply::Ok
            }
        }
    }

    /// The function running now for FUNCTION STATS: (name, command, ms so far), None
    /// when nothing runs, Err when an EVAL script runs (Redis answers BUSY then).
    #[allow(clippy::type_complexity, clippy::result_unit_err)]
    pub fn running_function(&self, now_ms: u64) -> Result<Option<(String, Vec<Bytes>, u64)>, ()> {
        match self.running.lock().as_ref() {
            None => Ok(None),
            Some(r) => match &r.function {
                None => Err(()),
                Some(f) => Ok(Some((
                    f.name.clone(),
                    f.command.clone(),
                    now_ms.saturating_sub(r.started_ms),
                ))),
            },
        }
    }

    /// Stops a running script whatever it did (the server is going away).
    pub fn kill_for_shutdown(&self) {
        if self.running.lock().is_some() {
            self.flags.killed.store(true, Ordering::SeqCst);
        }
    }

    /// The rules a cached script's flags set for its run: read-only, and the
    /// maxmemory rule. Adjusts `call`, or answers the refusal.
    fn script_rules(&self, ctx: &Ctx, sha: &str, call: &mut Call) -> Result<(), Reply> {
        let flags = if self.any_shebang.load(Ordering::Relaxed) {
            let known = self.shebang_flags.read().get(sha).copied();
            known.unwrap_or(flags::EVAL_COMPAT)
        } else {
            flags::EVAL_COMPAT
        };
        call.read_only = flags::check_run(flags, call.read_only).map_err(Reply::error)?;
        prepare_oom(ctx, flags, call)
    }

    fn vm_or_create<'v>(
        &self,
        slot: &'v mut Option<engine::Vm>,
    ) -> Result<&'v mut engine::Vm, Reply> {
        if slot.is_none() {
            let vm = engine::Vm::new(self.seed).map_err(|e| {
                tracing::error!("creating the Lua VM failed: {e}");
                Reply::error(format!("ERR Error creating the Lua VM: {e}"))
            })?;
            *slot = Some(vm);
        }
        // Set just above when it was empty.
        slot.as_mut()
            .ok_or_else(|| Reply::error("ERR Lua VM unavailable"))
    }

    /// Runs a script for EVAL / EVALSHA (and their _RO forms). The caller holds the
    /// keyspace gate exclusively, so the script is atomic.
    ///
    /// A panic anywhere below (a command run by redis.call, mlua, our conversions) is
    /// caught here: the caller gets an error, the panic is logged, and the VM is
    /// dropped so the next script gets a fresh one (the cache of bodies survives, so
    /// EVALSHA keeps working).
    pub fn run(&self, ctx: &mut Ctx, source: Source, call: Call) -> Reply {
        let mut vm_slot = self.vm.lock();
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            self.run_locked(ctx, &mut vm_slot, source, call)
        }));
        match outcome {
            Ok(reply) => reply,
            Err(panic) => engine_panicked(&mut vm_slot, &panic),
        }
    }

    fn run_locked(
        &self,
        ctx: &mut Ctx,
        vm_slot: &mut Option<engine::Vm>,
        source: Source,
        call: Call,
    ) -> Reply {
        // EVALSHA of a script this VM has compiled (lock clients' steady state): one
        // lookup, no allocation. Anything else takes the general path below.
        if let Source::Sha(sha) = source {
            let mut lower = [0u8; 40];
            if sha.len() == lower.len() {
                lower.copy_from_slice(sha);
                lower.make_ascii_lowercase();
                // ASCII is UTF-8; checking that is a few word compares, where
                // `from_utf8` cost ~80 instructions of every EVALSHA.
                // SAFETY: only ASCII gets past `is_ascii`.
                let sha = lower
                    .is_ascii()
                    .then(|| unsafe { std::str::from_utf8_unchecked(&lower) });
                if let Some(sha) = sha {
                    if let Some(vm) = vm_slot.as_mut() {
                        if let Some(meta) = vm.compiled(sha) {
                            self.touch(meta);
                            return self.execute_script(ctx, vm_slot, None, sha, call);
                        }
                    }
                }
            }
        }
        let (sha, body) = match source {
            Source::Body(body) => (sha1hex(body), body.clone()),
            Source::Sha(sha) => {
                let sha = String::from_utf8_lossy(sha).to_ascii_lowercase();
                let cached = self.cache.read().scripts.get(&sha).map(|c| c.body.clone());
                let Some(body) = cached else {
                    return Reply::error(errors::NOSCRIPT);
                };
                (sha, body)
            }
        };
        let vm = match self.vm_or_create(vm_slot) {
            Ok(vm) => vm,
            Err(e) => return e,
        };
        let function = match vm.compiled(&sha) {
            Some(meta) => {
                self.touch(meta);
                None
            }
            None => {
                let meta = self.meta_for(&sha, true);
                self.touch(&meta);
                let f = match self.compile(vm, &sha, &body, &meta) {
                    Ok(f) => f,
                    Err(e) => return e,
                };
                self.remember(vm, &sha, &body, meta, true);
                Some(f)
            }
        };
        self.execute_script(ctx, vm_slot, function.as_ref(), &sha, call)
    }

    /// An EVAL script: its shebang's read-only rule, then the common run. `function`
    /// None: the script `Vm::compiled` returned last.
    fn execute_script(
        &self,
        ctx: &mut Ctx,
        vm_slot: &mut Option<engine::Vm>,
        function: Option<&mlua::Function>,
        sha: &str,
        mut call: Call,
    ) -> Reply {
        if let Err(e) = self.script_rules(ctx, sha, &mut call) {
            return e;
        }
        self.execute(ctx, vm_slot, function, sha, call)
    }

    /// Runs a compiled script, registered as the running script (BUSY, SCRIPT KILL).
    /// Afterwards, reclaims what a failed or large script left behind.
    fn execute(
        &self,
        ctx: &mut Ctx,
        vm_slot: &mut Option<engine::Vm>,
        function: Option<&mlua::Function>,
        sha: &str,
        call: Call,
    ) -> Reply {
        let Some(vm) = vm_slot.as_mut() else {
            return Reply::error("ERR Lua VM unavailable");
        };
        let reply = self.execute_in(ctx, vm, function, sha, call, None);
        if vm.used_memory() > RECLAIM_ABOVE {
            vm.collect_garbage();
            if vm.used_memory() > engine::MEMORY_LIMIT / 2 {
                tracing::warn!(
                    used_bytes = vm.used_memory(),
                    "the Lua VM still holds too much memory after a full collection; building a new one"
                );
                *vm_slot = None;
            }
        }
        reply
    }

    /// Runs `function` in `vm`, registered as the running script (BUSY, SCRIPT KILL,
    /// FUNCTION STATS): the one run path of EVAL, EVALSHA and FCALL.
    fn execute_in(
        &self,
        ctx: &mut Ctx,
        vm: &mut engine::Vm,
        function: Option<&mlua::Function>,
        sha: &str,
        call: Call,
        run: Option<FunctionRun>,
    ) -> Reply {
        // The caller read the clock just after taking the gate.
        let (started_ms, started_ns) = (ctx.now_ms, ctx.started());
        let busy_ms = self.busy_ms.load(Ordering::Relaxed);
        {
            let mut slot = self.running.lock();
            self.flags.killed.store(false, Ordering::Relaxed);
            self.flags.wrote.store(false, Ordering::Relaxed);
            let number = self.runs.load(Ordering::Relaxed) + 1;
            self.runs.store(number, Ordering::Relaxed);
            *slot = Some(Running {
                started_ms,
                busy_ms,
                function: run,
                started_ns,
                run: number,
            });
        }
        let _clear = ClearRunning(&self.running);
        let run = ScriptRun {
            started_ms,
            busy_ms,
            deny_oom: call.deny_oom,
            warned: std::cell::Cell::new(false),
            leaving: long_run::Leaving::new(started_ns),
        };
        vm.execute(ctx, function, sha, call, run)
    }
}

/// The maxmemory rule of EVAL and FCALL alike, for a script with `flags`, decided once
/// when it starts (Redis's pre-command OOM state).
pub(super) fn prepare_oom(ctx: &Ctx, script_flags: u32, call: &mut Call) -> Result<(), Reply> {
    if ctx.shared.over_maxmemory() {
        call.deny_oom = flags::check_oom(script_flags, ctx.in_exec).map_err(|e| {
            ctx.shared.stats.locks.oom.fetch_add(1, Ordering::Relaxed);
            Reply::error(e)
        })?;
    }
    Ok(())
}

/// What a caught panic leaves: no VM (a fresh one is built for the next script), a
/// log line with the panic's message, and an error for the caller.
fn engine_panicked(
    vm_slot: &mut Option<engine::Vm>,
    panic: &Box<dyn std::any::Any + Send>,
) -> Reply {
    *vm_slot = None;
    panic_reply(panic)
}

/// Logs a panic caught around a Lua VM (the caller drops or rebuilds the VM) and
/// returns the caller's error. A Lua error raised outside any protected call
/// (`engine::LuaPanic`) keeps its text: "not enough memory" for the memory limit.
fn panic_reply(panic: &Box<dyn std::any::Any + Send>) -> Reply {
    if let Some(lua) = panic.downcast_ref::<engine::LuaPanic>() {
        // Logged where it was raised (`engine::unprotected_error`).
        return Reply::error(format!(
            "{}: {}",
            errors::INTERNAL_SCRIPT_PANIC,
            functions::one_line(&lua.message)
        ));
    }
    let msg = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string());
    tracing::error!("panic while running a script (the Lua VM is rebuilt for the next one): {msg}");
    Reply::error(errors::INTERNAL_SCRIPT_PANIC)
}

/// Clears the running-script slot however the run ends.
struct ClearRunning<'a>(&'a Mutex<Option<Running>>);

impl Drop for ClearRunning<'_> {
    fn drop(&mut self) {
        *self.0.lock() = None;
    }
}

/// The names of script flags, in Redis's order (FUNCTION LIST).
pub fn flag_names(f: u32) -> Vec<&'static str> {
    flags::NAMES
        .iter()
        .filter(|(bit, _)| f & bit != 0)
        .map(|(_, name)| *name)
        .collect()
}

/// Lowercase hex SHA1 of the exact bytes (redsync hard-codes these).
pub fn sha1hex(body: &[u8]) -> String {
    sha1_smol::Sha1::from(body).digest().to_string()
}
