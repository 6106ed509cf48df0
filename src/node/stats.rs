//! What an operator reads about commands: per-command counters (INFO commandstats),
//! latency histograms (LATENCY HISTOGRAM, the metrics endpoint), the slow log
//! (SLOWLOG) and the latency monitor's events (LATENCY LATEST / HISTORY), plus the
//! settings CONFIG SET changes for them while the server runs.

use super::ClientInfo;
use crate::clock::Clock;
use crate::commands::command_table::{flags, Spec};
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};

/// Histogram buckets: bucket `i` counts durations in (2^(i-1), 2^i] microseconds
/// (bucket 0: up to 1 us); the last one takes everything longer.
pub const BUCKETS: usize = 32;

/// Most arguments a slow-log entry keeps, and most bytes of each (as Redis).
const SLOWLOG_MAX_ARGS: usize = 32;
const SLOWLOG_MAX_ARG_LEN: usize = 128;

/// Samples kept per latency event (Redis's LATENCY_TS_LEN).
const LATENCY_SAMPLES: usize = 160;

/// Per-command counters and the server-wide ones.
pub struct Stats {
    pub total_connections: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub expired_keys: AtomicU64,
    /// Failed AUTH / HELLO AUTH attempts (INFO's `acl_access_denied_auth`).
    pub auth_failures: AtomicU64,
    /// At most one log line a second about failed AUTHs (an attacker controls how
    /// many there are).
    pub auth_log: LogLimit,
    /// Commands refused by ACL rules, by what was refused (INFO's
    /// acl_access_denied_cmd / _key / _channel).
    pub acl_denied_cmd: AtomicU64,
    pub acl_denied_key: AtomicU64,
    pub acl_denied_channel: AtomicU64,
    /// The counters of threads without a slot of their own (`alloc::thread_slot`),
    /// changed with atomic adds; and every command's refusals.
    per_command: Vec<CommandStat>,
    /// Per slot, the counters the thread owning it changes with a plain load and
    /// store (an atomic add is a locked instruction, a full barrier, and a script's
    /// EVALSHA records three commands); made on the slot's first command.
    by_thread: Box<[std::sync::OnceLock<Box<[CommandStat]>>]>,
    pub slowlog: SlowLog,
    pub latency: LatencyMonitor,
    pub locks: LockStats,
}

/// A log line that events outside the server's control (failed AUTHs, refused
/// metrics connections) would otherwise repeat without bound: at most one a second,
/// saying how many events it stands for.
#[derive(Default)]
pub struct LogLimit {
    /// Monotonic ms (the real clock: this is about log volume) before which no line
    /// is written.
    next_ms: AtomicU64,
    /// Events since the last line written.
    pending: AtomicU64,
}

impl LogLimit {
    const INTERVAL_MS: u64 = 1000;

