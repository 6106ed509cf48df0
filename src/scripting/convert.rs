//! Redis's conversion rules between replies and Lua values, both ways.
//!
//! Reply -> Lua (what redis.call returns): RESP2 shapes unless the script called
//! redis.setresp(3). Lua -> reply (what the script returns): numbers truncate, `true`
//! is 1, `false`/`nil` are null, tables with `err`/`ok` are error/status replies, other
//! tables are arrays up to the first nil; with setresp(3), booleans stay booleans and
//! `{map=}`, `{set=}`, `{double=}` become RESP3 types (the encoder downgrades them for
//! RESP2 callers).

use super::limit::BUILD_LIMIT;
use super::lua_numfmt;
use crate::protocol::Reply;
use bytes::Bytes;
use mlua::{ffi, Table, Value};
use std::ffi::{c_int, CStr};

/// Past this nesting a returned table is refused, as Redis refuses one that would
/// overflow its Lua stack (a table containing itself, say).
const MAX_DEPTH: usize = 200;

pub const STACK_LIMIT: &str = "ERR reached lua stack limit";

/// Pushes `{err = text}`: what redis.pcall returns for an error reply (and what a
/// caught redis.call error holds).
///
/// # Safety
/// `state` has 3 free stack slots; the memory limit is lifted (`limit::unlimited`),
/// so no allocation raises.
pub unsafe fn push_error(state: *mut ffi::lua_State, text: &[u8]) {
    ffi::lua_createtable(state, 0, 1);
    push_bytes(state, trim_crlf(text));
    ffi::lua_setfield(state, -2, c"err".as_ptr());
}

pub fn trim_crlf(b: &[u8]) -> &[u8] {
    let start = b.iter().position(|c| !matches!(c, b'\r' | b'\n'));
    match start {
        None => &[],
        Some(s) => {
            let end = b
                .iter()
                .rposition(|c| !matches!(c, b'\r' | b'\n'))
                .unwrap_or(s);
            &b[s..=end]
        }
    }
}

/// Pushes a command's reply as redis.call returns it (Redis's conversion rules).
///
/// # Safety
/// `state` has a free stack slot, for the result; deeper levels check for their own
/// room. The memory limit is lifted (`limit::unlimited`), so no allocation raises.
pub unsafe fn push_reply(state: *mut ffi::lua_State, r: &Reply, resp3: bool) {
    let nested = allocates(r) && !matches!(r, Reply::Bulk(_));
    // A table, a key and a value, plus the one slot the next level needs.
    if nested && ffi::lua_checkstack(state, 4) == 0 {
        ffi::lua_pushnil(state);
        return;
    }
    match r {
        Reply::Ok => single_string(state, c"ok", b"OK"),
        Reply::Status(s) => single_string(state, c"ok", s),
        Reply::Error(e) => push_error(state, e),
        Reply::Integer(i) => ffi::lua_pushinteger(state, *i),
        Reply::Bulk(b) => push_bytes(state, b),
        Reply::Null | Reply::NullArray => {
            if resp3 {
                ffi::lua_pushnil(state)
            } else {
                ffi::lua_pushboolean(state, 0)
            }
        }
        // Multi (several frames) only comes from SUBSCRIBE and friends, which scripts
        // cannot call; as a table it is the frames in order.
        Reply::Array(items) | Reply::Push(items) | Reply::Multi(items) => {
            sequence(state, items, resp3)
        }
        Reply::Set(items) => {
            if resp3 {
                ffi::lua_createtable(state, 0, 1);
                ffi::lua_createtable(state, 0, 0);
                for item in items {
                    push_reply(state, item, resp3);
                    if ffi::lua_isnil(state, -1) != 0 {
                        ffi::lua_pop(state, 1);
                    } else {
                        ffi::lua_pushboolean(state, 1);
                        ffi::lua_rawset(state, -3);
                    }
                }
                ffi::lua_setfield(state, -2, c"set".as_ptr());
            } else {
                sequence(state, items, resp3)
            }
        }
        Reply::Map(pairs) => {
            if resp3 {
                ffi::lua_createtable(state, 0, 1);
                ffi::lua_createtable(state, 0, 0);
                for (k, v) in pairs {
                    push_reply(state, k, resp3);
                    if ffi::lua_isnil(state, -1) != 0 {
                        ffi::lua_pop(state, 1);
                    } else {
                        push_reply(state, v, resp3);
                        ffi::lua_rawset(state, -3);
                    }
                }
                ffi::lua_setfield(state, -2, c"map".as_ptr());
            } else {
                ffi::lua_createtable(state, c_len(pairs.len() * 2), 0);
                for (i, (k, v)) in pairs.iter().enumerate() {
                    push_reply(state, k, resp3);
                    ffi::lua_rawseti(state, -2, 2 * i as ffi::lua_Integer + 1);
                    push_reply(state, v, resp3);
                    ffi::lua_rawseti(state, -2, 2 * i as ffi::lua_Integer + 2);
                }
            }
        }
        Reply::Double(d) => {
            if resp3 {
                ffi::lua_createtable(state, 0, 1);
                ffi::lua_pushnumber(state, *d);
                ffi::lua_setfield(state, -2, c"double".as_ptr());
            } else {
                push_bytes(state, lua_numfmt::fmt_g(*d, 17).as_bytes())
            }
        }
        Reply::HumanDouble(d) => {
            if resp3 {
                ffi::lua_createtable(state, 0, 1);
                ffi::lua_pushnumber(state, *d);
                ffi::lua_setfield(state, -2, c"double".as_ptr());
            } else {
                push_bytes(state, crate::protocol::human_double(*d).as_bytes())
            }
        }
        Reply::Bool(b) => {
            if resp3 {
                ffi::lua_pushboolean(state, *b as c_int)
            } else {
                ffi::lua_pushinteger(state, *b as ffi::lua_Integer)
            }
        }
        Reply::Verbatim(format, text) => {
            if resp3 {
                ffi::lua_createtable(state, 0, 1);
                ffi::lua_createtable(state, 0, 2);
                push_bytes(state, format.as_bytes());
                ffi::lua_setfield(state, -2, c"format".as_ptr());
                push_bytes(state, text);
                ffi::lua_setfield(state, -2, c"string".as_ptr());
                ffi::lua_setfield(state, -2, c"verbatim_string".as_ptr());
            } else {
                push_bytes(state, text)
            }
        }
    }
}

