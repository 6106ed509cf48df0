//! Fencing tokens on one node (FENCING.GRANT / COMMIT / MARK, exact replies), the
//! token mark across crashes, and clean restarts through the data directory.

use crate::support;

use redlockd::testing::TestServer;
use redlockd::{Config, Server};
use std::path::Path;
use std::time::Duration;
use support::process::data_dir;
use support::{bulk, err, int, Raw, NIL, OK};

#[tokio::test]
async fn grant_returns_the_mark_and_commit_raises_it_only_for_the_holder() {
    let server = TestServer::start().await;
    let mut c = Raw::to(&server).await;
    assert_eq!(c.cmd(&["FENCING.MARK"]).await, int(0));
    assert_eq!(
        c.cmd(&["FENCING.GRANT", "res", "v1", "PX", "10000"]).await,
        int(0)
    );
    assert_eq!(
        c.cmd(&["FENCING.GRANT", "res", "v2", "PX", "10000"]).await,
        NIL
    );
    assert_eq!(c.cmd(&["GET", "res"]).await, bulk("v1"));
    assert_eq!(c.cmd(&["PTTL", "res"]).await, int(10000));
    assert_eq!(c.cmd(&["FENCING.COMMIT", "res", "v2", "5"]).await, int(0));
    assert_eq!(c.cmd(&["FENCING.MARK"]).await, int(0));
    assert_eq!(c.cmd(&["FENCING.COMMIT", "res", "v1", "5"]).await, int(1));
    assert_eq!(c.cmd(&["FENCING.MARK"]).await, int(5));
    // A max-register: a lower commit succeeds (the holder is safe) but never lowers it.
    assert_eq!(c.cmd(&["FENCING.COMMIT", "res", "v1", "3"]).await, int(1));
    assert_eq!(c.cmd(&["FENCING.MARK"]).await, int(5));
    // Expired: the holder paused past its TTL gets no commit.
    server.advance(Duration::from_millis(10_001));
    assert_eq!(c.cmd(&["FENCING.COMMIT", "res", "v1", "9"]).await, int(0));
    assert_eq!(
        c.cmd(&["FENCING.GRANT", "res", "v3", "EX", "10"]).await,
        int(5)
    );
    assert_eq!(c.cmd(&["PTTL", "res"]).await, int(10000));
    assert_eq!(c.cmd(&["DEL", "res"]).await, int(1));
    let info = c.cmd(&["INFO", "fencing"]).await;
    assert!(info.contains("fencing_token_mark:5\r\n"), "{info}");
    assert!(info.contains("fencing_token_reserved:10005\r\n"), "{info}");
    assert!(info.contains("fencing_reservation_fsyncs:1\r\n"), "{info}");
    assert!(info.contains("last_boot:fresh\r\n"), "{info}");
    server.shutdown().await;
}

