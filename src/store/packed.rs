//! A stored entry in one heap block behind an 8-byte pointer (the shard-table slot).
//!
//! Most keys are locks: a short key, a short string value and a deadline. Each of them
//! used to cost a 72-byte table slot plus a heap chunk for the key and another for the
//! value; packed, the slot is 8 bytes and the key, the value and the deadline share one
//! chunk (`lock:1234567` + a 22-byte token + the 17-byte header: one 64-byte glibc
//! chunk).
//!
//! Block layout (fields unaligned, native endian):
//! - `[0..8)` the deadline (ms on the monotonic clock; meaningful with `HAS_DEADLINE`)
//! - `[8]` the tag: the value's kind in the low bits, `HAS_DEADLINE`
//! - `[9..13)` the key's length
//! - a string: `[13..17)` the value's length, then the key, then the value bytes;
//!   a collection: `[13..21)` a pointer to its boxed collection, then the key.

use super::value::{tag, Entry, Value, ValueMut, ValueRef};
use super::{Set, Stream, ZSet};
use bytes::Bytes;
use std::alloc::{alloc, dealloc, handle_alloc_error, realloc, Layout};
use std::collections::{HashMap, VecDeque};
use std::ptr::{self, NonNull};

const TAG: usize = 8;
const KLEN: usize = 9;
const PAYLOAD: usize = 13;
const STR_KEY: usize = 17;
const COLL_KEY: usize = 21;

const KIND_MASK: u8 = 0x7;
const HAS_DEADLINE: u8 = 0x80;

/// One stored entry: key, value and deadline in a block this owns.
pub struct Packed(NonNull<u8>);

// SAFETY: a Packed owns its block and the collection behind it (all Send + Sync);
// shared access only reads, and writes need `&mut` (held under a shard's write lock).
unsafe impl Send for Packed {}
unsafe impl Sync for Packed {}

fn layout(size: usize) -> Layout {
    // Alignment 1: every field is read unaligned (malloc gives 16 anyway).
    Layout::from_size_align(size, 1).expect("entry size fits a layout")
}

fn len_u32(n: usize) -> u32 {
    // Redis's proto-max-bulk-len caps strings at 512 MB; the parser refuses more.
    u32::try_from(n).expect("a key or value shorter than 4 GB")
}

impl Packed {
    pub fn new(key: &[u8], value: Value, deadline_ms: Option<u64>) -> Packed {
        let (kind, coll): (u8, *mut u8) = match value {
            Value::Str(s) => return Packed::new_str(key, &s, deadline_ms),
            Value::Hash(h) => (tag::HASH, Box::into_raw(h).cast()),
            Value::List(l) => (tag::LIST, Box::into_raw(Box::new(l)).cast()),
            Value::Set(s) => (tag::SET, Box::into_raw(s).cast()),
            Value::ZSet(z) => (tag::ZSET, Box::into_raw(z).cast()),
            Value::Stream(st) => (tag::STREAM, Box::into_raw(st).cast()),
        };
        let size = COLL_KEY + key.len();
        let p = Packed::alloc_header(size, kind, key.len(), deadline_ms);
        // SAFETY: the block is `size` bytes: the pointer and the key fit after the header.
        unsafe {
            ptr::write_unaligned(p.0.as_ptr().add(PAYLOAD).cast::<*mut u8>(), coll);
            ptr::copy_nonoverlapping(key.as_ptr(), p.0.as_ptr().add(COLL_KEY), key.len());
        }
        p
    }

    pub fn new_str(key: &[u8], value: &[u8], deadline_ms: Option<u64>) -> Packed {
        let size = STR_KEY + key.len() + value.len();
        let p = Packed::alloc_header(size, tag::STR, key.len(), deadline_ms);
        // SAFETY: the block is `size` bytes: header, key, value.
        unsafe {
            let base = p.0.as_ptr();
            ptr::write_unaligned(base.add(PAYLOAD).cast::<u32>(), len_u32(value.len()));
            ptr::copy_nonoverlapping(key.as_ptr(), base.add(STR_KEY), key.len());
            ptr::copy_nonoverlapping(value.as_ptr(), base.add(STR_KEY + key.len()), value.len());
        }
        p
    }

