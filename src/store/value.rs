use super::{Set, ZSet};
use bytes::Bytes;
use std::collections::{HashMap, VecDeque};

/// What a key holds. Every variant is at most 32 bytes (the big collections are
/// boxed): `Value` sits in every slot of the shard tables, and most keys are locks
/// (strings), so the largest variant sets the bytes per lock.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::box_collection)] // the point: a 48-byte map behind an 8-byte pointer
pub enum Value {
    Str(Bytes),
    Hash(Box<HashMap<Bytes, Bytes>>),
    List(VecDeque<Bytes>),
    Set(Box<Set>),
    ZSet(Box<ZSet>),
}

impl Value {
    /// The name TYPE replies with.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "string",
            Value::Hash(_) => "hash",
            Value::List(_) => "list",
            Value::Set(_) => "set",
            Value::ZSet(_) => "zset",
        }
    }

    /// What OBJECT ENCODING answers, as Redis 7.0 would for the same commands.
    pub fn encoding(&self) -> &'static str {
        match self {
            Value::Str(s) => {
                if s.len() <= 20 && crate::protocol::parse_int(s).is_some() {
                    "int"
                } else if s.len() <= 44 {
                    "embstr"
                } else {
                    "raw"
                }
            }
            Value::Hash(h) => {
                if h.len() <= 128 && h.iter().all(|(k, v)| k.len() <= 64 && v.len() <= 64) {
                    "listpack"
                } else {
                    "hashtable"
                }
            }
            Value::List(_) => "quicklist",
            Value::Set(s) => s.encoding(),
            Value::ZSet(z) => z.encoding(),
        }
    }
}

/// A key's value and its deadline on the monotonic clock (None: no TTL).
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

    /// As Redis: a key expires when now is past its deadline.
    pub fn is_expired(&self, now_ms: u64) -> bool {
        matches!(self.deadline_ms, Some(d) if now_ms > d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_stays_small() {
        assert_eq!(std::mem::size_of::<Value>(), 40);
        assert_eq!(std::mem::size_of::<Entry>(), 56);
    }
}
