//! Redis 7 functions: libraries loaded with FUNCTION LOAD, whose top-level code calls
//! `redis.register_function`, and FCALL / FCALL_RO that run a registered function.
//!
//! As in Redis, functions live in their own Lua VM (so SCRIPT FLUSH, which resets the
//! EVAL VM, keeps them; FUNCTION FLUSH drops this one), and a library's top level runs
//! with a restricted API: only `redis.register_function`, `redis.log`, the log levels
//! and the version are visible there; the functions it registers see the full sandbox
//! when they are called. A function runs through the same path as EVALSHA (the
//! running-script slot, BUSY, the kill hook, Redis's error formats), named by the
//! function's name where EVAL shows a sha.
//!
//! Functions are not persisted: a restart (crash or not) forgets them, as it forgets
//! keys; clients load their libraries at connect or on "Function not found".

use super::engine::{LoadDeadline, Vm, INTERNAL};
use super::flags;
use super::keys_argv::string_table;
use super::lua_errors::{error_text, find_script_error, raise_reply, ScriptError};
use super::{Call, FunctionRun, Scripts};
use crate::commands::Ctx;
use crate::protocol::Reply;
use bytes::Bytes;
use mlua::{ChunkMode, Function, Lua, MultiValue, Table, Value};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a library's top level may run (Redis's LOAD_TIMEOUT_MS).
const LOAD_TIMEOUT: Duration = Duration::from_millis(500);

const NAME_RULE: &str = "ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long";

/// Chunk name of library code: errors read `user_function:3: ...`.
const USER_FUNCTION: &str = "@user_function";

/// An error text as one reply line: without the traceback mlua appends to errors it
/// raises, CR and LF as spaces (Redis does the same to every error reply).
pub fn one_line(text: &str) -> String {
    let text = text.split("\nstack traceback:").next().unwrap_or(text);
    text.replace(['\r', '\n'], " ")
}

/// One registered function.
pub struct FunctionInfo {
    pub name: String,
    pub description: Option<Bytes>,
    pub flags: u32,
    callback: Function,
}

/// One loaded library: its code (as given, shebang included) and its functions by name.
pub struct Library {
    pub name: String,
    pub code: Bytes,
    pub functions: BTreeMap<String, FunctionInfo>,
}

/// The libraries and the VM their functions live in.
pub(super) struct Registry {
    vm: Vm,
    pub(super) libraries: BTreeMap<String, Library>,
    /// The environment a library's top level runs in.
    load_env: Table,
    /// The environment functions run in (the VM's sandbox globals).
    run_env: Table,
    /// Functions registered by the library being loaded (None outside FUNCTION LOAD).
    loading: Arc<Mutex<Option<BTreeMap<String, FunctionInfo>>>>,
    /// Lua: `function(f, k, a) return function() return f(k, a) end end`.
    bind: Function,
}

/// What `#!lua name=...` says.
struct Metadata {
    engine: Vec<u8>,
    name: String,
    /// Where the code after the shebang line starts (at its newline).
    code_at: usize,
}

impl Registry {
    pub(super) fn new(seed: Option<u64>) -> mlua::Result<Registry> {
        let vm = Vm::new(seed)?;
        let lua = vm.lua();
        let env = vm.env().clone();
        let loading: Arc<Mutex<Option<BTreeMap<String, FunctionInfo>>>> =
            Arc::new(Mutex::new(None));
        let slot = loading.clone();
        let register = lua.create_function(move |lua, args: MultiValue| {
            let mut slot = slot.lock();
            let Some(functions) = slot.as_mut() else {
                return Err(raise_reply(
                    "ERR redis.register_function can only be called on FUNCTION LOAD command",
                ));
            };
            let f = register_args(lua, &args).map_err(|e| raise_reply(format!("ERR {e}")))?;
            if !valid_name(&f.name) {
                return Err(raise_reply(NAME_RULE));
            }
            if functions.contains_key(&f.name) {
                return Err(raise_reply("ERR Function already exists in the library"));
            }
            functions.insert(f.name.clone(), f);
            Ok(())
        })?;
        let real = env
            .metatable()
            .ok_or_else(|| mlua::Error::runtime("sandbox environment has no metatable"))?;
        let globals: Table = real.raw_get("__index")?;
        let redis: Table = globals.get("redis")?;
        let load_env: Table = lua
            .load(LOAD_API)
            .set_name(INTERNAL)
            .call((register, redis))?;
        let bind = lua
            .load("local f, k, a = ... return function() return f(k, a) end")
            .set_name(INTERNAL)
            .into_function()?;
        Ok(Registry {
            libraries: BTreeMap::new(),
            load_env,
            run_env: globals,
            loading,
            bind,
            vm,
        })
    }

