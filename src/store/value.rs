use super::{Set, Stream, ZSet};
use bytes::Bytes;
use std::collections::{HashMap, VecDeque};

/// The one-byte type tags of a value, shared by the in-memory entry (`packed.rs`, in
/// its tag byte) and the snapshot file (`durability::snapshot`). The numbers are part
/// of the snapshot format: never renumber them.
pub mod tag {
    pub const STR: u8 = 0;
    pub const HASH: u8 = 1;
    pub const LIST: u8 = 2;
    pub const SET: u8 = 3;
    pub const ZSET: u8 = 4;
    pub const STREAM: u8 = 5;
}

/// What a key holds, owned: what commands build to store and what `Db::take` hands
/// back. The store keeps it packed (`packed.rs`): a string's bytes inline in the
/// entry's one heap block, a collection behind a pointer in it.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::box_collection)] // packed as one pointer either way
pub enum Value {
    Str(Bytes),
    Hash(Box<HashMap<Bytes, Bytes>>),
    List(VecDeque<Bytes>),
    Set(Box<Set>),
    ZSet(Box<ZSet>),
    Stream(Box<Stream>),
}

/// A stored value, borrowed from its entry (under the shard lock the guard holds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ValueRef<'a> {
    Str(&'a [u8]),
    Hash(&'a HashMap<Bytes, Bytes>),
    List(&'a VecDeque<Bytes>),
    Set(&'a Set),
    ZSet(&'a ZSet),
    Stream(&'a Stream),
}

/// A stored value for changing in place: collections only (a string is replaced
/// whole, `Packed::set_str`).
#[derive(Debug)]
pub enum ValueMut<'a> {
    Str,
    Hash(&'a mut HashMap<Bytes, Bytes>),
    List(&'a mut VecDeque<Bytes>),
    Set(&'a mut Set),
    ZSet(&'a mut ZSet),
    Stream(&'a mut Stream),
}

impl ValueRef<'_> {
    /// The name TYPE replies with.
    pub fn type_name(&self) -> &'static str {
        match self {
            ValueRef::Str(_) => "string",
            ValueRef::Hash(_) => "hash",
            ValueRef::List(_) => "list",
            ValueRef::Set(_) => "set",
            ValueRef::ZSet(_) => "zset",
            ValueRef::Stream(_) => "stream",
        }
    }

    /// An owned copy (COPY): a collection is cloned whole.
    pub fn to_value(self) -> Value {
        match self {
            ValueRef::Str(s) => Value::Str(Bytes::copy_from_slice(s)),
            ValueRef::Hash(h) => Value::Hash(Box::new(h.clone())),
            ValueRef::List(l) => Value::List(l.clone()),
            ValueRef::Set(s) => Value::Set(Box::new(s.clone())),
            ValueRef::ZSet(z) => Value::ZSet(Box::new(z.clone())),
            ValueRef::Stream(st) => Value::Stream(Box::new(st.clone())),
        }
    }

    /// What OBJECT ENCODING answers, as Redis 7.0 would for the same commands.
    pub fn encoding(&self) -> &'static str {
        match self {
            ValueRef::Str(s) => {
                if s.len() <= 20 && crate::protocol::parse_int(s).is_some() {
                    "int"
                } else if s.len() <= 44 {
                    "embstr"
                } else {
                    "raw"
                }
            }
            ValueRef::Hash(h) => {
                if h.len() <= 128 && h.iter().all(|(k, v)| k.len() <= 64 && v.len() <= 64) {
                    "listpack"
                } else {
                    "hashtable"
                }
            }
            ValueRef::List(_) => "quicklist",
            ValueRef::Set(s) => s.encoding(),
            ValueRef::ZSet(z) => z.encoding(),
            ValueRef::Stream(_) => "stream",
        }
    }
}

/// A key's value and its deadline on the monotonic clock (None: no TTL), owned.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub value: Value,
    pub deadline_ms: Option<u64>,
}

impl Entry {
    pub fn new(value: Value) -> Entry {
        Entry {
            value,
            deadline_ms: None,
        }
    }
}
