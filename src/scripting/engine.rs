//! The Lua VM: sandboxed globals, the `redis` API, compiled scripts by sha1, and one
//! script run (KEYS/ARGV in, reply out, Redis's error formats).
//!
//! The sandbox is built in Lua (SETUP below) because stock Lua 5.1 has no read-only
//! tables (Redis patches its Lua for that). A script's environment is an empty proxy
//! whose reads fall through to a table of allowed globals (and raise for a name that
//! does not exist) and whose writes raise, so one script can never change what the
//! next one sees. Libraries are read-only proxies of the real ones.

use super::convert::{self, err_table};
use super::{bit, cjson, numfmt, Call, Running};
use crate::commands::{self, table::flags, Ctx};
use crate::protocol::Reply;
use bytes::Bytes;
use mlua::{
    ChunkMode, Function, HookTriggers, Lua, LuaOptions, StdLib, Table, Value, Variadic, VmState,
};
use parking_lot::Mutex;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A runaway script (a table grown in a loop) gets a memory error instead of eating
/// the machine. Lock scripts use a few kilobytes.
pub const MEMORY_LIMIT: usize = 256 * 1024 * 1024;

/// How often (in VM instructions) the hook checks for SCRIPT KILL. Redis uses the
/// same count; a check costs an atomic load.
const HOOK_EVERY: u32 = 100_000;

/// Chunk name of our own Lua code; error locations skip its frames.
const INTERNAL: &str = "=redlockd";

/// Chunk name of user scripts: errors read `user_script:1: ...` as in Redis.
const USER_SCRIPT: &str = "@user_script";

pub const KILLED: &str = "ERR Script killed by user with SCRIPT KILL...";

/// The version scripts see in redis.REDIS_VERSION (same as INFO).
const VERSION: &str = crate::commands::connection::REDIS_VERSION;

pub struct Vm {
    lua: Lua,
    /// The allowed globals a script reads through its environment; KEYS and ARGV
    /// are set here for each run.
    globals: Table,
    /// The (empty, read-only) environment of every user function.
    env: Table,
    /// Lua: `function(f) return xpcall(f, handler) end`.
    runner: Function,
    /// Compile cache by sha1.
    compiled: HashMap<String, Function>,
}

/// What redis.call needs during a run, stored in the VM's app data for the run only.
struct RunSlot {
    /// The caller's context. SAFETY: set by `Vm::execute` from a `&mut Ctx` that
    /// outlives the run and removed (SlotGuard) before `execute` returns; Lua callbacks
    /// run only inside that window, on the thread that owns the `&mut`.
    ctx: *mut Ctx<'static>,
    resp3: bool,
    read_only: bool,
    running: Arc<Running>,
}

// SAFETY: the pointer is only dereferenced on the thread running the script, during
// the run (see `RunSlot::ctx`); the Vm moves between threads only between runs.
unsafe impl Send for RunSlot {}

