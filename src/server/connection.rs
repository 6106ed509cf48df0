//! One task per connection: read, execute every complete request, write once.
//!
//! Generic over the byte stream: a plain TCP connection and a TLS one (already past
//! its handshake) run the same loop.

use crate::commands::exec::blocking::{Blocked, Waiter};
use crate::commands::families::pubsub::{Message, Subscriber};
use crate::commands::{command_table, dispatch, Ctx};
use crate::node::faults::scoped::{After, Instead};
use crate::node::{ClientInfo, ClientState, NetState, Shared};
use crate::protocol::{encode, errors, parse_request_into, Limits, Reply};
use bytes::BytesMut;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};

/// Read buffer growth step, and the size of a pooled buffer.
const READ_CHUNK: usize = 16 * 1024;

/// While paused, stop reading past this much buffered input.
const PAUSED_INPUT_LIMIT: usize = 1024 * 1024;

/// A buffer that grew past this for one big request or reply (a 500 MB SET or GET)
/// is dropped once it is empty again, not pooled: its memory goes back at once, not
/// when the client disconnects.
const SHRINK_BUFFER_ABOVE: usize = 1024 * 1024;

/// A connection holds a read or write buffer only while it has bytes in it: waiting
/// idle with nothing half-read and nothing unwritten it holds none (as Redis frees an
/// idle client's query buffer), and takes one from this thread's pool when input
/// comes. 10k idle clients held 16.6 KB of RSS each with two 16 KB buffers apiece.
mod pool {
    use super::{BytesMut, READ_CHUNK, SHRINK_BUFFER_ABOVE};
    use std::cell::RefCell;

    /// Empty buffers kept per worker thread for the next connection that has input.
    const POOL_MAX: usize = 64;

    thread_local! {
        static POOL: RefCell<Vec<BytesMut>> = const { RefCell::new(Vec::new()) };
    }

    /// Gives `buf` a buffer if it has none.
    #[inline]
    pub(super) fn take(buf: &mut BytesMut) {
        if buf.capacity() == 0 {
            *buf = POOL
                .with(|p| p.borrow_mut().pop())
                .unwrap_or_else(|| BytesMut::with_capacity(READ_CHUNK));
        }
    }

    /// Hands an empty `buf` back to the pool (or frees it, if big or the pool is full).
    #[inline]
    pub(super) fn give(buf: &mut BytesMut) {
        debug_assert!(buf.is_empty());
        if buf.capacity() == 0 {
            return;
        }
        let buf = std::mem::take(buf);
        if buf.capacity() <= SHRINK_BUFFER_ABOVE {
            POOL.with(|p| {
                let mut p = p.borrow_mut();
                if p.len() < POOL_MAX {
                    p.push(buf);
                }
            });
        }
    }
}

/// What protected mode answers a client that is not on the loopback address (Redis
/// 7.0's words, typo included), before closing the connection.
const PROTECTED_MODE_DENIED: &[u8] = b"-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Setup a an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n";

/// A connection's byte stream: `TcpStream`, or a TLS stream over one.
pub(super) trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Stream for S {}

/// Serves one client until it disconnects or is killed. `peer` and `laddr` are the TCP
/// addresses (CLIENT LIST's addr and laddr).
pub(super) async fn serve<S: Stream>(
    shared: Arc<Shared>,
    mut stream: S,
    peer: SocketAddr,
    laddr: SocketAddr,
) {
    if shared.clients.len() >= shared.maxclients() {
        shared
            .stats
            .rejected_connections
            .fetch_add(1, Ordering::Relaxed);
        let _ = stream
            .write_all(b"-ERR max number of clients reached\r\n")
            .await;
        let _ = stream.flush().await;
        return;
    }
    if shared.acl.protected_refuses(peer.ip()) {
        shared
            .stats
            .rejected_connections
            .fetch_add(1, Ordering::Relaxed);
        // Boxed: its read buffer and timer would otherwise sit in every connection's
        // task (a future is as big as its biggest state), idle ones included.
        Box::pin(refuse_protected(&mut stream)).await;
        return;
    }
    let id = shared.next_client_id.fetch_add(1, Ordering::Relaxed);
    let info = Arc::new(ClientInfo::new(id, peer, laddr, shared.clock.now_ms()));
    shared.clients.insert(id, info.clone());
    shared.connections.fetch_add(1, Ordering::Relaxed);
    let mut client = ClientState::new(info.clone(), &shared.acl);
    if let Err(e) = run(&shared, &mut stream, &mut client).await {
        tracing::debug!(client = id, "connection ended: {e}");
    }
    if let Some(subscriber) = &client.pubsub.handle {
        subscriber.close();
    }
    shared.pubsub.forget(id, &mut client.pubsub);
    shared.monitors.remove(id);
    crate::commands::admin::tracking::disable(&shared, &mut client);
    crate::commands::exec::multi::forget(&shared, &mut client);
    shared.clients.remove(&id);
    shared.connections.fetch_sub(1, Ordering::Relaxed);
    shared.faults.connection_gone(&info);
}

