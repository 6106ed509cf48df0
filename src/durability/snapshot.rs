//! The clean-shutdown snapshot: every live key with its remaining TTL, the fencing-token
//! mark, and what is left of the restart fence, in one checksummed file.
//!
//! It exists so that a planned restart (a deploy, SIGTERM) does not need the restart
//! fence: nothing was forgotten. It must never be trusted when it could be stale, so it
//! names the node and the boot that wrote it (see `durable::NodeState`), and the whole
//! file is covered by a CRC: a partial or corrupt file is refused, and the fence applies.
//!
//! TTLs are stored as what remains at shutdown and resume from boot: downtime never
//! shortens a lock (a holder's validity was computed before; a key living longer than
//! its holder thinks is the safe side).

use crate::store::stream::{Group, Nack, NodeLimits};
use crate::store::value::tag;
use crate::store::{Entry, Keyspace, Set, Stream, StreamId, Value, ValueRef, ZSet};
use bytes::Bytes;
use std::collections::{HashMap, VecDeque};

const MAGIC: &[u8; 8] = b"RLKDSNAP";
const VERSION: u32 = 1;

/// Who wrote a snapshot and the node state beside the keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub node_id: [u8; 16],
    /// The boot (see `NodeState::boot`) of the run that wrote it.
    pub boot: u64,
    /// Wall time of the write (for the log only: nothing depends on wall time).
    pub written_unix_ms: i64,
    pub token_mark: u64,
    /// What was left of the restart fence at shutdown: it resumes at boot, since the
    /// node may still have forgotten locks from an earlier crash.
    pub fence_remaining_ms: u64,
}

/// One stored key: database, key, entry with its deadline as remaining ms (None: no TTL).
#[derive(Debug)]
pub struct Stored {
    pub db: usize,
    pub key: Bytes,
    pub value: Value,
    pub remaining_ms: Option<u64>,
}

#[derive(Debug)]
pub struct Snapshot {
    pub header: Header,
    pub keys: Vec<Stored>,
}

