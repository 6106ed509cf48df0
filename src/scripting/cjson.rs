//! The `cjson` library Redis ships (lua-cjson 2.1.0), written here because mlua does
//! not bundle it: `encode`, `decode`, `null`, `new`, and the settings Redis exposes
//! (`encode_sparse_array`, `encode_max_depth`, `decode_max_depth`,
//! `encode_number_precision`, `encode_keep_buffer`, `encode_invalid_numbers`,
//! `decode_invalid_numbers`). Decoding lives in `cjson_decode.rs`.
//!
//! The settings belong to one module table (as the C closures share one config), so a
//! setting a script changes stays until SCRIPT FLUSH resets the VM, as in Redis;
//! `cjson.new()` gives a table with its own defaults. Redis's cjson has no
//! `decode_array_with_array_mt` (that is OpenResty's fork), so neither has this one.

use super::args::{arg_error, check_integer};
use super::cjson_decode;
use super::limit::{build_too_big, BUILD_LIMIT};
use super::lua_errors::raise_lua;
use super::lua_numfmt;
use mlua::{Function, LightUserData, Lua, MultiValue, Table, Value};
use parking_lot::Mutex;
use std::sync::Arc;

/// One module table's settings, with lua-cjson's defaults.
#[derive(Clone)]
pub(super) struct Config {
    sparse_convert: bool,
    sparse_ratio: i64,
    sparse_safe: i64,
    encode_max_depth: i64,
    pub(super) decode_max_depth: i64,
    /// 0: refuse NaN/Inf, 1: write them ("nan", "inf"), 2: write null.
    encode_invalid_numbers: usize,
    number_precision: i64,
    keep_buffer: bool,
    pub(super) decode_invalid_numbers: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            sparse_convert: false,
            sparse_ratio: 2,
            sparse_safe: 10,
            encode_max_depth: 1000,
            decode_max_depth: 1000,
            encode_invalid_numbers: 0,
            number_precision: 14,
            keep_buffer: true,
            decode_invalid_numbers: true,
        }
    }
}

type Shared = Arc<Mutex<Config>>;

/// `cjson.null`.
pub fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

