//! A shard's slab: the memory its entries live in, in 4 KiB pages each cut into slots
//! of one size class (8-byte steps from 16 to 256 bytes), named by 4-byte handles
//! (page index << 8 | slot index) that the shard table stores instead of pointers.
//!
//! A slot has no header of its own (glibc puts an 8-byte size field before every
//! chunk and rounds to 16): a 46-byte lock entry takes a 48-byte slot. A freed slot
//! goes on its page's free list; a page whose last slot is freed goes back to the heap
//! at once, and its index is reused. Each page also keeps the lowest deadline of the
//! entries in it (lowered by every write that sets one, recomputed by the sweeper), so
//! that active expiry visits only the pages where something is due
//! (`db/reclaim.rs`).
//!
//! The slab knows nothing of what a slot holds except one rule it shares with
//! `packed.rs`: a slot's first word (a native `u32`, 4-aligned) has `FREE` in its low
//! byte while the slot is free, which a live entry's tag never is.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::ptr;

/// Bytes of one page (one heap block).
pub const PAGE_BYTES: usize = 4096;
/// The smallest and the largest slot size; larger entries live out of line (a slot
/// holding a pointer, `packed.rs`).
pub const MIN_CLASS: usize = 16;
pub const MAX_CLASS: usize = 256;
const SLOT_BITS: u32 = 8;
/// Pages a shard can hold: 2^24 (64 GiB).
const MAX_PAGES: usize = 1 << (32 - SLOT_BITS);
const CLASSES: usize = MAX_CLASS / 8 + 1;
const NIL: u32 = u32::MAX;
const NO_SLOT: u16 = u16::MAX;

/// The low byte of a free slot's first word (an entry's tag byte is never this).
pub const FREE: u8 = 0xff;

/// Marks the slot at `at` free, its next free slot `next` (bytes [4..6)).
///
/// # Safety
/// `at` is a slot of at least MIN_CLASS bytes, 4-aligned, not accessed concurrently.
unsafe fn mark_free(at: *mut u8, next: u16) {
    // SAFETY: the caller's promise; MIN_CLASS covers both fields.
    unsafe {
        ptr::write(at.cast::<u32>(), FREE as u32);
        ptr::write_unaligned(at.add(4).cast::<u16>(), next);
    }
}

/// Whether the slot at `at` is free (its first word's low byte).
///
/// # Safety
/// `at` is a slot handed out at least once, 4-aligned, and not written concurrently
/// except through atomic stores of a live entry's first word.
pub unsafe fn is_free(at: *const u8) -> bool {
    // SAFETY: the caller's promise; a live entry's first word is only accessed
    // atomically, so this read is atomic too.
    unsafe {
        std::sync::atomic::AtomicU32::from_ptr(at.cast::<u32>().cast_mut())
            .load(std::sync::atomic::Ordering::Relaxed) as u8
            == FREE
    }
}

/// A slot's bytes, rounded up to its class.
pub fn class_bytes(size: usize) -> usize {
    debug_assert!(size <= MAX_CLASS);
    size.max(MIN_CLASS).next_multiple_of(8)
}

fn page_layout() -> Layout {
    // 16: what malloc gives anyway; slots are 8-byte aligned inside (classes are
    // multiples of 8), which the entries' atomic first word needs.
    Layout::from_size_align(PAGE_BYTES, 16).expect("a page layout")
}

struct Page {
    /// The page's memory; null once freed (the index then waits in `free_pages`).
    base: *mut u8,
    /// The lowest deadline of an entry in this page, or lower (a deadline that went
    /// away or grew is not looked for until the sweeper visits); u64::MAX: none.
    min_deadline: u64,
    /// Slot size in bytes.
    class: u16,
    /// Live slots.
    used: u16,
    /// Slots `[0, bumped)` have been handed out at least once (the rest never were).
    bumped: u16,
    /// A free slot below `bumped`, whose bytes `[4..6)` name the next one.
    free_head: u16,
    /// The class's list of pages with a free slot.
    prev: u32,
    next: u32,
}

