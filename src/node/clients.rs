//! The client registry's entries: `ClientInfo` (what other connections may see of a
//! client: CLIENT LIST, INFO clients, CLIENT KILL) and `ClientState` (a connection's
//! own state, owned by its task).

use crate::acl::{Acl, User};
use crate::commands::admin::tracking::{ClientTracking, Tracker};
use crate::commands::command_table;
use crate::commands::families::pubsub::Subscriber;
use bytes::Bytes;
use parking_lot::Mutex;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::task::{Poll, Waker};

/// What other connections may see of a client (CLIENT LIST, INFO clients) and the
/// handle to disconnect it.
pub struct ClientInfo {
    pub id: u64,
    pub addr: SocketAddr,
    pub laddr: SocketAddr,
    pub created_ms: u64,
    pub last_active_ms: AtomicU64,
    pub name: Mutex<Option<Bytes>>,
    pub lib_name: Mutex<Option<Bytes>>,
    pub lib_ver: Mutex<Option<Bytes>>,
    /// The ACL user the client is authenticated as (CLIENT LIST, ACL DELUSER).
    pub user: Mutex<Bytes>,
    /// The last command run, as its `Spec::index` + 1 (0: none yet). An atomic rather
    /// than a lock: it is written by every command and read only by CLIENT LIST.
    last_cmd: AtomicUsize,
    pub db: AtomicUsize,
    pub resp: AtomicU8,
    /// Set to disconnect the client (CLIENT KILL, crash-restart, output limit).
    pub killed: AtomicBool,
    /// Whether the client waits in a blocking command, and whether CLIENT UNBLOCK
    /// asked it to stop (`WaitState`).
    blocking: AtomicU8,
    /// The connection task's waker, for what other threads tell it (a kill, a change
    /// of the node's network state). With the socket and its pub/sub queue, it is all
    /// the connection waits on: one task wake-up, no future built per turn.
    pub wake: WakeSlot,
    /// What the test backend's faults track per connection (see `faults`).
    pub fault: super::faults::ClientFaults,
    /// Client-side caching's mode (CLIENT TRACKING ON), for deliveries from other
    /// connections and CLIENT LIST.
    pub tracking: Mutex<Option<Arc<Tracker>>>,
    /// The connection's delivery queue (set by its task): where other connections'
    /// invalidation messages go.
    pub pushes: OnceLock<Weak<Subscriber>>,
}

impl ClientInfo {
    /// One CLIENT LIST line, with the fields clients and operators look for.
    pub fn list_line(&self, now: u64) -> String {
        let c = self;
        let text = |b: &Option<Bytes>| {
            b.as_ref()
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .unwrap_or_default()
        };
        // Redis's order: b (blocked), then t, R, B (tracking); N when none.
        let tracking = c.tracking.lock().clone();
        let mut flags = String::new();
        if c.is_blocked() {
            flags.push('b');
        }
        if let Some(t) = &tracking {
            flags.push_str(&t.list_flags());
        }
        if flags.is_empty() {
            flags.push('N');
        }
        let redir = tracking.as_ref().map_or(-1, |t| t.redirect as i64);
        format!(
            "id={} addr={} laddr={} fd=0 name={} age={} idle={} flags={} db={} sub=0 psub=0 ssub=0 multi=-1 qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r cmd={} user={} redir={} resp={} lib-name={} lib-ver={}",
            c.id,
            c.addr,
            c.laddr,
            text(&c.name.lock()),
            now.saturating_sub(c.created_ms) / 1000,
            now.saturating_sub(c.last_active_ms.load(Ordering::Relaxed)) / 1000,
            flags,
            c.db.load(Ordering::Relaxed),
            c.last_cmd(),
            String::from_utf8_lossy(&c.user.lock()),
            redir,
            c.resp.load(Ordering::Relaxed),
            text(&c.lib_name.lock()),
            text(&c.lib_ver.lock()),
        )
    }

    pub fn new(id: u64, addr: SocketAddr, laddr: SocketAddr, now_ms: u64) -> ClientInfo {
        ClientInfo {
            id,
            addr,
            laddr,
            created_ms: now_ms,
            last_active_ms: AtomicU64::new(now_ms),
            name: Mutex::new(None),
            lib_name: Mutex::new(None),
            lib_ver: Mutex::new(None),
            user: Mutex::new(Bytes::from_static(b"default")),
            last_cmd: AtomicUsize::new(0),
            db: AtomicUsize::new(0),
            resp: AtomicU8::new(2),
            killed: AtomicBool::new(false),
            blocking: AtomicU8::new(WaitState::No as u8),
            wake: WakeSlot::default(),
            fault: Default::default(),
            tracking: Mutex::new(None),
            pushes: OnceLock::new(),
        }
    }

