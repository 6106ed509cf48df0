//! The `redis` table's Rust side: redis.call / redis.pcall (through the command table
//! the network uses), sha1hex, log, setresp.

use super::convert;
use super::engine::RunSlot;
use super::limit::unlimited_raw;
use super::lua_errors::raise_reply;
use super::lua_numfmt;
use crate::commands::{self, command_table::flags};
use crate::protocol::{errors, Reply};
use bytes::Bytes;
use mlua::{ffi, Function, Lua, Value, Variadic};
use std::cell::Cell;
use std::ffi::c_int;
use std::panic::AssertUnwindSafe;

/// redis.call (`protected` false) or redis.pcall (true) as a Lua C function.
///
/// They are written on Lua's C API rather than as mlua callbacks: through mlua every
/// call collected its arguments as `Value`s (a registry reference per string), boxed
/// the callback under a protected call and built the reply through the safe API, about
/// 5,500 instructions of each redis.call (callgrind, compare-and-delete EVALSHA).
///
/// Upvalue 1 is `fail`, an mlua function that raises (or resumes a panic) for us; see
/// `with_fail` and `finish`.
pub(super) fn create_call(lua: &Lua, protected: bool) -> mlua::Result<Function> {
    with_fail(lua, if protected { raw_pcall } else { raw_call })
}

/// `raw` as a Lua function whose upvalue 1 is `fail`: the mlua function that raises
/// the `Failure` left in `PENDING` (mlua turns a Rust error or panic into a Lua error
/// without skipping anything that needs dropping).
fn with_fail(lua: &Lua, raw: ffi::lua_CFunction) -> mlua::Result<Function> {
    let fail = lua.create_function(|_, ()| -> mlua::Result<()> {
        match PENDING.with(|p| p.take()) {
            Some(Failure::Raise(text)) => Err(raise_reply(text)),
            Some(Failure::Panic(payload)) => std::panic::resume_unwind(payload),
            None => Err(raise_reply("ERR redis.call failed")),
        }
    })?;
    // SAFETY: `exec_raw` pushes `fail` and gives 3 free slots; the closure takes it as
    // its upvalue and leaves the new function as the one result.
    unsafe { lua.exec_raw::<Function>(fail, |state| ffi::lua_pushcclosure(state, raw, 1)) }
}

/// Why a redis.call did not return: handed to `fail` through this slot, because a Lua
/// error must not be raised (a longjmp) past Rust values that still need dropping.
enum Failure {
    /// An error reply or a refusal: raised as the script error Redis gives.
    Raise(String),
    /// A panic in a command: mlua carries it out of Lua and `Scripts::run` catches it.
    Panic(Box<dyn std::any::Any + Send>),
}

thread_local! {
    static PENDING: Cell<Option<Failure>> = const { Cell::new(None) };
    /// The arguments vector redis.call fills, kept between calls (an allocation and a
    /// free fewer per call). Calls never nest: a command run by a script runs no
    /// script.
    static ARGV: Cell<Vec<Bytes>> = const { Cell::new(Vec::new()) };
}

/// Most arguments whose vector `ARGV` keeps for the next call.
const KEEP_ARGV: usize = 64;

unsafe extern "C-unwind" fn raw_call(state: *mut ffi::lua_State) -> c_int {
    finish(state, pushed_or_failed(state, false, from_stack))
}

unsafe extern "C-unwind" fn raw_pcall(state: *mut ffi::lua_State) -> c_int {
    finish(state, pushed_or_failed(state, true, from_stack))
}

/// The command named by the function's arguments, run for the script.
unsafe fn from_stack(state: *mut ffi::lua_State) -> Result<(Reply, bool), String> {
    let mut argv = ARGV.take();
    let result = match script_args(state, &mut argv) {
        Ok(Some(spec)) => command(spec, &argv),
        Ok(None) => Err("ERR Unknown Redis command called from script".into()),
        Err(text) => Err(text.to_string()),
    };
    argv.clear();
    if argv.capacity() <= KEEP_ARGV {
        ARGV.set(argv);
    }
    result
}

/// Returns the number of results pushed, or calls `fail` (upvalue 1), which raises.
///
/// # Safety
/// Called from a C function made by `with_fail`. This frame holds only plain values
/// (everything owned lived and died in `pushed_or_failed`), so the longjmp of the
/// raise skips no destructor.
unsafe fn finish(state: *mut ffi::lua_State, results: Option<c_int>) -> c_int {
    if let Some(results) = results {
        if super::limit::over_limit(state) {
            over_limit(state, results);
        }
        return results;
    }
    ffi::lua_pushvalue(state, ffi::lua_upvalueindex(1));
    ffi::lua_call(state, 0, 0);
    0
}

