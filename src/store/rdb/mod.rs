//! Redis's RDB serialization, as DUMP / RESTORE and FUNCTION DUMP / RESTORE carry it:
//! the primitives here (CRC-64, lengths, strings with their integer and LZF
//! encodings, the payload footer), the packed blobs in `blob.rs` (listpack, intset,
//! ziplist), a key's value in `object.rs` and a stream's in `stream.rs`. Everything read is bounded by the bytes
//! at hand: a length inside a payload never allocates more than the payload holds.

pub(crate) mod blob;
mod lzf;
mod object;
mod stream;

pub use object::{dump_value, restore_value};

/// The RDB version Redis 7.0 writes in every DUMP and FUNCTION DUMP payload, and the
/// newest it reads.
pub const RDB_VERSION: u16 = 10;

/// Redis's reply to a payload whose footer is wrong.
pub const BAD_FOOTER: &str = "ERR DUMP payload version or checksum are wrong";

/// Appends the footer: the RDB version (2 bytes, little endian), then the CRC-64 of
/// everything before it (8 bytes, little endian).
pub fn finish_payload(out: &mut Vec<u8>, version: u16) {
    out.extend_from_slice(&version.to_le_bytes());
    let crc = crc64(0, out);
    out.extend_from_slice(&crc.to_le_bytes());
}

/// The body of a payload whose version is at most `max_version` and whose CRC-64 is
/// right (Redis's verifyDumpPayload); `None` otherwise.
pub fn payload_body(payload: &[u8], max_version: u16) -> Option<&[u8]> {
    let body_len = payload.len().checked_sub(10)?;
    let footer = &payload[body_len..];
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    let crc = u64::from_le_bytes(footer[2..].try_into().ok()?);
    (version <= max_version && crc64(0, &payload[..body_len + 2]) == crc)
        .then_some(&payload[..body_len])
}

