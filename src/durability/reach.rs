//! How far the locks this node granted may reach, kept in `node.state` before a grant
//! returns, so that the restart fence after a crash lasts as long as those locks and no
//! longer.
//!
//! Two numbers are kept (`data_dir::History`): the latest deadline any key may have,
//! on the monotonic clock of the machine's current boot (its kernel boot id names the
//! epoch; a time namespace's offset, as `unshare --time` or a container's
//! checkpoint/restore sets, is taken off, so every process on the machine counts the
//! same instant alike; a process whose offset cannot be read trusts no record), and
//! the longest time any key could still have to live at any moment of this life (the
//! longest TTL granted, or the fence the life started with). After a crash on
//! the same boot the fence waits until that deadline; after a reboot (another boot id:
//! CLOCK_MONOTONIC started again, and the downtime is unknown) it waits for the longest
//! TTL, counted from the new boot. No wall clock is involved.
//!
//! Both are reserved ahead: a grant whose deadline is within the reservation writes
//! nothing; one past it reserves `RESERVE_AHEAD_MS` beyond its own deadline first (one
//! fsync). A grant that comes within half of that of the reservation has a thread
//! write the next one meanwhile, so a stream of grants costs about two fsyncs per
//! `RESERVE_AHEAD_MS` of time, whatever their rate, and rarely waits for one. The
//! reservation is what the fence waits for, so the same number bounds how much longer
//! than needed a crashed node stays fenced.

use crate::clock::Clock;
use crate::durability::data_dir::{History, NodeDir};
use crate::protocol::Reply;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// How far past a grant's deadline a new reservation reaches. A grant within half of
/// this of the reservation renews it in the background.
pub const RESERVE_AHEAD_MS: u64 = 1000;

/// Longest-TTL reservations are rounded up to this.
pub const TTL_STEP_MS: u64 = 1000;

const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";
/// This process's time namespace's clock offsets (Linux 5.6+ with time namespaces).
const TIMENS_OFFSETS: &str = "/proc/self/timens_offsets";
/// Present when the kernel has time namespaces.
const TIME_NS: &str = "/proc/self/ns/time";

/// Mixed into the boot id to name the epoch: deadlines are recorded in the host's
/// CLOCK_MONOTONIC (a time namespace's offset taken off). Records of versions that
/// counted in the namespace's own clock name another epoch, so their first restart
/// after an upgrade takes the reboot rule rather than misread them.
const EPOCH_TAG: &[u8; 16] = b"host-monotonic/1";

/// The clock epoch deadlines are recorded in: the kernel's boot id and the offset from
/// the server clock's milliseconds to the host's CLOCK_MONOTONIC (the clock of the
/// initial time namespace, which every time namespace's CLOCK_MONOTONIC is offset
/// from: `unshare --time`, a container's checkpoint/restore). A manual clock (tests)
/// is an epoch of its own, made with the clock: nodes started on one manual clock
/// share its boot; a new process (a new clock) is another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Epoch {
    pub id: [u8; 16],
    /// epoch ms = clock ms + offset.
    offset_ms: i64,
}

impl Epoch {
    pub fn of(clock: &Clock) -> Epoch {
        if clock.is_manual() {
            return Epoch {
                id: clock.epoch_id(),
                offset_ms: 0,
            };
        }
        Epoch::of_host(
            clock,
            kernel_boot_id(),
            std::fs::read_to_string(TIMENS_OFFSETS).ok().as_deref(),
            std::path::Path::new(TIME_NS).exists(),
        )
    }

    /// The real clock's epoch from what /proc said: the boot id, this process's time
    /// namespace offsets (`timens_offsets`), and whether the kernel has time namespaces
    /// at all. What cannot be read makes a random epoch: every start then counts as a
    /// reboot, which waits for the longest TTL recorded, counted from now: the safe side.
    fn of_host(
        clock: &Clock,
        boot_id: Option<[u8; 16]>,
        timens_offsets: Option<&str>,
        kernel_has_timens: bool,
    ) -> Epoch {
        let Some(boot_id) = boot_id else {
            tracing::warn!("cannot read {BOOT_ID}: every restart counts as a reboot");
            return Epoch::unknown(clock);
        };
        let ns_offset_ms = match timens_offsets.map(monotonic_offset_ms) {
            Some(Some(ms)) => ms,
            None if !kernel_has_timens => 0,
            _ => {
                tracing::warn!(
                    "cannot read this process's CLOCK_MONOTONIC offset from {TIMENS_OFFSETS}: every restart counts as a reboot"
                );
                return Epoch::unknown(clock);
            }
        };
        let mut id = boot_id;
        for (b, t) in id.iter_mut().zip(EPOCH_TAG) {
            *b ^= t;
        }
        let host_mono_ms = (crate::clock::mono_ns() / 1_000_000) as i64 - ns_offset_ms;
        Epoch {
            id,
            // One millisecond of rounding, on the late side.
            offset_ms: host_mono_ms - clock.now_ms() as i64 + 1,
        }
    }