struct SlotGuard<'a>(&'a Lua);

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        self.0.remove_app_data::<RunSlot>();
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
        imp.set("pcall", lua.create_function(pcall)?)?;
        imp.set("call", lua.create_function(call)?)?;
        imp.set("sha1hex", lua.create_function(sha1hex)?)?;
        imp.set("log", lua.create_function(log)?)?;
        imp.set("setresp", lua.create_function(setresp)?)?;
        imp.set(
            "killed",
            lua.create_function(|lua, ()| {
                Ok(lua
                    .app_data_ref::<RunSlot>()
                    .is_some_and(|s| s.running.killed()))
            })?,
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
        imp.set("cjson", raising_table(&lua, cjson::table(&lua)?)?)?;
        imp.set("bit", raising_table(&lua, bit::table(&lua)?)?)?;
        imp.set("version", VERSION)?;
        imp.set("version_num", version_num(VERSION))?;
        let parts: Table = lua.load(SETUP).set_name(INTERNAL).call(imp)?;
        let globals: Table = parts.get("R")?;
        let protected: Table = parts.get("protected")?;
        globals.raw_set("rawset", guarded_rawset(&lua, protected.clone())?)?;
        globals.raw_set("setmetatable", guarded_setmetatable(&lua, protected)?)?;
        lua.set_hook(
            HookTriggers::new().every_nth_instruction(HOOK_EVERY),
            |lua, _| {
                if let Some(slot) = lua.app_data_ref::<RunSlot>() {
                    if slot.running.killed() {
                        return Err(mlua::Error::runtime(KILLED));
                    }
                    slot.running.check_slow();
                }
                Ok(VmState::Continue)
            },
        )?;
        Ok(Vm {
            globals,
            env: parts.get("G")?,
            runner: parts.get("run")?,
            compiled: HashMap::new(),
            lua,
        })
    }

    /// The compiled function for `sha` (lowercase), if this VM has compiled it. Every
    /// script compiled here is also in the script cache (both are filled together and
    /// SCRIPT FLUSH drops both), so a hit needs no cache lookup.
    pub fn compiled(&self, sha: &str) -> Option<Function> {
        self.compiled.get(sha).cloned()
    }

    /// The compiled function for a script, compiling it on first use.
    pub fn compile(&mut self, sha: &str, body: &[u8]) -> Result<Function, Reply> {
        if let Some(f) = self.compiled.get(sha) {
            return Ok(f.clone());
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
        self.compiled.insert(sha.to_string(), f.clone());
        Ok(f)
    }

    /// Runs a compiled script for the caller in `ctx` (which holds the gate).
    pub fn execute(
        &mut self,
        ctx: &mut Ctx,
        f: &Function,
        sha: &str,
        call: Call,
        running: Arc<Running>,
    ) -> Reply {
        let saved_db = ctx.client.db;
        let saved_in_script = ctx.in_script;
        ctx.in_script = true;
        let reply = self.execute_inner(ctx, f, sha, call, running);
        ctx.in_script = saved_in_script;
        // SELECT inside a script does not change the caller's database (as Redis).
        if ctx.client.db != saved_db {
            ctx.client.select(saved_db);
        }
        reply
    }

    fn execute_inner(
        &mut self,
        ctx: &mut Ctx,
        f: &Function,
        sha: &str,
        call: Call,
        running: Arc<Running>,
    ) -> Reply {
        let lua = &self.lua;
        let set_args = || -> mlua::Result<()> {
            self.globals
                .raw_set("KEYS", string_table(lua, call.keys)?)?;
            self.globals
                .raw_set("ARGV", string_table(lua, call.argv)?)?;
            Ok(())
        };
        if let Err(e) = unlimited(lua, set_args) {
            return Reply::error(format!("ERR Error running script: {}", error_text(&e)));
        }
        lua.set_app_data(RunSlot {
            ctx: (ctx as *mut Ctx<'_>).cast::<Ctx<'static>>(),
            resp3: false,
            read_only: call.read_only,
            running: running.clone(),
        });
        let guard = SlotGuard(lua);
        let out = self.runner.call::<(bool, Value)>(f.clone());
        let resp3 = lua.app_data_ref::<RunSlot>().is_some_and(|s| s.resp3);
        drop(guard);
        let killed = running.killed();
        match out {
            Ok((true, v)) => unlimited(lua, || convert::lua_to_reply(&v, resp3)),
            Ok((false, e)) => script_error(&e, sha, killed),
            Err(e) => {
                let msg = if killed {
                    KILLED.to_string()
                } else {
                    format!("ERR {}", error_text(&e))
                };
                Reply::error(format!("{msg} script: {sha}").replace(['\r', '\n'], " "))
            }
        }
    }
}

/// Runs `f`, our own calls into the Lua API (building KEYS/ARGV, converting replies
/// both ways), with the VM's memory limit lifted.
///
/// Why: while a limit is set, mlua makes every string, table and `raw_set` a protected
/// call (a fresh C closure plus `lua_pcall`, so that a refused allocation cannot
/// longjmp through Rust); that was about half the instructions of a compare-and-delete
/// EVALSHA. With no limit an allocation cannot fail (a real out-of-memory aborts the
/// process), so mlua calls the API directly. What `f` allocates is bounded by the
/// request or by a command's reply, both already in memory; the script's own code
/// still runs under the limit, which is what stops a runaway script.
fn unlimited<R>(lua: &Lua, f: impl FnOnce() -> R) -> R {
    struct Restore<'a>(&'a Lua, usize);
    impl Drop for Restore<'_> {
        fn drop(&mut self) {
            let _ = self.0.set_memory_limit(self.1);
        }
    }
    let previous = lua.set_memory_limit(0).unwrap_or(MEMORY_LIMIT);
    let _restore = Restore(lua, previous);
    f()
}

