//! Fencing tokens on one node (FENCING.GRANT / COMMIT / MARK, exact replies), the
//! token mark across crashes, and clean restarts through the data directory.

use crate::support;

use redlockd::testing::TestServer;
use redlockd::{Config, Server};
use std::path::Path;
use std::time::Duration;
use support::process::data_dir;
use support::{bulk, err, int, resp, Raw, NIL, OK};

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
        err("ERR TTL of 30001 ms is above this server's max-ttl of 30000 ms (raise --max-ttl)")
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
    // The crash fenced until the lock's deadline (15 s left, + 1 s reserved + 1 s);
    // shut down cleanly while that fence still had 7 s left: it is not forgotten.
    assert!(server.restart_clean(), "the snapshot is restored");
    let mut c = Raw::to(&server).await;
    let reply = c.cmd(&["SET", "x", "1", "PX", "100"]).await;
    assert!(reply.contains("for another 7000 ms"), "{reply}");
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
    c.send(&resp(&["SHUTDOWN", "NOSAVE"])).await;
    assert_eq!(c.read_to_close().await, b"", "no reply, as redis-server");
    let mut h = h;
    h.stopped().await;
    drop(h);
    assert!(!dir.join("snapshot.rdl").exists(), "NOSAVE writes none");
    let h = start_on(&dir, clock.clone()).await;
    assert!(fenced(&h));
    h.shutdown().await;
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A node declared new (`redlockd init`) on `dir`: no fence at its first start.
async fn start_declared_new(dir: &Path, clock: redlockd::Clock) -> TestServer {
    redlockd::NodeDir::init(dir, false).expect("a new directory");
    start_on(dir, clock).await
}

/// A snapshot is refused unless it is this node's, of the generation right before,
/// whole, and with node.state's token mark. Each check is what makes its case refused:
/// the node has a short fence of its own and the snapshot holds a 10 s lock, so a
/// snapshot trusted by mistake would show the lock and no fence.
#[tokio::test]
async fn stale_foreign_or_damaged_snapshots_are_refused() {
    let (a, b) = (data_dir("fencing-a"), data_dir("fencing-b"));
    let clock = redlockd::Clock::manual();
    let refused = |h: &TestServer| h.fence_remaining() >= Duration::from_secs(10);
    // A snapshot of node a, holding a 10 s lock.
    let h = start_declared_new(&a, clock.clone()).await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["SET", "lock", "a", "PX", "10000"]).await, OK);
    drop(c);
    h.shutdown().await;
    let saved = std::fs::read(a.join("snapshot.rdl")).unwrap();
    // Node b: same generation and token mark as a; only the node id differs.
    start_declared_new(&b, clock.clone()).await.shutdown().await;
    std::fs::write(b.join("snapshot.rdl"), &saved).unwrap();
    let h = start_on(&b, clock.clone()).await;
    assert!(
        refused(&h),
        "another node's snapshot is refused (and fences for its TTL)"
    );
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["GET", "lock"]).await, NIL, "another node's keys");
    assert!(!b.join("snapshot.rdl").exists(), "removed at boot");
    drop(c);
    clock.advance(Duration::from_secs(12));
    h.shutdown().await;
    // b's own snapshot, with a 10 s lock, each time damaged another way.
    let own = |b: &Path| {
        let clock = clock.clone();
        let b = b.to_path_buf();
        async move {
            let h = start_on(&b, clock.clone()).await;
            clock.advance(Duration::from_secs(12));
            let mut c = Raw::to(&h).await;
            assert_eq!(c.cmd(&["SET", "lock", "b", "PX", "10000"]).await, OK);
            drop(c);
            h.shutdown().await;
            std::fs::read(b.join("snapshot.rdl")).unwrap()
        }
    };
    let good = own(&b).await;
    // The control: the snapshot as written is used.
    let h = start_on(&b, clock.clone()).await;
    assert!(!refused(&h));
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["GET", "lock"]).await, bulk("b"));
    drop(c);
    clock.advance(Duration::from_secs(12));
    h.shutdown().await;
    // Damaged: one byte flipped.
    let mut bad = own(&b).await;
    bad[30] ^= 0x40;
    std::fs::write(b.join("snapshot.rdl"), &bad).unwrap();
    let h = start_on(&b, clock.clone()).await;
    let mut c = Raw::to(&h).await;
    assert_eq!(
        c.cmd(&["GET", "lock"]).await,
        NIL,
        "a corrupt snapshot is refused"
    );
    assert!(refused(&h), "and the record of the lock keeps the fence up");
    drop(c);
    clock.advance(Duration::from_secs(12));
    h.shutdown().await;
    // Stale: a good snapshot of an earlier generation put back.
    let h = start_on(&b, clock.clone()).await;
    h.shutdown().await;
    std::fs::write(b.join("snapshot.rdl"), &good).unwrap();
    let h = start_on(&b, clock.clone()).await;
    let mut c = Raw::to(&h).await;
    assert_eq!(
        c.cmd(&["GET", "lock"]).await,
        NIL,
        "a snapshot of an earlier generation is refused"
    );
    drop(c);
    h.shutdown().await;
    std::fs::remove_dir_all(&a).unwrap();
    std::fs::remove_dir_all(&b).unwrap();
}

