//! The restart fence and the max-TTL rule (Redlock's "delayed restart").
//!
//! A node that restarts has forgotten its locks. If it granted a lock before the crash,
//! a second client could now win a majority with it. Redlock's answer is to keep a
//! restarted node from granting anything until every lock it could have granted has
//! expired. How long that is comes from what the data directory recorded before each
//! grant (`reach`), by the first rule that applies (`FenceRule`): the latest recorded
//! deadline on the same boot, the longest recorded TTL after a reboot, nothing for a
//! node declared new, and `max_ttl` (every TTL is bounded by it) + margin when nothing
//! usable is recorded. While the fence is up, every command that could create a key or
//! lengthen a TTL is refused with TRYAGAIN. The fence runs on the monotonic clock, so a
//! wall-clock step cannot end it.

use crate::protocol::Reply;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Which rule chose the fence at the last boot (INFO fence `fence_rule`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FenceRule {
    /// `--restart-delay 0`: no fence, ever.
    Off,
    /// A brand-new node (`redlockd init`, or a test cluster's fresh node): it granted
    /// nothing before.
    DeclaredNew,
    /// A clean-shutdown snapshot was restored: only what was left of an earlier fence.
    Snapshot,
    /// A crash on the same boot: until the latest recorded deadline + margin.
    SameBoot,
    /// A crash and a reboot: the longest recorded TTL + margin, from boot.
    Reboot,
    /// Nothing usable recorded (missing, damaged, copied, or a memory-only node):
    /// max-ttl + margin, or --restart-delay.
    NoHistory,
}

impl FenceRule {
    pub fn name(self) -> &'static str {
        match self {
            FenceRule::Off => "off",
            FenceRule::DeclaredNew => "declared-new",
            FenceRule::Snapshot => "snapshot",
            FenceRule::SameBoot => "same-boot",
            FenceRule::Reboot => "reboot",
            FenceRule::NoHistory => "no-history",
        }
    }
}

#[derive(Debug)]
pub struct Fence {
    /// Monotonic ms at which the fence lifts (0 when it is off).
    until_ms: AtomicU64,
    /// The rule and the length (ms) chosen at the last boot.
    chosen: Mutex<(FenceRule, u64)>,
    /// The fence without any usable record: max-ttl + margin, or --restart-delay; 0
    /// turns the fence off.
    delay_ms: AtomicU64,
    max_ttl_ms: AtomicU64,
    /// With the append-only log on: TTLs above this make a key durable (logged, not
    /// forgotten by a crash), so neither max-ttl nor the fence bounds them. 0: the log
    /// is off and max-ttl bounds every TTL.
    durable_above_ms: AtomicU64,
    require_ttl: bool,
}

impl Fence {
    pub fn new(now_ms: u64, delay_ms: u64, max_ttl_ms: u64, require_ttl: bool) -> Fence {
        let fence = Fence {
            until_ms: AtomicU64::new(0),
            chosen: Mutex::new((FenceRule::NoHistory, delay_ms)),
            delay_ms: AtomicU64::new(delay_ms),
            max_ttl_ms: AtomicU64::new(max_ttl_ms),
            durable_above_ms: AtomicU64::new(0),
            require_ttl,
        };
        fence.raise(now_ms, delay_ms, FenceRule::NoHistory);
        fence
    }

    /// Raises the fence for `len_ms` from `now_ms` (0: none), as `rule` chose.
    pub fn raise(&self, now_ms: u64, len_ms: u64, rule: FenceRule) {
        let until = if len_ms == 0 { 0 } else { now_ms + len_ms };
        *self.chosen.lock() = (rule, len_ms);
        self.until_ms.store(until, Ordering::Relaxed);
    }

    /// The rule and length chosen at the last boot.
    pub fn chosen(&self) -> (FenceRule, u64) {
        *self.chosen.lock()
    }

    /// Milliseconds until the fence lifts, or 0 when it is not active.
    pub fn remaining_ms(&self, now_ms: u64) -> u64 {
        self.until_ms.load(Ordering::Relaxed).saturating_sub(now_ms)
    }

    /// Monotonic ms at which the fence lifts (0 when off).
    pub fn until_ms(&self) -> u64 {
        self.until_ms.load(Ordering::Relaxed)
    }

    /// The fence without a usable record (0: the fence is off).
    pub fn delay_ms(&self) -> u64 {
        self.delay_ms.load(Ordering::Relaxed)
    }

    pub fn max_ttl_ms(&self) -> u64 {
        self.max_ttl_ms.load(Ordering::Relaxed)
    }

    /// Another max-ttl and no-record fence, as a new process with other flags would
    /// have (the test backend's restarts between lives).
    pub fn reconfigure(&self, max_ttl_ms: u64, delay_ms: u64) {
        self.max_ttl_ms.store(max_ttl_ms, Ordering::Relaxed);
        self.delay_ms.store(delay_ms, Ordering::Relaxed);
    }

    /// With the log on, TTLs above `ms` are durable (see `durable_above_ms`); 0: off.
    pub fn set_durable_above(&self, ms: u64) {
        self.durable_above_ms.store(ms, Ordering::Relaxed);
    }