/// A Lua array of strings (KEYS, ARGV).
fn string_table(lua: &Lua, items: &[Bytes]) -> mlua::Result<Table> {
    let t = lua.create_table_with_capacity(items.len(), 0)?;
    for (i, item) in items.iter().enumerate() {
        t.raw_set(i + 1, lua.create_string(item)?)?;
    }
    Ok(t)
}

/// "7.2.4" -> 0x070204, as redis.REDIS_VERSION_NUM.
fn version_num(v: &str) -> i64 {
    v.split('.')
        .take(3)
        .fold(0, |acc, part| acc * 256 + part.parse::<i64>().unwrap_or(0))
}

/// The text of an mlua error without mlua's decorations.
fn error_text(e: &mlua::Error) -> String {
    match e {
        mlua::Error::RuntimeError(s) | mlua::Error::MemoryError(s) => s.clone(),
        mlua::Error::CallbackError { cause, .. } => error_text(cause),
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

/// The reply for a script that raised: Redis 7's
/// `<err> script: <sha>, on @user_script:<line>.`
fn script_error(e: &Value, sha: &str, killed: bool) -> Reply {
    let (mut msg, source, line) = match e {
        Value::Table(t) => {
            let msg = match t.raw_get::<Value>("err") {
                Ok(Value::String(s)) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
                _ => "ERR unknown error".to_string(),
            };
            let source = match t.raw_get::<Value>("source") {
                Ok(Value::String(s)) => Some(String::from_utf8_lossy(&s.as_bytes()).into_owned()),
                _ => None,
            };
            let line = match t.raw_get::<Value>("line") {
                Ok(Value::Integer(l)) => Some(l),
                Ok(Value::Number(l)) => Some(l as i64),
                _ => None,
            };
            (msg, source, line)
        }
        // Errors that skip the message handler (out of memory).
        Value::String(s) => (
            format!("ERR {}", String::from_utf8_lossy(&s.as_bytes())),
            None,
            None,
        ),
        Value::Error(e) => (format!("ERR {}", error_text(e)), None, None),
        _ => ("ERR unknown error".to_string(), None, None),
    };
    if killed {
        msg = KILLED.to_string();
    }
    let text = match (source, line) {
        (Some(source), Some(line)) => format!("{msg} script: {sha}, on {source}:{line}."),
        _ => format!("{msg} script: {sha}"),
    };
    Reply::error(text.replace(['\r', '\n'], " "))
}

/// xpcall's message handler, as Redis's `__redis__err__handler`: turns any error into
/// `{err=..., source=..., line=...}` where source/line are the innermost frame of the
/// user's code (not a C function, not our shims).
fn error_handler(lua: &Lua, err: Value) -> mlua::Result<Table> {
    let mut location = None;
    for level in 1..200 {
        let Some((what, source, line)) = lua.inspect_stack(level, |d| {
            let s = d.source();
            (s.what, s.source.map(|c| c.into_owned()), d.current_line())
        }) else {
            break;
        };
        if what != "C" && source.as_deref() != Some(INTERNAL) {
            location = Some((source, line));
            break;
        }
    }
    let msg: Vec<u8> = match &err {
        Value::Table(t) => match t.raw_get::<Value>("err")? {
            Value::String(s) => s.as_bytes().to_vec(),
            _ => b"ERR unknown error".to_vec(),
        },
        Value::String(s) => [b"ERR ".as_slice(), &s.as_bytes()].concat(),
        Value::Error(e) => match find_script_error(e) {
            Some(ScriptError::Reply(s)) => s.clone().into_bytes(),
            Some(ScriptError::Lua(s)) => format!("ERR {s}").into_bytes(),
            None => format!("ERR {}", error_text(e)).into_bytes(),
        },
        Value::Nil => b"ERR nil".to_vec(),
        Value::Boolean(b) => format!("ERR {b}").into_bytes(),
        other => format!("ERR {}", other.type_name()).into_bytes(),
    };
    let t = lua.create_table()?;
    t.raw_set("err", lua.create_string(&msg)?)?;
    if let Some((Some(source), Some(line))) = location {
        t.raw_set("source", source)?;
        t.raw_set("line", line)?;
    }
    Ok(t)
}

/// Lua arguments of redis.call as command arguments: strings as bytes, numbers as
/// Redis prints them (`%.17g`, so 15000 is "15000").
fn script_args(args: &[Value]) -> Result<Vec<Bytes>, &'static str> {
    if args.is_empty() {
        return Err("ERR Please specify at least one argument for this redis lib call");
    }
    args.iter()
        .map(|v| match v {
            Value::String(s) => Ok(Bytes::copy_from_slice(&s.as_bytes())),
            Value::Integer(i) => Ok(Bytes::from(itoa::Buffer::new().format(*i).to_owned())),
            Value::Number(n) => Ok(Bytes::from(numfmt::fmt_g(*n, 17))),
            _ => Err("ERR Lua redis lib command arguments must be strings or integers"),
        })
        .collect()
}

/// An error raised by our Rust functions, so the message handler and pcall see
/// Redis's text instead of mlua's wrapping.
#[derive(Debug)]
enum ScriptError {
    /// A Redis error reply (redis.call): the text already starts with its code.
    Reply(String),
    /// A Lua-style error (cjson, bit...): the text starts with the caller's position;
    /// the script's caller sees it behind "ERR ".
    Lua(String),
}

impl std::fmt::Display for ScriptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScriptError::Reply(s) | ScriptError::Lua(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for ScriptError {}

fn find_script_error(e: &mlua::Error) -> Option<&ScriptError> {
    match e {
        mlua::Error::CallbackError { cause, .. } => find_script_error(cause),
        mlua::Error::ExternalError(inner) => inner.downcast_ref::<ScriptError>(),
        _ => None,
    }
}

fn raise_reply(text: impl Into<String>) -> mlua::Error {
    mlua::Error::external(ScriptError::Reply(text.into()))
}

/// A Lua error at the caller's line, as luaL_error raises from a C function.
fn raise_lua(lua: &Lua, msg: &str) -> mlua::Error {
    let position = lua
        .inspect_stack(1, |d| {
            let line = d.current_line()?;
            let src = d.source().short_src?.into_owned();
            Some(format!("{src}:{line}: "))
        })
        .flatten()
        .unwrap_or_default();
    mlua::Error::external(ScriptError::Lua(format!("{position}{msg}")))
}

/// Wraps a Rust function returning `(result, error)` into one that raises the error
/// at the caller's line. The wrapper is a C function, so a tail call to it keeps the
/// caller's frame (a Lua shim would lose the line in `return f()`).
fn raising(lua: &Lua, f: Function) -> mlua::Result<Function> {
    lua.create_function(move |lua, args: mlua::MultiValue| {
        let (r, e): (Value, Option<String>) = f.call(args)?;
        match e {
            Some(e) => Err(raise_lua(lua, &e)),
            None => Ok(r),
        }
    })
}

fn raising_table(lua: &Lua, raw: Table) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    for pair in raw.pairs::<Value, Value>() {
        let (k, v) = pair?;
        match v {
            Value::Function(f) => t.raw_set(k, raising(lua, f)?)?,
            other => t.raw_set(k, other)?,
        }
    }
    Ok(t)
}

/// What Redis 7's pcall gives a script for an error: the text of Redis errors.
fn unwrap_error(lua: &Lua, e: Value) -> mlua::Result<Value> {
    if let Value::Error(err) = &e {
        if let Some(ScriptError::Reply(s) | ScriptError::Lua(s)) = find_script_error(err) {
            return Ok(Value::String(lua.create_string(s)?));
        }
    }
    Ok(e)
}

fn type_name(v: &Value) -> &'static str {
    if v.is_nil() {
        "no value"
    } else {
        v.type_name()
    }
}