/// The token mark comes from node.state, never lower: a snapshot whose mark differs
/// from the one node.state recorded at shutdown is refused.
#[tokio::test]
async fn a_snapshot_cannot_lower_the_token_mark() {
    let dir = data_dir("fencing-mark");
    let clock = redlockd::Clock::manual();
    let h = start_declared_new(&dir, clock.clone()).await;
    let mut c = Raw::to(&h).await;
    assert_eq!(
        c.cmd(&["FENCING.GRANT", "t", "v", "PX", "5000"]).await,
        int(0)
    );
    assert_eq!(c.cmd(&["FENCING.COMMIT", "t", "v", "1"]).await, int(1));
    drop(c);
    h.shutdown().await;
    let mark1 = std::fs::read(dir.join("snapshot.rdl")).unwrap();
    let h = start_on(&dir, clock.clone()).await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["FENCING.MARK"]).await, int(1), "the exact mark");
    assert_eq!(c.cmd(&["FENCING.COMMIT", "t", "v", "10002"]).await, int(1));
    drop(c);
    h.shutdown().await;
    // Put the old snapshot (mark 1) back, with its generation made current: only the
    // mark check is left to refuse it.
    let mut crafted = mark1.clone();
    let gen_at = 8 + 4 + 16;
    let current = std::fs::read(dir.join("snapshot.rdl")).unwrap();
    crafted[gen_at..gen_at + 8].copy_from_slice(&current[gen_at..gen_at + 8]);
    let n = crafted.len();
    let crc = crc32(&crafted[..n - 4]);
    crafted[n - 4..].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(dir.join("snapshot.rdl"), &crafted).unwrap();
    let h = start_on(&dir, clock.clone()).await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["FENCING.MARK"]).await, int(10_002));
    drop(c);
    h.shutdown().await;
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A data directory put back from a backup (a copy: node.state has another inode) is
/// refused with what to do; `init --adopt` accepts it, fenced for max-ttl, its token
/// mark past the one the node reached after the backup.
#[tokio::test]
async fn a_restored_backup_is_refused_until_adopted() {
    let dir = data_dir("fencing-backup");
    let clock = redlockd::Clock::manual();
    let h = start_declared_new(&dir, clock.clone()).await;
    let mut c = Raw::to(&h).await;
    assert_eq!(
        c.cmd(&["FENCING.GRANT", "t", "v", "PX", "5000"]).await,
        int(0)
    );
    assert_eq!(c.cmd(&["FENCING.COMMIT", "t", "v", "1"]).await, int(1));
    drop(c);
    h.shutdown().await;
    let backup = std::fs::read(dir.join("node.state")).unwrap();
    let snapshot = std::fs::read(dir.join("snapshot.rdl")).unwrap();
    let h = start_on(&dir, clock.clone()).await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["FENCING.COMMIT", "t", "v", "10002"]).await, int(1));
    drop(c);
    h.shutdown().await;
    // The disk is replaced; the backup is copied back.
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("node.state"), &backup).unwrap();
    std::fs::write(dir.join("snapshot.rdl"), &snapshot).unwrap();
    let e = Server::start(Config {
        dir: Some(dir.clone()),
        ..TestServer::config(clock.clone())
    })
    .await
    .err()
    .expect("a copied node.state is refused");
    let text = e.to_string();
    assert!(text.contains("node.state is a copy"), "{text}");
    assert!(text.contains("--adopt"), "{text}");
    let done = redlockd::NodeDir::init(&dir, true).unwrap();
    assert!(done.contains("adopted"), "{done}");
    assert!(!dir.join("snapshot.rdl").exists());
    let h = start_on(&dir, clock.clone()).await;
    assert_eq!(
        h.fence_remaining(),
        Duration::from_secs(31),
        "max-ttl + margin"
    );
    let mut c = Raw::to(&h).await;
    let mark = c.cmd(&["FENCING.MARK"]).await;
    let mark: u64 = mark.trim_start_matches(':').trim_end().parse().unwrap();
    assert!(
        mark > 10_002,
        "the mark jumps past what was handed out: {mark}"
    );
    drop(c);
    h.shutdown().await;
    std::fs::remove_dir_all(&dir).unwrap();
}

/// CRC-32 (IEEE), to re-seal a crafted snapshot.
fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xEDB8_8320 & (crc & 1).wrapping_neg());
        }
    }
    !crc
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
