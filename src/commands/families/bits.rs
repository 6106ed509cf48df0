//! Bitmap commands over string values, as Redis 7.0's bitops.c answers them: SETBIT,
//! GETBIT, BITCOUNT and BITPOS (byte or bit ranges), BITOP, BITFIELD and BITFIELD_RO.
//! Bit 0 is the most significant bit of the first byte. A write past the end pads the
//! string with zero bytes; an offset whose byte is at or past `proto-max-bulk-len` is
//! refused before anything grows.

use crate::commands::notify::{self as nt, notify};
use crate::commands::{eq_ignore_case, int_arg, parse_i64, CmdResult, Ctx};
use crate::protocol::{errors, Reply};
use crate::store::{Entry, Slot, Value, ValueRef};
use bytes::Bytes;

const BAD_OFFSET: &str = "ERR bit offset is not an integer or out of range";

/// A bit offset argument (Redis's getBitOffsetFromArgument): a non-negative integer
/// whose byte is below `proto-max-bulk-len`; with `hash_bits`, BITFIELD's `#n` form
/// (n times the field's width).
fn bit_offset(ctx: &Ctx, arg: &[u8], hash_bits: Option<u32>) -> Result<u64, Reply> {
    let bad = || Reply::error(BAD_OFFSET);
    let (digits, times) = match (arg.first(), hash_bits) {
        (Some(b'#'), Some(bits)) => (&arg[1..], i64::from(bits)),
        _ => (arg, 1),
    };
    let n = parse_i64(digits).ok_or_else(bad)?.wrapping_mul(times);
    let max = ctx.shared.config.proto_max_bulk_len as i64;
    if n < 0 || (n >> 3) >= max {
        return Err(bad());
    }
    Ok(n as u64)
}

/// The string at `key` for a read: `None` when missing, WRONGTYPE for another type.
fn read_str<T>(ctx: &Ctx, key: &[u8], f: impl FnOnce(&[u8]) -> T) -> Result<Option<T>, Reply> {
    match ctx.db().get(key, ctx.now_ms) {
        None => Ok(None),
        Some(e) => match e.value() {
            ValueRef::Str(s) => Ok(Some(f(s))),
            _ => Err(errors::wrongtype()),
        },
    }
}

/// The string at `key` grown (zero-padded) so that bit `max_bit` exists, created when
/// missing (Redis's lookupStringForBitCommand); `f` gets the bytes and whether the
/// string was created or grew.
fn write_str<T>(
    ctx: &Ctx,
    key: &[u8],
    max_bit: u64,
    f: impl FnOnce(&mut [u8], bool) -> T,
) -> Result<T, Reply> {
    let need = (max_bit >> 3) as usize + 1;
    match ctx.db().entry(key, ctx.now_ms) {
        Slot::Occupied(mut e) => {
            let ValueRef::Str(s) = e.value() else {
                return Err(errors::wrongtype());
            };
            let len = s.len();
            let grew = need > len;
            Ok(f(e.str_resize(len.max(need)), grew))
        }
        Slot::Vacant(v) => {
            ctx.shared.fence.check_has_ttl()?;
            let mut s = vec![0u8; need];
            let out = f(&mut s, true);
            v.insert(Entry::new(Value::Str(Bytes::from(s))));
            Ok(out)
        }
    }
}

/// SETBIT key offset value: the bit's old value.
pub fn setbit(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let offset = bit_offset(ctx, &args[2], None)?;
    let bad_bit = || Reply::error("ERR bit is not an integer or out of range");
    let on = parse_i64(&args[3]).ok_or_else(bad_bit)?;
    if on & !1 != 0 {
        return Err(bad_bit());
    }
    let reply = write_str(ctx, &args[1], offset, |s, _| {
        let byte = &mut s[(offset >> 3) as usize];
        let mask = 0x80u8 >> (offset & 7);
        let old = *byte & mask != 0;
        if on == 1 {
            *byte |= mask;
        } else {
            *byte &= !mask;
        }
        Reply::Integer(old as i64)
    })?;
    notify(ctx, nt::STRING, "setbit", &args[1]);
    Ok(reply)
}

