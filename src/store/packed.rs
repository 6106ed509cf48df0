//! A stored entry: key, value and deadline packed in one slot of its shard's slab
//! (`slab.rs`), which the shard table names by a 4-byte handle.
//!
//! Most keys are locks: a short key, a short string value and a deadline. Their entry
//! is a 12-byte header and the bytes (`lock:1234567` + a 22-byte token: 46 bytes, a
//! 48-byte slot).
//!
//! Slot layout (native little-endian, fields unaligned but the first word):
//! - `[0..4)` an `AtomicU32`: the tag in its low byte (the value's kind in the low 3
//!   bits, `SHORT`, `OUTLINE`, `LOCK` (see `store/lock.rs`), `HAS_DEADLINE`), the
//!   access clock in its high 24 bits
//!   (seconds, for OBJECT IDLETIME: written under the shard's read lock, hence atomic;
//!   every access to the word is atomic)
//! - `SHORT` (a string whose key and value are at most 255 bytes each and whose
//!   deadline is below 2^48 ms): `[4..10)` the deadline, `[10]` the key's length,
//!   `[11]` the value's length, `[12..)` the key, then the value
//! - otherwise `[4..12)` the deadline, then the body: inline at `[12..)`, or with
//!   `OUTLINE` (an entry above the slab's largest class) in a heap block of its own
//!   whose pointer is at `[12..20)`. The body: `[0..4)` the key's length, then for a
//!   string `[4..8)` the value's length, the key, the value; for a collection `[4..12)`
//!   the pointer to its boxed collection, then the key.

use super::slab::{class_bytes, is_free, Slab, MAX_CLASS};
use super::value::{tag, Entry, Value, ValueMut, ValueRef};
use super::{Set, Stream, ZSet};
use bytes::Bytes;
use std::alloc::{alloc, dealloc, handle_alloc_error, realloc, Layout};
use std::collections::{HashMap, VecDeque};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

const DEADLINE: usize = 4;
const S_KLEN: usize = 10;
const S_VLEN: usize = 11;
const S_KEY: usize = 12;
const BODY: usize = 12;
const OUTLINE_SLOT: usize = BODY + 8;
const B_VLEN: usize = 4;
const B_STR_KEY: usize = 8;
const B_COLL: usize = 4;
const B_COLL_KEY: usize = 12;

const KIND_MASK: u8 = 0x7;
const SHORT: u8 = 0x08;
const OUTLINE: u8 = 0x10;
/// The entry is a lock (`store/lock.rs` defines which keys are): a spare bit of the
/// tag, so marking costs no byte.
const LOCK: u8 = 0x20;
const HAS_DEADLINE: u8 = 0x80;
const SHORT_DEADLINE_MAX: u64 = (1 << 48) - 1;
/// The access clock's range: 24 bits of seconds, as Redis's LRU clock.
pub const CLOCK_MASK: u32 = (1 << 24) - 1;

/// One stored entry, seen in its slot: the shard lock the holder keeps makes it valid
/// (a `Ref` / `RefMut` guard, or the store's own code under the lock). Not `Clone`:
/// a view is never kept past the lock that makes it valid.
pub struct Packed(NonNull<u8>);

// SAFETY: a view only reads its slot (the access clock atomically) while its holder
// keeps the shard locked; writes go through the shard's write lock.
unsafe impl Send for Packed {}
// SAFETY: as for Send: shared views only read, under the shard lock.
unsafe impl Sync for Packed {}

fn len_u32(n: usize) -> u32 {
    // Redis's proto-max-bulk-len caps strings at 512 MB; the parser refuses more.
    u32::try_from(n).expect("a key or value shorter than 4 GB")
}

