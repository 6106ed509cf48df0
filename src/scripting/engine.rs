//! The Lua VM: compiled scripts by sha1, and one script run (KEYS/ARGV in, reply out).
//! The sandbox lives in `sandbox.rs`, the Rust side of the `redis` table in
//! `redis_api.rs`, Redis's error formats and the ways Rust raises in `lua_errors.rs`,
//! the memory limit our own API calls lift in `limit.rs`, KEYS/ARGV on the raw stack
//! in `keys_argv.rs`.
//!
//! The sandbox is built in Lua (`sandbox::SETUP`) because stock Lua 5.1 has no read-only
//! tables (Redis patches its Lua for that). A script's environment is an empty proxy
//! whose reads fall through to a table of allowed globals (and raise for a name that
//! does not exist) and whose writes raise, so one script can never change what the
//! next one sees. Libraries are read-only proxies of the real ones.

use super::convert;
use super::keys_argv::set_keys_argv;
use super::limit::{raw_limit_checks, unlimited, unlimited_raw, RAW_LIMIT};
use super::lua_errors::{
    error_handler, error_text, raise_reply, raising, raising_table, script_error, unwrap_error,
};
use super::redis_api::{acl_check_cmd, create_call, log, setresp, sha1hex};
use super::sandbox::{guarded_rawset, guarded_setmetatable, random, SETUP};
use super::{bit, cjson, cmsgpack, lstruct, Call, RunFlags, ScriptMeta, ScriptRun};
use crate::commands::Ctx;
use crate::protocol::Reply;
use mlua::{
    ffi, ChunkMode, Function, HookTriggers, Lua, LuaOptions, StdLib, Table, Value, VmState,
};
use parking_lot::Mutex;
use rand::SeedableRng;
use std::cell::Cell;
use std::collections::HashMap;
use std::ffi::c_int;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A runaway script (a table grown in a loop) gets a memory error instead of eating
/// the machine. Lock scripts use a few kilobytes.
pub const MEMORY_LIMIT: usize = 256 * 1024 * 1024;

/// How often (in VM instructions) the hook checks for SCRIPT KILL. Redis uses the
/// same count; a check costs an atomic load.
pub(super) const HOOK_EVERY: u32 = 100_000;

/// Chunk name of our own Lua code; error locations skip its frames.
pub(super) const INTERNAL: &str = "=redlockd";

/// Chunk name of user scripts: errors read `user_script:1: ...` as in Redis.
pub(super) const USER_SCRIPT: &str = "@user_script";

pub const KILLED: &str = "ERR Script killed by user with SCRIPT KILL...";

/// The version scripts see in redis.REDIS_VERSION (same as INFO).
pub(super) const VERSION: &str = crate::commands::admin::session::REDIS_VERSION;

pub struct Vm {
    lua: Lua,
    /// The (empty, read-only) environment of every user function.
    env: Table,
    /// Holds the function a run calls (slot 1) and, for a moment, a result mlua must
    /// read (slot 2): the C API reaches it through `stage_ref`.
    stage: Table,
    /// `f.to_pointer()` of the function in `stage[1]` (the table keeps it alive, so the
    /// address is not reused by another function meanwhile).
    staged: *const std::ffi::c_void,
    /// Compiled functions, by slot number. They live in a Lua table, not as Rust-held
    /// `Function`s: mlua keeps every Rust-held value on one auxiliary Lua stack of at
    /// most ~8,000 slots, and ran out (a panic) after ~7,900 distinct scripts.
    functions: Table,
    /// sha1 -> the slot in `functions` and the cache entry's bookkeeping.
    compiled: HashMap<String, Compiled>,
    /// The script `compiled` found last, held as a function: a lock client runs the
    /// same release script over and over, and this skips the sha's SipHash and the
    /// fetch from `functions` (~900 of a compare-and-delete EVALSHA's instructions).
    /// One held function costs one slot of mlua's reference stack. `execute` runs it
    /// when given no function, without a clone (each clone and drop of an mlua value
    /// takes mlua's lock: an Arc and a reentrant mutex, 4 atomic instructions).
    last: Option<Last>,
    /// Slots of forgotten (evicted) scripts, reused before the table grows.
    free_slots: Vec<i64>,
    /// The highest slot handed out.
    slots_used: i64,
    /// The main Lua state and a registry reference to the allowed globals a script
    /// reads through its environment (KEYS and ARGV are set there for each run, by
    /// `set_keys_argv`, on the raw stack outside any mlua call).
    state: *mut ffi::lua_State,
    globals_ref: c_int,
    /// Registry references to the strings "KEYS" and "ARGV": pushing a kept string
    /// skips hashing and interning the name again on every run.
    names_ref: [c_int; 2],
    /// Registry references for the raw run (`call_staged`): the stage table, mlua's
    /// xpcall (which lets a Rust panic through) and the message handler.
    stage_ref: c_int,
    xpcall_ref: c_int,
    handler_ref: c_int,
}

