//! What the process has allocated, cheaply enough to ask on every write (maxmemory).
//!
//! The allocator is glibc's malloc, counted. Why glibc and not jemalloc or mimalloc
//! (measured on 1M locks, PERF-NOTES §3 and benches/memory.sh): with tables shrunk after
//! mass expiry, glibc plus `malloc_trim(0)` gave the memory back (145 MB -> 6.8 MB RSS);
//! jemalloc needed its background thread to get near that (9 MB) and mimalloc returned
//! nothing on an idle server; both also add a C build to every clean build. glibc's own
//! statistics (`mallinfo2`) walk every free chunk under the arena locks, so they are not
//! cheap to read: this wrapper counts instead.
//!
//! The count is sharded: each thread adds to one of `SHARDS` cache-line-sized counters
//! picked once per thread, so an allocation costs one uncontended atomic add on a line
//! the thread already owns, never a counter every thread fights over. A free made on
//! another thread is subtracted from that thread's shard; only the sum means anything.
//! It counts usable bytes (what malloc really set aside, as Redis counts with
//! zmalloc_size), so used_memory and maxmemory see the allocator's rounding too.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};

/// Counters; more than the threads that allocate often (2-16 workers plus a few).
const SHARDS: usize = 32;

#[repr(align(64))]
struct Shard(AtomicIsize);

static COUNTS: [Shard; SHARDS] = [const { Shard(AtomicIsize::new(0)) }; SHARDS];
static NEXT_SHARD: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static STARTUP: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's shard, plus one (0: not chosen yet). No destructor and a const
    /// initialiser: reading it never allocates, so the allocator may use it.
    static SHARD: Cell<usize> = const { Cell::new(0) };
}

fn shard() -> &'static AtomicIsize {
    let i = SHARD.with(|s| {
        let mut i = s.get();
        if i == 0 {
            i = NEXT_SHARD.fetch_add(1, Ordering::Relaxed) % SHARDS + 1;
            s.set(i);
        }
        i - 1
    });
    &COUNTS[i].0
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
            shard().fetch_add(usable(p, layout), Ordering::Relaxed);
        }
        p
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        if !p.is_null() {
            shard().fetch_add(usable(p, layout), Ordering::Relaxed);
        }
        p
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        shard().fetch_sub(usable(ptr, layout), Ordering::Relaxed);
        System.dealloc(ptr, layout);
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old = usable(ptr, layout);
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() {
            let new = usable(p, Layout::from_size_align_unchecked(new_size, layout.align()));
            shard().fetch_add(new - old, Ordering::Relaxed);
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