/// Redis's crc64 (Jones polynomial, reflected, no final xor), a byte at a time
/// through a table.
pub fn crc64(mut crc: u64, data: &[u8]) -> u64 {
    static TABLE: std::sync::LazyLock<[u64; 256]> = std::sync::LazyLock::new(|| {
        const POLY: u64 = 0x95ac_9329_ac4b_c9b5;
        let mut t = [0u64; 256];
        for (i, slot) in t.iter_mut().enumerate() {
            let mut c = i as u64;
            for _ in 0..8 {
                c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            }
            *slot = c;
        }
        t
    });
    let table = &*TABLE;
    for &byte in data {
        crc = table[((crc ^ byte as u64) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

/// RDB's length encoding.
pub fn save_len(len: u64, out: &mut Vec<u8>) {
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

/// A string as Redis's rdbSaveRawString writes it: an integer of at most 11 bytes
/// that reads back the same in its 8/16/32-bit encoding, else LZF when that saves
/// more than 4 bytes of a string longer than 20 (rdbcompression is on by default),
/// else verbatim.
pub fn save_string(s: &[u8], out: &mut Vec<u8>) {
    if s.len() <= 11 {
        if let Some(v) = crate::protocol::parse_int(s) {
            if save_int(v, out) {
                return;
            }
        }
    }
    if s.len() > 20 {
        if let Some(packed) = lzf::compress(s, s.len() - 4) {
            out.push(0xc3);
            save_len(packed.len() as u64, out);
            save_len(s.len() as u64, out);
            out.extend_from_slice(&packed);
            return;
        }
    }
    save_len(s.len() as u64, out);
    out.extend_from_slice(s);
}

/// The 8/16/32-bit string encodings of an integer; false when `v` needs more.
fn save_int(v: i64, out: &mut Vec<u8>) -> bool {
    if let Ok(b) = i8::try_from(v) {
        out.extend_from_slice(&[0xc0, b as u8]);
    } else if let Ok(h) = i16::try_from(v) {
        out.push(0xc1);
        out.extend_from_slice(&h.to_le_bytes());
    } else if let Ok(w) = i32::try_from(v) {
        out.push(0xc2);
        out.extend_from_slice(&w.to_le_bytes());
    } else {
        return false;
    }
    true
}

/// Reads an RDB body front to back; every read fails (`None`) past its end.
pub struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(b: &'a [u8]) -> Reader<'a> {
        Reader { b, pos: 0 }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.b.len() - self.pos
    }

    pub fn byte(&mut self) -> Option<u8> {
        let v = *self.b.get(self.pos)?;
        self.pos += 1;
        Some(v)
    }

    pub fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.b.get(self.pos..self.pos.checked_add(n)?)?;
        self.pos += n;
        Some(s)
    }

    /// A length, or (true, encoding) for a specially encoded string.
    fn len_or_encoding(&mut self) -> Option<(bool, u64)> {
        let first = self.byte()?;
        match first >> 6 {
            0 => Some((false, (first & 0x3f) as u64)),
            1 => Some((false, ((first & 0x3f) as u64) << 8 | self.byte()? as u64)),
            2 => {
                let n = match first {
                    0x80 => 4,
                    0x81 => 8,
                    _ => return None,
                };
                let v = self
                    .bytes(n)?
                    .iter()
                    .fold(0u64, |acc, &x| acc << 8 | x as u64);
                Some((false, v))
            }
            _ => Some((true, (first & 0x3f) as u64)),
        }
    }

    /// A plain length (a count of elements).
    pub fn len(&mut self) -> Option<u64> {
        match self.len_or_encoding()? {
            (false, n) => Some(n),
            (true, _) => None,
        }
    }

    /// A count of things each taking at least one byte: at most what is left.
    pub fn count(&mut self) -> Option<usize> {
        usize::try_from(self.len()?)
            .ok()
            .filter(|&n| n <= self.remaining())
    }

    /// An RDB string: plain, an integer encoding, or LZF-compressed.
    pub fn string(&mut self) -> Option<Vec<u8>> {
        let (encoded, len) = self.len_or_encoding()?;
        if !encoded {
            return Some(self.bytes(usize::try_from(len).ok()?)?.to_vec());
        }
        match len {
            0 => Some((self.byte()? as i8).to_string().into_bytes()),
            1 => Some(
                i16::from_le_bytes(self.bytes(2)?.try_into().ok()?)
                    .to_string()
                    .into_bytes(),
            ),
            2 => Some(
                i32::from_le_bytes(self.bytes(4)?.try_into().ok()?)
                    .to_string()
                    .into_bytes(),
            ),
            3 => {
                let clen = usize::try_from(self.len()?).ok()?;
                let ulen = usize::try_from(self.len()?).ok()?;
                let data = self.bytes(clen)?;
                lzf::decompress(data, ulen)
            }
            _ => None,
        }
    }

    /// An 8-byte little-endian double (RDB's binary double).
    pub fn binary_double(&mut self) -> Option<f64> {
        Some(f64::from_le_bytes(self.bytes(8)?.try_into().ok()?))
    }

    /// The old text double: a length byte (253 nan, 254 +inf, 255 -inf) then the
    /// number's text.
    pub fn text_double(&mut self) -> Option<f64> {
        match self.byte()? {
            253 => Some(f64::NAN),
            254 => Some(f64::INFINITY),
            255 => Some(f64::NEG_INFINITY),
            n => std::str::from_utf8(self.bytes(n as usize)?)
                .ok()?
                .parse()
                .ok(),
        }
    }
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
    fn strings_round_trip_in_every_encoding() {
        for s in [
            &b""[..],
            b"0",
            b"-1",
            b"127",
            b"-129",
            b"32768",
            b"-2147483648",
            b"2147483648",
            b"007",
            b"hello",
            &[b'a'; 100],
            &[7u8; 70000],
        ] {
            let mut out = Vec::new();
            save_string(s, &mut out);
            let mut r = Reader::new(&out);
            assert_eq!(r.string().as_deref(), Some(s));
            assert_eq!(r.remaining(), 0);
        }
    }

    #[test]
    fn a_length_past_the_end_is_refused() {
        let mut out = Vec::new();
        save_len(u32::MAX as u64, &mut out);
        out.extend_from_slice(b"abc");
        assert_eq!(Reader::new(&out).string(), None);
        assert_eq!(Reader::new(&out).count(), None);
    }
}