/// Whether pushing `r` (`push_reply`) may allocate Lua memory: anything but an
/// integer, a null or a boolean (pushed as a number, nil or a boolean).
pub fn allocates(r: &Reply) -> bool {
    !matches!(
        r,
        Reply::Integer(_) | Reply::Null | Reply::NullArray | Reply::Bool(_)
    )
}

/// `{key = text}` (status replies: `{ok = "OK"}`).
unsafe fn single_string(state: *mut ffi::lua_State, key: &CStr, text: &[u8]) {
    ffi::lua_createtable(state, 0, 1);
    push_bytes(state, text);
    ffi::lua_setfield(state, -2, key.as_ptr());
}

unsafe fn sequence(state: *mut ffi::lua_State, items: &[Reply], resp3: bool) {
    ffi::lua_createtable(state, c_len(items.len()), 0);
    for (i, item) in items.iter().enumerate() {
        push_reply(state, item, resp3);
        ffi::lua_rawseti(state, -2, i as ffi::lua_Integer + 1);
    }
}

unsafe fn push_bytes(state: *mut ffi::lua_State, b: &[u8]) {
    ffi::lua_pushlstring(state, b.as_ptr().cast(), b.len());
}

/// A size hint for lua_createtable (only a hint: past c_int it is 0).
fn c_len(n: usize) -> c_int {
    c_int::try_from(n).unwrap_or(0)
}

/// A script's return value as the reply its caller gets. A reply that would copy more
/// than `BUILD_LIMIT` bytes out of the VM (the same string referenced many times) is
/// refused with `REPLY_TOO_BIG`.
pub fn lua_to_reply(v: &Value, resp3: bool) -> Reply {
    let mut budget = BUILD_LIMIT;
    match value(v, resp3, 0, &mut budget) {
        Ok(r) => r,
        Err(e) => e,
    }
}

pub const REPLY_TOO_BIG: &str =
    "ERR not enough memory: the script's reply is larger than its memory limit";

/// Takes `bytes` (a string copied out of the VM) plus a reply's own size off `budget`.
fn spend(budget: &mut usize, bytes: usize) -> Result<(), Reply> {
    let cost = bytes.saturating_add(std::mem::size_of::<Reply>());
    *budget = budget
        .checked_sub(cost)
        .ok_or_else(|| Reply::error(REPLY_TOO_BIG))?;
    Ok(())
}

/// Status and error text stay on one line, as Redis maps \r and \n to spaces.
fn one_line(b: &[u8]) -> Bytes {
    Bytes::from(
        b.iter()
            .map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c })
            .collect::<Vec<u8>>(),
    )
}

fn value(v: &Value, resp3: bool, depth: usize, budget: &mut usize) -> Result<Reply, Reply> {
    spend(budget, 0)?;
    Ok(match v {
        Value::Nil => scalar(Scalar::Nil, resp3),
        Value::Boolean(b) => scalar(Scalar::Bool(*b), resp3),
        Value::Integer(i) => Reply::Integer(*i),
        Value::Number(n) => scalar(Scalar::Number(*n), resp3),
        Value::String(s) => {
            let s = s.as_bytes();
            spend(budget, s.len())?;
            scalar(Scalar::Str(&s), resp3)
        }
        Value::Table(t) => table(t, resp3, depth + 1, budget)?,
        _ => Reply::Null,
    })
}

