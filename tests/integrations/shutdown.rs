//! SHUTDOWN stops the node it is sent to, as it stops one redis-server: the connection
//! closes without a reply; in `redlockd group` the other nodes keep serving and the
//! process ends with its last node.

use crate::support;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::process::{call, free_ports, os_args, wait_bounded, wait_for_pong, Proc, BOUND};
use support::redis_server::RedisNode;
use support::resp;

/// Sends one command and reads until the server closes the connection: every byte it
/// sent before closing.
fn send_and_read_to_close(port: u16, args: &[&str]) -> Vec<u8> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(BOUND)).unwrap();
    s.write_all(&resp(args)).unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got)
        .expect("the server closes the connection in time");
    got
}

/// Waits (bounded) until connecting to `port` is refused.
fn wait_refused(port: u16) {
    let deadline = Instant::now() + BOUND;
    while TcpStream::connect(("127.0.0.1", port)).is_ok() {
        assert!(Instant::now() < deadline, "port {port} still accepts");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `redlockd group --nodes 3` on free ports, all answering.
fn group_of_3() -> (Proc, u16) {
    for _ in 0..3 {
        let base = free_ports(3);
        let group = Proc::spawn(
            &os_args(&[
                "group",
                "--nodes",
                "3",
                "--base-port",
                &base.to_string(),
                "--restart-delay",
                "0",
                "--log",
                "error",
            ]),
            Stdio::null(),
        );
        // A port taken between the check and the bind: the process exits; try again.
        if (base..base + 3).try_for_each(wait_for_pong).is_ok() {
            return (group, base);
        }
    }
    panic!("no group of 3 on free ports");
}

#[test]
fn shutdown_stops_one_node_of_a_group_and_the_others_keep_serving() {
    let (mut group, base) = group_of_3();
    let stopped = base + 1;
    assert_eq!(
        call(base, &["SET", "k0", "v", "PX", "60000"]).as_deref(),
        Some("+OK")
    );
    assert_eq!(
        send_and_read_to_close(stopped, &["SHUTDOWN"]),
        b"",
        "no reply: the connection closes, as redis-server's does"
    );
    wait_refused(stopped);
    // Its clean-shutdown snapshot is written (once its connections have ended), in its
    // own directory only.
    let snapshot = |port: u16| group.dir.join(format!("node-{port}")).join("snapshot.rdl");
    let deadline = Instant::now() + BOUND;
    while !snapshot(stopped).exists() {
        assert!(
            Instant::now() < deadline,
            "no snapshot from the stopped node"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(!snapshot(base).exists());
    for port in [base, base + 2] {
        assert_eq!(
            call(port, &["PING"]).as_deref(),
            Some("+PONG"),
            "node {port}"
        );
    }
    assert_eq!(call(base, &["GET", "k0"]).as_deref(), Some("$1"));
    assert!(
        group.child.try_wait().unwrap().is_none(),
        "the process runs on"
    );
    // NOSAVE stops another without a snapshot; the last node's stop ends the process.
    assert_eq!(send_and_read_to_close(base, &["SHUTDOWN", "NOSAVE"]), b"");
    wait_refused(base);
    assert!(!snapshot(base).exists());
    assert_eq!(call(base + 2, &["PING"]).as_deref(), Some("+PONG"));
    assert!(group.child.try_wait().unwrap().is_none());
    assert_eq!(
        send_and_read_to_close(base + 2, &["SHUTDOWN", "NOW", "FORCE"]),
        b""
    );
    let status = wait_bounded(&mut group.child);
    assert!(status.success(), "{status:?}");
}

#[test]
fn shutdown_refusals_leave_the_node_serving() {
    let (mut group, base) = group_of_3();
    for (args, reply) in [
        (&["SHUTDOWN", "ABORT"][..], "-ERR No shutdown in progress."),
        (&["SHUTDOWN", "ABORT", "NOW"], "-ERR syntax error"),
        (&["SHUTDOWN", "SAVE", "NOSAVE"], "-ERR syntax error"),
        (&["SHUTDOWN", "LATER"], "-ERR syntax error"),
    ] {
        assert_eq!(call(base, args).as_deref(), Some(reply), "{args:?}");
    }
    assert_eq!(call(base, &["PING"]).as_deref(), Some("+PONG"));
    support::process::signal(&group.child, "-TERM");
    assert!(wait_bounded(&mut group.child).success());
}

/// What a client sees of a successful SHUTDOWN, raw and through redis-cli: redlockd's
/// and redis-server's the same.
#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[test]
fn a_single_node_closes_the_connection_without_a_reply_as_redis_server_does() {
    fn seen(port: u16, cli: bool) -> (Vec<u8>, String) {
        if !cli {
            return (
                send_and_read_to_close(port, &["SHUTDOWN", "NOSAVE"]),
                String::new(),
            );
        }
        let out = Command::new("redis-cli")
            .args(["-p", &port.to_string(), "SHUTDOWN", "NOSAVE"])
            .stdin(Stdio::null())
            .output()
            .expect("redis-cli");
        assert!(out.status.success(), "{out:?}");
        (
            out.stdout,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
    for cli in [false, true] {
        let mut redis = RedisNode::start(None);
        let theirs = seen(redis.port, cli);
        wait_refused(redis.port);
        redis.kill();
        let mut node = support::process::Node::spawn(&["--restart-delay", "0", "--log", "error"]);
        let ours = seen(node.port, cli);
        assert_eq!(ours, theirs, "redis-cli: {cli}");
        assert_eq!(ours.0, b"", "nothing printed, nothing replied");
        assert!(node.wait_exit().success());
    }
}

/// A script past its time limit: SHUTDOWN without NOSAVE gets BUSY (a snapshot would
/// record half of the script), SHUTDOWN NOSAVE stops the node, as in Redis 7.0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_script_lets_only_shutdown_nosave_through() {
    let mut node = support::start().await;
    let mut looping = support::Raw::to(&node).await;
    looping
        .send(&resp(&["EVAL", "while true do end", "0"]))
        .await;
    support::wait_until("script starts", BOUND, || node.script_running()).await;
    node.clock().advance(Duration::from_secs(6));
    let mut admin = support::Raw::to(&node).await;
    assert_eq!(
        admin.cmd(&["SHUTDOWN"]).await,
        support::err(
            "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
        )
    );
    assert_eq!(
        admin.cmd(&["SHUTDOWN", "SAVE"]).await,
        admin.cmd(&["SHUTDOWN", "NOW"]).await
    );
    admin.send(&resp(&["SHUTDOWN", "NOSAVE"])).await;
    assert_eq!(admin.read_to_close().await, b"");
    tokio::time::timeout(BOUND, node.stopped())
        .await
        .expect("the node stops");
}