fn body_layout(size: usize) -> Layout {
    Layout::from_size_align(size, 1).expect("entry size fits a layout")
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Form {
    Short,
    Long,
    Outline,
}

/// A string entry's form and the slot bytes it needs.
fn str_form(klen: usize, vlen: usize, deadline_ms: Option<u64>) -> (Form, usize) {
    if klen <= 255
        && vlen <= 255
        && deadline_ms.is_none_or(|d| d <= SHORT_DEADLINE_MAX)
        && S_KEY + klen + vlen <= MAX_CLASS
    {
        (Form::Short, S_KEY + klen + vlen)
    } else if BODY + B_STR_KEY + klen + vlen <= MAX_CLASS {
        (Form::Long, BODY + B_STR_KEY + klen + vlen)
    } else {
        (Form::Outline, OUTLINE_SLOT)
    }
}

/// What a freed entry leaves to drop: its collection, its out-of-line block. Dropped
/// after the shard is unlocked where that matters (a big value takes a while to free).
#[must_use]
pub(super) struct Leftover {
    coll: Option<(u8, *mut u8)>,
    block: Option<(NonNull<u8>, usize)>,
}

// SAFETY: a Leftover owns what it holds (collections are Send, a block is bytes).
unsafe impl Send for Leftover {}

impl Drop for Leftover {
    fn drop(&mut self) {
        // SAFETY: the collection pointer came from Box::into_raw of the type its kind
        // names and is owned by this leftover alone; the block was allocated with
        // body_layout(size) and is owned likewise.
        unsafe {
            if let Some((kind, c)) = self.coll.take() {
                match kind {
                    tag::HASH => drop(Box::from_raw(c.cast::<HashMap<Bytes, Bytes>>())),
                    tag::LIST => drop(Box::from_raw(c.cast::<VecDeque<Bytes>>())),
                    tag::SET => drop(Box::from_raw(c.cast::<Set>())),
                    tag::STREAM => drop(Box::from_raw(c.cast::<Stream>())),
                    _ => drop(Box::from_raw(c.cast::<ZSet>())),
                }
            }
            if let Some((b, size)) = self.block.take() {
                dealloc(b.as_ptr(), body_layout(size));
            }
        }
    }
}

impl Packed {
    /// The entry in the slot at `handle`.
    ///
    /// # Safety
    /// The slot holds a live entry, and the view is used only while the slab is
    /// neither changed at that slot nor dropped.
    pub(super) unsafe fn at(slab: &Slab, handle: u32) -> Packed {
        // SAFETY: `ptr` of a live slot is inside a live page (non-null).
        Packed(unsafe { NonNull::new_unchecked(slab.ptr(handle)) })
    }

    fn meta(&self) -> &AtomicU32 {
        // SAFETY: the slot's first 4 bytes, 8-byte aligned (slab classes are multiples
        // of 8 in 16-aligned pages); every access to them is atomic while the entry
        // is live.
        unsafe { AtomicU32::from_ptr(self.0.as_ptr().cast::<u32>()) }
    }

    fn tag(&self) -> u8 {
        self.meta().load(Relaxed) as u8
    }

    /// Sets the tag byte, keeping the access clock (only under the write lock).
    fn set_tag(&mut self, t: u8) {
        let m = self.meta();
        m.store((m.load(Relaxed) & !0xff) | t as u32, Relaxed);
    }

    fn kind(&self) -> u8 {
        self.tag() & KIND_MASK
    }

    fn form(&self) -> Form {
        let t = self.tag();
        if t & SHORT != 0 {
            Form::Short
        } else if t & OUTLINE != 0 {
            Form::Outline
        } else {
            Form::Long
        }
    }

    fn at_off(&self, off: usize) -> *mut u8 {
        self.0.as_ptr().wrapping_add(off)
    }

    /// The body (not for a SHORT entry).
    fn body(&self) -> *mut u8 {
        debug_assert_ne!(self.form(), Form::Short);
        if self.tag() & OUTLINE != 0 {
            // SAFETY: an OUTLINE slot holds its block's pointer at BODY.
            unsafe { ptr::read_unaligned(self.at_off(BODY).cast::<*mut u8>()) }
        } else {
            self.at_off(BODY)
        }
    }

    fn klen(&self) -> usize {
        // SAFETY: the header fields each form has (its tag says which).
        unsafe {
            if self.tag() & SHORT != 0 {
                *self.at_off(S_KLEN) as usize
            } else {
                ptr::read_unaligned(self.body().cast::<u32>()) as usize
            }
        }
    }

    /// A string's length.
    fn vlen(&self) -> usize {
        debug_assert_eq!(self.kind(), tag::STR);
        // SAFETY: as in `klen`, for a string.
        unsafe {
            if self.tag() & SHORT != 0 {
                *self.at_off(S_VLEN) as usize
            } else {
                ptr::read_unaligned(self.body().add(B_VLEN).cast::<u32>()) as usize
            }
        }
    }

    fn key_ptr(&self) -> *mut u8 {
        if self.tag() & SHORT != 0 {
            self.at_off(S_KEY)
        } else if self.kind() == tag::STR {
            self.body().wrapping_add(B_STR_KEY)
        } else {
            self.body().wrapping_add(B_COLL_KEY)
        }
    }

    fn str_ptr(&self) -> *mut u8 {
        self.key_ptr().wrapping_add(self.klen())
    }

    /// The collection's pointer (a collection entry only).
    fn coll(&self) -> *mut u8 {
        debug_assert_ne!(self.kind(), tag::STR);
        // SAFETY: a collection's body holds its pointer at B_COLL.
        unsafe { ptr::read_unaligned(self.body().add(B_COLL).cast::<*mut u8>()) }
    }

    /// The slot bytes this entry needs (its class is this rounded up).
    fn slot_size(&self) -> usize {
        match self.form() {
            Form::Short => S_KEY + self.klen() + self.vlen(),
            Form::Outline => OUTLINE_SLOT,
            Form::Long if self.kind() == tag::STR => BODY + B_STR_KEY + self.klen() + self.vlen(),
            Form::Long => BODY + B_COLL_KEY + self.klen(),
        }
    }

    /// An OUTLINE entry's block size.
    fn block_len(&self) -> usize {
        if self.kind() == tag::STR {
            B_STR_KEY + self.klen() + self.vlen()
        } else {
            B_COLL_KEY + self.klen()
        }
    }

    /// Starts loading the entry (its header and the key's first bytes).
    pub fn prefetch(&self) {
        super::shard_table::prefetch(self.0.as_ptr());
    }

    pub fn key(&self) -> &[u8] {
        // SAFETY: the key's bytes are inside the slot or its block, live while the
        // view is (the holder keeps the shard locked).
        unsafe { std::slice::from_raw_parts(self.key_ptr(), self.klen()) }
    }

    pub fn deadline_ms(&self) -> Option<u64> {
        let t = self.tag();
        if t & HAS_DEADLINE == 0 {
            return None;
        }
        // SAFETY: the deadline field of the entry's form.
        Some(unsafe {
            let at = self.at_off(DEADLINE);
            if t & SHORT != 0 {
                let mut b = [0u8; 8];
                ptr::copy_nonoverlapping(at, b.as_mut_ptr(), 6);
                u64::from_le_bytes(b)
            } else {
                u64::from_le(ptr::read_unaligned(at.cast::<u64>()))
            }
        })
    }

    /// Whether the entry is a lock, as `store/lock.rs` defines it.
    pub fn is_lock(&self) -> bool {
        self.tag() & LOCK != 0
    }

    /// Marks the entry as a lock or not (under the write lock).
    pub(super) fn set_lock(&mut self, on: bool) {
        let t = self.tag() & !LOCK;
        self.set_tag(if on { t | LOCK } else { t });
    }

    /// As Redis: a key expires when now is past its deadline.
    pub fn is_expired(&self, now_ms: u64) -> bool {
        matches!(self.deadline_ms(), Some(d) if now_ms > d)
    }

    pub fn value(&self) -> ValueRef<'_> {
        // SAFETY: the kind says what the entry holds; a string's bytes are inside the
        // slot or its block; a collection pointer came from Box::into_raw of that type
        // and is owned by this entry.
        unsafe {
            match self.kind() {
                tag::STR => ValueRef::Str(std::slice::from_raw_parts(self.str_ptr(), self.vlen())),
                tag::HASH => ValueRef::Hash(&*self.coll().cast::<HashMap<Bytes, Bytes>>()),
                tag::LIST => ValueRef::List(&*self.coll().cast::<VecDeque<Bytes>>()),
                tag::SET => ValueRef::Set(&*self.coll().cast::<Set>()),
                tag::STREAM => ValueRef::Stream(&*self.coll().cast::<Stream>()),
                _ => ValueRef::ZSet(&*self.coll().cast::<ZSet>()),
            }
        }
    }

    /// A collection, for changing in place (`ValueMut::Str` for a string).
    ///
    /// # Safety
    /// The caller holds the shard's write lock (the collection is not shared).
    pub(super) unsafe fn value_mut(&mut self) -> ValueMut<'_> {
        if self.kind() == tag::STR {
            return ValueMut::Str;
        }
        let c = self.coll();
        // SAFETY: as in `value`; the write lock the caller holds makes it exclusive.
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

    /// Writes the deadline in place; false (nothing written) when the entry's form
    /// cannot hold it (a SHORT entry and a deadline from 2^48 ms on).
    fn write_deadline(&mut self, deadline_ms: Option<u64>) -> bool {
        let short = self.tag() & SHORT != 0;
        if short && deadline_ms.is_some_and(|d| d > SHORT_DEADLINE_MAX) {
            return false;
        }
        let d = deadline_ms.unwrap_or(0).to_le_bytes();
        // SAFETY: the deadline field of the entry's form (6 bytes SHORT, else 8).
        unsafe {
            ptr::copy_nonoverlapping(d.as_ptr(), self.at_off(DEADLINE), if short { 6 } else { 8 })
        };
        let t = self.tag() & !HAS_DEADLINE;
        self.set_tag(if deadline_ms.is_some() {
            t | HAS_DEADLINE
        } else {
            t
        });
        true
    }

    /// The bytes the entry takes: its slot's class, and its out-of-line block's size
    /// (0 for none; MEMORY USAGE adds malloc's chunk overhead to that).
    pub fn footprint(&self) -> (usize, usize) {
        let block = if self.form() == Form::Outline {
            self.block_len()
        } else {
            0
        };
        (class_bytes(self.slot_size()), block)
    }

    /// Whether the entry owns memory off the slab (a collection, an out-of-line block).
    pub(super) fn owns_heap(&self) -> bool {
        self.kind() != tag::STR || self.form() == Form::Outline
    }

    /// Seconds since the entry was last accessed (OBJECT IDLETIME), as of `now_ms`:
    /// the access clock counts seconds modulo 2^24 (as Redis's LRU clock), so an
    /// idle time reads right up to 194 days.
    pub fn idle_seconds(&self, now_ms: u64) -> u64 {
        (access_clock(now_ms).wrapping_sub(self.access_clock()) & CLOCK_MASK) as u64
    }

    /// Makes the entry read as idle for `secs` seconds as of `now_ms` (RESTORE ...
    /// IDLETIME; at most 2^24 - 1).
    pub(super) fn set_idle_seconds(&self, secs: u64, now_ms: u64) {
        let secs = secs.min(CLOCK_MASK as u64) as u32;
        self.touch(access_clock(now_ms).wrapping_sub(secs));
    }

    /// The access clock (seconds, 24 bits) last stamped on the entry.
    pub(super) fn access_clock(&self) -> u32 {
        self.meta().load(Relaxed) >> 8
    }

    /// Stamps the access clock (under either lock: the tag byte is left as it is, and
    /// every access to the word is atomic). Skips the store when the clock already
    /// reads `clock`, so that reads of a hot key do not keep dirtying its line.
    pub(super) fn touch(&self, clock: u32) {
        let m = self.meta();
        let old = m.load(Relaxed);
        let new = (old & 0xff) | ((clock & CLOCK_MASK) << 8);
        if old != new {
            m.store(new, Relaxed);
        }
    }
}