/// rawset that refuses the sandbox's read-only tables (_G and the libraries).
fn guarded_rawset(lua: &Lua, protected: Table) -> mlua::Result<Function> {
    lua.create_function(move |lua, (t, k, v): (Value, Value, Value)| {
        let Value::Table(t) = t else {
            return Err(raise_lua(
                lua,
                &format!(
                    "bad argument #1 to 'rawset' (table expected, got {})",
                    type_name(&t)
                ),
            ));
        };
        if protected.raw_get::<bool>(&t).unwrap_or(false) {
            return Err(mlua::Error::external(ScriptError::Lua(
                "Attempt to modify a readonly table".into(),
            )));
        }
        t.raw_set(k, v)?;
        Ok(t)
    })
}

/// setmetatable that refuses the sandbox's read-only tables and, as Lua's own,
/// a table whose metatable has `__metatable`.
fn guarded_setmetatable(lua: &Lua, protected: Table) -> mlua::Result<Function> {
    lua.create_function(move |lua, (t, mt): (Value, Value)| {
        let Value::Table(t) = t else {
            return Err(raise_lua(
                lua,
                &format!(
                    "bad argument #1 to 'setmetatable' (table expected, got {})",
                    type_name(&t)
                ),
            ));
        };
        let mt = match mt {
            Value::Nil => None,
            Value::Table(mt) => Some(mt),
            _ => {
                return Err(raise_lua(
                    lua,
                    "bad argument #2 to 'setmetatable' (nil or table expected)",
                ))
            }
        };
        if protected.raw_get::<bool>(&t).unwrap_or(false) {
            return Err(mlua::Error::external(ScriptError::Lua(
                "Attempt to modify a readonly table".into(),
            )));
        }
        if let Some(old) = t.metatable() {
            if !old.raw_get::<Value>("__metatable")?.is_nil() {
                return Err(raise_lua(lua, "cannot change a protected metatable"));
            }
        }
        t.set_metatable(mt)?;
        Ok(t)
    })
}

