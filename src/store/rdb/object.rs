//! A key's value as a DUMP payload (Redis 7.0's rdbSaveObjectType + rdbSaveObject,
//! then the footer) and back. The encodings chosen are the ones redis-server 7.0
//! would choose for the same value, so a payload matches its bytes wherever Redis's
//! own choice is determined by the value (a hash's field order and a big set's order
//! follow their tables, in Redis as here). Payloads of older RDB versions (ziplists,
//! zipmaps, linked lists, text doubles) are read too.

use super::blob::{self, Item, ListpackWriter};
use super::stream;
use super::{finish_payload, payload_body, save_len, save_string, Reader, BAD_FOOTER, RDB_VERSION};
use crate::store::{Set, Value, ValueRef, ZSet};
use bytes::Bytes;
use std::collections::{HashMap, HashSet, VecDeque};

/// RDB's value types (rdb.h).
mod types {
    pub const STRING: u8 = 0;
    pub const LIST: u8 = 1;
    pub const SET: u8 = 2;
    pub const ZSET: u8 = 3;
    pub const HASH: u8 = 4;
    pub const ZSET_2: u8 = 5;
    pub const HASH_ZIPMAP: u8 = 9;
    pub const LIST_ZIPLIST: u8 = 10;
    pub const SET_INTSET: u8 = 11;
    pub const ZSET_ZIPLIST: u8 = 12;
    pub const HASH_ZIPLIST: u8 = 13;
    pub const LIST_QUICKLIST: u8 = 14;
    pub const HASH_LISTPACK: u8 = 16;
    pub const ZSET_LISTPACK: u8 = 17;
    pub const LIST_QUICKLIST_2: u8 = 18;
    // STREAM_LISTPACKS (15) and STREAM_LISTPACKS_2 (19): see `super::stream`.
}

const BAD_DATA: &str = "ERR Bad data format";

/// A quicklist node's container (QUICKLIST_NODE_CONTAINER_*).
const CONTAINER_PLAIN: u64 = 1;
const CONTAINER_PACKED: u64 = 2;

/// Redis's list-max-listpack-size default (-2): a node holds at most 8 KiB.
const LIST_NODE_BYTES: usize = 8192;
/// Redis's per-element estimate when deciding whether a node takes one more.
const NODE_ENTRY_OVERHEAD: usize = 8;

/// The DUMP payload of `value`.
pub fn dump_value(value: ValueRef<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    match value {
        ValueRef::Stream(s) => stream::save(s, &mut out),
        ValueRef::Str(s) => {
            out.push(types::STRING);
            save_string(s, &mut out);
        }
        ValueRef::List(l) => {
            out.push(types::LIST_QUICKLIST_2);
            let nodes = list_nodes(l.iter().map(|b| &b[..]));
            save_len(nodes.len() as u64, &mut out);
            for node in nodes {
                save_len(CONTAINER_PACKED, &mut out);
                save_string(&node, &mut out);
            }
        }
        ValueRef::Set(s) => {
            if s.encoding() == "intset" {
                out.push(types::SET_INTSET);
                let mut members: Vec<i64> = s
                    .iter()
                    .filter_map(|m| crate::protocol::parse_int(m))
                    .collect();
                members.sort_unstable();
                save_string(&blob::intset(&members), &mut out);
            } else {
                out.push(types::SET);
                save_len(s.len() as u64, &mut out);
                for m in s.iter() {
                    save_string(m, &mut out);
                }
            }
        }
        ValueRef::ZSet(z) => {
            if z.encoding() == "listpack" {
                out.push(types::ZSET_LISTPACK);
                let mut lp = ListpackWriter::new();
                for (member, score) in z.iter() {
                    lp.push(member);
                    push_score(&mut lp, score);
                }
                save_string(&lp.finish(), &mut out);
            } else {
                out.push(types::ZSET_2);
                save_len(z.len() as u64, &mut out);
                for (member, score) in z.iter().rev() {
                    save_string(member, &mut out);
                    out.extend_from_slice(&score.to_le_bytes());
                }
            }
        }
        ValueRef::Hash(h) => {
            if value.encoding() == "listpack" {
                out.push(types::HASH_LISTPACK);
                let mut lp = ListpackWriter::new();
                for (k, v) in h {
                    lp.push(k);
                    lp.push(v);
                }
                save_string(&lp.finish(), &mut out);
            } else {
                out.push(types::HASH);
                save_len(h.len() as u64, &mut out);
                for (k, v) in h {
                    save_string(k, &mut out);
                    save_string(v, &mut out);
                }
            }
        }
    }
    finish_payload(&mut out, RDB_VERSION);
    out
}

/// A list's quicklist nodes as RPUSH would have filled them: a node takes another
/// element while its listpack plus the element and 8 bytes stays within 8 KiB.
fn list_nodes<'a>(items: impl Iterator<Item = &'a [u8]>) -> Vec<Vec<u8>> {
    let mut nodes = Vec::new();
    let mut node = ListpackWriter::new();
    for item in items {
        if !node.is_empty() && node.bytes() + item.len() + NODE_ENTRY_OVERHEAD > LIST_NODE_BYTES {
            nodes.push(std::mem::replace(&mut node, ListpackWriter::new()).finish());
        }
        node.push(item);
    }
    if !node.is_empty() {
        nodes.push(node.finish());
    }
    nodes
}