/// Protected mode's refusal: the reason, then the close.
async fn refuse_protected<S: Stream>(stream: &mut S) {
    let _ = stream.write_all(PROTECTED_MODE_DENIED).await;
    let _ = stream.flush().await;
    let _ = stream.shutdown().await;
    // What the client sent already is read before the close (briefly, a bounded
    // amount): closing with unread input sends a reset, which can make the client
    // lose the answer.
    let _ = tokio::time::timeout(std::time::Duration::from_millis(100), async {
        let mut buf = [0u8; 4096];
        for _ in 0..16 {
            if !matches!(stream.read(&mut buf).await, Ok(n) if n > 0) {
                break;
            }
        }
    })
    .await;
}

/// One connection's turns: run every complete request read (`Conn::run_batch`), write
/// the replies at once, then wait for input, a pub/sub message or a wake-up
/// (`Conn::next_event`), until the client goes or is killed.
async fn run<S: Stream>(
    shared: &Shared,
    stream: &mut S,
    client: &mut ClientState,
) -> std::io::Result<()> {
    let info = client.info.clone();
    let subscriber = Subscriber::new(info.clone());
    // Other connections' client-side caching invalidations come through it too.
    let _ = info.pushes.set(Arc::downgrade(&subscriber));
    client.pubsub.handle = Some(subscriber.clone());
    let mut conn = Conn {
        shared,
        stream,
        client,
        info,
        subscriber,
        limits: Limits {
            max_bulk_len: shared.config.proto_max_bulk_len,
            ..Limits::default()
        },
        rbuf: BytesMut::new(),
        wbuf: BytesMut::new(),
        args: Vec::new(),
    };
    let mut eof = false;
    // The read buffer held more than SHRINK_BUFFER_ABOVE at some point: once empty, it
    // is dropped, not pooled (split off request by request, its capacity no longer
    // says how big its allocation is).
    let mut rbuf_grown = false;
    // The waker this loop last put in the client's wake slot (`WakeSlot::register_again`).
    let mut registered = None;
    loop {
        // While the node is paused nothing is executed, but input is still read, as the
        // kernel would buffer it for a stopped process: on resume it all runs.
        let net_seen = shared.faults.net_now.load(Ordering::SeqCst);
        let paused = net_seen == NetState::Paused as u8;
        if !paused {
            let Some(batch) = conn.run_batch().await? else {
                return Ok(());
            };
            // A pipelined batch's replies wait until the other ready connections have
            // run theirs, as Redis writes all replies in one pass before it waits
            // again: a client woken by the first of a burst of replies is still awake
            // for the rest, instead of being woken once per connection (fewer
            // wake-ups, for it and for the kernel). With the prefetch above, SET NX
            // PX at P=16 went from ~1.0x to 1.4-1.65x Redis's rps (benches/load.sh,
            // benches/memory.py).
            // tokio resumes a yielded task only once it has run every ready task and
            // polled the I/O driver.
            // A single request waits too when other connections are open. At P=1
            // with 50 clients (EVALSHA) the server slept and was woken again 30k
            // times per 200k requests, Redis 20k; the wake of a sleeping server is
            // paid in the sending client's system call. Waiting brought that to ~25k,
            // the client's CPU per request down ~3% and the rps up ~3%, for ~2% more
            // server CPU. With one connection open nobody shares the wake, and the
            // extra driver poll would only add latency: answered at once.
            let company = batch.ran > 1 || shared.connections.load(Ordering::Relaxed) > 1;
            if company && !conn.wbuf.is_empty() {
                tokio::task::yield_now().await;
            }
            // No reply before the log's fsync of what this batch, or any batch before
            // its end, changed: a reply may tell of it. A log that failed answers
            // nothing: the connection closes.
            if !wait_for_log(shared, batch.log_failed, batch.log_life).await {
                return Ok(());
            }
            // A peer that went away still had its requests executed; that is all.
            let written = write_out(conn.stream, &mut conn.wbuf, &conn.info).await;
            if crate::durability::aof::rewrite::due(shared) {
                let start = || crate::durability::aof::rewrite::start(shared);
                if let Some(Err(e)) =
                    crate::commands::exec::gate::with_exclusive(shared, start).await
                {
                    tracing::warn!("automatic rewrite of the append-only log: {e}");
                }
            }
            shared.faults.batch_done(&conn.info, batch.held);
            if !matches!(written, Ok(true))
                || batch.close
                || conn.info.killed.load(Ordering::SeqCst)
            {
                return Ok(());
            }
            if batch.held || batch.more {
                continue;
            }
            if eof {
                return Ok(());
            }
        }
        // Idle: the buffers go back to the pool (a write that failed left bytes in
        // wbuf only on the way out).
        if conn.wbuf.is_empty() {
            pool::give(&mut conn.wbuf);
        }
        if rbuf_grown && conn.rbuf.is_empty() {
            conn.rbuf = BytesMut::new();
            rbuf_grown = false;
        }
        let input_full = paused && conn.rbuf.len() > PAUSED_INPUT_LIMIT;
        let can_read = !eof && !input_full;
        match conn
            .next_event(can_read, paused, net_seen, &mut registered)
            .await
        {
            Event::Read(n) => {
                if n? == 0 {
                    eof = true;
                } else {
                    rbuf_grown |= conn.rbuf.len() > SHRINK_BUFFER_ABOVE;
                    shared.faults.input_arrived(&conn.info);
                }
            }
            // The batch above writes it and any queued behind it.
            Event::Message(msg) => {
                conn.subscriber.taken(&msg);
                pool::take(&mut conn.wbuf);
                encode(&msg.reply, conn.client.proto, &mut conn.wbuf);
            }
            Event::Woken if conn.info.killed.load(Ordering::SeqCst) => return Ok(()),
            // The network state changed: the loop reads it again.
            Event::Woken => {}
        }
    }
}

