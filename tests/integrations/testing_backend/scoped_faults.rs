//! Scoped faults (`TestServer::add_fault`): each action fires on the requests in its
//! scope and only those, is in force when `add_fault` returns, and is recorded; the
//! history records every request and reply.

use crate::support::Raw;
use redlockd::testing::{Action, DelayClock, FaultError, FaultSpec, Outcome, TestServer};
use std::time::Duration;

/// A connection named `name` (CLIENT SETNAME).
async fn named(server: &TestServer, name: &str) -> Raw {
    let mut c = Raw::connect(server.addr()).await;
    assert_eq!(c.cmd(&["CLIENT", "SETNAME", name]).await, "+OK\r\n");
    c
}

async fn client_id(c: &mut Raw) -> u64 {
    let r = c.cmd(&["CLIENT", "ID"]).await;
    r.trim_start_matches(':').trim_end().parse().unwrap()
}

#[tokio::test]
async fn drop_reply_runs_the_command_loses_its_reply_and_closes_only_in_scope() {
    let server = TestServer::start().await;
    let id = server
        .add_fault(
            FaultSpec::new(Action::DropReply)
                .command("set")
                .key("lock:*")
                .client_name("w1")
                .times(1),
        )
        .unwrap();
    let mut w1 = named(&server, "w1").await;
    let mut w2 = named(&server, "w2").await;
    // Other commands, other keys, other clients: untouched.
    assert_eq!(w1.cmd(&["GET", "lock:a"]).await, "$-1\r\n");
    assert_eq!(w1.cmd(&["SET", "other", "1", "NX"]).await, "+OK\r\n");
    assert_eq!(
        w2.cmd(&["SET", "lock:b", "w2", "NX", "PX", "1000"]).await,
        "+OK\r\n"
    );
    assert_eq!(server.fault(id).unwrap().fired, 0);
    // In scope: the lock is taken, the client gets no reply and a closed connection.
    w1.send_cmd(&["SET", "lock:a", "w1", "NX", "PX", "1000"])
        .await;
    assert_eq!(w1.read_to_close().await, b"");
    assert_eq!(w2.cmd(&["GET", "lock:a"]).await, "$2\r\nw1\r\n");
    // Fired once (count 1): the same request again is answered.
    let mut again = named(&server, "w1").await;
    assert_eq!(
        again
            .cmd(&["SET", "lock:c", "w1", "NX", "PX", "1000"])
            .await,
        "+OK\r\n"
    );
    let f = server.fault(id).unwrap();
    assert_eq!((f.fired, f.matched), (1, 2));
    let firing = &f.firings[0];
    assert_eq!(firing.command[0], "SET");
    assert_eq!(firing.command[1], "lock:a");
    assert_eq!(firing.client.name.as_deref(), Some("w1"));
    assert_eq!(firing.mono_ms, server.clock().now_ms());
    server.shutdown().await;
}

#[tokio::test]
async fn drop_request_closes_without_running_it() {
    let server = TestServer::start().await;
    server
        .add_fault(
            FaultSpec::new(Action::DropRequest)
                .command("set")
                .key("lock:*"),
        )
        .unwrap();
    let mut c = Raw::connect(server.addr()).await;
    let mut other = Raw::connect(server.addr()).await;
    assert_eq!(c.cmd(&["SET", "free", "1"]).await, "+OK\r\n");
    // Pipelined: the reply of the request before the fault still arrives.
    c.send(
        &[
            redlockd_resp(&["INCR", "n"]),
            redlockd_resp(&["SET", "lock:a", "x"]),
            redlockd_resp(&["INCR", "n"]),
        ]
        .concat(),
    )
    .await;
    assert_eq!(c.read_to_close().await, b":1\r\n");
    assert_eq!(other.cmd(&["EXISTS", "lock:a"]).await, ":0\r\n");
    // The request after it was never run either.
    assert_eq!(other.cmd(&["GET", "n"]).await, "$1\r\n1\r\n");
    server.shutdown().await;
}

fn redlockd_resp(args: &[&str]) -> Vec<u8> {
    crate::support::resp(args)
}

