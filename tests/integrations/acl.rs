//! ACL users: AUTH user pass, HELLO AUTH, the default user and requirepass, users from
//! an ACL file, command / key / channel permissions with Redis 7.2's errors, the ACL
//! command, scripts and MULTI with the caller's permissions, and two differential
//! checks against a real redis-server (categories, and a session of ACL replies).
//!
//! Redis 7.0 (the version Debian ships) words NOPERM errors differently from 7.2
//! ("this user has no permissions to run the 'set' command"); redlockd reports 7.2.4
//! and answers 7.2's words, so the differential session compares NOPERM errors by
//! their code only, and skips the rule descriptions 7.0 compacts differently.

use crate::support;
use std::process::{Command, Stdio};
use support::process::BIN;
use support::redis_server::RedisNode;
use support::*;

const FILE: &str = "\
user alice on >pass ~lock:* +@read +@write -@admin
# a comment (Redis's own files have none: redlockd skips them)

user ro on >p ~* &* +@read
user locker on >l ~lock:* resetchannels -@all +set +get +evalsha +eval +del +multi +exec
";

const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

/// The SHA-256 of "pass", as ACL LIST shows it.
const PASS_HASH: &str = "d74ff0ee8da3b9806b18c877dbf29bbde50b5bd8e4dad7a3a725000feb82e8f1";

fn acl_file(text: &str) -> TempPath {
    let path = TempPath::new("aclfile");
    std::fs::write(&path.0, text).unwrap();
    path
}

async fn with_users(file: &TempPath) -> TestServer {
    let path = file.0.clone();
    start_with(move |c| c.aclfile = Some(path)).await
}

async fn as_user(h: &TestServer, user: &str, pass: &str) -> Raw {
    let mut c = Raw::to(h).await;
    c.check(&["AUTH", user, pass], OK).await;
    c
}

#[tokio::test]
async fn users_from_a_file_authenticate_and_are_held_to_their_rules() {
    let file = acl_file(FILE);
    let h = with_users(&file).await;
    let mut c = Raw::to(&h).await;
    c.check(&["AUTH", "alice", "wrong"], &err(WRONGPASS)).await;
    c.check(&["AUTH", "nosuch", "pass"], &err(WRONGPASS)).await;
    c.check(&["AUTH", "alice", "pass"], OK).await;
    c.check(
        &["ACL", "WHOAMI"],
        &err("NOPERM User alice has no permissions to run the 'acl|whoami' command"),
    )
    .await;
    c.check(&["SET", "lock:1", "v", "NX", "PX", "1000"], OK)
        .await;
    c.check(
        &["SET", "k", "v"],
        &err("NOPERM No permissions to access a key"),
    )
    .await;
    c.check(
        &["MGET", "lock:1", "k"],
        &err("NOPERM No permissions to access a key"),
    )
    .await;
    c.check(&["GET", "lock:1"], &bulk("v")).await;
    c.check(
        &["CONFIG", "GET", "port"],
        &err("NOPERM User alice has no permissions to run the 'config|get' command"),
    )
    .await;
    c.check(
        &["SLOWLOG", "GET"],
        &err("NOPERM User alice has no permissions to run the 'slowlog|get' command"),
    )
    .await;
    // NO_AUTH commands are never refused (Redis): AUTH again, HELLO, RESET, QUIT.
    let mut r = Raw::to(&h).await;
    r.check(&["AUTH", "ro", "p"], OK).await;
    r.check(
        &["PING"],
        &err("NOPERM User ro has no permissions to run the 'ping' command"),
    )
    .await;
    r.check(
        &["SET", "x", "1"],
        &err("NOPERM User ro has no permissions to run the 'set' command"),
    )
    .await;
    r.check(&["GET", "x"], NIL).await;
    // HELLO 3 AUTH switches user and protocol at once.
    let hello = r.cmd(&["HELLO", "3", "AUTH", "alice", "pass"]).await;
    assert!(hello.starts_with("%7\r\n"), "{hello}");
    r.check(&["GET", "lock:1"], &bulk("v")).await;
    r.check(&["HELLO", "2", "AUTH", "alice", "nope"], &err(WRONGPASS))
        .await;
    // RESET goes back to the default user (on, nopass here: authenticated).
    r.check(&["RESET"], "+RESET\r\n").await;
    r.check(&["ACL", "WHOAMI"], &bulk("default")).await;
    let list = r.cmd(&["CLIENT", "LIST"]).await;
    assert!(
        list.contains(" user=default ") && list.contains(" user=alice "),
        "{list}"
    );
    h.shutdown().await;
}