// SAFETY: `state` is the main state of `lua`, which is Send (mlua's "send" feature);
// it is used only through `&mut self`, by the thread that holds the Vm, between mlua
// calls, and it dies with `lua`.
unsafe impl Send for Vm {}

struct Compiled {
    slot: i64,
    meta: Arc<ScriptMeta>,
}

/// The script `Vm::compiled` found last (see `Vm::last`).
struct Last {
    sha: String,
    f: Function,
    /// `f.to_pointer()`, taken once (as `staged` is compared).
    ptr: *const std::ffi::c_void,
    meta: Arc<ScriptMeta>,
}

/// Set while FUNCTION LOAD runs a library's top level: past it, the hook stops the
/// code (Redis allows 500 ms), so a library that loops cannot hang the server.
pub(super) struct LoadDeadline(pub(super) std::time::Instant);

/// What redis.call needs during a run: the run in progress on this thread, found
/// through a thread-local pointer (`RunSlot::with`). It was mlua app data, which cost
/// a boxed insert, a removal and a map lookup per use: ~800 of a compare-and-delete
/// EVALSHA's instructions.
pub(super) struct RunSlot {
    /// The caller's context. SAFETY: set by `Vm::execute` from a `&mut Ctx` that
    /// outlives the run, and unset (SlotGuard) before `execute` returns; Lua callbacks
    /// run only inside that window, on the thread that owns the `&mut`.
    pub(super) ctx: *mut Ctx<'static>,
    /// redis.setresp's choice.
    pub(super) resp3: Cell<bool>,
    pub(super) read_only: bool,
    pub(super) run: ScriptRun,
}

thread_local! {
    /// The `RunSlot` of the script running on this thread (null between runs). A run
    /// never moves to another thread: a long one leaves the worker with
    /// `block_in_place`, which keeps it on the same thread.
    static RUN: Cell<*const RunSlot> = const { Cell::new(std::ptr::null()) };
}

impl RunSlot {
    /// The flags this run shares with SCRIPT KILL (`Scripts::flags`).
    fn flags(&self) -> &RunFlags {
        // SAFETY: see `ctx`: read inside the run, on its thread.
        unsafe { &(*self.ctx).shared.scripts.flags }
    }

    /// SCRIPT KILL (or a shutdown) stopped this run.
    pub(super) fn killed(&self) -> bool {
        self.flags().killed.load(Ordering::Relaxed)
    }

    /// Whether a command that may grow memory is refused now (see `ScriptRun::deny_oom`).
    pub(super) fn refuses_oom(&self) -> bool {
        self.run.deny_oom && !self.flags().wrote.load(Ordering::SeqCst)
    }

    /// A write command ran: SCRIPT KILL refuses from now on. Stored once per run (a
    /// SeqCst store is a full barrier).
    pub(super) fn wrote(&self) {
        let wrote = &self.flags().wrote;
        if !wrote.load(Ordering::Relaxed) {
            wrote.store(true, Ordering::SeqCst);
        }
    }

    /// Calls `f` with the run in progress on this thread; `None` between runs
    /// (redis.call at FUNCTION LOAD time, the hook while a library loads).
    pub(super) fn with<R>(f: impl FnOnce(&RunSlot) -> R) -> Option<R> {
        let current = RUN.with(Cell::get);
        // SAFETY: a non-null pointer is the slot of the run on this thread's stack in
        // `execute_inner`, which unsets it (SlotGuard) before the slot goes away.
        (!current.is_null()).then(|| f(unsafe { &*current }))
    }
}