    /// Counts one event at `now_ms`; `Some(n)` when a line is due now, standing for
    /// `n` events (this one and those not written since the last line).
    pub fn event(&self, now_ms: u64) -> Option<u64> {
        self.pending.fetch_add(1, Ordering::Relaxed);
        let next = self.next_ms.load(Ordering::Relaxed);
        if now_ms < next
            || self
                .next_ms
                .compare_exchange(
                    next,
                    now_ms + Self::INTERVAL_MS,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_err()
        {
            return None;
        }
        Some(self.pending.swap(0, Ordering::Relaxed))
    }
}

/// Why a command was refused before it ran.
#[derive(Clone, Copy)]
pub enum Refusal {
    /// The restart fence (TRYAGAIN).
    Fence,
    /// Used memory above --maxmemory (OOM).
    Oom,
    /// The user's ACL rules (NOPERM).
    Noperm,
}

/// What an operator of a lock service asks first (the metrics endpoint).
#[derive(Default)]
pub struct LockStats {
    /// SET ... NX that created the key.
    pub grants: AtomicU64,
    /// SET ... NX on a key that exists: the lock is held elsewhere.
    pub held: AtomicU64,
    /// TTLs refused for exceeding --max-ttl.
    pub above_max_ttl: AtomicU64,
    /// Writes refused by the restart fence.
    pub fenced: AtomicU64,
    /// Commands refused above --maxmemory (OOM).
    pub oom: AtomicU64,
    /// Commands refused by the user's ACL rules (NOPERM).
    pub noperm: AtomicU64,
    /// Writes refused because their key is a delayed lock (`--lock-delay`).
    pub lock_delayed: AtomicU64,
}

/// One command's counters (in one shard of them, see `Stats::by_thread`). Its calls
/// are the sum of its histogram, with no counter of their own.
#[derive(Default)]
struct CommandStat {
    usec: AtomicU64,
    rejected: AtomicU64,
    failed: AtomicU64,
    histogram: [AtomicU64; BUCKETS],
}

/// One command's counters, summed over the shards (`Stats::command`).
pub struct CommandTotals {
    pub usec: u64,
    pub rejected: u64,
    pub failed: u64,
    /// Calls per bucket (not cumulative), bucket `i` ending at 2^i microseconds.
    pub histogram: [u64; BUCKETS],
}

impl CommandTotals {
    /// Calls that ran (refused ones are `rejected`).
    pub fn calls(&self) -> u64 {
        self.histogram.iter().sum()
    }
}

/// Adds to a counter only this thread writes (see `Stats::by_thread`).
fn add_owned(c: &AtomicU64, n: u64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

/// The histogram bucket of a duration.
pub fn bucket(usec: u64) -> usize {
    if usec <= 1 {
        0
    } else {
        ((64 - (usec - 1).leading_zeros()) as usize).min(BUCKETS - 1)
    }
}

impl Stats {
    pub fn new(commands: usize) -> Stats {
        Stats {
            total_connections: AtomicU64::new(0),
            rejected_connections: AtomicU64::new(0),
            auth_failures: AtomicU64::new(0),
            auth_log: LogLimit::default(),
            acl_denied_cmd: AtomicU64::new(0),
            acl_denied_key: AtomicU64::new(0),
            acl_denied_channel: AtomicU64::new(0),
            expired_keys: AtomicU64::new(0),
            per_command: (0..commands).map(|_| CommandStat::default()).collect(),
            by_thread: (0..crate::alloc::SHARDS)
                .map(|_| std::sync::OnceLock::new())
                .collect(),
            slowlog: SlowLog::new(),
            latency: LatencyMonitor::default(),
            locks: LockStats::default(),
        }
    }

    pub fn record(&self, index: usize, usec: u64, failed: bool) {
        if let Some(slot) = crate::alloc::thread_slot() {
            let commands = self.per_command.len();
            let s = &self.by_thread[slot]
                .get_or_init(|| (0..commands).map(|_| CommandStat::default()).collect())[index];
            add_owned(&s.usec, usec);
            add_owned(&s.histogram[bucket(usec)], 1);
            if failed {
                add_owned(&s.failed, 1);
            }
            return;
        }
        let s = &self.per_command[index];
        s.usec.fetch_add(usec, Ordering::Relaxed);
        s.histogram[bucket(usec)].fetch_add(1, Ordering::Relaxed);
        if failed {
            s.failed.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A command refused before it ran (INFO's rejected_calls), and why.
    pub fn record_rejected(&self, index: usize, why: Refusal) {
        let reason = match why {
            Refusal::Fence => &self.locks.fenced,
            Refusal::Oom => &self.locks.oom,
            Refusal::Noperm => &self.locks.noperm,
        };
        reason.fetch_add(1, Ordering::Relaxed);
        self.per_command_rejected(index);
    }

    /// Counts a refused call of command `index` (commandstats' rejected_calls); the
    /// reason is counted by the caller.
    pub fn per_command_rejected(&self, index: usize) {
        self.per_command[index]
            .rejected
            .fetch_add(1, Ordering::Relaxed);
    }

    /// INFO's total_commands_processed: every command run or refused since the last
    /// CONFIG RESETSTAT (as Redis, which resets it too). Summed when asked rather than
    /// counted per command: one counter every worker adds to is a contended line.
    pub fn total_commands(&self) -> u64 {
        (0..self.per_command.len())
            .map(|i| {
                let c = self.command(i);
                c.calls() + c.rejected
            })
            .sum()
    }

    /// One command's counters, summed over the shards.
    pub fn command(&self, index: usize) -> CommandTotals {
        let mut t = CommandTotals {
            usec: 0,
            rejected: 0,
            failed: 0,
            histogram: [0; BUCKETS],
        };
        let owned = self
            .by_thread
            .iter()
            .filter_map(|s| s.get())
            .map(|s| &s[index]);
        for s in std::iter::once(&self.per_command[index]).chain(owned) {
            t.usec += s.usec.load(Ordering::Relaxed);
            t.rejected += s.rejected.load(Ordering::Relaxed);
            t.failed += s.failed.load(Ordering::Relaxed);
            for (sum, b) in t.histogram.iter_mut().zip(&s.histogram) {
                *sum += b.load(Ordering::Relaxed);
            }
        }
        t
    }

    /// CONFIG RESETSTAT: the counters and histograms (not the slow log, as in Redis).
    /// A command recorded on another thread at this very moment may write its shard's
    /// old count back over the zero (its load and store are not one step): the reset
    /// is exact for what finished before it.
    pub fn reset(&self) {
        let owned = self.by_thread.iter().filter_map(|s| s.get());
        for s in self.per_command.iter().chain(owned.flat_map(|s| s.iter())) {
            s.usec.store(0, Ordering::Relaxed);
            s.rejected.store(0, Ordering::Relaxed);
            s.failed.store(0, Ordering::Relaxed);
            for b in &s.histogram {
                b.store(0, Ordering::Relaxed);
            }
        }
    }

    /// After a network command (not a command a script calls: the script is the
    /// command): the slow log and the latency monitor.
    /// Reads the wall clock only for a command that is logged.
    pub fn observe(
        &self,
        spec: &Spec,
        args: &[Bytes],
        usec: u64,
        client: &ClientInfo,
        clock: &Clock,
    ) {
        self.slowlog.observe(spec, args, usec, client, clock);
        self.latency.observe(spec, usec, clock);
    }
}

/// One slow-log entry, arguments already trimmed.
pub struct SlowEntry {
    pub id: u64,
    pub unix_s: i64,
    pub usec: u64,
    pub args: Vec<Bytes>,
    pub addr: String,
    pub name: Bytes,
}

/// Commands that took at least `slower_than_us` (negative: off), newest first, at
/// most `max_len`.
pub struct SlowLog {
    entries: Mutex<VecDeque<SlowEntry>>,
    next_id: AtomicU64,
    pub slower_than_us: AtomicI64,
    pub max_len: AtomicUsize,
}

impl SlowLog {
    fn new() -> SlowLog {
        SlowLog {
            entries: Mutex::new(VecDeque::new()),
            next_id: AtomicU64::new(0),
            slower_than_us: AtomicI64::new(10_000),
            max_len: AtomicUsize::new(128),
        }
    }

    fn observe(&self, spec: &Spec, args: &[Bytes], usec: u64, client: &ClientInfo, clock: &Clock) {
        let threshold = self.slower_than_us.load(Ordering::Relaxed);
        // QUIT is answered before it is a command in Redis: never logged.
        if threshold < 0 || (usec as i64) < threshold || spec.name == "quit" {
            return;
        }
        let entry = SlowEntry {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            unix_s: clock.wall_ms().div_euclid(1000),
            usec,
            args: trim_args(spec, args),
            addr: client.addr.to_string(),
            name: client.name.lock().clone().unwrap_or_default(),
        };
        let max = self.max_len.load(Ordering::Relaxed);
        let mut entries = self.entries.lock();
        entries.push_front(entry);
        entries.truncate(max);
    }

    pub fn len(&self) -> usize {
        self.entries.lock().len()
    }

    pub fn reset(&self) {
        self.entries.lock().clear();
    }

    /// The newest `count` entries (all when `None`), newest first.
    pub fn newest<R>(&self, count: Option<usize>, f: impl Fn(&SlowEntry) -> R) -> Vec<R> {
        let entries = self.entries.lock();
        entries
            .iter()
            .take(count.unwrap_or(usize::MAX))
            .map(f)
            .collect()
    }

    /// Applies a new `max_len` at once (CONFIG SET slowlog-max-len).
    pub fn set_max_len(&self, max: usize) {
        self.max_len.store(max, Ordering::Relaxed);
        self.entries.lock().truncate(max);
    }
}

/// What a slow-log entry keeps of the arguments: at most 32 (the last saying how many
/// more there were), each at most 128 bytes (saying how many more there were).
/// Secrets (passwords, ACL rules: `crate::acl::redact`) are kept as `(redacted)`.
fn trim_args(spec: &Spec, args: &[Bytes]) -> Vec<Bytes> {
    let secrets = crate::acl::redact::has_secrets(spec);
    let keep = if args.len() > SLOWLOG_MAX_ARGS {
        SLOWLOG_MAX_ARGS - 1
    } else {
        args.len()
    };
    let mut out: Vec<Bytes> = args[..keep]
        .iter()
        .enumerate()
        .map(|(i, a)| {
            if secrets && crate::acl::redact::is_secret(spec, args, i) {
                Bytes::from_static(crate::acl::redact::REDACTED)
            } else if a.len() > SLOWLOG_MAX_ARG_LEN {
                let mut t = a[..SLOWLOG_MAX_ARG_LEN].to_vec();
                t.extend_from_slice(
                    format!("... ({} more bytes)", a.len() - SLOWLOG_MAX_ARG_LEN).as_bytes(),
                );
                Bytes::from(t)
            } else {
                // Copied, not cloned: a clone would keep the request's whole read
                // buffer alive (a 500 MB SET's buffer, for as long as the entry lives).
                Bytes::copy_from_slice(a)
            }
        })
        .collect();
    if keep < args.len() {
        out.push(Bytes::from(format!(
            "... ({} more arguments)",
            args.len() - keep
        )));
    }
    out
}

/// Redis's latency monitor: with `threshold_ms` > 0, every command that took at least
/// that long is a sample of the event "command" (or "fast-command" for commands
/// flagged fast); samples in the same second keep the larger.
#[derive(Default)]
pub struct LatencyMonitor {
    pub threshold_ms: AtomicU64,
    events: Mutex<BTreeMap<&'static str, LatencyEvent>>,
}

#[derive(Default)]
pub struct LatencyEvent {
    /// (unix seconds, ms), oldest first.
    pub samples: VecDeque<(i64, u64)>,
    pub max_ms: u64,
}

impl LatencyMonitor {
    fn observe(&self, spec: &Spec, usec: u64, clock: &Clock) {
        let threshold = self.threshold_ms.load(Ordering::Relaxed);
        let ms = usec / 1000;
        if threshold == 0 || ms < threshold {
            return;
        }
        let name = if spec.flags & flags::FAST != 0 {
            "fast-command"
        } else {
            "command"
        };
        let second = clock.wall_ms().div_euclid(1000);
        let mut events = self.events.lock();
        let event = events.entry(name).or_default();
        match event.samples.back_mut() {
            Some((t, v)) if *t == second => *v = (*v).max(ms),
            _ => {
                event.samples.push_back((second, ms));
                if event.samples.len() > LATENCY_SAMPLES {
                    event.samples.pop_front();
                }
            }
        }
        event.max_ms = event.max_ms.max(ms);
    }

    /// Runs `f` over the events (name order).
    pub fn with_events<R>(&self, f: impl FnOnce(&BTreeMap<&'static str, LatencyEvent>) -> R) -> R {
        f(&self.events.lock())
    }

    /// Forgets the named events (all when empty); returns how many existed.
    pub fn reset(&self, names: &[Bytes]) -> usize {
        let mut events = self.events.lock();
        if names.is_empty() {
            let n = events.len();
            events.clear();
            return n;
        }
        let mut n = 0;
        for name in names {
            let name = String::from_utf8_lossy(name).to_ascii_lowercase();
            if events.remove(name.as_str()).is_some() {
                n += 1;
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Commands recorded on several threads (each in its own shard) add up, and
    /// CONFIG RESETSTAT clears every shard.
    #[test]
    fn counts_from_every_thread_add_up() {
        let stats = std::sync::Arc::new(Stats::new(3));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let stats = stats.clone();
                std::thread::spawn(move || {
                    for i in 0..1000 {
                        stats.record(1, 3, i % 10 == 0);
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        stats.record(2, 1, false);
        let c = stats.command(1);
        assert_eq!((c.calls(), c.usec, c.failed), (4000, 12000, 400));
        assert_eq!(c.histogram[bucket(3)], 4000);
        assert_eq!(stats.total_commands(), 4001);
        stats.reset();
        assert_eq!(stats.total_commands(), 0);
        assert_eq!(stats.command(1).usec, 0);
    }

    #[test]
    fn buckets_double() {
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(1), 0);
        assert_eq!(bucket(2), 1);
        assert_eq!(bucket(3), 2);
        assert_eq!(bucket(4), 2);
        assert_eq!(bucket(5), 3);
        assert_eq!(bucket(1024), 10);
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn slow_log_trims_like_redis() {
        let args: Vec<Bytes> = (0..40).map(|i| Bytes::from(i.to_string())).collect();
        let rpush = crate::commands::command_table::lookup(b"rpush").unwrap();
        let t = trim_args(rpush, &args);
        assert_eq!(t.len(), 32);
        assert_eq!(&t[30][..], b"30");
        assert_eq!(&t[31][..], b"... (9 more arguments)");
        let long = vec![Bytes::from(vec![b'x'; 130])];
        let t = trim_args(rpush, &long);
        assert_eq!(t[0].len(), 128 + "... (2 more bytes)".len());
        assert!(t[0].ends_with(b"... (2 more bytes)"));
    }
}