#[tokio::test]
async fn requirepass_is_the_default_users_password() {
    let h = start_with(|c| c.requirepass = Some("pw".into())).await;
    let mut c = Raw::to(&h).await;
    c.check(&["GET", "k"], &err("NOAUTH Authentication required."))
        .await;
    c.check(&["AUTH", "default", "nope"], &err(WRONGPASS)).await;
    c.check(&["AUTH", "default", "pw"], OK).await;
    let mut d = Raw::to(&h).await;
    d.check(&["AUTH", "pw"], OK).await;
    let pw_hash = "30c952fab122c3f9759f02a6d95c3758b246b4fee239957b2d4fee46e26170c4";
    d.check(
        &["ACL", "LIST"],
        &format!(
            "*1\r\n{}",
            bulk(&format!("user default on #{pw_hash} ~* &* +@all"))
        ),
    )
    .await;
    // Without requirepass, AUTH <password> alone is Redis's configuration error.
    let open = start().await;
    Raw::to(&open)
        .await
        .check(
            &["AUTH", "x"],
            &err("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"),
        )
        .await;
    // A default user turned off refuses everyone until AUTH as another user.
    let mut admin = Raw::to(&open).await;
    admin
        .check(
            &["ACL", "SETUSER", "ops", "on", ">o", "+@all", "~*", "&*"],
            OK,
        )
        .await;
    admin.check(&["ACL", "SETUSER", "default", "off"], OK).await;
    let mut late = Raw::to(&open).await;
    late.check(&["PING"], &err("NOAUTH Authentication required."))
        .await;
    late.check(&["AUTH", "ops", "o"], OK).await;
    late.check(&["PING"], "+PONG\r\n").await;
    h.shutdown().await;
    open.shutdown().await;
}

#[tokio::test]
async fn acl_commands_answer_as_redis() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.check(&["ACL", "WHOAMI"], &bulk("default")).await;
    c.check(
        &[
            "ACL", "SETUSER", "alice", "on", ">pass", "~lock:*", "+@read", "+@write", "-@admin",
        ],
        OK,
    )
    .await;
    c.check(&["ACL", "SETUSER", "dave"], OK).await;
    c.check(
        &["ACL", "USERS"],
        &format!("*3\r\n{}{}{}", bulk("alice"), bulk("dave"), bulk("default")),
    )
    .await;
    c.check(
        &["ACL", "LIST"],
        &format!(
            "*3\r\n{}{}{}",
            bulk(&format!(
                "user alice on #{PASS_HASH} ~lock:* resetchannels -@all +@read +@write -@admin"
            )),
            bulk("user dave off resetchannels -@all"),
            bulk("user default on nopass ~* &* +@all"),
        ),
    )
    .await;
    c.check(
        &["ACL", "GETUSER", "alice"],
        &format!(
            "*12\r\n{}*1\r\n{}{}*1\r\n{}{}{}{}{}{}{}{}*0\r\n",
            bulk("flags"),
            bulk("on"),
            bulk("passwords"),
            bulk(PASS_HASH),
            bulk("commands"),
            bulk("-@all +@read +@write -@admin"),
            bulk("keys"),
            bulk("~lock:*"),
            bulk("channels"),
            bulk(""),
            bulk("selectors"),
        ),
    )
    .await;
    c.check(&["ACL", "GETUSER", "nosuch"], NIL).await;
    c.check(
        &["ACL", "SETUSER", "x", "bogus"],
        &err("ERR Error in ACL SETUSER modifier 'bogus': Syntax error"),
    )
    .await;
    c.check(
        &["ACL", "SETUSER", "x", "+nosuch"],
        &err(
            "ERR Error in ACL SETUSER modifier '+nosuch': Unknown command or category name in ACL",
        ),
    )
    .await;
    c.check(
        &["ACL", "SETUSER", "x", "+@nosuch"],
        &err(
            "ERR Error in ACL SETUSER modifier '+@nosuch': Unknown command or category name in ACL",
        ),
    )
    .await;
    c.check(&["ACL", "SETUSER", "x", "#abc"], &err("ERR Error in ACL SETUSER modifier '#abc': The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters")).await;
    c.check(&["ACL", "SETUSER", "x", "allkeys", "~a"], &err("ERR Error in ACL SETUSER modifier '~a': Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns")).await;
    c.check(&["ACL", "SETUSER", "x", "(~x +get)"], &err("ERR Error in ACL SETUSER modifier '(~x +get)': redlockd does not support selectors: give the rules without parentheses")).await;
    c.check(
        &["ACL", "SETUSER", "with space"],
        &err("ERR Usernames can't contain spaces or null characters"),
    )
    .await;
    // A failed SETUSER changes nothing (x was never created).
    c.check(&["ACL", "GETUSER", "x"], NIL).await;
    c.check(
        &["ACL", "DELUSER", "default"],
        &err("ERR The 'default' user cannot be removed"),
    )
    .await;
    c.check(&["ACL", "DELUSER", "dave", "nosuch"], &int(1))
        .await;
    c.check(
        &["ACL", "CAT", "transaction"],
        &format!(
            "*5\r\n{}{}{}{}{}",
            bulk("multi"),
            bulk("exec"),
            bulk("discard"),
            bulk("watch"),
            bulk("unwatch")
        ),
    )
    .await;
    c.check(
        &["ACL", "CAT", "nosuch"],
        &err("ERR Unknown category 'nosuch'"),
    )
    .await;
    let all = c.cmd(&["ACL", "CAT"]).await;
    assert!(all.starts_with("*21\r\n$8\r\nkeyspace\r\n"), "{all}");
    c.check(&["ACL", "DRYRUN", "alice", "set", "lock:1", "v"], OK)
        .await;
    c.check(
        &["ACL", "DRYRUN", "alice", "set", "k", "v"],
        &bulk("User alice has no permissions to access the 'k' key"),
    )
    .await;
    // Sorted-set algebra: the destination and the inputs after numkeys are keys (with
    // a numkeys such as "1x", as Redis's fallback reads it with atoi).
    for (args, key) in [
        (&["zunionstore", "lock:d", "2", "lock:a", "k"][..], "k"),
        (&["zunionstore", "k", "1", "lock:a"], "k"),
        (&["zintercard", "1", "k"], "k"),
        (&["zdiffstore", "lock:d", "1x", "k"], "k"),
    ] {
        let dryrun = [&["ACL", "DRYRUN", "alice"][..], args].concat();
        let denied = format!("User alice has no permissions to access the '{key}' key");
        c.check(&dryrun, &bulk(&denied)).await;
    }
    c.check(
        &["ACL", "DRYRUN", "alice", "config", "get", "x"],
        &bulk("User alice has no permissions to run the 'config|get' command"),
    )
    .await;
    c.check(
        &["ACL", "DRYRUN", "nosuch", "get", "k"],
        &err("ERR User 'nosuch' not found"),
    )
    .await;
    c.check(
        &["ACL", "DRYRUN", "alice", "nosuch"],
        &err("ERR Command 'nosuch' not found"),
    )
    .await;
    c.check(
        &["ACL", "DRYRUN", "alice", "get"],
        &err("ERR wrong number of arguments for 'get' command"),
    )
    .await;
    c.check(
        &["ACL", "WHOAMI", "x"],
        &err("ERR wrong number of arguments for 'acl|whoami' command"),
    )
    .await;
    c.check(
        &["ACL", "LOG", "1", "2"],
        &err("ERR unknown subcommand or wrong number of arguments for 'LOG'. Try ACL HELP."),
    )
    .await;
    c.check(
        &["ACL", "FOO"],
        &err("ERR unknown subcommand 'FOO'. Try ACL HELP."),
    )
    .await;
    c.check(&["ACL", "LOAD"], &err("ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.")).await;
    h.shutdown().await;
}