    fn alloc_header(size: usize, kind: u8, klen: usize, deadline_ms: Option<u64>) -> Packed {
        let klen = len_u32(klen);
        // SAFETY: size > 0 (the header alone is 17 bytes).
        let base = unsafe { alloc(layout(size)) };
        let Some(base) = NonNull::new(base) else {
            handle_alloc_error(layout(size))
        };
        let p = Packed(base);
        // SAFETY: the header's 13 bytes are inside the block.
        unsafe {
            ptr::write(base.as_ptr().add(TAG), kind);
            ptr::write_unaligned(base.as_ptr().add(KLEN).cast::<u32>(), klen);
        }
        let mut p = p;
        p.set_deadline(deadline_ms);
        p
    }

    fn tag(&self) -> u8 {
        // SAFETY: the tag byte is inside every block.
        unsafe { *self.0.as_ptr().add(TAG) }
    }

    fn kind(&self) -> u8 {
        self.tag() & KIND_MASK
    }

    fn read_u32(&self, at: usize) -> usize {
        // SAFETY: callers read header fields, inside every block.
        unsafe { ptr::read_unaligned(self.0.as_ptr().add(at).cast::<u32>()) as usize }
    }

    fn klen(&self) -> usize {
        self.read_u32(KLEN)
    }

    fn key_offset(&self) -> usize {
        if self.kind() == tag::STR {
            STR_KEY
        } else {
            COLL_KEY
        }
    }

    /// The block's size, as allocated.
    fn size(&self) -> usize {
        if self.kind() == tag::STR {
            STR_KEY + self.klen() + self.read_u32(PAYLOAD)
        } else {
            COLL_KEY + self.klen()
        }
    }

    /// The collection's pointer. Only for a collection block: a string block of a
    /// short key and value ends before the pointer's 8 bytes would.
    fn coll(&self) -> *mut u8 {
        debug_assert_ne!(self.kind(), tag::STR);
        // SAFETY: a collection block holds its pointer at PAYLOAD.
        unsafe { ptr::read_unaligned(self.0.as_ptr().add(PAYLOAD).cast::<*mut u8>()) }
    }

    /// Starts loading the block (its header and the key's first bytes).
    pub fn prefetch(&self) {
        super::shard_table::prefetch(self.0.as_ptr());
    }

    pub fn key(&self) -> &[u8] {
        // SAFETY: the key's bytes are inside the block, which lives as long as self.
        unsafe { std::slice::from_raw_parts(self.0.as_ptr().add(self.key_offset()), self.klen()) }
    }

    pub fn deadline_ms(&self) -> Option<u64> {
        // SAFETY: the deadline is the block's first 8 bytes.
        (self.tag() & HAS_DEADLINE != 0)
            .then(|| unsafe { ptr::read_unaligned(self.0.as_ptr().cast::<u64>()) })
    }

    pub fn set_deadline(&mut self, deadline_ms: Option<u64>) {
        let tag = self.tag() & !HAS_DEADLINE;
        // SAFETY: the deadline and the tag are in the header.
        unsafe {
            let base = self.0.as_ptr();
            ptr::write_unaligned(base.cast::<u64>(), deadline_ms.unwrap_or(0));
            *base.add(TAG) = if deadline_ms.is_some() {
                tag | HAS_DEADLINE
            } else {
                tag
            };
        }
    }

    /// As Redis: a key expires when now is past its deadline.
    pub fn is_expired(&self, now_ms: u64) -> bool {
        matches!(self.deadline_ms(), Some(d) if now_ms > d)
    }

