//! Transactions (issue 9): MULTI / EXEC / DISCARD / WATCH / UNWATCH with Redis 7's
//! exact replies (checked side by side with redis-server 7.0.15), their atomicity
//! against other clients and scripts, and pipelined use as clients send it.

use crate::support;
use std::time::Duration;
use support::*;

const QUEUED: &str = "+QUEUED\r\n";
const EXECABORT: &str = "-EXECABORT Transaction discarded because of previous errors.\r\n";
const NULL_ARRAY: &str = "*-1\r\n";
const BUSY: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";

async fn raw(h: &TestServer) -> Raw {
    Raw::to(h).await
}

/// Sends every command in one write (as a client's pipeline does) and reads as many
/// replies.
async fn pipeline(c: &mut Raw, cmds: &[&[&str]]) -> Vec<String> {
    let bytes: Vec<u8> = cmds.iter().flat_map(|c| resp(c)).collect();
    c.send(&bytes).await;
    let mut out = Vec::new();
    for _ in cmds {
        out.push(c.reply().await);
    }
    out
}

#[tokio::test]
async fn exec_runs_the_queue_and_replies_with_every_result() {
    let h = start().await;
    let mut c = raw(&h).await;
    assert_eq!(c.cmd(&["MULTI"]).await, OK);
    assert_eq!(c.cmd(&["SET", "k", "1"]).await, QUEUED);
    assert_eq!(c.cmd(&["INCR", "k"]).await, QUEUED);
    // A runtime error is that command's entry; the rest still runs.
    assert_eq!(c.cmd(&["LPUSH", "k", "x"]).await, QUEUED);
    assert_eq!(c.cmd(&["GET", "k"]).await, QUEUED);
    assert_eq!(c.cmd(&["PING"]).await, QUEUED);
    assert_eq!(
        c.cmd(&["EXEC"]).await,
        format!(
            "*5\r\n{OK}{}{}{}+PONG\r\n",
            int(2),
            err("WRONGTYPE Operation against a key holding the wrong kind of value"),
            bulk("2")
        )
    );
    // Out of the transaction again.
    assert_eq!(c.cmd(&["GET", "k"]).await, bulk("2"));
    assert_eq!(c.cmd(&["MULTI"]).await, OK);
    assert_eq!(c.cmd(&["EXEC"]).await, "*0\r\n");
}

#[tokio::test]
async fn an_error_while_queueing_aborts_exec_and_nothing_runs() {
    let h = start().await;
    let mut c = raw(&h).await;
    assert_eq!(c.cmd(&["MULTI"]).await, OK);
    assert_eq!(c.cmd(&["SET", "a", "1"]).await, QUEUED);
    assert_eq!(
        c.cmd(&["NOSUCH", "x"]).await,
        err("ERR unknown command 'NOSUCH', with args beginning with: 'x' ")
    );
    assert_eq!(
        c.cmd(&["GET"]).await,
        err("ERR wrong number of arguments for 'get' command")
    );
    assert_eq!(c.cmd(&["SET", "b", "1"]).await, QUEUED);
    assert_eq!(c.cmd(&["EXEC"]).await, EXECABORT);
    assert_eq!(c.cmd(&["EXISTS", "a", "b"]).await, int(0));
    assert_eq!(c.cmd(&["PING"]).await, "+PONG\r\n");
}