/// The reply (`results` values on top of the stack) took the VM past its memory
/// limit: dropped and collected (the limit lifted, so the collection cannot fail), and
/// Lua's out-of-memory error raised, as for an allocation of the script's own: the
/// script cannot keep what it could not have allocated. Collected first so that the
/// error's own handling (a few small allocations) finds the VM under its limit again.
///
/// # Safety
/// As `finish`: the longjmp of the raise skips no destructor.
unsafe fn over_limit(state: *mut ffi::lua_State, results: c_int) -> ! {
    ffi::lua_settop(state, -results - 1);
    let lua = Lua::get_or_init_from_ptr(state);
    unlimited_raw(state, lua, || ffi::lua_gc(state, ffi::LUA_GCCOLLECT, 0));
    // More than the whole limit: refused whatever the VM holds, raising LUA_ERRMEM.
    ffi::lua_newuserdata(state, super::engine::MEMORY_LIMIT + 1);
    unreachable!("an allocation past the memory limit returned")
}

/// Runs the command for a script: its reply and whether the script asked for RESP3,
/// or the text of a refusal.
type RunCommand = unsafe fn(*mut ffi::lua_State) -> Result<(Reply, bool), String>;

/// Runs `run` and pushes what the script gets: Some(number of results). Or leaves a
/// `Failure` in `PENDING`: None. redis.pcall (`protected`) gets an error reply or a
/// refusal as `{err=...}`; redis.call raises them.
#[inline(never)]
unsafe fn pushed_or_failed(
    state: *mut ffi::lua_State,
    protected: bool,
    run: RunCommand,
) -> Option<c_int> {
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
        let lua = Lua::get_or_init_from_ptr(state);
        // With the memory limit lifted no allocation raises (see `unlimited`), and
        // `convert` checks the stack before it grows it. A reply that allocates
        // nothing (DEL's integer, say) needs no lifting.
        let push = |lift: bool, f: &dyn Fn()| {
            if lift {
                // SAFETY: inside our C function, on the thread running the script.
                unsafe { unlimited_raw(state, lua, f) }
            } else {
                f()
            }
            Ok(1)
        };
        match run(state) {
            Ok((Reply::Error(e), _)) if !protected => {
                Err(String::from_utf8_lossy(convert::trim_crlf(&e)).into_owned())
            }
            Ok((r, resp3)) => push(convert::allocates(&r), &|| {
                convert::push_reply(state, &r, resp3)
            }),
            Err(text) if protected => push(true, &|| convert::push_error(state, text.as_bytes())),
            Err(text) => Err(text),
        }
    }));
    let failure = match outcome {
        Ok(Ok(results)) => return Some(results),
        Ok(Err(text)) => Failure::Raise(text),
        Err(payload) => Failure::Panic(payload),
    };
    PENDING.with(|p| p.set(Some(failure)));
    None
}

/// The arguments of redis.call as command arguments: strings as bytes, numbers as
/// Redis prints them (`number_arg`), and the command they name. The name itself is
/// passed on as the command's static name (lowercase), not a copy: no command reads
/// its own name from its arguments, and that is one allocation fewer per call.
/// Every argument is checked before the name is judged, in Redis's order. Fills
/// `argv` (empty) and returns the command.
///
/// # Safety
/// `state` is inside a C function call (its arguments are the stack).
unsafe fn script_args(
    state: *mut ffi::lua_State,
    argv: &mut Vec<Bytes>,
) -> Result<Option<&'static commands::Spec>, &'static str> {
    let n = ffi::lua_gettop(state);
    if n == 0 {
        return Err("ERR Please specify at least one argument for this redis lib call");
    }
    let mut spec = None;
    argv.reserve(n as usize);
    // Bytes copied out of the VM: bounded as everything our code builds from a
    // script's values (`limit::BUILD_LIMIT`).
    let mut copied = 0usize;
    for i in 1..=n {
        let arg = match ffi::lua_type(state, i) {
            ffi::LUA_TSTRING => {
                let mut len = 0;
                let p = ffi::lua_tolstring(state, i, &mut len);
                copied = copied.saturating_add(len);
                if copied > super::limit::BUILD_LIMIT {
                    return Err(ARGS_TOO_BIG);
                }
                let text = std::slice::from_raw_parts(p.cast::<u8>(), len);
                if i == 1 {
                    spec = commands::lookup(text);
                    Bytes::from_static(spec.map_or("", |s| s.name).as_bytes())
                } else {
                    Bytes::copy_from_slice(text)
                }
            }
            ffi::LUA_TNUMBER => number_arg(ffi::lua_tonumber(state, i)),
            _ => return Err("ERR Lua redis lib command arguments must be strings or integers"),
        };
        argv.push(arg);
    }
    Ok(spec)
}

