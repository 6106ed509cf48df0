//! Key commands: DEL/UNLINK, EXISTS, TYPE, KEYS, SCAN, RENAME.

use crate::support;
use std::collections::HashSet;
use std::time::Duration;
use support::*;

const NOT_INT: &str = "-ERR value is not an integer or out of range\r\n";

#[tokio::test]
async fn del_and_unlink_count_only_existing_keys() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["MSET", "a", "1", "b", "2", "c", "3"]).await;
    assert_eq!(c.cmd(&["DEL", "a", "missing", "b"]).await, int(2));
    assert_eq!(c.cmd(&["DEL", "a"]).await, int(0));
    assert_eq!(c.cmd(&["UNLINK", "c", "c"]).await, int(1));
    assert_eq!(c.cmd(&["DBSIZE"]).await, int(0));
    h.shutdown().await;
}

#[tokio::test]
async fn del_does_not_count_an_expired_key() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["SET", "a", "1", "PX", "10"]).await;
    c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]).await;
    h.clock().advance(Duration::from_millis(11));
    assert_eq!(c.cmd(&["DBSIZE"]).await, int(1));
    assert_eq!(c.cmd(&["DEL", "a"]).await, int(0));
    assert_eq!(c.cmd(&["DBSIZE"]).await, int(0));
    h.shutdown().await;
}

#[tokio::test]
async fn exists_counts_each_mention_including_duplicates() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["SET", "a", "1"]).await;
    assert_eq!(c.cmd(&["EXISTS", "a"]).await, int(1));
    assert_eq!(c.cmd(&["EXISTS", "a", "a", "missing", "a"]).await, int(3));
    assert_eq!(c.cmd(&["EXISTS", "missing"]).await, int(0));
    h.shutdown().await;
}

#[tokio::test]
async fn type_names_strings_and_missing_keys() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["SET", "a", "1"]).await;
    assert_eq!(c.cmd(&["TYPE", "a"]).await, "+string\r\n");
    assert_eq!(c.cmd(&["TYPE", "missing"]).await, "+none\r\n");
    h.shutdown().await;
}

#[tokio::test]
async fn keys_matches_glob_patterns() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&[
        "MSET", "lock:a", "1", "lock:b", "1", "lok:c", "1", "h[x]", "1", "hello", "1",
    ])
    .await;
    assert_eq!(
        sorted_bulks(&c.cmd(&["KEYS", "lock:*"]).await),
        ["lock:a", "lock:b"]
    );
    assert_eq!(
        sorted_bulks(&c.cmd(&["KEYS", "lo?k:*"]).await),
        ["lock:a", "lock:b"]
    );
    assert_eq!(sorted_bulks(&c.cmd(&["KEYS", "lo[ck]k:*"]).await).len(), 2);
    assert_eq!(
        sorted_bulks(&c.cmd(&["KEYS", "l*[^a]"]).await),
        ["lock:b", "lok:c"]
    );
    assert_eq!(sorted_bulks(&c.cmd(&["KEYS", "h\\[x\\]"]).await), ["h[x]"]);
    assert_eq!(sorted_bulks(&c.cmd(&["KEYS", "*"]).await).len(), 5);
    assert_eq!(c.cmd(&["KEYS", "nothing*"]).await, "*0\r\n");
    h.shutdown().await;
}

#[tokio::test]
async fn keys_skips_expired_keys() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["SET", "a", "1", "PX", "10"]).await;
    c.cmd(&["SET", "b", "1"]).await;
    c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]).await;
    h.clock().advance(Duration::from_millis(11));
    assert_eq!(sorted_bulks(&c.cmd(&["KEYS", "*"]).await), ["b"]);
    h.shutdown().await;
}

/// Runs a full SCAN iteration with extra options and returns every key seen (asserting
/// none is seen twice) and how many calls it took.
async fn scan_all(
    con: &mut redis::aio::MultiplexedConnection,
    opts: &[&str],
) -> (HashSet<String>, usize) {
    let mut seen = HashSet::new();
    let mut cursor = "0".to_string();
    let mut calls = 0;
    loop {
        let mut cmd = redis::cmd("SCAN");
        cmd.arg(&cursor);
        for o in opts {
            cmd.arg(*o);
        }
        let (next, keys): (String, Vec<String>) = cmd.query_async(con).await.unwrap();
        calls += 1;
        for k in keys {
            assert!(seen.insert(k.clone()), "{k} returned twice");
        }
        if next == "0" {
            return (seen, calls);
        }
        assert!(calls < 10_000, "SCAN did not finish");
        cursor = next;
    }
}