impl Page {
    fn capacity(&self) -> u16 {
        (PAGE_BYTES / self.class as usize) as u16
    }
}

pub struct Slab {
    pages: Vec<Page>,
    /// Indices of freed pages, for reuse.
    free_pages: Vec<u32>,
    /// Per class (bytes / 8): the first page with a free slot, or NIL.
    partial: [u32; CLASSES],
    /// The lowest of the pages' `min_deadline`s, or lower.
    min_deadline: u64,
    live_pages: usize,
    /// Where the sweeper's next hold of the shard starts reading pages.
    sweep_cursor: usize,
    /// Per class: live slots, and pages.
    class_used: [usize; CLASSES],
    class_pages: [usize; CLASSES],
}

// SAFETY: the pages are owned by the slab alone (plain bytes); `&Slab` only reads
// them (entries' atomic words aside), `&mut Slab` is needed to change them.
unsafe impl Send for Slab {}
// SAFETY: as for Send: `&Slab` only reads the pages.
unsafe impl Sync for Slab {}

impl Default for Slab {
    fn default() -> Slab {
        Slab {
            pages: Vec::new(),
            free_pages: Vec::new(),
            partial: [NIL; CLASSES],
            min_deadline: u64::MAX,
            live_pages: 0,
            sweep_cursor: 0,
            class_used: [0; CLASSES],
            class_pages: [0; CLASSES],
        }
    }
}

fn split(handle: u32) -> (usize, usize) {
    (
        (handle >> SLOT_BITS) as usize,
        (handle & ((1 << SLOT_BITS) - 1)) as usize,
    )
}

fn join(page: usize, slot: usize) -> u32 {
    ((page as u32) << SLOT_BITS) | slot as u32
}

impl Slab {
    /// A new slot of at least `size` bytes (at most MAX_CLASS), uninitialised but for
    /// its first word, which reads as free until the caller writes its entry. The address
    /// is `ptr(handle)` until the slot is freed.
    pub fn alloc(&mut self, size: usize) -> u32 {
        assert!(size <= MAX_CLASS, "a slot of {size} bytes");
        let class = class_bytes(size);
        let ci = class / 8;
        let pi = match self.partial[ci] {
            NIL => self.new_page(class),
            pi => pi as usize,
        };
        let page = &mut self.pages[pi];
        let slot = if page.free_head != NO_SLOT {
            let slot = page.free_head;
            // SAFETY: a free slot below `bumped` holds the next free slot's index at
            // [4..6) (written by `mark_free`); the slot is inside the live page.
            page.free_head = unsafe {
                ptr::read_unaligned(page.base.add(slot as usize * class + 4).cast::<u16>())
            };
            slot
        } else {
            page.bumped += 1;
            // SAFETY: `bumped` was below the capacity (the page is on the partial
            // list), so the slot is inside the page (8-aligned); it is marked free
            // until the caller writes the entry.
            unsafe { mark_free(page.base.add((page.bumped as usize - 1) * class), NO_SLOT) };
            page.bumped - 1
        };
        page.used += 1;
        let full = page.used == page.capacity();
        self.class_used[ci] += 1;
        if full {
            self.unlink(pi);
        }
        join(pi, slot as usize)
    }

    fn new_page(&mut self, class: usize) -> usize {
        // SAFETY: the layout is of non-zero size.
        let base = unsafe { alloc(page_layout()) };
        if base.is_null() {
            handle_alloc_error(page_layout());
        }
        let page = Page {
            base,
            min_deadline: u64::MAX,
            class: class as u16,
            used: 0,
            bumped: 0,
            free_head: NO_SLOT,
            prev: NIL,
            next: NIL,
        };
        let pi = match self.free_pages.pop() {
            Some(pi) => {
                self.pages[pi as usize] = page;
                pi as usize
            }
            None => {
                assert!(
                    self.pages.len() < MAX_PAGES,
                    "a shard's slab is full (64 GiB)"
                );
                self.pages.push(page);
                self.pages.len() - 1
            }
        };
        self.live_pages += 1;
        self.class_pages[class / 8] += 1;
        self.link(pi);
        pi
    }