    /// Records `spec` as the client's last command, run at `now_ms`.
    pub fn touch(&self, spec: &command_table::Spec, now_ms: u64) {
        self.last_cmd.store(spec.index + 1, Ordering::Relaxed);
        self.last_active_ms.store(now_ms, Ordering::Relaxed);
    }

    /// The last command as `touch` recorded it, for `retouch`.
    pub fn last_touched(&self) -> usize {
        self.last_cmd.load(Ordering::Relaxed)
    }

    /// Records again the command `last_touched` returned: a script's or function's
    /// caller, once the commands it ran have marked themselves.
    pub fn retouch(&self, last: usize, now_ms: u64) {
        self.last_cmd.store(last, Ordering::Relaxed);
        self.last_active_ms.store(now_ms, Ordering::Relaxed);
    }

    /// The name of the last command run ("NULL" before the first), for CLIENT LIST.
    pub fn last_cmd(&self) -> &'static str {
        match self.last_cmd.load(Ordering::Relaxed) {
            0 => "NULL",
            i => command_table::COMMANDS
                .get(i - 1)
                .map_or("NULL", |s| s.name),
        }
    }

    /// Disconnects the client at its next chance.
    pub fn kill(&self) {
        self.killed.store(true, Ordering::SeqCst);
        self.wake.wake();
    }

    /// Ready once the client is killed; else registers `cx`'s waker to be woken by
    /// the kill. Checked again after registering: a kill in between woke nobody.
    pub fn poll_killed(&self, cx: &mut std::task::Context<'_>) -> Poll<()> {
        if !self.killed.load(Ordering::SeqCst) {
            self.wake.register(cx.waker());
            if !self.killed.load(Ordering::SeqCst) {
                return Poll::Pending;
            }
        }
        Poll::Ready(())
    }

    /// Resolves once the client is killed.
    pub async fn until_killed(&self) {
        std::future::poll_fn(|cx| self.poll_killed(cx)).await
    }

    /// The connection marks its wait in a blocking command (BLPOP...): `true` when it
    /// starts, `false` when it ends.
    pub fn set_blocked(&self, blocked: bool) {
        let state = if blocked {
            WaitState::Yes
        } else {
            WaitState::No
        };
        self.blocking.store(state as u8, Ordering::SeqCst);
    }

    /// Waits in a blocking command (CLIENT LIST's flag `b`).
    pub fn is_blocked(&self) -> bool {
        self.blocking.load(Ordering::Relaxed) != WaitState::No as u8
    }

    /// CLIENT UNBLOCK: asks a client that waits in a blocking command to stop, as if
    /// its timeout had passed (or with an error). False when it does not wait.
    pub fn unblock(&self, with_error: bool) -> bool {
        let to = if with_error {
            WaitState::UnblockError
        } else {
            WaitState::UnblockTimeout
        };
        let asked = self
            .blocking
            .compare_exchange(
                WaitState::Yes as u8,
                to as u8,
                Ordering::SeqCst,
                Ordering::SeqCst,
            )
            .is_ok();
        if asked {
            self.wake.wake();
        }
        asked
    }

    /// Resolves once CLIENT UNBLOCK asked this client to stop waiting: `true` when it
    /// asked for an error. Registers with the same wake slot as a kill.
    pub async fn until_unblocked(&self) -> bool {
        let asked = || match self.blocking.load(Ordering::SeqCst) {
            s if s == WaitState::UnblockTimeout as u8 => Some(false),
            s if s == WaitState::UnblockError as u8 => Some(true),
            _ => None,
        };
        std::future::poll_fn(|cx| {
            if let Some(e) = asked() {
                return Poll::Ready(e);
            }
            self.wake.register(cx.waker());
            asked().map_or(Poll::Pending, Poll::Ready)
        })
        .await
    }
}

/// `ClientInfo::blocking`'s states.
#[repr(u8)]
#[derive(Clone, Copy)]
enum WaitState {
    No,
    Yes,
    UnblockTimeout,
    UnblockError,
}

/// A connection task's waker, registered while it waits, woken from other threads.
/// The flag it wakes for is set (SeqCst) before `wake` and read (SeqCst) after
/// `register`, so a wake-up is never lost: either the reader sees the flag, or the
/// waker was in the slot when `wake` looked.
#[derive(Default)]
pub struct WakeSlot {
    waker: Mutex<Option<Waker>>,
    /// How many times a waker was put in the slot (changed under the lock only).
    stores: AtomicU64,
}

impl WakeSlot {
    pub fn register(&self, waker: &Waker) {
        let mut slot = self.waker.lock();
        if !slot.as_ref().is_some_and(|w| w.will_wake(waker)) {
            *slot = Some(waker.clone());
            let stores = self.stores.load(Ordering::Relaxed) + 1;
            self.stores.store(stores, Ordering::Release);
        }
    }