#[tokio::test]
async fn transaction_commands_misused_get_redis_errors() {
    let h = start().await;
    let mut c = raw(&h).await;
    assert_eq!(c.cmd(&["EXEC"]).await, err("ERR EXEC without MULTI"));
    assert_eq!(c.cmd(&["DISCARD"]).await, err("ERR DISCARD without MULTI"));
    assert_eq!(c.cmd(&["MULTI"]).await, OK);
    assert_eq!(
        c.cmd(&["MULTI"]).await,
        err("ERR MULTI calls can not be nested")
    );
    assert_eq!(
        c.cmd(&["WATCH", "x"]).await,
        err("ERR WATCH inside MULTI is not allowed")
    );
    assert_eq!(
        c.cmd(&["SHUTDOWN"]).await,
        err("ERR Command not allowed inside a transaction")
    );
    // Nested MULTI and WATCH do not fail the transaction; SHUTDOWN does.
    assert_eq!(c.cmd(&["EXEC"]).await, EXECABORT);
    assert_eq!(c.cmd(&["MULTI"]).await, OK);
    assert_eq!(
        c.cmd(&["MULTI"]).await,
        err("ERR MULTI calls can not be nested")
    );
    assert_eq!(
        c.cmd(&["WATCH", "x"]).await,
        err("ERR WATCH inside MULTI is not allowed")
    );
    assert_eq!(c.cmd(&["SET", "x", "1"]).await, QUEUED);
    assert_eq!(c.cmd(&["EXEC"]).await, format!("*1\r\n{OK}"));
    // A refused EXEC ends the transaction too.
    assert_eq!(c.cmd(&["MULTI"]).await, OK);
    assert_eq!(
        c.cmd(&["EXEC", "x"]).await,
        err("EXECABORT Transaction discarded because of: wrong number of arguments for 'exec' command")
    );
    assert_eq!(c.cmd(&["DISCARD"]).await, err("ERR DISCARD without MULTI"));
}

#[tokio::test]
async fn discard_drops_the_queue_and_the_watches() {
    let h = start().await;
    let mut c = raw(&h).await;
    let mut other = raw(&h).await;
    assert_eq!(c.cmd(&["WATCH", "x"]).await, OK);
    assert_eq!(other.cmd(&["SET", "x", "10"]).await, OK);
    assert_eq!(c.cmd(&["MULTI"]).await, OK);
    assert_eq!(c.cmd(&["DEL", "x"]).await, QUEUED);
    assert_eq!(c.cmd(&["DISCARD"]).await, OK);
    assert_eq!(c.cmd(&["GET", "x"]).await, bulk("10"));
    // DISCARD cleared the dirty flag and unwatched x.
    assert_eq!(other.cmd(&["SET", "x", "10"]).await, OK);
    assert_eq!(c.cmd(&["MULTI"]).await, OK);
    assert_eq!(c.cmd(&["INCR", "x"]).await, QUEUED);
    assert_eq!(c.cmd(&["EXEC"]).await, format!("*1\r\n{}", int(11)));
}