/// One connection's state across its turns (`run`).
struct Conn<'a, S> {
    shared: &'a Shared,
    stream: &'a mut S,
    client: &'a mut ClientState,
    info: Arc<ClientInfo>,
    /// This connection's pub/sub delivery queue.
    subscriber: Arc<Subscriber>,
    limits: Limits,
    /// Input read and not run yet, and replies not written yet: both from the pool
    /// while they hold bytes (`pool`).
    rbuf: BytesMut,
    wbuf: BytesMut,
    /// One request's arguments (slices of the read buffer): reused, emptied after each
    /// command so they never pin a big request's buffer.
    args: Vec<bytes::Bytes>,
}

/// How a batch stopped (`Conn::run_batch`).
struct BatchEnd {
    /// Requests run in this batch.
    ran: usize,
    /// The connection closes once the replies are written.
    close: bool,
    /// Paused (or taken down) in the middle of the batch: the rest waits.
    held: bool,
    /// Stopped at WRITE_BATCH_LIMIT: more requests may be buffered already.
    more: bool,
    /// The append-only log had failed when the batch started: its key commands were
    /// refused, so its replies tell nothing unsynced (`wait_for_log`).
    log_failed: bool,
    /// The log's life when the batch started (`wait_for_log`).
    log_life: u64,
}

