//! The `cjson` library Redis ships (lua-cjson 2.1 with its defaults), written here
//! because mlua does not bundle it: `encode`, `decode` and `null`.
//!
//! Defaults kept: numbers with `%.14g`, NaN/Inf refused, `/` escaped as `\/`, a table
//! is an array when every key is a positive integer and it is not excessively sparse
//! (max key > 2 x count and > 10 is an error), an empty table encodes as `{}`, nesting
//! is limited to 1000. JSON null decodes to `cjson.null` (a NULL light userdata).
//! Errors are returned as text; the engine's shim raises them at the caller's line.

use super::numfmt;
use mlua::{LightUserData, Lua, Table, Value};

const MAX_DEPTH: usize = 1000;

/// `cjson.null`.
pub fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

pub fn table(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set(
        "encode",
        lua.create_function(|lua, v: mlua::MultiValue| {
            let v = v.into_iter().next().unwrap_or(Value::Nil);
            let mut out = Vec::new();
            Ok(match encode(&v, 0, &mut out) {
                Ok(()) => (Some(lua.create_string(&out)?), None),
                Err(e) => (None, Some(e)),
            })
        })?,
    )?;
    t.set(
        "decode",
        lua.create_function(|lua, v: mlua::MultiValue| {
            let v = v.into_iter().next().unwrap_or(Value::Nil);
            let Value::String(s) = v else {
                let got = if v.is_nil() {
                    "no value"
                } else {
                    v.type_name()
                };
                return Ok((
                    Value::Nil,
                    Some(format!(
                        "bad argument #1 to 'decode' (string expected, got {got})"
                    )),
                ));
            };
            let bytes = s.as_bytes().to_vec();
            let mut p = Parser {
                lua,
                s: &bytes,
                pos: 0,
            };
            Ok(match p.document() {
                Ok(v) => (v, None),
                Err(DecodeError::Lua(e)) => return Err(e),
                Err(DecodeError::Syntax(e)) => (Value::Nil, Some(e)),
            })
        })?,
    )?;
    t.set("null", null())?;
    Ok(t)
}

fn encode(v: &Value, depth: usize, out: &mut Vec<u8>) -> Result<(), String> {
    match v {
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Integer(i) => out.extend_from_slice(numfmt::lua_number(*i as f64).as_bytes()),
        Value::Number(n) => {
            if !n.is_finite() {
                return Err("Cannot serialise number: must not be NaN or Inf".into());
            }
            out.extend_from_slice(numfmt::lua_number(*n).as_bytes())
        }
        Value::String(s) => encode_string(&s.as_bytes(), out),
        Value::Table(t) => encode_table(t, depth + 1, out)?,
        other => {
            return Err(format!(
                "Cannot serialise {}: type not supported",
                other.type_name()
            ))
        }
    }
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

fn encode_table(t: &Table, depth: usize, out: &mut Vec<u8>) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(format!("Cannot serialise, excessive nesting ({depth})"));
    }
    // Array detection as lua-cjson's lua_array_length.
    let mut max = 0usize;
    let mut count = 0usize;
    let mut is_array = true;
    let mut pairs = Vec::new();
    for pair in t.pairs::<Value, Value>() {
        let (k, v) = pair.map_err(|e| e.to_string())?;
        if is_array {
            let idx = match &k {
                Value::Integer(i) if *i >= 1 => Some(*i as usize),
                Value::Number(n) if *n >= 1.0 && n.fract() == 0.0 => Some(*n as usize),
                _ => None,
            };
            match idx {
                Some(i) => {
                    max = max.max(i);
                    count += 1;
                }
                None => is_array = false,
            }
        }
        pairs.push((k, v));
    }
    if is_array && max > 0 {
        if max > count * 2 && max > 10 {
            return Err("Cannot serialise table: excessively sparse array".into());
        }
        out.push(b'[');
        for i in 1..=max {
            if i > 1 {
                out.push(b',');
            }
            let v: Value = t.raw_get(i).map_err(|e| e.to_string())?;
            encode(&v, depth, out)?;
        }
        out.push(b']');
        return Ok(());
    }
    out.push(b'{');
    for (n, (k, v)) in pairs.iter().enumerate() {
        if n > 0 {
            out.push(b',');
        }
        match k {
            Value::String(s) => encode_string(&s.as_bytes(), out),
            Value::Integer(i) => encode_string(numfmt::lua_number(*i as f64).as_bytes(), out),
            Value::Number(x) => encode_string(numfmt::lua_number(*x).as_bytes(), out),
            _ => return Err("Cannot serialise table: key must be a number or string".into()),
        }
        out.push(b':');
        encode(v, depth, out)?;
    }
    out.push(b'}');
    Ok(())
}

enum DecodeError {
    Syntax(String),
    Lua(mlua::Error),
}

impl From<mlua::Error> for DecodeError {
    fn from(e: mlua::Error) -> Self {
        DecodeError::Lua(e)
    }
}