/// One redis.call's arguments would copy more than `limit::BUILD_LIMIT` bytes.
const ARGS_TOO_BIG: &str =
    "ERR not enough memory: the command's arguments are larger than the script's memory limit";

/// A Lua number as a command argument: `%.17g`, as Redis's luaArgsToRedisArgv, so
/// 15000 is "15000", 0.1 is "0.10000000000000001" and 1e17 is "1e+17". Integers
/// below 1e17 print all their digits under `%.17g`, so they skip the float formatter.
fn number_arg(n: f64) -> Bytes {
    if n.fract() == 0.0 && n.abs() < 1e17 && !(n == 0.0 && n.is_sign_negative()) {
        Bytes::from(itoa::Buffer::new().format(n as i64).to_owned())
    } else {
        Bytes::from(lua_numfmt::fmt_g(n, 17))
    }
}

/// Runs one command through `commands::run`, the path the network uses. Returns
/// the reply and whether the script asked for RESP3, or the text of a script-level
/// refusal (bad arguments, unknown command...).
fn command(spec: &'static commands::Spec, argv: &[Bytes]) -> Result<(Reply, bool), String> {
    let n = argv.len() as i32;
    let arity_ok = if spec.arity >= 0 {
        n == spec.arity
    } else {
        n >= -spec.arity
    };
    if !arity_ok {
        return Err("ERR Wrong number of args calling Redis command from script".into());
    }
    RunSlot::with(|slot| {
        // SAFETY: see `RunSlot::ctx`: we are inside the run that set the pointer, on
        // its thread, and nothing else uses the context while Lua runs.
        let ctx = unsafe { &mut *slot.ctx };
        // Redis's scriptCall order: noscript, the caller's permissions, the script's
        // writes, OOM; each by the subcommand's own flags for a container command
        // (XGROUP CREATE is write and denyoom, XINFO STREAM readonly).
        let own_flags = spec.flags_of(argv);
        if let Some(refusal) = commands::refused_in_script(ctx, own_flags) {
            return Err(refusal.into());
        }
        // The caller's permissions (Redis's scriptVerifyACL, before the write checks).
        if let Err(Reply::Error(e)) =
            commands::check_acl(ctx, spec, argv, crate::acl::Context::Script)
        {
            return Err(String::from_utf8_lossy(&e).into_owned());
        }
        if slot.read_only && own_flags & flags::WRITE != 0 {
            return Err("ERR Write commands are not allowed from read-only scripts.".into());
        }
        if own_flags & flags::DENYOOM != 0 && slot.refuses_oom() {
            return Err(errors::OOM.into());
        }
        // Redis 7.0's scriptVerifyClusterState: any routing refusal is this one error.
        if ctx.shared.cluster.enabled()
            && ctx
                .shared
                .cluster
                .route(spec.keys(argv).map(|k| &k[..]))
                .is_err()
        {
            return Err("ERR Script attempted to access a non local key in a cluster node".into());
        }
        // Looked up and arity-checked above: straight to the command's run.
        let reply = commands::run(ctx, spec, argv);
        if own_flags & flags::WRITE != 0 && !reply.is_error() {
            slot.wrote();
        }
        Ok((reply, slot.resp3.get()))
    })
    .unwrap_or_else(|| Err("ERR redis.call is only available while a script runs".into()))
}

/// redis.acl_check_cmd(command, args...): whether the script's caller may run that
/// command with those arguments (its user's ACL rules), as Redis 7.0 answers it; no
/// ACL LOG entry, nothing counted.
pub(super) fn acl_check_cmd(_: &Lua, args: Variadic<Value>) -> mlua::Result<bool> {
    if args.is_empty() {
        return Err(raise_reply(
            "ERR Please specify at least one argument for this redis lib call",
        ));
    }
    let mut argv = Vec::with_capacity(args.len());
    for a in args.iter() {
        argv.push(match a {
            Value::String(s) => Bytes::copy_from_slice(&s.as_bytes()),
            Value::Integer(i) => Bytes::from(i.to_string()),
            Value::Number(n) => number_arg(*n),
            _ => {
                return Err(raise_reply(
                    "ERR Lua redis lib command arguments must be strings or integers",
                ))
            }
        });
    }
    let Some(spec) = commands::lookup(&argv[0]) else {
        return Err(raise_reply(
            "ERR Invalid command passed to redis.acl_check_cmd()",
        ));
    };
    RunSlot::with(|slot| {
        // SAFETY: see `RunSlot::ctx`: inside the run that set the pointer, on its thread.
        let ctx = unsafe { &mut *slot.ctx };
        let user = ctx.client.current_user(&ctx.shared.acl);
        user.unrestricted() || user.check(spec, &argv).is_ok()
    })
    .ok_or_else(|| raise_reply("ERR redis.acl_check_cmd is only available while a script runs"))
}