/// The access clock at `now_ms` (the node's monotonic milliseconds): seconds, modulo
/// 2^24.
pub(super) fn access_clock(now_ms: u64) -> u32 {
    (now_ms / 1000) as u32 & CLOCK_MASK
}

/// Writes a new string entry's header and key into a new slot (and block, OUTLINE);
/// returns its handle and where its `vlen` value bytes go (uninitialised).
fn new_str(slab: &mut Slab, key: &[u8], vlen: usize, deadline_ms: Option<u64>) -> (u32, *mut u8) {
    let (form, size) = str_form(key.len(), vlen, deadline_ms);
    let h = slab.alloc(size);
    let base = slab.ptr(h);
    // SAFETY: the slot is at least `size` bytes (and a block of `len` bytes is
    // allocated for OUTLINE): each form's fields and the key fit, as `str_form`
    // computed; the meta word is written atomically (as every access to it).
    unsafe {
        AtomicU32::from_ptr(base.cast::<u32>()).store(tag::STR as u32, Relaxed);
        let mut p = Packed(NonNull::new_unchecked(base));
        let body = match form {
            Form::Short => {
                p.set_tag(tag::STR | SHORT);
                *base.add(S_KLEN) = key.len() as u8;
                *base.add(S_VLEN) = vlen as u8;
                ptr::copy_nonoverlapping(key.as_ptr(), base.add(S_KEY), key.len());
                p.write_deadline(deadline_ms);
                return (h, base.add(S_KEY + key.len()));
            }
            Form::Long => base.add(BODY),
            Form::Outline => {
                p.set_tag(tag::STR | OUTLINE);
                let len = B_STR_KEY + key.len() + vlen;
                let b = alloc(body_layout(len));
                if b.is_null() {
                    handle_alloc_error(body_layout(len));
                }
                ptr::write_unaligned(base.add(BODY).cast::<*mut u8>(), b);
                b
            }
        };
        ptr::write_unaligned(body.cast::<u32>(), len_u32(key.len()));
        ptr::write_unaligned(body.add(B_VLEN).cast::<u32>(), len_u32(vlen));
        ptr::copy_nonoverlapping(key.as_ptr(), body.add(B_STR_KEY), key.len());
        p.write_deadline(deadline_ms);
        (h, body.add(B_STR_KEY + key.len()))
    }
}

