//! One task per connection: read, execute every complete request, write once.

use crate::commands::{dispatch, ClientInfo, ClientState, Ctx, NetState, Shared};
use crate::protocol::{encode, parse_request, Limits, Reply};
use bytes::BytesMut;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Read buffer growth step.
const READ_CHUNK: usize = 16 * 1024;

/// While paused, stop reading past this much buffered input.
const PAUSED_INPUT_LIMIT: usize = 1024 * 1024;

pub(super) async fn serve(shared: Arc<Shared>, mut stream: TcpStream, peer: SocketAddr) {
    let _ = stream.set_nodelay(true);
    if shared.clients.len() >= shared.config.maxclients {
        shared
            .stats
            .rejected_connections
            .fetch_add(1, Ordering::Relaxed);
        let _ = stream
            .write_all(b"-ERR max number of clients reached\r\n")
            .await;
        return;
    }
    let laddr = stream.local_addr().unwrap_or(peer);
    let id = shared.next_client_id.fetch_add(1, Ordering::Relaxed);
    let info = Arc::new(ClientInfo::new(id, peer, laddr, shared.clock.now_ms()));
    shared.clients.insert(id, info.clone());
    let authed = shared.config.requirepass.is_none();
    let mut client = ClientState::new(info.clone(), authed);
    if let Err(e) = run(&shared, &mut stream, &mut client).await {
        tracing::debug!(client = id, "connection ended: {e}");
    }
    shared.clients.remove(&id);
    if info.paused_ticket.load(Ordering::SeqCst) != 0 {
        shared.pause_turn.notify_waiters();
    }
}

async fn run(
    shared: &Shared,
    stream: &mut TcpStream,
    client: &mut ClientState,
) -> std::io::Result<()> {
    let limits = Limits {
        max_bulk_len: shared.config.proto_max_bulk_len,
        ..Limits::default()
    };
    let info = client.info.clone();
    let mut rbuf = BytesMut::with_capacity(READ_CHUNK);
    let mut wbuf = BytesMut::with_capacity(READ_CHUNK);
    let mut net = shared.net.subscribe();
    let mut eof = false;
    loop {
        // While the node is paused nothing is executed, but input is still read, as the
        // kernel would buffer it for a stopped process: on resume it all runs.
        let paused = *net.borrow_and_update() == NetState::Paused;
        if !paused {
            wait_for_turn(shared, &info).await;
            // Execute every complete request in the buffer, then write all replies at once.
            let mut close = false;
            loop {
                match parse_request(&mut rbuf, &limits) {
                    Ok(None) => break,
                    Ok(Some(args)) if args.is_empty() => continue,
                    Ok(Some(args)) => {
                        let mut ctx = Ctx::new(shared, client);
                        let reply = dispatch(&mut ctx, &args);
                        encode(&reply, client.proto, &mut wbuf);
                        if client.close_after_reply {
                            close = true;
                            break;
                        }
                    }
                    Err(e) => {
                        tracing::debug!(client = client.id(), "{e}");
                        encode(&Reply::error(format!("ERR {e}")), client.proto, &mut wbuf);
                        close = true;
                        break;
                    }
                }
            }
            if !wbuf.is_empty() {
                let written = stream.write_all(&wbuf).await;
                wbuf.clear();
                // A peer that went away still had its requests executed; that is all.
                if written.is_err() {
                    close = true;
                }
            }
            info.has_input.store(false, Ordering::SeqCst);
            if info.paused_ticket.swap(0, Ordering::SeqCst) != 0 {
                shared.pause_turn.notify_waiters();
            }
            if close || eof || info.killed.load(Ordering::SeqCst) {
                return Ok(());
            }
        }
        if rbuf.capacity() - rbuf.len() < READ_CHUNK / 4 {
            rbuf.reserve(READ_CHUNK);
        }
        let can_read = !eof && !(paused && rbuf.len() > PAUSED_INPUT_LIMIT);
        tokio::select! {
            n = stream.read_buf(&mut rbuf), if can_read => {
                if n? == 0 {
                    eof = true;
                } else {
                    info.has_input.store(true, Ordering::SeqCst);
                    if paused && info.paused_ticket.load(Ordering::SeqCst) == 0 {
                        let ticket = shared.pause_tickets.fetch_add(1, Ordering::SeqCst) + 1;
                        info.paused_ticket.store(ticket, Ordering::SeqCst);
                    }
                }
            }
            changed = net.changed() => {
                if changed.is_err() {
                    return Ok(());
                }
            }
            _ = info.kill.notified() => return Ok(()),
        }
    }
}

/// After a pause, waits until every connection whose backlog arrived earlier has run
/// it: requests sent to a paused node execute in arrival order, as one socket buffer
/// of a stopped process would replay them.
async fn wait_for_turn(shared: &Shared, info: &ClientInfo) {
    let mine = info.paused_ticket.load(Ordering::SeqCst);
    if mine == 0 {
        return;
    }
    loop {
        let turn = shared.pause_turn.notified();
        tokio::pin!(turn);
        turn.as_mut().enable();
        let earlier = shared.clients.iter().any(|c| {
            let t = c.paused_ticket.load(Ordering::SeqCst);
            t != 0 && t < mine
        });
        if !earlier || info.killed.load(Ordering::SeqCst) {
            return;
        }
        tokio::select! {
            _ = turn => {}
            // Killed while waiting: the caller sees `killed` after this batch.
            _ = info.kill.notified() => {
                info.killed.store(true, Ordering::SeqCst);
                return;
            }
        }
    }
}