#[tokio::test]
async fn close_after_sends_the_reply_then_closes() {
    let server = TestServer::start().await;
    server
        .add_fault(
            FaultSpec::new(Action::CloseAfter)
                .command("set")
                .key("lock:*"),
        )
        .unwrap();
    let mut c = Raw::connect(server.addr()).await;
    assert_eq!(c.cmd(&["SET", "k", "1"]).await, "+OK\r\n");
    c.send_cmd(&["SET", "lock:a", "x"]).await;
    assert_eq!(c.read_to_close().await, b"+OK\r\n");
    let mut other = Raw::connect(server.addr()).await;
    assert_eq!(other.cmd(&["GET", "lock:a"]).await, "$1\r\nx\r\n");
    server.shutdown().await;
}

#[tokio::test]
async fn error_actions_answer_redis_exact_words_without_running() {
    let server = TestServer::start().await;
    let mut c = Raw::connect(server.addr()).await;
    let sha = c
        .cmd(&["SCRIPT", "LOAD", "return redis.call('INCR', KEYS[1])"])
        .await;
    let sha = sha.split("\r\n").nth(1).unwrap().to_string();
    let cases = [
        (Action::noscript(), "-NOSCRIPT No matching script. Please use EVAL.\r\n"),
        (Action::tryagain(), "-TRYAGAIN Multiple keys request during rehashing of slot\r\n"),
        (
            Action::busy(),
            "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n",
        ),
        (Action::loading(), "-LOADING Redis is loading the dataset in memory\r\n"),
        (Action::Error("ERR boom".into()), "-ERR boom\r\n"),
    ];
    for (i, (action, words)) in cases.into_iter().enumerate() {
        let id = server
            .add_fault(
                FaultSpec::new(action)
                    .command("evalsha")
                    .key("hit")
                    .times(1),
            )
            .unwrap();
        // Another key through the same script: run.
        assert_eq!(
            c.cmd(&["EVALSHA", &sha, "1", "miss"]).await,
            format!(":{}\r\n", i + 1)
        );
        assert_eq!(c.cmd(&["EVALSHA", &sha, "1", "hit"]).await, words);
        // Not run: the counter did not move.
        assert_eq!(c.cmd(&["GET", "hit"]).await, "$-1\r\n");
        assert_eq!(server.remove_fault(id).unwrap().fired, 1);
    }
    server.shutdown().await;
}

#[tokio::test]
async fn a_delay_on_the_test_clock_holds_one_reply_until_the_clock_moves() {
    let server = TestServer::start().await;
    server
        .add_fault(
            FaultSpec::new(Action::Delay {
                ms: 5000,
                clock: DelayClock::Node,
            })
            .command("set")
            .key("slow:*"),
        )
        .unwrap();
    let mut slow = Raw::connect(server.addr()).await;
    let mut fast = Raw::connect(server.addr()).await;
    slow.send_cmd(&["SET", "slow:1", "x"]).await;
    // The command ran at once; only its reply waits.
    assert_eq!(fast.cmd(&["GET", "slow:1"]).await, "$1\r\nx\r\n");
    assert_eq!(fast.cmd(&["SET", "quick", "y"]).await, "+OK\r\n");
    slow.expect_silence(50).await;
    server.advance(Duration::from_millis(4999));
    slow.expect_silence(20).await;
    server.advance(Duration::from_millis(1));
    assert_eq!(slow.reply().await, "+OK\r\n");
    server.shutdown().await;
}

