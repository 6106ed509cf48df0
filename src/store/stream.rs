//! The stream type: entries in ID order, packed into nodes, plus consumer groups.
//!
//! Layout. Entries live in nodes of up to `NodeLimits::max_entries` entries (Redis's
//! `stream-node-max-entries`, 100 by default) or `max_bytes` bytes (4096), kept in a
//! `BTreeMap` keyed by each node's master ID (the ID of the first entry put in it), as
//! Redis keeps listpacks in a radix tree. A node is one byte vector of entries, each:
//! a flags byte (deleted, same fields as the master entry), the ID as varints (the ms
//! delta from the master ID, then the sequence), then (unless it has the master's
//! fields) the field count and fields, then the values, every string a varint length
//! and its bytes. The master's field names are stored once per node.
//!
//! Why: a `BTreeMap<StreamId, Vec<(Bytes, Bytes)>>` would cost a 16-byte key, a
//! 24-byte vector and its heap block, and two 32-byte `Bytes` with blocks of their own
//! per entry: well over 100 B for `XADD s * f v`. Packed, an entry is its flags byte,
//! 1-3 bytes of ms delta, a sequence byte and its values (a field name the node's first
//! entry shares is not repeated); the node's own costs (the tree's slot, the master
//! fields, the vector's spare capacity, trimmed when a node is closed) are shared by
//! 100 entries. Measured with `benches/streams.sh` (1M x `XADD mem:s * f 0123456789`):
//! 16.6 B of used_memory per entry, redis-server 7.0.15 21.7 (docs/benchmarks.md).
//!
//! Deleted entries are flagged in place (XDEL, XTRIM within a node), and a node whose
//! entries are all deleted is removed, as in Redis; the counts of live and deleted
//! entries decide when a node is full, as Redis's do, so approximate trimming (`~`)
//! removes the same whole nodes Redis would for the same commands. The byte limit
//! counts what Redis's listpack of the node would take (`Node::listpack_bytes`, kept
//! as entries are added), not this encoding's smaller size, so nodes end at the same
//! entries as Redis's also for long entries, and a DUMP carries the same nodes.

use bytes::Bytes;
use std::collections::BTreeMap;
use std::fmt;

mod groups;
mod node;

pub use groups::{Group, Nack};
use node::*;

/// A stream entry ID: milliseconds and sequence.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

impl StreamId {
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    pub const fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    /// The next ID, `None` after the last possible one.
    pub fn next(self) -> Option<StreamId> {
        if self.seq < u64::MAX {
            Some(StreamId::new(self.ms, self.seq + 1))
        } else if self.ms < u64::MAX {
            Some(StreamId::new(self.ms + 1, 0))
        } else {
            None
        }
    }

    /// The previous ID, `None` before 0-0.
    pub fn prev(self) -> Option<StreamId> {
        if self.seq > 0 {
            Some(StreamId::new(self.ms, self.seq - 1))
        } else if self.ms > 0 {
            Some(StreamId::new(self.ms - 1, u64::MAX))
        } else {
            None
        }
    }

    pub fn is_zero(self) -> bool {
        self == StreamId::MIN
    }

    /// `ms-seq`, as replies carry it.
    pub fn to_bytes(self) -> Bytes {
        Bytes::from(self.to_string())
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// A node's listpack is never let grow past this (Redis's STREAM_LISTPACK_MAX_SIZE):
/// `stream-node-max-bytes` 0, or above it, means this.
const LISTPACK_MAX_BYTES: u64 = 1 << 30;

/// How large a node may grow before a new one is started (Redis's
/// `stream-node-max-entries`, 0: no limit, and `stream-node-max-bytes`, counted in
/// the bytes of Redis's listpack of the node).
#[derive(Clone, Copy, Debug)]
pub struct NodeLimits {
    pub max_entries: u64,
    pub max_bytes: u64,
}

impl Default for NodeLimits {
    fn default() -> NodeLimits {
        NodeLimits {
            max_entries: 100,
            max_bytes: 4096,
        }
    }
}

/// A node as stored (see `Stream::raw_nodes`).
pub struct RawNode<'a> {
    pub master: StreamId,
    pub fields: Vec<&'a [u8]>,
    pub entries: Vec<RawEntry<'a>>,
}

/// An entry of a node as stored, deleted or not.
pub struct RawEntry<'a> {
    pub id: StreamId,
    pub deleted: bool,
    pub pairs: Vec<(&'a [u8], &'a [u8])>,
}