    pub(super) fn function_count(&self) -> usize {
        self.libraries.values().map(|l| l.functions.len()).sum()
    }

    /// The function called `name`, in any case (Redis's function names are
    /// case-insensitive across libraries).
    fn find(&self, name: &[u8]) -> Option<&FunctionInfo> {
        self.libraries
            .values()
            .flat_map(|l| l.functions.values())
            .find(|f| f.name.as_bytes().eq_ignore_ascii_case(name))
    }

    /// Whether a library other than `lib` has a function called `name` (any case).
    fn taken(&self, lib: &str, name: &str) -> bool {
        self.libraries
            .values()
            .any(|l| l.name != lib && l.functions.keys().any(|n| n.eq_ignore_ascii_case(name)))
    }

    /// FUNCTION LOAD: the library's name, or Redis's error text.
    pub(super) fn load(&mut self, code: &Bytes, replace: bool) -> Result<String, String> {
        let md = metadata(code)?;
        if !valid_name(&md.name) {
            return Err(NAME_RULE.into());
        }
        if !md.engine.eq_ignore_ascii_case(b"lua") {
            return Err(format!(
                "ERR Engine '{}' not found",
                String::from_utf8_lossy(&md.engine)
            ));
        }
        if self.libraries.contains_key(&md.name) && !replace {
            return Err(format!("ERR Library '{}' already exists", md.name));
        }
        let functions = self.run_library(&code[md.code_at..])?;
        if functions.is_empty() {
            return Err("ERR No functions registered".into());
        }
        for name in functions.keys() {
            if self.taken(&md.name, name) {
                return Err(format!("ERR Function {name} already exists"));
            }
        }
        self.libraries.insert(
            md.name.clone(),
            Library {
                name: md.name.clone(),
                code: code.clone(),
                functions,
            },
        );
        Ok(md.name)
    }

    /// Compiles and runs a library's top level with the load API as its globals,
    /// collecting what it registers.
    fn run_library(&mut self, code: &[u8]) -> Result<BTreeMap<String, FunctionInfo>, String> {
        let lua = self.vm.lua();
        let chunk = lua
            .load(code)
            .set_name(USER_FUNCTION)
            .set_mode(ChunkMode::Text)
            .set_environment(self.vm.env().clone())
            .into_function()
            .map_err(|e| {
                let msg = match &e {
                    mlua::Error::SyntaxError { message, .. } => message.clone(),
                    other => error_text(other),
                };
                format!("ERR Error compiling function: {msg}")
            })?;
        // The environment's reads go to the load API while the top level runs.
        let mt = self
            .vm
            .env()
            .metatable()
            .ok_or("ERR sandbox environment has no metatable")?;
        let swap = |to: &Table| mt.raw_set("__index", to.clone());
        swap(&self.load_env).map_err(|e| format!("ERR {e}"))?;
        *self.loading.lock() = Some(BTreeMap::new());
        lua.set_app_data(LoadDeadline(Instant::now() + LOAD_TIMEOUT));
        let result = chunk.call::<()>(());
        lua.remove_app_data::<LoadDeadline>();
        let functions = self.loading.lock().take().unwrap_or_default();
        swap(&self.run_env).map_err(|e| format!("ERR {e}"))?;
        if let Err(e) = result {
            let msg = match find_script_error(&e) {
                Some(ScriptError::Reply(s)) => s.clone(),
                Some(ScriptError::Lua(s)) => format!("ERR {s}"),
                None => format!("ERR {}", error_text(&e)),
            };
            return Err(format!("ERR Error registering functions: {msg}"));
        }
        Ok(functions)
    }
}

