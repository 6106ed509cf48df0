//! CONFIG GET / CONFIG SET beside a real redis-server 7.0: every setting name and alias
//! Redis has, with the same values (but for the settings listed in `OURS`), and the
//! same reply to a sample of valid and invalid CONFIG SETs.

use crate::support;
use std::collections::BTreeMap;
use support::redis_server::RedisNode;
use support::*;

/// Settings whose values differ, and why.
const OURS: &[(&str, &str)] = &[
    ("port", "each server's own port"),
    (
        "dir",
        "redlockd reports its --dir; redis-server its working directory",
    ),
    (
        "loglevel",
        "the test's redis-server runs with --loglevel warning",
    ),
    (
        "enable-debug-command",
        "test servers run with DEBUG on (--enable-debug-command)",
    ),
];

/// redlockd's own settings, which Redis does not have.
const OWN: &[&str] = &[
    "max-ttl",
    "restart-delay",
    "require-ttl",
    "lock-delay",
    "lock-delay-prefix",
    "lock-introspection",
];

/// Redis 7.0's hidden settings: left out of a pattern, found by their exact name.
const HIDDEN: &[&str] = &[
    "use-exit-on-panic",
    "rdb-key-save-delay",
    "key-load-delay",
    "watchdog-period",
    "loading-process-events-interval-bytes",
];

/// A CONFIG GET reply as name -> value (Redis's order is its hash table's).
async fn config_get(c: &mut Raw, pattern: &str) -> BTreeMap<String, String> {
    config_get_all(c, &[pattern]).await
}

async fn config_get_all(c: &mut Raw, patterns: &[&str]) -> BTreeMap<String, String> {
    let mut args: Vec<&[u8]> = vec![b"CONFIG", b"GET"];
    args.extend(patterns.iter().map(|p| p.as_bytes()));
    let reply = c.cmd_bytes(&args).await;
    let redis::Value::Array(items) = redis::parse_redis_value(&reply).unwrap() else {
        panic!("CONFIG GET is an array")
    };
    let text = |v: &redis::Value| match v {
        redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        other => panic!("{other:?}"),
    };
    items
        .chunks(2)
        .map(|pair| (text(&pair[0]), text(&pair[1])))
        .collect()
}

#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test]
async fn config_get_names_every_setting_and_alias_redis_has() {
    let redis = RedisNode::start(None);
    let ours = start().await;
    let mut r = Raw::connect(redis.addr()).await;
    let mut o = Raw::to(&ours).await;
    let theirs = config_get(&mut r, "*").await;
    let mut mine = config_get(&mut o, "*").await;
    for own in OWN {
        assert!(mine.remove(*own).is_some(), "{own} is reported");
    }
    let names = |m: &BTreeMap<String, String>| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(names(&mine), names(&theirs));
    // Every name of Redis 7.0, aliases included (list-max-ziplist-size...).
    assert!(theirs.len() >= 190, "{}", theirs.len());
    assert!(mine.contains_key("list-max-ziplist-size"));
    for (name, value) in &theirs {
        if OURS.iter().any(|(n, _)| n == name) {
            continue;
        }
        assert_eq!(&mine[name], value, "CONFIG GET {name}");
    }
    for name in HIDDEN {
        assert_eq!(
            config_get(&mut o, name).await,
            config_get(&mut r, name).await,
            "{name}"
        );
    }
    // An exact name is answered under the name as written, once.
    for pattern in ["MaxMemory", "slave-read-only", "no-such-setting"] {
        let get = [pattern, "maxmemory"];
        let theirs = config_get_all(&mut r, &get).await;
        assert_eq!(config_get_all(&mut o, &get).await, theirs, "{pattern}");
    }
    ours.shutdown().await;
}