#[tokio::test]
async fn the_acl_log_records_refusals_with_redis_fields() {
    let file = acl_file(FILE);
    let h = with_users(&file).await;
    let mut c = Raw::to(&h).await;
    c.check(&["AUTH", "alice", "wrong"], &err(WRONGPASS)).await;
    c.check(&["AUTH", "alice", "pass"], OK).await;
    c.cmd(&["SET", "k", "v"]).await;
    c.cmd(&["SET", "k", "v"]).await;
    c.cmd(&["CONFIG", "GET", "port"]).await;
    let mut admin = Raw::to(&h).await;
    admin.hello3().await;
    let log = admin.cmd(&["ACL", "LOG"]).await;
    let entries: Vec<&str> = log.split("%10\r\n").skip(1).collect();
    assert_eq!(entries.len(), 3, "{log}");
    let field = |entry: &str, name: &str| -> String {
        let at = entry
            .find(&bulk(name))
            .unwrap_or_else(|| panic!("{name} in {entry}"));
        let rest = &entry[at + bulk(name).len()..];
        rest[..rest.find("\r\n").unwrap()].to_string()
    };
    // Newest first: the command, the key (twice: one entry, count 2), the AUTH.
    assert!(entries[0].contains(&format!("{}{}", bulk("reason"), bulk("command"))));
    assert!(entries[0].contains(&format!("{}{}", bulk("object"), bulk("config|get"))));
    assert!(entries[0].contains(&format!("{}{}", bulk("context"), bulk("toplevel"))));
    assert!(
        entries[0].contains("cmd=config user=alice"),
        "{}",
        entries[0]
    );
    assert_eq!(field(entries[1], "count"), ":2");
    assert!(entries[1].contains(&format!("{}{}", bulk("object"), bulk("k"))));
    assert!(entries[2].contains(&format!(
        "{}{}{}{}",
        bulk("reason"),
        bulk("auth"),
        bulk("context"),
        bulk("toplevel")
    )));
    assert!(entries[2].contains(&format!(
        "{}{}{}{}",
        bulk("object"),
        bulk("AUTH"),
        bulk("username"),
        bulk("alice")
    )));
    for name in [
        "age-seconds",
        "client-info",
        "entry-id",
        "timestamp-created",
        "timestamp-last-updated",
    ] {
        assert!(entries[0].contains(&bulk(name)), "{name}");
    }
    assert_eq!(field(entries[2], "entry-id"), ":0");
    assert_eq!(
        admin
            .cmd(&["ACL", "LOG", "1"])
            .await
            .matches("%10\r\n")
            .count(),
        1
    );
    admin.check(&["ACL", "LOG", "RESET"], OK).await;
    admin.check(&["ACL", "LOG"], "*0\r\n").await;
    let info = admin.cmd(&["INFO", "stats"]).await;
    for line in [
        "acl_access_denied_auth:1",
        "acl_access_denied_cmd:1",
        "acl_access_denied_key:2",
        "acl_access_denied_channel:0",
    ] {
        assert!(info.contains(line), "{line} in {info}");
    }
    let stats = admin.cmd(&["INFO", "commandstats"]).await;
    assert!(
        stats.contains(
            "cmdstat_set:calls=0,usec=0,usec_per_call=0.00,rejected_calls=2,failed_calls=0"
        ),
        "{stats}"
    );
    h.shutdown().await;
}