    /// `register` for a caller that registers the same waker at every wait (a
    /// connection's loop): nothing to do, and no lock taken (a lock and an unlock are
    /// two atomic instructions), while the slot still holds the waker this caller put
    /// there last. `last` is the caller's note of that waker and of `stores` then.
    pub fn register_again(&self, waker: &Waker, last: &mut Option<(Waker, u64)>) {
        if let Some((w, stores)) = last {
            if w.will_wake(waker) && self.stores.load(Ordering::Acquire) == *stores {
                return;
            }
        }
        self.register(waker);
        *last = Some((waker.clone(), self.stores.load(Ordering::Acquire)));
    }

    pub fn wake(&self) {
        if let Some(w) = self.waker.lock().as_ref() {
            w.wake_by_ref();
        }
    }
}

/// A connection's own state, owned by its task.
pub struct ClientState {
    pub info: Arc<ClientInfo>,
    pub db: usize,
    /// 2 or 3, set by HELLO.
    pub proto: u8,
    /// Authenticated (AUTH, HELLO AUTH, or the default user is on and nopass).
    pub authed: bool,
    /// The ACL user; re-read when `acl_generation` is behind `Acl::generation`.
    pub user: Arc<User>,
    acl_generation: u64,
    /// Close the connection after this reply is written (QUIT, protocol errors).
    pub close_after_reply: bool,
    /// Set by BLPOP/BRPOP when they must wait: the connection awaits it before
    /// reading further requests, and sends the reply itself.
    pub blocked: Option<crate::commands::exec::blocking::Blocked>,
    /// The channels and patterns this client subscribes to; RESP2 clients with any are
    /// in subscribed mode.
    pub pubsub: crate::commands::families::pubsub::ClientSubs,
    /// The transaction being queued, between MULTI and EXEC / DISCARD.
    pub multi: Option<crate::commands::exec::multi::Transaction>,
    /// The keys WATCHed and the flag writes to them set.
    pub watch: crate::commands::exec::multi::Watching,
    /// Client-side caching: the mode, CLIENT CACHING, invalidations due after a reply.
    pub tracking: ClientTracking,
    /// What this request's writes put in the append-only log, appended when the
    /// request ends (a script's or EXEC's effects, as one MULTI/EXEC).
    pub aof_pending: Vec<crate::durability::aof::Entry>,
}

impl ClientState {
    /// A new connection: the default user, authenticated if it is on and nopass.
    pub fn new(info: Arc<ClientInfo>, acl: &Acl) -> ClientState {
        let acl_generation = acl.generation();
        let user = acl.default_user();
        ClientState {
            info,
            db: 0,
            proto: 2,
            authed: user.auto_auth(),
            user,
            acl_generation,
            close_after_reply: false,
            blocked: None,
            pubsub: Default::default(),
            multi: None,
            watch: Default::default(),
            tracking: Default::default(),
            aof_pending: Vec::new(),
        }
    }

    pub fn id(&self) -> u64 {
        self.info.id
    }

    /// Authenticated as `user` (AUTH), or back to the default user (RESET).
    pub fn set_user(&mut self, user: Arc<User>, acl: &Acl) {
        *self.info.user.lock() = user.name.clone();
        self.user = user;
        self.acl_generation = acl.generation();
    }

    /// The client's user, re-read if any user changed since (ACL SETUSER applies to
    /// connected clients at once, as in Redis). One atomic load when nothing changed.
    #[inline]
    pub fn current_user(&mut self, acl: &Acl) -> &User {
        let generation = acl.generation();
        if generation != self.acl_generation {
            self.acl_generation = generation;
            match acl.get(&self.user.name) {
                Some(u) => self.user = u,
                // Deleted (ACL DELUSER, ACL LOAD): disconnected, as in Redis, and
                // allowed nothing until then.
                None => {
                    self.info.kill();
                    self.user = Arc::new(User::new(&self.user.name));
                }
            }
        }
        &self.user
    }

    pub fn resp2_subscribed(&self) -> bool {
        self.proto == 2 && self.subscriptions() > 0
    }

    /// Subscribed channels plus patterns.
    pub fn subscriptions(&self) -> usize {
        self.pubsub.channels.len() + self.pubsub.patterns.len()
    }

    pub fn set_proto(&mut self, proto: u8) {
        self.proto = proto;
        self.info.resp.store(proto, Ordering::Relaxed);
    }

    pub fn select(&mut self, db: usize) {
        self.db = db;
        self.info.db.store(db, Ordering::Relaxed);
    }
}