/// Encodes every live key of `keyspace` at monotonic time `now_ms`. The caller makes
/// sure no command runs meanwhile (the server has stopped serving).
pub fn encode(keyspace: &Keyspace, now_ms: u64, header: &Header) -> Vec<u8> {
    let mut body = Vec::new();
    let mut count: u64 = 0;
    for (db_index, db) in keyspace.dbs().iter().enumerate() {
        db.for_each_live(now_ms, |key, value, deadline_ms| {
            count += 1;
            body.extend_from_slice(&(db_index as u16).to_le_bytes());
            put_bytes(&mut body, key);
            let ttl = deadline_ms.map_or(-1, |d| d.saturating_sub(now_ms) as i64);
            body.extend_from_slice(&ttl.to_le_bytes());
            match value {
                ValueRef::Str(s) => {
                    body.push(tag::STR);
                    put_bytes(&mut body, s);
                }
                ValueRef::Hash(h) => {
                    body.push(tag::HASH);
                    body.extend_from_slice(&(h.len() as u32).to_le_bytes());
                    for (f, v) in h.iter() {
                        put_bytes(&mut body, f);
                        put_bytes(&mut body, v);
                    }
                }
                ValueRef::List(l) => {
                    body.push(tag::LIST);
                    body.extend_from_slice(&(l.len() as u32).to_le_bytes());
                    for item in l {
                        put_bytes(&mut body, item);
                    }
                }
                ValueRef::Set(set) => {
                    body.push(tag::SET);
                    body.extend_from_slice(&(set.len() as u32).to_le_bytes());
                    for m in set.iter() {
                        put_bytes(&mut body, m);
                    }
                }
                ValueRef::Stream(st) => {
                    body.push(tag::STREAM);
                    put_stream(&mut body, st);
                }
                ValueRef::ZSet(z) => {
                    body.push(tag::ZSET);
                    body.extend_from_slice(&(z.len() as u32).to_le_bytes());
                    for (m, score) in z.iter() {
                        put_bytes(&mut body, m);
                        body.extend_from_slice(&score.to_bits().to_le_bytes());
                    }
                }
            }
        });
    }
    let mut out = Vec::with_capacity(body.len() + 80);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&header.node_id);
    out.extend_from_slice(&header.boot.to_le_bytes());
    out.extend_from_slice(&header.written_unix_ms.to_le_bytes());
    out.extend_from_slice(&header.token_mark.to_le_bytes());
    out.extend_from_slice(&header.fence_remaining_ms.to_le_bytes());
    out.extend_from_slice(&count.to_le_bytes());
    out.extend_from_slice(&body);
    let crc = crc32(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

fn put_id(out: &mut Vec<u8>, id: StreamId) {
    out.extend_from_slice(&id.ms.to_le_bytes());
    out.extend_from_slice(&id.seq.to_le_bytes());
}

/// A stream: its bookkeeping, its live entries, then each group with its PEL and
/// consumers (a consumer's own PEL is the group's entries naming it).
fn put_stream(out: &mut Vec<u8>, st: &Stream) {
    put_id(out, st.last_id);
    put_id(out, st.first_id);
    put_id(out, st.max_deleted_id);
    out.extend_from_slice(&st.entries_added.to_le_bytes());
    let entries = st.entries();
    out.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    for (id, pairs) in entries {
        put_id(out, id);
        out.extend_from_slice(&(pairs.len() as u32).to_le_bytes());
        for (f, v) in pairs {
            put_bytes(out, f);
            put_bytes(out, v);
        }
    }
    out.extend_from_slice(&(st.groups.len() as u32).to_le_bytes());
    for (name, g) in &st.groups {
        put_bytes(out, name);
        put_id(out, g.last_id);
        out.extend_from_slice(&g.entries_read.unwrap_or(u64::MAX).to_le_bytes());
        out.extend_from_slice(&(g.consumers.len() as u32).to_le_bytes());
        for (cname, c) in &g.consumers {
            put_bytes(out, cname);
            out.extend_from_slice(&c.seen_time.to_le_bytes());
        }
        out.extend_from_slice(&(g.pel.len() as u64).to_le_bytes());
        for (id, nack) in &g.pel {
            put_id(out, *id);
            put_bytes(out, &nack.consumer);
            out.extend_from_slice(&nack.delivery_time.to_le_bytes());
            out.extend_from_slice(&nack.delivery_count.to_le_bytes());
        }
    }
}

fn read_stream(r: &mut Reader) -> Result<Stream, String> {
    let last_id = r.id()?;
    let first_id = r.id()?;
    let max_deleted_id = r.id()?;
    let entries_added = r.u64()?;
    let mut st = Stream::new();
    let n = r.u64()?;
    for _ in 0..n {
        let id = r.id()?;
        let pairs = r.u32()?;
        let mut owned = Vec::new();
        for _ in 0..pairs {
            let f = r.bytes()?;
            owned.push((f, r.bytes()?));
        }
        if id <= st.last_id || id > last_id || owned.is_empty() {
            return Err("stream entries out of order".into());
        }
        let borrowed: Vec<(&[u8], &[u8])> = owned.iter().map(|(f, v)| (&f[..], &v[..])).collect();
        st.append(id, &borrowed, NodeLimits::default());
    }
    st.last_id = last_id;
    st.first_id = first_id;
    st.max_deleted_id = max_deleted_id;
    st.entries_added = entries_added;
    let groups = r.u32()?;
    for _ in 0..groups {
        let name = r.bytes()?;
        let last = r.id()?;
        let read = r.u64()?;
        let mut g = Group::new(last, (read != u64::MAX).then_some(read));
        let consumers = r.u32()?;
        for _ in 0..consumers {
            let cname = r.bytes()?;
            let seen = r.u64()? as i64;
            g.create_consumer(&cname, seen);
        }
        let pending = r.u64()?;
        for _ in 0..pending {
            let id = r.id()?;
            let consumer = r.bytes()?;
            let time = r.u64()? as i64;
            let count = r.u64()?;
            let Some(consumer) = g.consumer_key(&consumer) else {
                return Err("a pending stream entry of no consumer".into());
            };
            g.pel.insert(
                id,
                Nack {
                    consumer: consumer.clone(),
                    delivery_time: time,
                    delivery_count: count,
                },
            );
            if let Some(c) = g.consumers.get_mut(&consumer) {
                c.pel.insert(id);
            }
        }
        st.groups.insert(name, g);
    }
    Ok(st)
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

/// Decodes a snapshot; any damage (short, bad checksum, unknown version or type) is an
/// error naming it.
pub fn decode(raw: &[u8]) -> Result<Snapshot, String> {
    if raw.len() < MAGIC.len() + 4 + 4 || &raw[..8] != MAGIC {
        return Err("not a redlockd snapshot (bad magic or too short)".into());
    }
    let (data, crc) = raw.split_at(raw.len() - 4);
    if crc32(data) != u32::from_le_bytes(crc.try_into().expect("4 bytes")) {
        return Err("checksum mismatch: the file is partial or corrupt".into());
    }
    let mut r = Reader { buf: data, at: 8 };
    let version = r.u32()?;
    if version != VERSION {
        return Err(format!("unknown snapshot version {version}"));
    }
    let mut node_id = [0u8; 16];
    node_id.copy_from_slice(r.take(16)?);
    let header = Header {
        node_id,
        boot: r.u64()?,
        written_unix_ms: r.u64()? as i64,
        token_mark: r.u64()?,
        fence_remaining_ms: r.u64()?,
    };
    let count = r.u64()?;
    let mut keys = Vec::new();
    for _ in 0..count {
        let db = u16::from_le_bytes(r.take(2)?.try_into().expect("2 bytes")) as usize;
        let key = r.bytes()?;
        let ttl = r.u64()? as i64;
        let value = match r.take(1)?[0] {
            tag::STR => Value::Str(r.bytes()?),
            tag::HASH => {
                let n = r.u32()?;
                let mut h = HashMap::new();
                for _ in 0..n {
                    let f = r.bytes()?;
                    h.insert(f, r.bytes()?);
                }
                Value::Hash(Box::new(h))
            }
            tag::LIST => {
                let n = r.u32()?;
                let mut l = VecDeque::new();
                for _ in 0..n {
                    l.push_back(r.bytes()?);
                }
                Value::List(l)
            }
            // Sets and sorted sets are rebuilt member by member, so OBJECT ENCODING
            // answers from their content, as after Redis's own RDB load.
            tag::SET => {
                let n = r.u32()?;
                let mut set = Set::new();
                for _ in 0..n {
                    set.insert(&r.bytes()?);
                }
                Value::Set(Box::new(set))
            }
            tag::ZSET => {
                let n = r.u32()?;
                let mut members = Vec::new();
                for _ in 0..n {
                    let m = r.bytes()?;
                    let score = f64::from_bits(r.u64()?);
                    if score.is_nan() {
                        return Err("a sorted-set score is NaN".into());
                    }
                    members.push((m.to_vec(), score));
                }
                Value::ZSet(Box::new(ZSet::from_members(members)))
            }
            tag::STREAM => Value::Stream(Box::new(read_stream(&mut r)?)),
            t => return Err(format!("unknown value type {t}")),
        };
        if value_is_empty(&value) {
            return Err("an empty collection (a key Redis would not keep)".into());
        }
        keys.push(Stored {
            db,
            key,
            value,
            remaining_ms: (ttl >= 0).then_some(ttl as u64),
        });
    }
    if r.at != data.len() {
        return Err("trailing bytes after the last key".into());
    }
    Ok(Snapshot { header, keys })
}

fn value_is_empty(v: &Value) -> bool {
    match v {
        Value::Str(_) => false,
        Value::Hash(h) => h.is_empty(),
        Value::List(l) => l.is_empty(),
        Value::Set(s) => s.is_empty(),
        Value::ZSet(z) => z.is_empty(),
        Value::Stream(_) => false,
    }
}

impl Snapshot {
    /// The longest remaining TTL of its keys (0 without any).
    pub fn longest_remaining_ms(&self) -> u64 {
        self.keys
            .iter()
            .filter_map(|k| k.remaining_ms)
            .max()
            .unwrap_or(0)
    }
}

/// Puts the snapshot's keys into `keyspace`, their TTLs resuming from `now_ms`.
pub fn restore(keyspace: &Keyspace, keys: Vec<Stored>, now_ms: u64) {
    for k in keys {
        let entry = Entry {
            value: k.value,
            deadline_ms: k.remaining_ms.map(|ms| now_ms + ms),
        };
        keyspace.db(k.db).insert(&k.key, entry);
    }
}

struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or("truncated")?;
        let out = &self.buf[self.at..end];
        self.at = end;
        Ok(out)
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
    fn id(&mut self) -> Result<StreamId, String> {
        let ms = self.u64()?;
        Ok(StreamId::new(ms, self.u64()?))
    }
    fn bytes(&mut self) -> Result<Bytes, String> {
        let n = self.u32()? as usize;
        Ok(Bytes::copy_from_slice(self.take(n)?))
    }
}

/// CRC-32 (IEEE, as zlib and gzip), bitwise: the files it covers are read once at boot.
pub fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xEDB8_8320 & (crc & 1).wrapping_neg());
        }
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_matches_the_standard_check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }

    fn sample() -> (Keyspace, Header) {
        let ks = Keyspace::new(16, 1);
        ks.db(0).insert(
            b"lock",
            Entry {
                value: Value::Str(Bytes::from("v1")),
                deadline_ms: Some(5_000),
            },
        );
        ks.db(0).insert(
            b"gone",
            Entry {
                value: Value::Str(Bytes::from("x")),
                deadline_ms: Some(900),
            },
        );
        let mut h = HashMap::new();
        h.insert(Bytes::from("f"), Bytes::from("1"));
        ks.db(3)
            .insert(b"hash", Entry::new(Value::Hash(Box::new(h))));
        ks.db(1).insert(
            b"list",
            Entry::new(Value::List(VecDeque::from([
                Bytes::from("a"),
                Bytes::from("b"),
            ]))),
        );
        let mut set = Set::new();
        set.insert(b"a");
        set.insert(b"7");
        ks.db(0)
            .insert(b"set", Entry::new(Value::Set(Box::new(set))));
        let mut z = ZSet::new();
        z.insert(b"m", 1.5);
        z.insert(b"n", -0.25);
        ks.db(0)
            .insert(b"zset", Entry::new(Value::ZSet(Box::new(z))));
        let header = Header {
            node_id: [9; 16],
            boot: 4,
            written_unix_ms: 1_700_000_000_000,
            token_mark: 77,
            fence_remaining_ms: 0,
        };
        (ks, header)
    }

    #[test]
    fn round_trip_keeps_values_and_remaining_ttls() {
        let (ks, header) = sample();
        let raw = encode(&ks, 1_000, &header);
        let snap = decode(&raw).unwrap();
        assert_eq!(snap.header, header);
        assert_eq!(snap.keys.len(), 5, "the expired key is not written");
        let fresh = Keyspace::new(16, 1);
        restore(&fresh, snap.keys, 50_000);
        let lock = fresh.db(0).get(b"lock", 50_000).unwrap();
        assert_eq!(
            lock.deadline_ms(),
            Some(54_000),
            "4 s were left at shutdown"
        );
        assert!(fresh.db(3).get(b"hash", 0).is_some());
        for key in [&b"set"[..], b"zset"] {
            assert_eq!(
                fresh.db(0).get(key, 0).unwrap().value(),
                ks.db(0).get(key, 0).unwrap().value()
            );
        }
        assert_eq!(
            fresh.db(1).get(b"list", 0).unwrap().value(),
            ValueRef::List(&VecDeque::from([Bytes::from("a"), Bytes::from("b")]))
        );
    }

    #[test]
    fn any_damage_is_refused() {
        let (ks, header) = sample();
        let raw = encode(&ks, 1_000, &header);
        assert!(decode(&raw[..raw.len() - 1]).is_err());
        assert!(decode(&raw[..raw.len() / 2]).is_err());
        let mut flipped = raw.clone();
        flipped[40] ^= 1;
        assert!(decode(&flipped).unwrap_err().contains("checksum"));
        assert!(decode(b"").is_err());
    }

    #[test]
    fn keys_without_ttl_stay_without_and_collections_keep_their_content() {
        let (ks, header) = sample();
        let snap = decode(&encode(&ks, 1_000, &header)).unwrap();
        let fresh = Keyspace::new(16, 1);
        restore(&fresh, snap.keys, 50_000);
        let hash = fresh.db(3).get(b"hash", 50_000).unwrap();
        assert_eq!(hash.deadline_ms(), None, "no TTL before, none after");
        assert_eq!(hash.value(), ks.db(3).get(b"hash", 0).unwrap().value());
        assert_eq!(fresh.db(0).get(b"set", 0).unwrap().deadline_ms(), None);
    }

    #[test]
    fn a_key_at_its_deadline_keeps_a_zero_ttl() {
        let ks = Keyspace::new(16, 1);
        ks.db(0).insert(
            b"k",
            Entry {
                value: Value::Str(Bytes::from("v")),
                deadline_ms: Some(1_000),
            },
        );
        let snap = decode(&encode(&ks, 1_000, &sample().1)).unwrap();
        assert_eq!(snap.keys[0].remaining_ms, Some(0));
    }

    /// Each refusal says why (the log line an operator reads).
    #[test]
    fn refusals_name_what_is_wrong() {
        let (ks, header) = sample();
        let raw = encode(&ks, 1_000, &header);
        let too_short = "not a redlockd snapshot (bad magic or too short)";
        assert_eq!(decode(b"").unwrap_err(), too_short);
        assert_eq!(decode(b"RLKDSNAP").unwrap_err(), too_short);
        assert_eq!(decode(b"RLKDSNAPxxxx").unwrap_err(), too_short);
        let mut other = raw.clone();
        other[0] = b'X';
        assert_eq!(decode(&other).unwrap_err(), too_short);
        assert_eq!(
            decode(b"RLKDSNAP\0\0\0\0\0\0\0\0").unwrap_err(),
            "checksum mismatch: the file is partial or corrupt"
        );
        let reseal = |mut body: Vec<u8>| {
            let crc = crc32(&body);
            body.extend_from_slice(&crc.to_le_bytes());
            body
        };
        let body = raw[..raw.len() - 4].to_vec();
        let mut v2 = body.clone();
        v2[8] = 2;
        assert_eq!(
            decode(&reseal(v2)).unwrap_err(),
            "unknown snapshot version 2"
        );
        let mut trailing = body.clone();
        trailing.push(0);
        assert_eq!(
            decode(&reseal(trailing)).unwrap_err(),
            "trailing bytes after the last key"
        );
        // One key: an empty list, which Redis would not keep.
        let mut empty = body[..8 + 4 + 16 + 8 * 4].to_vec();
        empty.extend_from_slice(&1u64.to_le_bytes());
        empty.extend_from_slice(&0u16.to_le_bytes());
        empty.extend_from_slice(&1u32.to_le_bytes());
        empty.push(b'l');
        empty.extend_from_slice(&(-1i64).to_le_bytes());
        empty.push(tag::LIST);
        empty.extend_from_slice(&0u32.to_le_bytes());
        assert_eq!(
            decode(&reseal(empty.clone())).unwrap_err(),
            "an empty collection (a key Redis would not keep)"
        );
        // The same with one item is a key.
        let n = empty.len();
        empty[n - 4..].copy_from_slice(&1u32.to_le_bytes());
        empty.extend_from_slice(&1u32.to_le_bytes());
        empty.push(b'x');
        let snap = decode(&reseal(empty)).unwrap();
        assert_eq!(snap.keys.len(), 1);
        assert_eq!(snap.keys[0].remaining_ms, None);
        let mut unknown = body[..8 + 4 + 16 + 8 * 4].to_vec();
        unknown.extend_from_slice(&1u64.to_le_bytes());
        unknown.extend_from_slice(&0u16.to_le_bytes());
        unknown.extend_from_slice(&1u32.to_le_bytes());
        unknown.push(b'k');
        unknown.extend_from_slice(&(-1i64).to_le_bytes());
        unknown.push(200);
        assert_eq!(
            decode(&reseal(unknown)).unwrap_err(),
            "unknown value type 200"
        );
    }
}