    /// Puts page `pi` at the head of its class's partial list.
    fn link(&mut self, pi: usize) {
        let ci = self.pages[pi].class as usize / 8;
        let head = self.partial[ci];
        if head != NIL {
            self.pages[head as usize].prev = pi as u32;
        }
        let page = &mut self.pages[pi];
        page.prev = NIL;
        page.next = head;
        self.partial[ci] = pi as u32;
    }

    /// Takes page `pi` off its class's partial list (if it is on it).
    fn unlink(&mut self, pi: usize) {
        let (prev, next, ci) = {
            let p = &self.pages[pi];
            (p.prev, p.next, p.class as usize / 8)
        };
        if prev == NIL && self.partial[ci] != pi as u32 {
            return;
        }
        if prev == NIL {
            self.partial[ci] = next;
        } else {
            self.pages[prev as usize].next = next;
        }
        if next != NIL {
            self.pages[next as usize].prev = prev;
        }
        let page = &mut self.pages[pi];
        page.prev = NIL;
        page.next = NIL;
    }

    /// Frees a slot `alloc` gave (whatever it held must be dropped already). A page
    /// left empty goes back to the heap.
    pub fn free(&mut self, handle: u32) {
        let (pi, slot) = split(handle);
        let page = &mut self.pages[pi];
        debug_assert!(!page.base.is_null() && slot < page.bumped as usize);
        let was_full = page.used == page.capacity();
        page.used -= 1;
        let ci = page.class as usize / 8;
        self.class_used[ci] -= 1;
        if page.used == 0 {
            self.unlink(pi);
            self.class_pages[ci] -= 1;
            let page = &mut self.pages[pi];
            // SAFETY: the page was allocated with this layout and nothing in it is
            // live any more.
            unsafe { dealloc(page.base, page_layout()) };
            page.base = ptr::null_mut();
            page.min_deadline = u64::MAX;
            self.free_pages.push(pi as u32);
            self.live_pages -= 1;
            return;
        }
        let class = page.class as usize;
        // SAFETY: the slot is inside the live page (a handle alloc gave, not freed),
        // 8-aligned, and the slab is borrowed exclusively.
        unsafe { mark_free(page.base.add(slot * class), page.free_head) };
        page.free_head = slot as u16;
        if was_full {
            self.link(pi);
        }
    }

    /// The slot's address (valid until it is freed).
    pub fn ptr(&self, handle: u32) -> *mut u8 {
        let (pi, slot) = split(handle);
        let page = &self.pages[pi];
        debug_assert!(!page.base.is_null() && slot < page.bumped as usize);
        page.base.wrapping_add(slot * page.class as usize)
    }

    /// The slot's size class in bytes.
    pub fn class_of(&self, handle: u32) -> usize {
        self.pages[split(handle).0].class as usize
    }

    /// Notes that the entry at `handle` has this deadline (its page's and the slab's
    /// minimum go down to it).
    pub fn lower_min(&mut self, handle: u32, deadline_ms: u64) {
        let page = &mut self.pages[split(handle).0];
        page.min_deadline = page.min_deadline.min(deadline_ms);
        self.min_deadline = self.min_deadline.min(deadline_ms);
    }

    /// The lowest deadline in the slab, or lower (u64::MAX: none).
    pub fn min_deadline(&self) -> u64 {
        self.min_deadline
    }

    /// Page indices run `0..page_count()`.
    pub fn page_count(&self) -> usize {
        self.pages.len()
    }

    /// Page `pi`'s lowest deadline (or lower), u64::MAX for none or a freed page.
    pub fn page_min(&self, pi: usize) -> u64 {
        self.pages[pi].min_deadline
    }