/// redis.pcall: an error comes back as `{err=...}`.
fn pcall(lua: &Lua, args: Variadic<Value>) -> mlua::Result<Value> {
    match command(lua, &args)? {
        Ok(r) => unlimited(lua, || convert::reply_to_lua(lua, &r.0, r.1)),
        Err(text) => unlimited(lua, || err_table(lua, text.as_bytes())),
    }
}

/// redis.call: an error is raised (and ends the script unless caught).
fn call(lua: &Lua, args: Variadic<Value>) -> mlua::Result<Value> {
    match command(lua, &args)? {
        Ok((Reply::Error(e), _)) => Err(raise_reply(
            String::from_utf8_lossy(convert::trim_crlf(&e)).into_owned(),
        )),
        Ok((r, resp3)) => unlimited(lua, || convert::reply_to_lua(lua, &r, resp3)),
        Err(text) => Err(raise_reply(text)),
    }
}

/// Runs one command through `commands::execute`, the path the network uses. Returns
/// the reply and whether the script asked for RESP3, or the text of a script-level
/// refusal (bad arguments, unknown command...).
fn command(lua: &Lua, args: &[Value]) -> mlua::Result<Result<(Reply, bool), String>> {
    let argv = match script_args(args) {
        Ok(a) => a,
        Err(msg) => return Ok(Err(msg.into())),
    };
    let Some(spec) = commands::lookup(&argv[0]) else {
        return Ok(Err("ERR Unknown Redis command called from script".into()));
    };
    let n = argv.len() as i32;
    let arity_ok = if spec.arity >= 0 {
        n == spec.arity
    } else {
        n >= -spec.arity
    };
    if !arity_ok {
        return Ok(Err(
            "ERR Wrong number of args calling Redis command from script".into(),
        ));
    }
    let Some(slot) = lua.app_data_ref::<RunSlot>() else {
        return Ok(Err(
            "ERR redis.call is only available while a script runs".into()
        ));
    };
    if slot.read_only && spec.flags & flags::WRITE != 0 {
        return Ok(Err(
            "ERR Write commands are not allowed from read-only scripts.".into(),
        ));
    }
    // SAFETY: see `RunSlot::ctx`: we are inside the run that set the pointer, on its
    // thread, and nothing else uses the context while Lua runs.
    let ctx = unsafe { &mut *slot.ctx };
    // Looked up and arity-checked above: straight to the command's run.
    let reply = commands::run(ctx, spec, &argv);
    if spec.flags & flags::WRITE != 0 && !reply.is_error() {
        slot.running.wrote.store(true, Ordering::SeqCst);
    }
    Ok(Ok((reply, slot.resp3)))
}

fn sha1hex(lua: &Lua, args: Variadic<Value>) -> mlua::Result<Value> {
    let text = match args.first() {
        Some(Value::String(s)) if args.len() == 1 => s.as_bytes().to_vec(),
        Some(Value::Integer(i)) if args.len() == 1 => i.to_string().into_bytes(),
        Some(Value::Number(n)) if args.len() == 1 => numfmt::lua_number(*n).into_bytes(),
        _ => return Err(raise_reply("ERR wrong number of arguments")),
    };
    Ok(Value::String(lua.create_string(super::sha1hex(&text))?))
}