impl<S: Stream> Conn<'_, S> {
    /// Waits for this connection's turn, then executes every complete request in the
    /// read buffer, their replies (and pub/sub messages queued meanwhile) into the
    /// write buffer, to be written at once. `None`: the connection is over (the node
    /// was taken off the network, or the client went or was killed while a command
    /// blocked).
    async fn run_batch(&mut self) -> std::io::Result<Option<BatchEnd>> {
        let shared = self.shared;
        let info = &*self.info;
        let subscriber = &*self.subscriber;
        shared.wait_for_turn(info).await;
        if self.rbuf.len() >= PREFETCH_MIN_BYTES {
            prefetch_keys(shared, self.client, &self.rbuf, &self.limits);
        }
        let mut end = BatchEnd {
            ran: 0,
            close: false,
            held: false,
            more: false,
            log_failed: shared.aof.is_failed(),
            log_life: shared.aof.life(),
        };
        // The mark that this connection is executing (`Shared::continue_request`):
        // set by the batch's first request, cleared when the batch stops or a
        // command blocks.
        let mut executing = None;
        if !self.rbuf.is_empty() || subscriber.has_queued() {
            pool::take(&mut self.wbuf);
        }
        loop {
            // Nothing left to run: no request to mark (`begin_request` and its
            // guard store with SeqCst, a full barrier each).
            if self.rbuf.is_empty() {
                break;
            }
            // A node a fault control took off the network executes nothing more,
            // not even requests already read (see `Shared::set_net`).
            match shared.continue_request(info, &mut executing) {
                Ok(()) => {}
                Err(NetState::Down) => return Ok(None),
                Err(_) => {
                    end.held = true;
                    break;
                }
            }
            // AUTH earlier in this batch lifts the pre-AUTH limits for the rest.
            self.limits.unauthenticated = !self.client.authed;
            match parse_request_into(&mut self.rbuf, &self.limits, &mut self.args) {
                Ok(false) => break,
                Ok(true) if self.args.is_empty() => continue,
                Ok(true) => {
                    end.ran += 1;
                    // A scoped fault or the history (`faults::scoped`): `None`,
                    // after one atomic load, when neither is set.
                    let scoped = &shared.faults.scoped;
                    let hook = scoped.before_request(&shared.clock, info, &self.args);
                    let instead = hook.as_ref().and_then(|h| h.instead(scoped));
                    let mut reply = match instead {
                        None => {
                            let mut ctx = Ctx::new(shared, self.client);
                            dispatch_caught(&mut ctx, &mut self.args).await
                        }
                        Some(Instead::Answer(r)) => r,
                        Some(Instead::Close) => {
                            self.args.clear();
                            end.close = true;
                            break;
                        }
                    };
                    self.args.clear();
                    // Wake BLPOP waiters on keys this command pushed to, queue
                    // pub/sub messages ahead of the reply (as Redis orders a PUBLISH
                    // to oneself), and wait here if the command blocked.
                    crate::commands::exec::gate::serve_blocked(shared).await;
                    take_messages(subscriber, self.client.proto, &mut self.wbuf);
                    if let Some(blocked) = self.client.blocked.take() {
                        // Waiting is not executing (`set_net` must not wait for it).
                        executing = None;
                        if !wait_for_log(shared, end.log_failed, end.log_life).await
                            || !write_out(self.stream, &mut self.wbuf, info).await?
                        {
                            return Ok(None);
                        }
                        // Boxed, as rare: its timers stay out of the task's size.
                        let wait = wait_blocked(shared, self.stream, &mut self.rbuf, info, blocked);
                        match Box::pin(wait).await? {
                            Some(r) => reply = r,
                            None => return Ok(None),
                        }
                    }
                    if let Some(hook) = hook {
                        // A delay is a wait, not execution (`set_net` must not
                        // wait for it).
                        executing = None;
                        let after = hook.after(scoped, &shared.clock, info, &reply);
                        match Box::pin(after).await {
                            After::Send => {}
                            After::SendAndClose => end.close = true,
                            After::Drop => {
                                end.close = true;
                                break;
                            }
                        }
                    }
                    encode(&reply, self.client.proto, &mut self.wbuf);
                    // Invalidations of this client's own changes follow its reply.
                    for push in self.client.tracking.after_reply.drain(..) {
                        encode(&push, self.client.proto, &mut self.wbuf);
                    }
                    if self.client.close_after_reply || end.close {
                        end.close = true;
                        break;
                    }
                    // Big replies (GETs of a large value, pipelined): write what
                    // there is before running more, so the replies of a client that
                    // does not read wait in its socket, not in our memory.
                    if self.wbuf.len() >= WRITE_BATCH_LIMIT {
                        end.more = true;
                        break;
                    }
                }
                Err(e) => {
                    tracing::debug!(client = self.client.id(), "{e}");
                    let reply = Reply::error(format!("ERR {e}"));
                    encode(&reply, self.client.proto, &mut self.wbuf);
                    end.close = true;
                    break;
                }
            }
        }
        drop(executing);
        take_messages(subscriber, self.client.proto, &mut self.wbuf);
        Ok(Some(end))
    }

    /// Waits for what comes first: input (when `can_read`), a pub/sub message (not
    /// while `paused`: a stopped process sends nothing), a kill or a change of the
    /// node's network state from `net_seen`, or a message queued for this client (the
    /// wake slot). One wait per turn, on one task wake-up: nothing is built or
    /// registered with anything shared by other connections.
    async fn next_event(
        &mut self,
        can_read: bool,
        paused: bool,
        net_seen: u8,
        registered: &mut Option<(Waker, u64)>,
    ) -> Event {
        let net_now = &self.shared.faults.net_now;
        let (stream, rbuf) = (&mut *self.stream, &mut self.rbuf);
        let (info, subscriber) = (&*self.info, &*self.subscriber);
        std::future::poll_fn(|cx| {
            if can_read {
                if let Poll::Ready(n) = poll_read_pooled(stream, cx, rbuf) {
                    return Poll::Ready(Event::Read(n));
                }
            }
            info.wake.register_again(cx.waker(), registered);
            // Checked after registering: a message, a kill or a change queued in
            // between woke nobody.
            if !paused && subscriber.has_queued() {
                if let Some(msg) = subscriber.pop() {
                    return Poll::Ready(Event::Message(msg));
                }
            }
            if info.killed.load(Ordering::SeqCst) || net_now.load(Ordering::SeqCst) != net_seen {
                return Poll::Ready(Event::Woken);
            }
            Poll::Pending
        })
        .await
    }
}

