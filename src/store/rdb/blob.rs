//! The packed blobs inside RDB values: listpacks (Redis 7's small lists, hashes and
//! sorted sets), intsets (small sets of integers) and, read only, the ziplists and
//! zipmaps of payloads from older Redis versions. Decoding checks every length and
//! the blob's own header; a malformed blob is `None`.

/// A listpack entry, as the decoders hand it out.
pub enum Item {
    Int(i64),
    Str(Vec<u8>),
}

impl Item {
    pub fn into_bytes(self) -> Vec<u8> {
        match self {
            Item::Int(v) => v.to_string().into_bytes(),
            Item::Str(s) => s,
        }
    }
}

/// Builds a listpack as Redis's lpAppend does.
pub struct ListpackWriter {
    buf: Vec<u8>,
    count: usize,
}

impl ListpackWriter {
    pub fn new() -> ListpackWriter {
        ListpackWriter {
            buf: vec![0; 6],
            count: 0,
        }
    }

    /// The listpack's size so far, with its end byte (Redis's `lpBytes`).
    pub fn bytes(&self) -> usize {
        self.buf.len() + 1
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Appends a string, stored as an integer when it is one (lpStringToInt64).
    pub fn push(&mut self, s: &[u8]) {
        match as_int(s) {
            Some(v) => self.push_int(v),
            None => {
                let start = self.buf.len();
                let (head, n) = str_header(s.len());
                self.buf.extend_from_slice(&head[..n]);
                self.buf.extend_from_slice(s);
                self.finish_entry(start);
            }
        }
    }

    pub fn push_int(&mut self, v: i64) {
        let start = self.buf.len();
        let (enc, n) = int_encoding(v);
        self.buf.extend_from_slice(&enc[..n]);
        self.finish_entry(start);
    }

    /// The back length after an entry: its size in 7-bit groups, high group first,
    /// every group but the first flagged.
    fn finish_entry(&mut self, start: usize) {
        let back = backlen((self.buf.len() - start) as u64);
        self.buf.extend_from_slice(&back);
        self.count += 1;
    }

    pub fn finish(mut self) -> Vec<u8> {
        self.buf.push(0xff);
        let total = self.buf.len() as u32;
        self.buf[..4].copy_from_slice(&total.to_le_bytes());
        let count = self.count.min(65535) as u16;
        self.buf[4..6].copy_from_slice(&count.to_le_bytes());
        self.buf
    }
}

/// The integer a string is stored as in a listpack, if it is one (lpStringToInt64:
/// at most 20 characters, canonical form).
fn as_int(s: &[u8]) -> Option<i64> {
    (s.len() < 21)
        .then(|| crate::protocol::parse_int(s))
        .flatten()
}

/// A string entry's encoding byte(s) for a length of `n`, and how many there are.
fn str_header(n: usize) -> ([u8; 5], usize) {
    if n < 64 {
        ([0x80 | n as u8, 0, 0, 0, 0], 1)
    } else if n < 4096 {
        ([0xe0 | (n >> 8) as u8, n as u8, 0, 0, 0], 2)
    } else {
        let l = (n as u32).to_le_bytes();
        ([0xf0, l[0], l[1], l[2], l[3]], 5)
    }
}

/// An integer entry's encoding (its type byte(s) and the value), and its length.
fn int_encoding(v: i64) -> ([u8; 9], usize) {
    let mut out = [0u8; 9];
    let n = if (0..=127).contains(&v) {
        out[0] = v as u8;
        1
    } else if (-4096..=4095).contains(&v) {
        let u = if v < 0 { (1 << 13) + v } else { v } as u64;
        out[..2].copy_from_slice(&[(u >> 8) as u8 | 0xc0, u as u8]);
        2
    } else if (-32768..=32767).contains(&v) {
        out[0] = 0xf1;
        out[1..3].copy_from_slice(&(v as i16).to_le_bytes());
        3
    } else if (-8_388_608..=8_388_607).contains(&v) {
        out[0] = 0xf2;
        out[1..4].copy_from_slice(&(v as i32).to_le_bytes()[..3]);
        4
    } else if let Ok(w) = i32::try_from(v) {
        out[0] = 0xf3;
        out[1..5].copy_from_slice(&w.to_le_bytes());
        5
    } else {
        out[0] = 0xf4;
        out[1..9].copy_from_slice(&v.to_le_bytes());
        9
    };
    (out, n)
}

/// The bytes `ListpackWriter::push_int(v)` adds: encoding and back length.
pub fn int_entry_bytes(v: i64) -> usize {
    let n = int_encoding(v).1;
    n + backlen(n as u64).len()
}

/// The bytes `ListpackWriter::push(s)` adds: encoding and back length.
pub fn str_entry_bytes(s: &[u8]) -> usize {
    match as_int(s) {
        Some(v) => int_entry_bytes(v),
        None => {
            let n = str_header(s.len()).1 + s.len();
            n + backlen(n as u64).len()
        }
    }
}

/// A listpack's bytes around its entries: the 6-byte header and the end byte.
pub const LISTPACK_OVERHEAD: usize = 7;

/// The entries of a listpack, checked whole: header, every entry's encoding and back
/// length, the end byte.
pub fn listpack_items(lp: &[u8]) -> Option<Vec<Item>> {
    if lp.len() < 7 || u32::from_le_bytes(lp[..4].try_into().ok()?) as usize != lp.len() {
        return None;
    }
    let declared = u16::from_le_bytes([lp[4], lp[5]]) as usize;
    let mut items = Vec::new();
    let mut p = 6;
    loop {
        let first = *lp.get(p)?;
        if first == 0xff {
            break;
        }
        let start = p;
        let le = |from: usize, n: usize| -> Option<u64> {
            let b = lp.get(from..from + n)?;
            Some(b.iter().rev().fold(0u64, |acc, &x| acc << 8 | x as u64))
        };
        let (item, len) = if first & 0x80 == 0 {
            (Item::Int((first & 0x7f) as i64), 1)
        } else if first & 0xc0 == 0x80 {
            let n = (first & 0x3f) as usize;
            (Item::Str(lp.get(p + 1..p + 1 + n)?.to_vec()), 1 + n)
        } else if first & 0xe0 == 0xc0 {
            let u = ((first & 0x1f) as i64) << 8 | *lp.get(p + 1)? as i64;
            (Item::Int(if u >= 1 << 12 { u - (1 << 13) } else { u }), 2)
        } else if first & 0xf0 == 0xe0 {
            let n = ((first & 0x0f) as usize) << 8 | *lp.get(p + 1)? as usize;
            (Item::Str(lp.get(p + 2..p + 2 + n)?.to_vec()), 2 + n)
        } else {
            match first {
                0xf1 => (Item::Int(le(p + 1, 2)? as u16 as i16 as i64), 3),
                0xf2 => {
                    let u = le(p + 1, 3)? as i64;
                    (Item::Int(if u >= 1 << 23 { u - (1 << 24) } else { u }), 4)
                }
                0xf3 => (Item::Int(le(p + 1, 4)? as u32 as i32 as i64), 5),
                0xf4 => (Item::Int(le(p + 1, 8)? as i64), 9),
                0xf0 => {
                    let n = usize::try_from(le(p + 1, 4)?).ok()?;
                    (
                        Item::Str(lp.get(p + 5..(p + 5).checked_add(n)?)?.to_vec()),
                        5 + n,
                    )
                }
                _ => return None,
            }
        };
        p = start + len;
        // The back length: this entry's size, encoded as the writer does.
        let back = backlen(len as u64);
        if lp.get(p..p + back.len())? != back.as_slice() {
            return None;
        }
        p += back.len();
        items.push(item);
    }
    if p + 1 != lp.len() || (declared != 65535 && declared != items.len()) {
        return None;
    }
    Some(items)
}

fn backlen(l: u64) -> Vec<u8> {
    let groups = match l {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2_097_150 => 3,
        2_097_151..=268_435_454 => 4,
        _ => 5,
    };
    (0..groups)
        .rev()
        .map(|g| {
            let part = ((l >> (7 * g)) & 127) as u8;
            if g == groups - 1 {
                part
            } else {
                part | 128
            }
        })
        .collect()
}

/// An intset: encoding (2, 4 or 8 bytes per member), length, then the members in
/// ascending order, all little endian.
pub fn intset(members: &[i64]) -> Vec<u8> {
    let width: usize = if members.iter().all(|&v| i16::try_from(v).is_ok()) {
        2
    } else if members.iter().all(|&v| i32::try_from(v).is_ok()) {
        4
    } else {
        8
    };
    let mut out = Vec::with_capacity(8 + width * members.len());
    out.extend_from_slice(&(width as u32).to_le_bytes());
    out.extend_from_slice(&(members.len() as u32).to_le_bytes());
    for &v in members {
        out.extend_from_slice(&v.to_le_bytes()[..width]);
    }
    out
}

/// The members of an intset blob, checked: a known width, a size that matches, members
/// strictly ascending (Redis's intsetValidateIntegrity).
pub fn intset_members(b: &[u8]) -> Option<Vec<i64>> {
    let width = u32::from_le_bytes(b.get(..4)?.try_into().ok()?) as usize;
    let count = u32::from_le_bytes(b.get(4..8)?.try_into().ok()?) as usize;
    if ![2, 4, 8].contains(&width) || count == 0 || b.len() != 8 + count.checked_mul(width)? {
        return None;
    }
    let members: Vec<i64> = b[8..]
        .chunks_exact(width)
        .map(|c| match width {
            2 => i16::from_le_bytes([c[0], c[1]]) as i64,
            4 => i32::from_le_bytes(c.try_into().expect("4 bytes")) as i64,
            _ => i64::from_le_bytes(c.try_into().expect("8 bytes")),
        })
        .collect();
    members.windows(2).all(|w| w[0] < w[1]).then_some(members)
}

/// The entries of a ziplist (Redis before 7), checked: header, each entry's previous
/// length and encoding, the end byte.
pub fn ziplist_items(zl: &[u8]) -> Option<Vec<Item>> {
    if zl.len() < 11 || u32::from_le_bytes(zl[..4].try_into().ok()?) as usize != zl.len() {
        return None;
    }
    let mut items = Vec::new();
    let mut p = 10;
    let mut prev_len = 0usize;
    loop {
        let first = *zl.get(p)?;
        if first == 0xff {
            break;
        }
        let start = p;
        let (prev, n) = if first < 254 {
            (first as usize, 1)
        } else if first == 254 {
            (
                u32::from_le_bytes(zl.get(p + 1..p + 5)?.try_into().ok()?) as usize,
                5,
            )
        } else {
            return None;
        };
        if prev != prev_len {
            return None;
        }
        p += n;
        let enc = *zl.get(p)?;
        let (item, len) = match enc >> 6 {
            0 => {
                let l = (enc & 0x3f) as usize;
                (Item::Str(zl.get(p + 1..p + 1 + l)?.to_vec()), 1 + l)
            }
            1 => {
                let l = ((enc & 0x3f) as usize) << 8 | *zl.get(p + 1)? as usize;
                (Item::Str(zl.get(p + 2..p + 2 + l)?.to_vec()), 2 + l)
            }
            2 => {
                if enc != 0x80 {
                    return None;
                }
                let l = u32::from_be_bytes(zl.get(p + 1..p + 5)?.try_into().ok()?) as usize;
                (
                    Item::Str(zl.get(p + 5..(p + 5).checked_add(l)?)?.to_vec()),
                    5 + l,
                )
            }
            _ => {
                // An n-byte little-endian two's complement integer.
                let int = |n: usize| -> Option<i64> {
                    let b = zl.get(p + 1..p + 1 + n)?;
                    let u = b.iter().rev().fold(0u64, |acc, &x| acc << 8 | x as u64);
                    let shift = 64 - 8 * n as u32;
                    Some(((u << shift) as i64) >> shift)
                };
                match enc {
                    0xc0 => (Item::Int(int(2)?), 3),
                    0xd0 => (Item::Int(int(4)?), 5),
                    0xe0 => (Item::Int(int(8)?), 9),
                    0xf0 => (Item::Int(int(3)?), 4),
                    0xfe => (Item::Int(*zl.get(p + 1)? as i8 as i64), 2),
                    0xf1..=0xfd => (Item::Int((enc & 0x0f) as i64 - 1), 1),
                    _ => return None,
                }
            }
        };
        p += len;
        prev_len = p - start;
        items.push(item);
    }
    (p + 1 == zl.len()).then_some(items)
}

/// The field/value pairs of a zipmap (Redis 2.x hashes).
pub fn zipmap_pairs(zm: &[u8]) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut p = 1;
    let mut pairs = Vec::new();
    let len = |p: &mut usize| -> Option<usize> {
        let first = *zm.get(*p)?;
        *p += 1;
        match first {
            0..=253 => Some(first as usize),
            254 => {
                let v = u32::from_le_bytes(zm.get(*p..*p + 4)?.try_into().ok()?) as usize;
                *p += 4;
                Some(v)
            }
            _ => None,
        }
    };
    loop {
        if *zm.get(p)? == 0xff {
            break;
        }
        let fl = len(&mut p)?;
        let field = zm.get(p..p.checked_add(fl)?)?.to_vec();
        p += fl;
        let vl = len(&mut p)?;
        let free = *zm.get(p)? as usize;
        p += 1;
        let value = zm.get(p..p.checked_add(vl)?)?.to_vec();
        p = p.checked_add(vl + free)?;
        pairs.push((field, value));
    }
    (p + 1 == zm.len()).then_some(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the size functions say an entry takes is what the writer adds, at every
    /// encoding's edges (a stream node's split follows these sizes).
    #[test]
    fn entry_sizes_are_what_the_writer_writes() {
        let ints = [
            0,
            127,
            128,
            -1,
            -4096,
            4095,
            4096,
            -4097,
            32767,
            -32768,
            32768,
            8_388_607,
            -8_388_608,
            8_388_608,
            i32::MAX as i64,
            i32::MIN as i64,
            i32::MAX as i64 + 1,
            i64::MAX,
            i64::MIN,
        ];
        for v in ints {
            let mut w = ListpackWriter::new();
            let before = w.bytes();
            w.push_int(v);
            assert_eq!(w.bytes() - before, int_entry_bytes(v), "{v}");
            let text = v.to_string();
            let before = w.bytes();
            w.push(text.as_bytes());
            assert_eq!(
                w.bytes() - before,
                str_entry_bytes(text.as_bytes()),
                "{text}"
            );
        }
        let mut strings: Vec<Vec<u8>> = [
            0, 1, 62, 63, 64, 65, 125, 126, 127, 128, 4095, 4096, 16380, 16400,
        ]
        .iter()
        .map(|&n| vec![b'x'; n])
        .collect();
        strings.extend(
            [
                &b"0123"[..],
                b"-0",
                b"+1",
                b"12345678901234567890",
                b"123456789012345678901",
                b" 1",
            ]
            .map(<[u8]>::to_vec),
        );
        for s in strings {
            let mut w = ListpackWriter::new();
            w.push(b"first");
            let before = w.bytes();
            w.push(&s);
            assert_eq!(w.bytes() - before, str_entry_bytes(&s), "{} bytes", s.len());
        }
        assert_eq!(ListpackWriter::new().finish().len(), LISTPACK_OVERHEAD);
    }

    fn round_trip(values: &[&[u8]]) {
        let mut w = ListpackWriter::new();
        for v in values {
            w.push(v);
        }
        let lp = w.finish();
        let back: Vec<Vec<u8>> = listpack_items(&lp)
            .expect("valid")
            .into_iter()
            .map(Item::into_bytes)
            .collect();
        assert_eq!(back, values.iter().map(|v| v.to_vec()).collect::<Vec<_>>());
    }

    #[test]
    fn listpacks_round_trip_every_encoding() {
        let long = vec![b'x'; 5000];
        let mid = vec![b'y'; 100];
        round_trip(&[
            b"0",
            b"127",
            b"128",
            b"-1",
            b"-4096",
            b"4095",
            b"-32768",
            b"32767",
            b"8388607",
            b"-8388608",
            b"2147483647",
            b"-2147483649",
            b"9223372036854775807",
            b"-9223372036854775808",
            b"9223372036854775808",
            b"",
            b"a",
            &mid,
            &long,
        ]);
    }

    #[test]
    fn a_listpack_matches_redis_bytes() {
        // redis-server 7.0: RPUSH l a 1 -> DUMP l's listpack.
        let mut w = ListpackWriter::new();
        w.push(b"a");
        w.push(b"1");
        assert_eq!(
            w.finish(),
            [0x0c, 0, 0, 0, 2, 0, 0x81, b'a', 2, 0x01, 1, 0xff]
        );
    }

    #[test]
    fn broken_listpacks_are_refused() {
        let mut w = ListpackWriter::new();
        w.push(b"hello");
        let lp = w.finish();
        for cut in 0..lp.len() {
            assert!(listpack_items(&lp[..cut]).is_none());
        }
        let mut bad = lp.clone();
        bad[6] = 0x8f; // a longer string than the blob holds
        assert!(listpack_items(&bad).is_none());
    }

    #[test]
    fn intsets_round_trip() {
        for m in [vec![1, 2, 3], vec![-70000, 5], vec![i64::MIN, 0, i64::MAX]] {
            assert_eq!(intset_members(&intset(&m)), Some(m));
        }
        assert_eq!(intset_members(&intset(&[2, 1])), None);
    }
}