/// Reads `redis.register_function`'s arguments: `(name, callback)` or a table of
/// named arguments. Errors are Redis's texts (without "ERR ").
fn register_args(lua: &Lua, args: &MultiValue) -> Result<FunctionInfo, &'static str> {
    let text = |v: &Value| -> Option<Vec<u8>> {
        match v {
            Value::String(s) => Some(s.as_bytes().to_vec()),
            Value::Integer(_) | Value::Number(_) => lua
                .coerce_string(v.clone())
                .ok()
                .flatten()
                .map(|s| s.as_bytes().to_vec()),
            _ => None,
        }
    };
    let as_name = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
    match args.len() {
        2 => {
            let name = text(&args[0])
                .ok_or("first argument to redis.register_function must be a string")?;
            let Value::Function(callback) = &args[1] else {
                return Err("second argument to redis.register_function must be a function");
            };
            Ok(FunctionInfo {
                name: as_name(name),
                description: None,
                flags: 0,
                callback: callback.clone(),
            })
        }
        1 => {
            let Value::Table(t) = &args[0] else {
                return Err("calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).");
            };
            let (mut name, mut description, mut callback, mut f_flags) = (None, None, None, 0);
            for pair in t.pairs::<Value, Value>() {
                let (k, v) =
                    pair.map_err(|_| "unknown argument given to redis.register_function")?;
                let key = text(&k)
                    .ok_or("named argument key given to redis.register_function is not a string")?;
                if key.eq_ignore_ascii_case(b"function_name") {
                    name = Some(text(&v).ok_or(
                        "function_name argument given to redis.register_function must be a string",
                    )?);
                } else if key.eq_ignore_ascii_case(b"description") {
                    description = Some(text(&v).ok_or(
                        "description argument given to redis.register_function must be a string",
                    )?);
                } else if key.eq_ignore_ascii_case(b"callback") {
                    let Value::Function(f) = v else {
                        return Err(
                            "callback argument given to redis.register_function must be a function",
                        );
                    };
                    callback = Some(f);
                } else if key.eq_ignore_ascii_case(b"flags") {
                    let Value::Table(list) = v else {
                        return Err("flags argument to redis.register_function must be a table representing function flags");
                    };
                    f_flags = read_flags(&list, &text).ok_or("unknown flag given")?;
                } else {
                    return Err("unknown argument given to redis.register_function");
                }
            }
            let name = name.ok_or("redis.register_function must get a function name argument")?;
            let callback =
                callback.ok_or("redis.register_function must get a callback argument")?;
            Ok(FunctionInfo {
                name: as_name(name),
                description: description.map(Bytes::from),
                flags: f_flags,
                callback,
            })
        }
        _ => Err("wrong number of arguments to redis.register_function"),
    }
}

/// `flags = {'no-writes', ...}`: read as `t[1], t[2]...` up to the first nil.
fn read_flags(list: &Table, text: &dyn Fn(&Value) -> Option<Vec<u8>>) -> Option<u32> {
    let mut out = 0;
    for i in 1.. {
        let v: Value = list.get(i).ok()?;
        if v.is_nil() {
            return Some(out);
        }
        out |= flags::by_name_ignore_case(&text(&v)?)?;
    }
    Some(out)
}

/// Letters, digits and underscores, at least one.
fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// `#!<engine> name=<library>` on the first line.
fn metadata(code: &[u8]) -> Result<Metadata, String> {
    if !code.starts_with(b"#!") {
        return Err("ERR Missing library metadata".into());
    }
    let Some(end) = code.iter().position(|&c| c == b'\n') else {
        return Err("ERR Invalid library metadata".into());
    };
    let parts = match flags::split_args(&code[..end]) {
        Some(p) if !p.is_empty() => p,
        _ => return Err("ERR Invalid library metadata".into()),
    };
    let engine = parts[0][2..].to_vec();
    let mut name = None;
    for part in &parts[1..] {
        if part.len() >= 5 && part[..5].eq_ignore_ascii_case(b"name=") {
            if name.is_some() {
                return Err(
                    "ERR Invalid metadata value, name argument was given multiple times".into(),
                );
            }
            name = Some(String::from_utf8_lossy(&part[5..]).into_owned());
            continue;
        }
        return Err(format!(
            "ERR Invalid metadata value given: {}",
            String::from_utf8_lossy(part)
        ));
    }
    let name = name.ok_or("ERR Library name was not given")?;
    Ok(Metadata {
        engine,
        name,
        code_at: end,
    })
}

