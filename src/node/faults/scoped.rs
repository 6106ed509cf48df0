//! Scoped faults: a fault that acts on one command, key or client of a node, not on
//! the whole node (see `testing`). A test adds one ("the next SET on lock:* from the
//! client named worker-1: run it, lose its reply, close the connection"); each request
//! the connection loop reads asks `ScopedFaults::before_request` whether one fires.
//! Every firing is recorded (which command, which client, when on the test clock), and
//! the node can record what every client sent and got back (`ScopedFaults::record`).
//!
//! With no fault set and no recording, `before_request` is one atomic load.

use crate::clock::Clock;
use crate::commands::{eq_ignore_case, lookup};
use crate::node::ClientInfo;
use crate::protocol::{errors, Reply};
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Redis's words for a cluster slot being migrated (what a Redis Cluster node answers a
/// multi-key request during resharding).
pub const TRYAGAIN: &str = "TRYAGAIN Multiple keys request during rehashing of slot";
/// Redis's words while it loads its dataset at startup.
pub const LOADING: &str = "LOADING Redis is loading the dataset in memory";

/// The most firings kept per fault (the count goes on past it).
pub const MAX_FIRINGS_KEPT: usize = 1000;

/// The most arguments, and bytes per argument, a firing or a history entry keeps of a
/// command (a 500 MB SET is not copied into the record).
const KEEP_ARGS: usize = 32;
const KEEP_ARG_BYTES: usize = 256;

/// Which requests a fault applies to: every condition given must hold.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Scope {
    /// The command's name, any case (`set`, `evalsha`); for a container command, a
    /// subcommand may follow after `|` or a space (`client|setname`, `script load`).
    pub command: Option<String>,
    /// A glob (`crate::glob`) one of the request's keys must match (the keys the
    /// command table's key specs find: `Spec::key_positions`). A request without keys
    /// never matches a key scope.
    pub key: Option<Bytes>,
    /// The client's name (CLIENT SETNAME), exactly.
    pub client_name: Option<Bytes>,
    /// The client's id (CLIENT ID).
    pub client_id: Option<u64>,
    /// The client's address as CLIENT LIST shows it (`127.0.0.1:51234`).
    pub client_addr: Option<String>,
}

/// Which clock a delay runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DelayClock {
    /// The node's clock: in the test backend the manual one, so the reply comes when
    /// the test advances the clock past the delay.
    Node,
    /// Real time.
    Real,
}

/// What a fault does to a request it fires on.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Runs the command and holds its reply back for `ms` (the connection's later
    /// requests wait behind it, as on a slow node).
    Delay {
        /// How long the reply is held back.
        ms: u64,
        /// Which clock measures `ms`.
        clock: DelayClock,
    },
    /// Answers this error (its text starts with its code: `ERR ...`) without running
    /// the command.
    Error(String),
    /// Runs the command, then closes the connection without sending its reply: the
    /// client cannot know the command ran (a SET NX that took the lock looks failed).
    DropReply,
    /// Closes the connection without running the command (nor answering it).
    DropRequest,
    /// Runs the command, sends its reply, then closes the connection.
    CloseAfter,
}

impl Action {
    /// NOSCRIPT, as Redis answers an EVALSHA of a script it does not have.
    pub fn noscript() -> Action {
        Action::Error(errors::NOSCRIPT.to_string())
    }

    /// TRYAGAIN, as a Redis Cluster node answers during a slot migration.
    pub fn tryagain() -> Action {
        Action::Error(TRYAGAIN.to_string())
    }

    /// BUSY, as Redis answers while a script runs too long.
    pub fn busy() -> Action {
        Action::Error(errors::BUSY.to_string())
    }

    /// LOADING, as Redis answers while it loads its dataset.
    pub fn loading() -> Action {
        Action::Error(LOADING.to_string())
    }
}

/// A fault as a test sets it.
#[derive(Clone, Debug, PartialEq)]
pub struct FaultSpec {
    /// Which requests it applies to.
    pub scope: Scope,
    /// What it does to them.
    pub action: Action,
    /// Lets this many matching requests through before the fault may fire.
    pub skip: u64,
    /// Fires at most this many times (`None`: every time).
    pub count: Option<u64>,
    /// Fires on a matching request with this probability, drawn from a generator
    /// seeded with `seed`: the same requests in the same order fire the same way.
    pub probability: Option<f64>,
    /// The seed of `probability`'s generator.
    pub seed: u64,
}