#[tokio::test]
async fn scan_full_iteration_returns_every_key_once() {
    let h = start().await;
    let mut con = conn(&h).await;
    let mut pipe = redis::pipe();
    for i in 0..1000 {
        pipe.cmd("SET").arg(format!("k:{i}")).arg(i).ignore();
    }
    let () = pipe.query_async(&mut con).await.unwrap();
    let (seen, calls) = scan_all(&mut con, &[]).await;
    assert_eq!(seen.len(), 1000);
    assert!(calls > 1, "a default COUNT of 10 takes several calls");
    let (seen, big_calls) = scan_all(&mut con, &["COUNT", "100000"]).await;
    assert_eq!(seen.len(), 1000);
    assert_eq!(big_calls, 1);
    h.shutdown().await;
}

#[tokio::test]
async fn scan_match_filters_keys() {
    let h = start().await;
    let mut con = conn(&h).await;
    for i in 0..50 {
        let () = redis::cmd("MSET")
            .arg(format!("lock:{i}"))
            .arg(1)
            .arg(format!("other:{i}"))
            .arg(1)
            .query_async(&mut con)
            .await
            .unwrap();
    }
    let (seen, _) = scan_all(&mut con, &["MATCH", "lock:*", "COUNT", "7"]).await;
    assert_eq!(seen.len(), 50);
    assert!(seen.iter().all(|k| k.starts_with("lock:")));
    h.shutdown().await;
}

#[tokio::test]
async fn scan_type_filters_by_value_type() {
    let h = start().await;
    let mut con = conn(&h).await;
    let () = redis::cmd("MSET")
        .arg("a")
        .arg(1)
        .arg("b")
        .arg(2)
        .query_async(&mut con)
        .await
        .unwrap();
    let (strings, _) = scan_all(&mut con, &["TYPE", "string"]).await;
    assert_eq!(strings.len(), 2);
    let (strings, _) = scan_all(&mut con, &["type", "STRING"]).await;
    assert_eq!(strings.len(), 2);
    let (hashes, _) = scan_all(&mut con, &["TYPE", "hash"]).await;
    assert!(hashes.is_empty());
    // Redis 7 accepts an unknown type name and matches nothing.
    let (none, _) = scan_all(&mut con, &["TYPE", "nosuchtype"]).await;
    assert!(none.is_empty());
    h.shutdown().await;
}

#[tokio::test]
async fn scan_argument_errors_match_redis() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    let syntax = err("ERR syntax error");
    assert_eq!(c.cmd(&["SCAN", "abc"]).await, err("ERR invalid cursor"));
    assert_eq!(c.cmd(&["SCAN", "0", "COUNT", "0"]).await, syntax);
    assert_eq!(c.cmd(&["SCAN", "0", "COUNT", "-1"]).await, syntax);
    assert_eq!(
        c.cmd(&["SCAN", "0", "COUNT", "abc"]).await,
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(c.cmd(&["SCAN", "0", "MATCH"]).await, syntax);
    assert_eq!(c.cmd(&["SCAN", "0", "FOO", "bar"]).await, syntax);
    assert_eq!(
        c.cmd(&["SCAN"]).await,
        err("ERR wrong number of arguments for 'scan' command")
    );
    h.shutdown().await;
}

#[tokio::test]
async fn scan_on_an_empty_db_returns_cursor_zero() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["SCAN", "0"]).await, "*2\r\n$1\r\n0\r\n*0\r\n");
    h.shutdown().await;
}

#[tokio::test]
async fn rename_moves_the_value_and_keeps_the_ttl() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["SET", "a", "v", "PX", "5000"]).await;
    c.cmd(&["SET", "b", "old"]).await;
    assert_eq!(c.cmd(&["RENAME", "a", "b"]).await, OK);
    assert_eq!(c.cmd(&["EXISTS", "a"]).await, int(0));
    assert_eq!(c.cmd(&["GET", "b"]).await, bulk("v"));
    assert_eq!(c.cmd(&["PTTL", "b"]).await, int(5000));
    h.shutdown().await;
}

#[tokio::test]
async fn rename_over_a_key_with_ttl_drops_that_ttl() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["SET", "a", "v"]).await;
    c.cmd(&["SET", "b", "old", "PX", "5000"]).await;
    assert_eq!(c.cmd(&["RENAME", "a", "b"]).await, OK);
    assert_eq!(c.cmd(&["PTTL", "b"]).await, int(-1));
    h.shutdown().await;
}