/// Stores a new entry in the slab; returns its handle. A deadline lowers its page's
/// minimum.
pub(super) fn create(slab: &mut Slab, key: &[u8], value: Value, deadline_ms: Option<u64>) -> u32 {
    let (kind, coll): (u8, *mut u8) = match value {
        Value::Str(s) => {
            let (h, at) = new_str(slab, key, s.len(), deadline_ms);
            // SAFETY: `new_str` left `s.len()` bytes at `at` for the value.
            unsafe { ptr::copy_nonoverlapping(s.as_ptr(), at, s.len()) };
            if let Some(d) = deadline_ms {
                slab.lower_min(h, d);
            }
            return h;
        }
        Value::Hash(h) => (tag::HASH, Box::into_raw(h).cast()),
        Value::List(l) => (tag::LIST, Box::into_raw(Box::new(l)).cast()),
        Value::Set(s) => (tag::SET, Box::into_raw(s).cast()),
        Value::ZSet(z) => (tag::ZSET, Box::into_raw(z).cast()),
        Value::Stream(st) => (tag::STREAM, Box::into_raw(st).cast()),
    };
    let inline = BODY + B_COLL_KEY + key.len();
    let outline = inline > MAX_CLASS;
    let h = slab.alloc(if outline { OUTLINE_SLOT } else { inline });
    let base = slab.ptr(h);
    // SAFETY: the slot is at least `inline` bytes (or OUTLINE_SLOT, with a block of
    // B_COLL_KEY + key bytes): the deadline, the body's length and pointer and the key
    // fit; the meta word is written atomically.
    unsafe {
        let t = kind | if outline { OUTLINE } else { 0 };
        AtomicU32::from_ptr(base.cast::<u32>()).store(t as u32, Relaxed);
        let body = if outline {
            let len = B_COLL_KEY + key.len();
            let b = alloc(body_layout(len));
            if b.is_null() {
                handle_alloc_error(body_layout(len));
            }
            ptr::write_unaligned(base.add(BODY).cast::<*mut u8>(), b);
            b
        } else {
            base.add(BODY)
        };
        ptr::write_unaligned(body.cast::<u32>(), len_u32(key.len()));
        ptr::write_unaligned(body.add(B_COLL).cast::<*mut u8>(), coll);
        ptr::copy_nonoverlapping(key.as_ptr(), body.add(B_COLL_KEY), key.len());
        Packed(NonNull::new_unchecked(base)).write_deadline(deadline_ms);
    }
    if let Some(d) = deadline_ms {
        slab.lower_min(h, d);
    }
    h
}

