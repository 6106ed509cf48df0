//! FUNCTION DUMP / RESTORE payloads in Redis's format, so a dump taken from Redis 7
//! restores here and the other way round: per library the RDB opcode FUNCTION2 (245)
//! and the library code as an RDB string, then the RDB version (2 bytes, little
//! endian) and a CRC64 (Jones, as Redis's crc64.c) of everything before it.
//!
//! Redis may store a long code LZF-compressed; that is read here too. Dumps written
//! here are never compressed (Redis reads both).

use crate::store::rdb;
use bytes::Bytes;

const OPCODE_FUNCTION2: u8 = 245;
const OPCODE_FUNCTION_PRE_GA: u8 = 246;

pub fn dump(codes: &[Bytes]) -> Vec<u8> {
    let mut out = Vec::new();
    for code in codes {
        out.push(OPCODE_FUNCTION2);
        rdb::save_len(code.len() as u64, &mut out);
        out.extend_from_slice(code);
    }
    rdb::finish_payload(&mut out, rdb::RDB_VERSION);
    out
}

/// The library codes in a payload, or Redis's error reply text.
pub fn parse(payload: &[u8]) -> Result<Vec<Bytes>, String> {
    let body = rdb::payload_body(payload, rdb::RDB_VERSION).ok_or(WRONG)?;
    let mut r = rdb::Reader::new(body);
    let mut codes = Vec::new();
    while let Some(opcode) = r.byte() {
        match opcode {
            OPCODE_FUNCTION2 => {}
            OPCODE_FUNCTION_PRE_GA => return Err("ERR Pre-GA function format not supported".into()),
            _ => return Err("ERR given type is not a function".into()),
        }
        let code = r.string().ok_or("ERR Failed loading library payload")?;
        codes.push(Bytes::from(code));
    }
    Ok(codes)
}

const WRONG: &str = rdb::BAD_FOOTER;

#[cfg(test)]
mod tests {
    use super::*;

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
}
