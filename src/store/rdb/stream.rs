//! A stream as Redis 7.0's RDB writes it (RDB_TYPE_STREAM_LISTPACKS_2), and back.
//!
//! The body: the number of nodes, then per node its master ID (16 bytes: ms and seq,
//! big endian, as the radix tree's key) and its listpack; the stream's length, last
//! ID, first ID, max deleted ID and entries added; then the groups, each with its name,
//! last delivered ID, entries read (-1 when unknown), its PEL (per entry the raw ID,
//! the delivery time in ms as 8 little-endian bytes and the delivery count) and its
//! consumers (name, seen time, and the raw IDs each holds, which must be in the PEL).
//!
//! A node's listpack (t_stream.c): the master entry (live count, deleted count, the
//! number of master fields, the field names, a 0), then each entry (deleted ones
//! stay, flagged): flags (1 deleted, 2 same fields as the master), the ms and seq
//! differences from the master ID, then either the values alone (same fields) or the
//! field count and the fields and values interleaved, and last the number of listpack
//! items the entry took (lp-count), for walking backwards.
//!
//! Nodes are written as this stream holds them, deleted entries included, so a stream
//! restored from Redis dumps back to Redis's bytes. Reading checks what Redis's
//! sanitize-dump-payload checks (every listpack whole, lp-counts, the master entry,
//! PEL entries each owned by one consumer, no duplicates) and more that this store
//! relies on: IDs strictly ascending from node to node and none above the last ID, the
//! counts matching the entries, entries added at least the length. The older type
//! (RDB_TYPE_STREAM_LISTPACKS, Redis 5 to 6.2) is read too: it has no first ID, max
//! deleted ID, entries added or entries read, which are derived as Redis derives them.

use super::blob::{self, Item, ListpackWriter};
use super::{save_len, save_string, Reader};
use crate::store::stream::{Group, Nack, RawEntry, Stream, StreamId};
use bytes::Bytes;
use std::collections::BTreeMap;

pub const STREAM_LISTPACKS: u8 = 15;
pub const STREAM_LISTPACKS_2: u8 = 19;

const FLAG_DELETED: i64 = 1;
const FLAG_SAME_FIELDS: i64 = 2;

/// Appends the stream's type byte and body.
pub fn save(s: &Stream, out: &mut Vec<u8>) {
    out.push(STREAM_LISTPACKS_2);
    let nodes = s.raw_nodes();
    save_len(nodes.len() as u64, out);
    for node in &nodes {
        save_string(&raw_id(node.master), out);
        save_string(
            &node_listpack(node.master, &node.fields, &node.entries),
            out,
        );
    }
    save_len(s.length(), out);
    for id in [s.last_id, s.first_id, s.max_deleted_id] {
        save_len(id.ms, out);
        save_len(id.seq, out);
    }
    save_len(s.entries_added, out);
    save_len(s.groups.len() as u64, out);
    for (name, g) in &s.groups {
        save_string(name, out);
        save_len(g.last_id.ms, out);
        save_len(g.last_id.seq, out);
        save_len(g.entries_read.unwrap_or(u64::MAX), out);
        save_len(g.pel.len() as u64, out);
        for (id, nack) in &g.pel {
            out.extend_from_slice(&raw_id(*id));
            out.extend_from_slice(&nack.delivery_time.to_le_bytes());
            save_len(nack.delivery_count, out);
        }
        save_len(g.consumers.len() as u64, out);
        for (cname, c) in &g.consumers {
            save_string(cname, out);
            out.extend_from_slice(&c.seen_time.to_le_bytes());
            save_len(c.pel.len() as u64, out);
            for id in &c.pel {
                out.extend_from_slice(&raw_id(*id));
            }
        }
    }
}

/// An ID as the radix trees key it: 128 bits, big endian.
fn raw_id(id: StreamId) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&id.ms.to_be_bytes());
    b[8..].copy_from_slice(&id.seq.to_be_bytes());
    b
}

fn parse_raw_id(b: &[u8]) -> Option<StreamId> {
    let b: &[u8; 16] = b.try_into().ok()?;
    let ms = u64::from_be_bytes(b[..8].try_into().ok()?);
    let seq = u64::from_be_bytes(b[8..].try_into().ok()?);
    Some(StreamId::new(ms, seq))
}