#[tokio::test]
async fn rename_of_a_missing_key_is_no_such_key() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["RENAME", "a", "b"]).await, err("ERR no such key"));
    assert_eq!(c.cmd(&["RENAME", "a", "a"]).await, err("ERR no such key"));
    c.cmd(&["SET", "a", "v", "PX", "10"]).await;
    h.clock().advance(Duration::from_millis(11));
    assert_eq!(c.cmd(&["RENAME", "a", "b"]).await, err("ERR no such key"));
    h.shutdown().await;
}

#[tokio::test]
async fn renamenx_renames_only_onto_a_missing_key() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["RENAMENX", "a", "b"]).await, err("ERR no such key"));
    assert_eq!(c.cmd(&["RENAMENX", "a", "a"]).await, err("ERR no such key"));
    c.cmd(&["SET", "a", "1", "PX", "5000"]).await;
    c.cmd(&["SET", "b", "2"]).await;
    assert_eq!(c.cmd(&["RENAMENX", "a", "a"]).await, int(0));
    assert_eq!(c.cmd(&["RENAMENX", "a", "b"]).await, int(0));
    assert_eq!(c.cmd(&["GET", "b"]).await, bulk("2"));
    assert_eq!(c.cmd(&["RENAMENX", "a", "c"]).await, int(1));
    assert_eq!(c.cmd(&["EXISTS", "a"]).await, int(0));
    assert_eq!(c.cmd(&["GET", "c"]).await, bulk("1"));
    assert_eq!(c.cmd(&["PTTL", "c"]).await, int(5000));
    // An expired key at the new name is missing.
    c.cmd(&["SET", "d", "x", "PX", "10"]).await;
    h.clock().advance(Duration::from_millis(11));
    assert_eq!(c.cmd(&["RENAMENX", "c", "d"]).await, int(1));
    h.shutdown().await;
}

#[tokio::test]
async fn copy_copies_value_and_ttl_within_and_across_databases() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["SET", "a", "1", "PX", "5000"]).await;
    c.cmd(&["RPUSH", "l", "x", "y"]).await;
    assert_eq!(c.cmd(&["COPY", "a", "b"]).await, int(1));
    assert_eq!(c.cmd(&["PTTL", "b"]).await, int(5000));
    assert_eq!(c.cmd(&["COPY", "l", "b"]).await, int(0));
    assert_eq!(c.cmd(&["COPY", "l", "b", "REPLACE"]).await, int(1));
    // The copy is independent of its source.
    c.cmd(&["RPUSH", "l", "z"]).await;
    assert_eq!(c.cmd(&["LLEN", "b"]).await, int(2));
    assert_eq!(c.cmd(&["PTTL", "b"]).await, int(-1));
    assert_eq!(c.cmd(&["COPY", "missing", "m"]).await, int(0));
    assert_eq!(c.cmd(&["COPY", "a", "a", "DB", "3"]).await, int(1));
    assert_eq!(
        c.cmd(&["COPY", "a", "a"]).await,
        err("ERR source and destination objects are the same")
    );
    for (db, want) in [
        ("16", "ERR DB index is out of range"),
        ("-1", "ERR DB index is out of range"),
        ("x", "ERR value is not an integer or out of range"),
        (
            "99999999999",
            "ERR value is out of range, value must between -2147483648 and 2147483647",
        ),
    ] {
        assert_eq!(
            c.cmd(&["COPY", "a", "z", "DB", db]).await,
            err(want),
            "{db}"
        );
    }
    assert_eq!(
        c.cmd(&["COPY", "a", "z", "DB"]).await,
        err("ERR syntax error")
    );
    assert_eq!(c.cmd(&["SELECT", "3"]).await, OK);
    assert_eq!(c.cmd(&["GET", "a"]).await, bulk("1"));
    assert_eq!(c.cmd(&["PTTL", "a"]).await, int(5000));
    h.shutdown().await;
}

#[tokio::test]
async fn move_takes_a_key_to_another_database_unless_it_is_there() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["SET", "a", "1", "PX", "5000"]).await;
    assert_eq!(c.cmd(&["MOVE", "a", "2"]).await, int(1));
    assert_eq!(c.cmd(&["EXISTS", "a"]).await, int(0));
    assert_eq!(c.cmd(&["MOVE", "a", "2"]).await, int(0));
    c.cmd(&["SET", "b", "here"]).await;
    assert_eq!(
        c.cmd(&["MOVE", "b", "0"]).await,
        err("ERR source and destination objects are the same")
    );
    assert_eq!(c.cmd(&["SELECT", "2"]).await, OK);
    assert_eq!(c.cmd(&["PTTL", "a"]).await, int(5000));
    c.cmd(&["SET", "b", "there"]).await;
    assert_eq!(c.cmd(&["MOVE", "b", "0"]).await, int(0));
    assert_eq!(c.cmd(&["MOVE", "b", "x"]).await, NOT_INT);
    assert_eq!(
        c.cmd(&["MOVE", "b", "16"]).await,
        err("ERR DB index is out of range")
    );
    h.shutdown().await;
}

