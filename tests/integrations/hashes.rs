//! Hash commands, with Redis 7's exact replies and errors (checked against
//! redis-server 7.0.15).

use crate::support;

use std::collections::HashMap;
use support::*;

#[tokio::test]
async fn hset_counts_new_fields_and_hget_reads_them() {
    let h = start().await;
    let mut c = conn(&h).await;
    assert_eq!(
        q::<i64>(&mut c, &["HSET", "h", "a", "1", "b", "2"])
            .await
            .unwrap(),
        2
    );
    assert_eq!(
        q::<i64>(&mut c, &["hset", "h", "a", "1", "c", "3"])
            .await
            .unwrap(),
        1
    );
    assert_eq!(q::<String>(&mut c, &["HGET", "h", "c"]).await.unwrap(), "3");
    assert_eq!(
        q::<Option<String>>(&mut c, &["HGET", "h", "nope"])
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        q::<Option<String>>(&mut c, &["HGET", "nokey", "a"])
            .await
            .unwrap(),
        None
    );
    assert_eq!(q::<String>(&mut c, &["TYPE", "h"]).await.unwrap(), "hash");
    assert_eq!(q::<i64>(&mut c, &["HLEN", "h"]).await.unwrap(), 3);
    assert_eq!(q::<i64>(&mut c, &["HLEN", "nokey"]).await.unwrap(), 0);
}

#[tokio::test]
async fn hset_with_odd_pairs_is_an_arity_error() {
    let h = start().await;
    let mut c = conn(&h).await;
    for args in [
        &["HSET", "h"][..],
        &["HSET", "h", "a"],
        &["HSET", "h", "a", "1", "b"],
    ] {
        assert_eq!(
            query_err(&mut c, args).await,
            "ERR wrong number of arguments for 'hset' command"
        );
    }
    assert_eq!(
        query_err(&mut c, &["HMSET", "h", "x"]).await,
        "ERR wrong number of arguments for 'hmset' command"
    );
    assert_eq!(
        q::<String>(&mut c, &["HMSET", "h", "x", "1"])
            .await
            .unwrap(),
        "OK"
    );
}

#[tokio::test]
async fn hsetnx_sets_only_missing_fields() {
    let h = start().await;
    let mut c = conn(&h).await;
    assert_eq!(
        q::<i64>(&mut c, &["HSETNX", "h", "a", "1"]).await.unwrap(),
        1
    );
    assert_eq!(
        q::<i64>(&mut c, &["HSETNX", "h", "a", "9"]).await.unwrap(),
        0
    );
    assert_eq!(q::<String>(&mut c, &["HGET", "h", "a"]).await.unwrap(), "1");
}

#[tokio::test]
async fn hmget_returns_nulls_for_missing_fields_and_keys() {
    let h = start().await;
    let mut c = conn(&h).await;
    q::<i64>(&mut c, &["HSET", "h", "a", "1", "b", "2"])
        .await
        .unwrap();
    let got: Vec<Option<String>> = q(&mut c, &["HMGET", "h", "a", "nope", "b"]).await.unwrap();
    assert_eq!(got, vec![Some("1".into()), None, Some("2".into())]);
    let got: Vec<Option<String>> = q(&mut c, &["HMGET", "nokey", "a", "b"]).await.unwrap();
    assert_eq!(got, vec![None, None]);
}

#[tokio::test]
async fn hdel_removes_fields_and_the_key_with_its_last_field() {
    let h = start().await;
    let mut c = conn(&h).await;
    q::<i64>(&mut c, &["HSET", "h", "a", "1", "b", "2"])
        .await
        .unwrap();
    assert_eq!(
        q::<i64>(&mut c, &["HDEL", "h", "a", "nope"]).await.unwrap(),
        1
    );
    assert_eq!(q::<i64>(&mut c, &["HDEL", "nokey", "a"]).await.unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["HDEL", "h", "b"]).await.unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "h"]).await.unwrap(), 0);
    assert_eq!(q::<String>(&mut c, &["TYPE", "h"]).await.unwrap(), "none");
    assert_eq!(
        query_err(&mut c, &["HDEL", "h"]).await,
        "ERR wrong number of arguments for 'hdel' command"
    );
}

#[tokio::test]
async fn hexists_reports_fields() {
    let h = start().await;
    let mut c = conn(&h).await;
    q::<i64>(&mut c, &["HSET", "h", "a", "1"]).await.unwrap();
    assert_eq!(q::<i64>(&mut c, &["HEXISTS", "h", "a"]).await.unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["HEXISTS", "h", "b"]).await.unwrap(), 0);
    assert_eq!(
        q::<i64>(&mut c, &["HEXISTS", "nokey", "a"]).await.unwrap(),
        0
    );
}

