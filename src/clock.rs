//! The server's one clock. TTL deadlines are milliseconds on its monotonic reading;
//! wall time appears only where commands speak Unix time (EXAT, PXAT, EXPIREAT,
//! PEXPIRETIME, TIME...), converted once at that edge.
//!
//! A `Clock` is either the real one (monotonic from CLOCK_MONOTONIC, wall from the system
//! clock) or a manual one for tests, where `advance` moves monotonic and wall time
//! together and `set_wall` / `jump_wall` move wall time alone. Clones share the reading.
//! Linked manual clocks (`Clock::linked`, one per node of a test cluster) share the
//! reading of the clock they were made from: one advance moves every node; a wall jump
//! on a linked clock moves that machine only, one on the clock they came from moves all.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicI64, Ordering::Relaxed};
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::Notify;

/// The real clock or a manual one (see the module docs); clones share one reading.
#[derive(Clone)]
pub struct Clock {
    inner: Arc<Inner>,
}

struct Inner {
    source: Source,
    /// Woken whenever a manual clock moves, so timers on it can re-check.
    moved: Notify,
    /// Called after every `advance`, in order, before it returns (e.g. expiry sweeps).
    on_advance: Mutex<Vec<Box<dyn Fn() + Send + Sync>>>,
    /// The real clock's wall-minus-monotonic milliseconds, as last kept
    /// (`wall_offset_ms`); `i64::MIN` until first measured.
    wall_offset_ms: AtomicI64,
    /// Random, made with the clock: the "boot" a manual clock's readings belong to
    /// (`durability::reach`): nodes sharing one manual clock share its boot.
    epoch_id: [u8; 16],
}

enum Source {
    /// `mono_ns` at the clock's creation.
    Real { start_ns: u64 },
    Manual {
        time: Arc<ManualTime>,
        /// A linked clock's wall time minus the shared one (its `set_wall`,
        /// `jump_wall`); `None` on the clock made by `manual()`, whose wall time is the
        /// shared one.
        own_wall_ms: Option<AtomicI64>,
    },
}

/// A manual reading and every clock that shares it (`Clock::linked`).
struct ManualTime {
    now: Mutex<ManualNow>,
    /// Woken (`after_move`) when `advance` moves the shared reading.
    clocks: Mutex<Vec<Weak<Inner>>>,
}

struct ManualNow {
    mono_ms: u64,
    wall_ms: i64,
}

/// Where a manual clock's wall time starts: 2025-01-01T00:00:00Z. A fixed start makes
/// test runs repeatable.
pub const MANUAL_WALL_START_MS: i64 = 1_735_689_600_000;

/// Where a manual clock's monotonic reading starts. Not zero, so that "deadline 0" and
/// arithmetic near zero are never special.
pub const MANUAL_MONO_START_MS: u64 = 1_000_000;