#[tokio::test]
async fn reset_and_disconnect_drop_the_transaction() {
    let h = start().await;
    let mut c = raw(&h).await;
    assert_eq!(c.cmd(&["WATCH", "w"]).await, OK);
    assert_eq!(c.cmd(&["MULTI"]).await, OK);
    assert_eq!(c.cmd(&["SET", "k", "1"]).await, QUEUED);
    assert_eq!(c.cmd(&["RESET"]).await, "+RESET\r\n");
    assert_eq!(c.cmd(&["EXEC"]).await, err("ERR EXEC without MULTI"));
    assert_eq!(c.cmd(&["EXISTS", "k"]).await, int(0));
    // The watch went with RESET: w changing no longer matters.
    assert_eq!(c.cmd(&["SET", "w", "1"]).await, OK);
    assert_eq!(c.cmd(&["MULTI"]).await, OK);
    assert_eq!(c.cmd(&["EXEC"]).await, "*0\r\n");

    // A client that goes away mid-transaction: nothing it queued ever runs.
    let mut gone = raw(&h).await;
    gone.send(
        &[
            resp(&["WATCH", "w"]),
            resp(&["MULTI"]),
            resp(&["SET", "k", "1"]),
        ]
        .concat(),
    )
    .await;
    for expected in [OK, OK, QUEUED] {
        assert_eq!(gone.reply().await, expected);
    }
    drop(gone);
    let mut connected = String::new();
    for _ in 0..1000 {
        connected = c.cmd(&["INFO", "clients"]).await;
        if connected.contains("connected_clients:1\r\n") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert!(connected.contains("connected_clients:1\r\n"), "{connected}");
    assert_eq!(c.cmd(&["EXISTS", "k"]).await, int(0));
    assert_eq!(c.cmd(&["SET", "w", "2"]).await, OK);
}

#[tokio::test]
async fn watch_fails_exec_with_a_null_array_in_resp2_and_resp3() {
    let h = start().await;
    let mut c = raw(&h).await;
    let mut other = raw(&h).await;
    for (hello, null) in [("2", NULL_ARRAY), ("3", "_\r\n")] {
        c.cmd(&["HELLO", hello]).await;
        assert_eq!(c.cmd(&["WATCH", "x"]).await, OK);
        assert_eq!(other.cmd(&["SET", "x", "1"]).await, OK);
        assert_eq!(c.cmd(&["MULTI"]).await, OK);
        assert_eq!(c.cmd(&["SET", "x", "mine"]).await, QUEUED);
        assert_eq!(c.cmd(&["EXEC"]).await, null);
        assert_eq!(c.cmd(&["GET", "x"]).await, bulk("1"));
    }
    // After a failed EXEC, x is no longer watched.
    assert_eq!(other.cmd(&["SET", "x", "2"]).await, OK);
    assert_eq!(c.cmd(&["MULTI"]).await, OK);
    assert_eq!(c.cmd(&["PING"]).await, QUEUED);
    assert_eq!(c.cmd(&["EXEC"]).await, "*1\r\n+PONG\r\n");
}

/// Watches `x` (in the current db of `c`), lets `touch` act, and returns EXEC's reply.
async fn exec_after(c: &mut Raw, other: &mut Raw, touch: &[&[&str]]) -> String {
    assert_eq!(c.cmd(&["WATCH", "x"]).await, OK);
    for cmd in touch {
        other.cmd(cmd).await;
    }
    assert_eq!(c.cmd(&["MULTI"]).await, OK);
    assert_eq!(c.cmd(&["PING"]).await, QUEUED);
    c.cmd(&["EXEC"]).await
}

const PONG_ARRAY: &str = "*1\r\n+PONG\r\n";

#[tokio::test]
async fn every_kind_of_write_touches_a_watched_key() {
    let h = start().await;
    let mut c = raw(&h).await;
    let mut o = raw(&h).await;
    let cases: &[&[&[&str]]] = &[
        &[&["SET", "x", "1"]],
        &[&["DEL", "x"]],
        &[&["EXPIRE", "x", "10"]],
        &[&["RENAME", "y", "x"]],
        &[&["RENAME", "x", "z"]],
        &[&["FLUSHDB"]],
        &[&["FLUSHALL"]],
        &[&["LPUSH", "x", "a"]],
        &[&["EVAL", "return redis.call('set', KEYS[1], 's')", "1", "x"]],
        &[&["MULTI"], &["INCR", "x"], &["EXEC"]],
    ];
    for touch in cases {
        o.cmd(&["FLUSHALL"]).await;
        o.cmd(&["SET", "x", "0"]).await;
        o.cmd(&["SET", "y", "0"]).await;
        assert_eq!(
            exec_after(&mut c, &mut o, touch).await,
            NULL_ARRAY,
            "{touch:?}"
        );
    }
    // Reads, writes to other keys and writes in another database touch nothing.
    let untouched: &[&[&[&str]]] = &[
        &[&["GET", "x"], &["EXISTS", "x"], &["TTL", "x"]],
        &[&["SET", "y", "1"]],
        &[
            &["SELECT", "1"],
            &["SET", "x", "1"],
            &["DEL", "x"],
            &["SELECT", "0"],
        ],
        &[&["EVAL", "return redis.call('get', KEYS[1])", "1", "x"]],
    ];
    for touch in untouched {
        o.cmd(&["SET", "x", "0"]).await;
        assert_eq!(
            exec_after(&mut c, &mut o, touch).await,
            PONG_ARRAY,
            "{touch:?}"
        );
    }
}

#[tokio::test]
async fn smove_touches_the_destination_only_when_it_gains_the_member() {
    let h = start().await;
    let mut c = raw(&h).await;
    let mut o = raw(&h).await;
    // x already has the member: SMOVE takes it from src only, and x's watcher commits.
    o.cmd(&["SADD", "x", "a"]).await;
    o.cmd(&["SADD", "src", "a", "b"]).await;
    let moved = &[&["SMOVE", "src", "x", "a"][..]][..];
    assert_eq!(exec_after(&mut c, &mut o, moved).await, PONG_ARRAY);
    assert_eq!(o.cmd(&["SMEMBERS", "src"]).await, "*1\r\n$1\r\nb\r\n");
    // x gains b: its watcher's EXEC fails.
    let gained = &[&["SMOVE", "src", "x", "b"][..]][..];
    assert_eq!(exec_after(&mut c, &mut o, gained).await, NULL_ARRAY);
    assert_eq!(o.cmd(&["SCARD", "x"]).await, ":2\r\n");
}

#[tokio::test]
async fn flush_touches_only_watched_keys_that_existed() {
    let h = start().await;
    let mut c = raw(&h).await;
    let mut o = raw(&h).await;
    for flush in ["FLUSHDB", "FLUSHALL"] {
        o.cmd(&["DEL", "x"]).await;
        assert_eq!(exec_after(&mut c, &mut o, &[&[flush]]).await, PONG_ARRAY);
    }
}

#[tokio::test]
async fn watch_remembers_the_database_of_its_key() {
    let h = start().await;
    let mut c = raw(&h).await;
    let mut o = raw(&h).await;
    c.cmd(&["SELECT", "5"]).await;
    assert_eq!(c.cmd(&["WATCH", "x"]).await, OK);
    // The watcher moving to another db still watches db 5's x.
    c.cmd(&["SELECT", "1"]).await;
    o.cmd(&["SELECT", "5"]).await;
    o.cmd(&["SET", "x", "1"]).await;
    assert_eq!(c.cmd(&["MULTI"]).await, OK);
    assert_eq!(c.cmd(&["EXEC"]).await, NULL_ARRAY);
}

#[tokio::test]
async fn a_watched_key_that_expires_fails_exec() {
    let h = start().await;
    let mut c = raw(&h).await;
    assert_eq!(c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]).await, OK);
    assert_eq!(c.cmd(&["SET", "x", "1", "PX", "100"]).await, OK);
    assert_eq!(c.cmd(&["WATCH", "x"]).await, OK);
    h.clock().advance(Duration::from_millis(101));
    // Nobody touched it: EXEC itself sees that it expired (lazy expiry).
    assert_eq!(c.cmd(&["MULTI"]).await, OK);
    assert_eq!(c.cmd(&["INCR", "x"]).await, QUEUED);
    assert_eq!(c.cmd(&["EXEC"]).await, NULL_ARRAY);
    assert_eq!(c.cmd(&["EXISTS", "x"]).await, int(0));

    // Reclaimed by the sweeper while watched: also a change.
    assert_eq!(c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]).await, OK);
    assert_eq!(c.cmd(&["SET", "x", "1", "PX", "100"]).await, OK);
    assert_eq!(c.cmd(&["WATCH", "x"]).await, OK);
    h.clock().advance(Duration::from_millis(101));
    assert_eq!(c.cmd(&["DBSIZE"]).await, int(0));
    assert_eq!(c.cmd(&["MULTI"]).await, OK);
    assert_eq!(c.cmd(&["EXEC"]).await, NULL_ARRAY);
}

