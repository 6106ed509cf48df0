//! The `struct` library Redis ships (Roberto Ierusalimschy's struct 1.7, with Redis's
//! offset check): `pack`, `unpack`, `size`, with the sizes and alignment of a 64-bit
//! little-endian Linux build, which is what Redis scripts see in practice.
//!
//! Formats: `>` `<` endianness, `![n]` alignment, `x` padding, `b/B h/H l/L T i/In`
//! integers (signed lowercase), `cn` chars (`c0`: whole string / previous number),
//! `s` zero-terminated string, `f` float, `d` double, space ignored.

use super::args::{arg_error, check_bytes, check_number, opt_integer};
use super::limit::{build_too_big, BUILD_LIMIT};
use super::lua_errors::raise_lua;
use mlua::{Lua, MultiValue, Table, Value};

const MAX_INT_SIZE: usize = 32;
/// The alignment of a double on x86-64 (struct cD's padding) and `!` alone.
const MAX_ALIGN: usize = 8;

pub fn table(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set(
        "pack",
        lua.create_function(|lua, args: MultiValue| {
            let args: Vec<Value> = args.into_iter().collect();
            pack(lua, &args)
        })?,
    )?;
    t.set(
        "unpack",
        lua.create_function(|lua, args: MultiValue| {
            let args: Vec<Value> = args.into_iter().collect();
            unpack(lua, &args)
        })?,
    )?;
    t.set(
        "size",
        lua.create_function(|lua, args: MultiValue| {
            let args: Vec<Value> = args.into_iter().collect();
            size(lua, &args)
        })?,
    )?;
    Ok(t)
}

#[derive(Clone, Copy, PartialEq)]
enum Endian {
    Big,
    Little,
}

struct Header {
    endian: Endian,
    align: usize,
}

impl Header {
    fn new() -> Header {
        Header {
            endian: Endian::Little,
            align: 1,
        }
    }
}

/// A format string read as C reads it: it ends at the first NUL.
struct Format {
    s: Vec<u8>,
    pos: usize,
}

impl Format {
    fn new(mut s: Vec<u8>) -> Format {
        if let Some(nul) = s.iter().position(|&c| c == 0) {
            s.truncate(nul);
        }
        Format { s, pos: 0 }
    }

    fn next(&mut self) -> Option<u8> {
        let c = self.s.get(self.pos).copied();
        self.pos += c.is_some() as usize;
        c
    }

    fn getnum(&mut self, lua: &Lua, default: usize) -> mlua::Result<usize> {
        if !self.s.get(self.pos).is_some_and(u8::is_ascii_digit) {
            return Ok(default);
        }
        let mut a: i64 = 0;
        while let Some(d) = self.s.get(self.pos).filter(|c| c.is_ascii_digit()) {
            let d = (d - b'0') as i64;
            if a > i32::MAX as i64 / 10 || a * 10 > i32::MAX as i64 - d {
                return Err(raise_lua(lua, "integral size overflow"));
            }
            a = a * 10 + d;
            self.pos += 1;
        }
        Ok(a as usize)
    }

    /// The size of option `opt` (reading its number), 0 for options without one.
    fn optsize(&mut self, lua: &Lua, opt: u8) -> mlua::Result<usize> {
        Ok(match opt {
            b'B' | b'b' => 1,
            b'H' | b'h' => 2,
            b'L' | b'l' | b'T' | b'd' => 8,
            b'f' => 4,
            b'x' => 1,
            b'c' => self.getnum(lua, 1)?,
            b'i' | b'I' => {
                let sz = self.getnum(lua, 4)?;
                if sz > MAX_INT_SIZE {
                    return Err(raise_lua(
                        lua,
                        &format!("integral size {sz} is larger than limit of {MAX_INT_SIZE}"),
                    ));
                }
                sz
            }
            _ => 0,
        })
    }

    /// `>`, `<`, `!n` and space; anything else is an invalid option.
    fn control(&mut self, lua: &Lua, fname: &str, opt: u8, h: &mut Header) -> mlua::Result<()> {
        match opt {
            b' ' => {}
            b'>' => h.endian = Endian::Big,
            b'<' => h.endian = Endian::Little,
            b'!' => {
                let a = self.getnum(lua, MAX_ALIGN)?;
                if a == 0 || a & (a - 1) != 0 {
                    return Err(raise_lua(
                        lua,
                        &format!("alignment {a} is not a power of 2"),
                    ));
                }
                h.align = a;
            }
            other => {
                let msg = format!("invalid format option '{}'", other as char);
                return Err(arg_error(lua, 1, fname, &msg));
            }
        }
        Ok(())
    }
}