/// At most this many requests of a batch have their keys prefetched ahead.
const PREFETCH_AHEAD: usize = 32;

/// A batch shorter than this is not prefetched: too few misses to overlap to pay for
/// the extra pass (MULTI / SET / EXEC is three requests with one key).
const PREFETCH_MIN: usize = 4;

/// Input shorter than this is not even looked at for prefetching: PREFETCH_MIN keyed
/// requests with short keys are ~100 bytes, and below that the walk over the
/// requests costs more than it could save (one EVALSHA, or MULTI / SET / EXEC).
const PREFETCH_MIN_BYTES: usize = 256;

/// Pipelined requests: starts loading every request's entry before the first runs
/// (`Db::prefetch_slots`), so that a batch waits for memory about once rather than
/// once per key. Keys are looked for in the database selected when the batch starts:
/// after a SELECT inside the batch the hints only miss.
fn prefetch_keys(shared: &Shared, client: &ClientState, rbuf: &[u8], limits: &Limits) {
    let mut batch: [(&[u8], &[u8]); PREFETCH_AHEAD] = [(&[], &[]); PREFETCH_AHEAD];
    let mut n = 0;
    crate::protocol::peek_requests(rbuf, limits, |cmd, key| {
        batch[n] = (cmd, key);
        n += 1;
        n < PREFETCH_AHEAD
    });
    if n < PREFETCH_MIN {
        return;
    }
    let db = shared.keyspace.db(client.db);
    let mut hashes = [0u64; PREFETCH_AHEAD];
    let mut keyed = 0;
    for &(cmd, key) in &batch[..n] {
        if !key.is_empty() && command_table::lookup(cmd).is_some_and(|s| s.first_key == 1) {
            hashes[keyed] = db.prefetch_slots(key);
            keyed += 1;
        }
    }
    for &hash in &hashes[..keyed] {
        db.prefetch_entry(hash);
    }
}

/// What ended a connection's wait.
enum Event {
    Read(std::io::Result<usize>),
    Message(Message),
    /// Killed, or the node's network state changed.
    Woken,
}