#[tokio::test]
async fn hincrby_counts_and_reports_redis_errors() {
    let h = start().await;
    let mut c = conn(&h).await;
    assert_eq!(
        q::<i64>(&mut c, &["HINCRBY", "h", "n", "-3"])
            .await
            .unwrap(),
        -3
    );
    assert_eq!(
        q::<i64>(&mut c, &["HINCRBY", "h", "n", "5"]).await.unwrap(),
        2
    );
    assert_eq!(
        query_err(&mut c, &["HINCRBY", "h", "n", "x"]).await,
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        query_err(&mut c, &["HINCRBY", "h", "n", "1.5"]).await,
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        query_err(&mut c, &["HINCRBY", "h", "n", "99999999999999999999"]).await,
        "ERR value is not an integer or out of range"
    );
    q::<i64>(
        &mut c,
        &["HSET", "h", "s", "foo", "m", "9223372036854775807"],
    )
    .await
    .unwrap();
    assert_eq!(
        query_err(&mut c, &["HINCRBY", "h", "s", "1"]).await,
        "ERR hash value is not an integer"
    );
    assert_eq!(
        query_err(&mut c, &["HINCRBY", "h", "m", "1"]).await,
        "ERR increment or decrement would overflow"
    );
    // A failed increment on a new key leaves no key behind.
    assert_eq!(
        query_err(&mut c, &["HINCRBY", "fresh", "f", "x"]).await,
        "ERR value is not an integer or out of range"
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "fresh"]).await.unwrap(), 0);
}

#[tokio::test]
async fn hincrbyfloat_adds_and_reports_redis_errors() {
    let h = start().await;
    let mut c = conn(&h).await;
    q::<i64>(&mut c, &["HSET", "h", "b", "7", "s", "foo"])
        .await
        .unwrap();
    assert_eq!(
        q::<String>(&mut c, &["HINCRBYFLOAT", "h", "b", "1.5"])
            .await
            .unwrap(),
        "8.5"
    );
    assert_eq!(
        q::<String>(&mut c, &["HINCRBYFLOAT", "h", "m2", "3.0"])
            .await
            .unwrap(),
        "3"
    );
    assert_eq!(
        q::<String>(&mut c, &["HINCRBYFLOAT", "h", "m3", "0.1"])
            .await
            .unwrap(),
        "0.1"
    );
    assert_eq!(
        query_err(&mut c, &["HINCRBYFLOAT", "h", "s", "1"]).await,
        "ERR hash value is not a float"
    );
    assert_eq!(
        query_err(&mut c, &["HINCRBYFLOAT", "h", "b", "abc"]).await,
        "ERR value is not a valid float"
    );
    // Redis's long double: 0.1 + 0.2 prints 0.3, and an infinite increment is refused
    // before the hash is read.
    assert_eq!(
        q::<String>(&mut c, &["HINCRBYFLOAT", "h", "m3", "0.2"])
            .await
            .unwrap(),
        "0.3"
    );
    assert_eq!(
        query_err(&mut c, &["HINCRBYFLOAT", "h", "s", "inf"]).await,
        "ERR value is NaN or Infinity"
    );
}

#[tokio::test]
async fn hstrlen_and_hscan_read_fields_and_values() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["HSET", "h", "f", "hello", "g", "12"]).await;
    assert_eq!(c.cmd(&["HSTRLEN", "h", "f"]).await, int(5));
    assert_eq!(c.cmd(&["HSTRLEN", "h", "missing"]).await, int(0));
    assert_eq!(c.cmd(&["HSTRLEN", "nokey", "f"]).await, int(0));
    // A small hash comes whole, with cursor 0; MATCH filters fields.
    let page = c.cmd(&["HSCAN", "h", "0", "MATCH", "f*"]).await;
    assert_eq!(page, "*2\r\n$1\r\n0\r\n*2\r\n$1\r\nf\r\n$5\r\nhello\r\n");
    assert_eq!(
        c.cmd(&["HSCAN", "nokey", "0"]).await,
        "*2\r\n$1\r\n0\r\n*0\r\n"
    );
    assert_eq!(c.cmd(&["HSCAN", "h", "x"]).await, err("ERR invalid cursor"));
    assert_eq!(
        c.cmd(&["HSCAN", "h", "0", "COUNT", "0"]).await,
        err("ERR syntax error")
    );
    c.cmd(&["SET", "s", "v"]).await;
    let wrongtype = err("WRONGTYPE Operation against a key holding the wrong kind of value");
    assert_eq!(c.cmd(&["HSTRLEN", "s", "f"]).await, wrongtype);
    assert_eq!(c.cmd(&["HSCAN", "s", "0"]).await, wrongtype);
    h.shutdown().await;
}

