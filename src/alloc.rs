//! What the process has allocated, cheaply enough to ask on every write (maxmemory).
//!
//! The allocator is glibc's malloc, counted. Why glibc and not jemalloc or mimalloc
//! (measured on 1M locks with benches/memory.py): with tables shrunk after
//! mass expiry, glibc plus `malloc_trim(0)` gave the memory back (145 MB -> 6.8 MB RSS);
//! jemalloc needed its background thread to get near that (9 MB) and mimalloc returned
//! nothing on an idle server; both also add a C build to every clean build. glibc's own
//! statistics (`mallinfo2`) walk every free chunk under the arena locks, so they are not
//! cheap to read: this wrapper counts instead.
//!
//! The count is sharded: each thread owns one of `SHARDS` cache-line-sized counters
//! while it lives (`thread_slot`), and changes it with a plain load and store: no
//! locked instruction (each one is a full barrier, ~10 ns here, and a request
//! allocates a few times). Threads past `SHARDS` at once share one more counter, with
//! atomic adds. A free made on another thread is subtracted from that thread's
//! counter; only the sum means anything.
//! It counts usable bytes (what malloc really set aside, as Redis counts with
//! zmalloc_size), so used_memory and maxmemory see the allocator's rounding too.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicUsize, Ordering};

/// Threads that can own a slot at once (`thread_slot`); more than the threads that
/// allocate often (2-16 workers, a sweeper per node, a few blocking threads).
pub(crate) const SHARDS: usize = 32;

#[repr(align(64))]
struct Shard(AtomicIsize);

/// One counter per slot, and the shared one (index `SHARDS`).
static COUNTS: [Shard; SHARDS + 1] = [const { Shard(AtomicIsize::new(0)) }; SHARDS + 1];
/// Which slots a living thread owns.
static OWNED: [AtomicBool; SHARDS] = [const { AtomicBool::new(false) }; SHARDS];
static PEAK: AtomicUsize = AtomicUsize::new(0);
static STARTUP: AtomicUsize = AtomicUsize::new(0);

/// A thread's slot: 0 not claimed yet, `NO_SLOT` none free (or the thread is ending),
/// else the slot plus one. Given back when the thread ends.
struct Claim(Cell<usize>);

const NO_SLOT: usize = usize::MAX;

impl Drop for Claim {
    fn drop(&mut self) {
        let i = self.0.replace(NO_SLOT);
        if i != 0 && i != NO_SLOT {
            OWNED[i - 1].store(false, Ordering::Release);
        }
    }
}

thread_local! {
    /// Const-initialised: reading it never allocates through Rust's allocator, so the
    /// allocator may use it (glibc registers the destructor with its own malloc).
    static CLAIM: Claim = const { Claim(Cell::new(0)) };
}

/// This thread's own slot (below `SHARDS`), claimed on first use and given back when
/// the thread ends; `None` when every slot is owned, or while the thread is ending.
/// While a thread owns slot `i`, nobody else writes what is kept per slot `i`: a
/// plain load and store updates it (an `Acquire` claim after the last owner's
/// `Release` hand-back orders their stores).
pub(crate) fn thread_slot() -> Option<usize> {
    CLAIM
        .try_with(|c| {
            let i = c.0.get();
            if i != 0 {
                return (i != NO_SLOT).then(|| i - 1);
            }
            let claimed = OWNED.iter().position(|owned| {
                !owned.load(Ordering::Relaxed)
                    && owned
                        .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                        .is_ok()
            });
            c.0.set(claimed.map_or(NO_SLOT, |i| i + 1));
            claimed
        })
        .ok()
        .flatten()
}

/// Adds `delta` to this thread's counter.
#[inline]
fn count(delta: isize) {
    match thread_slot() {
        Some(i) => {
            let c = &COUNTS[i].0;
            c.store(
                c.load(Ordering::Relaxed).wrapping_add(delta),
                Ordering::Relaxed,
            );
        }
        None => {
            COUNTS[SHARDS].0.fetch_add(delta, Ordering::Relaxed);
        }
    }
}

/// The bytes malloc really reserved for `ptr` (its usable size), or the layout's size
/// where glibc cannot say.
#[inline]
fn usable(ptr: *mut u8, layout: Layout) -> isize {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let _ = layout;
        // SAFETY: ptr came from System (malloc / posix_memalign) and is still live.
        let n = unsafe { libc::malloc_usable_size(ptr.cast()) };
        n as isize
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        let _ = ptr;
        layout.size() as isize
    }
}

/// The system allocator, counted (see the module doc).
pub struct Counting;