fn log(_: &Lua, args: Variadic<Value>) -> mlua::Result<()> {
    if args.len() < 2 {
        return Err(raise_reply(
            "ERR redis.log() requires two arguments or more.",
        ));
    }
    let level = match &args[0] {
        Value::Integer(l) => *l,
        Value::Number(l) => *l as i64,
        _ => return Err(raise_reply("ERR First argument must be a number")),
    };
    let mut msg = String::new();
    for v in &args[1..] {
        let part = match v {
            Value::String(s) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
            Value::Integer(i) => i.to_string(),
            Value::Number(n) => numfmt::lua_number(*n),
            _ => continue,
        };
        if !msg.is_empty() {
            msg.push(' ');
        }
        msg.push_str(&part);
    }
    match level {
        0 => tracing::debug!(target: "redlockd::script", "{msg}"),
        1 => tracing::debug!(target: "redlockd::script", "{msg}"),
        2 => tracing::info!(target: "redlockd::script", "{msg}"),
        3 => tracing::warn!(target: "redlockd::script", "{msg}"),
        _ => return Err(raise_reply("ERR Invalid debug level.")),
    }
    Ok(())
}

fn setresp(lua: &Lua, args: Variadic<Value>) -> mlua::Result<()> {
    if args.len() != 1 {
        return Err(raise_reply("ERR redis.setresp() requires one argument."));
    }
    let resp3 = match &args[0] {
        Value::Integer(2) => false,
        Value::Integer(3) => true,
        Value::Number(n) if *n == 2.0 => false,
        Value::Number(n) if *n == 3.0 => true,
        _ => return Err(raise_reply("ERR RESP version must be 2 or 3.")),
    };
    if let Some(mut slot) = lua.app_data_mut::<RunSlot>() {
        slot.resp3 = resp3;
    }
    Ok(())
}

/// math.random with Lua 5.1's argument rules, from a per-VM generator seeded by the
/// server's `seed` (repeatable tests) instead of the process-wide C rand().
fn random(lua: &Lua, rng: Arc<Mutex<rand::rngs::SmallRng>>) -> mlua::Result<Function> {
    lua.create_function(move |lua, args: Variadic<Value>| {
        let int = |i: usize| -> Result<f64, String> {
            let v = args.get(i).cloned().unwrap_or(Value::Nil);
            let got = if v.is_nil() {
                "no value"
            } else {
                v.type_name()
            };
            match lua.coerce_number(v) {
                Ok(Some(n)) => Ok(n.trunc()),
                _ => Err(format!(
                    "bad argument #{} to 'random' (number expected, got {got})",
                    i + 1
                )),
            }
        };
        let r: f64 = rng.lock().random();
        let out = match args.len() {
            0 => Ok(r),
            1 => int(0).and_then(|m| {
                if m < 1.0 {
                    Err("bad argument #1 to 'random' (interval is empty)".into())
                } else {
                    Ok((r * m).floor() + 1.0)
                }
            }),
            2 => int(0).and_then(|l| {
                int(1).and_then(|u| {
                    if l > u {
                        Err("bad argument #2 to 'random' (interval is empty)".into())
                    } else {
                        Ok((r * (u - l + 1.0)).floor() + l)
                    }
                })
            }),
            _ => Err("wrong number of arguments".to_string()),
        };
        Ok(match out {
            Ok(n) => (Some(n), None),
            Err(e) => (None, Some(e)),
        })
    })
}

/// The sandbox and the `redis` table, built once per VM. Runs with the real globals
/// (which scripts never see) and returns the allowed globals `R`, the script
/// environment `G` and the runner.
const SETUP: &str = r#"
local imp = ...
local error, type, rawget, rawset, setmetatable, getmetatable, tostring, select =
      error, type, rawget, rawset, setmetatable, getmetatable, tostring, select
local pcall, xpcall, loadstring, setfenv, pairs, ipairs =
      pcall, xpcall, loadstring, setfenv, pairs, ipairs
local concat, sbyte, ssub, sfind = table.concat, string.byte, string.sub, string.find
local killed, unwrap_error = imp.killed, imp.unwrap_error