impl FaultSpec {
    /// A fault with no scope (every request), firing every time.
    pub fn new(action: Action) -> FaultSpec {
        FaultSpec {
            scope: Scope::default(),
            action,
            skip: 0,
            count: None,
            probability: None,
            seed: 1,
        }
    }

    /// Scopes it to one command (`set`), or one subcommand (`client|kill`).
    pub fn command(mut self, name: &str) -> FaultSpec {
        self.scope.command = Some(name.to_string());
        self
    }

    /// Scopes it to requests with a key matching `glob` (Redis's glob syntax).
    pub fn key(mut self, glob: &str) -> FaultSpec {
        self.scope.key = Some(Bytes::copy_from_slice(glob.as_bytes()));
        self
    }

    /// Scopes it to connections with this CLIENT SETNAME name.
    pub fn client_name(mut self, name: &str) -> FaultSpec {
        self.scope.client_name = Some(Bytes::copy_from_slice(name.as_bytes()));
        self
    }

    /// Scopes it to the connection with this CLIENT ID.
    pub fn client_id(mut self, id: u64) -> FaultSpec {
        self.scope.client_id = Some(id);
        self
    }

    /// Scopes it to the connection from this `ip:port`.
    pub fn client_addr(mut self, addr: &str) -> FaultSpec {
        self.scope.client_addr = Some(addr.to_string());
        self
    }

    /// Fires at most `n` times.
    pub fn times(mut self, n: u64) -> FaultSpec {
        self.count = Some(n);
        self
    }

    /// Lets `n` matching requests through first.
    pub fn skip(mut self, n: u64) -> FaultSpec {
        self.skip = n;
        self
    }

    /// Fires with probability `p`, drawn from a generator seeded with `seed`.
    pub fn probability(mut self, p: f64, seed: u64) -> FaultSpec {
        self.probability = Some(p);
        self.seed = seed;
        self
    }

    /// Checks what the type cannot: a probability within 0..=1, a command name the
    /// table knows (with a subcommand it has), an error text with a code.
    pub fn validate(&self) -> Result<(), FaultError> {
        if let Some(p) = self.probability {
            if !(0.0..=1.0).contains(&p) {
                return Err(FaultError::Probability(p));
            }
        }
        if let Some(c) = &self.scope.command {
            let (name, sub) = split_command(c);
            let Some(spec) = lookup(name.as_bytes()) else {
                return Err(FaultError::UnknownCommand(name.to_string()));
            };
            if let Some(sub) = sub {
                let args = [Bytes::from(name.to_string()), Bytes::from(sub.to_string())];
                if spec.subcommand(&args).is_none() {
                    return Err(FaultError::UnknownSubcommand {
                        command: name.to_string(),
                        subcommand: sub.to_string(),
                    });
                }
            }
        }
        if let Action::Error(text) = &self.action {
            let code = text.split(' ').next().unwrap_or("");
            if code.is_empty()
                || !code
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
                || text.contains(['\r', '\n'])
            {
                return Err(FaultError::ErrorText(text.clone()));
            }
        }
        Ok(())
    }
}

/// Why a fault was refused ([`FaultSpec::validate`], `TestServer::add_fault`).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum FaultError {
    /// A probability outside 0..=1.
    Probability(f64),
    /// A command name the command table does not know.
    UnknownCommand(String),
    /// A subcommand the command does not have.
    UnknownSubcommand {
        /// The command, as the scope names it.
        command: String,
        /// The subcommand it does not have.
        subcommand: String,
    },
    /// An `Action::Error` text without a code in capitals first, or with a line break.
    ErrorText(String),
}

impl std::fmt::Display for FaultError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FaultError::Probability(p) => write!(f, "probability must be from 0 to 1, not {p}"),
            FaultError::UnknownCommand(name) => write!(f, "unknown command {name:?}"),
            FaultError::UnknownSubcommand {
                command,
                subcommand,
            } => write!(f, "{command} has no subcommand {subcommand:?}"),
            FaultError::ErrorText(text) => write!(
                f,
                "an error reply starts with its code in capitals (\"ERR ...\", \"NOSCRIPT ...\") and has no line break, not {text:?}"
            ),
        }
    }
}

impl std::error::Error for FaultError {}

