//! The watchdog: keeps a held lock alive for as long as the holder needs it, and tells
//! the holder at once when it can no longer be guaranteed.

use std::sync::Arc;

use parking_lot::Mutex;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Lock, Redlock};

/// A held lock whose TTL is extended every ttl/3 by a background task.
///
/// The lock is "lost" (see [`WatchedLock::lost`]) as soon as an extension fails to win
/// a majority, or the validity ends before an extension succeeds: from then on another
/// client may hold it, and the holder must stop the work it protects. Dropping the guard
/// stops the watchdog and releases the lock in a spawned task; [`WatchedLock::release`]
/// does the same and waits for it.
#[derive(Debug)]
pub struct WatchedLock {
    redlock: Redlock,
    shared: Arc<Mutex<Lock>>,
    lost: CancellationToken,
    stop: CancellationToken,
    task: Option<JoinHandle<()>>,
    released: bool,
}

impl WatchedLock {
    pub(super) fn start(redlock: Redlock, lock: Lock) -> WatchedLock {
        let shared = Arc::new(Mutex::new(lock));
        let lost = CancellationToken::new();
        let stop = CancellationToken::new();
        let task = tokio::spawn(run(
            redlock.clone(),
            shared.clone(),
            lost.clone(),
            stop.clone(),
        ));
        WatchedLock {
            redlock,
            shared,
            lost,
            stop,
            task: Some(task),
            released: false,
        }
    }

    /// A snapshot of the lock (its validity as of the last successful extension).
    pub fn lock(&self) -> Lock {
        self.shared.lock().clone()
    }

    /// The fencing token (see [`Lock::token`]); extensions keep it.
    pub fn token(&self) -> Option<u64> {
        self.shared.lock().token()
    }

    /// Until when the lock is guaranteed, as of the last successful extension.
    pub fn valid_until(&self) -> Instant {
        self.shared.lock().valid_until
    }

    /// Completes the moment the lock can no longer be guaranteed. Never completes while
    /// the watchdog keeps winning its extensions.
    pub async fn lost(&self) {
        self.lost.cancelled().await
    }

    /// Whether the lock has been lost.
    pub fn is_lost(&self) -> bool {
        self.lost.is_cancelled()
    }

    /// A token cancelled when the lock is lost, to hand to work that must stop then.
    /// It is a child token: cancelling it does not affect the watchdog.
    pub fn lost_token(&self) -> CancellationToken {
        self.lost.child_token()
    }

    /// Stops the watchdog and releases the lock on every node; returns how many nodes
    /// deleted it.
    pub async fn release(mut self) -> usize {
        self.released = true;
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            // The task only waits on timers and bounded requests, and ends as soon as it
            // sees `stop`; waiting makes sure no extension races with the release.
            let _ = task.await;
        }
        let lock = self.lock();
        self.redlock.release(&lock).await
    }
}

impl Drop for WatchedLock {
    fn drop(&mut self) {
        self.stop.cancel();
        if self.released {
            return;
        }
        // Outside a runtime there is nothing to release with: the TTL will free it.
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            let redlock = self.redlock.clone();
            let lock = self.lock();
            handle.spawn(async move {
                redlock.release(&lock).await;
            });
        }
    }
}

/// The watchdog loop: sleep ttl/3, extend, repeat; any failure, or the validity ending
/// first, cancels `lost` and ends the loop.
async fn run(
    redlock: Redlock,
    shared: Arc<Mutex<Lock>>,
    lost: CancellationToken,
    stop: CancellationToken,
) {
    let mut lock = shared.lock().clone();
    let mut next = Instant::now() + lock.ttl / 3;
    loop {
        let deadline = lock.valid_until;
        tokio::select! {
            biased;
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep_until(deadline) => {
                lost.cancel();
                return;
            }
            _ = tokio::time::sleep_until(next) => {}
        }
        let ttl = lock.ttl;
        let started = Instant::now();
        tokio::select! {
            biased;
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep_until(deadline) => {
                lost.cancel();
                return;
            }
            result = redlock.extend(&mut lock, ttl) => match result {
                Ok(()) => {
                    *shared.lock() = lock.clone();
                    next = started + ttl / 3;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "redlock: extension failed, lock lost");
                    lost.cancel();
                    return;
                }
            }
        }
    }
}