    /// Whether a TTL of `ttl_ms` makes a key durable (the log is on and it is above
    /// the memory-only threshold): a crash does not forget it.
    pub fn is_durable_ttl(&self, ttl_ms: i64) -> bool {
        let above = self.durable_above_ms.load(Ordering::Relaxed);
        above > 0 && ttl_ms > above as i64
    }

    pub fn require_ttl(&self) -> bool {
        self.require_ttl
    }

    /// Refuses a write that could create a key or lengthen a TTL while the fence is up.
    pub fn check_write(&self, now_ms: u64) -> Result<(), Reply> {
        let left = self.remaining_ms(now_ms);
        if left == 0 {
            return Ok(());
        }
        let hint = if self.chosen().0 == FenceRule::NoHistory {
            " (its data directory holds no record of what it granted; a brand-new node is declared with `redlockd init --dir DIR` before its first start)"
        } else {
            ""
        };
        Err(Reply::error(format!(
            "TRYAGAIN restart fence: this node restarted and may have granted locks that are still held; it refuses writes for another {left} ms{hint}"
        )))
    }

    /// Refuses a TTL longer than max-ttl.
    pub fn check_ttl(&self, ttl_ms: i64) -> Result<(), Reply> {
        let max = self.max_ttl_ms();
        if ttl_ms > max as i64 && !self.is_durable_ttl(ttl_ms) {
            return Err(Reply::error(format!(
                "ERR TTL of {ttl_ms} ms is above this server's max-ttl of {max} ms (raise --max-ttl)"
            )));
        }
        Ok(())
    }

