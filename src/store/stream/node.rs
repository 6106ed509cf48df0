//! A stream node's encoding: packed entries after a master ID (see the `stream`
//! module's doc), and the varints and strings they are made of.

use super::StreamId;
use crate::store::rdb::blob::{int_entry_bytes, str_entry_bytes, LISTPACK_OVERHEAD};

pub(super) const DELETED: u8 = 1;
pub(super) const SAME_FIELDS: u8 = 2;

/// One node: packed entries after a master ID (see the module's doc).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Node {
    /// The master entry's field names, each a varint length and its bytes.
    pub(super) master_fields: Box<[u8]>,
    pub(super) master_count: u32,
    pub(super) data: Vec<u8>,
    pub(super) live: u32,
    pub(super) deleted: u32,
    /// What Redis's listpack of this node would take for the master entry's fields,
    /// their count and the closing 0 (see `listpack_bytes`).
    lp_master: u64,
    /// ... and for the entries, deleted ones included (a deletion changes a flag and
    /// the master's counts, never an entry's size).
    lp_entries: u64,
}

pub(super) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub(super) fn get_varint(buf: &[u8], at: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let b = buf[*at];
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return v;
        }
        shift += 7;
    }
}

pub(super) fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    put_varint(out, s.len() as u64);
    out.extend_from_slice(s);
}

pub(super) fn get_str<'a>(buf: &'a [u8], at: &mut usize) -> &'a [u8] {
    let n = get_varint(buf, at) as usize;
    let s = &buf[*at..*at + n];
    *at += n;
    s
}

/// One decoded entry header: where it starts, its flags and ID, where its strings are.
pub(super) struct Header {
    pub(super) at: usize,
    pub(super) flags: u8,
    pub(super) id: StreamId,
    pub(super) body: usize,
}

impl Node {
    pub(super) fn new(fields: &[&[u8]]) -> Node {
        let mut master = Vec::new();
        for f in fields {
            put_str(&mut master, f);
        }
        let lp_master = int_entry_bytes(fields.len() as i64)
            + fields.iter().map(|f| str_entry_bytes(f)).sum::<usize>()
            + int_entry_bytes(0);
        Node {
            master_fields: master.into_boxed_slice(),
            master_count: fields.len() as u32,
            data: Vec::new(),
            live: 0,
            deleted: 0,
            lp_master: lp_master as u64,
            lp_entries: 0,
        }
    }

    /// The bytes (`lpBytes`) of the listpack Redis would hold for this node: what its
    /// `stream-node-max-bytes` counts when it decides that a node is full, and what a
    /// DUMP of the node carries.
    pub(super) fn listpack_bytes(&self) -> u64 {
        (LISTPACK_OVERHEAD
            + int_entry_bytes(i64::from(self.live))
            + int_entry_bytes(i64::from(self.deleted))) as u64
            + self.lp_master
            + self.lp_entries
    }

    pub(super) fn master_fields(&self) -> Vec<&[u8]> {
        let mut at = 0;
        (0..self.master_count)
            .map(|_| get_str(&self.master_fields, &mut at))
            .collect()
    }

    pub(super) fn same_as_master(&self, fields: &[&[u8]]) -> bool {
        if fields.len() != self.master_count as usize {
            return false;
        }
        let mut at = 0;
        fields
            .iter()
            .all(|f| get_str(&self.master_fields, &mut at) == *f)
    }

    pub(super) fn append(&mut self, master: StreamId, id: StreamId, pairs: &[(&[u8], &[u8])]) {
        let fields: Vec<&[u8]> = pairs.iter().map(|(f, _)| *f).collect();
        let same = self.same_as_master(&fields);
        self.data.push(if same { SAME_FIELDS } else { 0 });
        put_varint(&mut self.data, id.ms - master.ms);
        put_varint(&mut self.data, id.seq);
        if !same {
            put_varint(&mut self.data, pairs.len() as u64);
            for f in &fields {
                put_str(&mut self.data, f);
            }
        }
        for (_, v) in pairs {
            put_str(&mut self.data, v);
        }
        self.live += 1;
        self.lp_entries += entry_listpack_bytes(master, id, pairs, same) as u64;
    }

    /// The entry header at `at`; `end` is where the next entry starts.
    pub(super) fn header(&self, master: StreamId, at: usize) -> (Header, usize) {
        let d = &self.data;
        let mut p = at;
        let flags = d[p];
        p += 1;
        let ms = master.ms + get_varint(d, &mut p);
        let seq = get_varint(d, &mut p);
        let body = p;
        let n = if flags & SAME_FIELDS != 0 {
            self.master_count as u64
        } else {
            let n = get_varint(d, &mut p);
            for _ in 0..n {
                get_str(d, &mut p);
            }
            n
        };
        for _ in 0..n {
            get_str(d, &mut p);
        }
        let h = Header {
            at,
            flags,
            id: StreamId::new(ms, seq),
            body,
        };
        (h, p)
    }

    /// Every entry's header, in order (deleted ones included).
    pub(super) fn headers(&self, master: StreamId) -> Vec<Header> {
        let mut out = Vec::with_capacity((self.live + self.deleted) as usize);
        let mut at = 0;
        while at < self.data.len() {
            let (h, next) = self.header(master, at);
            out.push(h);
            at = next;
        }
        out
    }

    /// The field-value pairs of the entry whose body starts at `body`.
    pub(super) fn pairs(&self, flags: u8, body: usize) -> Vec<(&[u8], &[u8])> {
        let d = &self.data;
        let mut p = body;
        let fields: Vec<&[u8]> = if flags & SAME_FIELDS != 0 {
            self.master_fields()
        } else {
            let n = get_varint(d, &mut p);
            (0..n).map(|_| get_str(d, &mut p)).collect()
        };
        fields
            .into_iter()
            .map(|f| (f, get_str(d, &mut p)))
            .collect()
    }

    pub(super) fn mark_deleted(&mut self, at: usize) {
        self.data[at] |= DELETED;
        self.live -= 1;
        self.deleted += 1;
    }

    pub(super) fn heap_bytes(&self) -> usize {
        self.data.capacity() + self.master_fields.len() + std::mem::size_of::<Node>()
    }
}

/// The bytes of an entry in Redis's listpack of its node: flags, the ID's differences
/// from the master ID, the fields unless they are the master's (then their count
/// first), the values, and the entry's item count.
fn entry_listpack_bytes(
    master: StreamId,
    id: StreamId,
    pairs: &[(&[u8], &[u8])],
    same_fields: bool,
) -> usize {
    let n = pairs.len() as i64;
    let ids = int_entry_bytes(id.ms.wrapping_sub(master.ms) as i64)
        + int_entry_bytes(id.seq.wrapping_sub(master.seq) as i64);
    let values: usize = pairs.iter().map(|(_, v)| str_entry_bytes(v)).sum();
    // The flags (0-3) take one byte and its back length.
    let head = 2 + ids;
    if same_fields {
        head + values + int_entry_bytes(n + 3)
    } else {
        let fields: usize = pairs.iter().map(|(f, _)| str_entry_bytes(f)).sum();
        head + int_entry_bytes(n) + fields + values + int_entry_bytes(2 * n + 4)
    }
}