/// CONFIG SETs whose replies (and the CONFIG GET of the setting after) must be
/// redis-server's.
const SETS: &[&[&str]] = &[
    // The alias Redis's unit/sort sets, and its name.
    &["list-max-ziplist-size", "32"],
    &["list-max-listpack-size", "-2"],
    &["set-max-intset-entries", "32"],
    &["hash-max-ziplist-value", "1k"],
    &["zset-max-listpack-entries", "-1"],
    // A name and its alias are two entries of Redis's table: not a duplicate.
    &["list-max-ziplist-size", "1", "list-max-listpack-size", "2"],
    &["MAXMEMORY", "1mb", "maxmemory", "2mb"],
    &["maxmemory", "-1"],
    &["maxmemory", "1.5mb"],
    &["maxmemory", "0"],
    &["maxmemory-clients", "100%"],
    &["maxmemory-clients", "101%"],
    &["maxmemory-clients", "-101"],
    &["maxmemory-clients", "0"],
    &["maxclients", "-1"],
    &["slowlog-max-len", "-1"],
    &["tcp-keepalive", "+5"],
    &["tcp-keepalive", "05"],
    &["tcp-keepalive", "300"],
    &["hz", "0"],
    &["hz", "1000"],
    &["hz", "10"],
    &["repl-backlog-size", "1"],
    &["active-expire-effort", "11"],
    &["replica-read-only", "maybe"],
    &["slave-read-only", "NO"],
    &["slave-read-only", "yes"],
    &["activedefrag", "yes"],
    &["loglevel", "loud"],
    &["appendfsync", "Always"],
    &["appendfsync", "everysec"],
    &["oom-score-adj", "relative"],
    &["oom-score-adj", "no"],
    &["acl-pubsub-default", "allchannels"],
    &["acl-pubsub-default", "resetchannels"],
    &["shutdown-on-sigterm", "save now force"],
    &["shutdown-on-sigterm", "save nosave"],
    &["shutdown-on-sigterm", "default"],
    &["notify-keyspace-events", "KEA"],
    &["notify-keyspace-events", "gK$m"],
    &["notify-keyspace-events", "Z"],
    &["notify-keyspace-events", ""],
    &["save", "100 10 5 1"],
    &["save", "100"],
    &["save", ""],
    &["client-output-buffer-limit", "pubsub 1mb 2kb 5"],
    &["client-output-buffer-limit", "replica 1 2 -1"],
    &["client-output-buffer-limit", "master 1 2 3"],
    &["client-output-buffer-limit", "normal 1 2"],
    &["latency-tracking-info-percentiles", "50 99.99 100"],
    &["latency-tracking-info-percentiles", "101"],
    &["latency-tracking-info-percentiles", "50 99 99.9"],
    &["oom-score-adj-values", "0 200"],
    &["oom-score-adj-values", "0 200 3000"],
    &["proc-title-template", "{server-mode}"],
    &["proc-title-template", "{nope}"],
    &["cluster-announce-hostname", "a_b"],
    &["cluster-announce-hostname", "a-b.c"],
    &["masterauth", "x"],
    &["lua-time-limit", "6000"],
    &["busy-reply-threshold", "5000"],
    &["stream-node-max-bytes", "4kb"],
    // Refused before any value is read: immutable, protected, unknown, repeated.
    &["databases", "2"],
    &["daemonize", "yes"],
    &["unixsocketperm", "777"],
    &["slaveof", "no one"],
    &["dbfilename", "x"],
    &["dir", "/tmp"],
    &["foo", "1", "databases", "2"],
    &["databases", "2", "foo", "1"],
    &["hz", "abc", "foo", "1"],
    &["hz", "5", "set-max-intset-entries", "-1"],
    &["hz", "5", "HZ", "6"],
];

#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test]
async fn config_set_answers_as_redis_does() {
    let redis = RedisNode::start(None);
    let ours = start().await;
    let mut r = Raw::connect(redis.addr()).await;
    let mut o = Raw::to(&ours).await;
    for set in SETS {
        let mut args = vec!["CONFIG", "SET"];
        args.extend_from_slice(set);
        let theirs = r.cmd(&args).await;
        assert_eq!(o.cmd(&args).await, theirs, "{args:?}");
        for name in set.iter().step_by(2) {
            if OURS.iter().any(|(n, _)| n == name) {
                continue;
            }
            let get = ["CONFIG", "GET", name];
            assert_eq!(
                o.cmd(&get).await,
                r.cmd(&get).await,
                "{get:?} after {args:?}"
            );
        }
    }
    ours.shutdown().await;
}

/// The settings redlockd applies take effect; its own refusals say why.
#[tokio::test]
async fn config_set_applies_what_redlockd_has_and_refuses_what_it_cannot_keep() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "lua-time-limit", "7000"]).await,
        OK
    );
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "busy-reply-threshold"]).await,
        "*2\r\n$20\r\nbusy-reply-threshold\r\n$4\r\n7000\r\n"
    );
    // The append-only log is chosen at start (--appendonly).
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "appendonly", "yes"]).await,
        err("ERR CONFIG SET failed (possibly related to argument 'appendonly') - can't set immutable config")
    );
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "appendonly"]).await,
        "*2\r\n$10\r\nappendonly\r\n$2\r\nno\r\n"
    );
    // Fixed at start (its flag): refused, and nothing of the command is applied.
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "maxclients", "7", "port", "1"]).await,
        err("ERR CONFIG SET failed (possibly related to argument 'port') - can't set immutable config")
    );
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "maxclients"]).await,
        "*2\r\n$10\r\nmaxclients\r\n$5\r\n10000\r\n"
    );
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "max-ttl", "1"]).await,
        err("ERR CONFIG SET failed (possibly related to argument 'max-ttl') - can't set immutable config")
    );
    // TLS settings are read at start (a cipher list stored but not used would mislead).
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "tls-ciphers", "DEFAULT"]).await,
        err("ERR CONFIG SET failed (possibly related to argument 'tls-ciphers') - can't set immutable config")
    );
    // masteruser is a secret, as in Redis: the slow log hides it.
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0"])
            .await,
        OK
    );
    assert_eq!(c.cmd(&["SLOWLOG", "RESET"]).await, OK);
    assert_eq!(c.cmd(&["CONFIG", "SET", "masteruser", "hunter2"]).await, OK);
    let log = c.cmd(&["SLOWLOG", "GET", "1"]).await;
    assert!(
        log.contains("(redacted)") && !log.contains("hunter2"),
        "{log}"
    );
    // Stored per node: another node keeps Redis's default.
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "list-max-ziplist-size", "32"])
            .await,
        OK
    );
    let other = start().await;
    let mut d = Raw::to(&other).await;
    assert_eq!(
        d.cmd(&["CONFIG", "GET", "list-max-listpack-size"]).await,
        "*2\r\n$22\r\nlist-max-listpack-size\r\n$2\r\n-2\r\n"
    );
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "list-max-listpack-size"]).await,
        "*2\r\n$22\r\nlist-max-listpack-size\r\n$2\r\n32\r\n"
    );
    other.shutdown().await;
    h.shutdown().await;
}