local protected = setmetatable({}, {__mode = 'k'})
local function ro_newindex() error('Attempt to modify a readonly table', 2) end
local function readonly(t)
  local p = setmetatable({}, {__index = t, __newindex = ro_newindex, __metatable = false})
  protected[p] = true
  return p
end
local function copy(t)
  local c = {}
  for k, v in pairs(t) do c[k] = v end
  return c
end

-- A killed script must not survive by catching the kill; pcall also turns Redis error
-- tables into their text, as Redis 7's pcall does.
local function after_pcall(ok, ...)
  if ok then return true, ... end
  if killed() then error((...), 0) end
  local e = ...
  if type(e) == 'userdata' then return false, unwrap_error(e) end
  if type(e) == 'table' then
    local m = rawget(e, 'err')
    if type(m) == 'string' then return false, m end
  end
  return false, e
end
local function after_xpcall(ok, ...)
  if not ok and killed() then error((...), 0) end
  return ok, ...
end

local redis = {}
redis.pcall = imp.pcall
redis.call = imp.call
local function err_text(s)
  if ssub(s, 1, 1) == '-' then s = ssub(s, 2) end
  if not sfind(s, ' ', 1, true) then s = 'ERR ' .. s end
  return s
end
redis.error_reply = function(...)
  local s = ...
  if select('#', ...) ~= 1 or type(s) ~= 'string' then
    return {err = 'ERR wrong number or type of arguments'}
  end
  return {err = err_text(s)}
end
redis.status_reply = function(...)
  local s = ...
  if select('#', ...) ~= 1 or type(s) ~= 'string' then
    return {err = 'ERR wrong number or type of arguments'}
  end
  return {ok = s}
end
redis.sha1hex = imp.sha1hex
redis.log = imp.log
redis.setresp = imp.setresp
redis.breakpoint = function() return false end
redis.debug = function() end
redis.replicate_commands = function() return true end
redis.set_repl = function() end
redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL = 0, 1, 2, 2, 3
redis.REDIS_VERSION = imp.version
redis.REDIS_VERSION_NUM = imp.version_num

local R = {}
for _, name in ipairs({'assert', 'error', 'ipairs', 'pairs', 'next', 'rawequal', 'rawget',
                       'select', 'tonumber', 'tostring', 'type', 'unpack', 'gcinfo',
                       'collectgarbage', 'getmetatable', '_VERSION'}) do
  R[name] = _G[name]
end
local G = setmetatable({}, {__index = R, __newindex = ro_newindex, __metatable = false})
protected[G] = true
setmetatable(R, {__index = function(_, k)
  error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
end})
R._G = G
-- rawset and setmetatable: guarded versions are added from Rust.
R.pcall = function(...) return after_pcall(pcall(...)) end
R.xpcall = function(f, h) return after_xpcall(xpcall(f, h)) end
-- Code loaded at run time gets the sandboxed environment too; bytecode is refused
-- (a crafted chunk can corrupt the VM).
R.loadstring = function(s, name)
  if type(s) == 'string' and sbyte(s, 1) == 27 then
    return nil, 'loading binary chunks is not allowed'
  end
  local f, e = loadstring(s, name)
  if f then setfenv(f, G) end
  return f, e
end
R.load = function(reader, name)
  if type(reader) ~= 'function' then
    error("bad argument #1 to 'load' (function expected, got " .. type(reader) .. ")", 2)
  end
  local parts, n = {}, 0
  while true do
    local p = reader()
    if p == nil or p == '' then break end
    if type(p) ~= 'string' then return nil, 'reader function must return a string' end
    n = n + 1
    parts[n] = p
  end
  return R.loadstring(concat(parts), name)
end

local co = copy(coroutine)
local resume = coroutine.resume
co.resume = function(...) return after_xpcall(resume(...)) end
R.coroutine = readonly(co)
R.string = readonly(string)
getmetatable('').__metatable = readonly({__index = R.string})
R.table = readonly(table)
local m = copy(math)
m.random = imp.random
m.randomseed = imp.randomseed
R.math = readonly(m)
R.cjson = readonly(imp.cjson)
R.bit = readonly(imp.bit)
R.redis = readonly(redis)

local handler = imp.handler
local function run(f)
  local ok, r = xpcall(f, handler)
  return ok, r
end
return {R = R, G = G, run = run, protected = protected}
"#;
