//! What a connection costs the server between requests: fleets keep a pool of
//! connections to every lock node, most of them idle. An idle client (connected, one
//! PING answered, nothing half-read or unwritten) holds no read or write buffer, only
//! its task and its entry in the client list; a big request's buffer goes back once it
//! has run. The heap is the whole test process's (the counting allocator is global),
//! hence one test in this binary.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use support::*;

fn used_memory(info: &str) -> usize {
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no used_memory in {info}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn an_idle_connection_holds_no_buffers() {
    let server = start().await;
    let mut c = Raw::to(&server).await;
    const CLIENTS: usize = 300;
    let mut idle = Vec::with_capacity(CLIENTS);
    let before = used_memory(&c.cmd(&["INFO", "memory"]).await);
    let addr = server.addr();
    let idle = tokio::task::spawn_blocking(move || {
        for _ in 0..CLIENTS {
            let mut s = TcpStream::connect(addr).expect("connect");
            s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
                .expect("timeout");
            s.write_all(b"PING\r\n").expect("write");
            let mut pong = [0u8; 7];
            s.read_exact(&mut pong).expect("read");
            assert_eq!(&pong, b"+PONG\r\n");
            idle.push(s);
        }
        idle
    })
    .await
    .expect("clients connect");
    let after = used_memory(&c.cmd(&["INFO", "memory"]).await);
    let per_client = after.saturating_sub(before) / CLIENTS;
    // Two 16 KB buffers each (read and write) were ~40 KB of heap per idle client.
    assert!(
        per_client < 8 * 1024,
        "{per_client} bytes of heap per idle client ({before} -> {after})"
    );
    assert_eq!(c.cmd(&["PING"]).await, "+PONG\r\n");
    drop(idle);

    // A big request's read buffer is freed once the request has run, not kept for the
    // next one (nor lent to other connections).
    let before = used_memory(&c.cmd(&["INFO", "memory"]).await);
    // Just under 8 MB: the buffer, grown by doubling from 16 KB, ends up nearly full,
    // so what is left of it once the request is split off is small, however big the
    // allocation behind it.
    let big = "x".repeat((8 << 20) - 6000);
    assert_eq!(c.cmd(&["SET", "big", &big]).await, OK);
    drop(big);
    assert_eq!(c.cmd(&["DEL", "big"]).await, int(1));
    let after = used_memory(&c.cmd(&["INFO", "memory"]).await);
    assert!(
        after < before + (1 << 20),
        "{before} -> {after} bytes of heap after a SET of nearly 8 MB and its DEL"
    );
}
