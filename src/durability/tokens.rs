//! The node's fencing-token high-water mark: a max-register that never goes backwards,
//! also across a crash.
//!
//! Why this gives fencing tokens without consensus: a lock grant reads the mark
//! atomically with the grant (`FENCING.GRANT`); the client takes T = max over its
//! granted quorum + 1 and raises the mark to T on a majority (`FENCING.COMMIT`), each
//! node only while the key still holds that client's value. A later holder's quorum
//! meets a node where the commit happened before its grant (the key had to go first),
//! so its T is larger. One mark per node is enough: tokens need only grow per resource.
//!
//! Durability: the mark lives in memory; the data directory holds a reservation R with
//! mark <= R at all times. Raising the mark past R first writes R' = T + `BLOCK` and
//! fsyncs it, so there is one fsync per block of tokens, not per lock. After a crash the
//! mark resumes at R, which is at or above anything that was ever committed.

use crate::durability::data_dir::NodeDir;
use parking_lot::Mutex;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Tokens reserved per fsync. A crash skips at most this many token values.
pub const BLOCK: u64 = 10_000;

/// The largest token: replies are Redis integers (i64).
pub const MAX_TOKEN: u64 = i64::MAX as u64;

/// How far past the microsecond clock a restored node's mark goes (`after_restore`):
/// 2^32 us, about 71 minutes.
pub const RESTORE_LEAD: u64 = 1 << 32;

/// The reservation a node resumes at when its `node.state` was restored from a copy
/// (`redlockd init --adopt`), given the copy's reservation and the wall clock (ns since
/// the Unix epoch): the larger of the two, in microseconds for the clock, plus
/// `RESTORE_LEAD`.
///
/// The node cannot know how far its mark went after the copy was made, so the mark
/// jumps past anything it can have reached. A token is one more than the highest mark
/// of a quorum, so the highest mark grows by one per lock acquisition (a Redlock round
/// trip each, far fewer than one per microsecond), except where an earlier restore set
/// it the same way: a mark set from the microsecond clock stays ahead of every mark handed
/// out before, as long as the wall clocks of the machines involved agree to within
/// `RESTORE_LEAD`. Values a client committed beyond that (FENCING.COMMIT takes any
/// token) are beyond any bound. Tokens only need to grow, so a jump costs nothing but
/// the numbers' size: at 2^63 - 1 this lasts until the year 292277.
pub fn after_restore(reserved: u64, unix_ns: i64) -> u64 {
    let clock_us = u64::try_from(unix_ns / 1000).unwrap_or(0);
    reserved
        .max(clock_us)
        .saturating_add(RESTORE_LEAD)
        .min(MAX_TOKEN)
}

pub struct TokenMark {
    /// The highest token committed here (or the reservation restored after a crash).
    mark: AtomicU64,
    /// The durable reservation: `mark <= reserved` always holds.
    reserved: AtomicU64,
    /// Serialises reservation writes.
    persist: Mutex<()>,
    /// Reservation writes (fsyncs) since the process started.
    fsyncs: AtomicU64,
    /// Where the reservation is kept; `None` keeps it in memory only (benches, fuzzing:
    /// a restart then loses the mark).
    dir: Option<Arc<NodeDir>>,
}

impl TokenMark {
    /// A mark resuming at the directory's reservation (0 without a directory).
    pub fn new(dir: Option<Arc<NodeDir>>) -> TokenMark {
        let reserved = dir.as_ref().map_or(0, |d| d.state().token_reserved);
        TokenMark {
            mark: AtomicU64::new(reserved),
            reserved: AtomicU64::new(reserved),
            persist: Mutex::new(()),
            fsyncs: AtomicU64::new(0),
            dir,
        }
    }

    /// The current mark.
    pub fn get(&self) -> u64 {
        self.mark.load(Ordering::SeqCst)
    }

    /// The durable reservation.
    pub fn reserved(&self) -> u64 {
        self.reserved.load(Ordering::SeqCst)
    }

    pub fn fsyncs(&self) -> u64 {
        self.fsyncs.load(Ordering::Relaxed)
    }

    /// Raises the mark to at least `token`. Past the reservation, a new one is made
    /// durable first; if that fails the mark does not move and the error is returned.
    pub fn raise(&self, token: u64) -> io::Result<()> {
        let token = token.min(MAX_TOKEN);
        if token <= self.get() {
            return Ok(());
        }
        if token > self.reserved() {
            let _one_writer = self.persist.lock();
            if token > self.reserved() {
                let next = token.saturating_add(BLOCK).min(MAX_TOKEN);
                if let Some(dir) = &self.dir {
                    dir.update(|s| s.token_reserved = next)?;
                    self.fsyncs.fetch_add(1, Ordering::Relaxed);
                }
                self.reserved.store(next, Ordering::SeqCst);
            }
        }
        self.mark.fetch_max(token, Ordering::SeqCst);
        Ok(())
    }

    /// After a crash: the in-memory mark is lost; resume at the durable reservation.
    pub fn resume_after_crash(&self) {
        let _one_writer = self.persist.lock();
        let reserved = self.dir.as_ref().map_or(0, |d| d.state().token_reserved);
        self.reserved.store(reserved, Ordering::SeqCst);
        self.mark.store(reserved, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restored_mark_jumps_past_the_microsecond_clock() {
        let now_ns = 1_800_000_000_000_000_000i64; // 2027-01-15
        let now_us = 1_800_000_000_000_000u64;
        assert_eq!(after_restore(10_002, now_ns), now_us + RESTORE_LEAD);
        // A reservation already past the clock (an earlier restore, a large commit).
        let high = now_us + 5 * RESTORE_LEAD;
        assert_eq!(after_restore(high, now_ns), high + RESTORE_LEAD);
        assert_eq!(after_restore(MAX_TOKEN - 1, now_ns), MAX_TOKEN);
        // A clock before 1970 still jumps.
        assert_eq!(after_restore(7, -5), 7 + RESTORE_LEAD);
    }

    #[test]
    fn one_fsync_per_block_and_the_mark_resumes_at_the_reservation() {
        let p =
            std::env::temp_dir().join(format!("redlockd-unit-tokens-{}", rand::random::<u64>()));
        {
            let dir = Arc::new(NodeDir::open(&p).unwrap());
            let t = TokenMark::new(Some(dir));
            for token in 1..=25_000 {
                t.raise(token).unwrap();
            }
            assert_eq!(t.get(), 25_000);
            // Tokens 1, 10_002 and 20_003 each passed the reservation.
            assert_eq!(t.fsyncs(), 3);
            assert_eq!(t.reserved(), 20_003 + BLOCK);
            t.raise(7).unwrap();
            assert_eq!(t.get(), 25_000, "a max-register never goes down");
            t.resume_after_crash();
            assert_eq!(t.get(), 30_003);
        }
        let t = TokenMark::new(Some(Arc::new(NodeDir::open(&p).unwrap())));
        assert_eq!(t.get(), 30_003, "a new process resumes at the reservation");
        std::fs::remove_dir_all(&p).unwrap();
    }
}