#[tokio::test]
async fn hscan_walks_a_large_hash_once_with_values() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    for i in 0..300 {
        c.cmd(&["HSET", "big", &format!("f{i}"), &format!("v{i}")])
            .await;
    }
    let mut con = conn(&h).await;
    let mut cursor = "0".to_string();
    let mut seen = HashMap::new();
    for _ in 0..1000 {
        let (next, pairs): (String, Vec<String>) =
            q(&mut con, &["HSCAN", "big", &cursor, "COUNT", "20"])
                .await
                .unwrap();
        for pair in pairs.chunks(2) {
            assert!(
                seen.insert(pair[0].clone(), pair[1].clone()).is_none(),
                "{pair:?}"
            );
        }
        cursor = next;
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(cursor, "0");
    assert_eq!(seen.len(), 300);
    assert!(seen.iter().all(|(f, v)| f[1..] == v[1..]));
    h.shutdown().await;
}

#[tokio::test]
async fn hgetall_hkeys_hvals_agree() {
    let h = start().await;
    let mut c = conn(&h).await;
    q::<i64>(&mut c, &["HSET", "h", "a", "1", "b", "2"])
        .await
        .unwrap();
    let all: HashMap<String, String> = q(&mut c, &["HGETALL", "h"]).await.unwrap();
    assert_eq!(
        all,
        HashMap::from([("a".into(), "1".into()), ("b".into(), "2".into())])
    );
    let keys: Vec<String> = q(&mut c, &["HKEYS", "h"]).await.unwrap();
    let vals: Vec<String> = q(&mut c, &["HVALS", "h"]).await.unwrap();
    let zipped: HashMap<String, String> = keys.into_iter().zip(vals).collect();
    assert_eq!(zipped, all);
    assert!(q::<Vec<String>>(&mut c, &["HKEYS", "nokey"])
        .await
        .unwrap()
        .is_empty());
    assert!(q::<Vec<String>>(&mut c, &["HVALS", "nokey"])
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn hgetall_is_a_map_in_resp3_and_a_flat_array_in_resp2() {
    let h = start().await;
    let mut r = Raw::to(&h).await;
    r.check(&["HSET", "h", "a", "1"], ":1\r\n").await;
    r.check(&["HGETALL", "h"], "*2\r\n$1\r\na\r\n$1\r\n1\r\n")
        .await;
    r.check(&["HGETALL", "nokey"], "*0\r\n").await;
    r.hello3().await;
    r.check(&["HGETALL", "h"], "%1\r\n$1\r\na\r\n$1\r\n1\r\n")
        .await;
    r.check(&["HGETALL", "nokey"], "%0\r\n").await;
}

#[tokio::test]
async fn hash_commands_on_other_types_are_wrongtype() {
    let h = start().await;
    let mut c = conn(&h).await;
    q::<String>(&mut c, &["SET", "s", "v"]).await.unwrap();
    let wrong = "WRONGTYPE Operation against a key holding the wrong kind of value";
    for args in [
        &["HGET", "s", "a"][..],
        &["HSET", "s", "a", "1"],
        &["HSETNX", "s", "a", "1"],
        &["HLEN", "s"],
        &["HDEL", "s", "a"],
        &["HEXISTS", "s", "a"],
        &["HINCRBY", "s", "a", "1"],
        &["HGETALL", "s"],
        &["HMGET", "s", "a"],
    ] {
        assert_eq!(query_err(&mut c, args).await, wrong, "{args:?}");
    }
    q::<i64>(&mut c, &["HSET", "h", "a", "1"]).await.unwrap();
    assert_eq!(query_err(&mut c, &["GET", "h"]).await, wrong);
    assert_eq!(query_err(&mut c, &["LPUSH", "h", "x"]).await, wrong);
}

#[tokio::test]
async fn hashes_work_with_expire_rename_and_del() {
    let h = start().await;
    let mut c = conn(&h).await;
    q::<i64>(&mut c, &["HSET", "h", "a", "1"]).await.unwrap();
    assert_eq!(
        q::<i64>(&mut c, &["PEXPIRE", "h", "1000"]).await.unwrap(),
        1
    );
    assert_eq!(q::<i64>(&mut c, &["PTTL", "h"]).await.unwrap(), 1000);
    // Changing a field keeps the TTL (Redisson's hincrby relies on it).
    q::<i64>(&mut c, &["HINCRBY", "h", "n", "1"]).await.unwrap();
    assert_eq!(q::<i64>(&mut c, &["PTTL", "h"]).await.unwrap(), 1000);
    assert_eq!(
        q::<String>(&mut c, &["RENAME", "h", "h2"]).await.unwrap(),
        "OK"
    );
    assert_eq!(
        q::<String>(&mut c, &["HGET", "h2", "a"]).await.unwrap(),
        "1"
    );
    h.clock().advance(std::time::Duration::from_millis(1001));
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "h2"]).await.unwrap(), 0);
    q::<i64>(&mut c, &["HSET", "h", "a", "1"]).await.unwrap();
    assert_eq!(q::<i64>(&mut c, &["DEL", "h"]).await.unwrap(), 1);
}