#[tokio::test]
async fn scripts_and_transactions_run_with_the_callers_permissions() {
    let file = acl_file(FILE);
    let h = with_users(&file).await;
    let mut c = as_user(&h, "locker", "l").await;
    // The Redlock release script on a permitted key; then on a key outside ~lock:*.
    let release = "if redis.call('get',KEYS[1]) == ARGV[1] then return redis.call('del',KEYS[1]) else return 0 end";
    c.check(&["SET", "lock:a", "t", "NX", "PX", "5000"], OK)
        .await;
    c.check(&["EVAL", release, "1", "lock:a", "t"], &int(1))
        .await;
    // Keys named by numkeys are checked before the script runs, as any command's.
    c.check(
        &["EVAL", release, "1", "other", "t"],
        &err("NOPERM No permissions to access a key"),
    )
    .await;
    // Inside the script: Redis's "ACL failure in script" errors.
    let reply = c
        .cmd(&["EVAL", "return redis.call('get','other')", "0"])
        .await;
    assert!(
        reply.starts_with("-ERR ACL failure in script: No permissions to access a key script: "),
        "{reply}"
    );
    let reply = c
        .cmd(&["EVAL", "return redis.call('incr','lock:n')", "0"])
        .await;
    assert!(reply.starts_with("-ERR ACL failure in script: User locker has no permissions to run the 'incr' command script: "), "{reply}");
    c.check(
        &["EVAL", "return redis.pcall('incr','lock:n')", "0"],
        &err("ERR ACL failure in script: User locker has no permissions to run the 'incr' command"),
    )
    .await;
    // MULTI: a forbidden command is refused when queued, and EXEC aborts.
    c.check(&["MULTI"], OK).await;
    c.check(&["SET", "lock:b", "1"], "+QUEUED\r\n").await;
    c.check(
        &["INCR", "lock:b"],
        &err("NOPERM User locker has no permissions to run the 'incr' command"),
    )
    .await;
    c.check(
        &["SET", "other", "1"],
        &err("NOPERM No permissions to access a key"),
    )
    .await;
    c.check(
        &["EXEC"],
        &err("EXECABORT Transaction discarded because of previous errors."),
    )
    .await;
    c.check(&["GET", "lock:b"], NIL).await;
    // Rules changed between queueing and EXEC: that command's entry says so.
    c.check(&["MULTI"], OK).await;
    c.check(&["SET", "lock:b", "1"], "+QUEUED\r\n").await;
    c.check(&["GET", "lock:b"], "+QUEUED\r\n").await;
    let mut admin = Raw::to(&h).await;
    admin.check(&["ACL", "SETUSER", "locker", "-get"], OK).await;
    c.check(
        &["EXEC"],
        &format!(
            "*2\r\n+OK\r\n{}",
            err("NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: no permission to execute the command or subcommand")
        ),
    )
    .await;
    // SETUSER applies to the connected client at once.
    c.check(
        &["GET", "lock:b"],
        &err("NOPERM User locker has no permissions to run the 'get' command"),
    )
    .await;
    // DELUSER disconnects the user's clients.
    admin.check(&["ACL", "DELUSER", "locker"], &int(1)).await;
    assert!(c.closed().await);
    h.shutdown().await;
}

#[tokio::test]
async fn channels_are_checked_for_publish_and_subscribe() {
    let h = start().await;
    let mut admin = Raw::to(&h).await;
    admin
        .check(
            &[
                "ACL",
                "SETUSER",
                "s",
                "on",
                ">s",
                "allkeys",
                "&news.*",
                "+publish",
                "+subscribe",
                "+psubscribe",
            ],
            OK,
        )
        .await;
    let mut c = as_user(&h, "s", "s").await;
    c.check(&["PUBLISH", "news.a", "x"], &int(0)).await;
    c.check(
        &["PUBLISH", "other", "x"],
        &err("NOPERM No permissions to access a channel"),
    )
    .await;
    c.check(
        &["SUBSCRIBE", "news.a", "other"],
        &err("NOPERM No permissions to access a channel"),
    )
    .await;
    // PSUBSCRIBE needs the pattern itself among the user's patterns.
    c.check(
        &["PSUBSCRIBE", "news.a*"],
        &err("NOPERM No permissions to access a channel"),
    )
    .await;
    let ok = c.cmd(&["PSUBSCRIBE", "news.*"]).await;
    assert!(ok.starts_with("*3\r\n$10\r\npsubscribe\r\n"), "{ok}");
    h.shutdown().await;
}