/// The globals a library's top level sees: only `redis` with the load API; any other
/// name is an error, as in Redis.
const LOAD_API: &str = r#"
local register, redis = ...
local error, tostring, setmetatable = error, tostring, setmetatable
local api = {
  register_function = register,
  log = redis.log,
  LOG_DEBUG = redis.LOG_DEBUG, LOG_VERBOSE = redis.LOG_VERBOSE,
  LOG_NOTICE = redis.LOG_NOTICE, LOG_WARNING = redis.LOG_WARNING,
  REDIS_VERSION = redis.REDIS_VERSION, REDIS_VERSION_NUM = redis.REDIS_VERSION_NUM,
}
local function readonly() error('Attempt to modify a readonly table', 2) end
local load_redis = setmetatable({}, {
  __index = function(_, k)
    local v = api[k]
    if v == nil then
      error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
    end
    return v
  end,
  __newindex = readonly, __metatable = false})
return setmetatable({}, {
  __index = function(_, k)
    if k == 'redis' then return load_redis end
    error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
  end,
  __newindex = readonly, __metatable = false})
"#;

impl Scripts {
    fn with_registry<R>(&self, f: impl FnOnce(&mut Registry) -> R) -> Result<R, Reply> {
        let mut slot = self.functions.lock();
        if slot.is_none() {
            let registry = Registry::new(self.seed).map_err(|e| {
                tracing::error!("creating the functions Lua VM failed: {e}");
                Reply::error(format!("ERR Error creating the Lua VM: {e}"))
            })?;
            *slot = Some(registry);
        }
        let registry = slot
            .as_mut()
            .ok_or_else(|| Reply::error("ERR Lua VM unavailable"))?;
        let out = catch_unwind(AssertUnwindSafe(|| f(registry)));
        let out = out.map_err(|panic| self.functions_panicked(&mut slot, &panic));
        self.store_counts(slot.as_ref());
        out
    }

    /// FUNCTION STATS' counts, kept readable while a function runs.
    fn store_counts(&self, registry: Option<&Registry>) {
        let counts = registry.map_or(0, |r| r.libraries.len() << 32 | r.function_count());
        self.function_counts
            .store(counts as u64, std::sync::atomic::Ordering::Relaxed);
    }

    /// After a panic inside the functions' VM (a command run by a function, our Rust
    /// code, or a Lua error raised outside a protected call, `engine::LuaPanic`): the
    /// VM is not used again. A new one loads every library again from its code, so
    /// FCALL keeps finding the functions; the caller gets an error and the panic is
    /// logged.
    fn functions_panicked(
        &self,
        slot: &mut Option<Registry>,
        panic: &Box<dyn std::any::Any + Send>,
    ) -> Reply {
        let reply = super::panic_reply(panic);
        let codes: Vec<Bytes> = slot
            .take()
            .map(|old| old.libraries.values().map(|l| l.code.clone()).collect())
            .unwrap_or_default();
        let rebuilt = catch_unwind(AssertUnwindSafe(|| -> Result<Registry, String> {
            let mut fresh = Registry::new(self.seed).map_err(|e| e.to_string())?;
            for code in &codes {
                fresh.load(code, false)?;
            }
            Ok(fresh)
        }));
        match rebuilt {
            Ok(Ok(fresh)) => {
                tracing::warn!(
                    libraries = codes.len(),
                    "the functions' Lua VM was rebuilt and its libraries loaded again"
                );
                *slot = Some(fresh);
            }
            Ok(Err(e)) => {
                tracing::error!(
                    "reloading the function libraries into a new VM failed, they are dropped: {e}"
                )
            }
            Err(_) => tracing::error!(
                "reloading the function libraries into a new VM panicked, they are dropped"
            ),
        }
        self.store_counts(slot.as_ref());
        reply
    }