/// Makes a slot this thread's run until dropped; then the previous one (null) is back.
pub(super) struct SlotGuard(*const RunSlot);

impl SlotGuard {
    fn enter(slot: &RunSlot) -> SlotGuard {
        SlotGuard(RUN.with(|r| r.replace(slot)))
    }
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        RUN.with(|r| r.set(self.0));
    }
}

impl Vm {
    pub fn new(seed: Option<u64>) -> mlua::Result<Vm> {
        let lua = Lua::new_with(
            StdLib::STRING | StdLib::TABLE | StdLib::MATH,
            LuaOptions::default(),
        )?;
        lua.set_memory_limit(MEMORY_LIMIT)?;
        let imp = lua.create_table()?;
        imp.set("pcall", create_call(&lua, true)?)?;
        imp.set("call", create_call(&lua, false)?)?;
        imp.set("sha1hex", lua.create_function(sha1hex)?)?;
        imp.set("log", lua.create_function(log)?)?;
        imp.set("setresp", lua.create_function(setresp)?)?;
        imp.set("acl_check_cmd", lua.create_function(acl_check_cmd)?)?;
        imp.set(
            "killed",
            lua.create_function(|_, ()| Ok(RunSlot::with(|s| s.killed()).unwrap_or(false)))?,
        )?;
        imp.set("unwrap_error", lua.create_function(unwrap_error)?)?;
        imp.set("handler", lua.create_function(error_handler)?)?;
        let rng = Arc::new(Mutex::new(rand::rngs::SmallRng::seed_from_u64(
            seed.unwrap_or_else(rand::random),
        )));
        imp.set("random", raising(&lua, random(&lua, rng.clone())?)?)?;
        imp.set(
            "randomseed",
            lua.create_function(move |_, x: Option<f64>| {
                *rng.lock() = rand::rngs::SmallRng::seed_from_u64(x.unwrap_or(0.0).to_bits());
                Ok(())
            })?,
        )?;
        imp.set("cjson", cjson::table(&lua)?)?;
        imp.set("cmsgpack", cmsgpack::table(&lua)?)?;
        imp.set("struct", lstruct::table(&lua)?)?;
        imp.set("bit", raising_table(&lua, bit::table(&lua)?)?)?;
        imp.set("version", VERSION)?;
        imp.set("version_num", version_num(VERSION))?;
        let parts: Table = lua.load(SETUP).set_name(INTERNAL).call(&imp)?;
        let globals: Table = parts.get("R")?;
        let protected: Table = parts.get("protected")?;
        globals.raw_set("rawset", guarded_rawset(&lua, protected.clone())?)?;
        globals.raw_set("setmetatable", guarded_setmetatable(&lua, protected)?)?;
        // A global hook, not `set_hook`: Lua 5.1 copies the hook into every coroutine a
        // script creates, and mlua's per-thread hook finds no callback registered for
        // such a coroutine and removes itself there, so a loop inside
        // `coroutine.wrap` could never be killed. The global hook's callback serves
        // every thread.
        lua.set_global_hook(
            HookTriggers::new().every_nth_instruction(HOOK_EVERY),
            |lua, _| {
                if let Some(deadline) = lua.app_data_ref::<LoadDeadline>() {
                    if std::time::Instant::now() > deadline.0 {
                        return Err(raise_reply("ERR FUNCTION LOAD timeout"));
                    }
                }
                let killed = RunSlot::with(|slot| {
                    let killed = slot.killed();
                    if !killed {
                        super::long_run::tick(slot);
                    }
                    killed
                });
                if killed == Some(true) {
                    return Err(mlua::Error::runtime(KILLED));
                }
                Ok(VmState::Continue)
            },
        )?;
        // Two array slots from the start: `take_result` writes slot 2 on the raw stack,
        // outside any protected call, so the write must never allocate (see
        // `unprotected_error` for what an allocation failing there did).
        let stage = lua.create_table_with_capacity(2, 0)?;
        let xpcall: Function = lua.globals().raw_get("xpcall")?;
        let handler: Function = imp.raw_get("handler")?;
        let mut state = std::ptr::null_mut();
        let mut refs = [0; 6];
        // SAFETY: `exec_raw` runs on the main state (no script runs yet) with the six
        // values pushed; each luaL_ref pops the top one into the registry, which keeps
        // it for the VM's life.
        unsafe {
            lua.exec_raw::<()>((&globals, &stage, &xpcall, &handler, "KEYS", "ARGV"), |s| {
                state = s;
                for r in refs.iter_mut().rev() {
                    *r = ffi::luaL_ref(s, ffi::LUA_REGISTRYINDEX);
                }
            })?;
        }
        let [globals_ref, stage_ref, xpcall_ref, handler_ref, keys_ref, argv_ref] = refs;
        // SAFETY: the main state of `lua`, no call running; sets the state's panic
        // function, which Lua calls only for an error raised outside any protected call.
        unsafe { ffi::lua_atpanic(state, unprotected_error) };
        RAW_LIMIT.get_or_init(|| raw_limit_checks(&lua, state));
        Ok(Vm {
            state,
            globals_ref,
            names_ref: [keys_ref, argv_ref],
            stage_ref,
            xpcall_ref,
            handler_ref,
            stage,
            staged: std::ptr::null(),
            env: parts.get("G")?,
            functions: lua.create_table()?,
            compiled: HashMap::new(),
            last: None,
            free_slots: Vec::new(),
            slots_used: 0,
            lua,
        })
    }