    /// An epoch no record can name: a start in it takes the reboot rule.
    fn unknown(clock: &Clock) -> Epoch {
        Epoch {
            id: rand::random(),
            offset_ms: (crate::clock::mono_ns() / 1_000_000) as i64 - clock.now_ms() as i64 + 1,
        }
    }

    pub fn to_epoch_ms(self, clock_ms: u64) -> u64 {
        (clock_ms as i64).saturating_add(self.offset_ms).max(0) as u64
    }

    pub fn to_clock_ms(self, epoch_ms: u64) -> u64 {
        (epoch_ms as i64).saturating_sub(self.offset_ms).max(0) as u64
    }
}

/// The `monotonic` line of `/proc/self/timens_offsets` ("monotonic SECS NANOS"), in
/// ms rounded toward minus infinity; None if it is missing or malformed.
fn monotonic_offset_ms(text: &str) -> Option<i64> {
    let line = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some("monotonic"))?;
    let mut fields = line.split_whitespace().skip(1);
    let secs: i64 = fields.next()?.parse().ok()?;
    let nanos: i64 = fields.next()?.parse().ok()?;
    if fields.next().is_some() || !(0..1_000_000_000).contains(&nanos) {
        return None;
    }
    secs.checked_mul(1000)?
        .checked_add(nanos.div_euclid(1_000_000))
}

