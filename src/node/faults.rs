//! Fault injection for the test backend (`testing`): a node can be paused (like SIGSTOP
//! or a long GC pause), taken off the network (isolate, stop) and brought back. The
//! state lives here; the accept loop and the connection loop only ask it, through the
//! few calls below, whether to execute, and report what they read.
//!
//! Faults scoped to one command, key or client (a lost reply, an error, a delay) are in
//! `scoped`.
//!
//! Production nodes never leave `Up`: then `begin_request` is an atomic store and load,
//! and the pause bookkeeping does nothing.

pub mod scoped;

use super::clients::ClientInfo;
use super::shared::Shared;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::time::Instant;
use tokio::sync::{watch, Notify};

/// A node's reachability, for fault injection (see `testing`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetState {
    /// Accepting and answering.
    Up,
    /// Like SIGSTOP or a long GC pause: connections stay open, nothing is answered,
    /// new connections are accepted but, like a stopped process's backlog, only
    /// buffered until the node resumes.
    Paused,
    /// Off the network: the listener is closed (connections refused) and every
    /// connection is dropped.
    Down,
}

/// The node-wide fault state, in `Shared::faults`.
pub struct Faults {
    /// Whether the node is reachable: test fault controls move it (pause, isolate...).
    pub net: watch::Sender<NetState>,
    /// `net` as a plain atomic, read before every request (see `begin_request`).
    pub(crate) net_now: AtomicU8,
    /// Whether the listener is bound (it follows `net` with a delay: tests wait on it).
    pub listening: watch::Sender<bool>,
    /// Hands out `ClientFaults::paused_ticket`s.
    pause_tickets: AtomicU64,
    /// Woken when a connection has run its paused backlog (or gone away).
    pause_turn: Notify,
    /// Faults scoped to a command, key or client, and the history (`scoped`).
    pub scoped: scoped::ScopedFaults,
}

impl Faults {
    pub fn new() -> Faults {
        Faults {
            net: watch::Sender::new(NetState::Up),
            net_now: AtomicU8::new(NetState::Up as u8),
            listening: watch::Sender::new(true),
            pause_tickets: AtomicU64::new(0),
            pause_turn: Notify::new(),
            scoped: scoped::ScopedFaults::default(),
        }
    }

    /// A connection read input; while paused, its backlog takes a place in the replay
    /// order. The state is read here, after the read, not taken from before it: a
    /// connection woken by `set_net` may read requests sent after the pause before it
    /// has seen the pause, and those must queue behind earlier backlogs too.
    pub fn input_arrived(&self, client: &ClientInfo) {
        // SeqCst, paired with `set_net`'s store and scan: either the pause is seen
        // here, or `set_net` sees this input and gives it a ticket (or both; a ticket
        // is taken once). One barrier per read system call, not per request.
        client.fault.has_input.store(true, Ordering::SeqCst);
        if self.net_now.load(Ordering::SeqCst) == NetState::Paused as u8 {
            self.take_ticket(client);
        }
    }

    /// A connection ran a batch: all of its input (`held` false), or only part, the
    /// node having been paused meanwhile (`held`: the rest is a paused backlog like any
    /// other, and keeps its place in the replay order, see `wait_for_turn`).
    pub fn batch_done(&self, client: &ClientInfo, held: bool) {
        if held {
            self.take_ticket(client);
        } else {
            client.fault.has_input.store(false, Ordering::Release);
            // A load spares the store when there is none. A ticket `set_net` gave
            // after this load is cleared when the node resumes: every connection then
            // runs a batch, empty or not, and ends here.
            if client.fault.paused_ticket.load(Ordering::SeqCst) != 0 {
                client.fault.paused_ticket.store(0, Ordering::SeqCst);
                self.pause_turn.notify_waiters();
            }
        }
    }

    /// A connection ended: connections waiting behind its backlog go on.
    pub fn connection_gone(&self, client: &ClientInfo) {
        if client.fault.paused_ticket.load(Ordering::SeqCst) != 0 {
            self.pause_turn.notify_waiters();
        }
    }

    /// Gives `client` a place in the replay order, unless it has one. Called by its
    /// own task and by `set_net`: the first ticket stays.
    fn take_ticket(&self, client: &ClientInfo) {
        if client.fault.paused_ticket.load(Ordering::SeqCst) == 0 {
            let ticket = self.pause_tickets.fetch_add(1, Ordering::SeqCst) + 1;
            let _ = client.fault.paused_ticket.compare_exchange(
                0,
                ticket,
                Ordering::SeqCst,
                Ordering::SeqCst,
            );
        }
    }
}

impl Default for Faults {
    fn default() -> Faults {
        Faults::new()
    }
}

/// What the faults track per connection, in `ClientInfo::fault`.
#[derive(Default)]
pub struct ClientFaults {
    /// Input read but not yet executed (lets a test wait for a resumed node to catch up).
    has_input: AtomicBool,
    /// When input first arrived while the node was paused (a ticket from
    /// `Faults::pause_tickets`; 0: none). On resume, connections run their backlog in
    /// ticket order, so a paused node replays requests in the order they arrived.
    paused_ticket: AtomicU64,
    /// Inside a request (see `Shared::begin_request`).
    executing: AtomicBool,
}