    /// The VM's Lua state (FUNCTION LOAD compiles library code in it).
    pub(super) fn lua(&self) -> &Lua {
        &self.lua
    }

    /// The read-only environment user code runs in.
    pub(super) fn env(&self) -> &Table {
        &self.env
    }

    /// The cache bookkeeping of the script `sha` (lowercase), if this VM has compiled
    /// it; it becomes the script `execute(.., None, ..)` runs. Every script compiled
    /// here is also in the script cache (both are filled together; eviction and SCRIPT
    /// FLUSH drop both), so a hit needs no cache lookup.
    pub fn compiled(&mut self, sha: &str) -> Option<&Arc<ScriptMeta>> {
        if self.last.as_ref().is_none_or(|last| last.sha != sha) {
            let c = self.compiled.get(sha)?;
            let f = self.functions.raw_get::<Function>(c.slot).ok()?;
            self.last = Some(Last {
                sha: sha.to_string(),
                ptr: f.to_pointer(),
                f,
                meta: c.meta.clone(),
            });
        }
        self.last.as_ref().map(|last| &last.meta)
    }

    /// Drops an evicted script's function (Lua's collector frees it).
    pub fn forget(&mut self, sha: &str) {
        if self.last.as_ref().is_some_and(|last| last.sha == sha) {
            self.last = None;
        }
        if let Some(c) = self.compiled.remove(sha) {
            if self.functions.raw_set(c.slot, Value::Nil).is_ok() {
                self.free_slots.push(c.slot);
            }
        }
    }

    /// Bytes the VM holds now: Lua's own count of what it allocated, the figure mlua's
    /// allocator keeps too, read without taking mlua's lock.
    pub fn used_memory(&self) -> usize {
        // SAFETY: the main state, between runs (`&self` of the thread holding the Vm);
        // counting allocates nothing.
        unsafe {
            let kb = ffi::lua_gc(self.state, ffi::LUA_GCCOUNT, 0);
            let rest = ffi::lua_gc(self.state, ffi::LUA_GCCOUNTB, 0);
            kb.max(0) as usize * 1024 + rest.max(0) as usize
        }
    }

    /// A full garbage collection, with the limit lifted so that it cannot fail. Lua 5.1
    /// has no emergency collection: after a script dies at the memory limit, its
    /// garbage would otherwise stay counted and make every later allocation (the next
    /// compile included) fail.
    pub fn collect_garbage(&self) {
        let _ = unlimited(&self.lua, || self.lua.gc_collect());
    }