#[tokio::test]
async fn noperm_refusals_are_a_metric() {
    let h = start_with(|c| c.metrics_addr = Some("127.0.0.1:0".parse().unwrap())).await;
    let mut admin = Raw::to(&h).await;
    admin
        .check(&["ACL", "SETUSER", "r", "on", "nopass", "~*", "+get"], OK)
        .await;
    let mut c = as_user(&h, "r", "x").await;
    c.cmd(&["SET", "lock", "a", "NX", "PX", "1000"]).await;
    let at = h.metrics_addr().expect("metrics bound");
    let body = scrape(at).await;
    assert!(
        body.contains("redlockd_lock_refusals_total{reason=\"noperm\"} 1\n"),
        "{body}"
    );
    h.shutdown().await;
}

#[tokio::test]
async fn acl_load_and_save_use_the_file() {
    let file = acl_file("user a on >x ~a:* +get\n");
    let h = with_users(&file).await;
    let mut c = Raw::to(&h).await;
    c.check(&["ACL", "SETUSER", "b", "on", "nopass", "+ping"], OK)
        .await;
    c.check(&["ACL", "SAVE"], OK).await;
    let path = file.0.display().to_string();
    c.check(
        &["CONFIG", "GET", "aclfile"],
        &format!("*2\r\n{}{}", bulk("aclfile"), bulk(&path)),
    )
    .await;
    let saved = file.read();
    assert!(
        saved.contains("user b on nopass resetchannels -@all +ping\n"),
        "{saved}"
    );
    let mut b = Raw::to(&h).await;
    b.check(&["AUTH", "b", "x"], OK).await;
    std::fs::write(&file.0, "user c on nopass\n").unwrap();
    c.check(&["ACL", "LOAD"], OK).await;
    // b is gone from the file: its client is disconnected.
    assert!(b.closed().await);
    c.check(
        &["ACL", "USERS"],
        &format!("*2\r\n{}{}", bulk("c"), bulk("default")),
    )
    .await;
    std::fs::write(&file.0, "user c on bogus\n").unwrap();
    let e = c.cmd(&["ACL", "LOAD"]).await;
    assert!(
        e.ends_with(":1: Error in applying operation 'bogus': Syntax error\r\n"),
        "{e}"
    );
    c.check(
        &["ACL", "USERS"],
        &format!("*2\r\n{}{}", bulk("c"), bulk("default")),
    )
    .await;
    h.shutdown().await;
}

#[test]
fn a_bad_acl_file_stops_the_start_naming_its_line() {
    let file = acl_file("user a on nopass +@all\nuser b on ~x +@nosuch\n");
    for how in ["flag", "env"] {
        let mut cmd = Command::new(BIN);
        cmd.args(["--port", "0", "--restart-delay", "0"]);
        match how {
            "flag" => cmd.arg("--aclfile").arg(&file.0),
            _ => cmd.env("REDLOCKD_ACLFILE", &file.0),
        };
        let out = cmd.stdin(Stdio::null()).output().unwrap();
        assert_eq!(out.status.code(), Some(64));
        let text = String::from_utf8_lossy(&out.stderr);
        let want = format!(
            "{}:2: Error in applying operation '+@nosuch': Unknown command or category name in ACL",
            file.0.display()
        );
        assert!(text.contains(&want), "{how}: {text}");
    }
    let missing = Command::new(BIN)
        .args(["--port", "0", "--aclfile", "/nonexistent/users.acl"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&missing.stderr)
        .contains("cannot read the ACL file /nonexistent/users.acl"));
    // requirepass and a default line in the file both set the default user.
    let both = acl_file("user default on >x +@all ~*\n");
    let out = Command::new(BIN)
        .args(["--port", "0", "--requirepass", "y", "--aclfile"])
        .arg(&both.0)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("requirepass and the ACL file's 'user default' line"));
}