/// A stream entry read out: its ID and field-value pairs (borrowed from the stream).
pub type EntryRef<'a> = (StreamId, Vec<(&'a [u8], &'a [u8])>);

/// A stream: entries, the bookkeeping XINFO shows, and consumer groups.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Stream {
    nodes: BTreeMap<StreamId, Node>,
    length: u64,
    pub last_id: StreamId,
    /// The first live entry's ID (0-0 when empty), as Redis records it.
    pub first_id: StreamId,
    pub max_deleted_id: StreamId,
    pub entries_added: u64,
    pub groups: BTreeMap<Bytes, Group>,
}

/// How XADD / XTRIM trim (see `Stream::trim`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Trim {
    MaxLen(u64),
    MinId(StreamId),
}

impl Stream {
    pub fn new() -> Stream {
        Stream::default()
    }

    /// The number of live entries (XLEN).
    pub fn length(&self) -> u64 {
        self.length
    }

    /// A stream key exists even with no entries (XADD with MAXLEN 0, XGROUP CREATE
    /// MKSTREAM): it is never "empty" in the sense that removes a key.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// How many nodes hold the entries (XINFO's radix-tree-keys).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Appends an entry with `id` (greater than `last_id`: the caller checks) and
    /// updates the bookkeeping.
    pub fn append(&mut self, id: StreamId, pairs: &[(&[u8], &[u8])], limits: NodeLimits) {
        debug_assert!(id > self.last_id);
        let size: u64 = pairs.iter().map(|(f, v)| (f.len() + v.len()) as u64).sum();
        // As Redis: a node is full when its listpack's bytes plus the new entry's raw
        // fields and values reach stream-node-max-bytes (0 or above 1 GB: 1 GB).
        let max_bytes = match limits.max_bytes {
            0 => LISTPACK_MAX_BYTES,
            n => n.min(LISTPACK_MAX_BYTES),
        };
        let tail_full = self.nodes.last_key_value().is_none_or(|(_, n)| {
            let bytes_full = n.listpack_bytes() + size >= max_bytes;
            let count_full =
                limits.max_entries > 0 && u64::from(n.live + n.deleted) >= limits.max_entries;
            bytes_full || count_full
        });
        if tail_full {
            if let Some(mut last) = self.nodes.last_entry() {
                last.get_mut().data.shrink_to_fit();
            }
            let fields: Vec<&[u8]> = pairs.iter().map(|(f, _)| *f).collect();
            self.nodes.insert(id, Node::new(&fields));
        }
        let mut tail = self.nodes.last_entry().expect("a tail node");
        let master = *tail.key();
        tail.get_mut().append(master, id, pairs);
        if self.length == 0 {
            self.first_id = id;
        }
        self.length += 1;
        self.entries_added += 1;
        self.last_id = id;
    }

    /// The ID XADD gives an entry: `explicit` (with `seq_given` false, its sequence
    /// is generated) or from the Unix time `now_ms`. `None` when the ID would not
    /// be above the last one.
    pub fn next_id(
        &self,
        explicit: Option<StreamId>,
        seq_given: bool,
        now_ms: u64,
    ) -> Option<StreamId> {
        let id = match explicit {
            Some(id) if seq_given => id,
            Some(id) if id.ms == self.last_id.ms => {
                if self.last_id.seq == u64::MAX {
                    return None;
                }
                StreamId::new(id.ms, self.last_id.seq + 1)
            }
            Some(id) => id,
            None if now_ms > self.last_id.ms => StreamId::new(now_ms, 0),
            None => self.last_id.next()?,
        };
        (id > self.last_id).then_some(id)
    }