    /// The compiled function for a script, compiling it on first use.
    pub fn compile(
        &mut self,
        sha: &str,
        body: &[u8],
        meta: &Arc<ScriptMeta>,
    ) -> Result<Function, Reply> {
        if let Some(c) = self.compiled.get(sha) {
            return self
                .functions
                .raw_get::<Function>(c.slot)
                .map_err(|e| Reply::error(format!("ERR Error compiling script: {e}")));
        }
        let f = self
            .lua
            .load(body)
            .set_name(USER_SCRIPT)
            .set_mode(ChunkMode::Text)
            .set_environment(self.env.clone())
            .into_function()
            .map_err(|e| {
                let msg = match &e {
                    mlua::Error::SyntaxError { message, .. } => message.clone(),
                    other => error_text(other),
                };
                Reply::error(format!(
                    "ERR Error compiling script (new function): {}",
                    msg.replace(['\r', '\n'], " ")
                ))
            })?;
        let slot = match self.free_slots.pop() {
            Some(slot) => slot,
            None => {
                self.slots_used += 1;
                self.slots_used
            }
        };
        unlimited(&self.lua, || self.functions.raw_set(slot, f.clone()))
            .map_err(|e| Reply::error(format!("ERR Error compiling script: {e}")))?;
        self.compiled.insert(
            sha.to_string(),
            Compiled {
                slot,
                meta: meta.clone(),
            },
        );
        Ok(f)
    }