/// Every command's ACL categories are Redis 7's (COMMAND INFO), and ACL CAT lists the
/// same commands and subcommands for every category.
#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn categories_match_redis() {
    let redis = RedisNode::start(None);
    let ours = start().await;
    let mut r = Raw::to(&redis).await;
    let mut o = Raw::to(&ours).await;
    let names = sorted_bulks(&o.cmd(&["COMMAND", "LIST"]).await);
    let own = [
        "delex",
        "delifeq",
        "digest",
        "fencing.grant",
        "fencing.commit",
        "fencing.mark",
        "locks",
        "locks|help",
        "locks|info",
        "locks|list",
        "cluster|setmap",
        "cluster|getmap",
        "cluster|peerstate",
        "cluster|leaving",
        "cluster|import",
    ];
    let mut ours_all = std::collections::BTreeSet::new();
    for name in &names {
        let theirs = r.cmd(&["COMMAND", "INFO", name]).await;
        let mine = o.cmd(&["COMMAND", "INFO", name]).await;
        if own.contains(&name.as_str()) {
            assert!(
                theirs.contains("-1\r\n"),
                "{name} is redlockd's own: {theirs}"
            );
            continue;
        }
        assert_eq!(categories(&mine), categories(&theirs), "{name}");
        ours_all.insert(name.clone());
    }
    let cats = sorted_bulks(&r.cmd(&["ACL", "CAT"]).await);
    assert_eq!(cats, sorted_bulks(&o.cmd(&["ACL", "CAT"]).await));
    // Subcommands Redis 7.2 added (7.0 lists none such).
    let newer = ["client|setinfo", "client|no-touch"];
    for cat in &cats {
        let mine: Vec<String> = sorted_bulks(&o.cmd(&["ACL", "CAT", cat]).await)
            .into_iter()
            .filter(|n| !own.contains(&n.as_str()) && !newer.contains(&n.as_str()))
            .collect();
        // Redis's commands that redlockd has (with their subcommands).
        let theirs: Vec<String> = sorted_bulks(&r.cmd(&["ACL", "CAT", cat]).await)
            .into_iter()
            .filter(|n| ours_all.contains(n.split('|').next().unwrap()))
            .collect();
        assert_eq!(mine, theirs, "@{cat}");
    }
}

/// Every command's arity, flags (in Redis's order) and key positions are Redis 7's
/// (COMMAND INFO), but for the flags about replicas, loading and the monitor, which
/// redlockd has none of, and ZRANK/ZREVRANK's arity (they take 7.2's WITHSCORE).
#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_info_matches_redis() {
    let redis = RedisNode::start(None);
    let ours = start().await;
    let mut r = conn(&redis).await;
    let mut o = conn(&ours).await;
    let names: Vec<String> = q(&mut o, &["COMMAND", "LIST"]).await.unwrap();
    let mut compared = 0;
    for name in &names {
        let theirs: redis::Value = q(&mut r, &["COMMAND", "INFO", name]).await.unwrap();
        let mine: redis::Value = q(&mut o, &["COMMAND", "INFO", name]).await.unwrap();
        let Some(mut theirs) = info_summary(&theirs) else {
            continue; // redlockd's own (DELEX, FENCING.*...)
        };
        let mine = info_summary(&mine).expect("our COMMAND INFO entry");
        if name == "zrank" || name == "zrevrank" {
            assert_eq!((theirs.0, mine.0), (3, -3), "{name}");
            theirs.0 = -3;
        }
        assert_eq!(mine, theirs, "{name}");
        compared += 1;
    }
    assert!(compared > 150, "{compared}");
}

/// (arity, flags less the ones redlockd does not model, first key, last key, step)
fn info_summary(info: &redis::Value) -> Option<(i64, Vec<String>, i64, i64, i64)> {
    use redis::Value;
    let Value::Array(entries) = info else {
        panic!("{info:?}")
    };
    let Value::Array(e) = entries.first()? else {
        return None;
    };
    let int = |v: &Value| match v {
        Value::Int(n) => *n,
        other => panic!("{other:?}"),
    };
    let unmodelled = [
        "loading",
        "stale",
        "skip_monitor",
        "skip_slowlog",
        "no_async_loading",
        "asking",
        "may_replicate",
    ];
    let Value::Array(flags) = &e[2] else {
        panic!("{e:?}")
    };
    let flags = flags
        .iter()
        .map(|f| match f {
            Value::SimpleString(s) => s.clone(),
            other => panic!("{other:?}"),
        })
        .filter(|f| !unmodelled.contains(&f.as_str()))
        .collect();
    Some((int(&e[1]), flags, int(&e[3]), int(&e[4]), int(&e[5])))
}

/// The categories of a COMMAND INFO reply for one command (its 7th element: the set
/// after arity, flags and the three key positions), sorted.
fn categories(info: &str) -> Vec<String> {
    let lines: Vec<&str> = info.split("\r\n").collect();
    // The 4th integer line is the key step; the categories' set header follows it.
    let step = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.starts_with(':'))
        .nth(3)
        .expect("a COMMAND INFO entry")
        .0;
    let n: usize = lines[step + 1][1..].parse().unwrap();
    let mut out: Vec<String> = lines[step + 2..step + 2 + n]
        .iter()
        .map(|l| l[1..].to_string())
        .collect();
    out.sort();
    out
}