/// Frees the entry at `handle`; what it owned off the slab is returned to drop.
///
/// # Safety
/// `handle` is a live entry's, no longer in the table, and no view of it is used after.
pub(super) unsafe fn release(slab: &mut Slab, handle: u32) -> Leftover {
    // SAFETY: a live entry (the caller's promise).
    let p = unsafe { Packed::at(slab, handle) };
    let coll = (p.kind() != tag::STR).then(|| (p.kind(), p.coll()));
    let block = (p.form() == Form::Outline).then(|| {
        // SAFETY: an OUTLINE entry's block pointer is non-null (alloc checked it).
        (unsafe { NonNull::new_unchecked(p.body()) }, p.block_len())
    });
    slab.free(handle);
    Leftover { coll, block }
}

/// Frees the entry at `handle` and returns its value and deadline, owned (a string is
/// copied out; a collection moves, uncopied).
///
/// # Safety
/// As `release`.
pub(super) unsafe fn take(slab: &mut Slab, handle: u32) -> Entry {
    // SAFETY: a live entry (the caller's promise).
    let p = unsafe { Packed::at(slab, handle) };
    let deadline_ms = p.deadline_ms();
    let value = match p.value() {
        ValueRef::Str(s) => Value::Str(Bytes::copy_from_slice(s)),
        // SAFETY: the collection's box is taken back here, and the leftover below
        // forgets it, so it is dropped exactly once (by the Value).
        _ => unsafe {
            match p.kind() {
                tag::HASH => Value::Hash(Box::from_raw(p.coll().cast())),
                tag::LIST => Value::List(*Box::from_raw(p.coll().cast::<VecDeque<Bytes>>())),
                tag::SET => Value::Set(Box::from_raw(p.coll().cast())),
                tag::STREAM => Value::Stream(Box::from_raw(p.coll().cast())),
                _ => Value::ZSet(Box::from_raw(p.coll().cast())),
            }
        },
    };
    // SAFETY: the caller's promise; the collection moved into `value`.
    let mut left = unsafe { release(slab, handle) };
    left.coll = None;
    drop(left);
    Entry { value, deadline_ms }
}