/// Nanoseconds on the system's monotonic clock (CLOCK_MONOTONIC, which `Instant` also
/// reads), as a plain number: a command's start, its time and its duration (INFO
/// commandstats) are then a subtraction and a division each. With `Instant` they were
/// timespec arithmetic, ~85 instructions a time, several times per command.
pub(crate) fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid place to write; CLOCK_MONOTONIC always exists (glibc
    // answers it from the vDSO, without a system call).
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

impl Clock {
    /// The real clock: monotonic from CLOCK_MONOTONIC (`mono_ns`), wall from `SystemTime`.
    pub fn real() -> Clock {
        Clock::with_source(Source::Real {
            start_ns: mono_ns(),
        })
    }

    /// A manual clock that moves only when told to. Its wall time starts at
    /// [`MANUAL_WALL_START_MS`] (2025-01-01T00:00:00Z), not at the real time, and its
    /// monotonic reading at [`MANUAL_MONO_START_MS`]: every run starts the same.
    pub fn manual() -> Clock {
        let time = Arc::new(ManualTime {
            now: Mutex::new(ManualNow {
                mono_ms: MANUAL_MONO_START_MS,
                wall_ms: MANUAL_WALL_START_MS,
            }),
            clocks: Mutex::new(Vec::new()),
        });
        Clock::on_manual_time(time, None)
    }

    /// A manual clock on this one's reading (a test cluster's node): `advance` on any
    /// clock of the group moves all of them; `set_wall` / `jump_wall` on a linked clock
    /// move its own wall time only (one machine's clock stepped), on the clock made by
    /// `manual()` every clock's. Its wall time starts equal to this clock's. Panics on
    /// the real clock.
    pub fn linked(&self) -> Clock {
        let Source::Manual { time, own_wall_ms } = &self.inner.source else {
            panic!("Clock::linked on the real clock");
        };
        let own = own_wall_ms.as_ref().map_or(0, |o| o.load(Relaxed));
        Clock::on_manual_time(time.clone(), Some(AtomicI64::new(own)))
    }

    fn on_manual_time(time: Arc<ManualTime>, own_wall_ms: Option<AtomicI64>) -> Clock {
        let clock = Clock::with_source(Source::Manual {
            time: time.clone(),
            own_wall_ms,
        });
        let mut clocks = time.clocks.lock();
        clocks.retain(|c| c.strong_count() > 0);
        clocks.push(Arc::downgrade(&clock.inner));
        clock
    }

    fn with_source(source: Source) -> Clock {
        Clock {
            inner: Arc::new(Inner {
                source,
                moved: Notify::new(),
                on_advance: Mutex::new(Vec::new()),
                wall_offset_ms: AtomicI64::new(i64::MIN),
                epoch_id: rand::random(),
            }),
        }
    }

    /// Whether this is a manual clock (moved by `advance`), not the real one.
    pub fn is_manual(&self) -> bool {
        matches!(self.inner.source, Source::Manual { .. })
    }

    /// A random id made with this clock (see `Inner::epoch_id`).
    pub(crate) fn epoch_id(&self) -> [u8; 16] {
        self.inner.epoch_id
    }

    /// Monotonic milliseconds. Only differences mean anything.
    pub fn now_ms(&self) -> u64 {
        self.now_ms_at(mono_ns())
    }

    /// `now_ms` for a reading of the real clock the caller already took (`at`), so a
    /// command reads the system clock once for both its time and its duration stat.
    /// A manual clock ignores `at` and reports its own time.
    pub(crate) fn now_ms_at(&self, at_ns: u64) -> u64 {
        match &self.inner.source {
            // The real reading starts at the same offset as the manual one so that
            // deadlines are never near zero.
            Source::Real { start_ns } => {
                MANUAL_MONO_START_MS + at_ns.saturating_sub(*start_ns) / 1_000_000
            }
            Source::Manual { time, .. } => time.now.lock().mono_ms,
        }
    }

    /// Wall time in milliseconds since the Unix epoch.
    pub fn wall_ms(&self) -> i64 {
        self.wall_us() / 1000
    }

    /// Wall time in microseconds since the Unix epoch (for TIME).
    pub(crate) fn wall_us(&self) -> i64 {
        match &self.inner.source {
            Source::Real { .. } => match SystemTime::now().duration_since(UNIX_EPOCH) {
                Ok(d) => d.as_micros() as i64,
                Err(e) => -(e.duration().as_micros() as i64),
            },
            Source::Manual { time, own_wall_ms } => {
                (time.now.lock().wall_ms + own(own_wall_ms)) * 1000
            }
        }
    }

    /// Moves a manual clock forward: monotonic and wall time together, of this clock
    /// and every clock linked to it. Timers on them fire and their `on_advance` hooks run
    /// before it returns. Panics on the real clock, which nothing may move.
    pub fn advance(&self, d: Duration) {
        let Source::Manual { time, .. } = &self.inner.source else {
            panic!("Clock::advance on the real clock");
        };
        {
            let mut now = time.now.lock();
            now.mono_ms += d.as_millis() as u64;
            now.wall_ms += d.as_millis() as i64;
        }
        time.moved();
    }

    /// Sets a manual clock's wall time (Unix ms); monotonic time does not move. On a
    /// linked clock, only its own wall time; on the clock made by `manual()`, the
    /// shared one (linked clocks keep their offsets from it).
    pub fn set_wall(&self, unix_ms: i64) {
        let Source::Manual { time, own_wall_ms } = &self.inner.source else {
            panic!("Clock::set_wall on the real clock");
        };
        match own_wall_ms {
            Some(own) => {
                own.store(unix_ms - time.now.lock().wall_ms, Relaxed);
                self.after_move();
            }
            None => {
                time.now.lock().wall_ms = unix_ms;
                time.moved();
            }
        }
    }

    /// Steps a manual clock's wall time by `delta_ms` (either sign), as NTP or an
    /// operator would; monotonic time does not move. Which clocks' wall time moves: as
    /// for `set_wall`.
    pub fn jump_wall(&self, delta_ms: i64) {
        let Source::Manual { time, own_wall_ms } = &self.inner.source else {
            panic!("Clock::jump_wall on the real clock");
        };
        match own_wall_ms {
            Some(own) => {
                own.fetch_add(delta_ms, Relaxed);
                self.after_move();
            }
            None => {
                time.now.lock().wall_ms += delta_ms;
                time.moved();
            }
        }
    }

    fn after_move(&self) {
        self.inner.moved.notify_waiters();
        for hook in self.inner.on_advance.lock().iter() {
            hook();
        }
    }

    /// Registers a hook run after every manual move (a no-op for the real clock).
    pub(crate) fn on_advance(&self, hook: impl Fn() + Send + Sync + 'static) {
        self.inner.on_advance.lock().push(Box::new(hook));
    }

    /// The Unix ms a monotonic reading stands for (a deadline, or a command's `now_ms`),
    /// at the current offset between the two clocks. Unix times given by clients (PXAT,
    /// EXPIREAT) become deadlines through this offset and are read back (PEXPIRETIME)
    /// through it, so `SET k v PXAT t` then `PEXPIRETIME k` answers `t` itself.
    pub(crate) fn mono_to_wall(&self, mono_ms: u64) -> i64 {
        mono_ms as i64 + self.wall_offset_ms()
    }

    /// Unix ms minus monotonic ms. The real clock measures it in microseconds and
    /// rounds up, so a Unix time converted to a deadline is never later than asked (a
    /// PXAT's PTTL never exceeds the time left), and keeps it while new measurements
    /// stay within 2 ms below it: two conversions at different times then use the same
    /// offset, where truncating both clocks to milliseconds at each conversion made a
    /// PXAT read back 1 ms less now and then. A wall clock step (NTP, an operator) is
    /// taken at once; slow drift, 2 ms at a time.
    fn wall_offset_ms(&self) -> i64 {
        let start_ns = match &self.inner.source {
            Source::Manual { time, own_wall_ms } => {
                let now = time.now.lock();
                return now.wall_ms + own(own_wall_ms) - now.mono_ms as i64;
            }
            Source::Real { start_ns } => *start_ns,
        };
        // Monotonic first: a delay between the two readings makes the offset larger,
        // and deadlines earlier, never later. A delay of milliseconds (the thread
        // descheduled between the readings, on a busy machine) would move the offset
        // out of the kept window and back, and a PXAT would read back off by that much:
        // a pair whose monotonic readings on either side are more than 100 us apart is
        // read again, up to 4 times, keeping the tightest.
        let mut best: Option<(u64, i64)> = None;
        for _ in 0..4 {
            let before = mono_ns();
            let wall_us = self.wall_us();
            let spread = mono_ns().saturating_sub(before);
            let mono_us = MANUAL_MONO_START_MS as i64 * 1000
                + (before.saturating_sub(start_ns) / 1000) as i64;
            if best.is_none_or(|(s, _)| spread < s) {
                best = Some((spread, wall_us - mono_us));
            }
            if spread <= 100_000 {
                break;
            }
        }
        let (_, fresh_us) = best.expect("the loop reads at least once");
        let kept = self.inner.wall_offset_ms.load(Relaxed);
        if kept != i64::MIN && fresh_us <= kept * 1000 && fresh_us > kept * 1000 - 2000 {
            return kept;
        }
        let ms = fresh_us.div_euclid(1000) + i64::from(fresh_us.rem_euclid(1000) != 0);
        self.inner.wall_offset_ms.store(ms, Relaxed);
        ms
    }

    /// Waits until the monotonic reading reaches `deadline_ms`.
    pub async fn sleep_until(&self, deadline_ms: u64) {
        loop {
            let moved = self.inner.moved.notified();
            tokio::pin!(moved);
            // Register before reading, so a move between the read and the await wakes us.
            moved.as_mut().enable();
            let now = self.now_ms();
            if now >= deadline_ms {
                return;
            }
            match &self.inner.source {
                Source::Real { .. } => {
                    tokio::time::sleep(Duration::from_millis(deadline_ms - now)).await
                }
                Source::Manual { .. } => moved.await,
            }
        }
    }

    /// Waits for `d` on this clock.
    pub async fn sleep(&self, d: Duration) {
        let deadline = self.now_ms() + d.as_millis() as u64;
        self.sleep_until(deadline).await
    }
}

/// A linked clock's own wall offset (0 for the group's first clock).
fn own(own_wall_ms: &Option<AtomicI64>) -> i64 {
    own_wall_ms.as_ref().map_or(0, |o| o.load(Relaxed))
}

impl ManualTime {
    /// After the shared reading moved: every clock on it wakes its timers and runs its
    /// `on_advance` hooks.
    fn moved(&self) {
        let clocks: Vec<Arc<Inner>> = self
            .clocks
            .lock()
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        for inner in clocks {
            Clock { inner }.after_move();
        }
    }
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = if self.is_manual() { "manual" } else { "real" };
        write!(f, "Clock({kind}, now_ms={})", self.now_ms())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_advance_moves_both_readings() {
        let c = Clock::manual();
        let (m, w) = (c.now_ms(), c.wall_ms());
        c.advance(Duration::from_millis(1500));
        assert_eq!(c.now_ms(), m + 1500);
        assert_eq!(c.wall_ms(), w + 1500);
    }

    #[test]
    fn wall_jump_leaves_monotonic_alone() {
        let c = Clock::manual();
        let m = c.now_ms();
        c.jump_wall(-3_600_000);
        assert_eq!(c.now_ms(), m);
        assert_eq!(c.wall_ms(), MANUAL_WALL_START_MS - 3_600_000);
    }

    #[test]
    fn linked_clocks_share_advance_not_wall_jumps() {
        let a = Clock::manual();
        let b = a.linked();
        let hits = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let h = hits.clone();
        b.on_advance(move || {
            h.fetch_add(1, Relaxed);
        });
        a.advance(Duration::from_millis(500));
        assert_eq!(b.now_ms(), MANUAL_MONO_START_MS + 500);
        assert_eq!(b.wall_ms(), MANUAL_WALL_START_MS + 500);
        assert_eq!(hits.load(Relaxed), 1, "b's hooks run when a advances");
        let c = a.linked();
        b.jump_wall(-3_600_000);
        assert_eq!(b.wall_ms(), MANUAL_WALL_START_MS + 500 - 3_600_000);
        assert_eq!(a.wall_ms(), MANUAL_WALL_START_MS + 500);
        assert_eq!(c.wall_ms(), MANUAL_WALL_START_MS + 500);
        b.advance(Duration::from_millis(1));
        assert_eq!(
            (a.now_ms(), c.now_ms()),
            (MANUAL_MONO_START_MS + 501, MANUAL_MONO_START_MS + 501)
        );
        assert_eq!(b.wall_ms(), MANUAL_WALL_START_MS + 501 - 3_600_000);
        // The first clock's wall jumps move every clock; linked ones keep their offset.
        a.jump_wall(1000);
        assert_eq!(c.wall_ms(), MANUAL_WALL_START_MS + 1501);
        assert_eq!(b.wall_ms(), MANUAL_WALL_START_MS + 1501 - 3_600_000);
        // b's hooks: a's advance, b's own jump, b's advance, a's jump.
        assert_eq!(hits.load(Relaxed), 4);
        c.set_wall(0);
        assert_eq!((c.wall_ms(), a.wall_ms()), (0, MANUAL_WALL_START_MS + 1501));
        assert_eq!(b.mono_to_wall(b.now_ms()), b.wall_ms());
    }

    #[tokio::test]
    async fn linked_sleep_wakes_on_the_other_clocks_advance() {
        let a = Clock::manual();
        let b = a.linked();
        let t = tokio::spawn(async move { b.sleep(Duration::from_millis(100)).await });
        tokio::task::yield_now().await;
        a.advance(Duration::from_millis(100));
        tokio::time::timeout(Duration::from_secs(5), t)
            .await
            .unwrap()
            .unwrap();
    }

    #[tokio::test]
    async fn manual_sleep_wakes_on_advance() {
        let c = Clock::manual();
        let c2 = c.clone();
        let t = tokio::spawn(async move { c2.sleep(Duration::from_millis(100)).await });
        tokio::task::yield_now().await;
        c.advance(Duration::from_millis(50));
        tokio::task::yield_now().await;
        assert!(!t.is_finished());
        c.advance(Duration::from_millis(50));
        tokio::time::timeout(Duration::from_secs(5), t)
            .await
            .unwrap()
            .unwrap();
    }
}