struct Parser<'a> {
    lua: &'a Lua,
    s: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    fn document(&mut self) -> Result<Value, DecodeError> {
        let v = self.value(0)?;
        self.skip_ws();
        if self.pos < self.s.len() {
            return Err(self.expected("the end"));
        }
        Ok(v)
    }

    fn skip_ws(&mut self) {
        while self
            .s
            .get(self.pos)
            .is_some_and(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r'))
        {
            self.pos += 1;
        }
    }

    /// lua-cjson's message: what was expected, what token was found, 1-based position.
    fn expected(&self, what: &str) -> DecodeError {
        let found = match self.s.get(self.pos) {
            None => "the end",
            Some(b'{') => "'{'",
            Some(b'}') => "'}'",
            Some(b'[') => "'['",
            Some(b']') => "']'",
            Some(b',') => "comma",
            Some(b':') => "colon",
            Some(b'"') => "string",
            Some(b'-' | b'0'..=b'9') => "number",
            _ => "invalid token",
        };
        DecodeError::Syntax(format!(
            "Expected {what} but found {found} at character {}",
            self.pos + 1
        ))
    }

    fn value(&mut self, depth: usize) -> Result<Value, DecodeError> {
        self.skip_ws();
        match self.s.get(self.pos) {
            Some(b'{') => self.object(depth + 1),
            Some(b'[') => self.array(depth + 1),
            Some(b'"') => Ok(Value::String(self.lua.create_string(self.string()?)?)),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b't') if self.s[self.pos..].starts_with(b"true") => {
                self.pos += 4;
                Ok(Value::Boolean(true))
            }
            Some(b'f') if self.s[self.pos..].starts_with(b"false") => {
                self.pos += 5;
                Ok(Value::Boolean(false))
            }
            Some(b'n') if self.s[self.pos..].starts_with(b"null") => {
                self.pos += 4;
                Ok(null())
            }
            _ => Err(self.expected("value")),
        }
    }

    fn nesting(&self, depth: usize) -> Result<(), DecodeError> {
        if depth > MAX_DEPTH {
            return Err(DecodeError::Syntax(format!(
                "Found too many nested data structures ({depth}) at character {}",
                self.pos + 1
            )));
        }
        Ok(())
    }

    fn array(&mut self, depth: usize) -> Result<Value, DecodeError> {
        self.nesting(depth)?;
        self.pos += 1;
        let t = self.lua.create_table()?;
        self.skip_ws();
        if self.s.get(self.pos) == Some(&b']') {
            self.pos += 1;
            return Ok(Value::Table(t));
        }
        let mut i = 1;
        loop {
            let v = self.value(depth)?;
            t.raw_set(i, v)?;
            i += 1;
            self.skip_ws();
            match self.s.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Value::Table(t));
                }
                _ => return Err(self.expected("comma or array end")),
            }
        }
    }

    fn object(&mut self, depth: usize) -> Result<Value, DecodeError> {
        self.nesting(depth)?;
        self.pos += 1;
        let t = self.lua.create_table()?;
        self.skip_ws();
        if self.s.get(self.pos) == Some(&b'}') {
            self.pos += 1;
            return Ok(Value::Table(t));
        }
        loop {
            self.skip_ws();
            if self.s.get(self.pos) != Some(&b'"') {
                return Err(self.expected("object key string"));
            }
            let k = self.string()?;
            self.skip_ws();
            if self.s.get(self.pos) != Some(&b':') {
                return Err(self.expected("colon"));
            }
            self.pos += 1;
            let v = self.value(depth)?;
            t.raw_set(self.lua.create_string(k)?, v)?;
            self.skip_ws();
            match self.s.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Value::Table(t));
                }
                _ => return Err(self.expected("comma or object end")),
            }
        }
    }

    fn number(&mut self) -> Result<Value, DecodeError> {
        let start = self.pos;
        while self
            .s
            .get(self.pos)
            .is_some_and(|c| c.is_ascii_digit() || matches!(c, b'-' | b'+' | b'.' | b'e' | b'E'))
        {
            self.pos += 1;
        }
        let text = std::str::from_utf8(&self.s[start..self.pos]).unwrap_or("");
        match text.parse::<f64>() {
            Ok(n) => Ok(Value::Number(n)),
            Err(_) => {
                self.pos = start;
                Err(self.expected("value"))
            }
        }
    }

    fn string(&mut self) -> Result<Vec<u8>, DecodeError> {
        let start = self.pos;
        self.pos += 1;
        let mut out = Vec::new();
        loop {
            let Some(&c) = self.s.get(self.pos) else {
                self.pos = start;
                return Err(DecodeError::Syntax(format!(
                    "Expected value but found unexpected end of string at character {}",
                    self.pos + 1
                )));
            };
            self.pos += 1;
            match c {
                b'"' => return Ok(out),
                b'\\' => {
                    let Some(&e) = self.s.get(self.pos) else {
                        continue;
                    };
                    self.pos += 1;
                    match e {
                        b'"' | b'\\' | b'/' => out.push(e),
                        b'b' => out.push(0x08),
                        b'f' => out.push(0x0c),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'u' => {
                            let cp = self.unicode_escape().ok_or_else(|| {
                                DecodeError::Syntax(format!(
                                    "Expected value but found invalid unicode escape code at character {}",
                                    start + 1
                                ))
                            })?;
                            let mut buf = [0u8; 4];
                            out.extend_from_slice(cp.encode_utf8(&mut buf).as_bytes());
                        }
                        _ => {
                            return Err(DecodeError::Syntax(format!(
                                "Expected value but found invalid escape code at character {}",
                                start + 1
                            )))
                        }
                    }
                }
                c => out.push(c),
            }
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let h = self.s.get(self.pos..self.pos + 4)?;
        let v = u32::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok()?;
        self.pos += 4;
        Some(v)
    }

    /// `\uXXXX`, with a surrogate pair when the first is a high surrogate.
    fn unicode_escape(&mut self) -> Option<char> {
        let hi = self.hex4()?;
        if (0xD800..0xDC00).contains(&hi) {
            if self.s.get(self.pos..self.pos + 2) != Some(b"\\u") {
                return None;
            }
            self.pos += 2;
            let lo = self.hex4()?;
            if !(0xDC00..0xE000).contains(&lo) {
                return None;
            }
            char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))
        } else {
            char::from_u32(hi)
        }
    }
}