/// A node's listpack, item by item as streamAppendItem (and XDEL's flagging) leave it.
fn node_listpack(master: StreamId, fields: &[&[u8]], entries: &[RawEntry<'_>]) -> Vec<u8> {
    let deleted = entries.iter().filter(|e| e.deleted).count();
    let mut lp = ListpackWriter::new();
    lp.push_int((entries.len() - deleted) as i64);
    lp.push_int(deleted as i64);
    lp.push_int(fields.len() as i64);
    for f in fields {
        lp.push(f);
    }
    lp.push_int(0);
    for e in entries {
        let same =
            e.pairs.len() == fields.len() && e.pairs.iter().zip(fields).all(|((f, _), m)| f == m);
        let mut flags = 0;
        if e.deleted {
            flags |= FLAG_DELETED;
        }
        if same {
            flags |= FLAG_SAME_FIELDS;
        }
        lp.push_int(flags);
        // Differences as Redis computes them: unsigned, stored as signed 64-bit.
        lp.push_int(e.id.ms.wrapping_sub(master.ms) as i64);
        lp.push_int(e.id.seq.wrapping_sub(master.seq) as i64);
        let n = e.pairs.len() as i64;
        if same {
            for (_, v) in &e.pairs {
                lp.push(v);
            }
            lp.push_int(n + 3);
        } else {
            lp.push_int(n);
            for (f, v) in &e.pairs {
                lp.push(f);
                lp.push(v);
            }
            lp.push_int(2 * n + 4);
        }
    }
    lp.finish()
}

/// An integer item (a string item that reads as one counts, as lpGetIntegerIfValid).
fn int(item: Item) -> Option<i64> {
    match item {
        Item::Int(v) => Some(v),
        Item::Str(s) => crate::protocol::parse_int(&s),
    }
}

fn count(item: Item) -> Option<u64> {
    u64::try_from(int(item)?).ok()
}

/// One node's entries from its listpack, checked: the master entry, every entry's
/// shape and lp-count, the live and deleted counts, the IDs ascending from `master`.
fn parse_node(master: StreamId, lp: &[u8]) -> Option<(Vec<Vec<u8>>, Vec<OwnedEntry>)> {
    let mut items = blob::listpack_items(lp)?.into_iter();
    let live = count(items.next()?)?;
    let deleted = count(items.next()?)?;
    let nfields = count(items.next()?)?;
    if nfields == 0 {
        return None;
    }
    let mut fields = Vec::new();
    for _ in 0..nfields {
        fields.push(items.next()?.into_bytes());
    }
    if int(items.next()?)? != 0 {
        return None;
    }
    let mut entries: Vec<OwnedEntry> = Vec::new();
    while let Some(first) = items.next() {
        let flags = int(first)?;
        if flags & !(FLAG_DELETED | FLAG_SAME_FIELDS) != 0 {
            return None;
        }
        let ms = master.ms.wrapping_add(int(items.next()?)? as u64);
        let seq = master.seq.wrapping_add(int(items.next()?)? as u64);
        let id = StreamId::new(ms, seq);
        let floor = entries.last().map_or(Some(master), |e| e.id.next());
        if floor.is_none_or(|f| id < f) {
            return None;
        }
        let mut pairs = Vec::new();
        let lp_count = if flags & FLAG_SAME_FIELDS != 0 {
            for f in &fields {
                pairs.push((f.clone(), items.next()?.into_bytes()));
            }
            nfields + 3
        } else {
            let n = count(items.next()?)?;
            if n == 0 {
                return None;
            }
            for _ in 0..n {
                let f = items.next()?.into_bytes();
                pairs.push((f, items.next()?.into_bytes()));
            }
            2 * n + 4
        };
        if count(items.next()?)? != lp_count {
            return None;
        }
        entries.push(OwnedEntry {
            id,
            deleted: flags & FLAG_DELETED != 0,
            pairs,
        });
    }
    let dead = entries.iter().filter(|e| e.deleted).count() as u64;
    let ok = !entries.is_empty() && dead == deleted && entries.len() as u64 - dead == live;
    ok.then_some((fields, entries))
}

struct OwnedEntry {
    id: StreamId,
    deleted: bool,
    pairs: Vec<(Vec<u8>, Vec<u8>)>,
}

fn len_id(r: &mut Reader<'_>) -> Option<StreamId> {
    Some(StreamId::new(r.len()?, r.len()?))
}

/// A delivery or seen time: Unix ms, never negative (Redis takes them from its clock,
/// and XCLAIM's TIME below 0 becomes now), so idle times cannot overflow.
fn time(r: &mut Reader<'_>) -> Option<i64> {
    Some(i64::from_le_bytes(r.bytes(8)?.try_into().ok()?)).filter(|&t| t >= 0)
}

/// A counter Redis keeps as a signed 64-bit number (entries added, entries read, a
/// delivery count): at most i64::MAX, so the increments after it cannot overflow.
fn counter(r: &mut Reader<'_>) -> Option<u64> {
    r.len().filter(|&n| n <= i64::MAX as u64)
}

/// The stream in a body of type `kind` (STREAM_LISTPACKS or STREAM_LISTPACKS_2).
pub fn load(kind: u8, r: &mut Reader<'_>) -> Option<Stream> {
    let v2 = kind == STREAM_LISTPACKS_2;
    let mut st = Stream::new();
    // The last ID of any entry so far, deleted ones included.
    let mut top: Option<StreamId> = None;
    for _ in 0..r.count()? {
        let master = parse_raw_id(&r.string()?)?;
        if top.is_some_and(|t| master <= t) {
            return None;
        }
        let (fields, entries) = parse_node(master, &r.string()?)?;
        top = entries.last().map(|e| e.id);
        let fields: Vec<&[u8]> = fields.iter().map(|f| &f[..]).collect();
        let entries: Vec<RawEntry<'_>> = entries
            .iter()
            .map(|e| RawEntry {
                id: e.id,
                deleted: e.deleted,
                pairs: e.pairs.iter().map(|(f, v)| (&f[..], &v[..])).collect(),
            })
            .collect();
        st.push_raw_node(master, &fields, &entries);
    }
    if r.len()? != st.length() {
        return None;
    }
    st.last_id = len_id(r)?;
    if top.is_some_and(|t| t > st.last_id) {
        return None;
    }
    if v2 {
        st.first_id = len_id(r)?;
        st.max_deleted_id = len_id(r)?;
        st.entries_added = counter(r)?;
        if st.entries_added < st.length() {
            return None;
        }
    } else {
        st.first_id = st.edge_id(true).unwrap_or(StreamId::MIN);
        st.entries_added = st.length();
    }
    for _ in 0..r.count()? {
        let name = Bytes::from(r.string()?);
        let last_id = len_id(r)?;
        let entries_read = if v2 {
            // -1 (all bits set) when unknown.
            match r.len()? {
                u64::MAX => None,
                n if n <= i64::MAX as u64 => Some(n),
                _ => return None,
            }
        } else {
            st.estimate_entries_read(last_id)
        };
        let group = load_group(r, Group::new(last_id, entries_read))?;
        if st.groups.insert(name, group).is_some() {
            return None;
        }
    }
    Some(st)
}

/// A group's PEL and consumers; every pending entry must belong to exactly one
/// consumer.
fn load_group(r: &mut Reader<'_>, mut g: Group) -> Option<Group> {
    // ID -> (delivery time, delivery count, owner once a consumer claims it).
    let mut pel: BTreeMap<StreamId, (i64, u64, Option<Bytes>)> = BTreeMap::new();
    for _ in 0..r.count()? {
        let id = parse_raw_id(r.bytes(16)?)?;
        let time = time(r)?;
        let count = counter(r)?;
        if pel.insert(id, (time, count, None)).is_some() {
            return None;
        }
    }
    for _ in 0..r.count()? {
        let name = r.string()?;
        let seen = time(r)?;
        if !g.create_consumer(&name, seen) {
            return None;
        }
        let key = g.consumer_key(&name)?;
        let consumer = g.consumers.get_mut(&key)?;
        for _ in 0..r.count()? {
            let id = parse_raw_id(r.bytes(16)?)?;
            let owner = &mut pel.get_mut(&id)?.2;
            if owner.is_some() {
                return None;
            }
            *owner = Some(key.clone());
            consumer.pel.insert(id);
        }
    }
    for (id, (delivery_time, delivery_count, owner)) in pel {
        let nack = Nack {
            consumer: owner?,
            delivery_time,
            delivery_count,
        };
        g.pel.insert(id, nack);
    }
    Some(g)
}

#[cfg(test)]
mod tests {
    use super::super::{finish_payload, RDB_VERSION};
    use super::*;
    use crate::store::stream::NodeLimits;

    fn id(ms: u64, seq: u64) -> StreamId {
        StreamId::new(ms, seq)
    }

    fn sample() -> Stream {
        let limits = NodeLimits {
            max_entries: 4,
            max_bytes: 0,
        };
        let mut s = Stream::new();
        for i in 1..=10u64 {
            let v = i.to_string();
            let f: &[u8] = if i % 4 == 0 { b"other" } else { b"f" };
            s.append(id(i, i), &[(f, v.as_bytes()), (b"g", b"x")], limits);
        }
        s.delete(id(2, 2));
        s.delete(id(5, 5));
        let mut g = Group::new(id(6, 6), Some(6));
        g.create_consumer(b"alice", 1000);
        g.create_consumer(b"bob", 0);
        g.create_consumer(b"idle", 7);
        let alice = g.consumer_key(b"alice").unwrap();
        let bob = g.consumer_key(b"bob").unwrap();
        g.assign(id(1, 1), &alice, 123, 1);
        g.assign(id(2, 2), &alice, 124, 7);
        g.assign(id(6, 6), &bob, 0, i64::MAX as u64);
        s.groups.insert(Bytes::from_static(b"g1"), g);
        s.groups
            .insert(Bytes::from_static(b"g2"), Group::new(StreamId::MIN, None));
        s
    }

    fn dump(s: &Stream) -> Vec<u8> {
        let mut out = Vec::new();
        save(s, &mut out);
        out
    }

    fn restore(body: &[u8]) -> Option<Stream> {
        let mut r = Reader::new(body);
        let kind = r.byte()?;
        load(kind, &mut r)
    }

    #[test]
    fn a_stream_round_trips_with_its_nodes_and_groups() {
        let s = sample();
        let back = restore(&dump(&s)).expect("valid");
        assert_eq!(back, s);
        assert_eq!(back.node_count(), 3);
        assert_eq!(dump(&back), dump(&s));
        let empty = Stream::new();
        assert_eq!(restore(&dump(&empty)), Some(empty));
    }

    /// A body with the given nodes, then the stream's fields and no groups.
    fn body(nodes: &[(StreamId, Vec<u8>)], length: u64, last: StreamId) -> Vec<u8> {
        let mut out = vec![STREAM_LISTPACKS_2];
        save_len(nodes.len() as u64, &mut out);
        for (master, lp) in nodes {
            save_string(&raw_id(*master), &mut out);
            save_string(lp, &mut out);
        }
        save_len(length, &mut out);
        for v in [last.ms, last.seq, 0, 0, 0, 0, length, 0] {
            save_len(v, &mut out);
        }
        out
    }

    /// A listpack of the given items: numbers as integers, anything else as strings.
    fn lp(items: &[&str]) -> Vec<u8> {
        let mut w = ListpackWriter::new();
        for i in items {
            w.push(i.as_bytes());
        }
        w.finish()
    }

    // count deleted nfields f 0 | flags ms seq v lp-count ...
    const GOOD: &[&str] = &[
        "2", "0", "1", "f", "0", "2", "0", "0", "a", "4", "2", "1", "0", "b", "4",
    ];

    #[test]
    fn a_hand_built_node_restores() {
        let s = restore(&body(&[(id(5, 0), lp(GOOD))], 2, id(6, 0))).expect("valid");
        let entries = s.entries();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[1], (id(6, 0), vec![(&b"f"[..], &b"b"[..])]));
    }

    #[test]
    fn lies_and_disorder_are_refused() {
        let with = |i: usize, v: &str| {
            let mut items = GOOD.to_vec();
            items[i] = v;
            lp(&items)
        };
        let cases = [
            ("live count", body(&[(id(5, 0), with(0, "3"))], 2, id(6, 0))),
            (
                "deleted count",
                body(&[(id(5, 0), with(1, "1"))], 2, id(6, 0)),
            ),
            (
                "master terminator",
                body(&[(id(5, 0), with(4, "1"))], 2, id(6, 0)),
            ),
            (
                "unknown flag",
                body(&[(id(5, 0), with(5, "6"))], 2, id(6, 0)),
            ),
            ("lp-count", body(&[(id(5, 0), with(9, "5"))], 2, id(6, 0))),
            (
                "ID below the master",
                body(&[(id(5, 1), lp(GOOD))], 2, id(6, 0)),
            ),
            (
                "IDs out of order",
                body(&[(id(5, 0), with(11, "-1"))], 2, id(6, 0)),
            ),
            ("equal IDs", body(&[(id(5, 0), with(11, "0"))], 2, id(6, 0))),
            ("stream length", body(&[(id(5, 0), lp(GOOD))], 3, id(6, 0))),
            (
                "an entry past the last ID",
                body(&[(id(5, 0), lp(GOOD))], 2, id(5, 9)),
            ),
            (
                "nodes out of order",
                body(&[(id(5, 0), lp(GOOD)), (id(6, 0), lp(GOOD))], 4, id(7, 0)),
            ),
            ("a short key", {
                let mut b = body(&[(id(5, 0), lp(GOOD))], 2, id(6, 0));
                b[2] = 15;
                b
            }),
            (
                "no entries",
                body(&[(id(5, 0), lp(&["0", "0", "1", "f", "0"]))], 0, id(6, 0)),
            ),
            (
                "no fields",
                body(
                    &[(id(5, 0), lp(&["1", "0", "0", "0", "2", "0", "0", "3"]))],
                    1,
                    id(6, 0),
                ),
            ),
            ("a value missing", {
                let items = &GOOD[..GOOD.len() - 2];
                body(&[(id(5, 0), lp(items))], 2, id(6, 0))
            }),
        ];
        for (what, b) in cases {
            assert!(restore(&b).is_none(), "{what}");
        }
        let mut ok = vec![(id(5, 0), lp(GOOD))];
        let mut second = GOOD.to_vec();
        second[6] = "0";
        ok.push((id(7, 0), lp(&second)));
        assert!(restore(&body(&ok, 4, id(8, 0))).is_some());
    }

    /// `sample()`'s body with its g1 group's PEL and consumers replaced.
    fn with_group(pel: &[StreamId], consumers: &[(&str, &[StreamId])]) -> Vec<u8> {
        group_body(pel, consumers, 5, 1, 0)
    }

    /// As `with_group`, with every PEL entry's delivery time and count, and the group's
    /// entries read, given.
    fn group_body(
        pel: &[StreamId],
        consumers: &[(&str, &[StreamId])],
        time: i64,
        count: u64,
        read: u64,
    ) -> Vec<u8> {
        let mut s = sample();
        s.groups.clear();
        let mut out = dump(&s);
        out.pop(); // the group count (0)
        save_len(1, &mut out);
        save_string(b"g", &mut out);
        for v in [0, 0, read] {
            save_len(v, &mut out);
        }
        save_len(pel.len() as u64, &mut out);
        for p in pel {
            out.extend_from_slice(&raw_id(*p));
            out.extend_from_slice(&time.to_le_bytes());
            save_len(count, &mut out);
        }
        save_len(consumers.len() as u64, &mut out);
        for (name, ids) in consumers {
            save_string(name.as_bytes(), &mut out);
            out.extend_from_slice(&9i64.to_le_bytes());
            save_len(ids.len() as u64, &mut out);
            for i in *ids {
                out.extend_from_slice(&raw_id(*i));
            }
        }
        out
    }

    #[test]
    fn a_pel_must_match_its_consumers() {
        let (a, b) = (id(1, 1), id(3, 3));
        let g = restore(&with_group(&[a, b], &[("x", &[a]), ("y", &[b])])).expect("valid");
        assert_eq!(g.groups[&b"g"[..]].pel[&b].consumer, &b"y"[..]);
        let unknown = group_body(&[a], &[("x", &[a])], 0, i64::MAX as u64, u64::MAX);
        let g = restore(&unknown).expect("valid");
        assert_eq!(g.groups[&b"g"[..]].entries_read, None);
        for (what, body) in [
            (
                "a PEL entry of no consumer",
                with_group(&[a, b], &[("x", &[a])]),
            ),
            (
                "a consumer's ID not in the PEL",
                with_group(&[a], &[("x", &[a, b])]),
            ),
            (
                "an ID held twice",
                with_group(&[a], &[("x", &[a]), ("y", &[a])]),
            ),
            ("a duplicate PEL entry", with_group(&[a, a], &[("x", &[a])])),
            (
                "a duplicate consumer",
                with_group(&[], &[("x", &[]), ("x", &[])]),
            ),
            (
                "a negative delivery time",
                group_body(&[a], &[("x", &[a])], -1, 1, 0),
            ),
            (
                "a count past i64",
                group_body(&[a], &[("x", &[a])], 5, 1 << 63, 0),
            ),
            (
                "entries read past i64",
                group_body(&[a], &[("x", &[a])], 5, 1, 1 << 63),
            ),
        ] {
            assert!(restore(&body).is_none(), "{what}");
        }
    }

    #[test]
    fn every_truncation_and_byte_change_is_refused_or_restores_whole() {
        let full = dump(&sample());
        for cut in 0..full.len() {
            assert!(restore(&full[..cut]).is_none(), "cut at {cut}");
        }
        for i in 0..full.len() {
            for x in [0x01, 0x80, 0xff] {
                let mut bad = full.clone();
                bad[i] ^= x;
                if let Some(s) = restore(&bad) {
                    // Whatever passes is a stream this store can hold and dump again.
                    let again = dump(&s);
                    assert_eq!(restore(&again), Some(s));
                }
            }
        }
        let mut payload = full.clone();
        finish_payload(&mut payload, RDB_VERSION);
        assert!(super::super::restore_value(&payload).is_ok());
    }
}