/// Padding to align an item of `size` at `len` (C's arithmetic, also for sizes that
/// are not powers of two).
fn gettoalign(len: usize, h: &Header, opt: u8, size: usize) -> usize {
    if size == 0 || opt == b'c' {
        return 0;
    }
    let size = size.min(h.align);
    (size.wrapping_sub(len & (size - 1))) & (size - 1)
}

fn format_arg(lua: &Lua, args: &[Value], fname: &str) -> mlua::Result<Format> {
    Ok(Format::new(check_bytes(lua, args, 0, fname)?))
}

fn pack(lua: &Lua, args: &[Value]) -> mlua::Result<mlua::String> {
    let mut fmt = format_arg(lua, args, "pack")?;
    // C pushes a nil mark after the arguments: the first missing value is "nil".
    let mut args = args.to_vec();
    args.push(Value::Nil);
    let args = args.as_slice();
    let mut h = Header::new();
    let mut arg = 1; // 0-based index of the next value
    let mut out: Vec<u8> = Vec::new();
    while let Some(opt) = fmt.next() {
        if out.len() > BUILD_LIMIT {
            return Err(build_too_big());
        }
        let mut size = fmt.optsize(lua, opt)?;
        let pad = gettoalign(out.len(), &h, opt, size);
        out.resize(out.len() + pad, 0);
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let n = check_number(lua, args, arg, "pack")?;
                arg += 1;
                put_integer(n, h.endian, size, &mut out);
            }
            b'x' => out.push(0),
            b'f' => {
                let f = check_number(lua, args, arg, "pack")? as f32;
                arg += 1;
                out.extend_from_slice(&match h.endian {
                    Endian::Big => f.to_be_bytes(),
                    Endian::Little => f.to_le_bytes(),
                });
            }
            b'd' => {
                let d = check_number(lua, args, arg, "pack")?;
                arg += 1;
                out.extend_from_slice(&match h.endian {
                    Endian::Big => d.to_be_bytes(),
                    Endian::Little => d.to_le_bytes(),
                });
            }
            b'c' | b's' => {
                let s = check_bytes(lua, args, arg, "pack")?;
                arg += 1;
                if size == 0 {
                    size = s.len();
                }
                if s.len() < size {
                    // C checks after moving to the next argument: the number is one more.
                    return Err(arg_error(lua, arg + 1, "pack", "string too short"));
                }
                out.extend_from_slice(&s[..size]);
                if opt == b's' {
                    out.push(0);
                }
            }
            _ => fmt.control(lua, "pack", opt, &mut h)?,
        }
    }
    lua.create_string(&out)
}

/// C: a negative number goes through `long` (so -1 is all ones), a positive one
/// straight to `unsigned long`; bytes past the eighth are zero.
fn put_integer(n: f64, endian: Endian, size: usize, out: &mut Vec<u8>) {
    let mut value: u64 = if n < 0.0 {
        super::lua_numfmt::c_trunc(n) as u64
    } else {
        c_to_u64(n)
    };
    let mut bytes = vec![0u8; size];
    for i in 0..size {
        let at = match endian {
            Endian::Little => i,
            Endian::Big => size - 1 - i,
        };
        bytes[at] = (value & 0xff) as u8;
        value >>= 8;
    }
    out.extend_from_slice(&bytes);
}

/// C's `(unsigned long)x` on x86-64 for x >= 0 (gcc: values at or past 2^63 are taken
/// through a subtraction; out of range ends up as 2^63).
fn c_to_u64(x: f64) -> u64 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if x.is_nan() {
        return 1 << 63;
    }
    if x < TWO_63 {
        x as u64
    } else {
        let low = super::lua_numfmt::c_trunc(x - TWO_63) as u64;
        low ^ (1 << 63)
    }
}