/// A cjson module table with its own settings.
pub fn table(lua: &Lua) -> mlua::Result<Table> {
    let cfg: Shared = Arc::new(Mutex::new(Config::default()));
    let t = lua.create_table()?;
    let c = cfg.clone();
    t.set(
        "encode",
        lua.create_function(move |lua, args: MultiValue| {
            if args.len() != 1 {
                return Err(arg_error(lua, 1, "encode", "expected 1 argument"));
            }
            let cfg = c.lock().clone();
            let mut out = Vec::new();
            encode(lua, &cfg, &args[0], &mut out)?;
            lua.create_string(&out)
        })?,
    )?;
    let c = cfg.clone();
    t.set(
        "decode",
        lua.create_function(move |lua, args: MultiValue| {
            let cfg = c.lock().clone();
            cjson_decode::decode(lua, &cfg, &args)
        })?,
    )?;
    let c = cfg.clone();
    t.set(
        "encode_sparse_array",
        lua.create_function(move |lua, args: MultiValue| {
            let name = "encode_sparse_array";
            arg_count(lua, &args, 3, name)?;
            let mut cfg = c.lock();
            let mut convert = cfg.sparse_convert as usize;
            let convert_out = enum_option(lua, &args, 0, name, &mut convert, BOOL_OPTIONS)?;
            cfg.sparse_convert = convert == 1;
            let ratio = int_option(lua, &args, 1, name, &mut cfg.sparse_ratio, 0, i32::MAX)?;
            let safe = int_option(lua, &args, 2, name, &mut cfg.sparse_safe, 0, i32::MAX)?;
            Ok((convert_out, ratio, safe))
        })?,
    )?;
    let c = cfg.clone();
    t.set(
        "encode_max_depth",
        lua.create_function(move |lua, args: MultiValue| {
            let name = "encode_max_depth";
            arg_count(lua, &args, 1, name)?;
            int_option(
                lua,
                &args,
                0,
                name,
                &mut c.lock().encode_max_depth,
                1,
                i32::MAX,
            )
        })?,
    )?;
    let c = cfg.clone();
    t.set(
        "decode_max_depth",
        lua.create_function(move |lua, args: MultiValue| {
            let name = "decode_max_depth";
            arg_count(lua, &args, 1, name)?;
            int_option(
                lua,
                &args,
                0,
                name,
                &mut c.lock().decode_max_depth,
                1,
                i32::MAX,
            )
        })?,
    )?;
    let c = cfg.clone();
    t.set(
        "encode_number_precision",
        lua.create_function(move |lua, args: MultiValue| {
            let name = "encode_number_precision";
            arg_count(lua, &args, 1, name)?;
            int_option(lua, &args, 0, name, &mut c.lock().number_precision, 1, 14)
        })?,
    )?;
    let c = cfg.clone();
    t.set(
        "encode_keep_buffer",
        lua.create_function(move |lua, args: MultiValue| {
            let name = "encode_keep_buffer";
            arg_count(lua, &args, 1, name)?;
            let mut cfg = c.lock();
            let mut keep = cfg.keep_buffer as usize;
            let out = enum_option(lua, &args, 0, name, &mut keep, BOOL_OPTIONS)?;
            // Only the buffer's lifetime changes in C; output is the same.
            cfg.keep_buffer = keep == 1;
            Ok(out)
        })?,
    )?;
    let c = cfg.clone();
    t.set(
        "encode_invalid_numbers",
        lua.create_function(move |lua, args: MultiValue| {
            let name = "encode_invalid_numbers";
            arg_count(lua, &args, 1, name)?;
            let options: &[&str] = &["off", "on", "null"];
            enum_option(
                lua,
                &args,
                0,
                name,
                &mut c.lock().encode_invalid_numbers,
                options,
            )
        })?,
    )?;
    let c = cfg.clone();
    t.set(
        "decode_invalid_numbers",
        lua.create_function(move |lua, args: MultiValue| {
            let name = "decode_invalid_numbers";
            arg_count(lua, &args, 1, name)?;
            let mut cfg = c.lock();
            let mut on = cfg.decode_invalid_numbers as usize;
            let out = enum_option(lua, &args, 0, name, &mut on, BOOL_OPTIONS)?;
            cfg.decode_invalid_numbers = on == 1;
            Ok(out)
        })?,
    )?;
    t.set("new", lua.create_function(|lua, ()| table(lua))?)?;
    t.set("null", null())?;
    t.set("_NAME", "cjson")?;
    t.set("_VERSION", "2.1.0")?;
    Ok(t)
}

const BOOL_OPTIONS: &[&str] = &["off", "on"];

/// `json_arg_init`: at most `max` arguments.
fn arg_count(lua: &Lua, args: &MultiValue, max: usize, name: &str) -> mlua::Result<()> {
    if args.len() > max {
        return Err(arg_error(lua, max + 1, name, "found too many arguments"));
    }
    Ok(())
}

/// `json_integer_option`: sets from argument `i` unless nil, returns the setting. C
/// blames argument #1 for a value out of range, whichever it was; kept.
fn int_option(
    lua: &Lua,
    args: &MultiValue,
    i: usize,
    name: &str,
    setting: &mut i64,
    min: i32,
    max: i32,
) -> mlua::Result<i64> {
    let args: Vec<Value> = args.iter().cloned().collect();
    if !matches!(args.get(i), None | Some(Value::Nil)) {
        // C stores the checked integer in an int.
        let value = check_integer(lua, &args, i, name)? as i32;
        if !(min <= value && value <= max) {
            let msg = format!("expected integer between {min} and {max}");
            return Err(arg_error(lua, 1, name, &msg));
        }
        *setting = value as i64;
    }
    Ok(*setting)
}