/// One session against redis-server and redlockd, both with the same ACL file: the
/// replies must be equal, NOPERM errors by their code (7.0 and 7.2 word them apart)
/// and rule descriptions skipped (7.0 compacts them its own way).
#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acl_replies_match_redis() {
    // Redis's own files have no comments.
    let text: String = FILE
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    let file = acl_file(&text);
    let path = file.0.to_str().unwrap().to_string();
    let redis = RedisNode::start_with_args(None, &["--aclfile", &path]);
    let ours = with_users(&file).await;
    let session: &[&[&str]] = &[
        &["AUTH", "alice", "wrong"],
        &["AUTH", "nosuch", "x"],
        &["AUTH", "x"],
        &["AUTH", "alice", "pass"],
        &["SET", "lock:1", "v"],
        &["SET", "k", "v"],
        &["GET", "lock:1"],
        &["MGET", "lock:1", "k"],
        &["CONFIG", "GET", "port"],
        &["DEL", "lock:1", "k"],
        &["DEL", "lock:1"],
        &["MULTI"],
        &["AUTH", "locker", "l"],
        &["SET", "lock:2", "x", "NX", "PX", "5000"],
        &["PEXPIRE", "lock:2", "100"],
        &["EVAL", "return redis.call('get',KEYS[1])", "1", "lock:2"],
        &["EVAL", "return redis.call('get',KEYS[1])", "1", "k"],
        &["MULTI"],
        &["SET", "lock:3", "1"],
        &["INCR", "lock:3"],
        &["EXEC"],
        &["MULTI"],
        &["SET", "lock:3", "1"],
        &["GET", "lock:3"],
        &["EXEC"],
        &["AUTH", "ro", "p"],
        &["GET", "lock:3"],
        &["SET", "lock:3", "2"],
        &["HELLO", "2", "AUTH", "ro", "nope"],
        &["HELLO", "3", "AUTH", "alice", "pass"],
        &["GET", "lock:3"],
        &["ACL", "WHOAMI"],
        &["RESET"],
        &["ACL", "WHOAMI"],
        &["ACL", "USERS"],
        &["ACL", "GETUSER", "nosuch"],
        &["ACL", "SETUSER", "x", "bogus"],
        &["ACL", "SETUSER", "x", "+nosuch"],
        &["ACL", "SETUSER", "x", "~"],
        &[
            "ACL",
            "SETUSER",
            "bob",
            "on",
            ">b",
            "allkeys",
            "allchannels",
            "+@all",
            "-flushall",
        ],
        &["ACL", "DELUSER", "default"],
        &["ACL", "DELUSER", "x", "nosuch"],
        &["ACL", "USERS"],
        &["ACL", "CAT", "nosuch"],
        &["ACL", "DRYRUN", "ro", "get", "k"],
        &["ACL", "DRYRUN", "nosuch", "get", "k"],
        &["ACL", "DRYRUN", "ro", "nosuch", "k"],
        &["ACL", "DRYRUN", "ro", "get"],
        &["ACL", "LOG", "x"],
        &["ACL", "LOG", "-1"],
        &["ACL", "LOG", "1", "2"],
        &["ACL", "WHOAMI", "x"],
        &["ACL", "FOO"],
        &["ACL", "SETUSER", "with space"],
        &["AUTH", "bob", "b"],
        &["FLUSHALL"],
        &["SET", "any", "1"],
        &["ACL", "LOG", "RESET"],
        // The one key extraction ACL key patterns use, as COMMAND GETKEYS shows it.
        &["COMMAND", "GETKEYS", "mset", "a", "1", "b", "2"],
        &["COMMAND", "GETKEYS", "eval", "x", "2", "k1", "k2", "a"],
        &["COMMAND", "GETKEYS", "eval", "x", "0"],
        &["COMMAND", "GETKEYS", "eval", "x", "5", "a"],
        &["COMMAND", "GETKEYS", "blpop", "a", "b", "0"],
        &["COMMAND", "GETKEYS", "object", "encoding", "k"],
        &["COMMAND", "GETKEYS", "object", "help"],
        &["COMMAND", "GETKEYS", "ping", "x"],
        &["COMMAND", "GETKEYS", "get", "a", "b"],
        &["COMMAND", "GETKEYS", "nosuch", "x"],
        &["COMMAND", "GETKEYS", "get"],
        &["COMMAND", "GETKEYS", "zdiffstore", "d", "2", "a", "b"],
        &["COMMAND", "GETKEYS", "zunionstore", "d", "1x", "a"],
        &["COMMAND", "GETKEYS", "zinter", "0", "a"],
        &["COMMAND", "GETKEYS", "zintercard", "1", "a", "limit", "1"],
        // Sorted-set algebra: the destination and the numkeys inputs are keys
        // (refusals: acl_commands_answer_as_redis, as 7.0 words them apart).
        &["ACL", "DRYRUN", "alice", "zinter", "1", "lock:a"],
        &["ACL", "DRYRUN", "alice", "zunion", "1", "lock:a", "k"],
        &["ACL", "DRYRUN", "alice", "zdiff", "5", "k"],
    ];
    let mut r = Raw::to(&redis).await;
    let mut o = Raw::to(&ours).await;
    for cmd in session {
        let theirs = r.cmd(cmd).await;
        let mine = o.cmd(cmd).await;
        if theirs.starts_with("-NOPERM") || theirs.contains("\r\n-NOPERM") {
            assert!(
                mine.starts_with("-NOPERM") || mine.contains("\r\n-NOPERM"),
                "{cmd:?}: {mine:?} vs {theirs:?}"
            );
            continue;
        }
        if cmd[0] == "HELLO" && theirs.starts_with(['%', '*']) {
            assert_eq!(&mine[..2], &theirs[..2], "{cmd:?}");
            continue;
        }
        assert_eq!(mine, theirs, "{cmd:?}");
    }
}