    /// FUNCTION LOAD [REPLACE] code.
    pub fn function_load(&self, code: &Bytes, replace: bool) -> Reply {
        match self.with_registry(|r| r.load(code, replace)) {
            Ok(Ok(name)) => Reply::bulk(name),
            Ok(Err(e)) => Reply::error(one_line(&e)),
            Err(e) => e,
        }
    }

    /// Runs `f` over the libraries (FUNCTION LIST, DUMP, DELETE).
    pub fn with_libraries<R>(&self, f: impl FnOnce(&mut BTreeMap<String, Library>) -> R) -> R {
        let mut slot = self.functions.lock();
        let mut empty = BTreeMap::new();
        let out = match slot.as_mut() {
            Some(r) => f(&mut r.libraries),
            None => f(&mut empty),
        };
        if slot.is_some() {
            self.store_counts(slot.as_ref());
        }
        out
    }

    /// FUNCTION FLUSH (and a restart): every library and the functions' VM.
    pub fn flush_functions(&self) {
        *self.functions.lock() = None;
        self.function_counts
            .store(0, std::sync::atomic::Ordering::Relaxed);
    }

    /// FUNCTION RESTORE: loads every library of `codes` into a fresh registry, then
    /// joins it to the current one by `policy` (nothing changes on an error).
    pub fn function_restore(&self, codes: &[Bytes], policy: RestorePolicy) -> Reply {
        // A panic here leaves nothing behind: the fresh registry is dropped.
        let fresh = catch_unwind(AssertUnwindSafe(|| -> Result<Registry, Reply> {
            let mut fresh = Registry::new(self.seed)
                .map_err(|e| Reply::error(format!("ERR Error creating the Lua VM: {e}")))?;
            for code in codes {
                fresh
                    .load(code, false)
                    .map_err(|e| Reply::error(one_line(&e)))?;
            }
            Ok(fresh)
        }));
        let mut fresh = match fresh {
            Ok(Ok(fresh)) => fresh,
            Ok(Err(e)) => return e,
            Err(panic) => return super::panic_reply(&panic),
        };
        let codes_by_lib: Vec<Bytes> = fresh.libraries.values().map(|l| l.code.clone()).collect();
        let result = self.with_registry(|current| -> Result<(), String> {
            if policy == RestorePolicy::Flush {
                std::mem::swap(current, &mut fresh);
                return Ok(());
            }
            for lib in fresh.libraries.values() {
                if current.libraries.contains_key(&lib.name) && policy == RestorePolicy::Append {
                    return Err(format!("ERR Library {} already exists", lib.name));
                }
            }
            for lib in fresh.libraries.values() {
                for name in lib.functions.keys() {
                    if current.taken(&lib.name, name) {
                        return Err(format!("ERR Function {name} already exists"));
                    }
                }
            }
            // Functions must live in the current VM: load the code there.
            let saved: Vec<Library> = fresh
                .libraries
                .keys()
                .filter_map(|n| current.libraries.remove(n))
                .collect();
            for code in &codes_by_lib {
                if let Err(e) = current.load(code, true) {
                    for lib in saved {
                        current.libraries.insert(lib.name.clone(), lib);
                    }
                    return Err(e);
                }
            }
            Ok(())
        });
        match result {
            Ok(Ok(())) => Reply::Ok,
            Ok(Err(e)) => Reply::error(one_line(&e)),
            Err(e) => e,
        }
    }

    /// (libraries, functions) loaded now, without waiting for a running function.
    pub fn function_counts(&self) -> (usize, usize) {
        let v = self
            .function_counts
            .load(std::sync::atomic::Ordering::Relaxed);
        ((v >> 32) as usize, (v & 0xffff_ffff) as usize)
    }