/// `json_enum_option` with `bool_true == 1`: a boolean, or one of `options` by name;
/// returns a boolean for settings 0 and 1, else the option's name.
fn enum_option(
    lua: &Lua,
    args: &MultiValue,
    i: usize,
    name: &str,
    setting: &mut usize,
    options: &[&str],
) -> mlua::Result<Value> {
    match args.get(i) {
        None | Some(Value::Nil) => {}
        Some(Value::Boolean(b)) => *setting = *b as usize,
        Some(v) => {
            let text = match v {
                Value::String(s) => s.as_bytes().to_vec(),
                Value::Integer(n) => lua_numfmt::lua_number(*n as f64).into_bytes(),
                Value::Number(n) => lua_numfmt::lua_number(*n).into_bytes(),
                other => {
                    let msg = format!("string expected, got {}", other.type_name());
                    return Err(arg_error(lua, i + 1, name, &msg));
                }
            };
            match options.iter().position(|o| o.as_bytes() == text.as_slice()) {
                Some(p) => *setting = p,
                None => {
                    let msg = format!("invalid option '{}'", String::from_utf8_lossy(&text));
                    return Err(arg_error(lua, i + 1, name, &msg));
                }
            }
        }
    }
    Ok(if *setting <= 1 {
        Value::Boolean(*setting == 1)
    } else {
        Value::String(lua.create_string(options[*setting])?)
    })
}

/// Lua's type name as C's `lua_typename` gives it (light userdata is "userdata").
fn c_type_name(v: &Value) -> &'static str {
    match v {
        Value::LightUserData(_) => "userdata",
        other => other.type_name(),
    }
}

fn exception(lua: &Lua, v: &Value, reason: &str) -> mlua::Error {
    raise_lua(
        lua,
        &format!("Cannot serialise {}: {reason}", c_type_name(v)),
    )
}

/// Lua 5.1's C stack limit: C's lua_checkstack refuses to nest deeper than this allows.
const MAX_C_STACK: usize = 8000;

/// A table being written: an array with its length and the next index, or an object
/// with the key last written (Nil before the first), walked with Lua's `next` so
/// that a big table never has all its keys held at once (each held value is an mlua
/// reference, and those are bounded).
enum Frame {
    Array(Table, usize, usize),
    Object(Table, Value),
}

/// Writes `root` as JSON. Iterative (an explicit stack of open tables), so nesting as
/// deep as the settings allow cannot overflow Rust's stack.
fn encode(lua: &Lua, cfg: &Config, root: &Value, out: &mut Vec<u8>) -> mlua::Result<()> {
    let mut stack: Vec<Frame> = Vec::new();
    let mut depth: i64 = 0;
    // Lua stack slots C would hold: the argument, then per open table its element
    // (array) or key and value (object).
    let mut held: usize = 1;
    let mut next = Some(root.clone());
    let lua_next: Function = lua.globals().raw_get("next")?;
    loop {
        if out.len() > BUILD_LIMIT {
            return Err(build_too_big());
        }
        if let Some(v) = next.take() {
            match &v {
                Value::Table(t) => {
                    depth += 1;
                    if depth > cfg.encode_max_depth || held + 3 > MAX_C_STACK {
                        return Err(raise_lua(
                            lua,
                            &format!("Cannot serialise, excessive nesting ({depth})"),
                        ));
                    }
                    match array_length(lua, cfg, t, &v)? {
                        Some(len) if len > 0 => {
                            out.push(b'[');
                            held += 1;
                            stack.push(Frame::Array(t.clone(), len, 0));
                        }
                        _ => {
                            out.push(b'{');
                            held += 2;
                            stack.push(Frame::Object(t.clone(), Value::Nil));
                        }
                    }
                }
                scalar => encode_scalar(lua, cfg, scalar, out)?,
            }
        }
        let Some(frame) = stack.last_mut() else {
            return Ok(());
        };
        match frame {
            Frame::Array(t, len, i) => {
                if *i == *len {
                    out.push(b']');
                    held -= 1;
                } else {
                    if *i > 0 {
                        out.push(b',');
                    }
                    *i += 1;
                    next = Some(t.raw_get(*i)?);
                    continue;
                }
            }
            Frame::Object(t, last) => {
                let (k, v): (Value, Value) = lua_next.call((t.clone(), last.clone()))?;
                if k.is_nil() {
                    out.push(b'}');
                    held -= 2;
                } else {
                    if !last.is_nil() {
                        out.push(b',');
                    }
                    encode_key(lua, cfg, &k, out)?;
                    *last = k;
                    next = Some(v);
                    continue;
                }
            }
        }
        stack.pop();
        depth -= 1;
    }
}