    pub fn value(&self) -> ValueRef<'_> {
        // SAFETY: the kind says what the block holds; a collection pointer came from
        // Box::into_raw of that type and is owned by this block.
        unsafe {
            match self.kind() {
                tag::STR => {
                    let at = STR_KEY + self.klen();
                    ValueRef::Str(std::slice::from_raw_parts(
                        self.0.as_ptr().add(at),
                        self.read_u32(PAYLOAD),
                    ))
                }
                tag::HASH => ValueRef::Hash(&*self.coll().cast::<HashMap<Bytes, Bytes>>()),
                tag::LIST => ValueRef::List(&*self.coll().cast::<VecDeque<Bytes>>()),
                tag::SET => ValueRef::Set(&*self.coll().cast::<Set>()),
                tag::STREAM => ValueRef::Stream(&*self.coll().cast::<Stream>()),
                _ => ValueRef::ZSet(&*self.coll().cast::<ZSet>()),
            }
        }
    }

    pub fn value_mut(&mut self) -> ValueMut<'_> {
        if self.kind() == tag::STR {
            return ValueMut::Str;
        }
        let c = self.coll();
        // SAFETY: as in `value`; `&mut self` makes the borrow exclusive.
        unsafe {
            match self.kind() {
                tag::HASH => ValueMut::Hash(&mut *c.cast::<HashMap<Bytes, Bytes>>()),
                tag::LIST => ValueMut::List(&mut *c.cast::<VecDeque<Bytes>>()),
                tag::SET => ValueMut::Set(&mut *c.cast::<Set>()),
                tag::STREAM => ValueMut::Stream(&mut *c.cast::<Stream>()),
                _ => ValueMut::ZSet(&mut *c.cast::<ZSet>()),
            }
        }
    }

    /// Replaces the value by the string `value`, keeping the key and the deadline
    /// (a collection is dropped). A string replacing a string reuses the block
    /// (realloc, in place while the size class holds).
    pub fn set_str(&mut self, value: &[u8]) {
        if self.kind() != tag::STR {
            *self = Packed::new_str(self.key(), value, self.deadline_ms());
            return;
        }
        let at = self.set_str_len(value.len());
        // SAFETY: `set_str_len` made the value `value.len()` bytes at `at`.
        unsafe { ptr::copy_nonoverlapping(value.as_ptr(), at, value.len()) };
    }

    /// Makes a string block's value `len` bytes long (realloc, in place while the size
    /// class holds; the first bytes are kept, any added ones are uninitialised) and
    /// returns where the value starts.
    fn set_str_len(&mut self, len: usize) -> *mut u8 {
        let len32 = len_u32(len);
        let at = STR_KEY + self.klen();
        let (old, size) = (self.size(), at + len);
        if size != old {
            // SAFETY: the block was allocated with layout(old); size > 0 (the header).
            let base = unsafe { realloc(self.0.as_ptr(), layout(old), size) };
            let Some(base) = NonNull::new(base) else {
                handle_alloc_error(layout(size))
            };
            self.0 = base;
        }
        // SAFETY: the block is `size` bytes now; the value is its last `len` bytes.
        unsafe {
            let base = self.0.as_ptr();
            ptr::write_unaligned(base.add(PAYLOAD).cast::<u32>(), len32);
            base.add(at)
        }
    }

    /// Resizes a string value to `len` bytes, keeping its first bytes (bytes added are
    /// zero, the padding SETRANGE writes), and returns it for writing: APPEND and
    /// SETRANGE change a string in place, with no copy of the bytes they keep.
    /// Panics on a collection block (callers check the kind first).
    pub fn str_resize(&mut self, len: usize) -> &mut [u8] {
        assert_eq!(self.kind(), tag::STR, "str_resize of a collection");
        let old_len = self.read_u32(PAYLOAD);
        let at = self.set_str_len(len);
        // SAFETY: the value is `len` bytes at `at`; bytes past the old length are
        // zeroed before the slice is made.
        unsafe {
            if len > old_len {
                ptr::write_bytes(at.add(old_len), 0, len - old_len);
            }
            std::slice::from_raw_parts_mut(at, len)
        }
    }

    /// The entry, owned (a string is copied out; a collection moves, uncopied).
    pub fn into_entry(self) -> Entry {
        let deadline_ms = self.deadline_ms();
        // SAFETY: as in `value`; the collection's box is taken back exactly once,
        // and `self` is forgotten after its block is freed, so nothing drops twice.
        let value = unsafe {
            match self.kind() {
                tag::STR => match self.value() {
                    ValueRef::Str(s) => Value::Str(Bytes::copy_from_slice(s)),
                    _ => unreachable!(),
                },
                tag::HASH => Value::Hash(Box::from_raw(self.coll().cast())),
                tag::LIST => Value::List(*Box::from_raw(self.coll().cast::<VecDeque<Bytes>>())),
                tag::SET => Value::Set(Box::from_raw(self.coll().cast())),
                tag::STREAM => Value::Stream(Box::from_raw(self.coll().cast())),
                _ => Value::ZSet(Box::from_raw(self.coll().cast())),
            }
        };
        // SAFETY: the block was allocated with this layout; the collection moved out.
        unsafe { dealloc(self.0.as_ptr(), layout(self.size())) };
        std::mem::forget(self);
        Entry { value, deadline_ms }
    }

    /// The bytes malloc was asked for (MEMORY USAGE adds its chunk overhead).
    pub fn block_size(&self) -> usize {
        self.size()
    }
}