/// A sorted-set score in a listpack, as zzlInsertAt stores it: an integer when the
/// double is one (double2ll), else its `%.17g` text.
fn push_score(lp: &mut ListpackWriter, score: f64) {
    const LIMIT: f64 = (i64::MAX / 2) as f64;
    if (-LIMIT..=LIMIT).contains(&score) && score == (score as i64) as f64 {
        lp.push_int(score as i64);
    } else if score.is_infinite() {
        lp.push(if score > 0.0 { b"inf" } else { b"-inf" });
    } else {
        lp.push(crate::protocol::numfmt::fmt_g(score, 17).as_bytes());
    }
}

/// The value in a RESTORE payload, or Redis's error reply text.
pub fn restore_value(payload: &[u8]) -> Result<Value, &'static str> {
    payload_body(payload, RDB_VERSION).ok_or(BAD_FOOTER)?;
    // Redis reads the value from the whole payload: a value cut short takes bytes of
    // the footer, as there.
    let mut r = Reader::new(payload);
    let value = r.byte().and_then(|t| load(t, &mut r)).ok_or(BAD_DATA)?;
    Ok(value)
}

fn load(kind: u8, r: &mut Reader<'_>) -> Option<Value> {
    let value = match kind {
        types::STRING => Value::Str(Bytes::from(r.string()?)),
        types::LIST => {
            let n = r.count()?;
            let mut l = VecDeque::with_capacity(n);
            for _ in 0..n {
                l.push_back(Bytes::from(r.string()?));
            }
            Value::List(l)
        }
        types::LIST_QUICKLIST | types::LIST_QUICKLIST_2 => {
            let nodes = r.count()?;
            let mut l = VecDeque::new();
            for _ in 0..nodes {
                let container = if kind == types::LIST_QUICKLIST_2 {
                    r.len()?
                } else {
                    CONTAINER_PACKED
                };
                let data = r.string()?;
                if data.is_empty() {
                    return None;
                }
                match container {
                    CONTAINER_PLAIN => l.push_back(Bytes::from(data)),
                    CONTAINER_PACKED => {
                        let items = if kind == types::LIST_QUICKLIST_2 {
                            blob::listpack_items(&data)?
                        } else {
                            blob::ziplist_items(&data)?
                        };
                        l.extend(items.into_iter().map(|i| Bytes::from(i.into_bytes())));
                    }
                    _ => return None,
                }
            }
            Value::List(l)
        }
        types::LIST_ZIPLIST => {
            let items = blob::ziplist_items(&r.string()?)?;
            Value::List(
                items
                    .into_iter()
                    .map(|i| Bytes::from(i.into_bytes()))
                    .collect(),
            )
        }
        types::SET => {
            let n = r.count()?;
            let mut s = Set::new();
            for _ in 0..n {
                if !s.insert(&r.string()?) {
                    return None;
                }
            }
            Value::Set(Box::new(s))
        }
        types::SET_INTSET => {
            let mut s = Set::new();
            for m in blob::intset_members(&r.string()?)? {
                s.insert(m.to_string().as_bytes());
            }
            Value::Set(Box::new(s))
        }
        types::ZSET | types::ZSET_2 => {
            let n = r.count()?;
            let mut members = Vec::with_capacity(n);
            for _ in 0..n {
                let m = r.string()?;
                let score = if kind == types::ZSET_2 {
                    r.binary_double()?
                } else {
                    r.text_double()?
                };
                members.push((m, score));
            }
            zset(members)?
        }
        types::ZSET_ZIPLIST | types::ZSET_LISTPACK => {
            let data = r.string()?;
            let items = if kind == types::ZSET_LISTPACK {
                blob::listpack_items(&data)?
            } else {
                blob::ziplist_items(&data)?
            };
            if items.len() % 2 != 0 {
                return None;
            }
            let mut members = Vec::with_capacity(items.len() / 2);
            let mut it = items.into_iter();
            while let (Some(m), Some(score)) = (it.next(), it.next()) {
                let score = match score {
                    Item::Int(v) => v as f64,
                    Item::Str(s) => std::str::from_utf8(&s).ok()?.parse().ok()?,
                };
                members.push((m.into_bytes(), score));
            }
            zset(members)?
        }
        types::HASH => {
            let n = r.count()?;
            let mut pairs = Vec::with_capacity(n);
            for _ in 0..n {
                pairs.push((r.string()?, r.string()?));
            }
            hash(pairs)?
        }
        types::HASH_ZIPMAP => hash(blob::zipmap_pairs(&r.string()?)?)?,
        stream::STREAM_LISTPACKS | stream::STREAM_LISTPACKS_2 => {
            Value::Stream(Box::new(stream::load(kind, r)?))
        }
        types::HASH_ZIPLIST | types::HASH_LISTPACK => {
            let data = r.string()?;
            let items = if kind == types::HASH_LISTPACK {
                blob::listpack_items(&data)?
            } else {
                blob::ziplist_items(&data)?
            };
            if items.len() % 2 != 0 {
                return None;
            }
            let mut pairs = Vec::with_capacity(items.len() / 2);
            let mut it = items.into_iter();
            while let (Some(k), Some(v)) = (it.next(), it.next()) {
                pairs.push((k.into_bytes(), v.into_bytes()));
            }
            hash(pairs)?
        }
        _ => return None,
    };
    // Redis keeps no empty collection: such a payload is refused.
    let empty = match &value {
        Value::Str(_) => false,
        Value::List(l) => l.is_empty(),
        Value::Set(s) => s.is_empty(),
        Value::ZSet(z) => z.is_empty(),
        Value::Hash(h) => h.is_empty(),
        Value::Stream(_) => false,
    };
    (!empty).then_some(value)
}