/// Three nodes, each with a user allowed only the Redlock client's commands on lock:*.
async fn lock_nodes() -> Vec<TestServer> {
    let mut nodes = Vec::new();
    for _ in 0..3 {
        let h = start().await;
        Raw::to(&h)
            .await
            .check(
                &[
                    "ACL", "SETUSER", "rl", "on", ">rl-pw", "~lock:*", "+set", "+get", "+del",
                    "+pexpire", "+eval", "+evalsha",
                ],
                OK,
            )
            .await;
        nodes.push(h);
    }
    nodes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_redlock_client_authenticates_as_a_user() {
    use redlockd::redlock::{Redlock, RedlockError, RedlockOptions};
    use std::time::Duration;
    let nodes = lock_nodes().await;
    let addrs: Vec<String> = nodes.iter().map(|n| n.addr().to_string()).collect();
    let opts = |user: &str, password: &str| RedlockOptions {
        user: Some(user.into()),
        password: Some(password.into()),
        retry_count: 0,
        node_timeout: Some(Duration::from_secs(2)),
        ..RedlockOptions::default()
    };
    let rl = Redlock::new(addrs.clone(), opts("rl", "rl-pw")).unwrap();
    let lock = rl.acquire(b"lock:a", Duration::from_secs(5)).await.unwrap();
    assert_eq!(rl.release(&lock).await, 3);
    // The user's rules hold: a key outside ~lock:* is refused on every node.
    match rl.acquire(b"other", Duration::from_secs(5)).await {
        Err(RedlockError::NotAcquired { last, .. }) => {
            let text = format!("{last:?}");
            assert!(
                text.contains("NOPERM No permissions to access a key"),
                "{text}"
            );
        }
        other => panic!("{other:?}"),
    }
    // A wrong password: WRONGPASS from every node.
    let wrong = Redlock::new(addrs.clone(), opts("rl", "nope")).unwrap();
    let e = format!(
        "{:?}",
        wrong
            .acquire(b"lock:b", Duration::from_secs(5))
            .await
            .unwrap_err()
    );
    assert!(e.contains("WRONGPASS"), "{e}");
    // Credentials in the URLs (percent-escapes decoded) win over the options'.
    Raw::to(&nodes[0])
        .await
        .check(&["ACL", "SETUSER", "rl", ">p@ss"], OK)
        .await;
    let urls: Vec<String> = addrs
        .iter()
        .enumerate()
        .map(|(i, a)| match i {
            0 => format!("redis://rl:p%40ss@{a}"),
            _ => format!("redis://rl:rl-pw@{a}/"),
        })
        .collect();
    let by_url = Redlock::new(urls, opts("nobody", "nothing")).unwrap();
    let lock = by_url
        .acquire(b"lock:c", Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(by_url.release(&lock).await, 3);
    // A user without a password is a configuration error, said at once.
    let e = Redlock::new(
        addrs.clone(),
        RedlockOptions {
            user: Some("rl".into()),
            ..RedlockOptions::default()
        },
    )
    .err()
    .unwrap();
    assert!(format!("{e:?}").contains("has no password"), "{e:?}");
    for n in nodes {
        n.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlockd_lock_takes_a_user() {
    use redlockd::redlock::flock::{run_lock_command, LockCommand};
    use std::time::Duration;
    let nodes = lock_nodes().await;
    let args = |user: Option<&str>, nodes: Vec<String>| LockCommand {
        nodes,
        tls_ca_cert_file: None,
        tls_cert_file: None,
        tls_key_file: None,
        ttl: Duration::from_secs(3),
        wait: Duration::ZERO,
        grace: Duration::from_secs(5),
        node_timeout: Some(Duration::from_secs(2)),
        password: Some("rl-pw".into()),
        password_file: None,
        user: user.map(Into::into),
        inherit_credentials: false,
        fencing_token: false,
        verbose: false,
        name: "lock:job".into(),
        command: vec!["true".into()],
    };
    let addrs: Vec<String> = nodes.iter().map(|n| n.addr().to_string()).collect();
    assert_eq!(run_lock_command(args(Some("rl"), addrs.clone())).await, 0);
    // As the default user with rl's password: WRONGPASS everywhere, so no majority.
    assert_ne!(run_lock_command(args(None, addrs.clone())).await, 0);
    let urls = addrs
        .iter()
        .map(|a| format!("redis://rl:rl-pw@{a}"))
        .collect();
    assert_eq!(run_lock_command(args(None, urls)).await, 0);
    for n in nodes {
        n.shutdown().await;
    }
}