/// GETBIT key offset: 0 past the end and for a missing key.
pub fn getbit(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let offset = bit_offset(ctx, &args[2], None)?;
    let bit = read_str(ctx, &args[1], |s| {
        s.get((offset >> 3) as usize)
            .is_some_and(|b| b & (0x80 >> (offset & 7)) != 0)
    })?;
    Ok(Reply::Integer(bit.unwrap_or(false) as i64))
}

/// A BITCOUNT / BITPOS range resolved against a string of `len` bytes: the first and
/// last bit, both included (`None`: empty).
fn bit_range(start: i64, end: i64, len: usize, in_bits: bool) -> Option<(u64, u64)> {
    let total = if in_bits { len as i64 * 8 } else { len as i64 };
    let fix = |i: i64| if i < 0 { (total + i).max(0) } else { i };
    let start = fix(start);
    let end = fix(end).min(total - 1);
    if start > end {
        return None;
    }
    if in_bits {
        Some((start as u64, end as u64))
    } else {
        Some((start as u64 * 8, end as u64 * 8 + 7))
    }
}

/// BIT or BYTE (any case), else a syntax error.
fn unit_arg(arg: &[u8]) -> Result<bool, Reply> {
    if eq_ignore_case(arg, "bit") {
        Ok(true)
    } else if eq_ignore_case(arg, "byte") {
        Ok(false)
    } else {
        Err(errors::syntax())
    }
}

/// The bits of `s[byte]` that lie in [first, last].
fn in_range_mask(byte: u64, first: u64, last: u64) -> u8 {
    let lo = if byte == first >> 3 { first & 7 } else { 0 };
    let hi = if byte == last >> 3 { last & 7 } else { 7 };
    (0xffu8 >> lo) & (0xffu8 << (7 - hi))
}

/// BITCOUNT key [start end [BYTE|BIT]]
pub fn bitcount(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let e = ctx.db().get(&args[1], ctx.now_ms);
    let Some(e) = e else {
        return Ok(Reply::Integer(0));
    };
    let ValueRef::Str(s) = e.value() else {
        return Err(errors::wrongtype());
    };
    let range = match args.len() {
        2 => bit_range(0, -1, s.len(), false),
        4 | 5 => {
            let start = int_arg(&args[2])?;
            let end = int_arg(&args[3])?;
            if start < 0 && end < 0 && start > end {
                return Ok(Reply::Integer(0));
            }
            let in_bits = match args.get(4) {
                Some(a) => unit_arg(a)?,
                None => false,
            };
            bit_range(start, end, s.len(), in_bits)
        }
        _ => return Err(errors::syntax()),
    };
    let Some((first, last)) = range else {
        return Ok(Reply::Integer(0));
    };
    let (fb, lb) = ((first >> 3) as usize, (last >> 3) as usize);
    let mut count = popcount(&s[fb..=lb]);
    let edge = |byte: usize| {
        let outside = !in_range_mask(byte as u64, first, last);
        u64::from((s[byte] & outside).count_ones())
    };
    count -= edge(fb);
    if lb != fb {
        count -= edge(lb);
    }
    Ok(Reply::Integer(count as i64))
}

fn popcount(bytes: &[u8]) -> u64 {
    let mut chunks = bytes.chunks_exact(8);
    let mut n: u64 = chunks
        .by_ref()
        .map(|c| u64::from(u64::from_ne_bytes(c.try_into().unwrap()).count_ones()))
        .sum();
    n += chunks
        .remainder()
        .iter()
        .map(|b| u64::from(b.count_ones()))
        .sum::<u64>();
    n
}