/// `client|kill` or `client kill`: the name and the subcommand.
fn split_command(c: &str) -> (&str, Option<&str>) {
    match c.trim().split_once(['|', ' ']) {
        Some((name, sub)) => (name, Some(sub.trim())),
        None => (c.trim(), None),
    }
}

/// Who sent a request, as a firing or a history entry records it.
#[derive(Clone, Debug, PartialEq)]
pub struct ClientRef {
    /// Its CLIENT ID.
    pub id: u64,
    /// Its CLIENT SETNAME name, if it set one.
    pub name: Option<String>,
    /// Its `ip:port`.
    pub addr: String,
}

impl ClientRef {
    fn of(info: &ClientInfo) -> ClientRef {
        ClientRef {
            id: info.id,
            name: info
                .name
                .lock()
                .as_ref()
                .map(|n| String::from_utf8_lossy(n).into_owned()),
            addr: info.addr.to_string(),
        }
    }
}

/// One firing of a fault.
#[derive(Clone, Debug, PartialEq)]
pub struct Firing {
    /// The request (its first `KEEP_ARGS` arguments, each cut to `KEEP_ARG_BYTES`).
    pub command: Vec<Bytes>,
    /// Who sent it.
    pub client: ClientRef,
    /// The node's monotonic clock (the test clock) when it fired.
    pub mono_ms: u64,
    /// The node's wall clock (Unix ms) when it fired.
    pub wall_ms: i64,
}

/// A fault in a node's table, with what it did so far.
#[derive(Clone, Debug, PartialEq)]
pub struct FaultStatus {
    /// The id the node gave it when it was set.
    pub id: u64,
    /// The fault as set.
    pub spec: FaultSpec,
    /// Requests in scope so far (skipped ones included).
    pub matched: u64,
    /// Times it fired.
    pub fired: u64,
    /// The last `MAX_FIRINGS_KEPT` firings, oldest first.
    pub firings: Vec<Firing>,
}

/// What became of a request, in the history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Run and answered.
    Answered,
    /// Answered with a fault's error, not run.
    Refused,
    /// Run, its reply lost and the connection closed.
    ReplyDropped,
    /// Not run: the connection was closed.
    NotRun,
}

impl Outcome {
    /// Its name in the harness's JSON (`answered`, `refused`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Answered => "answered",
            Outcome::Refused => "refused",
            Outcome::ReplyDropped => "reply_dropped",
            Outcome::NotRun => "not_run",
        }
    }
}

/// One request and its reply, as the history records them.
#[derive(Clone, Debug, PartialEq)]
pub struct Exchange {
    /// Order of recording on this node, from 1.
    pub seq: u64,
    /// Who sent it.
    pub client: ClientRef,
    /// The request's arguments, the command name first.
    pub command: Vec<Bytes>,
    /// The reply computed (sent unless `outcome` says otherwise); `None` if not run.
    pub reply: Option<Reply>,
    /// Whether it was run and answered.
    pub outcome: Outcome,
    /// The fault that fired on it, if any.
    pub fault: Option<u64>,
    /// The test clock when the request was read.
    pub mono_ms: u64,
}

struct Fault {
    status: FaultStatus,
    /// splitmix64 state, for `probability`.
    rng: u64,
}

impl Fault {
    /// Whether the fault fires on a request in its scope (and counts it).
    fn fires(&mut self) -> bool {
        let s = &mut self.status;
        s.matched += 1;
        if s.matched <= s.spec.skip || s.spec.count.is_some_and(|n| s.fired >= n) {
            return false;
        }
        if let Some(p) = s.spec.probability {
            self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.rng;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            let draw = (z >> 11) as f64 / (1u64 << 53) as f64;
            if draw >= p {
                return false;
            }
        }
        true
    }
}

#[derive(Default)]
struct Table {
    faults: Vec<Fault>,
    next_id: u64,
    /// The history, when recording (`capacity` entries at most, oldest dropped).
    history: Option<History>,
}

struct History {
    capacity: usize,
    next_seq: u64,
    entries: VecDeque<Exchange>,
}

/// A node's scoped faults and history (`Faults::scoped`).
#[derive(Default)]
pub struct ScopedFaults {
    /// Whether any fault is set or the history is recording: the one thing a request
    /// reads when neither is.
    on: AtomicBool,
    table: Mutex<Table>,
}

/// A request a fault fired on, or one being recorded: what the connection does with it.
pub struct Hook {
    action: Option<(u64, Action)>,
    /// The request as recorded, when recording.
    record: Option<(ClientRef, Vec<Bytes>, u64)>,
}