impl Drop for Packed {
    fn drop(&mut self) {
        // SAFETY: the collection (if any) is owned by this block, dropped once; the
        // block was allocated with layout(size).
        unsafe {
            match self.kind() {
                tag::STR => {}
                tag::HASH => drop(Box::from_raw(self.coll().cast::<HashMap<Bytes, Bytes>>())),
                tag::LIST => drop(Box::from_raw(self.coll().cast::<VecDeque<Bytes>>())),
                tag::SET => drop(Box::from_raw(self.coll().cast::<Set>())),
                tag::STREAM => drop(Box::from_raw(self.coll().cast::<Stream>())),
                _ => drop(Box::from_raw(self.coll().cast::<ZSet>())),
            }
            dealloc(self.0.as_ptr(), layout(self.size()));
        }
    }
}

impl std::fmt::Debug for Packed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Packed")
            .field("key", &Bytes::copy_from_slice(self.key()))
            .field("value", &self.value())
            .field("deadline_ms", &self.deadline_ms())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_is_one_small_block_behind_a_thin_pointer() {
        assert_eq!(std::mem::size_of::<Packed>(), 8);
        let p = Packed::new_str(b"lock:1234567", b"0123456789abcdefghijkl", Some(7));
        assert_eq!(p.block_size(), 17 + 12 + 22);
        assert_eq!(p.key(), b"lock:1234567");
        assert!(matches!(
            p.value(),
            ValueRef::Str(b"0123456789abcdefghijkl")
        ));
        assert_eq!(p.deadline_ms(), Some(7));
        assert!(p.is_expired(8) && !p.is_expired(7));
    }

    #[test]
    fn str_resize_keeps_the_prefix_zero_fills_growth_and_shrinks() {
        let mut p = Packed::new_str(b"key", b"abc", Some(9));
        p.str_resize(6)[3..5].copy_from_slice(b"de");
        assert!(matches!(p.value(), ValueRef::Str(b"abcde\0")));
        assert_eq!(p.str_resize(2), b"ab");
        assert!(matches!(p.value(), ValueRef::Str(b"ab")));
        assert_eq!((p.key(), p.deadline_ms()), (&b"key"[..], Some(9)));
        assert_eq!(p.block_size(), 17 + 3 + 2);
    }

    #[test]
    fn values_deadlines_and_kinds_change_in_place() {
        let mut p = Packed::new_str(b"k", b"v", None);
        assert_eq!(p.deadline_ms(), None);
        p.set_deadline(Some(u64::MAX));
        p.set_str(&[b'x'; 1000]);
        assert!(matches!(p.value(), ValueRef::Str(s) if s == [b'x'; 1000]));
        assert_eq!((p.key(), p.deadline_ms()), (&b"k"[..], Some(u64::MAX)));
        let mut p = Packed::new(b"k", Value::List(VecDeque::from([Bytes::from("a")])), None);
        if let ValueMut::List(l) = p.value_mut() {
            l.push_back(Bytes::from("b"));
        }
        assert!(matches!(p.value(), ValueRef::List(l) if l.len() == 2));
        assert_eq!(p.deadline_ms(), None);
        p.set_str(b"s");
        assert!(matches!(p.value(), ValueRef::Str(b"s")));
        let mut p = Packed::new(b"k", Value::List(VecDeque::from([Bytes::from("a")])), None);
        if let ValueMut::List(l) = p.value_mut() {
            l.push_back(Bytes::from("b"));
        }
        let e = p.into_entry();
        assert_eq!(e.deadline_ms, None);
        assert_eq!(
            e.value,
            Value::List(VecDeque::from([Bytes::from("a"), Bytes::from("b")]))
        );
        let h = Packed::new(b"h", Value::Hash(Box::default()), Some(1));
        assert_eq!(h.value().type_name(), "hash");
        drop(h);
        let s = Packed::new(b"s", Value::Str(Bytes::from("x")), None);
        assert_eq!(s.into_entry().value, Value::Str(Bytes::from("x")));
    }
}
