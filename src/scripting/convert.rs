//! Redis's conversion rules between replies and Lua values, both ways.
//!
//! Reply -> Lua (what redis.call returns): RESP2 shapes unless the script called
//! redis.setresp(3). Lua -> reply (what the script returns): numbers truncate, `true`
//! is 1, `false`/`nil` are null, tables with `err`/`ok` are error/status replies, other
//! tables are arrays up to the first nil; with setresp(3), booleans stay booleans and
//! `{map=}`, `{set=}`, `{double=}` become RESP3 types (the encoder downgrades them for
//! RESP2 callers).

use super::numfmt;
use crate::protocol::Reply;
use bytes::Bytes;
use mlua::{Lua, Table, Value};

/// Past this nesting a returned table is refused, as Redis refuses one that would
/// overflow its Lua stack (a table containing itself, say).
const MAX_DEPTH: usize = 200;

pub const STACK_LIMIT: &str = "ERR reached lua stack limit";

/// `{err = text}`: what redis.pcall returns for an error reply and redis.call raises.
pub fn err_table(lua: &Lua, text: &[u8]) -> mlua::Result<Value> {
    let t = lua.create_table_with_capacity(0, 1)?;
    t.raw_set("err", lua.create_string(trim_crlf(text))?)?;
    Ok(Value::Table(t))
}

fn single(lua: &Lua, key: &str, v: Value) -> mlua::Result<Value> {
    let t = lua.create_table_with_capacity(0, 1)?;
    t.raw_set(key, v)?;
    Ok(Value::Table(t))
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

/// A command's reply as redis.call returns it.
pub fn reply_to_lua(lua: &Lua, r: &Reply, resp3: bool) -> mlua::Result<Value> {
    Ok(match r {
        Reply::Ok => single(lua, "ok", Value::String(lua.create_string("OK")?))?,
        Reply::Status(s) => single(lua, "ok", Value::String(lua.create_string(s)?))?,
        Reply::Error(e) => err_table(lua, e)?,
        Reply::Integer(i) => Value::Integer(*i),
        Reply::Bulk(b) => Value::String(lua.create_string(b)?),
        Reply::Null | Reply::NullArray => {
            if resp3 {
                Value::Nil
            } else {
                Value::Boolean(false)
            }
        }
        // Multi (several frames) only comes from SUBSCRIBE and friends, which scripts
        // cannot call; as a table it is the frames in order.
        Reply::Array(items) | Reply::Push(items) | Reply::Multi(items) => {
            sequence(lua, items, resp3)?
        }
        Reply::Set(items) => {
            if resp3 {
                let set = lua.create_table()?;
                for item in items {
                    let k = reply_to_lua(lua, item, resp3)?;
                    if !k.is_nil() {
                        set.raw_set(k, true)?;
                    }
                }
                single(lua, "set", Value::Table(set))?
            } else {
                sequence(lua, items, resp3)?
            }
        }
        Reply::Map(pairs) => {
            if resp3 {
                let map = lua.create_table()?;
                for (k, v) in pairs {
                    let k = reply_to_lua(lua, k, resp3)?;
                    if !k.is_nil() {
                        map.raw_set(k, reply_to_lua(lua, v, resp3)?)?;
                    }
                }
                single(lua, "map", Value::Table(map))?
            } else {
                let t = lua.create_table_with_capacity(pairs.len() * 2, 0)?;
                for (i, (k, v)) in pairs.iter().enumerate() {
                    t.raw_set(2 * i + 1, reply_to_lua(lua, k, resp3)?)?;
                    t.raw_set(2 * i + 2, reply_to_lua(lua, v, resp3)?)?;
                }
                Value::Table(t)
            }
        }
        Reply::Double(d) => {
            if resp3 {
                single(lua, "double", Value::Number(*d))?
            } else {
                Value::String(lua.create_string(numfmt::fmt_g(*d, 17))?)
            }
        }
        Reply::Bool(b) => {
            if resp3 {
                Value::Boolean(*b)
            } else {
                Value::Integer(*b as i64)
            }
        }
        Reply::Verbatim(format, text) => {
            if resp3 {
                let v = lua.create_table_with_capacity(0, 2)?;
                v.raw_set("format", *format)?;
                v.raw_set("string", lua.create_string(text)?)?;
                single(lua, "verbatim_string", Value::Table(v))?
            } else {
                Value::String(lua.create_string(text)?)
            }
        }
    })
}

fn sequence(lua: &Lua, items: &[Reply], resp3: bool) -> mlua::Result<Value> {
    let t = lua.create_table_with_capacity(items.len(), 0)?;
    for (i, item) in items.iter().enumerate() {
        t.raw_set(i + 1, reply_to_lua(lua, item, resp3)?)?;
    }
    Ok(Value::Table(t))
}

/// A script's return value as the reply its caller gets.
pub fn lua_to_reply(v: &Value, resp3: bool) -> Reply {
    match value(v, resp3, 0) {
        Ok(r) => r,
        Err(e) => e,
    }
}

/// Status and error text stay on one line, as Redis maps \r and \n to spaces.
fn one_line(b: &[u8]) -> Bytes {
    Bytes::from(
        b.iter()
            .map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c })
            .collect::<Vec<u8>>(),
    )
}

fn value(v: &Value, resp3: bool, depth: usize) -> Result<Reply, Reply> {
    Ok(match v {
        Value::Nil => Reply::Null,
        Value::Boolean(b) => {
            if resp3 {
                Reply::Bool(*b)
            } else if *b {
                Reply::Integer(1)
            } else {
                Reply::Null
            }
        }
        Value::Integer(i) => Reply::Integer(*i),
        Value::Number(n) => Reply::Integer(numfmt::c_trunc(*n)),
        Value::String(s) => Reply::Bulk(Bytes::copy_from_slice(&s.as_bytes())),
        Value::Table(t) => table(t, resp3, depth + 1)?,
        _ => Reply::Null,
    })
}

fn field(t: &Table, key: &str) -> Value {
    t.raw_get(key).unwrap_or(Value::Nil)
}

fn table(t: &Table, resp3: bool, depth: usize) -> Result<Reply, Reply> {
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
            pairs.push((value(&k, resp3, depth)?, value(&v, resp3, depth)?));
        }
        return Ok(Reply::Map(pairs));
    }
    if let Value::Table(s) = field(t, "set") {
        let mut items = Vec::new();
        for pair in s.pairs::<Value, Value>() {
            let Ok((k, _)) = pair else { continue };
            items.push(value(&k, resp3, depth)?);
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
        items.push(value(&v, resp3, depth)?);
    }
    Ok(Reply::Array(items))
}