#[tokio::test]
async fn randomkey_returns_live_keys_only() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["RANDOMKEY"]).await, NIL);
    c.cmd(&["SET", "gone", "v", "PX", "10"]).await;
    h.clock().advance(Duration::from_millis(11));
    assert_eq!(c.cmd(&["RANDOMKEY"]).await, NIL);
    for i in 0..50 {
        c.cmd(&["SET", &format!("k{i}"), "v"]).await;
    }
    let mut seen = HashSet::new();
    for _ in 0..300 {
        let r = c.cmd(&["RANDOMKEY"]).await;
        assert!(r.starts_with("$2\r\nk") || r.starts_with("$3\r\nk"), "{r}");
        seen.insert(r);
    }
    // Random, not always the same key: 300 draws of 50 keys see many of them.
    assert!(seen.len() > 25, "{}", seen.len());
    h.shutdown().await;
}

#[tokio::test]
async fn touch_counts_the_keys_that_exist() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["SET", "a", "1"]).await;
    c.cmd(&["RPUSH", "l", "x"]).await;
    assert_eq!(c.cmd(&["TOUCH", "a", "l", "a", "missing"]).await, int(3));
    assert_eq!(
        c.cmd(&["TOUCH"]).await,
        err("ERR wrong number of arguments for 'touch' command")
    );
    h.shutdown().await;
}

#[tokio::test]
async fn rename_onto_itself_is_ok_and_changes_nothing() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["SET", "a", "v", "PX", "5000"]).await;
    assert_eq!(c.cmd(&["RENAME", "a", "a"]).await, OK);
    assert_eq!(c.cmd(&["GET", "a"]).await, bulk("v"));
    assert_eq!(c.cmd(&["PTTL", "a"]).await, int(5000));
    h.shutdown().await;
}

/// DEBUG DIGEST-VALUE gives Redis's digests: these were read from redis-server 7.0.15
/// for the same data (a sorted set of 200 is a skiplist there, the 2-member one a
/// listpack; the digest does not depend on it).
#[tokio::test]
async fn debug_digest_value_matches_redis() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["SET", "s", "hello"]).await;
    c.cmd(&["SET", "n", "123"]).await;
    c.cmd(&["SET", "e", "v", "PX", "10000"]).await;
    c.cmd(&["RPUSH", "l", "a", "b", "c"]).await;
    c.cmd(&["SADD", "st", "x", "y", "1", "2"]).await;
    c.cmd(&["ZADD", "z", "1.5", "a", "0.1", "b"]).await;
    c.cmd(&["HSET", "h", "f", "v", "g", "w"]).await;
    for i in 1..=200 {
        c.cmd(&["ZADD", "zb", &i.to_string(), &format!("m{i}")])
            .await;
    }
    let want = [
        "36b23a1456b2dce2c3ed252c456761301dba8060",
        "89f7f51b707418f666d5b45e053bd5bbbf82ac2b",
        "311b17018163335616e089f6b951c82c477335ac",
        "8bf72d812571eea9b927f3c11beb0c4165a6ff89",
        "d9a5e496512416d64a1c5e6d33afd9f2f9c366c5",
        "09248147a8d667e310816b5412a4796dae07d20c",
        "d127864ed50239662bf61bafc9bda63c17da5b37",
        "ea486ebaf3d988233e4c6f444aca7f8a24794919",
        "0000000000000000000000000000000000000000",
    ];
    let mut expected = format!("*{}\r\n", want.len());
    for d in want {
        expected.push_str(&format!("+{d}\r\n"));
    }
    let got = c
        .cmd(&[
            "DEBUG",
            "DIGEST-VALUE",
            "s",
            "n",
            "e",
            "l",
            "st",
            "z",
            "h",
            "zb",
            "missing",
        ])
        .await;
    assert_eq!(got, expected);
    // A copy digests as its source.
    assert_eq!(c.cmd(&["COPY", "zb", "zc"]).await, int(1));
    let pair = c.cmd(&["DEBUG", "DIGEST-VALUE", "zb", "zc"]).await;
    assert_eq!(pair, format!("*2\r\n+{}\r\n+{}\r\n", want[7], want[7]));
    h.shutdown().await;
}