    /// FCALL / FCALL_RO: `args` are the command's arguments from the function name on.
    /// Checks in Redis's order: the function, numkeys, the read-only rule.
    pub fn fcall(&self, ctx: &mut Ctx, args: &[Bytes], ro: bool) -> Reply {
        let mut slot = self.functions.lock();
        let Some(registry) = slot.as_mut() else {
            return Reply::error("ERR Function not found");
        };
        match catch_unwind(AssertUnwindSafe(|| self.fcall_in(ctx, registry, args, ro))) {
            Ok(reply) => reply,
            Err(panic) => self.functions_panicked(&mut slot, &panic),
        }
    }

    fn fcall_in(&self, ctx: &mut Ctx, registry: &mut Registry, args: &[Bytes], ro: bool) -> Reply {
        let Some(f) = registry.find(&args[1]) else {
            return Reply::error("ERR Function not found");
        };
        let rest = &args[3..];
        let numkeys = match crate::commands::parse_i64(&args[2]) {
            Some(n) => n,
            None => return Reply::error("ERR Bad number of keys provided"),
        };
        if numkeys > rest.len() as i64 {
            return Reply::error("ERR Number of keys can't be greater than number of args");
        }
        if numkeys < 0 {
            return Reply::error("ERR Number of keys can't be negative");
        }
        let read_only = match flags::check_run(f.flags, ro) {
            Ok(r) => r,
            Err(e) => return Reply::error(e),
        };
        let (keys, argv) = rest.split_at(numkeys as usize);
        let name = f.name.clone();
        let callback = f.callback.clone();
        let lua = registry.vm.lua();
        let bound = super::limit::unlimited(lua, || -> mlua::Result<Function> {
            let k = string_table(lua, keys)?;
            let a = string_table(lua, argv)?;
            registry.bind.call((callback, k, a))
        });
        let bound = match bound {
            Ok(f) => f,
            Err(e) => return Reply::error(one_line(&format!("ERR {}", error_text(&e)))),
        };
        let mut call = Call {
            keys: &[],
            argv: &[],
            read_only,
            globals: false,
            deny_oom: false,
        };
        if let Err(e) = super::prepare_oom(ctx, f.flags, &mut call) {
            return e;
        }
        let run = FunctionRun {
            name: name.clone(),
            command: args.to_vec(),
        };
        let reply = self.execute_in(ctx, &mut registry.vm, Some(&bound), &name, call, Some(run));
        // What a failed or large function left behind (its VM holds the libraries:
        // kept). A function that stopped the collector (collectgarbage('stop')) would
        // otherwise keep every later run's garbage until one fails at the limit.
        if reply.is_error() || registry.vm.used_memory() > super::RECLAIM_ABOVE {
            registry.vm.collect_garbage();
        }
        reply
    }
}

/// FUNCTION RESTORE's policy for libraries that exist already.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum RestorePolicy {
    /// Drop every current library first.
    Flush,
    /// Fail on a library that exists (the default).
    Append,
    /// Replace libraries that exist.
    Replace,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A panic inside the functions' VM (here, in FUNCTION LOAD's closure; in real
    /// life a command run by a function, or a Lua error outside a protected call) is
    /// an error reply; the VM is replaced and every library loaded again, so the
    /// functions are still there and run.
    #[test]
    fn a_panic_in_the_functions_vm_keeps_the_libraries() {
        let scripts = Scripts::new(5000, Some(1));
        let code = Bytes::from_static(
            b"#!lua name=keep\nredis.register_function('kept', function() return 7 end)",
        );
        assert_eq!(scripts.function_load(&code, false), Reply::bulk("keep"));
        struct OldVm;
        if let Some(r) = scripts.functions.lock().as_ref() {
            r.vm.lua().set_app_data(OldVm);
        }
        let reply = scripts
            .with_registry(|_| panic!("a command panicked"))
            .expect_err("the panic is an error reply");
        assert_eq!(
            reply,
            Reply::error(crate::protocol::errors::INTERNAL_SCRIPT_PANIC)
        );
        let slot = scripts.functions.lock();
        let registry = slot.as_ref().expect("a new registry");
        assert!(
            registry.vm.lua().app_data_ref::<OldVm>().is_none(),
            "a new VM"
        );
        assert!(
            registry.find(b"kept").is_some(),
            "the library was loaded again"
        );
        assert_eq!(scripts.function_counts(), (1, 1));
    }
}
