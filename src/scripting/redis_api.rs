//! The `redis` table's Rust side: redis.call / redis.pcall (through the command table
//! the network uses), sha1hex, log, setresp.

use super::convert::{self, err_table};
use super::engine::*;
use super::numfmt;
use crate::commands::{self, table::flags};
use crate::protocol::{errors, Reply};
use bytes::Bytes;
use mlua::{Lua, Value, Variadic};
use std::sync::atomic::Ordering;

/// Lua arguments of redis.call as command arguments: strings as bytes, numbers as
/// Redis prints them (`%.17g`, so 15000 is "15000").
pub(super) fn script_args(args: &[Value]) -> Result<Vec<Bytes>, &'static str> {
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

/// redis.pcall: an error comes back as `{err=...}`.
pub(super) fn pcall(lua: &Lua, args: Variadic<Value>) -> mlua::Result<Value> {
    match command(lua, &args)? {
        Ok(r) => unlimited(lua, || convert::reply_to_lua(lua, &r.0, r.1)),
        Err(text) => unlimited(lua, || err_table(lua, text.as_bytes())),
    }
}

/// redis.call: an error is raised (and ends the script unless caught).
pub(super) fn call(lua: &Lua, args: Variadic<Value>) -> mlua::Result<Value> {
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
pub(super) fn command(lua: &Lua, args: &[Value]) -> mlua::Result<Result<(Reply, bool), String>> {
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
    // SAFETY: see `RunSlot::ctx`: we are inside the run that set the pointer, on its
    // thread, and nothing else uses the context while Lua runs.
    let ctx = unsafe { &mut *slot.ctx };
    // The caller's permissions (Redis's scriptVerifyACL, before the write checks).
    if let Err(Reply::Error(e)) =
        commands::acl::check(ctx, spec, &argv, commands::acl::Context::Script)
    {
        return Ok(Err(String::from_utf8_lossy(&e).into_owned()));
    }
    if slot.read_only && spec.flags & flags::WRITE != 0 {
        return Ok(Err(
            "ERR Write commands are not allowed from read-only scripts.".into(),
        ));
    }
    if spec.flags & flags::DENYOOM != 0 && slot.running.refuses_oom() {
        return Ok(Err(errors::OOM.into()));
    }
    // Looked up and arity-checked above: straight to the command's run.
    let reply = commands::run(ctx, spec, &argv);
    if spec.flags & flags::WRITE != 0 && !reply.is_error() {
        slot.running.wrote.store(true, Ordering::SeqCst);
    }
    Ok(Ok((reply, slot.resp3)))
}

pub(super) fn sha1hex(lua: &Lua, args: Variadic<Value>) -> mlua::Result<Value> {
    let text = match args.first() {
        Some(Value::String(s)) if args.len() == 1 => s.as_bytes().to_vec(),
        Some(Value::Integer(i)) if args.len() == 1 => i.to_string().into_bytes(),
        Some(Value::Number(n)) if args.len() == 1 => numfmt::lua_number(*n).into_bytes(),
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

pub(super) fn setresp(lua: &Lua, args: Variadic<Value>) -> mlua::Result<()> {
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