#[tokio::test]
async fn bad_arguments_get_redis_style_errors() {
    let server = TestServer::start().await;
    let mut c = Raw::to(&server).await;
    let arity = |cmd: &str| {
        err(&format!(
            "ERR wrong number of arguments for '{cmd}' command"
        ))
    };
    assert_eq!(
        c.cmd(&["FENCING.GRANT", "k", "v", "PX"]).await,
        arity("fencing.grant")
    );
    assert_eq!(
        c.cmd(&["FENCING.COMMIT", "k", "v"]).await,
        arity("fencing.commit")
    );
    assert_eq!(c.cmd(&["FENCING.MARK", "x"]).await, arity("fencing.mark"));
    assert_eq!(
        c.cmd(&["FENCING.GRANT", "k", "v", "KEEPTTL", "1"]).await,
        err("ERR syntax error")
    );
    assert_eq!(
        c.cmd(&["FENCING.GRANT", "k", "v", "PX", "soon"]).await,
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(
        c.cmd(&["FENCING.GRANT", "k", "v", "PX", "0"]).await,
        err("ERR invalid expire time in 'fencing.grant' command")
    );
    assert_eq!(
        c.cmd(&["FENCING.GRANT", "k", "v", "PX", "30001"]).await,
        err("ERR TTL of 30001 ms is above this server's max-ttl of 30000 ms")
    );
    assert_eq!(
        c.cmd(&["FENCING.COMMIT", "k", "v", "x"]).await,
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(
        c.cmd(&["FENCING.COMMIT", "k", "v", "0"]).await,
        err("ERR token must be positive")
    );
    // A key of another type is "held elsewhere", as SET NX sees it.
    assert_eq!(c.cmd(&["HSET", "h", "f", "1"]).await, int(1));
    assert_eq!(c.cmd(&["FENCING.GRANT", "h", "v", "PX", "100"]).await, NIL);
    assert_eq!(c.cmd(&["FENCING.COMMIT", "h", "v", "4"]).await, int(0));
    server.shutdown().await;
}

#[tokio::test]
async fn both_phases_work_from_lua_and_the_fence_refuses_grants() {
    let server = TestServer::start().await;
    let mut c = Raw::to(&server).await;
    let script = "local m = redis.call('FENCING.GRANT', KEYS[1], ARGV[1], 'PX', ARGV[2]) \
                  if not m then return false end \
                  redis.call('FENCING.COMMIT', KEYS[1], ARGV[1], m + 1) return m + 1";
    assert_eq!(
        c.cmd(&["EVAL", script, "1", "lk", "me", "5000"]).await,
        int(1)
    );
    assert_eq!(
        c.cmd(&["EVAL", script, "1", "lk", "you", "5000"]).await,
        NIL
    );
    assert_eq!(c.cmd(&["FENCING.MARK"]).await, int(1));
    server.crash_restart();
    let mut c = Raw::to(&server).await;
    let reply = c.cmd(&["FENCING.GRANT", "lk", "v", "PX", "100"]).await;
    assert!(reply.starts_with("-TRYAGAIN restart fence"), "{reply}");
    // Reads and commits are not fenced (a commit needs a key the crash erased anyway).
    assert_eq!(c.cmd(&["FENCING.COMMIT", "lk", "me", "2"]).await, int(0));
    // The mark resumed at the durable reservation: never below what was committed.
    assert_eq!(c.cmd(&["FENCING.MARK"]).await, int(10_001));
    server.shutdown().await;
}

#[tokio::test]
async fn the_mark_survives_crashes_but_not_a_lost_directory() {
    let server = TestServer::start().await;
    let mut c = Raw::to(&server).await;
    for t in 1..=3 {
        let v = format!("v{t}");
        c.cmd(&["FENCING.GRANT", "k", &v, "PX", "100"]).await;
        assert_eq!(
            c.cmd(&["FENCING.COMMIT", "k", &v, &(t * 7000).to_string()])
                .await,
            int(1)
        );
        c.cmd(&["DEL", "k"]).await;
    }
    // 7000 reserved to 17000; 14000 fits; 21000 reserved to 31000.
    let info = c.cmd(&["INFO", "fencing"]).await;
    assert!(info.contains("fencing_reservation_fsyncs:2\r\n"), "{info}");
    for _ in 0..3 {
        server.crash_restart();
        let mut c = Raw::to(&server).await;
        assert_eq!(c.cmd(&["FENCING.MARK"]).await, int(31_000));
    }
    server.crash_restart_losing_dir();
    let mut c = Raw::to(&server).await;
    assert_eq!(
        c.cmd(&["FENCING.MARK"]).await,
        int(0),
        "a lost disk loses the mark"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_clean_restart_keeps_locks_and_serves_at_once() {
    let server = TestServer::start_with(Config {
        fence_at_boot: true,
        ..TestServer::config(redlockd::Clock::manual())
    })
    .await;
    server.advance(Duration::from_secs(31));
    let mut c = Raw::to(&server).await;
    assert_eq!(c.cmd(&["SET", "lock", "me", "NX", "PX", "20000"]).await, OK);
    assert_eq!(c.cmd(&["HSET", "h", "f", "v"]).await, int(1));
    assert_eq!(c.cmd(&["RPUSH", "l", "a", "b"]).await, int(2));
    assert_eq!(c.cmd(&["SELECT", "3"]).await, OK);
    assert_eq!(c.cmd(&["SET", "other-db", "x"]).await, OK);
    assert_eq!(
        c.cmd(&["FENCING.GRANT", "t", "v", "PX", "20000"]).await,
        int(0)
    );
    assert_eq!(c.cmd(&["FENCING.COMMIT", "t", "v", "42"]).await, int(1));
    server.advance(Duration::from_secs(5));
    assert!(server.restart_clean(), "the snapshot is restored");
    let mut c2 = Raw::to(&server).await;
    assert_eq!(c2.cmd(&["PTTL", "lock"]).await, int(15_000));
    assert_eq!(c2.cmd(&["GET", "lock"]).await, bulk("me"));
    assert_eq!(
        c2.cmd(&["SET", "new", "x", "NX", "PX", "100"]).await,
        OK,
        "no fence"
    );
    assert_eq!(
        c2.cmd(&["FENCING.MARK"]).await,
        int(42),
        "the exact mark, not the reservation"
    );
    assert_eq!(c2.cmd(&["HGET", "h", "f"]).await, bulk("v"));
    assert_eq!(
        c2.cmd(&["LRANGE", "l", "0", "-1"]).await,
        "*2\r\n$1\r\na\r\n$1\r\nb\r\n"
    );
    assert_eq!(c2.cmd(&["SELECT", "3"]).await, OK);
    assert_eq!(c2.cmd(&["GET", "other-db"]).await, bulk("x"));
    // The snapshot was consumed: a crash now brings the fence.
    server.crash_restart();
    let mut c = Raw::to(&server).await;
    let reply = c.cmd(&["SET", "x", "1", "PX", "100"]).await;
    assert!(reply.starts_with("-TRYAGAIN"), "{reply}");
    assert_eq!(c.cmd(&["HGET", "h", "f"]).await, NIL);
    server.shutdown().await;
}

#[tokio::test]
async fn a_clean_restart_resumes_the_ttl_left_and_an_unfinished_fence() {
    let server = TestServer::start_with(Config {
        fence_at_boot: true,
        ..TestServer::config(redlockd::Clock::manual())
    })
    .await;
    server.advance(Duration::from_secs(31));
    let mut c = Raw::to(&server).await;
    assert_eq!(c.cmd(&["SET", "lock", "me", "PX", "20000"]).await, OK);
    server.advance(Duration::from_secs(5));
    server.crash_restart();
    server.advance(Duration::from_secs(10));
    // Shut down cleanly while the fence still had 21 s left: it is not forgotten.
    assert!(server.restart_clean(), "the snapshot is restored");
    let mut c = Raw::to(&server).await;
    let reply = c.cmd(&["SET", "x", "1", "PX", "100"]).await;
    assert!(reply.contains("for another 21000 ms"), "{reply}");
    server.shutdown().await;
}

/// Starts a real server (not the test backend) on `dir`; `fence` turns the boot fence on.
async fn start_on(dir: &Path, clock: redlockd::Clock) -> TestServer {
    TestServer::start_with(Config {
        dir: Some(dir.to_path_buf()),
        ..Config {
            fence_at_boot: true,
            restart_delay: None,
            ..TestServer::config(clock)
        }
    })
    .await
}

fn fenced(h: &TestServer) -> bool {
    !h.fence_remaining().is_zero()
}

#[tokio::test]
async fn shutdown_saves_and_the_next_process_restores_once() {
    let dir = data_dir("fencing-restore");
    let clock = redlockd::Clock::manual();
    let h = start_on(&dir, clock.clone()).await;
    assert!(fenced(&h), "a first start is fenced");
    clock.advance(Duration::from_secs(31));
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["SET", "lock", "me", "PX", "10000"]).await, OK);
    drop(c);
    h.shutdown().await;
    assert!(dir.join("snapshot.rdl").exists());
    // The process is down for 20 s: longer than the lock's TTL.
    clock.advance(Duration::from_secs(20));

    let h = start_on(&dir, clock.clone()).await;
    assert!(!fenced(&h), "a clean restart skips the fence");
    assert!(!dir.join("snapshot.rdl").exists(), "consumed at boot");
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["GET", "lock"]).await, bulk("me"));
    assert_eq!(
        c.cmd(&["PTTL", "lock"]).await,
        int(10_000),
        "downtime does not count"
    );
    assert_eq!(c.cmd(&["SHUTDOWN", "NOSAVE"]).await, OK);
    let mut h = h;
    h.stopped().await;
    drop(h);
    assert!(!dir.join("snapshot.rdl").exists(), "NOSAVE writes none");
    let h = start_on(&dir, clock.clone()).await;
    assert!(fenced(&h));
    h.shutdown().await;
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn stale_foreign_or_damaged_snapshots_are_refused() {
    let (a, b) = (data_dir("fencing-a"), data_dir("fencing-b"));
    let clock = redlockd::Clock::manual();
    // A snapshot of node a.
    start_on(&a, clock.clone()).await.shutdown().await;
    let saved = std::fs::read(a.join("snapshot.rdl")).unwrap();
    // Node b boots once (new id), shuts down; its snapshot is swapped for a's.
    start_on(&b, clock.clone()).await.shutdown().await;
    std::fs::write(b.join("snapshot.rdl"), &saved).unwrap();
    let h = start_on(&b, clock.clone()).await;
    assert!(fenced(&h), "another node's snapshot is refused");
    assert!(!b.join("snapshot.rdl").exists());
    h.shutdown().await;
    // Damaged: one byte flipped.
    let mut bad = std::fs::read(b.join("snapshot.rdl")).unwrap();
    bad[30] ^= 0x40;
    std::fs::write(b.join("snapshot.rdl"), &bad).unwrap();
    let h = start_on(&b, clock.clone()).await;
    assert!(fenced(&h), "a corrupt snapshot is refused");
    // (A snapshot keeps what is left of the fence: let it end before saving.)
    clock.advance(Duration::from_secs(31));
    h.shutdown().await;
    // Older than the last crash: put back a good snapshot after a crash-restart.
    let good = std::fs::read(b.join("snapshot.rdl")).unwrap();
    let h = start_on(&b, clock.clone()).await;
    assert!(!fenced(&h));
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["DEBUG", "CRASH-RESTART"]).await, OK);
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["SHUTDOWN", "NOSAVE"]).await, OK);
    let mut h = h;
    h.stopped().await;
    drop(h);
    std::fs::write(b.join("snapshot.rdl"), &good).unwrap();
    let h = start_on(&b, clock.clone()).await;
    assert!(
        fenced(&h),
        "a snapshot older than the last crash is refused"
    );
    h.shutdown().await;
    std::fs::remove_dir_all(&a).unwrap();
    std::fs::remove_dir_all(&b).unwrap();
}

#[tokio::test]
async fn a_directory_in_use_is_refused_with_a_clear_error() {
    let dir = data_dir("fencing-busy");
    let clock = redlockd::Clock::manual();
    let h = start_on(&dir, clock.clone()).await;
    let second = Server::start(Config {
        dir: Some(dir.clone()),
        ..TestServer::config(clock.clone())
    })
    .await;
    let e = second.err().expect("the directory is locked");
    assert!(
        e.to_string().contains("in use by another redlockd node"),
        "{e}"
    );
    h.shutdown().await;
    std::fs::remove_dir_all(&dir).unwrap();
}
