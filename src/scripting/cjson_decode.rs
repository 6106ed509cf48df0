//! `cjson.decode`: lua-cjson 2.1.0's tokenizer and parser, with its error texts
//! (`Expected colon but found T_NUMBER at character 6`) and its C-string view of the
//! input (a NUL byte ends the text, as the C code reads up to the terminator).
//!
//! Numbers are read as C's strtod reads them; with `decode_invalid_numbers` on (the
//! default) that admits `+1`, leading zeros, hex, `inf` and `nan`.

use super::args::{arg_error, check_bytes};
use super::cjson::{null, Config};
use super::lua_errors::raise_lua;
use mlua::{Lua, MultiValue, Value};

/// Lua 5.1's C stack limit: C's lua_checkstack refuses to nest deeper than this allows.
const MAX_C_STACK: usize = 8000;

pub(super) fn decode(lua: &Lua, cfg: &Config, args: &MultiValue) -> mlua::Result<Value> {
    if args.len() != 1 {
        return Err(arg_error(lua, 1, "decode", "expected 1 argument"));
    }
    let args: Vec<Value> = args.iter().cloned().collect();
    let data = check_bytes(lua, &args, 0, "decode")?;
    if data.len() >= 2 && (data[0] == 0 || data[1] == 0) {
        return Err(raise_lua(
            lua,
            "JSON parser does not support UTF-16 or UTF-32",
        ));
    }
    let mut p = Parser {
        lua,
        cfg,
        s: &data,
        ptr: 0,
        depth: 0,
        held: 1,
    };
    let token = p.next_token();
    let v = p.value(token)?;
    let token = p.next_token();
    if !matches!(token.kind, Kind::End) {
        return Err(p.parse_error("the end", &token));
    }
    Ok(v)
}

enum Kind {
    ObjBegin,
    ObjEnd,
    ArrBegin,
    ArrEnd,
    Str(Vec<u8>),
    Number(f64),
    Boolean(bool),
    Null,
    Colon,
    Comma,
    End,
    Error(&'static str),
}

impl Kind {
    /// What an error message says was found.
    fn name(&self) -> &'static str {
        match self {
            Kind::ObjBegin => "T_OBJ_BEGIN",
            Kind::ObjEnd => "T_OBJ_END",
            Kind::ArrBegin => "T_ARR_BEGIN",
            Kind::ArrEnd => "T_ARR_END",
            Kind::Str(_) => "T_STRING",
            Kind::Number(_) => "T_NUMBER",
            Kind::Boolean(_) => "T_BOOLEAN",
            Kind::Null => "T_NULL",
            Kind::Colon => "T_COLON",
            Kind::Comma => "T_COMMA",
            Kind::End => "T_END",
            Kind::Error(e) => e,
        }
    }
}

struct Token {
    kind: Kind,
    /// 0-based position of the token (of the fault, for an error token).
    index: usize,
}

struct Parser<'a> {
    lua: &'a Lua,
    cfg: &'a Config,
    s: &'a [u8],
    ptr: usize,
    depth: i64,
    /// Lua stack slots C would hold at this point (the argument, open tables, keys).
    held: usize,
}

