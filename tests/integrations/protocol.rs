//! The wire: pipelining, inline commands, RESP3 encodings, unknown commands and arity,
//! protocol errors (each closes only its own connection), slow readers, many clients.

use crate::support;
use std::sync::Arc;
use support::*;
use tokio::io::AsyncWriteExt;

#[tokio::test]
async fn a_thousand_pipelined_commands_in_one_write_get_a_thousand_replies_in_order() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    let mut batch = Vec::new();
    for _ in 0..1000 {
        batch.extend(resp(&["INCR", "n"]));
    }
    c.send(&batch).await;
    for i in 1..=1000 {
        assert_eq!(c.reply().await, int(i));
    }
    h.shutdown().await;
}

#[tokio::test]
async fn pipelined_mixed_commands_reply_in_order() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    let mut batch = Vec::new();
    batch.extend(resp(&["SET", "lock:1", "t", "NX", "PX", "30000"]));
    batch.extend(resp(&["SET", "lock:1", "t", "NX", "PX", "30000"]));
    batch.extend(resp(&["GET", "lock:1"]));
    batch.extend(b"PING\r\n");
    batch.extend(resp(&["DEL", "lock:1"]));
    c.send(&batch).await;
    assert_eq!(c.reply().await, OK);
    assert_eq!(c.reply().await, NIL);
    assert_eq!(c.reply().await, bulk("t"));
    assert_eq!(c.reply().await, "+PONG\r\n");
    assert_eq!(c.reply().await, int(1));
    h.shutdown().await;
}

/// Pipelined batches big enough to be prefetched and to have their write deferred
/// behind other ready connections (server/connection.rs), from several clients at
/// once, each in its own database: every reply is right and in order.
#[tokio::test]
async fn concurrent_pipelined_batches_across_databases_reply_right_and_in_order() {
    let h = start().await;
    let mut tasks = Vec::new();
    for client in 0..6 {
        let mut c = Raw::to(&h).await;
        tasks.push(tokio::spawn(async move {
            let db = client.to_string();
            for round in 0..40 {
                let key = format!("lock:{client}:{round}:{}", "x".repeat(40));
                let mut batch = resp(&["SELECT", &db]);
                batch.extend(resp(&["SET", &key, &db, "NX", "PX", "30000"]));
                batch.extend(resp(&["SET", &key, "other", "NX", "PX", "30000"]));
                batch.extend(resp(&["GET", &key]));
                batch.extend(resp(&["DEL", &key, "absent"]));
                batch.extend(resp(&["GET", &key]));
                batch.extend(resp(&["SET", &key, "again", "PX", "30000"]));
                assert!(batch.len() >= 256);
                c.send(&batch).await;
                assert_eq!(c.reply().await, OK);
                assert_eq!(c.reply().await, OK);
                assert_eq!(c.reply().await, NIL);
                assert_eq!(c.reply().await, bulk(&db));
                assert_eq!(c.reply().await, int(1));
                assert_eq!(c.reply().await, NIL);
                assert_eq!(c.reply().await, OK);
            }
            c
        }));
    }
    let mut clients = Vec::new();
    for t in tasks {
        clients.push(t.await.unwrap());
    }
    // Each database holds its own client's 40 keys, no other.
    let c = &mut clients[0];
    for client in 0..6 {
        assert_eq!(c.cmd(&["SELECT", &client.to_string()]).await, OK);
        assert_eq!(c.cmd(&["DBSIZE"]).await, int(40));
    }
    h.shutdown().await;
}

#[tokio::test]
async fn a_request_split_across_writes_is_reassembled() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    let req = resp(&["SET", "k", "a-longer-value"]);
    for chunk in req.chunks(3) {
        c.send(chunk).await;
        c.stream.flush().await.unwrap();
        tokio::task::yield_now().await;
    }
    assert_eq!(c.reply().await, OK);
    assert_eq!(c.cmd(&["GET", "k"]).await, bulk("a-longer-value"));
    h.shutdown().await;
}