/// The kernel's boot id (a UUID, new at every boot).
fn kernel_boot_id() -> Option<[u8; 16]> {
    let text = std::fs::read_to_string(BOOT_ID).ok()?;
    let hex: String = text.trim().chars().filter(|c| *c != '-').collect();
    if hex.len() != 32 {
        return None;
    }
    let mut id = [0u8; 16];
    for (i, b) in id.iter_mut().enumerate() {
        *b = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(id)
}

/// The durable reservation of how far granted locks reach (see the module docs). A
/// clone is the same reservation (the log's rewrite covers from its own thread).
#[derive(Clone)]
pub struct Reach {
    inner: Arc<Inner>,
}

struct Inner {
    epoch: Mutex<Epoch>,
    /// No key reaches past this (server clock ms); durable when `dir` is set.
    reach_ms: AtomicU64,
    /// No key had more than this left at any moment of this life.
    ttl_ms: AtomicU64,
    /// Serialises reservation writes.
    persist: Mutex<()>,
    /// Reservation writes (fsyncs) since the process started.
    fsyncs: AtomicU64,
    /// Set when this life's boot record could not be written: every grant is refused.
    broken: AtomicBool,
    /// A renewal is being written in the background.
    renewing: AtomicBool,
    /// Counts lives (`start`): a background renewal of an earlier life writes nothing.
    life: AtomicU64,
    dir: Option<Arc<NodeDir>>,
}

impl Reach {
    pub fn new(clock: &Clock, dir: Option<Arc<NodeDir>>) -> Reach {
        Reach {
            inner: Arc::new(Inner {
                epoch: Mutex::new(Epoch::of(clock)),
                reach_ms: AtomicU64::new(0),
                ttl_ms: AtomicU64::new(0),
                persist: Mutex::new(()),
                fsyncs: AtomicU64::new(0),
                broken: AtomicBool::new(false),
                renewing: AtomicBool::new(false),
                life: AtomicU64::new(0),
                dir,
            }),
        }
    }

    pub fn epoch(&self) -> Epoch {
        *self.inner.epoch.lock()
    }

    /// A test hook: the next boot sees another epoch, as after a reboot.
    pub fn pretend_reboot(&self) {
        self.inner.epoch.lock().id = rand::random();
    }

    /// The record this life starts with (written by the boot with the generation bump).
    pub fn history_at_boot(&self, reach_ms: u64, ttl_ms: u64) -> History {
        self.inner.history(reach_ms, ttl_ms)
    }

    /// After the boot record is durable: the reservation this life starts from.
    pub fn start(&self, reach_ms: u64, ttl_ms: u64) {
        let i = &self.inner;
        let _one_writer = i.persist.lock();
        i.life.fetch_add(1, Ordering::SeqCst);
        i.reach_ms.store(reach_ms, Ordering::SeqCst);
        i.ttl_ms.store(ttl_ms, Ordering::SeqCst);
        i.broken.store(false, Ordering::SeqCst);
    }

    /// This life's boot record could not be made durable: refuse every grant.
    pub fn set_broken(&self) {
        self.inner.broken.store(true, Ordering::SeqCst);
    }

    pub fn reach_ms(&self) -> u64 {
        self.inner.reach_ms.load(Ordering::SeqCst)
    }

    pub fn ttl_ms(&self) -> u64 {
        self.inner.ttl_ms.load(Ordering::SeqCst)
    }

    pub fn fsyncs(&self) -> u64 {
        self.inner.fsyncs.load(Ordering::Relaxed)
    }

    /// Makes sure a key granted at `now_ms` until `deadline_ms` is covered by the
    /// durable reservation, writing a new one first if not. An error reply means the
    /// grant must not happen. A grant that comes within half a step of the reservation
    /// starts the next one in the background, so a steady stream of grants does not
    /// wait for fsyncs.
    pub fn cover(&self, now_ms: u64, deadline_ms: u64) -> Result<(), Reply> {
        let i = &self.inner;
        let ttl = deadline_ms.saturating_sub(now_ms);
        let reach = self.reach_ms();
        if deadline_ms <= reach && ttl <= self.ttl_ms() && !i.broken() {
            if deadline_ms.saturating_add(RESERVE_AHEAD_MS / 2) > reach {
                self.renew_in_background(deadline_ms);
            }
            return Ok(());
        }
        let _one_writer = i.persist.lock();
        if i.broken() {
            return Err(Reply::error(
                "ERR this node could not record its start in its data directory and grants nothing (see its log); restart it",
            ));
        }
        i.extend(deadline_ms, ttl).map_err(|e| {
            tracing::error!("cannot record a lock's deadline in the data directory: {e}");
            Reply::error(format!(
                "ERR cannot record the lock's deadline in the data directory: {e}"
            ))
        })
    }

    fn renew_in_background(&self, deadline_ms: u64) {
        let i = &self.inner;
        if i.dir.is_none() || i.renewing.swap(true, Ordering::SeqCst) {
            return;
        }
        let inner = self.inner.clone();
        let life = i.life.load(Ordering::SeqCst);
        let spawned = std::thread::Builder::new()
            .name("redlockd-reach".into())
            .spawn(move || {
                {
                    let _one_writer = inner.persist.lock();
                    if inner.life.load(Ordering::SeqCst) == life && !inner.broken() {
                        if let Err(e) = inner.extend(deadline_ms, 0) {
                            // The next grant past the reservation tries again itself.
                            tracing::warn!("cannot renew the deadline reservation: {e}");
                        }
                    }
                }
                inner.renewing.store(false, Ordering::SeqCst);
            });
        if spawned.is_err() {
            i.renewing.store(false, Ordering::SeqCst);
        }
    }
}

impl Inner {
    fn history(&self, reach_ms: u64, ttl_ms: u64) -> History {
        let epoch = *self.epoch.lock();
        History {
            epoch: epoch.id,
            reach_ms: epoch.to_epoch_ms(reach_ms),
            ttl_ms,
        }
    }

    fn broken(&self) -> bool {
        self.broken.load(Ordering::SeqCst)
    }

    /// Under `persist`: reserves past `deadline_ms` and `ttl` if they are not covered.
    fn extend(&self, deadline_ms: u64, ttl: u64) -> std::io::Result<()> {
        let reach = self.reach_ms.load(Ordering::SeqCst);
        let ttl_res = self.ttl_ms.load(Ordering::SeqCst);
        if deadline_ms.saturating_add(RESERVE_AHEAD_MS / 2) <= reach && ttl <= ttl_res {
            return Ok(());
        }
        let next_reach = reach.max(deadline_ms.saturating_add(RESERVE_AHEAD_MS));
        let next_ttl = ttl_res.max(ttl.div_ceil(TTL_STEP_MS).saturating_mul(TTL_STEP_MS));
        if let Some(dir) = &self.dir {
            let history = self.history(next_reach, next_ttl);
            dir.update(|s| s.history = Some(history))?;
            self.fsyncs.fetch_add(1, Ordering::Relaxed);
        }
        self.reach_ms.store(next_reach, Ordering::SeqCst);
        self.ttl_ms.store(next_ttl, Ordering::SeqCst);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_boot_id_reads_as_sixteen_bytes() {
        if let Ok(text) = std::fs::read_to_string(BOOT_ID) {
            let id = kernel_boot_id().expect("a UUID");
            let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
            assert_eq!(hex, text.trim().replace('-', ""));
            assert_eq!(kernel_boot_id(), Some(id), "stable within a boot");
        }
    }

    #[test]
    fn the_monotonic_offset_is_read_from_timens_offsets() {
        let text = "monotonic        3600         0\nboottime            0         0\n";
        assert_eq!(monotonic_offset_ms(text), Some(3_600_000));
        assert_eq!(
            monotonic_offset_ms("boottime 0 0\nmonotonic -5 500000000\n"),
            Some(-4_500)
        );
        assert_eq!(monotonic_offset_ms("monotonic 1 2 3\n"), None);
        assert_eq!(monotonic_offset_ms("monotonic 1 1000000000\n"), None);
        assert_eq!(monotonic_offset_ms("monotonic x 0\n"), None);
        assert_eq!(monotonic_offset_ms("boottime 0 0\n"), None);
    }

    /// Deadlines are counted in the host's CLOCK_MONOTONIC: a process in a time
    /// namespace 3600 s ahead counts the same instant as one outside it, and where the
    /// offset cannot be read no record is trusted (a random epoch).
    #[test]
    fn a_time_namespaces_offset_is_taken_off_and_an_unknown_one_trusts_nothing() {
        let clock = Clock::real();
        let id = [7u8; 16];
        let host = Epoch::of_host(
            &clock,
            Some(id),
            Some("monotonic 0 0\nboottime 0 0\n"),
            true,
        );
        let ahead = Epoch::of_host(
            &clock,
            Some(id),
            Some("monotonic 3600 0\nboottime 0 0\n"),
            true,
        );
        assert_eq!(host.id, ahead.id, "one boot");
        assert_ne!(
            host.id, id,
            "not the bare boot id: older records named that"
        );
        let shift = host.offset_ms - ahead.offset_ms;
        assert!((3_599_998..=3_600_002).contains(&shift), "{shift}");
        let no_timens = Epoch::of_host(&clock, Some(id), None, false);
        assert_eq!(no_timens.id, host.id, "a kernel without time namespaces");
        for unsure in [
            Epoch::of_host(&clock, Some(id), None, true),
            Epoch::of_host(&clock, Some(id), Some("garbage"), true),
            Epoch::of_host(&clock, None, Some("monotonic 0 0\n"), true),
        ] {
            assert_ne!(unsure.id, host.id);
        }
    }

    /// With the real clock, a deadline is recorded in the host's CLOCK_MONOTONIC
    /// milliseconds (this test runs outside any time namespace with an offset; rounded
    /// late by at most a millisecond or two), and reads back exactly.
    #[test]
    fn the_real_clocks_epoch_is_clock_monotonic() {
        let clock = Clock::real();
        let epoch = Epoch::of(&clock);
        for _ in 0..100 {
            let before = crate::clock::mono_ns() / 1_000_000;
            let now = clock.now_ms();
            let after = crate::clock::mono_ns() / 1_000_000;
            let at = epoch.to_epoch_ms(now);
            assert!(before <= at + 1 && at <= after + 2, "{before} {at} {after}");
            assert_eq!(epoch.to_clock_ms(at), now);
        }
    }

    /// Waits (bounded) for a background renewal to finish.
    fn settled(r: &Reach) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while r.inner.renewing.load(Ordering::SeqCst) {
            assert!(std::time::Instant::now() < deadline, "renewal never ended");
            std::thread::yield_now();
        }
    }

    /// The reservation's exact arithmetic: a grant past it reserves its deadline + 1 s
    /// and its TTL rounded up to whole seconds, durably (one fsync); a grant within
    /// half a second of it renews it in the background, one further off does not.
    #[test]
    fn reservations_reach_a_second_past_the_grant_and_renew_ahead() {
        let p = std::env::temp_dir().join(format!("redlockd-unit-reach-{}", rand::random::<u64>()));
        let dir = Arc::new(NodeDir::open(&p).unwrap());
        let r = Reach::new(&Clock::manual(), Some(dir.clone()));
        r.start(1000, 0);
        let state = |r: &Reach| (r.reach_ms(), r.ttl_ms(), r.fsyncs());
        r.cover(1000, 3000).unwrap();
        assert_eq!(state(&r), (4000, 2000, 1));
        let h = dir.state().history.unwrap();
        assert_eq!(
            (h.reach_ms, h.ttl_ms),
            (4000, 2000),
            "durable before the grant"
        );
        // Exactly half a second short of the reservation: nothing to do.
        r.cover(1500, 3500).unwrap();
        settled(&r);
        assert_eq!(state(&r), (4000, 2000, 1));
        // Closer: renewed in the background, one second past this grant.
        r.cover(1501, 3501).unwrap();
        settled(&r);
        assert_eq!(state(&r), (4501, 2000, 2));
        // Covered with half a second to spare: nothing is written.
        r.inner.extend(4001, 0).unwrap();
        assert_eq!(state(&r), (4501, 2000, 2));
        // A longer TTL than reserved, within the reach: the TTL is renewed.
        r.cover(1600, 3700).unwrap();
        assert_eq!(state(&r), (4700, 3000, 3));
        r.cover(1700, 4300).unwrap();
        settled(&r);
        assert_eq!(state(&r), (5300, 3000, 4));
        assert!(dir.state().history.unwrap().reach_ms >= 5300);
        drop(dir);
        std::fs::remove_dir_all(&p).unwrap();
    }

    /// A background renewal started in an earlier life (before a crash-restart) writes
    /// nothing once the new life has its own record.
    #[test]
    fn a_renewal_from_an_earlier_life_writes_nothing() {
        let p = std::env::temp_dir().join(format!("redlockd-unit-reach-{}", rand::random::<u64>()));
        let dir = Arc::new(NodeDir::open(&p).unwrap());
        let r = Reach::new(&Clock::manual(), Some(dir.clone()));
        r.start(1000, 0);
        r.cover(1000, 3000).unwrap();
        {
            let _writer = r.inner.persist.lock();
            r.cover(1900, 3900).unwrap();
            // The renewal waits for the lock; meanwhile a new life starts.
            r.inner.life.fetch_add(1, Ordering::SeqCst);
        }
        settled(&r);
        assert_eq!((r.reach_ms(), r.fsyncs()), (4000, 1));
        drop(dir);
        std::fs::remove_dir_all(&p).unwrap();
    }

    #[test]
    fn grants_within_the_reservation_write_nothing() {
        let p = std::env::temp_dir().join(format!("redlockd-unit-reach-{}", rand::random::<u64>()));
        let dir = Arc::new(NodeDir::open(&p).unwrap());
        let clock = Clock::manual();
        let r = Reach::new(&clock, Some(dir.clone()));
        r.start(1000, 0);
        let now = 1000;
        // A stream of 1 s grants, one per ms of time, for 10 s.
        for t in 0..10_000 {
            r.cover(now + t, now + t + 1000).unwrap();
        }
        while r.inner.renewing.load(Ordering::SeqCst) {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let fsyncs = r.fsyncs();
        assert!(
            (10_000 / RESERVE_AHEAD_MS..=4 * 10_000 / RESERVE_AHEAD_MS + 2).contains(&fsyncs),
            "{fsyncs}"
        );
        let h = dir.state().history.unwrap();
        assert_eq!(h.ttl_ms, 1000);
        assert!(h.reach_ms >= now + 9_999 + 1000, "{h:?}");
        assert!(h.reach_ms <= now + 9_999 + 1000 + RESERVE_AHEAD_MS, "{h:?}");
        r.set_broken();
        assert!(
            r.cover(now, now + 1).is_err(),
            "a broken record refuses grants"
        );
        drop(dir);
        std::fs::remove_dir_all(&p).unwrap();
    }
}