#[tokio::test]
async fn watching_an_already_expired_key_is_not_failed_by_its_removal() {
    let h = start().await;
    let mut c = raw(&h).await;
    let mut o = raw(&h).await;
    assert_eq!(c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]).await, OK);
    // Stale when watched, then reclaimed lazily (EXISTS), by DEL, by FLUSHDB.
    for touch in [&["EXISTS", "x"][..], &["DEL", "x"], &["FLUSHDB"]] {
        o.cmd(&["SET", "x", "1", "PX", "1"]).await;
        h.clock().advance(Duration::from_millis(2));
        assert_eq!(
            exec_after(&mut c, &mut o, &[touch]).await,
            PONG_ARRAY,
            "{touch:?}"
        );
    }
    // A stale key written again is a change.
    o.cmd(&["SET", "x", "1", "PX", "1"]).await;
    h.clock().advance(Duration::from_millis(2));
    assert_eq!(
        exec_after(&mut c, &mut o, &[&["SET", "x", "2"]]).await,
        NULL_ARRAY
    );
}

#[tokio::test]
async fn unwatch_forgets_changes_seen_so_far() {
    let h = start().await;
    let mut c = raw(&h).await;
    assert_eq!(c.cmd(&["UNWATCH"]).await, OK);
    assert_eq!(c.cmd(&["WATCH", "x", "y"]).await, OK);
    assert_eq!(c.cmd(&["SET", "x", "1"]).await, OK);
    assert_eq!(c.cmd(&["UNWATCH"]).await, OK);
    assert_eq!(c.cmd(&["MULTI"]).await, OK);
    assert_eq!(c.cmd(&["GET", "x"]).await, QUEUED);
    assert_eq!(c.cmd(&["EXEC"]).await, format!("*1\r\n{}", bulk("1")));
}