/// BITPOS key bit [start [end [BYTE|BIT]]]: the first bit set to `bit` in the range;
/// -1 when none. Looking for a 0 with no end given, a string of ones answers the bit
/// right after it (the string is as if padded with zeros).
pub fn bitpos(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let bit = int_arg(&args[2])?;
    if bit != 0 && bit != 1 {
        return Err(Reply::error("ERR The bit argument must be 1 or 0."));
    }
    let e = ctx.db().get(&args[1], ctx.now_ms);
    let Some(e) = e else {
        return Ok(Reply::Integer(if bit == 1 { -1 } else { 0 }));
    };
    let ValueRef::Str(s) = e.value() else {
        return Err(errors::wrongtype());
    };
    let (range, end_given) = match args.len() {
        3 => (bit_range(0, -1, s.len(), false), false),
        4..=6 => {
            let start = int_arg(&args[3])?;
            let in_bits = match args.get(5) {
                Some(a) => unit_arg(a)?,
                None => false,
            };
            let end = match args.get(4) {
                Some(a) => Some(int_arg(a)?),
                None => None,
            };
            (
                bit_range(start, end.unwrap_or(-1), s.len(), in_bits),
                end.is_some(),
            )
        }
        _ => return Err(errors::syntax()),
    };
    let Some((first, last)) = range else {
        return Ok(Reply::Integer(-1));
    };
    let want_one = bit == 1;
    let skip = if want_one { 0u8 } else { 0xff };
    for byte in (first >> 3)..=(last >> 3) {
        let b = s[byte as usize];
        if b == skip && byte != first >> 3 && byte != last >> 3 {
            continue;
        }
        let mask = in_range_mask(byte, first, last);
        let hits = if want_one { b & mask } else { !b & mask };
        if hits != 0 {
            return Ok(Reply::Integer(
                (byte * 8 + u64::from(hits.leading_zeros())) as i64,
            ));
        }
    }
    Ok(Reply::Integer(if want_one || end_given {
        -1
    } else {
        ((last >> 3) as i64 + 1) * 8
    }))
}

/// BITOP AND|OR|XOR|NOT destkey key...: the destination's length (the longest
/// source; shorter ones count as zero-padded). An all-empty result deletes it.
pub fn bitop(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    #[derive(PartialEq)]
    enum Op {
        And,
        Or,
        Xor,
        Not,
    }
    let op = &args[1];
    let op = if eq_ignore_case(op, "and") {
        Op::And
    } else if eq_ignore_case(op, "or") {
        Op::Or
    } else if eq_ignore_case(op, "xor") {
        Op::Xor
    } else if eq_ignore_case(op, "not") {
        Op::Not
    } else {
        return Err(errors::syntax());
    };
    if op == Op::Not && args.len() != 4 {
        return Err(Reply::error(
            "ERR BITOP NOT must be called with a single source key.",
        ));
    }
    let mut sources: Vec<Option<Bytes>> = Vec::with_capacity(args.len() - 3);
    for key in &args[3..] {
        let source = read_str(ctx, key, Bytes::copy_from_slice)?;
        if source.is_none() {
            nt::key_miss(ctx, key);
        }
        sources.push(source);
    }
    let maxlen = sources.iter().flatten().map(Bytes::len).max().unwrap_or(0);
    let dest = &args[2];
    if maxlen == 0 {
        if ctx.db().remove(dest, ctx.now_ms) {
            notify(ctx, nt::GENERIC, "del", dest);
        }
        return Ok(Reply::Integer(0));
    }
    let byte_of = |src: &Option<Bytes>, j: usize| src.as_ref().and_then(|s| s.get(j).copied());
    let mut out = vec![0u8; maxlen];
    for (j, o) in out.iter_mut().enumerate() {
        let first = byte_of(&sources[0], j).unwrap_or(0);
        *o = match op {
            Op::Not => !first,
            Op::And => sources[1..]
                .iter()
                .fold(first, |acc, s| acc & byte_of(s, j).unwrap_or(0)),
            Op::Or => sources[1..]
                .iter()
                .fold(first, |acc, s| acc | byte_of(s, j).unwrap_or(0)),
            Op::Xor => sources[1..]
                .iter()
                .fold(first, |acc, s| acc ^ byte_of(s, j).unwrap_or(0)),
        };
    }
    ctx.shared.fence.check_has_ttl()?;
    ctx.db()
        .insert(dest, Entry::new(Value::Str(Bytes::from(out))));
    notify(ctx, nt::STRING, "set", dest);
    Ok(Reply::Integer(maxlen as i64))
}

