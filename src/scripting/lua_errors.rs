//! Script errors: how a script's error becomes Redis's reply (`script_error`, and
//! `error_handler`, the message handler every run is called with), how Rust code raises
//! a Redis error or a Lua-style one inside a script (`raise_reply`, `raise_lua`,
//! `raising`), and what pcall hands back (`unwrap_error`).

use super::engine::{INTERNAL, KILLED};
use crate::protocol::Reply;
use mlua::{Function, Lua, Table, Value};

/// The text of an mlua error without mlua's decorations.
pub(super) fn error_text(e: &mlua::Error) -> String {
    match e {
        mlua::Error::RuntimeError(s) | mlua::Error::MemoryError(s) => s.clone(),
        mlua::Error::CallbackError { cause, .. } => error_text(cause),
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

/// The reply for a script that raised: Redis 7's
/// `<err> script: <sha>, on @user_script:<line>.` An error that skipped the message
/// handler (Lua's out-of-memory error, and "error in error handling") is not a table:
/// Redis 7.0 answers `Error running script <sha>, <text up to 100 bytes>` for those
/// (`ERR Error running script <sha>, not enough memory`, checked against redis-server
/// 7.0.15 run with a ulimit).
pub(super) fn script_error(e: &Value, sha: &str, killed: bool) -> Reply {
    if !killed {
        let bare = match e {
            Value::String(s) => Some(s.as_bytes().to_vec()),
            Value::Error(e) => Some(error_text(e).into_bytes()),
            Value::Table(_) => None,
            _ => Some(b"execution failure".to_vec()),
        };
        if let Some(text) = bare {
            let text = String::from_utf8_lossy(&text[..text.len().min(100)]);
            tracing::warn!(script = sha, error = %text, "a script failed outside Lua's message handler (its memory limit)");
            return Reply::error(
                format!("ERR Error running script {sha}, {text}").replace(['\r', '\n'], " "),
            );
        }
    }
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
        // Only a killed run gets here with anything else (its text is KILLED).
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
pub(super) fn error_handler(lua: &Lua, err: Value) -> mlua::Result<Table> {
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

/// An error raised by our Rust functions, so the message handler and pcall see
/// Redis's text instead of mlua's wrapping.
#[derive(Debug)]
pub(super) enum ScriptError {
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

pub(super) fn find_script_error(e: &mlua::Error) -> Option<&ScriptError> {
    match e {
        mlua::Error::CallbackError { cause, .. } => find_script_error(cause),
        mlua::Error::ExternalError(inner) => inner.downcast_ref::<ScriptError>(),
        _ => None,
    }
}

pub(super) fn raise_reply(text: impl Into<String>) -> mlua::Error {
    mlua::Error::external(ScriptError::Reply(text.into()))
}

/// A Lua error at the caller's line, as luaL_error raises from a C function.
pub(super) fn raise_lua(lua: &Lua, msg: &str) -> mlua::Error {
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
pub(super) fn raising(lua: &Lua, f: Function) -> mlua::Result<Function> {
    lua.create_function(move |lua, args: mlua::MultiValue| {
        let (r, e): (Value, Option<String>) = f.call(args)?;
        match e {
            Some(e) => Err(raise_lua(lua, &e)),
            None => Ok(r),
        }
    })
}

pub(super) fn raising_table(lua: &Lua, raw: Table) -> mlua::Result<Table> {
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
pub(super) fn unwrap_error(lua: &Lua, e: Value) -> mlua::Result<Value> {
    if let Value::Error(err) = &e {
        if let Some(ScriptError::Reply(s) | ScriptError::Lua(s)) = find_script_error(err) {
            return Ok(Value::String(lua.create_string(s)?));
        }
    }
    Ok(e)
}

pub(super) fn type_name(v: &Value) -> &'static str {
    if v.is_nil() {
        "no value"
    } else {
        v.type_name()
    }
}
