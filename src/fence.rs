//! The restart fence and the max-TTL rule (Redlock's "delayed restart").
//!
//! A node that restarts has forgotten its locks. If it granted a lock before the crash,
//! a second client could now win a majority with it. Redlock's answer is to keep a
//! restarted node from granting anything until every lock it could have granted has
//! expired: that is at most `max_ttl` after the crash, because no TTL may be longer.
//! So: every TTL is bounded by `max_ttl`, and for `restart_delay` (>= max_ttl) after
//! boot every command that could create a key or lengthen a TTL is refused with
//! TRYAGAIN. The fence runs on the monotonic clock, so a wall-clock step cannot end it.

use crate::protocol::Reply;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug)]
pub struct Fence {
    /// Monotonic ms at which the fence lifts (0 when it is off).
    until_ms: AtomicU64,
    delay_ms: u64,
    max_ttl_ms: u64,
    require_ttl: bool,
}

impl Fence {
    pub fn new(now_ms: u64, delay_ms: u64, max_ttl_ms: u64, require_ttl: bool) -> Fence {
        let fence = Fence {
            until_ms: AtomicU64::new(0),
            delay_ms,
            max_ttl_ms,
            require_ttl,
        };
        fence.restart(now_ms);
        fence
    }

    /// Starts the fence again, as at boot (a crash-restart).
    pub fn restart(&self, now_ms: u64) {
        let until = if self.delay_ms == 0 {
            0
        } else {
            now_ms + self.delay_ms
        };
        self.until_ms.store(until, Ordering::Relaxed);
    }

    /// Lifts the fence now.
    pub fn lift(&self) {
        self.until_ms.store(0, Ordering::Relaxed);
    }

    /// Milliseconds until the fence lifts, or 0 when it is not active.
    pub fn remaining_ms(&self, now_ms: u64) -> u64 {
        self.until_ms.load(Ordering::Relaxed).saturating_sub(now_ms)
    }

    /// Monotonic ms at which the fence lifts (0 when off).
    pub fn until_ms(&self) -> u64 {
        self.until_ms.load(Ordering::Relaxed)
    }

    pub fn delay_ms(&self) -> u64 {
        self.delay_ms
    }

    pub fn max_ttl_ms(&self) -> u64 {
        self.max_ttl_ms
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
        Err(Reply::error(format!(
            "TRYAGAIN restart fence: this node restarted less than max-ttl ago and refuses writes for another {left} ms"
        )))
    }

    /// Refuses a TTL longer than max-ttl.
    pub fn check_ttl(&self, ttl_ms: i64) -> Result<(), Reply> {
        if ttl_ms > self.max_ttl_ms as i64 {
            return Err(Reply::error(format!(
                "ERR TTL of {ttl_ms} ms is above this server's max-ttl of {} ms",
                self.max_ttl_ms
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
        let text = String::from_utf8_lossy(err.error_text().unwrap()).to_string();
        assert!(text.starts_with("TRYAGAIN "), "{text}");
        assert!(text.contains("300 ms"), "{text}");
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
