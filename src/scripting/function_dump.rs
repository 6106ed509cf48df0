//! FUNCTION DUMP / RESTORE payloads in Redis's format, so a dump taken from Redis 7
//! restores here and the other way round: per library the RDB opcode FUNCTION2 (245)
//! and the library code as an RDB string, then the RDB version (2 bytes, little
//! endian) and a CRC64 (Jones, as Redis's crc64.c) of everything before it.
//!
//! Redis may store a long code LZF-compressed; that is read here too. Dumps written
//! here are never compressed (Redis reads both).

use bytes::Bytes;

const OPCODE_FUNCTION2: u8 = 245;
const OPCODE_FUNCTION_PRE_GA: u8 = 246;
/// Redis 7.2's RDB version; payloads from newer versions are refused, as Redis does.
const RDB_VERSION: u16 = 11;

pub fn dump(codes: &[Bytes]) -> Vec<u8> {
    let mut out = Vec::new();
    for code in codes {
        out.push(OPCODE_FUNCTION2);
        save_len(code.len() as u64, &mut out);
        out.extend_from_slice(code);
    }
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The library codes in a payload, or Redis's error reply text.
pub fn parse(payload: &[u8]) -> Result<Vec<Bytes>, String> {
    if payload.len() < 10 {
        return Err(WRONG.into());
    }
    let footer = &payload[payload.len() - 10..];
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    let crc = u64::from_le_bytes(footer[2..].try_into().expect("8 bytes"));
    if version > RDB_VERSION || crc64(0, &payload[..payload.len() - 8]) != crc {
        return Err(WRONG.into());
    }
    let body = &payload[..payload.len() - 10];
    let mut pos = 0;
    let mut codes = Vec::new();
    while pos < body.len() {
        match body[pos] {
            OPCODE_FUNCTION2 => {}
            OPCODE_FUNCTION_PRE_GA => return Err("ERR Pre-GA function format not supported".into()),
            _ => return Err("ERR given type is not a function".into()),
        }
        pos += 1;
        let code = load_string(body, &mut pos).ok_or("ERR Failed loading library payload")?;
        codes.push(Bytes::from(code));
    }
    Ok(codes)
}

const WRONG: &str = "ERR DUMP payload version or checksum are wrong";

/// RDB's length encoding.
fn save_len(len: u64, out: &mut Vec<u8>) {
    if len < 1 << 6 {
        out.push(len as u8);
    } else if len < 1 << 14 {
        out.extend_from_slice(&[0x40 | (len >> 8) as u8, len as u8]);
    } else if len <= u32::MAX as u64 {
        out.push(0x80);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&len.to_be_bytes());
    }
}

/// A length, or (true, encoding) for a specially encoded string.
fn load_len(b: &[u8], pos: &mut usize) -> Option<(bool, u64)> {
    let first = *b.get(*pos)?;
    *pos += 1;
    match first >> 6 {
        0 => Some((false, (first & 0x3f) as u64)),
        1 => {
            let second = *b.get(*pos)?;
            *pos += 1;
            Some((false, ((first & 0x3f) as u64) << 8 | second as u64))
        }
        2 => {
            let n = match first {
                0x80 => 4,
                0x81 => 8,
                _ => return None,
            };
            let bytes = b.get(*pos..*pos + n)?;
            *pos += n;
            Some((
                false,
                bytes.iter().fold(0u64, |acc, &x| acc << 8 | x as u64),
            ))
        }
        _ => Some((true, (first & 0x3f) as u64)),
    }
}

/// An RDB string: plain, an integer encoding, or LZF-compressed.
fn load_string(b: &[u8], pos: &mut usize) -> Option<Vec<u8>> {
    let (encoded, len) = load_len(b, pos)?;
    if !encoded {
        let len = usize::try_from(len).ok()?;
        let s = b.get(*pos..pos.checked_add(len)?)?.to_vec();
        *pos += len;
        return Some(s);
    }
    match len {
        // 8, 16, 32-bit integers, little endian.
        0..=2 => {
            let n = 1usize << len;
            let bytes = b.get(*pos..*pos + n)?;
            *pos += n;
            let v = match n {
                1 => bytes[0] as i8 as i64,
                2 => i16::from_le_bytes([bytes[0], bytes[1]]) as i64,
                _ => i32::from_le_bytes(bytes.try_into().ok()?) as i64,
            };
            Some(v.to_string().into_bytes())
        }
        3 => {
            let (_, clen) = load_len(b, pos)?;
            let (_, ulen) = load_len(b, pos)?;
            let clen = usize::try_from(clen).ok()?;
            let data = b.get(*pos..pos.checked_add(clen)?)?;
            *pos += clen;
            lzf_decompress(data, usize::try_from(ulen).ok()?)
        }
        _ => None,
    }
}

/// LZF decompression (liblzf's format, which Redis's RDB strings use).
fn lzf_decompress(input: &[u8], out_len: usize) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(out_len.min(input.len().saturating_mul(64)));
    let mut i = 0;
    while i < input.len() {
        let ctrl = input[i] as usize;
        i += 1;
        if ctrl < 32 {
            let n = ctrl + 1;
            out.extend_from_slice(input.get(i..i + n)?);
            i += n;
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                len += *input.get(i)? as usize;
                i += 1;
            }
            let back = ((ctrl & 0x1f) << 8) + *input.get(i)? as usize + 1;
            i += 1;
            let start = out.len().checked_sub(back)?;
            for k in 0..len + 2 {
                let c = out[start + k];
                out.push(c);
            }
        }
        if out.len() > out_len {
            return None;
        }
    }
    (out.len() == out_len).then_some(out)
}

/// Redis's crc64 (Jones polynomial, reflected, no final xor).
fn crc64(mut crc: u64, data: &[u8]) -> u64 {
    const POLY: u64 = 0x95ac_9329_ac4b_c9b5;
    for &byte in data {
        crc ^= byte as u64;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ POLY
            } else {
                crc >> 1
            };
        }
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc64_is_redis_crc64() {
        // The check value from Redis's crc64.c self-test.
        assert_eq!(crc64(0, b"123456789"), 0xe9c6_d914_c4b8_d9ca);
    }

    #[test]
    fn dump_round_trips() {
        let codes = vec![
            Bytes::from_static(b"#!lua name=a\nredis.register_function('a', function() end)"),
            Bytes::from(vec![b'x'; 20000]),
        ];
        assert_eq!(parse(&dump(&codes)), Ok(codes));
        let mut bad = dump(&[Bytes::from_static(b"x")]);
        bad[1] ^= 1;
        assert_eq!(parse(&bad), Err(WRONG.into()));
    }

    #[test]
    fn lzf_back_references_expand() {
        // Literal "abc", then a back reference of length 3+2... to distance 3.
        let input = [2, b'a', b'b', b'c', 0x60, 2];
        assert_eq!(lzf_decompress(&input, 8), Some(b"abcabcab".to_vec()));
    }
}
