//! Argument checks for the C-style libraries (cjson, cmsgpack, struct) with the
//! messages of Lua 5.1's `luaL_check*`: `bad argument #2 to 'unpack' (number expected,
//! got no value)`, raised at the caller's line as `luaL_error` does.

use super::lua_errors::raise_lua;
use super::lua_numfmt;
use mlua::{Lua, Value};

/// The type name Lua's argument errors use: "no value" past the last argument.
pub(super) fn type_at(args: &[Value], i: usize) -> &'static str {
    match args.get(i) {
        None => "no value",
        Some(v) => v.type_name(),
    }
}

/// `luaL_argerror`: `bad argument #n to 'f' (msg)`, n counted from 1.
pub(super) fn arg_error(lua: &Lua, n: usize, f: &str, msg: &str) -> mlua::Error {
    raise_lua(lua, &format!("bad argument #{n} to '{f}' ({msg})"))
}

fn type_error(lua: &Lua, args: &[Value], i: usize, f: &str, want: &str) -> mlua::Error {
    let msg = format!("{want} expected, got {}", type_at(args, i));
    arg_error(lua, i + 1, f, &msg)
}

/// A number or a string that reads as one (Lua's `tonumber` rules).
pub(super) fn to_number(lua: &Lua, v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        Value::String(_) => lua.coerce_number(v.clone()).ok().flatten(),
        _ => None,
    }
}

/// `luaL_checknumber` for argument `i` (0-based).
pub(super) fn check_number(lua: &Lua, args: &[Value], i: usize, f: &str) -> mlua::Result<f64> {
    args.get(i)
        .and_then(|v| to_number(lua, v))
        .ok_or_else(|| type_error(lua, args, i, f, "number"))
}

/// `luaL_checkinteger`: a number truncated as C's cast does.
pub(super) fn check_integer(lua: &Lua, args: &[Value], i: usize, f: &str) -> mlua::Result<i64> {
    check_number(lua, args, i, f).map(lua_numfmt::c_trunc)
}

/// `luaL_optinteger`: nil or absent gives `default`.
pub(super) fn opt_integer(
    lua: &Lua,
    args: &[Value],
    i: usize,
    f: &str,
    default: i64,
) -> mlua::Result<i64> {
    match args.get(i) {
        None | Some(Value::Nil) => Ok(default),
        Some(_) => check_integer(lua, args, i, f),
    }
}

/// `luaL_checklstring`: a string, or a number printed as Lua prints it.
pub(super) fn check_bytes(lua: &Lua, args: &[Value], i: usize, f: &str) -> mlua::Result<Vec<u8>> {
    match args.get(i) {
        Some(Value::String(s)) => Ok(s.as_bytes().to_vec()),
        Some(Value::Integer(n)) => Ok(lua_numfmt::lua_number(*n as f64).into_bytes()),
        Some(Value::Number(n)) => Ok(lua_numfmt::lua_number(*n).into_bytes()),
        _ => Err(type_error(lua, args, i, f, "string")),
    }
}