#[tokio::test]
async fn a_real_time_delay_holds_the_reply_that_long() {
    let server = TestServer::start().await;
    server
        .add_fault(
            FaultSpec::new(Action::Delay {
                ms: 30,
                clock: DelayClock::Real,
            })
            .command("ping"),
        )
        .unwrap();
    let mut c = Raw::connect(server.addr()).await;
    let t = std::time::Instant::now();
    assert_eq!(c.cmd(&["PING"]).await, "+PONG\r\n");
    assert!(
        t.elapsed() >= Duration::from_millis(30),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(c.cmd(&["ECHO", "a"]).await, "$1\r\na\r\n");
    server.shutdown().await;
}

#[tokio::test]
async fn client_id_and_address_scope_one_connection() {
    let server = TestServer::start().await;
    let mut a = Raw::connect(server.addr()).await;
    let mut b = Raw::connect(server.addr()).await;
    let a_id = client_id(&mut a).await;
    server
        .add_fault(FaultSpec::new(Action::Error("ERR by id".into())).client_id(a_id))
        .unwrap();
    let b_addr = b.stream.local_addr().unwrap().to_string();
    server
        .add_fault(FaultSpec::new(Action::Error("ERR by addr".into())).client_addr(&b_addr))
        .unwrap();
    let mut c = Raw::connect(server.addr()).await;
    assert_eq!(a.cmd(&["PING"]).await, "-ERR by id\r\n");
    assert_eq!(b.cmd(&["PING"]).await, "-ERR by addr\r\n");
    assert_eq!(c.cmd(&["PING"]).await, "+PONG\r\n");
    assert_eq!(server.clear_faults().len(), 2);
    assert_eq!(a.cmd(&["PING"]).await, "+PONG\r\n");
    assert_eq!(b.cmd(&["PING"]).await, "+PONG\r\n");
    server.shutdown().await;
}

#[tokio::test]
async fn subcommand_scope_matches_that_subcommand_only() {
    let server = TestServer::start().await;
    server
        .add_fault(FaultSpec::new(Action::Error("ERR no loading".into())).command("script|load"))
        .unwrap();
    let mut c = Raw::connect(server.addr()).await;
    assert_eq!(
        c.cmd(&["SCRIPT", "LOAD", "return 1"]).await,
        "-ERR no loading\r\n"
    );
    assert_eq!(c.cmd(&["SCRIPT", "EXISTS", "x"]).await, "*1\r\n:0\r\n");
    assert_eq!(
        server.add_fault(FaultSpec::new(Action::DropReply).command("script|frob")),
        Err(FaultError::UnknownSubcommand {
            command: "script".into(),
            subcommand: "frob".into()
        })
    );
    assert_eq!(
        server.add_fault(FaultSpec::new(Action::DropReply).command("frob")),
        Err(FaultError::UnknownCommand("frob".into()))
    );
    assert_eq!(
        server.add_fault(FaultSpec::new(Action::Error("no code".into()))),
        Err(FaultError::ErrorText("no code".into()))
    );
    assert_eq!(
        server.add_fault(FaultSpec::new(Action::DropReply).probability(1.5, 7)),
        Err(FaultError::Probability(1.5))
    );
    assert_eq!(server.faults().len(), 1, "a refused fault is not added");
    server.shutdown().await;
}

#[tokio::test]
async fn a_reset_in_the_middle_of_multi_discards_the_transaction() {
    let server = TestServer::start().await;
    server
        .add_fault(FaultSpec::new(Action::DropRequest).command("set").key("b"))
        .unwrap();
    let mut c = Raw::connect(server.addr()).await;
    assert_eq!(c.cmd(&["MULTI"]).await, "+OK\r\n");
    assert_eq!(c.cmd(&["SET", "a", "1"]).await, "+QUEUED\r\n");
    c.send_cmd(&["SET", "b", "1"]).await;
    assert!(c.closed().await);
    let mut other = Raw::connect(server.addr()).await;
    assert_eq!(other.cmd(&["EXISTS", "a", "b"]).await, ":0\r\n");
    server.shutdown().await;
}

#[tokio::test]
async fn skip_count_and_a_seeded_probability_repeat_exactly() {
    let server = TestServer::start().await;
    let mut c = Raw::connect(server.addr()).await;
    let pattern = |seed| FaultSpec::new(Action::Error("ERR p".into())).probability(0.5, seed);
    let mut runs = Vec::new();
    for seed in [7, 7, 8] {
        let id = server.add_fault(pattern(seed).command("incr")).unwrap();
        let mut fired = String::new();
        for _ in 0..40 {
            let r = c.cmd(&["INCR", "n"]).await;
            fired.push(if r.starts_with('-') { 'x' } else { '.' });
        }
        let f = server.remove_fault(id).unwrap();
        assert_eq!(f.fired as usize, fired.matches('x').count());
        runs.push(fired);
    }
    assert_eq!(runs[0], runs[1], "the same seed fires the same way");
    assert_ne!(runs[0], runs[2]);
    let n = runs[0].matches('x').count();
    assert!((8..=32).contains(&n), "{}", runs[0]);
    // Skip 2, then fire 3 times.
    server
        .add_fault(
            FaultSpec::new(Action::Error("ERR s".into()))
                .command("incr")
                .skip(2)
                .times(3),
        )
        .unwrap();
    let mut seen = String::new();
    for _ in 0..7 {
        seen.push(if c.cmd(&["INCR", "m"]).await.starts_with('-') {
            'x'
        } else {
            '.'
        });
    }
    assert_eq!(seen, "..xxx..");
    server.shutdown().await;
}

/// The fault is in force when `add_fault` returns: the very next request of a
/// connection that is already open and busy sees it, every time.
#[tokio::test]
async fn a_fault_acts_on_the_next_request_once_added() {
    let server = TestServer::start().await;
    let mut c = Raw::connect(server.addr()).await;
    // A second connection keeps the node busy meanwhile.
    let addr = server.addr();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let busy = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut b = Raw::connect(addr).await;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                b.cmd(&["INCR", "busy"]).await;
            }
        })
    };
    for i in 0..100 {
        let key = format!("k{i}");
        let id = server
            .add_fault(
                FaultSpec::new(Action::Error("ERR now".into()))
                    .key(&key)
                    .times(1),
            )
            .unwrap();
        assert_eq!(c.cmd(&["GET", &key]).await, "-ERR now\r\n", "round {i}");
        assert_eq!(server.remove_fault(id).unwrap().fired, 1);
        // Removed: in force no longer.
        assert_eq!(c.cmd(&["GET", &key]).await, "$-1\r\n", "round {i}");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    busy.await.unwrap();
    server.shutdown().await;
}