#[tokio::test]
async fn scripts_cannot_run_transactions_but_transactions_run_scripts() {
    let h = start().await;
    let mut c = raw(&h).await;
    for name in [
        "'multi'",
        "'exec'",
        "'discard'",
        "'watch', 'k'",
        "'unwatch'",
    ] {
        let body = format!("return redis.pcall({name})");
        let reply = c.cmd(&["EVAL", &body, "0"]).await;
        assert_eq!(
            reply,
            err("ERR This Redis command is not allowed from script"),
            "{name}"
        );
    }
    assert_eq!(c.cmd(&["MULTI"]).await, OK);
    assert_eq!(
        c.cmd(&["EVAL", "return redis.call('incr', KEYS[1])", "1", "n"])
            .await,
        QUEUED
    );
    // Queued, not run: another client sees nothing yet.
    let mut o = raw(&h).await;
    assert_eq!(o.cmd(&["EXISTS", "n"]).await, int(0));
    assert_eq!(c.cmd(&["INCR", "n"]).await, QUEUED);
    assert_eq!(
        c.cmd(&["EXEC"]).await,
        format!("*2\r\n{}{}", int(1), int(2))
    );
}

#[tokio::test]
async fn blocking_commands_inside_exec_do_not_block() {
    let h = start().await;
    let mut c = raw(&h).await;
    assert_eq!(c.cmd(&["MULTI"]).await, OK);
    assert_eq!(c.cmd(&["BLPOP", "empty", "0"]).await, QUEUED);
    assert_eq!(c.cmd(&["BRPOP", "empty", "0"]).await, QUEUED);
    assert_eq!(c.cmd(&["EXEC"]).await, "*2\r\n*-1\r\n*-1\r\n");
}

#[tokio::test]
async fn the_restart_fence_refuses_writes_at_queue_time_and_aborts_exec() {
    let h = start_with(|c| c.restart_delay = Some(Duration::from_secs(31))).await;
    let mut c = raw(&h).await;
    assert_eq!(c.cmd(&["MULTI"]).await, OK);
    assert_eq!(c.cmd(&["GET", "k"]).await, QUEUED);
    let refused = c.cmd(&["SET", "k", "v", "PX", "1000"]).await;
    assert!(refused.starts_with("-TRYAGAIN restart fence"), "{refused}");
    assert_eq!(c.cmd(&["DEL", "k"]).await, QUEUED);
    assert_eq!(c.cmd(&["EXEC"]).await, EXECABORT);
    // Reads and releases alone still run inside a transaction.
    assert_eq!(c.cmd(&["MULTI"]).await, OK);
    assert_eq!(c.cmd(&["GET", "k"]).await, QUEUED);
    assert_eq!(c.cmd(&["DEL", "k"]).await, QUEUED);
    assert_eq!(c.cmd(&["EXEC"]).await, format!("*2\r\n{NIL}{}", int(0)));
}

#[tokio::test]
async fn a_ttl_above_max_ttl_is_a_runtime_error_inside_exec() {
    let h = start().await;
    let mut c = raw(&h).await;
    assert_eq!(c.cmd(&["MULTI"]).await, OK);
    assert_eq!(c.cmd(&["SET", "k", "v", "PX", "9999999"]).await, QUEUED);
    assert_eq!(c.cmd(&["SET", "j", "v", "PX", "1000"]).await, QUEUED);
    let reply = c.cmd(&["EXEC"]).await;
    assert!(
        reply.starts_with("*2\r\n-ERR TTL of 9999999 ms is above this server's max-ttl")
            && reply.ends_with(OK),
        "{reply}"
    );
    assert_eq!(c.cmd(&["EXISTS", "k", "j"]).await, int(1));
}