#[tokio::test]
async fn inline_commands_are_split_on_spaces_and_quotes() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.send(b"PING\r\n").await;
    assert_eq!(c.reply().await, "+PONG\r\n");
    c.send(b"set k \"a b\\x41\\n\"\r\n").await;
    assert_eq!(c.reply().await, OK);
    assert_eq!(c.cmd(&["GET", "k"]).await, "$5\r\na bA\n\r\n");
    c.send(b"set k2 'it\\'s'\nget k2\n").await;
    assert_eq!(c.reply().await, OK);
    assert_eq!(c.reply().await, bulk("it's"));
    // Blank lines are skipped.
    c.send(b"\r\n\r\nECHO   spaced    \r\n").await;
    assert_eq!(c.reply().await, bulk("spaced"));
    h.shutdown().await;
}

#[tokio::test]
async fn resp3_encodes_nulls_and_maps_natively() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["HELLO", "3"]).await;
    assert_eq!(c.cmd(&["GET", "missing"]).await, "_\r\n");
    assert_eq!(c.cmd(&["SET", "k", "v", "XX"]).await, "_\r\n");
    assert_eq!(
        c.cmd(&["MGET", "missing", "missing"]).await,
        "*2\r\n_\r\n_\r\n"
    );
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "max-ttl"]).await,
        format!("%1\r\n{}{}", bulk("max-ttl"), bulk("30000"))
    );
    assert_eq!(c.cmd(&["COMMAND", "INFO", "nosuch"]).await, "*1\r\n_\r\n");
    h.shutdown().await;
}

#[tokio::test]
async fn unknown_command_error_lists_the_arguments() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(
        c.cmd(&["FOO", "a", "b"]).await,
        err("ERR unknown command 'FOO', with args beginning with: 'a' 'b' ")
    );
    assert_eq!(
        c.cmd(&["nosuch"]).await,
        err("ERR unknown command 'nosuch', with args beginning with: ")
    );
    // Arguments are cut so the list stays near 128 bytes, as Redis does.
    let long = "x".repeat(200);
    assert_eq!(
        c.cmd(&["FOO", &long, "b"]).await,
        err(&format!(
            "ERR unknown command 'FOO', with args beginning with: '{}' ",
            "x".repeat(128)
        ))
    );
    // Newlines in arguments do not break the error line.
    assert_eq!(
        c.cmd(&["FOO", "a\r\nb"]).await,
        err("ERR unknown command 'FOO', with args beginning with: 'a  b' ")
    );
    assert_eq!(c.cmd(&["PING"]).await, "+PONG\r\n");
    h.shutdown().await;
}

#[tokio::test]
async fn wrong_arity_names_the_command_in_lowercase() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(
        c.cmd(&["GET"]).await,
        err("ERR wrong number of arguments for 'get' command")
    );
    assert_eq!(
        c.cmd(&["GET", "a", "b"]).await,
        err("ERR wrong number of arguments for 'get' command")
    );
    assert_eq!(
        c.cmd(&["PeXpIrE", "k"]).await,
        err("ERR wrong number of arguments for 'pexpire' command")
    );
    h.shutdown().await;
}

/// Sends `bytes` on a fresh connection and checks that the reply is exactly
/// `-ERR Protocol error: <text>` followed by a close, while another client is unaffected.
async fn assert_protocol_error(h: &TestServer, bytes: &[u8], text: &str) {
    let mut bystander = Raw::to(h).await;
    assert_eq!(bystander.cmd(&["SET", "k", "v"]).await, OK);
    let mut c = Raw::to(h).await;
    c.send(bytes).await;
    assert_eq!(
        c.reply().await,
        err(&format!("ERR Protocol error: {text}")),
        "for {:?}",
        String::from_utf8_lossy(bytes)
    );
    assert!(c.closed().await, "connection closed after {text}");
    assert_eq!(bystander.cmd(&["GET", "k"]).await, bulk("v"));
}

