//! The `cmsgpack` library Redis ships (lua-cmsgpack 0.4.0): `pack`, `unpack`,
//! `unpack_one`, `unpack_limit`, with its exact encodings and quirks, because scripts
//! (BullMQ's among them) store what it packs and compare bytes.
//!
//! What Redis's C code does, kept here:
//! - a number that is an exact 64-bit integer packs as the smallest int form;
//!   any other number as a float32 when it round-trips, else a float64;
//! - a table whose keys are exactly 1..N packs as an array (read with metamethods,
//!   up to its length `#t`), any other table as a map in `next` order;
//! - tables nested 16 deep pack as nil (so a cycle packs, as a deep copy);
//! - functions, userdata and threads pack as nil;
//! - bin, ext and fixext types do not unpack ("Bad data format in input.");
//! - uint 64 unpacks through a signed 64-bit integer, int 64 through a double.

use super::args::{arg_error, check_bytes, check_integer, opt_integer};
use super::limit::{build_too_big, BUILD_LIMIT};
use super::lua_errors::raise_lua;
use mlua::{Lua, MultiValue, Table, Value};

const MAX_NESTING: usize = 16;

/// Lua 5.1's C stack limit (LUAI_MAXCSTACK): past it `unpack` cannot return all values.
const MAX_RETURNS: usize = 8000;

pub fn table(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set("pack", lua.create_function(pack)?)?;
    t.set(
        "unpack",
        lua.create_function(|lua, args: MultiValue| {
            let args: Vec<Value> = args.into_iter().collect();
            unpack_full(lua, &args, "unpack", 0, 0)
        })?,
    )?;
    t.set(
        "unpack_one",
        lua.create_function(|lua, args: MultiValue| {
            let args: Vec<Value> = args.into_iter().collect();
            let offset = opt_integer(lua, &args, 1, "unpack_one", 0)?;
            unpack_full(lua, &args, "unpack_one", 1, offset)
        })?,
    )?;
    t.set(
        "unpack_limit",
        lua.create_function(|lua, args: MultiValue| {
            let args: Vec<Value> = args.into_iter().collect();
            let limit = check_integer(lua, &args, 1, "unpack_limit")?;
            let offset = opt_integer(lua, &args, 2, "unpack_limit", 0)?;
            unpack_full(lua, &args, "unpack_limit", limit, offset)
        })?,
    )?;
    t.set("_NAME", "cmsgpack")?;
    t.set("_VERSION", "lua-cmsgpack 0.4.0")?;
    t.set("_COPYRIGHT", "Copyright (C) 2012, Salvatore Sanfilippo")?;
    t.set("_DESCRIPTION", "MessagePack C implementation for Lua")?;
    Ok(t)
}

/// `cmsgpack.pack(...)`: every argument packed, concatenated.
fn pack(lua: &Lua, args: MultiValue) -> mlua::Result<mlua::String> {
    if args.is_empty() {
        return Err(arg_error(lua, 0, "pack", "MessagePack pack needs input."));
    }
    let mut out = Vec::new();
    for v in args.iter() {
        encode(v, 0, &mut out)?;
    }
    lua.create_string(&out)
}

fn encode(v: &Value, level: usize, out: &mut Vec<u8>) -> mlua::Result<()> {
    if out.len() > BUILD_LIMIT {
        return Err(build_too_big());
    }
    match v {
        Value::String(s) => encode_bytes(&s.as_bytes(), out),
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(i) => encode_int(*i, out),
        Value::Number(n) => encode_number(*n, out),
        Value::Table(t) if level < MAX_NESTING => encode_table(t, level, out)?,
        _ => out.push(0xc0),
    }
    Ok(())
}

