//! Which fence rule each kind of boot gets, as `INFO fence` reports it.

use super::save;
use crate::clock::MANUAL_WALL_START_MS;
use crate::config::Config;
use crate::durability::data_dir::NodeDir;
use crate::inmem::Session;
use bytes::BytesMut;
use std::path::{Path, PathBuf};
use std::time::Duration;

const TRYAGAIN: &str = "-TRYAGAIN restart fence: this node restarted and may have granted locks that are still held; it refuses writes for another";

fn temp_dir() -> PathBuf {
    std::env::temp_dir().join(format!(
        "redlockd-unit-boot-{}-{}",
        std::process::id(),
        rand::random::<u64>()
    ))
}

/// A node on `dir` with the default fence (max-ttl 30 s + 1 s margin).
fn node(dir: &Path) -> Session {
    Session::new(Config {
        dir: Some(dir.to_path_buf()),
        restart_delay: None,
        ..Config::for_tests()
    })
}

fn cmd(s: &mut Session, args: &[&str]) -> String {
    let mut out = BytesMut::new();
    s.call(args, &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// INFO's `fence` and `fencing` fields that say how the node booted, one line.
fn boot_info(s: &mut Session) -> String {
    let info = cmd(s, &["INFO", "fence"]) + &cmd(s, &["INFO", "fencing"]);
    let wanted = [
        "fence_active",
        "fence_remaining_ms",
        "fence_until_unix_ms",
        "fence_rule",
        "fence_length_ms",
        "last_boot",
    ];
    info.split("\r\n")
        .filter(|l| wanted.iter().any(|w| l.split(':').next() == Some(*w)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Wall ms (the manual clock's) `ms` after the clock's start.
fn wall(ms: u64) -> i64 {
    MANUAL_WALL_START_MS + ms as i64
}

fn generation(s: &Session) -> u64 {
    s.shared().node_dir.as_ref().unwrap().state().boot
}

#[test]
fn declared_new_then_same_boot_then_reboot() {
    let dir = temp_dir();
    assert!(NodeDir::init(&dir, false).unwrap().contains("declared"));
    let mut s = node(&dir);
    assert_eq!(
        boot_info(&mut s),
        "fence_active:0 fence_remaining_ms:0 fence_until_unix_ms:0 fence_rule:declared-new fence_length_ms:0 last_boot:fresh"
    );
    assert_eq!(generation(&s), 1);
    assert_eq!(cmd(&mut s, &["SET", "a", "x", "PX", "5000"]), "+OK\r\n");

    // A crash 2 s later, on the same boot: until the recorded reach (the lock's
    // deadline + 1 s reserved ahead) + 1 s margin, that is 5 s from now.
    s.clock().advance(Duration::from_millis(2000));
    s.shared().crash_restart();
    assert_eq!(
        boot_info(&mut s),
        format!("fence_active:1 fence_remaining_ms:5000 fence_until_unix_ms:{} fence_rule:same-boot fence_length_ms:5000 last_boot:fence", wall(7000))
    );
    assert_eq!(generation(&s), 2);
    assert_eq!(cmd(&mut s, &["GET", "a"]), "$-1\r\n", "keys are forgotten");
    assert_eq!(
        cmd(&mut s, &["SET", "b", "y", "PX", "100"]),
        format!("{TRYAGAIN} 5000 ms\r\n")
    );
    s.clock().advance(Duration::from_millis(4999));
    assert!(cmd(&mut s, &["SET", "b", "y", "PX", "100"]).starts_with(TRYAGAIN));
    s.clock().advance(Duration::from_millis(1));
    assert_eq!(cmd(&mut s, &["SET", "b", "y", "PX", "100"]), "+OK\r\n");

    // Crashed again once everything it could have granted is over (that grant's
    // reach, 1.1 s from now, + margin): the same rule, nothing left to wait for.
    s.clock().advance(Duration::from_millis(2100));
    s.shared().crash_restart();
    assert_eq!(
        boot_info(&mut s),
        "fence_active:0 fence_remaining_ms:0 fence_until_unix_ms:0 fence_rule:same-boot fence_length_ms:0 last_boot:fence"
    );
    assert_eq!(cmd(&mut s, &["SET", "c", "z", "PX", "7500"]), "+OK\r\n");
    assert!(cmd(&mut s, &["INFO", "fencing"]).contains("\r\ngrant_reach_ttl_ms:8000\r\n"));

    // After a reboot the downtime is unknown: the longest TTL granted (7.5 s,
    // reserved in whole seconds) + 1 s margin, from now.
    s.shared().reach.pretend_reboot();
    s.clock().advance(Duration::from_millis(100_000));
    s.shared().crash_restart();
    assert_eq!(
        boot_info(&mut s),
        format!("fence_active:1 fence_remaining_ms:9000 fence_until_unix_ms:{} fence_rule:reboot fence_length_ms:9000 last_boot:fence", wall(2000 + 5000 + 2100 + 100_000 + 9000))
    );
    assert_eq!(generation(&s), 4);
    drop(s);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_directory_without_a_record_gets_the_full_fence_and_delay_zero_none() {
    let dir = temp_dir();
    let mut s = node(&dir);
    assert_eq!(
        boot_info(&mut s),
        format!("fence_active:1 fence_remaining_ms:31000 fence_until_unix_ms:{} fence_rule:no-history fence_length_ms:31000 last_boot:fence", wall(31_000))
    );
    assert_eq!(
        cmd(&mut s, &["SET", "a", "x", "PX", "100"]),
        format!("{TRYAGAIN} 31000 ms (its data directory holds no record of what it granted; a brand-new node is declared with `redlockd init --dir DIR` before its first start)\r\n")
    );
    drop(s);
    std::fs::remove_dir_all(&dir).unwrap();

    let dir = temp_dir();
    let mut s = Session::new(Config {
        dir: Some(dir.clone()),
        ..Config::for_tests()
    });
    assert_eq!(
        boot_info(&mut s),
        "fence_active:0 fence_remaining_ms:0 fence_until_unix_ms:0 fence_rule:off fence_length_ms:0 last_boot:fresh"
    );
    assert_eq!(cmd(&mut s, &["SET", "a", "x", "PX", "100"]), "+OK\r\n");
    s.shared().crash_restart();
    assert_eq!(
        boot_info(&mut s),
        "fence_active:0 fence_remaining_ms:0 fence_until_unix_ms:0 fence_rule:off fence_length_ms:0 last_boot:fresh"
    );
    drop(s);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_clean_restart_keeps_keys_tokens_and_what_was_left_of_the_fence() {
    let dir = temp_dir();
    NodeDir::init(&dir, false).unwrap();
    let mut s = node(&dir);
    assert_eq!(cmd(&mut s, &["SET", "a", "x", "PX", "5000"]), "+OK\r\n");
    assert_eq!(
        cmd(&mut s, &["FENCING.GRANT", "l", "me", "PX", "10000"]),
        ":0\r\n"
    );
    assert_eq!(cmd(&mut s, &["FENCING.COMMIT", "l", "me", "12"]), ":1\r\n");
    s.clock().advance(Duration::from_millis(1000));
    save(s.shared()).unwrap();
    assert_eq!(s.shared().boot().name(), "snapshot");
    assert_eq!(
        boot_info(&mut s),
        "fence_active:0 fence_remaining_ms:0 fence_until_unix_ms:0 fence_rule:snapshot fence_length_ms:0 last_boot:snapshot"
    );
    assert_eq!(cmd(&mut s, &["PTTL", "a"]), ":4000\r\n");
    assert_eq!(cmd(&mut s, &["PTTL", "l"]), ":9000\r\n");
    assert_eq!(cmd(&mut s, &["FENCING.MARK"]), ":12\r\n");
    assert!(cmd(&mut s, &["INFO", "fencing"]).contains("\r\nfencing_token_reserved:12\r\n"));
    assert!(!dir.join("snapshot.rdl").exists(), "used once");

    // A crash right after: the restored locks (9 s left) + margin.
    s.shared().crash_restart();
    assert_eq!(
        boot_info(&mut s),
        format!("fence_active:1 fence_remaining_ms:10000 fence_until_unix_ms:{} fence_rule:same-boot fence_length_ms:10000 last_boot:fence", wall(11_000))
    );
    // A clean restart 3 s into that fence keeps the 7 s left of it.
    s.clock().advance(Duration::from_millis(3000));
    save(s.shared()).unwrap();
    assert_eq!(s.shared().boot().name(), "snapshot");
    assert_eq!(
        boot_info(&mut s),
        format!("fence_active:1 fence_remaining_ms:7000 fence_until_unix_ms:{} fence_rule:snapshot fence_length_ms:7000 last_boot:snapshot", wall(11_000))
    );
    drop(s);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A new process restores a clean-shutdown snapshot, grants a short lock and
/// crashes: the fence still outlasts the restored locks (the short grant's record
/// does not replace theirs).
#[test]
fn after_a_restore_the_record_covers_the_restored_locks() {
    let dir = temp_dir();
    NodeDir::init(&dir, false).unwrap();
    let mut a = node(&dir);
    assert_eq!(cmd(&mut a, &["SET", "l", "v", "PX", "10000"]), "+OK\r\n");
    a.clock().advance(Duration::from_millis(1000));
    save(a.shared()).unwrap();
    drop(a);
    let mut b = node(&dir);
    assert_eq!(cmd(&mut b, &["PTTL", "l"]), ":9000\r\n");
    assert_eq!(cmd(&mut b, &["SET", "s", "v", "PX", "100"]), "+OK\r\n");
    b.shared().crash_restart();
    assert_eq!(
        boot_info(&mut b),
        format!("fence_active:1 fence_remaining_ms:10000 fence_until_unix_ms:{} fence_rule:same-boot fence_length_ms:10000 last_boot:fence", wall(10_000))
    );
    drop(b);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn another_nodes_snapshot_is_refused_and_the_fence_outlasts_its_keys() {
    let (a, b) = (temp_dir(), temp_dir());
    NodeDir::init(&a, false).unwrap();
    NodeDir::init(&b, false).unwrap();
    let mut na = node(&a);
    assert_eq!(cmd(&mut na, &["SET", "k", "a", "PX", "25000"]), "+OK\r\n");
    save(na.shared()).unwrap();
    drop(na);
    let mut nb = node(&b);
    std::fs::copy(a.join("snapshot.rdl"), b.join("snapshot.rdl")).unwrap();
    nb.shared().crash_restart();
    // b granted nothing (its own rule: 1 s margin), but a's keys could be held.
    assert_eq!(
        boot_info(&mut nb),
        format!("fence_active:1 fence_remaining_ms:26000 fence_until_unix_ms:{} fence_rule:same-boot fence_length_ms:26000 last_boot:fence", wall(26_000))
    );
    assert_eq!(cmd(&mut nb, &["EXISTS", "k"]), ":0\r\n");
    assert!(
        !b.join("snapshot.rdl").exists(),
        "a refused snapshot is removed"
    );
    drop(nb);
    std::fs::remove_dir_all(&a).unwrap();
    std::fs::remove_dir_all(&b).unwrap();
}

#[test]
fn a_snapshot_above_this_runs_max_ttl_is_refused_and_one_at_it_is_not() {
    let dir = temp_dir();
    NodeDir::init(&dir, false).unwrap();
    let mut s = node(&dir);
    assert_eq!(cmd(&mut s, &["SET", "k", "v", "PX", "30000"]), "+OK\r\n");
    save(s.shared()).unwrap();
    assert_eq!(s.shared().boot().name(), "snapshot");
    assert_eq!(cmd(&mut s, &["PTTL", "k"]), ":30000\r\n");
    save(s.shared()).unwrap();
    // The next run has max-ttl 10 s: a lock with 30 s left would outlive the fence
    // of a crash without a record.
    s.shared().fence.reconfigure(10_000, 11_000);
    assert_eq!(s.shared().boot().name(), "fence");
    assert_eq!(cmd(&mut s, &["EXISTS", "k"]), ":0\r\n");
    assert!(cmd(&mut s, &["INFO", "fence"])
        .contains("\r\nmax_ttl_ms:10000\r\nrestart_delay_ms:11000\r\n"));
    drop(s);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Captures what this thread logs while `f` runs. One global subscriber for the
/// whole test binary, writing into the capturing thread's buffer (a scoped one
/// misses events: tracing caches each call site's interest across threads).
#[cfg(feature = "cli")]
fn logged(f: impl FnOnce()) -> String {
    use std::cell::RefCell;
    thread_local!(static CAPTURE: RefCell<Option<Vec<u8>>> = const { RefCell::new(None) });
    struct ToCapture;
    impl std::io::Write for ToCapture {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            CAPTURE.with(|c| {
                if let Some(buf) = c.borrow_mut().as_mut() {
                    buf.extend_from_slice(b);
                }
            });
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        let subscriber = tracing_subscriber::fmt()
            .with_writer(|| ToCapture)
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("the only one");
    });
    CAPTURE.with(|c| *c.borrow_mut() = Some(Vec::new()));
    f();
    let out = CAPTURE.with(|c| c.borrow_mut().take()).unwrap_or_default();
    String::from_utf8_lossy(&out).into_owned()
}

/// The first start on a directory with no node in it tells the operator how to
/// declare a brand-new node; no other start does.
#[cfg(feature = "cli")]
#[test]
fn only_a_first_start_on_an_empty_directory_says_how_to_declare_a_new_node() {
    let hint = "had no node in it: a new identity was made";
    let dir = temp_dir();
    let mut node_a = None;
    let log = logged(|| node_a = Some(node(&dir)));
    assert!(log.contains(hint), "{log}");
    assert!(
        log.contains(&format!("`redlockd init --dir {}`", dir.display())),
        "{log}"
    );
    let s = node_a.unwrap();
    assert!(!logged(|| s.shared().crash_restart()).contains(hint));
    drop(s);
    let log = logged(|| drop(node(&dir)));
    assert!(log.contains("node identity"), "{log}");
    assert!(!log.contains(hint), "{log}");
    std::fs::remove_dir_all(&dir).unwrap();
    let dir = temp_dir();
    NodeDir::init(&dir, false).unwrap();
    assert!(!logged(|| drop(node(&dir))).contains(hint));
    std::fs::remove_dir_all(&dir).unwrap();
    // An empty directory, but the fence is off: nothing to declare.
    let dir = temp_dir();
    let off = || {
        drop(Session::new(Config {
            dir: Some(dir.clone()),
            ..Config::for_tests()
        }))
    };
    assert!(!logged(off).contains(hint));
    std::fs::remove_dir_all(&dir).unwrap();
}