#[tokio::test]
async fn creating_a_hash_is_fenced_but_hdel_is_not() {
    let h = start_with(|c| c.restart_delay = Some(std::time::Duration::from_secs(31))).await;
    let mut c = conn(&h).await;
    for args in [
        &["HSET", "h", "a", "1"][..],
        &["HSETNX", "h", "a", "1"],
        &["HINCRBY", "h", "a", "1"],
        &["HMSET", "h", "a", "1"],
    ] {
        assert!(
            query_err(&mut c, args).await.starts_with("TRYAGAIN "),
            "{args:?}"
        );
    }
    assert_eq!(q::<i64>(&mut c, &["HDEL", "h", "a"]).await.unwrap(), 0);
    assert_eq!(
        q::<Option<String>>(&mut c, &["HGET", "h", "a"])
            .await
            .unwrap(),
        None
    );
}

#[tokio::test]
async fn require_ttl_refuses_creating_a_hash() {
    let h = start_with(|c| c.require_ttl = true).await;
    let mut c = conn(&h).await;
    assert!(query_err(&mut c, &["HSET", "h", "a", "1"])
        .await
        .contains("--require-ttl"));
    assert!(query_err(&mut c, &["HINCRBY", "h", "a", "1"])
        .await
        .contains("--require-ttl"));
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "h"]).await.unwrap(), 0);
}

#[tokio::test]
async fn hrandfield_picks_fields_as_redis_does() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["HRANDFIELD", "nokey"]).await, NIL);
    assert_eq!(c.cmd(&["HRANDFIELD", "nokey", "3"]).await, "*0\r\n");
    c.cmd(&["HSET", "h", "a", "1", "b", "2", "c", "3"]).await;
    let one = c.cmd(&["HRANDFIELD", "h"]).await;
    assert!(
        ["$1\r\na\r\n", "$1\r\nb\r\n", "$1\r\nc\r\n"].contains(&one.as_str()),
        "{one}"
    );
    // A positive count: distinct fields, at most all of them.
    let all = c.cmd(&["HRANDFIELD", "h", "10"]).await;
    assert!(all.starts_with("*3\r\n"), "{all}");
    for f in ["a", "b", "c"] {
        assert!(all.contains(&format!("$1\r\n{f}\r\n")), "{all}");
    }
    assert_eq!(c.cmd(&["HRANDFIELD", "h", "0"]).await, "*0\r\n");
    // A negative count: exactly that many, repeats allowed.
    assert!(c
        .cmd(&["HRANDFIELD", "h", "-7"])
        .await
        .starts_with("*7\r\n"));
    // WITHVALUES: flat in RESP2, pairs in RESP3; each value belongs to its field.
    let flat = c.cmd(&["HRANDFIELD", "h", "-2", "WITHVALUES"]).await;
    assert!(flat.starts_with("*4\r\n"), "{flat}");
    assert!(c.cmd(&["HELLO", "3"]).await.starts_with('%'));
    let pairs = c.cmd(&["HRANDFIELD", "h", "1", "WITHVALUES"]).await;
    assert!(
        [
            "*1\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n",
            "*1\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n",
            "*1\r\n*2\r\n$1\r\nc\r\n$1\r\n3\r\n"
        ]
        .contains(&pairs.as_str()),
        "{pairs}"
    );
    assert_eq!(
        c.cmd(&["HRANDFIELD", "h", "1", "WITHSCORES"]).await,
        err("ERR syntax error")
    );
    assert_eq!(
        c.cmd(&["HRANDFIELD", "h", "-9223372036854775807", "WITHVALUES"])
            .await,
        err("ERR value is out of range")
    );
    assert_eq!(
        c.cmd(&["HRANDFIELD", "h", "x"]).await,
        err("ERR value is not an integer or out of range")
    );
    h.shutdown().await;
}