#[tokio::test]
async fn protocol_errors_reply_and_close_only_that_connection() {
    let h = start_with(|c| c.proto_max_bulk_len = 1024).await;
    assert_protocol_error(&h, b"*1\r\n:3\r\n", "expected '$', got ':'").await;
    assert_protocol_error(&h, b"*abc\r\n", "invalid multibulk length").await;
    assert_protocol_error(&h, b"*1\r\n$abc\r\n", "invalid bulk length").await;
    assert_protocol_error(&h, b"*1\r\n$-5\r\n", "invalid bulk length").await;
    assert_protocol_error(&h, b"*1\r\n$+3\r\nget\r\n", "invalid bulk length").await;
    assert_protocol_error(&h, b"*2\r\n$3\r\nGET\r\n$1025\r\n", "invalid bulk length").await;
    assert_protocol_error(&h, b"*2000000\r\n", "invalid multibulk length").await;
    assert_protocol_error(&h, b"SET k \"abc\r\n", "unbalanced quotes in request").await;
    assert_protocol_error(&h, b"SET k \"a\"b\r\n", "unbalanced quotes in request").await;
    h.shutdown().await;
}

#[tokio::test]
async fn a_bulk_at_the_limit_is_accepted() {
    let h = start_with(|c| c.proto_max_bulk_len = 1024).await;
    let mut c = Raw::to(&h).await;
    let v = "v".repeat(1024);
    assert_eq!(c.cmd(&["SET", "k", &v]).await, OK);
    assert_eq!(c.cmd(&["GET", "k"]).await, bulk(&v));
    h.shutdown().await;
}

#[tokio::test]
async fn replies_before_a_protocol_error_are_still_sent() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    let mut batch = resp(&["PING"]);
    batch.extend(b"*1\r\n:1\r\n");
    batch.extend(resp(&["PING"]));
    c.send(&batch).await;
    assert_eq!(c.reply().await, "+PONG\r\n");
    assert_eq!(
        c.reply().await,
        err("ERR Protocol error: expected '$', got ':'")
    );
    assert!(c.closed().await);
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_does_not_stall_others() {
    let h = start().await;
    let mut setup = Raw::to(&h).await;
    let big = "x".repeat(1 << 20);
    assert_eq!(setup.cmd(&["SET", "big", &big]).await, OK);
    // 64 MiB of replies the slow client never reads: far past any socket buffer.
    let mut slow = Raw::to(&h).await;
    let mut batch = Vec::new();
    for _ in 0..64 {
        batch.extend(resp(&["GET", "big"]));
    }
    slow.send(&batch).await;
    for i in 0..50 {
        let mut c = Raw::to(&h).await;
        let key = format!("k{i}");
        assert_eq!(c.cmd(&["SET", &key, "v"]).await, OK);
        assert_eq!(c.cmd(&["GET", &key]).await, bulk("v"));
    }
    assert_eq!(setup.cmd(&["PING"]).await, "+PONG\r\n");
    drop(slow);
    h.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_concurrent_connections_each_set_and_get() {
    let h = start().await;
    let addr = h.addr();
    let barrier = Arc::new(tokio::sync::Barrier::new(1000));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..1000 {
        let barrier = barrier.clone();
        tasks.spawn(async move {
            let mut c = Raw::connect(addr).await;
            // Every connection is open before any command runs.
            barrier.wait().await;
            let (key, value) = (format!("lock:{i}"), format!("token-{i}"));
            assert_eq!(c.cmd(&["SET", &key, &value, "NX", "PX", "30000"]).await, OK);
            assert_eq!(c.cmd(&["GET", &key]).await, bulk(&value));
        });
    }
    let all = async {
        while let Some(r) = tasks.join_next().await {
            r.unwrap();
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(60), all)
        .await
        .expect("all clients finish in time");
    let mut c = Raw::connect(addr).await;
    assert_eq!(c.cmd(&["DBSIZE"]).await, int(1000));
    h.shutdown().await;
}