/// A script's value that is not a table.
enum Scalar<'a> {
    Nil,
    Bool(bool),
    Number(f64),
    Str(&'a [u8]),
}

/// Redis's conversion of a plain Lua value: nil is a null; a boolean is RESP3's
/// boolean, or 1 / null in RESP2; a number is truncated to an integer; a string is a
/// bulk string.
fn scalar(v: Scalar, resp3: bool) -> Reply {
    match v {
        Scalar::Nil => Reply::Null,
        Scalar::Bool(b) if resp3 => Reply::Bool(b),
        Scalar::Bool(true) => Reply::Integer(1),
        Scalar::Bool(false) => Reply::Null,
        Scalar::Number(n) => Reply::Integer(lua_numfmt::c_trunc(n)),
        Scalar::Str(s) => Reply::Bulk(Bytes::copy_from_slice(s)),
    }
}

/// The reply for the plain value at `idx` of the raw stack (a script's result read
/// without mlua); `None` for a table or anything else that goes through
/// `lua_to_reply`.
///
/// # Safety
/// `idx` is a valid index of `state`, which runs no Lua code meanwhile.
pub(super) unsafe fn stack_scalar(
    state: *mut ffi::lua_State,
    idx: c_int,
    resp3: bool,
) -> Option<Reply> {
    let v = match ffi::lua_type(state, idx) {
        ffi::LUA_TNIL => Scalar::Nil,
        ffi::LUA_TBOOLEAN => Scalar::Bool(ffi::lua_toboolean(state, idx) != 0),
        ffi::LUA_TNUMBER => Scalar::Number(ffi::lua_tonumber(state, idx)),
        ffi::LUA_TSTRING => {
            let mut len = 0;
            let p = ffi::lua_tolstring(state, idx, &mut len);
            Scalar::Str(std::slice::from_raw_parts(p.cast::<u8>(), len))
        }
        _ => return None,
    };
    Some(scalar(v, resp3))
}

fn field(t: &Table, key: &str) -> Value {
    t.raw_get(key).unwrap_or(Value::Nil)
}

fn table(t: &Table, resp3: bool, depth: usize, budget: &mut usize) -> Result<Reply, Reply> {
    if depth > MAX_DEPTH {
        return Err(Reply::error(STACK_LIMIT));
    }
    if let Value::String(e) = field(t, "err") {
        return Ok(Reply::Error(one_line(&e.as_bytes())));
    }
    if let Value::String(s) = field(t, "ok") {
        return Ok(Reply::Status(one_line(&s.as_bytes())));
    }
    match field(t, "double") {
        Value::Number(d) => return Ok(Reply::Double(d)),
        Value::Integer(i) => return Ok(Reply::Double(i as f64)),
        _ => {}
    }
    if let Value::String(s) = field(t, "big_number") {
        return Ok(Reply::Bulk(Bytes::copy_from_slice(&s.as_bytes())));
    }
    if let Value::Table(m) = field(t, "map") {
        let mut pairs = Vec::new();
        for pair in m.pairs::<Value, Value>() {
            let Ok((k, v)) = pair else { continue };
            pairs.push((
                value(&k, resp3, depth, budget)?,
                value(&v, resp3, depth, budget)?,
            ));
        }
        return Ok(Reply::Map(pairs));
    }
    if let Value::Table(s) = field(t, "set") {
        let mut items = Vec::new();
        for pair in s.pairs::<Value, Value>() {
            let Ok((k, _)) = pair else { continue };
            items.push(value(&k, resp3, depth, budget)?);
        }
        return Ok(Reply::Set(items));
    }
    if let Value::Table(v) = field(t, "verbatim_string") {
        if let (Value::String(format), Value::String(text)) =
            (field(&v, "format"), field(&v, "string"))
        {
            let text = Bytes::copy_from_slice(&text.as_bytes());
            return Ok(match &*format.as_bytes() {
                b"txt" => Reply::Verbatim("txt", text),
                b"mkd" => Reply::Verbatim("mkd", text),
                _ => Reply::Bulk(text),
            });
        }
    }
    let mut items = Vec::new();
    for i in 1.. {
        let v: Value = t.raw_get(i).unwrap_or(Value::Nil);
        if v.is_nil() {
            break;
        }
        items.push(value(&v, resp3, depth, budget)?);
    }
    Ok(Reply::Array(items))
}