/// What to do instead of running a request.
pub enum Instead {
    /// Answer this and do not run it.
    Answer(Reply),
    /// Close the connection without running it.
    Close,
}

/// What to do with a reply once the request ran.
pub enum After {
    Send,
    SendAndClose,
    /// Close without sending it.
    Drop,
}

impl ScopedFaults {
    /// For each request the connection loop reads: `None` (the request runs as usual)
    /// unless a fault fires on it or the history records it. Called before the request
    /// runs, so a fault in the table before this call acts on it.
    #[inline]
    pub fn before_request(
        &self,
        clock: &Clock,
        info: &ClientInfo,
        args: &[Bytes],
    ) -> Option<Box<Hook>> {
        // Acquire: pairs with the Release of `add` (a plain load on x86).
        if !self.on.load(Ordering::Acquire) {
            return None;
        }
        self.check(clock, info, args)
    }

    #[cold]
    fn check(&self, clock: &Clock, info: &ClientInfo, args: &[Bytes]) -> Option<Box<Hook>> {
        let mut table = self.table.lock();
        let now = clock.now_ms();
        let mut action = None;
        for f in table.faults.iter_mut() {
            if in_scope(&f.status.spec.scope, info, args) && f.fires() {
                let s = &mut f.status;
                s.fired += 1;
                if s.firings.len() >= MAX_FIRINGS_KEPT {
                    s.firings.remove(0);
                }
                s.firings.push(Firing {
                    command: kept(args),
                    client: ClientRef::of(info),
                    mono_ms: now,
                    wall_ms: clock.wall_ms(),
                });
                action = Some((s.id, s.spec.action.clone()));
                break;
            }
        }
        let record = table
            .history
            .is_some()
            .then(|| (ClientRef::of(info), kept(args), now));
        if action.is_none() && record.is_none() {
            return None;
        }
        Some(Box::new(Hook { action, record }))
    }

    /// Adds a fault; it acts on every request read after this returns, on every
    /// connection. Returns its id.
    pub fn add(&self, spec: FaultSpec) -> u64 {
        let mut table = self.table.lock();
        table.next_id += 1;
        let id = table.next_id;
        let rng = spec.seed;
        table.faults.push(Fault {
            status: FaultStatus {
                id,
                spec,
                matched: 0,
                fired: 0,
                firings: Vec::new(),
            },
            rng,
        });
        // Under the lock: a request that sees `on` then waits for the table.
        self.on.store(true, Ordering::Release);
        id
    }

    /// Removes one fault; returns it as it was (`None`: no such fault).
    pub fn remove(&self, id: u64) -> Option<FaultStatus> {
        let mut table = self.table.lock();
        let i = table.faults.iter().position(|f| f.status.id == id)?;
        let f = table.faults.remove(i);
        self.update_on(&table);
        Some(f.status)
    }

    /// Removes every fault; returns them as they were.
    pub fn clear(&self) -> Vec<FaultStatus> {
        let mut table = self.table.lock();
        let gone = std::mem::take(&mut table.faults);
        self.update_on(&table);
        gone.into_iter().map(|f| f.status).collect()
    }

    /// The faults set, oldest first, with their firings.
    pub fn list(&self) -> Vec<FaultStatus> {
        let table = self.table.lock();
        table.faults.iter().map(|f| f.status.clone()).collect()
    }

    /// One fault, with its firings.
    pub fn get(&self, id: u64) -> Option<FaultStatus> {
        let table = self.table.lock();
        table
            .faults
            .iter()
            .find(|f| f.status.id == id)
            .map(|f| f.status.clone())
    }

    /// Starts recording every request and reply (keeping the last `capacity`; an
    /// earlier recording is emptied), or stops (`capacity` 0).
    pub fn record(&self, capacity: usize) {
        let mut table = self.table.lock();
        table.history = (capacity > 0).then(|| History {
            capacity,
            next_seq: 1,
            entries: VecDeque::new(),
        });
        self.update_on(&table);
    }

    /// The history recorded so far, oldest first (empty when not recording); `take`
    /// empties it.
    pub fn history(&self, take: bool) -> Vec<Exchange> {
        let mut table = self.table.lock();
        match &mut table.history {
            None => Vec::new(),
            Some(h) if take => h.entries.drain(..).collect(),
            Some(h) => h.entries.iter().cloned().collect(),
        }
    }