/// Runs one request; a panic inside it is logged and answered with an error instead
/// of ending the connection's task. Locks held by the command are released on the
/// way out (guards drop while unwinding; parking_lot's locks are not poisoned), and
/// scripting rebuilds its VM itself (`Scripts::run`).
async fn dispatch_caught(ctx: &mut Ctx<'_>, args: &mut Vec<bytes::Bytes>) -> Reply {
    let client = ctx.client.id();
    // The panic is caught in whichever poll of the command it happens (a command may
    // wait for the keyspace gate); the gate's holds are released while unwinding.
    let outcome = {
        let mut dispatched = std::pin::pin!(dispatch(ctx, args));
        std::future::poll_fn(|cx| {
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                dispatched.as_mut().poll(cx)
            })) {
                Ok(std::task::Poll::Ready(reply)) => std::task::Poll::Ready(Ok(reply)),
                Ok(std::task::Poll::Pending) => std::task::Poll::Pending,
                Err(panic) => std::task::Poll::Ready(Err(panic)),
            }
        })
        .await
    };
    match outcome {
        Ok(reply) => reply,
        Err(panic) => {
            let msg = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            tracing::error!(
                client,
                // Empty if the command was queued (MULTI takes the arguments).
                command = %String::from_utf8_lossy(args.first().map_or(&[][..], |a| &a[..])),
                "panic while running a command: {msg}"
            );
            Reply::error(errors::INTERNAL_PANIC)
        }
    }
}

// Pub/sub delivery and blocking waits.

/// At most this much pub/sub output is moved from the queue into the write buffer at a
/// time: the rest stays counted in the queue, so a slow reader hits the output limit.
const PUSH_BATCH: usize = 64 * 1024;

/// Reads into `rbuf`, which holds a pooled buffer only while it has bytes: an empty
/// one is taken for the read and given back if nothing came.
fn poll_read_pooled<S: Stream>(
    stream: &mut S,
    cx: &mut Context<'_>,
    rbuf: &mut BytesMut,
) -> Poll<std::io::Result<usize>> {
    let empty = rbuf.is_empty();
    pool::take(rbuf);
    if rbuf.capacity() - rbuf.len() < READ_CHUNK / 4 {
        rbuf.reserve(READ_CHUNK);
    }
    let spare = rbuf.spare_capacity_mut();
    let mut read = ReadBuf::uninit(spare);
    let start = read.filled().as_ptr();
    let polled = Pin::new(&mut *stream).poll_read(cx, &mut read);
    match polled {
        Poll::Ready(Ok(())) => {
            // A reader may not swap the buffer it was given.
            assert_eq!(start, read.filled().as_ptr());
            let n = read.filled().len();
            // SAFETY: the reader initialised the first n bytes of the spare capacity.
            unsafe { rbuf.set_len(rbuf.len() + n) };
            Poll::Ready(Ok(n))
        }
        Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
        Poll::Pending => {
            if empty {
                pool::give(rbuf);
            }
            Poll::Pending
        }
    }
}

/// Moves queued pub/sub messages into the write buffer (up to `PUSH_BATCH`).
fn take_messages(subscriber: &Subscriber, proto: u8, wbuf: &mut BytesMut) {
    while subscriber.has_queued() && wbuf.len() < PUSH_BATCH {
        let Some(msg) = subscriber.pop() else {
            return;
        };
        subscriber.taken(&msg);
        encode(&msg.reply, proto, wbuf);
    }
}

/// The append-only log's group commit (`durability::aof`): waits until everything
/// appended so far is on disk, which with the log off or nothing new is two loads.
/// False: it never will be (the log failed, or the node restarted under the batch);
/// the replies must not be sent. A batch
/// that began after the failure (`failed_before`) has only refusals to tell.
async fn wait_for_log(shared: &Shared, failed_before: bool, life: u64) -> bool {
    let aof = &shared.aof;
    let seq = aof.appended();
    // Read after `seq` (see `Aof::reset_for_boot`): the node restarted under this
    // batch (the test backend's crash), whose writes may be lost.
    if aof.life() != life {
        return false;
    }
    if failed_before || aof.is_synced(seq) {
        return true;
    }
    match Box::pin(aof.wait_synced(seq)).await {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!("replies not sent: the append-only log did not sync them: {e}");
            false
        }
    }
}