/// A sorted set from distinct members with scores that are not NaN.
fn zset(members: Vec<(Vec<u8>, f64)>) -> Option<Value> {
    let mut seen = HashSet::with_capacity(members.len());
    if members
        .iter()
        .any(|(m, s)| s.is_nan() || !seen.insert(&m[..]))
    {
        return None;
    }
    Some(Value::ZSet(Box::new(ZSet::from_members(members))))
}

/// A hash from distinct fields.
fn hash(pairs: Vec<(Vec<u8>, Vec<u8>)>) -> Option<Value> {
    let mut h = HashMap::with_capacity(pairs.len());
    for (k, v) in pairs {
        if h.insert(Bytes::from(k), Bytes::from(v)).is_some() {
            return None;
        }
    }
    Some(Value::Hash(Box::new(h)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strs(v: &[&str]) -> VecDeque<Bytes> {
        v.iter().map(|s| Bytes::from(s.to_string())).collect()
    }

    #[test]
    fn every_type_round_trips() {
        let mut set = Set::new();
        set.insert(b"1");
        set.insert(b"-5");
        let mut big = Set::new();
        big.insert(b"a");
        big.insert(b"b");
        let mut z = ZSet::new();
        z.insert(b"a", 1.5);
        z.insert(b"b", -3.0);
        z.insert(b"c", f64::INFINITY);
        let zbig = ZSet::from_members(
            (0..200)
                .map(|i| (i.to_string().into_bytes(), i as f64 / 3.0))
                .collect(),
        );
        let mut h = HashMap::new();
        h.insert(Bytes::from_static(b"f"), Bytes::from_static(b"v"));
        let mut hbig = HashMap::new();
        hbig.insert(Bytes::from_static(b"f"), Bytes::from(vec![b'v'; 100]));
        let long_list: VecDeque<Bytes> = (0..5000)
            .map(|i| Bytes::from(format!("item {i}")))
            .collect();
        for v in [
            Value::Str(Bytes::from_static(b"hello")),
            Value::Str(Bytes::from_static(b"12345")),
            Value::Str(Bytes::from(vec![b'z'; 1000])),
            Value::List(strs(&["a", "1", "-70000", "x"])),
            Value::List(long_list),
            Value::Set(Box::new(set)),
            Value::Set(Box::new(big)),
            Value::ZSet(Box::new(z)),
            Value::ZSet(Box::new(zbig)),
            Value::Hash(Box::new(h)),
            Value::Hash(Box::new(hbig)),
        ] {
            let payload = dump_value(value_ref(&v));
            assert_eq!(restore_value(&payload), Ok(v));
        }
    }

    fn value_ref(v: &Value) -> ValueRef<'_> {
        match v {
            Value::Str(s) => ValueRef::Str(s),
            Value::Hash(h) => ValueRef::Hash(h),
            Value::List(l) => ValueRef::List(l),
            Value::Set(s) => ValueRef::Set(s),
            Value::ZSet(z) => ValueRef::ZSet(z),
            Value::Stream(s) => ValueRef::Stream(s),
        }
    }

    #[test]
    fn a_string_matches_redis_bytes() {
        // redis-server 7.0.15: SET foo bar; DUMP foo.
        assert_eq!(
            dump_value(ValueRef::Str(b"bar")),
            b"\x00\x03bar\x0a\x00\xe6\xbe\x49\x60\xee\x66\xfd\x17"
        );
    }

    #[test]
    fn every_truncation_and_bit_flip_is_an_error() {
        let v = Value::List(strs(&["a", "b", "c"]));
        let payload = dump_value(value_ref(&v));
        for cut in 0..payload.len() {
            assert!(restore_value(&payload[..cut]).is_err());
        }
        for i in 0..payload.len() {
            let mut bad = payload.clone();
            bad[i] ^= 0x10;
            assert!(restore_value(&bad).is_err());
        }
    }

    #[test]
    fn huge_counts_inside_a_valid_crc_are_refused() {
        for kind in [
            types::LIST,
            types::SET,
            types::ZSET_2,
            types::HASH,
            types::LIST_QUICKLIST_2,
        ] {
            let mut body = vec![kind];
            save_len(u64::MAX, &mut body);
            finish_payload(&mut body, RDB_VERSION);
            assert_eq!(restore_value(&body), Err(BAD_DATA));
        }
    }
}