    /// Runs `f` for the caller in `ctx` (which holds the gate); with no `f`, the script
    /// `compiled` returned last.
    pub fn execute(
        &mut self,
        ctx: &mut Ctx,
        f: Option<&Function>,
        sha: &str,
        call: Call,
        run: ScriptRun,
    ) -> Reply {
        let saved_db = ctx.client.db;
        let saved_in_script = ctx.in_script;
        ctx.in_script = true;
        // A panic (in a command run by redis.call, or in mlua) still restores the
        // caller's state; the caller then drops this VM (see `Scripts::run`).
        let reply = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.execute_inner(ctx, f, sha, call, run)
        }));
        ctx.in_script = saved_in_script;
        // SELECT inside a script does not change the caller's database (as Redis).
        if ctx.client.db != saved_db {
            ctx.client.select(saved_db);
        }
        reply.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    }

    fn execute_inner(
        &mut self,
        ctx: &mut Ctx,
        f: Option<&Function>,
        sha: &str,
        call: Call,
        run: ScriptRun,
    ) -> Reply {
        let lua = &self.lua;
        let (f, ptr) = match (f, &self.last) {
            (Some(f), _) => (f, f.to_pointer()),
            (None, Some(last)) => (&last.f, last.ptr),
            (None, None) => return Reply::error("ERR Error running script: no script"),
        };
        // The function is passed through the stage table (see `stage`); it is set again
        // only when it changes, so a client repeating one script sets it once.
        if self.staged != ptr {
            if unlimited(lua, || self.stage.raw_set(1, f)).is_err() {
                return Reply::error("ERR Error running script: out of memory");
            }
            self.staged = ptr;
        }
        // SAFETY: no mlua call is running (we are between runs, on the thread that owns
        // the VM), `state` is the main state and `globals_ref` holds globals.
        let ready = unsafe {
            unlimited_raw(self.state, lua, || {
                (!call.globals
                    || set_keys_argv(
                        self.state,
                        self.globals_ref,
                        self.names_ref,
                        call.keys,
                        call.argv,
                    ))
                    && ffi::lua_checkstack(self.state, 4) != 0
            })
        };
        if !ready {
            return Reply::error("ERR Error running script: Lua stack overflow");
        }
        let slot = RunSlot {
            ctx: (ctx as *mut Ctx<'_>).cast::<Ctx<'static>>(),
            resp3: Cell::new(false),
            read_only: call.read_only,
            run,
        };
        let guard = SlotGuard::enter(&slot);
        // SAFETY: as above, with 4 free stack slots.
        let top = unsafe { ffi::lua_gettop(self.state) };
        // SAFETY: as above: the main state, between mlua calls, 4 free stack slots.
        let status = unsafe { self.call_staged() };
        drop(guard);
        let resp3 = slot.resp3.get();
        let killed = slot.killed();
        // SAFETY: `call_staged` left its results above `top`.
        let reply = unsafe { self.take_result(top, status, resp3, sha, killed) };
        // SAFETY: back to the stack as the run found it.
        unsafe { ffi::lua_settop(self.state, top) };
        reply
    }

    /// Calls the staged function as `xpcall(f, handler)` with the C API, under one
    /// `lua_pcall` that only a Rust panic gets through (mlua's xpcall passes it on).
    /// Through mlua's `Function::call` (and a Lua `function(f) return xpcall(f,
    /// handler) end`) this cost ~1,800 of a compare-and-delete EVALSHA's instructions.
    /// Leaves `xpcall`'s two results (status 0), or the error (a panic), on the stack.
    ///
    /// # Safety
    /// As `execute_inner`: the main state, between mlua calls, 4 free stack slots.
    unsafe fn call_staged(&self) -> c_int {
        let state = self.state;
        ffi::lua_rawgeti_(state, ffi::LUA_REGISTRYINDEX, self.xpcall_ref);
        ffi::lua_rawgeti_(state, ffi::LUA_REGISTRYINDEX, self.stage_ref);
        ffi::lua_rawgeti_(state, -1, 1);
        ffi::lua_remove(state, -2);
        ffi::lua_rawgeti_(state, ffi::LUA_REGISTRYINDEX, self.handler_ref);
        ffi::lua_pcall(state, 2, 2, 0)
    }

    /// The reply for what `call_staged` left above `top`: a plain value (nil, a
    /// boolean, a number, a string) is read off the stack; a table, an error and a
    /// panic go through mlua (the stage table's slot 2), which resumes a panic.
    ///
    /// # Safety
    /// Right after `call_staged`, with its results above `top`.
    unsafe fn take_result(
        &self,
        top: c_int,
        status: c_int,
        resp3: bool,
        sha: &str,
        killed: bool,
    ) -> Reply {
        let state = self.state;
        let ok = status == 0 && ffi::lua_toboolean(state, -2) != 0;
        if ok {
            if let Some(reply) = convert::stack_scalar(state, -1, resp3) {
                return reply;
            }
        }
        // stage[2] = the value, then the stack as it was: mlua reads it from there. The
        // stage has had slot 2 since it was made (`Vm::new`), so this allocates nothing:
        // it runs outside any protected call, right after a script may have left the
        // VM at its memory limit. The limit is lifted all the same.
        unlimited_raw(state, &self.lua, || {
            ffi::lua_rawgeti_(state, ffi::LUA_REGISTRYINDEX, self.stage_ref);
            ffi::lua_insert(state, -2);
            ffi::lua_rawseti_(state, -2, 2);
        });
        ffi::lua_settop(state, top);
        let lua = &self.lua;
        let value = unlimited(lua, || {
            let v = self.stage.raw_get::<Value>(2);
            let _ = self.stage.raw_set(2, Value::Nil);
            v
        });
        let value = match value {
            Ok(v) => v,
            Err(e) => Value::Error(Box::new(e)),
        };
        match (ok, value) {
            // Only a table is read through mlua's API (raw_get), which would make each
            // read a protected call while the limit is set.
            (true, v @ Value::Table(_)) => unlimited(lua, || convert::lua_to_reply(&v, resp3)),
            (true, v) => convert::lua_to_reply(&v, resp3),
            (false, e) => script_error(&e, sha, killed),
        }
    }
}

/// What a Lua error raised outside any protected call becomes: a Rust panic carrying
/// this, caught where the VM's caller catches panics (`Scripts::run`, `Scripts::load`,
/// the FUNCTION commands), which log it, drop the VM and answer an error.
#[derive(Debug)]
pub(super) struct LuaPanic {
    /// The error's text ("not enough memory" for an allocation past the limit).
    pub(super) message: String,
}