    /// Entries from `start` to `end` (inclusive), forwards or (`rev`) backwards, at
    /// most `count` (0: all) of them.
    pub fn range(
        &self,
        start: StreamId,
        end: StreamId,
        count: usize,
        rev: bool,
    ) -> Vec<EntryRef<'_>> {
        let mut out = Vec::new();
        if start > end {
            return out;
        }
        let first_node = self
            .nodes
            .range(..=start)
            .next_back()
            .map_or(start, |(k, _)| *k);
        let nodes = self.nodes.range(first_node..=end);
        if rev {
            for (master, node) in nodes.rev() {
                for h in node.headers(*master).into_iter().rev() {
                    if h.flags & DELETED != 0 || h.id > end {
                        continue;
                    }
                    if h.id < start {
                        return out;
                    }
                    out.push((h.id, node.pairs(h.flags, h.body)));
                    if count > 0 && out.len() == count {
                        return out;
                    }
                }
            }
        } else {
            for (master, node) in nodes {
                let mut at = 0;
                while at < node.data.len() {
                    let (h, next) = node.header(*master, at);
                    at = next;
                    if h.flags & DELETED != 0 || h.id < start {
                        continue;
                    }
                    if h.id > end {
                        return out;
                    }
                    out.push((h.id, node.pairs(h.flags, h.body)));
                    if count > 0 && out.len() == count {
                        return out;
                    }
                }
            }
        }
        out
    }

    /// The entry with `id`, if it exists (not deleted).
    pub fn get(&self, id: StreamId) -> Option<Vec<(&[u8], &[u8])>> {
        self.range(id, id, 1, false).pop().map(|(_, pairs)| pairs)
    }

    pub fn contains(&self, id: StreamId) -> bool {
        self.get(id).is_some()
    }

    /// The first (or last) live entry's ID.
    pub fn edge_id(&self, first: bool) -> Option<StreamId> {
        self.range(StreamId::MIN, StreamId::MAX, 1, !first)
            .pop()
            .map(|(id, _)| id)
    }

    /// Deletes the entry `id`; whether it existed. Keeps first_id and max_deleted_id
    /// as XDEL does.
    pub fn delete(&mut self, id: StreamId) -> bool {
        let Some((&master, _)) = self.nodes.range(..=id).next_back() else {
            return false;
        };
        let node = self.nodes.get_mut(&master).expect("found above");
        let Some(h) = node
            .headers(master)
            .into_iter()
            .find(|h| h.id == id && h.flags & DELETED == 0)
        else {
            return false;
        };
        node.mark_deleted(h.at);
        if node.live == 0 {
            self.nodes.remove(&master);
        }
        self.length -= 1;
        if id > self.max_deleted_id {
            self.max_deleted_id = id;
        }
        if self.length == 0 {
            self.first_id = StreamId::MIN;
        } else if id == self.first_id {
            self.first_id = self.edge_id(true).unwrap_or(StreamId::MIN);
        }
        true
    }

    /// Trims from the oldest entries, as Redis's streamTrim: whole nodes while the
    /// node can go entirely; then, unless `approx`, entries of the first node one by
    /// one. `limit` (0: none) bounds the entries removed. Returns how many went.
    pub fn trim(&mut self, how: Trim, approx: bool, limit: u64) -> u64 {
        let mut deleted = 0u64;
        while let Some((&master, node)) = self.nodes.first_key_value() {
            if let Trim::MaxLen(max) = how {
                if self.length <= max {
                    break;
                }
            }
            let entries = u64::from(node.live);
            if limit > 0 && deleted + entries > limit {
                break;
            }
            let whole = match how {
                Trim::MaxLen(max) => self.length - entries >= max,
                Trim::MinId(min) => {
                    let last = node.headers(master).last().map_or(master, |h| h.id);
                    last < min
                }
            };
            if whole {
                self.nodes.remove(&master);
                self.length -= entries;
                deleted += entries;
                continue;
            }
            if approx {
                break;
            }
            let node = self.nodes.get_mut(&master).expect("the first node");
            for h in node.headers(master) {
                let stop = match how {
                    Trim::MaxLen(max) => self.length <= max,
                    Trim::MinId(min) => h.id >= min,
                };
                if stop {
                    break;
                }
                if h.flags & DELETED == 0 {
                    node.mark_deleted(h.at);
                    self.length -= 1;
                    deleted += 1;
                }
            }
            if node.live == 0 {
                self.nodes.remove(&master);
            }
            break;
        }
        if self.length == 0 {
            self.first_id = StreamId::MIN;
        } else if deleted > 0 {
            self.first_id = self.edge_id(true).unwrap_or(StreamId::MIN);
        }
        deleted
    }

    /// Whether an entry deleted by XDEL may lie between `start` and the end (Redis's
    /// streamRangeHasTombstones with no end).
    pub fn has_tombstones_from(&self, start: StreamId) -> bool {
        if self.length == 0 || self.max_deleted_id.is_zero() {
            return false;
        }
        if self.first_id > self.max_deleted_id {
            return false;
        }
        start <= self.max_deleted_id
    }

    /// The logical read counter of `id` when it can be known (Redis's
    /// streamEstimateDistanceFromFirstEverEntry).
    pub fn estimate_entries_read(&self, id: StreamId) -> Option<u64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if self.length == 0 && id <= self.last_id {
            return Some(self.entries_added);
        }
        if id == self.last_id {
            return Some(self.entries_added);
        }
        if id > self.last_id {
            return None;
        }
        if self.max_deleted_id.is_zero() || self.max_deleted_id < self.first_id {
            if id < self.first_id {
                return Some(self.entries_added - self.length);
            }
            if id == self.first_id {
                return Some(self.entries_added - self.length + 1);
            }
        }
        None
    }

    /// A group's lag: entries not yet delivered to it, when it can be known. As in
    /// Redis it is a plain difference, negative after an ENTRIESREAD past the stream's
    /// entries_added.
    pub fn lag(&self, group: &Group) -> Option<i64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        let lag = |read: u64| (self.entries_added as i64).wrapping_sub(read as i64);
        if let Some(read) = group.entries_read {
            if !self.has_tombstones_from(group.last_id) {
                return Some(lag(read));
            }
        }
        self.estimate_entries_read(group.last_id).map(lag)
    }

    /// Moves a group's last delivered ID to `id`, keeping its read counter as Redis
    /// does when it delivers `id`.
    pub fn advance_group(&self, group: &mut Group, id: StreamId) {
        if id <= group.last_id {
            return;
        }
        match group.entries_read {
            Some(n) if !self.has_tombstones_from(id) => group.entries_read = Some(n + 1),
            _ if self.entries_added > 0 => group.entries_read = self.estimate_entries_read(id),
            _ => {}
        }
        group.last_id = id;
    }

    /// The bytes the stream holds on the heap (MEMORY USAGE), roughly.
    pub fn heap_bytes(&self) -> usize {
        let nodes: usize = self.nodes.values().map(Node::heap_bytes).sum();
        let groups: usize = self
            .groups
            .iter()
            .map(|(name, g)| {
                name.len()
                    + 64
                    + g.pel.len() * 80
                    + g.consumers
                        .iter()
                        .map(|(n, c)| n.len() + 64 + c.pel.len() * 24)
                        .sum::<usize>()
            })
            .sum();
        nodes + self.nodes.len() * 32 + groups + std::mem::size_of::<Stream>()
    }

    /// Every live entry, in order (snapshots, COPY, DUMP).
    pub fn entries(&self) -> Vec<EntryRef<'_>> {
        self.range(StreamId::MIN, StreamId::MAX, 0, false)
    }

    /// The nodes as they are stored, for DUMP: each node's master ID and master
    /// fields, then every entry it holds, deleted ones included (flagged).
    pub fn raw_nodes(&self) -> Vec<RawNode<'_>> {
        self.nodes
            .iter()
            .map(|(master, node)| RawNode {
                master: *master,
                fields: node.master_fields(),
                entries: node
                    .headers(*master)
                    .into_iter()
                    .map(|h| RawEntry {
                        id: h.id,
                        deleted: h.flags & DELETED != 0,
                        pairs: node.pairs(h.flags, h.body),
                    })
                    .collect(),
            })
            .collect()
    }

    /// Appends a whole node after the last one, for RESTORE: `fields` become its
    /// master fields, the entries go in as given (deleted ones flagged). The caller
    /// checks the order (every ID above the previous node's, at or above `master`,
    /// ascending) and sets the bookkeeping (last, first and max deleted IDs, entries
    /// added) afterwards; the length counts the live entries.
    pub fn push_raw_node(&mut self, master: StreamId, fields: &[&[u8]], entries: &[RawEntry<'_>]) {
        debug_assert!(self.nodes.last_key_value().is_none_or(|(k, _)| *k < master));
        let mut node = Node::new(fields);
        for e in entries {
            let at = node.data.len();
            node.append(master, e.id, &e.pairs);
            if e.deleted {
                node.mark_deleted(at);
            }
        }
        node.data.shrink_to_fit();
        self.length += u64::from(node.live);
        self.nodes.insert(master, node);
    }
}

#[cfg(test)]
mod tests;