    /// The handles of page `pi`'s slots that may be live: the caller reads each slot's
    /// first word (`is_free`) to know. Empty for a freed page.
    pub fn page_slots(&self, pi: usize) -> impl Iterator<Item = u32> {
        let page = &self.pages[pi];
        let n = if page.base.is_null() { 0 } else { page.bumped };
        (0..n as usize).map(move |slot| join(pi, slot))
    }

    /// Whether page `pi` is allocated.
    pub fn page_live(&self, pi: usize) -> bool {
        !self.pages[pi].base.is_null()
    }

    /// Sets page `pi`'s minimum (the sweeper, having read every live slot's deadline).
    pub fn set_page_min(&mut self, pi: usize, deadline_ms: u64) {
        self.pages[pi].min_deadline = deadline_ms;
    }

    pub fn sweep_cursor(&self) -> usize {
        self.sweep_cursor
    }

    pub fn set_sweep_cursor(&mut self, pi: usize) {
        self.sweep_cursor = pi;
    }

    /// Recomputes the slab's minimum from its pages'.
    pub fn recompute_min(&mut self) {
        self.min_deadline = self
            .pages
            .iter()
            .map(|p| p.min_deadline)
            .min()
            .unwrap_or(u64::MAX);
    }

    /// A class whose live slots would fit in under half of its pages but one (many
    /// pages left sparse by deletions), as its slot size.
    pub fn sparse_class(&self) -> Option<usize> {
        (MIN_CLASS / 8..CLASSES)
            .find(|&ci| {
                let cap = PAGE_BYTES / (ci * 8);
                self.class_pages[ci] >= 2
                    && self.class_used[ci] * 2 < (self.class_pages[ci] - 1) * cap
            })
            .map(|ci| ci * 8)
    }

    /// Moves up to `max_moves` live slots of `class` out of its least used pages into
    /// the others, freeing the pages emptied. `moved(slab, old, new)` is told of each
    /// move after the bytes were copied (the slot's owner repoints its handle) and
    /// returns the entry's deadline, which lowers its new page's minimum. Returns how
    /// many slots moved.
    pub fn compact(
        &mut self,
        class: usize,
        max_moves: usize,
        mut moved: impl FnMut(&Slab, u32, u32) -> Option<u64>,
    ) -> usize {
        let ci = class / 8;
        let mut moves = 0;
        while moves < max_moves && self.sparse_class() == Some(class) {
            // The least used page with a free slot is emptied into the others (taken
            // off the partial list first, so that no slot is allocated in it).
            let mut from = self.partial[ci];
            let mut pi = from;
            while pi != NIL {
                if self.pages[pi as usize].used < self.pages[from as usize].used {
                    from = pi;
                }
                pi = self.pages[pi as usize].next;
            }
            let from = from as usize;
            self.unlink(from);
            let slots: Vec<u32> = self.page_slots(from).collect();
            for old in slots {
                // SAFETY: a slot of the live page `from`, handed out before, and the
                // slab is borrowed exclusively.
                if unsafe { is_free(self.ptr(old)) } {
                    continue;
                }
                if moves == max_moves {
                    break;
                }
                let new = self.alloc(class);
                // SAFETY: two distinct live slots of `class` bytes; the entry's bytes
                // (its owned pointers with them) move to the new slot, and the old one
                // is freed without dropping anything.
                unsafe { ptr::copy_nonoverlapping(self.ptr(old), self.ptr(new), class) };
                if let Some(d) = moved(self, old, new) {
                    self.lower_min(new, d);
                }
                moves += 1;
                let last = self.pages[from].used == 1;
                self.free(old);
                if last {
                    break;
                }
            }
            if self.page_live(from) {
                self.link(from);
            }
        }
        moves
    }

    /// Bytes of pages held, and of the page table.
    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        self.live_pages * PAGE_BYTES + self.pages.capacity() * size_of::<Page>()
    }

    /// Live slots (tests).
    #[cfg(test)]
    fn used(&self) -> usize {
        self.pages.iter().map(|p| p.used as usize).sum()
    }
}