fn get_integer(data: &[u8], endian: Endian, signed: bool, size: usize) -> f64 {
    let mut l: u64 = 0;
    for i in 0..size {
        let b = match endian {
            Endian::Big => data[i],
            Endian::Little => data[size - 1 - i],
        };
        l = (l << 8) | b as u64;
    }
    if !signed {
        return l as f64;
    }
    // C shifts by size*8-1 (mod 64 on x86 for sizes past 8).
    let mask = u64::MAX.wrapping_shl((size as u32).wrapping_mul(8).wrapping_sub(1));
    if l & mask != 0 {
        l |= mask;
    }
    l as i64 as f64
}

fn unpack(lua: &Lua, args: &[Value]) -> mlua::Result<MultiValue> {
    let mut fmt = format_arg(lua, args, "unpack")?;
    let data = check_bytes(lua, args, 1, "unpack")?;
    let ld = data.len();
    let start = opt_integer(lua, args, 2, "unpack", 1)?;
    if start == 0 {
        return Err(arg_error(lua, 3, "unpack", "offset must be 1 or greater"));
    }
    // C keeps the offset in a size_t: a negative one is huge, so too short below.
    let mut pos = (start as u64 as usize).wrapping_sub(1);
    let mut h = Header::new();
    let mut out: Vec<Value> = Vec::new();
    let too_short = |lua: &Lua| arg_error(lua, 2, "unpack", "data string too short");
    while let Some(opt) = fmt.next() {
        let mut size = fmt.optsize(lua, opt)?;
        pos = pos.wrapping_add(gettoalign(pos, &h, opt, size));
        if !(size <= ld && pos <= ld - size) {
            return Err(too_short(lua));
        }
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let signed = opt.is_ascii_lowercase();
                let n = get_integer(&data[pos..pos + size], h.endian, signed, size);
                out.push(Value::Number(n));
            }
            b'x' => {}
            b'f' => {
                let b: [u8; 4] = data[pos..pos + 4].try_into().expect("size checked");
                let f = match h.endian {
                    Endian::Big => f32::from_be_bytes(b),
                    Endian::Little => f32::from_le_bytes(b),
                };
                out.push(Value::Number(f as f64));
            }
            b'd' => {
                let b: [u8; 8] = data[pos..pos + 8].try_into().expect("size checked");
                let d = match h.endian {
                    Endian::Big => f64::from_be_bytes(b),
                    Endian::Little => f64::from_le_bytes(b),
                };
                out.push(Value::Number(d));
            }
            b'c' => {
                if size == 0 {
                    let previous = match out.last() {
                        Some(v @ (Value::Number(_) | Value::Integer(_) | Value::String(_))) => {
                            super::args::to_number(lua, v)
                        }
                        _ => None,
                    };
                    let Some(n) = previous else {
                        return Err(raise_lua(lua, "format 'c0' needs a previous size"));
                    };
                    out.pop();
                    size = super::lua_numfmt::c_trunc(n) as u64 as usize;
                    if !(size <= ld && pos <= ld - size) {
                        return Err(too_short(lua));
                    }
                }
                out.push(Value::String(lua.create_string(&data[pos..pos + size])?));
            }
            b's' => {
                let Some(len) = data[pos..].iter().position(|&c| c == 0) else {
                    return Err(raise_lua(lua, "unfinished string in data"));
                };
                out.push(Value::String(lua.create_string(&data[pos..pos + len])?));
                size = len + 1;
            }
            _ => fmt.control(lua, "unpack", opt, &mut h)?,
        }
        pos = pos.wrapping_add(size);
    }
    out.push(Value::Number(pos.wrapping_add(1) as i64 as f64));
    Ok(MultiValue::from_iter(out))
}

fn size(lua: &Lua, args: &[Value]) -> mlua::Result<i64> {
    let mut fmt = format_arg(lua, args, "size")?;
    let mut h = Header::new();
    let mut pos: usize = 0;
    while let Some(opt) = fmt.next() {
        let size = fmt.optsize(lua, opt)?;
        pos += gettoalign(pos, &h, opt, size);
        if opt == b's' {
            return Err(arg_error(lua, 1, "size", "option 's' has no fixed size"));
        } else if opt == b'c' && size == 0 {
            return Err(arg_error(lua, 1, "size", "option 'c0' has no fixed size"));
        }
        if !opt.is_ascii_alphanumeric() {
            fmt.control(lua, "size", opt, &mut h)?;
        }
        pos += size;
    }
    Ok(pos as i64)
}