    fn update_on(&self, table: &Table) {
        let on = !table.faults.is_empty() || table.history.is_some();
        self.on.store(on, Ordering::Release);
    }

    fn push_history(&self, hook: &Hook, reply: Option<&Reply>, outcome: Outcome) {
        let Some((client, command, mono_ms)) = &hook.record else {
            return;
        };
        let mut table = self.table.lock();
        let Some(h) = &mut table.history else {
            return;
        };
        if h.entries.len() >= h.capacity {
            h.entries.pop_front();
        }
        let seq = h.next_seq;
        h.next_seq += 1;
        h.entries.push_back(Exchange {
            seq,
            client: client.clone(),
            command: command.clone(),
            reply: reply.cloned(),
            outcome,
            fault: hook.action.as_ref().map(|(id, _)| *id),
            mono_ms: *mono_ms,
        });
    }
}

impl Hook {
    /// What replaces running the request, if the fault says so (recorded here).
    pub fn instead(&self, faults: &ScopedFaults) -> Option<Instead> {
        match &self.action {
            Some((_, Action::Error(text))) => {
                let reply = Reply::error(text.clone());
                faults.push_history(self, Some(&reply), Outcome::Refused);
                Some(Instead::Answer(reply))
            }
            Some((_, Action::DropRequest)) => {
                faults.push_history(self, None, Outcome::NotRun);
                Some(Instead::Close)
            }
            _ => None,
        }
    }

    /// Once the request ran (or was answered by `instead`): waits out a delay, records
    /// the exchange, and says what becomes of the reply. A delay ends early, with
    /// `Drop`, if the client is killed meanwhile.
    pub async fn after(
        self,
        faults: &ScopedFaults,
        clock: &Clock,
        info: &ClientInfo,
        reply: &Reply,
    ) -> After {
        match &self.action {
            Some((_, Action::Error(_))) => After::Send,
            Some((_, Action::DropReply)) => {
                faults.push_history(&self, Some(reply), Outcome::ReplyDropped);
                After::Drop
            }
            Some((_, Action::CloseAfter)) => {
                faults.push_history(&self, Some(reply), Outcome::Answered);
                After::SendAndClose
            }
            Some((_, Action::Delay { ms, clock: which })) => {
                let wait = async {
                    match which {
                        DelayClock::Node => clock.sleep(Duration::from_millis(*ms)).await,
                        DelayClock::Real => tokio::time::sleep(Duration::from_millis(*ms)).await,
                    }
                };
                tokio::select! {
                    _ = wait => {}
                    _ = info.until_killed() => return After::Drop,
                }
                faults.push_history(&self, Some(reply), Outcome::Answered);
                After::Send
            }
            Some((_, Action::DropRequest)) | None => {
                faults.push_history(&self, Some(reply), Outcome::Answered);
                After::Send
            }
        }
    }
}

/// Whether a request falls in `scope`.
fn in_scope(scope: &Scope, info: &ClientInfo, args: &[Bytes]) -> bool {
    let spec = lookup(&args[0]);
    if let Some(c) = &scope.command {
        let (name, sub) = split_command(c);
        let named = match spec {
            Some(s) => s.name.eq_ignore_ascii_case(name),
            None => eq_ignore_case(&args[0], name),
        };
        if !named || sub.is_some_and(|sub| !args.get(1).is_some_and(|a| eq_ignore_case(a, sub))) {
            return false;
        }
    }
    if let Some(glob) = &scope.key {
        let Some(spec) = spec else { return false };
        if !spec.keys(args).any(|k| crate::glob::matches(glob, k)) {
            return false;
        }
    }
    if scope.client_id.is_some_and(|id| id != info.id) {
        return false;
    }
    if let Some(addr) = &scope.client_addr {
        if info.addr.to_string() != *addr {
            return false;
        }
    }
    if let Some(name) = &scope.client_name {
        if info.name.lock().as_ref() != Some(name) {
            return false;
        }
    }
    true
}

/// A request as a record keeps it (bounded, and copied: the arguments are slices of
/// the connection's read buffer, which a record must not pin).
fn kept(args: &[Bytes]) -> Vec<Bytes> {
    args.iter()
        .take(KEEP_ARGS)
        .map(|a| Bytes::copy_from_slice(&a[..a.len().min(KEEP_ARG_BYTES)]))
        .collect()
}