pub(super) fn sha1hex(lua: &Lua, args: Variadic<Value>) -> mlua::Result<Value> {
    let text = match args.first() {
        Some(Value::String(s)) if args.len() == 1 => s.as_bytes().to_vec(),
        Some(Value::Integer(i)) if args.len() == 1 => i.to_string().into_bytes(),
        Some(Value::Number(n)) if args.len() == 1 => lua_numfmt::lua_number(*n).into_bytes(),
        _ => return Err(raise_reply("ERR wrong number of arguments")),
    };
    Ok(Value::String(lua.create_string(super::sha1hex(&text))?))
}

pub(super) fn log(_: &Lua, args: Variadic<Value>) -> mlua::Result<()> {
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
            Value::Number(n) => lua_numfmt::lua_number(*n),
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

pub(super) fn setresp(_: &Lua, args: Variadic<Value>) -> mlua::Result<()> {
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
    RunSlot::with(|slot| slot.resp3.set(resp3));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::lua_errors::{find_script_error, ScriptError};
    use super::*;

    unsafe fn panics(_: *mut ffi::lua_State) -> Result<(Reply, bool), String> {
        panic!("a command panicked")
    }

    unsafe fn error_reply(_: *mut ffi::lua_State) -> Result<(Reply, bool), String> {
        Ok((Reply::error("WRONGTYPE bad\r\n"), false))
    }

    unsafe extern "C-unwind" fn call_panics(state: *mut ffi::lua_State) -> c_int {
        finish(state, pushed_or_failed(state, false, panics))
    }

    unsafe extern "C-unwind" fn call_error(state: *mut ffi::lua_State) -> c_int {
        finish(state, pushed_or_failed(state, false, error_reply))
    }

    unsafe extern "C-unwind" fn pcall_error(state: *mut ffi::lua_State) -> c_int {
        finish(state, pushed_or_failed(state, true, error_reply))
    }

    /// A panic inside a command leaves Lua as a panic the caller of the script sees
    /// (`Scripts::run` catches it and drops the VM), not as an abort or a Lua error.
    #[test]
    fn a_panic_in_a_command_reaches_the_script_caller() {
        let lua = Lua::new();
        let f = with_fail(&lua, call_panics).unwrap();
        let wrapper: Function = lua
            .load("local f = ... return function() return f() end")
            .call(f)
            .unwrap();
        let caught = std::panic::catch_unwind(AssertUnwindSafe(|| wrapper.call::<()>(())));
        let payload = caught.expect_err("the panic comes through");
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"a command panicked"));
        assert!(PENDING.with(|p| p.take()).is_none());
    }

    /// redis.call raises an error reply (as the script error Redis gives, CRLF
    /// trimmed); redis.pcall returns it as `{err=...}`; the state stays usable.
    #[test]
    fn error_replies_raise_from_call_and_return_from_pcall() {
        let lua = Lua::new();
        let call = with_fail(&lua, call_error).unwrap();
        for _ in 0..3 {
            let e = call.call::<()>(()).expect_err("raises");
            match find_script_error(&e) {
                Some(ScriptError::Reply(text)) => assert_eq!(text, "WRONGTYPE bad"),
                other => panic!("{other:?} from {e}"),
            }
        }
        let pcall = with_fail(&lua, pcall_error).unwrap();
        let t: mlua::Table = pcall.call(()).unwrap();
        assert_eq!(t.get::<String>("err").unwrap(), "WRONGTYPE bad");
        assert_eq!(lua.load("return 1 + 1").eval::<i64>().unwrap(), 2);
    }

    #[test]
    fn numbers_are_printed_as_redis_prints_them() {
        for (n, text) in [
            (15000.0, "15000"),
            (-3.0, "-3"),
            (0.0, "0"),
            (-0.0, "-0"),
            (0.1, "0.10000000000000001"),
            (1e17, "1e+17"),
            (99999999999999984.0, "99999999999999984"),
            (2f64.powi(63), "9.2233720368547758e+18"),
            (f64::INFINITY, "inf"),
        ] {
            assert_eq!(&number_arg(n)[..], text.as_bytes(), "{n}");
        }
    }
}