#[tokio::test]
async fn pipelined_commands_never_run_before_exec_nor_after_discard_or_execabort() {
    let h = start().await;
    let mut c = raw(&h).await;
    let mut o = raw(&h).await;
    // redis-py's pipeline: MULTI, the commands and EXEC in one write.
    let replies = pipeline(
        &mut c,
        &[&["MULTI"], &["SET", "a", "1"], &["INCR", "a"], &["EXEC"]],
    )
    .await;
    assert_eq!(
        replies,
        [OK, QUEUED, QUEUED, &format!("*2\r\n{OK}{}", int(2))]
    );

    // Queued but not yet EXECed: not visible to anyone.
    let replies = pipeline(&mut c, &[&["MULTI"], &["SET", "b", "1"], &["DEL", "a"]]).await;
    assert_eq!(replies, [OK, QUEUED, QUEUED]);
    assert_eq!(
        o.cmd(&["MGET", "a", "b"]).await,
        format!("*2\r\n{}{NIL}", bulk("2"))
    );
    assert_eq!(c.cmd(&["DISCARD"]).await, OK);
    assert_eq!(
        o.cmd(&["MGET", "a", "b"]).await,
        format!("*2\r\n{}{NIL}", bulk("2"))
    );

    // An error in the middle of a pipelined transaction: none of it runs.
    let replies = pipeline(
        &mut c,
        &[
            &["MULTI"],
            &["SET", "c", "1"],
            &["SET", "c"],
            &["SET", "d", "1"],
            &["EXEC"],
            &["EXISTS", "c", "d"],
        ],
    )
    .await;
    assert_eq!(
        replies,
        [
            OK,
            QUEUED,
            &err("ERR wrong number of arguments for 'set' command"),
            QUEUED,
            EXECABORT,
            &int(0),
        ]
    );
}

