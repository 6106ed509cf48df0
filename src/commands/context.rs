//! `Ctx`: one command's view of the server, the calling client and the time of the
//! call.

use crate::node::clients::ClientState;
use crate::node::shared::Shared;
use crate::protocol::Reply;
use crate::store::Db;
use std::sync::atomic::Ordering;

/// One command's view: the server, the caller, and the time the command started
/// (a script sees one time for its whole run, as in Redis).
pub struct Ctx<'a> {
    pub shared: &'a Shared,
    pub client: &'a mut ClientState,
    pub now_ms: u64,
    pub in_script: bool,
    /// Running a transaction's queue (EXEC): commands never block.
    pub in_exec: bool,
    /// The real-clock reading `now_ms` was taken from: the start of the command's
    /// duration (INFO commandstats), so a command reads the system clock once to start.
    started: u64,
}

impl<'a> Ctx<'a> {
    pub fn new(shared: &'a Shared, client: &'a mut ClientState) -> Ctx<'a> {
        let started = crate::clock::mono_ns();
        Ctx {
            shared,
            client,
            now_ms: shared.clock.now_ms_at(started),
            in_script: false,
            in_exec: false,
            started,
        }
    }

    /// Reads the clock again: for a command that waited (for the keyspace gate) after
    /// its context was made, so neither its time nor its duration includes the wait.
    pub fn restart_clock(&mut self) {
        self.started = crate::clock::mono_ns();
        self.now_ms = self.shared.clock.now_ms_at(self.started);
    }

    /// When the command started on the real clock, in `clock::mono_ns`'s terms (see
    /// `started`).
    pub(crate) fn started(&self) -> u64 {
        self.started
    }

    /// Whether a command may block the client (BLPOP): not inside a script or EXEC,
    /// where it answers as if its timeout had passed.
    pub fn may_block(&self) -> bool {
        !self.in_script && !self.in_exec
    }

    /// The caller's selected database.
    pub fn db(&self) -> &'a Db {
        self.shared.keyspace.db(self.client.db)
    }

    /// The monotonic deadline for a TTL of `ttl_ms` from now, after the max-ttl check,
    /// recorded durably (`durability::reach`, with the lock-delay on top: a restarted
    /// node's fence then outlasts a delay it forgot) before any key can get it.
    pub fn deadline_after(&self, ttl_ms: i64) -> Result<u64, Reply> {
        if let Err(e) = self.shared.fence.check_ttl(ttl_ms) {
            self.shared
                .stats
                .locks
                .above_max_ttl
                .fetch_add(1, Ordering::Relaxed);
            return Err(e);
        }
        let deadline = (self.now_ms as i64).saturating_add(ttl_ms).max(0) as u64;
        self.cover(deadline)?;
        Ok(deadline)
    }

    /// Records durably that a key may be held until `deadline`, plus the lock-delay
    /// after it (`store/lock.rs`).
    /// A durable TTL (`Fence::is_durable_ttl`: the key goes to the append-only log, a
    /// crash does not forget it) needs no record.
    pub fn cover(&self, deadline: u64) -> Result<(), Reply> {
        let ttl = deadline.saturating_sub(self.now_ms);
        if self
            .shared
            .fence
            .is_durable_ttl(ttl.min(i64::MAX as u64) as i64)
        {
            return Ok(());
        }
        let delay = self.shared.keyspace.lock_delay().ms();
        (self.shared.reach).cover(self.now_ms, deadline.saturating_add(delay))
    }

    /// The monotonic deadline for a Unix-ms instant, after the max-ttl check. An
    /// instant in the past gives a deadline in the past (the key expires at once).
    pub fn deadline_at_wall(&self, unix_ms: i64) -> Result<u64, Reply> {
        let ttl = unix_ms.saturating_sub(self.shared.clock.mono_to_wall(self.now_ms));
        self.deadline_after(ttl.max(-(self.now_ms as i64)))
    }
}