/// A request in progress on a connection (see `Shared::begin_request`).
pub struct Executing<'c>(&'c ClientInfo);

impl Drop for Executing<'_> {
    fn drop(&mut self) {
        self.0.fault.executing.store(false, Ordering::SeqCst);
    }
}

impl Shared {
    /// Moves the node to `state`; going `Down` drops every connection. Once this
    /// returns, a node that is not `Up` executes nothing: a request that began before
    /// has finished (bounded wait), and every later one sees the new state first.
    pub fn set_net(&self, state: NetState) {
        self.faults.net_now.store(state as u8, Ordering::SeqCst);
        self.faults.net.send_replace(state);
        // Connections wait on their own wake slot, not on `net` (a channel every
        // connection polled each turn, its waiter list shared by all of them).
        for c in self.clients.iter() {
            c.wake.wake();
        }
        if state == NetState::Down {
            self.kill_clients();
        }
        if state != NetState::Up {
            self.wait_for_requests_in_progress();
        }
        // Input read before the pause and not run yet (a batch cut short, a task not
        // scheduled since its read) comes before anything read from now on.
        if state == NetState::Paused {
            for c in self.clients.iter() {
                if c.fault.has_input.load(Ordering::SeqCst) {
                    self.faults.take_ticket(&c);
                }
            }
        }
    }

    /// Marks `client` as executing a request, if the node is up; the guard clears the
    /// mark. Paired with `set_net` (both sides store, then load, all SeqCst): either
    /// the request sees the new state and does not run, or `set_net` sees the mark and
    /// waits for the request to finish.
    pub fn begin_request<'c>(&self, client: &'c ClientInfo) -> Result<Executing<'c>, NetState> {
        client.fault.executing.store(true, Ordering::SeqCst);
        match self.may_execute(client) {
            Ok(()) => Ok(Executing(client)),
            Err(state) => {
                client.fault.executing.store(false, Ordering::SeqCst);
                Err(state)
            }
        }
    }

    /// `begin_request` for the next request of a batch: the first one marks the
    /// client, the next ones only read the node's state while the mark stays (it
    /// is cleared when `executing` is, by the caller or here on a refusal). The
    /// pairing with `set_net` holds as for one request: the mark was stored before
    /// this load, so either the request sees the new state, or `set_net` sees the mark
    /// and waits for the batch to stop, which the next request's check makes it do.
    /// Saves two SeqCst stores (each a full barrier) per pipelined request.
    pub fn continue_request<'c>(
        &self,
        client: &'c ClientInfo,
        executing: &mut Option<Executing<'c>>,
    ) -> Result<(), NetState> {
        if executing.is_none() {
            *executing = Some(self.begin_request(client)?);
            return Ok(());
        }
        self.may_execute(client).inspect_err(|_| *executing = None)
    }

    /// The node's state as a request of `client` sees it.
    fn may_execute(&self, client: &ClientInfo) -> Result<(), NetState> {
        Err(match self.faults.net_now.load(Ordering::SeqCst) {
            // A connection the node dropped (going down, killed) never runs more, even
            // if the node is back up before its task noticed.
            _ if client.killed.load(Ordering::SeqCst) => NetState::Down,
            s if s == NetState::Up as u8 => return Ok(()),
            s if s == NetState::Paused as u8 => NetState::Paused,
            _ => NetState::Down,
        })
    }

    /// Waits (up to a second: a script may run long) until no connection is inside a
    /// request. Requests run synchronously on a worker, so this waits microseconds.
    fn wait_for_requests_in_progress(&self) {
        let deadline = Instant::now() + std::time::Duration::from_secs(1);
        while self
            .clients
            .iter()
            .any(|c| c.fault.executing.load(Ordering::SeqCst))
            && Instant::now() < deadline
        {
            std::thread::yield_now();
        }
    }

    /// Whether any connection has input it has not executed yet (a resumed node has
    /// not caught up).
    pub fn any_input_pending(&self) -> bool {
        self.clients
            .iter()
            .any(|c| c.fault.has_input.load(Ordering::Acquire))
    }

    /// After a pause, waits until every connection whose backlog arrived earlier has
    /// run it: requests sent to a paused node execute in arrival order, as one socket
    /// buffer of a stopped process would replay them.
    pub async fn wait_for_turn(&self, info: &ClientInfo) {
        let mine = info.fault.paused_ticket.load(Ordering::SeqCst);
        if mine == 0 {
            return;
        }
        // Boxed: the wait's state would otherwise sit in every connection's task.
        Box::pin(self.wait_for_turn_after(info, mine)).await
    }

    async fn wait_for_turn_after(&self, info: &ClientInfo, mine: u64) {
        loop {
            let turn = self.faults.pause_turn.notified();
            tokio::pin!(turn);
            turn.as_mut().enable();
            let earlier = self.clients.iter().any(|c| {
                let t = c.fault.paused_ticket.load(Ordering::SeqCst);
                t != 0 && t < mine
            });
            if !earlier || info.killed.load(Ordering::SeqCst) {
                return;
            }
            tokio::select! {
                _ = turn => {}
                // Killed while waiting: the caller sees `killed` after this batch.
                _ = info.until_killed() => return,
            }
        }
    }
}