/// Starts a script that spins until killed, from its own connection.
async fn spin(h: &TestServer) -> Raw {
    let mut looping = raw(h).await;
    looping
        .send(&resp(&["EVAL", "while true do end", "0"]))
        .await;
    for _ in 0..2000 {
        if h.script_running() {
            return looping;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("script did not start");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_transaction_around_a_busy_script_runs_whole_or_not_at_all() {
    let h = start().await;
    let mut c = raw(&h).await;
    let mut admin = raw(&h).await;
    assert_eq!(c.cmd(&["SET", "xx", "1"]).await, OK);

    // MULTI during BUSY is allowed; a queued command gets BUSY and fails the
    // transaction (Redis's "MULTI and script timeout").
    let mut looping = spin(&h).await;
    h.clock().advance(Duration::from_secs(6));
    assert_eq!(c.cmd(&["MULTI"]).await, OK);
    assert_eq!(c.cmd(&["INCR", "xx"]).await, err(BUSY));
    assert_eq!(admin.cmd(&["SCRIPT", "KILL"]).await, OK);
    assert!(looping.reply().await.starts_with("-ERR Script killed"));
    assert_eq!(c.cmd(&["INCR", "xx"]).await, QUEUED);
    assert_eq!(c.cmd(&["EXEC"]).await, EXECABORT);

    // EXEC during BUSY: aborted with the reason, and the client leaves MULTI ("EXEC
    // and script timeout").
    assert_eq!(c.cmd(&["MULTI"]).await, OK);
    assert_eq!(c.cmd(&["INCR", "xx"]).await, QUEUED);
    let mut looping = spin(&h).await;
    h.clock().advance(Duration::from_secs(6));
    assert_eq!(
        c.cmd(&["EXEC"]).await,
        err(&format!(
            "EXECABORT Transaction discarded because of: {BUSY}"
        ))
    );
    assert_eq!(admin.cmd(&["SCRIPT", "KILL"]).await, OK);
    assert!(looping.reply().await.starts_with("-ERR Script killed"));
    assert_eq!(c.cmd(&["GET", "xx"]).await, bulk("1"));
    assert_eq!(c.cmd(&["PING", "asdf"]).await, bulk("asdf"));
}

/// Many clients increment one counter with optimistic locking (WATCH, GET, MULTI,
/// SET, EXEC, retry on a null array) while scripts increment it too: no increment is
/// ever lost. Meanwhile a reader checks that a transaction's two writes are never seen
/// half done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_watch_transactions_never_lose_an_increment() {
    const CLIENTS: usize = 8;
    const EACH: usize = 40;
    let h = start().await;
    let mut tasks = Vec::new();
    for i in 0..CLIENTS {
        let mut c = raw(&h).await;
        tasks.push(tokio::spawn(async move {
            let mut retries = 0;
            for _ in 0..EACH {
                loop {
                    assert_eq!(c.cmd(&["WATCH", "counter"]).await, OK);
                    let current = c.cmd(&["GET", "counter"]).await;
                    let n: i64 = if current == NIL {
                        0
                    } else {
                        current.split("\r\n").nth(1).unwrap().parse().unwrap()
                    };
                    let next = (n + 1).to_string();
                    let replies = pipeline(
                        &mut c,
                        &[
                            &["MULTI"],
                            &["SET", "counter", &next],
                            &["INCR", "pair-a"],
                            &["INCR", "pair-b"],
                            &["EXEC"],
                        ],
                    )
                    .await;
                    if replies[4] != NULL_ARRAY {
                        assert!(replies[4].starts_with("*3\r\n+OK\r\n"), "{replies:?}");
                        break;
                    }
                    retries += 1;
                }
                if i % 2 == 0 {
                    let r = c
                        .cmd(&["EVAL", "return redis.call('incr', KEYS[1])", "1", "counter"])
                        .await;
                    assert!(r.starts_with(':'), "{r}");
                }
            }
            retries
        }));
    }
    let mut reader = raw(&h).await;
    let read = tokio::spawn(async move {
        for _ in 0..300 {
            // Both nil before the first EXEC, then two equal bulks.
            let r = reader.cmd(&["MGET", "pair-a", "pair-b"]).await;
            let items = r.strip_prefix("*2\r\n").expect("an array of two");
            let first = frame_len(items.as_bytes()).expect("a whole reply");
            let (a, b) = items.split_at(first);
            assert_eq!(a, b, "a transaction seen half done: {r}");
        }
    });
    let mut retries = 0;
    for t in tasks {
        retries += t.await.unwrap();
    }
    read.await.unwrap();
    let mut c = raw(&h).await;
    let scripted = CLIENTS / 2 * EACH;
    assert_eq!(
        c.cmd(&["GET", "counter"]).await,
        bulk(&(CLIENTS * EACH + scripted).to_string())
    );
    assert_eq!(
        c.cmd(&["GET", "pair-a"]).await,
        bulk(&(CLIENTS * EACH).to_string())
    );
    // The retries prove the clients really raced (not a requirement, a sanity note).
    eprintln!("optimistic retries: {retries}");
}

#[tokio::test(flavor = "multi_thread")]
async fn redis_rs_atomic_pipeline_and_transaction_helper() {
    let h = start().await;
    let mut con = conn(&h).await;
    let (set, incr, get): (String, i64, String) = redis::pipe()
        .atomic()
        .set("k", 41)
        .incr("k", 1)
        .get("k")
        .query_async(&mut con)
        .await
        .unwrap();
    assert_eq!((set.as_str(), incr, get.as_str()), ("OK", 42, "42"));

    // An optimistic-lock update the way redis-rs documents it (WATCH + atomic pipe,
    // retried on a null reply), against a writer that interferes once.
    let mut other = conn(&h).await;
    let mut interfered = false;
    let value: i64 = loop {
        let _: () = redis::cmd("WATCH")
            .arg("k")
            .query_async(&mut con)
            .await
            .unwrap();
        let n: i64 = redis::cmd("GET")
            .arg("k")
            .query_async(&mut con)
            .await
            .unwrap();
        if !interfered {
            let _: () = redis::cmd("SET")
                .arg("k")
                .arg(100)
                .query_async(&mut other)
                .await
                .unwrap();
            interfered = true;
        }
        let result: Option<(i64,)> = redis::pipe()
            .atomic()
            .set("k", n + 1)
            .ignore()
            .get("k")
            .query_async(&mut con)
            .await
            .unwrap();
        if let Some((v,)) = result {
            break v;
        }
    };
    assert_eq!(value, 101);
}