/// Makes the entry at `handle` a string of `len` bytes with this deadline, keeping
/// the key and the first bytes of a string value (a collection is dropped; bytes
/// added are uninitialised). In place while its form and slot class hold; otherwise
/// the entry moves to a new slot. Returns the entry's handle (new if it moved) and
/// where the value starts.
///
/// # Safety
/// `handle` is a live entry's; the caller holds the shard's write lock, updates the
/// table if the handle changed, and uses no older view of the entry.
pub(super) unsafe fn resize_str(
    slab: &mut Slab,
    handle: u32,
    len: usize,
    deadline_ms: Option<u64>,
) -> (u32, *mut u8) {
    // SAFETY: a live entry (the caller's promise).
    let mut p = unsafe { Packed::at(slab, handle) };
    let is_str = p.kind() == tag::STR;
    let (form, size) = str_form(p.klen(), len, deadline_ms);
    if is_str && form == p.form() {
        match form {
            Form::Short if class_bytes(size) == slab.class_of(handle) => {
                // SAFETY: the slot's class holds the new size.
                unsafe { *p.at_off(S_VLEN) = len as u8 };
                let ok = p.write_deadline(deadline_ms);
                debug_assert!(ok);
                return (handle, p.str_ptr());
            }
            Form::Long if class_bytes(size) == slab.class_of(handle) => {
                // SAFETY: as above.
                unsafe { ptr::write_unaligned(p.body().add(B_VLEN).cast::<u32>(), len_u32(len)) };
                p.write_deadline(deadline_ms);
                return (handle, p.str_ptr());
            }
            Form::Outline => {
                let (old, new) = (p.block_len(), B_STR_KEY + p.klen() + len);
                // SAFETY: the block was allocated with body_layout(old); new > 0.
                unsafe {
                    let b = realloc(p.body(), body_layout(old), new);
                    if b.is_null() {
                        handle_alloc_error(body_layout(new));
                    }
                    ptr::write_unaligned(p.at_off(BODY).cast::<*mut u8>(), b);
                    ptr::write_unaligned(b.add(B_VLEN).cast::<u32>(), len_u32(len));
                }
                p.write_deadline(deadline_ms);
                return (handle, p.str_ptr());
            }
            _ => {}
        }
    }
    // Moves: a new slot, the key and the kept prefix copied, the old entry freed.
    let key: *const [u8] = p.key();
    let keep = if is_str { p.vlen().min(len) } else { 0 };
    let from = if is_str { p.str_ptr() } else { ptr::null_mut() };
    let clock = p.access_clock();
    let lock = p.is_lock();
    // SAFETY: the old entry stays live (and `key` / `from` valid) until released
    // below; the new slot is another one.
    unsafe {
        let (h, at) = new_str(slab, &*key, len, deadline_ms);
        if keep > 0 {
            ptr::copy_nonoverlapping(from, at, keep);
        }
        let mut moved = Packed::at(slab, h);
        moved.touch(clock);
        moved.set_lock(lock);
        if let Some(d) = deadline_ms {
            slab.lower_min(h, d);
        }
        drop(release(slab, handle));
        (h, at)
    }
}

/// Sets the entry's deadline; returns its handle (new if it had to move: a SHORT
/// entry given a deadline from 2^48 ms on).
///
/// # Safety
/// As `resize_str`.
pub(super) unsafe fn set_deadline(slab: &mut Slab, handle: u32, deadline_ms: Option<u64>) -> u32 {
    // SAFETY: a live entry (the caller's promise).
    let mut p = unsafe { Packed::at(slab, handle) };
    if p.write_deadline(deadline_ms) {
        if let Some(d) = deadline_ms {
            slab.lower_min(handle, d);
        }
        return handle;
    }
    let len = p.vlen();
    // SAFETY: the caller's promise, passed on.
    unsafe { resize_str(slab, handle, len, deadline_ms).0 }
}

/// Whether the slot at `handle` is free (the sweeper's scan of a page).
///
/// # Safety
/// `handle` is a slot of a live page that `alloc` handed out at least once.
pub(super) unsafe fn slot_is_free(slab: &Slab, handle: u32) -> bool {
    // SAFETY: the caller's promise; a live entry's first word is only accessed
    // atomically, and a free slot's is not accessed concurrently.
    unsafe { is_free(slab.ptr(handle)) }
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
mod tests;
