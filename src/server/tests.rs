//! The runtime's order of service.

use super::Server;
use crate::config::Config;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Reads one reply line (up to and including its CRLF).
fn read_line(s: &mut TcpStream) -> String {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while !line.ends_with(b"\r\n") {
        match s.read(&mut byte) {
            Ok(1) => line.push(byte[0]),
            other => panic!("reading a reply: {other:?} after {line:?}"),
        }
    }
    String::from_utf8_lossy(&line).into_owned()
}

/// Waits until the server's end of `client`'s connection holds `bytes` unread bytes
/// in its receive buffer (the kernel's `rx_queue` in /proc/net/tcp): what was sent has
/// arrived, whether or not the server looked. Polls, bounded.
fn wait_arrived(client: &TcpStream, bytes: usize) {
    let server = client.peer_addr().expect("peer").port();
    let port = client.local_addr().expect("local").port();
    // Hex "ADDR:PORT" as /proc/net/tcp writes them; 127.0.0.1 is 0100007F.
    let (local, remote) = (
        format!("0100007F:{server:04X}"),
        format!("0100007F:{port:04X}"),
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
        let queued = table.lines().find_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            (f.get(1) == Some(&local.as_str()) && f.get(2) == Some(&remote.as_str()))
                .then(|| f[4].split(':').nth(1).map(|q| usize::from_str_radix(q, 16)))
                .flatten()
        });
        if let Some(Ok(n)) = queued {
            if n >= bytes {
                return;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{bytes} bytes not in the server's receive buffer: {queued:?}"
        );
        std::thread::yield_now();
    }
}

/// Requests that arrive while the worker is busy are served in the order they
/// arrived, whichever connection they came on: the first `SET NX` wins, as on Redis.
/// (tokio's LIFO slot would run the last arrival first: the nodes of a Redlock then
/// split their votes under contention.)
#[test]
fn concurrent_requests_are_served_in_arrival_order() {
    let runtime = Server::runtime(1).expect("runtime");
    let handle = runtime
        .block_on(Server::start(Config::for_tests()))
        .expect("server starts");
    let addr = handle.addr();
    let mut clients: Vec<TcpStream> = (0..6)
        .map(|_| {
            let mut c = TcpStream::connect(addr).expect("connect");
            c.set_nodelay(true).expect("nodelay");
            c.set_read_timeout(Some(Duration::from_secs(10)))
                .expect("timeout");
            c.write_all(b"PING\r\n").expect("write");
            assert_eq!(read_line(&mut c), "+PONG\r\n");
            c
        })
        .collect();
    for round in 0..5 {
        // Hold the one worker: a task that blocks it without yielding until every SET
        // below is in the server's socket buffers. They are reported in one batch when
        // it lets go, in the order they arrived.
        let (started, wait_started) = std::sync::mpsc::channel();
        let (release, wait_release) = std::sync::mpsc::channel::<()>();
        runtime.spawn(async move {
            started.send(()).expect("test waits");
            wait_release.recv().expect("the test lets go");
        });
        wait_started.recv().expect("the worker runs the blocker");
        for (i, c) in clients.iter_mut().enumerate() {
            let set = format!("SET lock c{i} NX PX 10000\r\n");
            c.write_all(set.as_bytes()).expect("write");
            // Each one delivered before the next is sent: the arrival order is the
            // clients' order.
            wait_arrived(c, set.len());
        }
        release.send(()).expect("the worker waits");
        let replies: Vec<String> = clients.iter_mut().map(read_line).collect();
        let mut expected = vec!["$-1\r\n".to_string(); clients.len()];
        expected[0] = "+OK\r\n".to_string();
        assert_eq!(replies, expected, "round {round}: the first arrival wins");
        clients[0].write_all(b"DEL lock\r\n").expect("write");
        assert_eq!(read_line(&mut clients[0]), ":1\r\n");
    }
    drop(clients);
    runtime.block_on(handle.shutdown());
}