// SAFETY: every call is forwarded to System unchanged; only counters are added.
unsafe impl GlobalAlloc for Counting {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            count(usable(p, layout));
        }
        p
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        if !p.is_null() {
            count(usable(p, layout));
        }
        p
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(-usable(ptr, layout));
        System.dealloc(ptr, layout);
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old = usable(ptr, layout);
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() {
            let new = usable(
                p,
                Layout::from_size_align_unchecked(new_size, layout.align()),
            );
            count(new - old);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Bytes the process has allocated through Rust's allocator (Lua's heap included: mlua
/// allocates through it). A sum of `SHARDS` relaxed loads: cheap enough for every write.
pub(crate) fn used_memory() -> usize {
    let sum: isize = COUNTS.iter().map(|c| c.0.load(Ordering::Relaxed)).sum();
    let used = sum.max(0) as usize;
    PEAK.fetch_max(used, Ordering::Relaxed);
    used
}

/// The highest `used_memory` seen (at each call of it: INFO, maxmemory, the sweeper).
pub(crate) fn peak_memory() -> usize {
    PEAK.load(Ordering::Relaxed).max(used_memory())
}

/// Records `used_memory` as the process's start-up figure (MEMORY STATS
/// `startup.allocated`), once: the first server started in the process sets it.
pub(crate) fn mark_startup() {
    let _ = STARTUP.compare_exchange(0, used_memory(), Ordering::Relaxed, Ordering::Relaxed);
}

pub(crate) fn startup_memory() -> usize {
    STARTUP.load(Ordering::Relaxed)
}

/// Resident memory from /proc (0 where there is none).
pub(crate) fn rss_bytes() -> usize {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<usize>().ok())
        .map_or(0, |pages| pages * page_size())
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as usize
    } else {
        4096
    }
}

/// Gives free heap memory back to the kernel (glibc keeps freed small chunks in its
/// arenas, and never unmaps the middle of a heap by itself). Takes milliseconds on a
/// large heap: call it off the async workers, after something freed a lot.
pub(crate) fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// `trim` on a thread of its own, so the caller (a worker, FLUSHALL) does not wait for
/// it; at most one runs at a time, and a request made meanwhile is folded into it.
pub(crate) fn trim_soon() {
    use std::sync::atomic::AtomicU8;
    // 0 idle, 1 running, 2 running and asked again.
    static STATE: AtomicU8 = AtomicU8::new(0);
    if STATE.fetch_add(1, Ordering::AcqRel) != 0 {
        STATE.store(2, Ordering::Release);
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("malloc-trim".into())
        .spawn(|| loop {
            trim();
            if STATE
                .compare_exchange(1, 0, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return;
            }
            STATE.store(1, Ordering::Release);
        });
    if spawned.is_err() {
        STATE.store(0, Ordering::Release);
    }
}

/// The allocator's name for INFO's `mem_allocator` (Redis says "libc" for this one).
pub(crate) const ALLOCATOR_NAME: &str = "libc";

/// Redis's bytesToHuman: "1023B", "1.50K", "12.00M", "1.20G".
pub(crate) fn human(bytes: usize) -> String {
    let b = bytes as f64;
    const K: f64 = 1024.0;
    if b < K {
        format!("{bytes}B")
    } else if b < K * K {
        format!("{:.2}K", b / K)
    } else if b < K * K * K {
        format!("{:.2}M", b / (K * K))
    } else if b < K * K * K * K {
        format!("{:.2}G", b / (K * K * K))
    } else if b < K * K * K * K * K {
        format!("{:.2}T", b / (K * K * K * K))
    } else {
        format!("{:.2}P", b / (K * K * K * K * K))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Living threads own different slots, and a thread's slot is free again once it
    /// has ended.
    #[test]
    fn threads_own_their_slots_until_they_end() {
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(4));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let barrier = barrier.clone();
                std::thread::spawn(move || {
                    let slot = thread_slot();
                    assert_eq!(thread_slot(), slot, "a thread keeps its slot");
                    barrier.wait(); // all four alive at once
                    slot
                })
            })
            .collect();
        let slots: Vec<usize> = threads
            .into_iter()
            .map(|t| t.join().unwrap().expect("a free slot"))
            .collect();
        let mut distinct = slots.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(
            distinct.len(),
            4,
            "two living threads shared a slot: {slots:?}"
        );
        // Slots come back: more threads one after another than there are slots, and
        // each still finds one (other tests' threads may hold a few meanwhile).
        for _ in 0..SHARDS * 2 {
            let slot = std::thread::spawn(thread_slot).join().unwrap();
            assert!(slot.is_some(), "slots are not given back when threads end");
        }
    }

    /// Other tests in this process allocate and free tens of MB meanwhile: the blocks
    /// here are far bigger (reserved, never touched, so they cost no RSS).
    const BIG: usize = 1 << 30;

    /// The tests that allocate `BIG` take turns: one's gigabyte landing between the
    /// other's two reads made it fail (seen once in 20 runs, `.ci/soak`).
    static BIG_BLOCKS: parking_lot::Mutex<()> = parking_lot::Mutex::new(());

    #[test]
    fn counts_what_is_allocated_and_freed() {
        let _turn = BIG_BLOCKS.lock();
        let before = used_memory();
        let block: Vec<u8> = Vec::with_capacity(BIG);
        let during = used_memory();
        assert!(during > before + BIG / 2, "{before} -> {during}");
        drop(block);
        let after = used_memory();
        assert!(after + BIG / 2 < during, "{during} -> {after}");
    }

    #[test]
    fn frees_on_another_thread_still_sum_right() {
        let _turn = BIG_BLOCKS.lock();
        let before = used_memory();
        let block: Vec<u8> = Vec::with_capacity(BIG);
        std::thread::spawn(move || drop(block)).join().unwrap();
        let after = used_memory();
        assert!(after < before + BIG / 2, "{before} -> {after}");
    }

    #[test]
    fn human_matches_redis() {
        assert_eq!(human(0), "0B");
        assert_eq!(human(1023), "1023B");
        assert_eq!(human(914680), "893.24K");
        assert_eq!(human(12087296), "11.53M");
        assert_eq!(human(25276514304), "23.54G");
    }
}