#[tokio::test]
async fn the_history_records_requests_replies_clients_and_faults_bounded() {
    let server = TestServer::start().await;
    let mut a = named(&server, "a").await;
    let a_id = client_id(&mut a).await;
    server.record(4);
    let fault = server
        .add_fault(FaultSpec::new(Action::DropReply).command("set").key("lock"))
        .unwrap();
    assert_eq!(a.cmd(&["GET", "x"]).await, "$-1\r\n");
    server.advance(Duration::from_millis(250));
    a.send_cmd(&["SET", "lock", "me", "NX"]).await;
    assert!(a.closed().await);
    let h = server.history();
    assert_eq!(h.len(), 2);
    assert_eq!(h[0].command, vec!["GET", "x"]);
    assert_eq!(h[0].reply, Some(redlockd::testing::Reply::Null));
    assert_eq!(h[0].outcome, Outcome::Answered);
    assert_eq!(h[0].client.id, a_id);
    assert_eq!(h[0].client.name.as_deref(), Some("a"));
    assert_eq!(h[1].outcome, Outcome::ReplyDropped);
    assert_eq!(h[1].reply, Some(redlockd::testing::Reply::Ok));
    assert_eq!(h[1].fault, Some(fault));
    assert_eq!(h[1].mono_ms, h[0].mono_ms + 250);
    // Bounded: the last 4 only, in order.
    let mut b = Raw::connect(server.addr()).await;
    for i in 0..6 {
        b.cmd(&["ECHO", &i.to_string()]).await;
    }
    let h = server.take_history();
    let echoed: Vec<_> = h.iter().map(|e| e.command[1].clone()).collect();
    assert_eq!(echoed, vec!["2", "3", "4", "5"]);
    assert!(h.windows(2).all(|w| w[1].seq == w[0].seq + 1));
    assert!(server.history().is_empty());
    server.record(0);
    b.cmd(&["PING"]).await;
    assert!(server.history().is_empty());
    server.shutdown().await;
}