/// A batch of pipelined requests stops executing once its replies reach this size;
/// they are written before the rest runs.
const WRITE_BATCH_LIMIT: usize = 1 << 20;

/// Writes the buffer out; false if the client was killed meanwhile (a subscriber that
/// stopped reading is killed while its write is stuck). The flush matters for TLS: a
/// write may leave the last records in the TLS session's buffer (a no-op on TCP).
async fn write_out<S: Stream>(
    stream: &mut S,
    wbuf: &mut BytesMut,
    info: &ClientInfo,
) -> std::io::Result<bool> {
    if wbuf.is_empty() {
        return Ok(true);
    }
    let write = async {
        stream.write_all(wbuf).await?;
        stream.flush().await
    };
    let mut write = std::pin::pin!(write);
    // The write, or a kill while it is stuck (a reader that stopped reading); the wake
    // slot is registered only then.
    let written = std::future::poll_fn(|cx| {
        if let Poll::Ready(r) = write.as_mut().poll(cx) {
            return Poll::Ready(Some(r));
        }
        info.poll_killed(cx).map(|()| None)
    })
    .await;
    match written {
        Some(r) => r?,
        None => return Ok(false),
    }
    wbuf.clear();
    Ok(true)
}

/// Input read while blocked is kept for later, up to this much.
const BLOCKED_READ_LIMIT: usize = 64 * 1024 * 1024;

/// Ends the wait in the registry whichever way the wait ends (also on disconnect,
/// where the future is dropped), so a push never goes to a dead waiter.
struct WaitGuard<'a> {
    shared: &'a Shared,
    waiter: Arc<Waiter>,
}

impl Drop for WaitGuard<'_> {
    fn drop(&mut self) {
        self.shared.blocking.unblock(&self.waiter);
    }
}

/// Clears the client's blocked mark when its wait ends, however it ends.
struct Unmark<'a>(&'a ClientInfo);

impl Drop for Unmark<'_> {
    fn drop(&mut self) {
        self.0.set_blocked(false);
    }
}

/// Waits for a blocked command (BLPOP, BZPOPMIN...): its reply when served, its timeout
/// on the server clock (a null array) or CLIENT UNBLOCK, or the end of the connection
/// (`None`). Pipelined requests are read but not run until the wait ends, as in Redis.
async fn wait_blocked<S: Stream>(
    shared: &Shared,
    stream: &mut S,
    rbuf: &mut BytesMut,
    info: &ClientInfo,
    blocked: Blocked,
) -> std::io::Result<Option<Reply>> {
    let Blocked {
        waiter,
        mut rx,
        deadline_ms,
    } = blocked;
    let guard = WaitGuard { shared, waiter };
    info.set_blocked(true);
    let _unmark = Unmark(info);
    let timeout = async {
        match deadline_ms {
            Some(d) => shared.clock.sleep_until(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(timeout);
    loop {
        if info.killed.load(Ordering::SeqCst) {
            return Ok(None);
        }
        if rbuf.capacity() - rbuf.len() < READ_CHUNK / 4 {
            rbuf.reserve(READ_CHUNK);
        }
        tokio::select! {
            served = &mut rx => {
                return Ok(Some(served.unwrap_or(Reply::NullArray)));
            }
            _ = &mut timeout => {
                if shared.blocking.unblock(&guard.waiter) {
                    return Ok(Some(Reply::NullArray));
                }
                // Served just as the timeout fired: the element is already sent.
                return Ok(Some(rx.try_recv().unwrap_or(Reply::NullArray)));
            }
            _ = info.until_killed() => return Ok(None),
            with_error = info.until_unblocked() => {
                // CLIENT UNBLOCK: answered as a timeout (or an error), unless an
                // element was handed over at the same moment.
                if shared.blocking.unblock(&guard.waiter) {
                    return Ok(Some(if with_error {
                        Reply::error("UNBLOCKED client unblocked via CLIENT UNBLOCK")
                    } else {
                        Reply::NullArray
                    }));
                }
                return Ok(Some(rx.try_recv().unwrap_or(Reply::NullArray)));
            }
            n = stream.read_buf(rbuf), if rbuf.len() < BLOCKED_READ_LIMIT => {
                if n? == 0 {
                    return Ok(None);
                }
            }
        }
    }
}