impl Drop for Slab {
    fn drop(&mut self) {
        for page in &self.pages {
            if !page.base.is_null() {
                // SAFETY: a live page, allocated with this layout; what its slots held
                // was dropped by the owner (the shard table) first.
                unsafe { dealloc(page.base, page_layout()) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill(slab: &Slab, h: u32, size: usize, byte: u8) {
        // SAFETY: the slot is live and at least `size` bytes.
        unsafe { ptr::write_bytes(slab.ptr(h), byte, size) };
    }

    fn holds(slab: &Slab, h: u32, size: usize, byte: u8) -> bool {
        // SAFETY: the slot is live and at least `size` bytes, written by `fill`.
        unsafe { std::slice::from_raw_parts(slab.ptr(h), size) }
            .iter()
            .all(|&b| b == byte)
    }

    #[test]
    fn classes_are_8_byte_steps_from_16_to_256() {
        assert_eq!(class_bytes(1), 16);
        assert_eq!(class_bytes(17), 24);
        assert_eq!(class_bytes(46), 48);
        assert_eq!(class_bytes(48), 48);
        assert_eq!(class_bytes(256), 256);
        let mut slab = Slab::default();
        for size in [1, 16, 17, 46, 100, 256] {
            let h = slab.alloc(size);
            assert_eq!(slab.class_of(h), class_bytes(size));
        }
    }

    #[test]
    fn slots_of_every_class_keep_their_bytes_and_are_reused() {
        let mut slab = Slab::default();
        let mut live = Vec::new();
        for i in 0..5000usize {
            let size = 1 + (i * 37) % MAX_CLASS;
            let h = slab.alloc(size);
            fill(&slab, h, size, i as u8);
            live.push((h, size, i as u8));
        }
        // Distinct slots: every one still holds what was written to it.
        for &(h, size, b) in &live {
            assert!(holds(&slab, h, size, b));
        }
        let pages = slab.page_count();
        // Free every other one, then allocate as many again: the freed slots are
        // reused (no new page), and nothing live is overwritten.
        let (gone, kept): (Vec<_>, Vec<_>) = live.into_iter().partition(|&(h, _, _)| h % 2 == 0);
        for &(h, _, _) in &gone {
            slab.free(h);
        }
        let mut again = Vec::new();
        for &(_, size, b) in &gone {
            let h = slab.alloc(size);
            fill(&slab, h, size, !b);
            again.push((h, size, !b));
        }
        assert_eq!(slab.page_count(), pages);
        for &(h, size, b) in kept.iter().chain(&again) {
            assert!(holds(&slab, h, size, b));
        }
        assert_eq!(slab.used(), 5000);
    }

    #[test]
    fn handles_round_trip_to_page_and_slot() {
        for (pi, slot) in [(0, 0), (1, 255), (MAX_PAGES - 1, 3), (12345, 85)] {
            assert_eq!(split(join(pi, slot)), (pi, slot));
        }
        let mut slab = Slab::default();
        let per_page = PAGE_BYTES / 48;
        let hs: Vec<u32> = (0..per_page * 3).map(|_| slab.alloc(46)).collect();
        for (i, &h) in hs.iter().enumerate() {
            assert_eq!(split(h), (i / per_page, i % per_page));
            assert_eq!(
                slab.ptr(h) as usize - slab.ptr(join(i / per_page, 0)) as usize,
                (i % per_page) * 48
            );
        }
    }

    #[test]
    fn an_emptied_page_goes_back_and_its_index_is_reused() {
        let mut slab = Slab::default();
        let per_page = PAGE_BYTES / 48;
        let hs: Vec<u32> = (0..per_page * 2).map(|_| slab.alloc(48)).collect();
        assert_eq!(slab.live_pages, 2);
        for &h in &hs[..per_page] {
            slab.free(h);
        }
        assert_eq!(slab.live_pages, 1);
        assert!(!slab.page_live(0) && slab.page_live(1));
        assert_eq!(slab.page_slots(0).count(), 0);
        // A new page (another class) takes the freed index.
        let h = slab.alloc(200);
        assert_eq!(split(h).0, 0);
        assert_eq!(slab.class_of(h), 200);
        for &h in &hs[per_page..] {
            slab.free(h);
        }
        slab.free(h);
        assert_eq!((slab.live_pages, slab.used()), (0, 0));
        assert_eq!(slab.bytes(), slab.pages.capacity() * size_of::<Page>());
    }

    #[test]
    fn the_page_table_grows_past_its_capacity_without_moving_slots() {
        let mut slab = Slab::default();
        let first = slab.alloc(256);
        fill(&slab, first, 256, 7);
        let at = slab.ptr(first);
        let mut hs = Vec::new();
        // 16 slots a page: 4096 pages, the table reallocated many times.
        for i in 0..16 * 4096 {
            let h = slab.alloc(256);
            fill(&slab, h, 8, i as u8);
            hs.push(h);
        }
        assert!(slab.page_count() > 4096);
        assert_eq!(slab.ptr(first), at);
        assert!(holds(&slab, first, 256, 7));
        for (i, &h) in hs.iter().enumerate() {
            assert!(holds(&slab, h, 8, i as u8));
            slab.free(h);
        }
        slab.free(first);
        assert_eq!(slab.live_pages, 0);
    }

    #[test]
    fn compaction_empties_sparse_pages_into_the_others() {
        let mut slab = Slab::default();
        let per_page = PAGE_BYTES / 48;
        let mut live = std::collections::HashMap::new();
        for i in 0..per_page * 12 {
            let h = slab.alloc(48);
            fill(&slab, h, 48, i as u8);
            live.insert(h, i as u8);
        }
        assert_eq!(slab.sparse_class(), None);
        live.retain(|&h, &mut b| {
            let keep = b % 4 == 0;
            if !keep {
                slab.free(h);
            }
            keep
        });
        assert_eq!(slab.live_pages, 12);
        assert_eq!(slab.sparse_class(), Some(48));
        // A bounded step moves no more than it is given.
        let mut moves = Vec::new();
        assert_eq!(
            slab.compact(48, 5, |_, old, new| {
                moves.push((old, new));
                Some(100)
            }),
            5
        );
        let mut total = 5;
        total += slab.compact(48, usize::MAX, |_, old, new| {
            moves.push((old, new));
            None
        });
        assert_eq!(moves.len(), total);
        assert_eq!(slab.sparse_class(), None);
        for (old, new) in moves {
            let b = live.remove(&old).expect("a live slot moved");
            live.insert(new, b);
        }
        // Every entry is where its owner was told, intact; the freed pages went back.
        for (&h, &b) in &live {
            assert!(holds(&slab, h, 48, b), "{h}");
        }
        assert_eq!(slab.used(), live.len());
        // Compacted until the live slots fill at least half of the pages but one.
        let needed = live.len().div_ceil(per_page);
        assert!(slab.live_pages <= needed * 2 + 1, "{}", slab.live_pages);
        // The moved deadline lowered its new page's minimum.
        assert_eq!(slab.min_deadline(), 100);
        for h in live.into_keys() {
            slab.free(h);
        }
        assert_eq!(slab.live_pages, 0);
    }

    #[test]
    fn minima_go_down_on_writes_and_are_set_by_the_sweeper() {
        let mut slab = Slab::default();
        let a = slab.alloc(48);
        assert_eq!(slab.min_deadline(), u64::MAX);
        slab.lower_min(a, 500);
        slab.lower_min(a, 900);
        assert_eq!((slab.page_min(0), slab.min_deadline()), (500, 500));
        slab.set_page_min(0, 900);
        slab.recompute_min();
        assert_eq!(slab.min_deadline(), 900);
        assert_eq!(slab.page_slots(0).collect::<Vec<_>>(), vec![a]);
    }
}