impl Parser<'_> {
    /// The byte at `i`, 0 past the end (the C string's terminator).
    fn at(&self, i: usize) -> u8 {
        self.s.get(i).copied().unwrap_or(0)
    }

    fn parse_error(&self, expected: &str, token: &Token) -> mlua::Error {
        raise_lua(
            self.lua,
            &format!(
                "Expected {expected} but found {} at character {}",
                token.kind.name(),
                token.index + 1
            ),
        )
    }

    fn error_token(&self, msg: &'static str) -> Token {
        Token {
            kind: Kind::Error(msg),
            index: self.ptr,
        }
    }

    fn next_token(&mut self) -> Token {
        while matches!(self.at(self.ptr), b' ' | b'\t' | b'\n' | b'\r') {
            self.ptr += 1;
        }
        let index = self.ptr;
        let single = |kind| Some(kind);
        let kind = match self.at(self.ptr) {
            0 => {
                return Token {
                    kind: Kind::End,
                    index,
                }
            }
            b'{' => single(Kind::ObjBegin),
            b'}' => single(Kind::ObjEnd),
            b'[' => single(Kind::ArrBegin),
            b']' => single(Kind::ArrEnd),
            b',' => single(Kind::Comma),
            b':' => single(Kind::Colon),
            b'"' | b'+' | b'-' | b'0'..=b'9' | b'f' | b'i' | b'I' | b'n' | b'N' | b't' => None,
            _ => return self.error_token("invalid token"),
        };
        if let Some(kind) = kind {
            self.ptr += 1;
            return Token { kind, index };
        }
        let ch = self.at(self.ptr);
        let rest = &self.s[self.ptr.min(self.s.len())..];
        if ch == b'"' {
            return self.string_token();
        }
        if ch == b'-' || ch.is_ascii_digit() {
            if !self.cfg.decode_invalid_numbers && self.is_invalid_number() {
                return self.error_token("invalid number");
            }
            return self.number_token();
        }
        for (word, kind, len) in [
            (&b"true"[..], Kind::Boolean(true), 4),
            (&b"false"[..], Kind::Boolean(false), 5),
            (&b"null"[..], Kind::Null, 4),
        ] {
            if rest.starts_with(word) {
                self.ptr += len;
                return Token { kind, index };
            }
        }
        if self.cfg.decode_invalid_numbers && self.is_invalid_number() {
            return self.number_token();
        }
        self.error_token("invalid token")
    }

    /// `json_is_invalid_number`: what strtod takes but strict JSON does not.
    fn is_invalid_number(&self) -> bool {
        let mut p = self.ptr;
        if self.at(p) == b'+' {
            return true;
        }
        if self.at(p) == b'-' {
            p += 1;
        }
        let c = self.at(p);
        if c == b'0' {
            let c2 = self.at(p + 1);
            return c2 | 0x20 == b'x' || c2.is_ascii_digit();
        }
        if c <= b'9' {
            return false;
        }
        let word = |w: &[u8]| (0..3).all(|i| self.at(p + i).to_ascii_lowercase() == w[i]);
        word(b"inf") || word(b"nan")
    }

    fn number_token(&mut self) -> Token {
        let index = self.ptr;
        match strtod(&self.s[self.ptr.min(self.s.len())..]) {
            Some((n, len)) => {
                self.ptr += len;
                Token {
                    kind: Kind::Number(n),
                    index,
                }
            }
            None => self.error_token("invalid number"),
        }
    }

    fn string_token(&mut self) -> Token {
        let index = self.ptr;
        self.ptr += 1;
        let mut out = Vec::new();
        loop {
            let mut ch = self.at(self.ptr);
            if ch == b'"' {
                break;
            }
            if ch == 0 {
                return self.error_token("unexpected end of string");
            }
            if ch == b'\\' {
                ch = match self.at(self.ptr + 1) {
                    b'"' => b'"',
                    b'\\' => b'\\',
                    b'/' => b'/',
                    b'b' => 0x08,
                    b't' => b'\t',
                    b'n' => b'\n',
                    b'f' => 0x0c,
                    b'r' => b'\r',
                    b'u' => {
                        if self.unicode_escape(&mut out) {
                            continue;
                        }
                        return self.error_token("invalid unicode escape code");
                    }
                    _ => return self.error_token("invalid escape code"),
                };
                self.ptr += 1;
            }
            out.push(ch);
            self.ptr += 1;
        }
        self.ptr += 1;
        Token {
            kind: Kind::Str(out),
            index,
        }
    }

    fn hex4(&self, at: usize) -> Option<u32> {
        (0..4).try_fold(0u32, |acc, i| {
            let d = (self.at(at + i) as char).to_digit(16)?;
            Some(acc << 4 | d)
        })
    }

    /// `\uXXXX` (a surrogate pair when high then low) as UTF-8; false when invalid.
    fn unicode_escape(&mut self, out: &mut Vec<u8>) -> bool {
        let Some(mut cp) = self.hex4(self.ptr + 2) else {
            return false;
        };
        let mut len = 6;
        if cp & 0xF800 == 0xD800 {
            if cp & 0x400 != 0 || self.at(self.ptr + 6) != b'\\' || self.at(self.ptr + 7) != b'u' {
                return false;
            }
            let Some(low) = self.hex4(self.ptr + 8) else {
                return false;
            };
            if low & 0xFC00 != 0xDC00 {
                return false;
            }
            cp = (((cp & 0x3FF) << 10) | (low & 0x3FF)) + 0x10000;
            len = 12;
        }
        // Every code point here is valid: surrogates were handled above.
        let Some(c) = char::from_u32(cp) else {
            return false;
        };
        let mut buf = [0u8; 4];
        out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        self.ptr += len;
        true
    }

    fn descend(&mut self, slots: usize) -> mlua::Result<()> {
        self.depth += 1;
        if self.depth <= self.cfg.decode_max_depth && self.held + slots <= MAX_C_STACK {
            return Ok(());
        }
        Err(raise_lua(
            self.lua,
            &format!(
                "Found too many nested data structures ({}) at character {}",
                self.depth, self.ptr
            ),
        ))
    }

    /// Parses the value that starts with `token`. Iterative (an explicit stack of open
    /// containers), so nesting as deep as the settings allow cannot overflow Rust's
    /// stack.
    fn value(&mut self, mut token: Token) -> mlua::Result<Value> {
        let mut open: Vec<Open> = Vec::new();
        loop {
            // A value starts at `token`: a scalar, or a container to open.
            let mut v = match token.kind {
                Kind::Str(s) => Value::String(self.lua.create_string(&s)?),
                Kind::Number(n) => Value::Number(n),
                Kind::Boolean(b) => Value::Boolean(b),
                Kind::Null => null(),
                Kind::ObjBegin => {
                    self.descend(3)?;
                    let t = self.lua.create_table()?;
                    self.held += 1;
                    let next = self.next_token();
                    if matches!(next.kind, Kind::ObjEnd) {
                        self.ascend();
                        Value::Table(t)
                    } else {
                        let key = self.key(next)?;
                        open.push(Open::Object(t, key));
                        token = self.next_token();
                        continue;
                    }
                }
                Kind::ArrBegin => {
                    self.descend(2)?;
                    let t = self.lua.create_table()?;
                    self.held += 1;
                    let next = self.next_token();
                    if matches!(next.kind, Kind::ArrEnd) {
                        self.ascend();
                        Value::Table(t)
                    } else {
                        open.push(Open::Array(t, 1));
                        token = next;
                        continue;
                    }
                }
                _ => return Err(self.parse_error("value", &token)),
            };
            // A complete value: store it in the innermost container, closing those
            // that end here, until one needs another value (or none is left).
            loop {
                let Some(parent) = open.last_mut() else {
                    return Ok(v);
                };
                let next = match parent {
                    Open::Array(t, i) => {
                        t.raw_set(*i, v)?;
                        *i += 1;
                        let next = self.next_token();
                        match next.kind {
                            Kind::ArrEnd => None,
                            Kind::Comma => Some(self.next_token()),
                            _ => return Err(self.parse_error("comma or array end", &next)),
                        }
                    }
                    Open::Object(t, key) => {
                        t.raw_set(key.clone(), v)?;
                        self.held -= 1;
                        let next = self.next_token();
                        match next.kind {
                            Kind::ObjEnd => None,
                            Kind::Comma => {
                                let key_token = self.next_token();
                                *key = self.key(key_token)?;
                                Some(self.next_token())
                            }
                            _ => return Err(self.parse_error("comma or object end", &next)),
                        }
                    }
                };
                match next {
                    Some(t) => {
                        token = t;
                        break;
                    }
                    None => {
                        let (Open::Array(t, _) | Open::Object(t, _)) =
                            open.pop().expect("a parent was just seen");
                        self.ascend();
                        v = Value::Table(t);
                    }
                }
            }
        }
    }

    /// An object key and its colon; the value's token comes next.
    fn key(&mut self, token: Token) -> mlua::Result<mlua::String> {
        let Kind::Str(key) = &token.kind else {
            return Err(self.parse_error("object key string", &token));
        };
        let key = self.lua.create_string(key)?;
        self.held += 1;
        let colon = self.next_token();
        if !matches!(colon.kind, Kind::Colon) {
            return Err(self.parse_error("colon", &colon));
        }
        Ok(key)
    }

    fn ascend(&mut self) {
        self.depth -= 1;
        self.held -= 1;
    }
}