    /// Refuses a write that would leave a key without a TTL, when `--require-ttl` is on.
    pub fn check_has_ttl(&self) -> Result<(), Reply> {
        if self.require_ttl {
            return Err(Reply::error(
                "ERR this server runs with --require-ttl: every key needs a TTL (use PX, EX, PXAT or EXAT)",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fence_refuses_writes_until_delay_passes() {
        let f = Fence::new(1000, 500, 400, false);
        let err = f.check_write(1200).unwrap_err();
        let crate::protocol::Reply::Error(e) = err else {
            panic!("an error reply: {err:?}");
        };
        let text = String::from_utf8_lossy(&e).to_string();
        assert!(text.starts_with("TRYAGAIN "), "{text}");
        assert!(text.contains("another 300 ms "), "{text}");
        assert!(text.contains("redlockd init --dir"), "{text}");
        assert!(f.check_write(1500).is_ok());
    }

    #[test]
    fn zero_delay_means_no_fence() {
        let f = Fence::new(1000, 0, 400, false);
        assert!(f.check_write(1000).is_ok());
        assert_eq!(f.remaining_ms(1000), 0);
    }

    #[test]
    fn ttl_above_max_is_refused() {
        let f = Fence::new(0, 0, 30_000, false);
        assert!(f.check_ttl(30_000).is_ok());
        assert!(f.check_ttl(30_001).is_err());
    }
}

/// The fence as commands meet it, on keys that exist while it is up (put there behind
/// its back, as keys from before a restart would be): writes refused, reads and
/// releases allowed.
#[cfg(test)]
mod with_commands {
    use crate::config::Config;
    use crate::inmem::Session;
    use crate::store::{Entry, Value};
    use bytes::{Bytes, BytesMut};
    use std::time::Duration;

    fn fenced() -> Session {
        Session::new(Config {
            restart_delay: Some(Duration::from_secs(31)),
            ..Config::for_tests()
        })
    }

    fn preload(s: &Session, key: &str, deadline_ms: Option<u64>) {
        s.shared().keyspace.db(0).insert(
            key.as_bytes(),
            Entry {
                value: Value::Str(Bytes::from_static(b"v")),
                deadline_ms,
            },
        );
    }

    fn cmd(s: &mut Session, args: &[&str]) -> String {
        let mut out = BytesMut::new();
        s.call(args, &mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    #[test]
    fn writes_during_the_fence_get_tryagain_with_the_ms_left() {
        let mut s = fenced();
        preload(&s, "k", Some(s.clock().now_ms() + 10_000));
        s.clock().advance(Duration::from_millis(1000));
        let want = "-TRYAGAIN restart fence: this node restarted and may have granted locks that are still held; it refuses writes for another 30000 ms (its data directory holds no record of what it granted; a brand-new node is declared with `redlockd init --dir DIR` before its first start)\r\n";
        for args in [
            &["SET", "lock", "t", "NX", "PX", "1000"][..],
            &["SETNX", "lock", "t"],
            &["SETEX", "lock", "1", "t"],
            &["PSETEX", "lock", "1", "t"],
            &["INCR", "n"],
            &["INCRBY", "n", "2"],
            &["DECR", "n"],
            &["DECRBY", "n", "2"],
            &["EXPIRE", "k", "20"],
            &["PEXPIRE", "k", "20000"],
            &["EXPIREAT", "k", "1"],
            &["PEXPIREAT", "k", "1"],
            &["PERSIST", "k"],
            &["MSET", "a", "1", "b", "2"],
            &["RENAME", "k", "k2"],
            &["RENAMENX", "k", "k2"],
            &["COPY", "k", "k2"],
            &["MOVE", "k", "1"],
            &["GETEX", "k", "PX", "20000"],
            &["GETEX", "k", "PERSIST"],
            &["GETSET", "lock", "t"],
            &["MSETNX", "a", "1", "b", "2"],
            &["INCRBYFLOAT", "n", "1.5"],
            &["APPEND", "k", "x"],
            &["SETRANGE", "k", "0", "x"],
            &["ZUNIONSTORE", "d", "1", "k"],
            &["ZINTERSTORE", "d", "1", "k"],
            &["ZDIFFSTORE", "d", "1", "k"],
        ] {
            assert_eq!(cmd(&mut s, args), want, "{args:?}");
        }
        assert_eq!(cmd(&mut s, &["DBSIZE"]), ":1\r\n");
        assert_eq!(cmd(&mut s, &["PTTL", "k"]), ":9000\r\n");
    }

    #[test]
    fn reads_releases_and_handshakes_work_during_the_fence() {
        let mut s = fenced();
        preload(&s, "k", Some(s.clock().now_ms() + 10_000));
        preload(&s, "other", None);
        assert_eq!(cmd(&mut s, &["PING"]), "+PONG\r\n");
        assert!(cmd(&mut s, &["HELLO", "3"]).starts_with("%7\r\n"));
        cmd(&mut s, &["HELLO", "2"]);
        assert_eq!(cmd(&mut s, &["GET", "k"]), "$1\r\nv\r\n");
        assert_eq!(cmd(&mut s, &["GETEX", "k"]), "$1\r\nv\r\n");
        assert_eq!(cmd(&mut s, &["MGET", "k"]), "*1\r\n$1\r\nv\r\n");
        assert_eq!(cmd(&mut s, &["EXISTS", "k"]), ":1\r\n");
        assert_eq!(cmd(&mut s, &["PTTL", "k"]), ":10000\r\n");
        assert_eq!(cmd(&mut s, &["TTL", "k"]), ":10\r\n");
        assert_eq!(cmd(&mut s, &["TYPE", "k"]), "+string\r\n");
        assert_eq!(cmd(&mut s, &["STRLEN", "k"]), ":1\r\n");
        assert_eq!(cmd(&mut s, &["GETRANGE", "k", "0", "-1"]), "$1\r\nv\r\n");
        assert!(cmd(&mut s, &["INFO"]).contains("fence_active:1\r\n"));
        assert_eq!(cmd(&mut s, &["DEL", "k"]), ":1\r\n");
        assert_eq!(cmd(&mut s, &["GETDEL", "other"]), "$1\r\nv\r\n");
        assert_eq!(cmd(&mut s, &["DBSIZE"]), ":0\r\n");
    }

    #[test]
    fn require_ttl_refuses_keepttl_on_a_key_without_ttl() {
        let mut s = Session::new(Config {
            require_ttl: true,
            ..Config::for_tests()
        });
        preload(&s, "old", None);
        assert_eq!(
            cmd(&mut s, &["SET", "old", "w", "KEEPTTL"]),
            "-ERR this server runs with --require-ttl: every key needs a TTL (use PX, EX, PXAT or EXAT)\r\n"
        );
        assert_eq!(cmd(&mut s, &["GET", "old"]), "$1\r\nv\r\n");
    }

    /// A sorted-set STORE leaves its destination without a TTL, even one that had one.
    #[test]
    fn require_ttl_refuses_sorted_set_stores_with_a_result() {
        let mut s = Session::new(Config {
            require_ttl: true,
            ..Config::for_tests()
        });
        let deadline = Some(s.clock().now_ms() + 10_000);
        let mut z = crate::store::ZSet::new();
        z.insert(b"m", 1.0);
        s.shared().keyspace.db(0).insert(
            b"z",
            Entry {
                value: Value::ZSet(Box::new(z)),
                deadline_ms: deadline,
            },
        );
        preload(&s, "d", deadline);
        let refused = "-ERR this server runs with --require-ttl: every key needs a TTL (use PX, EX, PXAT or EXAT)\r\n";
        for store in ["ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE"] {
            assert_eq!(cmd(&mut s, &[store, "d", "1", "z"]), refused, "{store}");
        }
        assert_eq!(cmd(&mut s, &["GET", "d"]), "$1\r\nv\r\n");
        assert_eq!(cmd(&mut s, &["PTTL", "d"]), ":10000\r\n");
        // An empty result only deletes the destination.
        assert_eq!(cmd(&mut s, &["ZDIFFSTORE", "d", "2", "z", "z"]), ":0\r\n");
        assert_eq!(cmd(&mut s, &["EXISTS", "d"]), ":0\r\n");
        assert_eq!(cmd(&mut s, &["ZUNION", "1", "z"]), "*1\r\n$1\r\nm\r\n");
    }
}
