//! A set of byte strings, with the encoding Redis 7.0 would report for it.

use bytes::Bytes;
use std::collections::HashSet;

/// Redis 7.0 keeps a set of integers as an intset up to 512 members
/// (set-max-intset-entries), and a hashtable after that or once any member is not an
/// integer; it never converts back.
const INTSET_MAX_ENTRIES: usize = 512;

#[derive(Debug, Clone, Default)]
pub struct Set {
    members: HashSet<Bytes>,
    /// Past the intset rules once (OBJECT ENCODING answers "hashtable").
    big: bool,
}

impl PartialEq for Set {
    fn eq(&self, other: &Self) -> bool {
        self.members == other.members
    }
}

/// Whether Redis would store `m` in an intset: its string2ll form exactly.
fn is_intset_member(m: &[u8]) -> bool {
    m.len() <= 20 && crate::protocol::parse_int(m).is_some()
}

impl Set {
    pub fn new() -> Set {
        Set::default()
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    pub fn contains(&self, m: &[u8]) -> bool {
        self.members.contains(m)
    }

    /// Adds `m`; true when it is new.
    pub fn insert(&mut self, m: &[u8]) -> bool {
        if self.members.contains(m) {
            return false;
        }
        if !self.big && (!is_intset_member(m) || self.members.len() >= INTSET_MAX_ENTRIES) {
            self.big = true;
        }
        self.members.insert(Bytes::copy_from_slice(m))
    }

    pub fn remove(&mut self, m: &[u8]) -> bool {
        self.members.remove(m)
    }

    /// "intset" or "hashtable".
    pub fn encoding(&self) -> &'static str {
        if self.big {
            "hashtable"
        } else {
            "intset"
        }
    }

    /// The members in the order Redis lists them where that order is defined: an
    /// intset is sorted by value; a hashtable's order is unspecified.
    pub fn members(&self) -> Vec<Bytes> {
        let mut v: Vec<Bytes> = self.members.iter().cloned().collect();
        if !self.big {
            v.sort_by_key(|m| crate::protocol::parse_int(m).unwrap_or(0));
        }
        v
    }

    pub fn iter(&self) -> impl Iterator<Item = &Bytes> {
        self.members.iter()
    }
}