#[derive(Clone, Copy, PartialEq)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

#[derive(Clone, Copy, PartialEq)]
enum FieldOp {
    Get,
    Set,
    Incrby,
}

#[derive(Clone, Copy)]
struct Field {
    op: FieldOp,
    signed: bool,
    bits: u32,
    offset: u64,
    value: i64,
    overflow: Overflow,
}

/// A field type: `i1`..`i64` or `u1`..`u63`.
fn field_type(arg: &[u8]) -> Result<(bool, u32), Reply> {
    let bad = || {
        Reply::error(
            "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.",
        )
    };
    let signed = match arg.first() {
        Some(b'i') => true,
        Some(b'u') => false,
        _ => return Err(bad()),
    };
    let bits = parse_i64(&arg[1..]).ok_or_else(bad)?;
    if bits < 1 || bits > if signed { 64 } else { 63 } {
        return Err(bad());
    }
    Ok((signed, bits as u32))
}

fn parse_fields(ctx: &Ctx, args: &[Bytes]) -> Result<Vec<Field>, Reply> {
    let mut out = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut j = 2;
    while j < args.len() {
        let left = args.len() - j - 1;
        let sub = &args[j];
        let op = if eq_ignore_case(sub, "get") && left >= 2 {
            FieldOp::Get
        } else if eq_ignore_case(sub, "set") && left >= 3 {
            FieldOp::Set
        } else if eq_ignore_case(sub, "incrby") && left >= 3 {
            FieldOp::Incrby
        } else if eq_ignore_case(sub, "overflow") && left >= 1 {
            let kind = &args[j + 1];
            overflow = if eq_ignore_case(kind, "wrap") {
                Overflow::Wrap
            } else if eq_ignore_case(kind, "sat") {
                Overflow::Sat
            } else if eq_ignore_case(kind, "fail") {
                Overflow::Fail
            } else {
                return Err(Reply::error("ERR Invalid OVERFLOW type specified"));
            };
            j += 2;
            continue;
        } else {
            return Err(errors::syntax());
        };
        let (signed, bits) = field_type(&args[j + 1])?;
        let offset = bit_offset(ctx, &args[j + 2], Some(bits))?;
        let value = if op == FieldOp::Get {
            0
        } else {
            int_arg(&args[j + 3])?
        };
        out.push(Field {
            op,
            signed,
            bits,
            offset,
            value,
            overflow,
        });
        j += if op == FieldOp::Get { 3 } else { 4 };
    }
    Ok(out)
}

/// The unsigned field of `bits` at bit `offset` (bits past `s` read as 0).
fn get_unsigned(s: &[u8], offset: u64, bits: u32) -> u64 {
    let mut v = 0u64;
    for i in 0..u64::from(bits) {
        let at = offset + i;
        let bit = s
            .get((at >> 3) as usize)
            .is_some_and(|b| b & (0x80 >> (at & 7)) != 0);
        v = (v << 1) | bit as u64;
    }
    v
}

fn get_signed(s: &[u8], offset: u64, bits: u32) -> i64 {
    let v = get_unsigned(s, offset, bits);
    if bits < 64 && v & (1 << (bits - 1)) != 0 {
        (v | (u64::MAX << bits)) as i64
    } else {
        v as i64
    }
}