fn encode_scalar(lua: &Lua, cfg: &Config, v: &Value, out: &mut Vec<u8>) -> mlua::Result<()> {
    match v {
        Value::String(s) => encode_string(&s.as_bytes(), out),
        Value::Integer(i) => encode_number(lua, cfg, v, *i as f64, out)?,
        Value::Number(n) => encode_number(lua, cfg, v, *n, out)?,
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
        other => return Err(exception(lua, other, "type not supported")),
    }
    Ok(())
}

/// An object key and its colon: numbers are written as numbers inside quotes.
fn encode_key(lua: &Lua, cfg: &Config, k: &Value, out: &mut Vec<u8>) -> mlua::Result<()> {
    match k {
        Value::Integer(i) => {
            out.push(b'"');
            encode_number(lua, cfg, k, *i as f64, out)?;
            out.extend_from_slice(b"\":");
        }
        Value::Number(n) => {
            out.push(b'"');
            encode_number(lua, cfg, k, *n, out)?;
            out.extend_from_slice(b"\":");
        }
        Value::String(s) => {
            encode_string(&s.as_bytes(), out);
            out.push(b':');
        }
        other => {
            return Err(exception(
                lua,
                other,
                "table key must be a number or string",
            ))
        }
    }
    Ok(())
}

/// `lua_array_length`: Some(max key) when every key is an integer >= 1 and the table
/// is not excessively sparse; None for an object.
fn array_length(lua: &Lua, cfg: &Config, t: &Table, v: &Value) -> mlua::Result<Option<usize>> {
    let mut max: i64 = 0;
    let mut items: i64 = 0;
    for pair in t.pairs::<Value, Value>() {
        let (k, _) = pair?;
        let k = match k {
            Value::Integer(i) => i as f64,
            Value::Number(n) => n,
            _ => return Ok(None),
        };
        if k == 0.0 || k.floor() != k || k < 1.0 {
            return Ok(None);
        }
        // C keeps the max in an int.
        if k > max as f64 {
            max = lua_numfmt::c_trunc(k) as i32 as i64;
        }
        items += 1;
    }
    if cfg.sparse_ratio > 0 && max > items * cfg.sparse_ratio && max > cfg.sparse_safe {
        if !cfg.sparse_convert {
            return Err(exception(lua, v, "excessively sparse array"));
        }
        return Ok(None);
    }
    Ok(Some(max.max(0) as usize))
}

fn encode_number(
    lua: &Lua,
    cfg: &Config,
    v: &Value,
    n: f64,
    out: &mut Vec<u8>,
) -> mlua::Result<()> {
    match cfg.encode_invalid_numbers {
        0 if !n.is_finite() => return Err(exception(lua, v, "must not be NaN or Inf")),
        1 if n.is_nan() => {
            out.extend_from_slice(b"nan");
            return Ok(());
        }
        2 if !n.is_finite() => {
            out.extend_from_slice(b"null");
            return Ok(());
        }
        _ => {}
    }
    out.extend_from_slice(lua_numfmt::fmt_g(n, cfg.number_precision as usize).as_bytes());
    Ok(())
}

fn encode_string(s: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &c in s {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            c if c < 0x20 || c == 0x7f => {
                out.extend_from_slice(format!("\\u{c:04x}").as_bytes());
            }
            c => out.push(c),
        }
    }
    out.push(b'"');
}
