//! MONITOR: the same lines as redis-server 7.0 for the same commands (timestamps and
//! client ports aside), its redactions, its ACL rule, and a monitor that leaves.

use crate::support;
use support::redis_server::RedisNode;
use support::*;

/// The commands both servers run while a client monitors each (`words`: space
/// separated, `'...'` quoted). Unknown commands, wrong arity and admin commands are
/// never shown; AUTH and HELLO's AUTH pair are redacted.
const COMMANDS: &[&[&str]] = &[
    &["SET", "k", "v"],
    &["set", "a b\"c", "x\ny\u{1}\\"],
    &[
        "EVAL",
        "redis.call('set','sk','v'); return redis.pcall('get','sk')",
        "1",
        "sk",
    ],
    &["AUTH", "nosuchpassword"],
    &["AUTH", "someone", "nosuchpassword"],
    &["HELLO", "3", "AUTH", "default", "nosuchpassword"],
    &["HELLO", "2"],
    &["ACL", "SETUSER", "u1", "on", ">secret"],
    &["CONFIG", "GET", "maxmemory"],
    &["CLIENT", "SETNAME", "watched"],
    &["CLIENT", "KILL", "ID", "999999"],
    &["MULTI"],
    &["INCR", "m"],
    &["EXEC"],
    &["nosuchcommand", "x"],
    &["SET", "k"],
    &["GET", "k"],
    &["INCR", "k"],
    &["SELECT", "3"],
    &["SET", "x", "y"],
    &["SELECT", "0"],
    &["PUBLISH", "c", "m"],
    &["ECHO", "end"],
];

/// A server's monitor lines for `COMMANDS`, each with its timestamp checked and cut
/// and the client's address replaced by `client`.
async fn monitor_lines(node: &impl Addressed) -> Vec<String> {
    let mut mon = Raw::to(node).await;
    assert_eq!(mon.cmd(&["MONITOR"]).await, OK);
    let mut c = Raw::to(node).await;
    let addr = c.stream.local_addr().unwrap().to_string();
    for args in COMMANDS {
        c.cmd(args).await;
    }
    let mut lines = Vec::new();
    loop {
        let line = mon.reply().await;
        let line = line.strip_prefix('+').expect("a status line").trim_end();
        let (time, rest) = line.split_once(' ').unwrap();
        let (secs, micros) = time.split_once('.').unwrap();
        assert!(
            secs.len() == 10 && secs.bytes().all(|b| b.is_ascii_digit()),
            "{line}"
        );
        assert!(
            micros.len() == 6 && micros.bytes().all(|b| b.is_ascii_digit()),
            "{line}"
        );
        let rest = rest.replace(&addr, "client");
        let done = rest.ends_with("\"ECHO\" \"end\"");
        lines.push(rest);
        if done {
            return lines;
        }
    }
}

/// Line for line what redis-server's MONITOR shows for the same commands.
#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lines_match_redis() {
    let redis = RedisNode::start(None);
    let ours = start().await;
    let theirs = monitor_lines(&redis).await;
    let mine = monitor_lines(&ours).await;
    assert!(theirs.len() >= 15, "{theirs:#?}");
    assert!(
        theirs.iter().any(|l| l == "[0 lua] \"set\" \"sk\" \"v\""),
        "{theirs:#?}"
    );
    assert!(
        theirs.iter().any(|l| l.contains("(redacted)")),
        "{theirs:#?}"
    );
    assert_eq!(mine, theirs, "redlockd's lines (left) vs redis-server's");
    ours.shutdown().await;
}

/// MONITOR needs @admin: refused for a user without it (and logged as any refusal).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn needs_admin_permission() {
    let h = start().await;
    let mut admin = Raw::to(&h).await;
    let setuser = [
        "ACL", "SETUSER", "app", "on", ">pw", "+@all", "-@admin", "~*",
    ];
    assert_eq!(admin.cmd(&setuser).await, OK);
    let mut app = Raw::to(&h).await;
    assert_eq!(app.cmd(&["AUTH", "app", "pw"]).await, OK);
    assert_eq!(
        app.cmd(&["MONITOR"]).await,
        "-NOPERM User app has no permissions to run the 'monitor' command\r\n"
    );
    h.shutdown().await;
}

/// Every monitor gets every line; one that disconnects leaves the others served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn monitors_that_leave_are_forgotten() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    let mut first = Raw::to(&h).await;
    let mut second = Raw::to(&h).await;
    assert_eq!(first.cmd(&["MONITOR"]).await, OK);
    assert_eq!(second.cmd(&["MONITOR"]).await, OK);
    assert_eq!(
        c.cmd(&["SET", "lock:a", "t1", "NX", "PX", "1000"]).await,
        OK
    );
    for m in [&mut first, &mut second] {
        let line = m.reply().await;
        assert!(
            line.ends_with("\"SET\" \"lock:a\" \"t1\" \"NX\" \"PX\" \"1000\"\r\n"),
            "{line:?}"
        );
    }
    drop(first);
    assert_eq!(c.cmd(&["GET", "lock:a"]).await, "$2\r\nt1\r\n");
    let line = second.reply().await;
    assert!(line.ends_with("\"GET\" \"lock:a\"\r\n"), "{line:?}");
    h.shutdown().await;
}