fn set_field(s: &mut [u8], offset: u64, bits: u32, value: u64) {
    for i in 0..u64::from(bits) {
        let at = offset + i;
        let on = value & (1 << (u64::from(bits) - 1 - i)) != 0;
        let byte = &mut s[(at >> 3) as usize];
        let mask = 0x80u8 >> (at & 7);
        if on {
            *byte |= mask;
        } else {
            *byte &= !mask;
        }
    }
}

/// Redis's checkUnsignedBitfieldOverflow: whether `value + incr` leaves the field's
/// range, and the value the overflow rule makes of it (WRAP: the low bits; SAT: the
/// bound crossed).
fn unsigned_overflow(value: u64, incr: i64, bits: u32, rule: Overflow) -> Option<u64> {
    let max = (1u64 << bits) - 1;
    let maxincr = max.wrapping_sub(value) as i64;
    let minincr = value.wrapping_neg() as i64;
    let wrap = || value.wrapping_add(incr as u64) & max;
    if value > max || (incr > 0 && incr > maxincr) {
        Some(if rule == Overflow::Sat { max } else { wrap() })
    } else if incr < 0 && incr < minincr {
        Some(if rule == Overflow::Sat { 0 } else { wrap() })
    } else {
        None
    }
}

/// Redis's checkSignedBitfieldOverflow, as `unsigned_overflow`.
fn signed_overflow(value: i64, incr: i64, bits: u32, rule: Overflow) -> Option<i64> {
    let max = if bits == 64 {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    let min = -max - 1;
    let maxincr = (max as u64).wrapping_sub(value as u64) as i64;
    let minincr = min.wrapping_sub(value);
    let wrap = || {
        let c = (value as u64).wrapping_add(incr as u64);
        if bits < 64 {
            let mask = u64::MAX << bits;
            if c & (1 << (bits - 1)) != 0 {
                (c | mask) as i64
            } else {
                (c & !mask) as i64
            }
        } else {
            c as i64
        }
    };
    if value > max || (bits != 64 && incr > maxincr) || (value >= 0 && incr > 0 && incr > maxincr) {
        Some(if rule == Overflow::Sat { max } else { wrap() })
    } else if value < min
        || (bits != 64 && incr < minincr)
        || (value < 0 && incr < 0 && incr < minincr)
    {
        Some(if rule == Overflow::Sat { min } else { wrap() })
    } else {
        None
    }
}

/// Runs one SET or INCRBY on `s`: the reply (null when OVERFLOW FAIL refused it).
fn write_field(s: &mut [u8], f: &Field) -> Reply {
    let incr = f.op == FieldOp::Incrby;
    if f.signed {
        let old = get_signed(s, f.offset, f.bits);
        let (new, over) = if incr {
            match signed_overflow(old, f.value, f.bits, f.overflow) {
                Some(v) => (v, true),
                None => (old + f.value, false),
            }
        } else {
            match signed_overflow(f.value, 0, f.bits, f.overflow) {
                Some(v) => (v, true),
                None => (f.value, false),
            }
        };
        if over && f.overflow == Overflow::Fail {
            return Reply::Null;
        }
        set_field(s, f.offset, f.bits, new as u64);
        Reply::Integer(if incr { new } else { old })
    } else {
        let old = get_unsigned(s, f.offset, f.bits);
        let (new, over) = if incr {
            match unsigned_overflow(old, f.value, f.bits, f.overflow) {
                Some(v) => (v, true),
                None => (old.wrapping_add(f.value as u64), false),
            }
        } else {
            match unsigned_overflow(f.value as u64, 0, f.bits, f.overflow) {
                Some(v) => (v, true),
                None => (f.value as u64, false),
            }
        };
        if over && f.overflow == Overflow::Fail {
            return Reply::Null;
        }
        set_field(s, f.offset, f.bits, new);
        Reply::Integer(if incr { new } else { old } as i64)
    }
}

fn read_field(s: &[u8], f: &Field) -> Reply {
    if f.signed {
        Reply::Integer(get_signed(s, f.offset, f.bits))
    } else {
        Reply::Integer(get_unsigned(s, f.offset, f.bits) as i64)
    }
}

fn bitfield_generic(ctx: &mut Ctx, args: &[Bytes], read_only: bool) -> CmdResult {
    let fields = parse_fields(ctx, args)?;
    let writes = fields.iter().any(|f| f.op != FieldOp::Get);
    if !writes {
        let replies = read_str(ctx, &args[1], |s| {
            fields.iter().map(|f| read_field(s, f)).collect::<Vec<_>>()
        })?;
        // BITFIELD is a write command: its read sends `keymiss` itself (BITFIELD_RO's
        // is sent after it, as for every read-only command).
        if replies.is_none() && !read_only {
            nt::key_miss(ctx, &args[1]);
        }
        return Ok(Reply::Array(replies.unwrap_or_else(|| {
            fields.iter().map(|f| read_field(&[], f)).collect()
        })));
    }
    if read_only {
        return Err(Reply::error(
            "ERR BITFIELD_RO only supports the GET subcommand",
        ));
    }
    let max_bit = fields
        .iter()
        .filter(|f| f.op != FieldOp::Get)
        .map(|f| f.offset + u64::from(f.bits) - 1)
        .max()
        .unwrap_or(0);
    let reply = write_str(ctx, &args[1], max_bit, |s, _| {
        Reply::Array(
            fields
                .iter()
                .map(|f| match f.op {
                    FieldOp::Get => read_field(s, f),
                    _ => write_field(s, f),
                })
                .collect(),
        )
    })?;
    notify(ctx, nt::STRING, "setbit", &args[1]);
    Ok(reply)
}

/// BITFIELD key [GET type offset | SET type offset value | INCRBY type offset incr |
/// OVERFLOW WRAP|SAT|FAIL]...: one reply per GET/SET/INCRBY, in order. With only GETs
/// it reads; a SET or INCRBY creates or grows the string, so the restart fence refuses
/// those (and only those).
pub fn bitfield(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    bitfield_generic(ctx, args, false)
}

/// BITFIELD_RO key [GET type offset]...
pub fn bitfield_ro(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    bitfield_generic(ctx, args, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflow_rules_follow_redis() {
        assert_eq!(unsigned_overflow(250, 10, 8, Overflow::Wrap), Some(4));
        assert_eq!(unsigned_overflow(250, 10, 8, Overflow::Sat), Some(255));
        assert_eq!(unsigned_overflow(5, -10, 8, Overflow::Sat), Some(0));
        assert_eq!(unsigned_overflow(5, -10, 8, Overflow::Wrap), Some(251));
        assert_eq!(unsigned_overflow(5, 10, 8, Overflow::Wrap), None);
        assert_eq!(signed_overflow(120, 10, 8, Overflow::Wrap), Some(-126));
        assert_eq!(signed_overflow(120, 10, 8, Overflow::Sat), Some(127));
        assert_eq!(signed_overflow(-120, -10, 8, Overflow::Sat), Some(-128));
        assert_eq!(
            signed_overflow(i64::MAX, 1, 64, Overflow::Wrap),
            Some(i64::MIN)
        );
        assert_eq!(signed_overflow(1, 1, 64, Overflow::Wrap), None);
    }

    #[test]
    fn fields_read_and_write_most_significant_bit_first() {
        let mut s = vec![0u8; 2];
        set_field(&mut s, 4, 8, 0xab);
        assert_eq!(s, [0x0a, 0xb0]);
        assert_eq!(get_unsigned(&s, 4, 8), 0xab);
        assert_eq!(get_signed(&s, 4, 8), 0xab_u8 as i8 as i64);
        assert_eq!(get_unsigned(&s, 12, 8), 0);
    }
}