fn encode_bytes(s: &[u8], out: &mut Vec<u8>) {
    let len = s.len();
    if len < 32 {
        out.push(0xa0 | len as u8);
    } else if len <= 0xff {
        out.extend_from_slice(&[0xd9, len as u8]);
    } else if len <= 0xffff {
        out.push(0xda);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(0xdb);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
    out.extend_from_slice(s);
}

/// A number that is an exact int64 packs as an integer (C: `(int64_t)n == n`, which
/// on x86 is false for 2^63 and NaN); anything else as a float.
fn encode_number(n: f64, out: &mut Vec<u8>) {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if (-TWO_63..TWO_63).contains(&n) && n.trunc() == n {
        encode_int(n as i64, out);
    } else {
        let f = n as f32;
        if f as f64 == n {
            out.push(0xca);
            out.extend_from_slice(&f.to_be_bytes());
        } else {
            out.push(0xcb);
            out.extend_from_slice(&n.to_be_bytes());
        }
    }
}

fn encode_int(n: i64, out: &mut Vec<u8>) {
    if n >= 0 {
        if n <= 127 {
            out.push(n as u8);
        } else if n <= 0xff {
            out.extend_from_slice(&[0xcc, n as u8]);
        } else if n <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else if n <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2_147_483_648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// Two walks, as the C code: one to tell an array from a map (and count), one to
/// write. Nothing is collected, so a big table holds no more than one key and value.
fn encode_table(t: &Table, level: usize, out: &mut Vec<u8>) -> mlua::Result<()> {
    let mut count: i64 = 0;
    let mut is_array = true;
    let mut max: i64 = 0;
    for pair in t.pairs::<Value, Value>() {
        let (k, _) = pair?;
        count += 1;
        if is_array {
            // C: a number key that is a positive C int (the max is kept in an int).
            let n = match &k {
                Value::Integer(i) => Some(*i as f64),
                Value::Number(n) => Some(*n),
                _ => None,
            };
            match n {
                Some(n) if n > 0.0 && n <= i32::MAX as f64 && n.trunc() == n => {
                    max = max.max(n as i64);
                }
                _ => is_array = false,
            }
        }
    }
    if is_array && max == count {
        let len = t.raw_len();
        encode_array_header(len as u64, out);
        for i in 1..=len {
            // lua_gettable: metamethods apply, as in C.
            let v: Value = t.get(i)?;
            encode(&v, level + 1, out)?;
        }
        return Ok(());
    }
    encode_map_header(count as u64, out);
    for pair in t.pairs::<Value, Value>() {
        let (k, v) = pair?;
        encode(&k, level + 1, out)?;
        encode(&v, level + 1, out)?;
    }
    Ok(())
}

fn encode_array_header(n: u64, out: &mut Vec<u8>) {
    if n <= 15 {
        out.push(0x90 | n as u8);
    } else if n <= 0xffff {
        out.push(0xdc);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(0xdd);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

fn encode_map_header(n: u64, out: &mut Vec<u8>) {
    if n <= 15 {
        out.push(0x80 | n as u8);
    } else if n <= 0xffff {
        out.push(0xde);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(0xdf);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

/// Why decoding stopped.
enum DecodeError {
    /// Not enough bytes ("Missing bytes in input.").
    Eof,
    /// An unknown type byte ("Bad data format in input.").
    BadFormat,
    /// A Lua error while building the value (a nil or NaN map key, memory).
    Lua(mlua::Error),
}

impl From<mlua::Error> for DecodeError {
    fn from(e: mlua::Error) -> Self {
        DecodeError::Lua(e)
    }
}

struct Cursor<'a> {
    lua: &'a Lua,
    s: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn left(&self) -> usize {
        self.s.len() - self.pos
    }

    fn need(&self, n: usize) -> Result<(), DecodeError> {
        if self.left() < n {
            Err(DecodeError::Eof)
        } else {
            Ok(())
        }
    }

    /// The `n` bytes after the type byte, consuming the type byte and them.
    fn take(&mut self, n: usize) -> Result<&[u8], DecodeError> {
        self.need(1 + n)?;
        let bytes = &self.s[self.pos + 1..self.pos + 1 + n];
        self.pos += 1 + n;
        Ok(bytes)
    }

    fn be(&mut self, n: usize) -> Result<u64, DecodeError> {
        Ok(self
            .take(n)?
            .iter()
            .fold(0u64, |acc, &b| (acc << 8) | b as u64))
    }

    fn string(&mut self, header: usize, len: usize) -> Result<Value, DecodeError> {
        self.need(header + len)?;
        let s = &self.s[self.pos + header..self.pos + header + len];
        self.pos += header + len;
        Ok(Value::String(self.lua.create_string(s)?))
    }

    /// One value. Iterative, with its own stack of open arrays and maps: a crafted
    /// input nests them thousands deep, and recursion here would overflow the thread's
    /// stack (it did: one EVAL ended the process). Redis's C decoder stops at its Lua
    /// stack's limit, 3,999 levels; so does this one, with the same error.
    fn value(&mut self) -> Result<Value, DecodeError> {
        let mut open: Vec<Open> = Vec::new();
        loop {
            let mut v = match self.item()? {
                Item::Value(v) => v,
                Item::Array(_) if open.len() >= MAX_DEPTH => {
                    let msg = "stack overflow (in function mp_decode_to_lua_array)";
                    return Err(DecodeError::Lua(raise_lua(self.lua, msg)));
                }
                Item::Map(_) if open.len() >= MAX_DEPTH => {
                    let msg = "stack overflow (in function mp_decode_to_lua_hash)";
                    return Err(DecodeError::Lua(raise_lua(self.lua, msg)));
                }
                Item::Array(len) => {
                    // A header cannot promise more elements than bytes are left.
                    let t = self
                        .lua
                        .create_table_with_capacity(len.min(self.left()), 0)?;
                    if len == 0 {
                        Value::Table(t)
                    } else {
                        open.push(Open::Array { t, len, next: 1 });
                        continue;
                    }
                }
                Item::Map(len) => {
                    let t = self.lua.create_table()?;
                    if len == 0 {
                        Value::Table(t)
                    } else {
                        open.push(Open::Map {
                            t,
                            left: len,
                            key: None,
                        });
                        continue;
                    }
                }
            };
            // Hand the value to the innermost open container; each one it completes
            // becomes the value for the next one out.
            loop {
                match open.last_mut() {
                    None => return Ok(v),
                    Some(Open::Array { t, len, next }) => {
                        t.raw_set(*next, v)?;
                        *next += 1;
                        if *next <= *len {
                            break;
                        }
                    }
                    Some(Open::Map { t, left, key }) => {
                        let Some(k) = key.take() else {
                            *key = Some(v);
                            break;
                        };
                        // lua_settable's own errors (no position: they come from C).
                        match &k {
                            Value::Nil => return Err(lua_error("table index is nil")),
                            Value::Number(x) if x.is_nan() => {
                                return Err(lua_error("table index is NaN"))
                            }
                            _ => {}
                        }
                        t.raw_set(k, v)?;
                        *left -= 1;
                        if *left > 0 {
                            break;
                        }
                    }
                }
                v = match open.pop() {
                    Some(Open::Array { t, .. } | Open::Map { t, .. }) => Value::Table(t),
                    None => unreachable!("the loop returned above"),
                };
            }
        }
    }

    /// One scalar, or the header of an array or map (consumed; its elements follow).
    fn item(&mut self) -> Result<Item, DecodeError> {
        self.need(1)?;
        let b = self.s[self.pos];
        let n = |x: f64| Ok(Item::Value(Value::Number(x)));
        match b {
            0xcc => n(self.be(1)? as f64),
            0xd0 => n(self.be(1)? as u8 as i8 as f64),
            0xcd => n(self.be(2)? as f64),
            0xd1 => n(self.be(2)? as u16 as i16 as f64),
            0xce => n(self.be(4)? as f64),
            0xd2 => n(self.be(4)? as u32 as i32 as f64),
            0xcf => n(self.be(8)? as i64 as f64),
            0xd3 => n(self.be(8)? as i64 as f64),
            0xc0 => {
                self.pos += 1;
                Ok(Item::Value(Value::Nil))
            }
            0xc3 | 0xc2 => {
                self.pos += 1;
                Ok(Item::Value(Value::Boolean(b == 0xc3)))
            }
            0xca => n(f32::from_bits(self.be(4)? as u32) as f64),
            0xcb => n(f64::from_bits(self.be(8)?)),
            0xd9 => {
                self.need(2)?;
                let len = self.s[self.pos + 1] as usize;
                self.string(2, len).map(Item::Value)
            }
            0xda => {
                self.need(3)?;
                let len = u16::from_be_bytes([self.s[self.pos + 1], self.s[self.pos + 2]]);
                self.string(3, len as usize).map(Item::Value)
            }
            0xdb => {
                let len = self.be(4)? as usize;
                self.string(0, len).map(Item::Value)
            }
            0xdc => {
                let len = self.be(2)? as usize;
                Ok(Item::Array(len))
            }
            0xdd => {
                let len = self.be(4)? as usize;
                Ok(Item::Array(len))
            }
            0xde => {
                let len = self.be(2)? as usize;
                Ok(Item::Map(len))
            }
            0xdf => {
                let len = self.be(4)? as usize;
                Ok(Item::Map(len))
            }
            b if b & 0x80 == 0 => {
                self.pos += 1;
                n(b as f64)
            }
            b if b & 0xe0 == 0xe0 => {
                self.pos += 1;
                n(b as i8 as f64)
            }
            b if b & 0xe0 == 0xa0 => self.string(1, (b & 0x1f) as usize).map(Item::Value),
            b if b & 0xf0 == 0x90 => {
                self.pos += 1;
                Ok(Item::Array((b & 0xf) as usize))
            }
            b if b & 0xf0 == 0x80 => {
                self.pos += 1;
                Ok(Item::Map((b & 0xf) as usize))
            }
            _ => Err(DecodeError::BadFormat),
        }
    }
}

/// What `Cursor::item` read.
enum Item {
    Value(Value),
    Array(usize),
    Map(usize),
}

/// An array or map whose elements are still being read.
enum Open {
    Array {
        t: Table,
        len: usize,
        next: usize,
    },
    Map {
        t: Table,
        left: usize,
        key: Option<Value>,
    },
}

/// Containers nested deeper than this fail, as Redis's decoder does when its Lua stack
/// is full (3,999 nested arrays decode there; 4,000 do not).
const MAX_DEPTH: usize = 3_999;

fn lua_error(msg: &str) -> DecodeError {
    DecodeError::Lua(mlua::Error::external(super::lua_errors::ScriptError::Lua(
        msg.to_string(),
    )))
}

/// lua-cmsgpack's `mp_unpack_full`. `limit == 0 && offset == 0` decodes everything and
/// returns no offset (so `unpack_limit(s, 0)` behaves as `unpack`).
fn unpack_full(
    lua: &Lua,
    args: &[Value],
    name: &str,
    limit: i64,
    offset: i64,
) -> mlua::Result<MultiValue> {
    let s = check_bytes(lua, args, 0, name)?;
    let decode_all = limit == 0 && offset == 0;
    if offset < 0 || limit < 0 {
        // C prints the input length where it means the limit; kept.
        return Err(raise_lua(
            lua,
            &format!(
                "Invalid request to unpack with offset of {} and limit of {}.",
                offset as i32,
                s.len() as i32
            ),
        ));
    }
    if offset as u64 > s.len() as u64 {
        return Err(raise_lua(
            lua,
            &format!(
                "Start offset {} greater than input length {}.",
                offset as i32,
                s.len() as i32
            ),
        ));
    }
    let limit = if decode_all { i32::MAX as i64 } else { limit };
    let mut c = Cursor {
        lua,
        s: &s,
        pos: offset as usize,
    };
    let mut out = Vec::new();
    while c.left() > 0 && (out.len() as i64) < limit {
        if out.len() + 2 > MAX_RETURNS {
            return Err(raise_lua(
                lua,
                "stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)",
            ));
        }
        match c.value() {
            Ok(v) => out.push(v),
            Err(DecodeError::Eof) => return Err(raise_lua(lua, "Missing bytes in input.")),
            Err(DecodeError::BadFormat) => return Err(raise_lua(lua, "Bad data format in input.")),
            Err(DecodeError::Lua(e)) => return Err(e),
        }
    }
    if !decode_all {
        let next = if c.left() == 0 { -1 } else { c.pos as i64 };
        out.insert(0, Value::Integer(next));
    }
    Ok(MultiValue::from_iter(out))
}