/// The panic function of every VM (`lua_atpanic`): Lua calls it for an error raised
/// where no `lua_pcall` protects the state, then calls `exit(EXIT_FAILURE)` if it
/// returns.
///
/// Without it, a Lua error raised outside any protected call exits the process with
/// status 1 and no log line (a state made by `lua_newstate` has no panic function).
/// The one such call the VM's own code makes, storing a script's result in the stage
/// table (`take_result`), cannot allocate: the stage has both slots from the start,
/// so a VM at its memory limit (after SCRIPT FLUSH, say) still stores its error.
/// This function turns any unprotected error left (an allocation the machine itself
/// refuses, a raw API call added later) into a logged, caught panic instead of an
/// exit. Unwinding from here through Lua's C frames is
/// sound: they are C (no destructors; x86-64 and aarch64 builds carry unwind tables),
/// the state has no protected call (`errorJmp`) below this frame, and Lua has reset
/// the state's stack before calling this. The VM is never used again.
unsafe extern "C-unwind" fn unprotected_error(state: *mut ffi::lua_State) -> c_int {
    let message = if ffi::lua_type(state, -1) == ffi::LUA_TSTRING {
        let mut len = 0;
        let p = ffi::lua_tolstring(state, -1, &mut len);
        String::from_utf8_lossy(std::slice::from_raw_parts(p.cast::<u8>(), len)).into_owned()
    } else {
        "error object is not a string".to_string()
    };
    tracing::error!(
        error = %message,
        "a Lua error was raised outside any protected call; the Lua VM is dropped and the script gets an error"
    );
    std::panic::panic_any(LuaPanic { message })
}

/// "7.2.4" -> 0x070204, as redis.REDIS_VERSION_NUM.
pub(super) fn version_num(v: &str) -> i64 {
    v.split('.')
        .take(3)
        .fold(0, |acc, part| acc * 256 + part.parse::<i64>().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `unlimited_raw` writes where this mlua keeps its limit (checked on every new VM;
    /// an mlua whose layout differs would make the hot path fall back to the API, and
    /// this test says so), and puts the limit back afterwards.
    #[test]
    fn the_raw_limit_is_mluas_and_comes_back() {
        let vm = Vm::new(Some(1)).unwrap();
        assert_eq!(RAW_LIMIT.get(), Some(&true), "mlua's allocator state moved");
        // SAFETY: the VM's main state, no run in progress.
        let inside =
            unsafe { unlimited_raw(vm.state, &vm.lua, || vm.lua.set_memory_limit(0).unwrap()) };
        assert_eq!(inside, 0, "the limit is lifted inside");
        assert_eq!(vm.lua.set_memory_limit(MEMORY_LIMIT).unwrap(), MEMORY_LIMIT);
        let before = vm.used_memory();
        let _t = vm.lua.create_table().unwrap();
        assert!(vm.used_memory() > before);
        assert_eq!(vm.used_memory(), vm.lua.used_memory());
    }

    /// An allocation past the limit outside any protected call: Lua would call
    /// `exit(1)`; the VM's panic function makes it a Rust panic carrying Lua's text.
    #[test]
    fn an_unprotected_lua_error_is_a_caught_panic_not_an_exit() {
        let vm = Vm::new(Some(1)).unwrap();
        vm.lua.set_memory_limit(vm.used_memory()).unwrap();
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // SAFETY: the main state, no run in progress; 1,000 array slots are more
            // than the limit leaves (none).
            unsafe { ffi::lua_createtable(vm.state, 1000, 0) }
        }));
        let panic = caught.expect_err("the allocation past the limit must raise");
        let lua = panic.downcast_ref::<LuaPanic>().expect("a LuaPanic");
        assert_eq!(lua.message, "not enough memory");
        drop(vm);
        // What the script's caller gets: the engine's error with Lua's text.
        assert_eq!(
            super::super::panic_reply(&panic),
            Reply::error(format!(
                "{}: not enough memory",
                crate::protocol::errors::INTERNAL_SCRIPT_PANIC
            ))
        );
    }

    /// The write `take_result` makes outside any protected call allocates nothing, on
    /// a new VM (after SCRIPT FLUSH) with no room left under the limit.
    #[test]
    fn the_stage_takes_a_result_without_allocating() {
        let vm = Vm::new(Some(1)).unwrap();
        let before = vm.used_memory();
        // SAFETY: the main state, no run in progress, a free stack slot.
        unsafe {
            ffi::lua_rawgeti_(vm.state, ffi::LUA_REGISTRYINDEX, vm.stage_ref);
            for slot in 1..=2 {
                ffi::lua_pushboolean(vm.state, 1);
                ffi::lua_rawseti_(vm.state, -2, slot);
            }
            ffi::lua_settop(vm.state, -2);
        }
        assert_eq!(vm.used_memory(), before);
    }
}