/// A container being filled: an array with its next index, an object with the key
/// of the value being read.
enum Open {
    Array(mlua::Table, i64),
    Object(mlua::Table, mlua::String),
}

/// C's strtod on the text at `s` (which ends at a NUL or the slice's end): the value
/// and how many bytes it read, or None when no number starts here.
pub(super) fn strtod(s: &[u8]) -> Option<(f64, usize)> {
    // Only these bytes can be part of a number (or inf / nan(...)); stopping at the
    // first other one keeps each number O(its length).
    let end = s
        .iter()
        .position(|&c| {
            !(c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.' | b'(' | b')' | b'_'))
        })
        .unwrap_or(s.len());
    let s = &s[..end];
    let mut i = 0;
    let negative = match s.first() {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let signed = |x: f64| if negative { -x } else { x };
    let lower = |from: usize, word: &[u8]| {
        s.len() >= from + word.len() && s[from..from + word.len()].eq_ignore_ascii_case(word)
    };
    if lower(i, b"infinity") {
        return Some((signed(f64::INFINITY), i + 8));
    }
    if lower(i, b"inf") {
        return Some((signed(f64::INFINITY), i + 3));
    }
    if lower(i, b"nan") {
        let mut len = i + 3;
        if s.get(len) == Some(&b'(') {
            if let Some(close) = s[len..].iter().position(|&c| c == b')') {
                if s[len + 1..len + close]
                    .iter()
                    .all(|c| c.is_ascii_alphanumeric() || *c == b'_')
                {
                    len += close + 1;
                }
            }
        }
        return Some((signed(f64::NAN), len));
    }
    if s.get(i) == Some(&b'0') && matches!(s.get(i + 1), Some(b'x' | b'X')) {
        if let Some((x, len)) = hex_float(&s[i + 2..]) {
            return Some((signed(x), i + 2 + len));
        }
        // "0x" without hex digits: strtod reads the "0".
        return Some((signed(0.0), i + 1));
    }
    let digits = |from: usize| s[from..].iter().take_while(|c| c.is_ascii_digit()).count();
    let int_len = digits(i);
    let mut j = i + int_len;
    let mut frac_len = 0;
    if s.get(j) == Some(&b'.') {
        frac_len = digits(j + 1);
        if int_len + frac_len > 0 {
            j += 1 + frac_len;
        }
    }
    if int_len + frac_len == 0 {
        return None;
    }
    if matches!(s.get(j), Some(b'e' | b'E')) {
        let mut k = j + 1;
        if matches!(s.get(k), Some(b'+' | b'-')) {
            k += 1;
        }
        let exp_len = digits(k);
        if exp_len > 0 {
            j = k + exp_len;
        }
    }
    let text = std::str::from_utf8(&s[i..j]).ok()?;
    let x: f64 = text.parse().ok()?;
    Some((signed(x), j))
}

/// The part of a hex float after "0x": digits, an optional fraction, an optional
/// binary exponent `p[+-]n`.
fn hex_float(s: &[u8]) -> Option<(f64, usize)> {
    let mut value = 0f64;
    let mut i = 0;
    let mut any = false;
    while let Some(d) = s.get(i).and_then(|&c| (c as char).to_digit(16)) {
        value = value * 16.0 + d as f64;
        i += 1;
        any = true;
    }
    if s.get(i) == Some(&b'.') {
        let mut scale = 1.0 / 16.0;
        let mut k = i + 1;
        let mut frac = false;
        while let Some(d) = s.get(k).and_then(|&c| (c as char).to_digit(16)) {
            value += d as f64 * scale;
            scale /= 16.0;
            k += 1;
            frac = true;
        }
        if any || frac {
            i = k;
            any = true;
        }
    }
    if !any {
        return None;
    }
    if matches!(s.get(i), Some(b'p' | b'P')) {
        let mut k = i + 1;
        let neg = match s.get(k) {
            Some(b'-') => {
                k += 1;
                true
            }
            Some(b'+') => {
                k += 1;
                false
            }
            _ => false,
        };
        let start = k;
        let mut exp: i32 = 0;
        while let Some(d) = s.get(k).filter(|c| c.is_ascii_digit()) {
            exp = exp.saturating_mul(10).saturating_add((d - b'0') as i32);
            k += 1;
        }
        if k > start {
            value *= 2f64.powi(if neg { -exp } else { exp });
            i = k;
        }
    }
    Some((value, i))
}

#[cfg(test)]
mod tests {
    use super::strtod;

    #[test]
    fn strtod_reads_what_c_reads() {
        assert_eq!(strtod(b"12,"), Some((12.0, 2)));
        assert_eq!(strtod(b"-5e3]"), Some((-5000.0, 4)));
        assert_eq!(strtod(b"1.e"), Some((1.0, 2)));
        assert_eq!(strtod(b"1e"), Some((1.0, 1)));
        assert_eq!(strtod(b"0x1F"), Some((31.0, 4)));
        assert_eq!(strtod(b"0xg"), Some((0.0, 1)));
        assert_eq!(strtod(b"-Infinity"), Some((f64::NEG_INFINITY, 9)));
        assert_eq!(strtod(b"inf"), Some((f64::INFINITY, 3)));
        assert!(strtod(b"nan").is_some_and(|(x, n)| x.is_nan() && n == 3));
        assert_eq!(strtod(b"-"), None);
        assert_eq!(strtod(b"."), None);
        assert_eq!(strtod(b"0123"), Some((123.0, 4)));
    }
}
