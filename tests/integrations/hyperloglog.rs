//! HyperLogLog: PFADD, PFCOUNT, PFMERGE, PFDEBUG, PFSELFTEST. The strings are Redis's
//! own bytes (the fixtures below were read from redis-server 7.0.15), so a HyperLogLog
//! moves between redlockd and Redis with GET and SET.

use crate::support;
use support::*;

/// `PFADD h a b c` on redis-server 7.0.15: sparse, cache stale.
const ABC: &[u8] =
    b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80`\xf3\x80P\xb1\x84K\xfb\x80BZ";

fn bulk_bytes(b: &[u8]) -> Vec<u8> {
    let mut out = format!("${}\r\n", b.len()).into_bytes();
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
    out
}

#[tokio::test]
async fn pfadd_writes_redis_bytes_and_pfcount_caches_the_estimate() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["PFADD", "h", "a", "b", "c"]).await, int(1));
    assert_eq!(c.cmd_bytes(&[b"GET", b"h"]).await, bulk_bytes(ABC));
    assert_eq!(c.cmd(&["PFADD", "h", "a", "b"]).await, int(0));
    assert_eq!(c.cmd(&["PFCOUNT", "h"]).await, int(3));
    // The estimate is cached in the header, little-endian, its top bit clear.
    assert_eq!(
        c.cmd_bytes(&[b"GETRANGE", b"h", b"8", b"15"]).await,
        bulk_bytes(b"\x03\x00\x00\x00\x00\x00\x00\x00")
    );
    assert_eq!(c.cmd(&["PFADD", "h", "a"]).await, int(0));
    assert_eq!(
        c.cmd_bytes(&[b"GETRANGE", b"h", b"15", b"15"]).await,
        bulk_bytes(b"\x00")
    );
    assert_eq!(c.cmd(&["PFADD", "h", "d"]).await, int(1));
    assert_eq!(
        c.cmd_bytes(&[b"GETRANGE", b"h", b"15", b"15"]).await,
        bulk_bytes(b"\x80")
    );
    assert_eq!(
        c.cmd(&["PFDEBUG", "DECODE", "h"]).await,
        bulk("Z:7292 v:1,1 Z:1143 v:1,1 Z:4274 v:2,1 Z:3068 v:1,1 Z:603")
    );
    // An empty PFADD creates an empty HyperLogLog (and says so).
    assert_eq!(c.cmd(&["PFADD", "e"]).await, int(1));
    assert_eq!(
        c.cmd_bytes(&[b"GET", b"e"]).await,
        bulk_bytes(b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x7f\xff")
    );
    assert_eq!(c.cmd(&["PFCOUNT", "e"]).await, int(0));
    assert_eq!(c.cmd(&["PFCOUNT", "nokey"]).await, int(0));
    h.shutdown().await;
}

#[tokio::test]
async fn a_redis_hyperloglog_set_by_value_is_read_and_extended() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd_bytes(&[b"SET", b"h", ABC]).await;
    assert_eq!(c.cmd(&["PFCOUNT", "h"]).await, int(3));
    assert_eq!(c.cmd(&["PFADD", "h", "a", "b", "c"]).await, int(0));
    h.shutdown().await;
}

#[tokio::test]
async fn sparse_turns_dense_past_its_limit_with_the_same_estimates() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    let mut args = vec!["PFADD".to_string(), "s".to_string()];
    args.extend((0..1000).map(|i| format!("x{i}")));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_eq!(c.cmd(&refs).await, int(1));
    assert_eq!(c.cmd(&["PFDEBUG", "ENCODING", "s"]).await, "+sparse\r\n");
    assert_eq!(c.cmd(&["STRLEN", "s"]).await, int(1877));
    assert_eq!(c.cmd(&["PFCOUNT", "s"]).await, int(1001));
    assert_eq!(c.cmd(&["PFMERGE", "d", "s"]).await, OK);
    assert_eq!(c.cmd(&["PFDEBUG", "TODENSE", "d"]).await, int(1));
    assert_eq!(c.cmd(&["PFDEBUG", "TODENSE", "d"]).await, int(0));
    assert_eq!(c.cmd(&["PFDEBUG", "ENCODING", "d"]).await, "+dense\r\n");
    assert_eq!(c.cmd(&["STRLEN", "d"]).await, int(12304));
    assert_eq!(c.cmd(&["PFCOUNT", "d"]).await, int(1001));
    assert_eq!(c.cmd(&["PFCOUNT", "s", "d", "nokey"]).await, int(1001));
    let mut more = vec!["PFADD".to_string(), "s".to_string()];
    more.extend((0..3000).map(|i| format!("y{i}")));
    let refs: Vec<&str> = more.iter().map(String::as_str).collect();
    assert_eq!(c.cmd(&refs).await, int(1));
    assert_eq!(c.cmd(&["PFDEBUG", "ENCODING", "s"]).await, "+dense\r\n");
    assert_eq!(c.cmd(&["STRLEN", "s"]).await, int(12304));
    h.shutdown().await;
}

#[tokio::test]
async fn strings_that_are_not_hyperloglogs_are_refused() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    let not_hll = err("WRONGTYPE Key is not a valid HyperLogLog string value.");
    c.cmd(&["SET", "s", "hello"]).await;
    assert_eq!(c.cmd(&["PFADD", "s", "a"]).await, not_hll);
    assert_eq!(c.cmd(&["PFCOUNT", "s"]).await, not_hll);
    assert_eq!(c.cmd(&["PFMERGE", "d", "s"]).await, not_hll);
    assert_eq!(c.cmd(&["EXISTS", "d"]).await, int(0));
    c.cmd(&["RPUSH", "l", "x"]).await;
    assert_eq!(
        c.cmd(&["PFADD", "l", "a"]).await,
        err("WRONGTYPE Operation against a key holding the wrong kind of value")
    );
    // Corruptions: the tail, the encoding byte, a dense one's length.
    c.cmd(&["PFADD", "h", "a", "b", "c"]).await;
    c.cmd(&["APPEND", "h", "hello"]).await;
    assert_eq!(
        c.cmd(&["PFCOUNT", "h"]).await,
        err("INVALIDOBJ Corrupted HLL object detected")
    );
    c.cmd(&["SETRANGE", "h", "4", "x"]).await;
    assert_eq!(c.cmd(&["PFCOUNT", "h"]).await, not_hll);
    c.cmd_bytes(&[b"SETRANGE", b"h", b"4", b"\x00"]).await;
    assert_eq!(c.cmd(&["PFCOUNT", "h"]).await, not_hll);
    assert_eq!(
        c.cmd(&["PFDEBUG", "GETREG", "nokey"]).await,
        err("ERR The specified key does not exist")
    );
    c.cmd(&["PFADD", "g", "a"]).await;
    assert_eq!(
        c.cmd(&["PFDEBUG", "NOPE", "g"]).await,
        err("ERR Unknown PFDEBUG subcommand 'NOPE'")
    );
    h.shutdown().await;
}

#[tokio::test]
async fn pfmerge_unions_into_the_destination() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["PFADD", "h1", "a", "b", "c"]).await;
    c.cmd(&["PFADD", "h2", "b", "c", "d"]).await;
    c.cmd(&["PFADD", "h3", "c", "d", "e"]).await;
    assert_eq!(
        c.cmd(&["PFMERGE", "h", "h1", "h2", "h3", "nokey"]).await,
        OK
    );
    assert_eq!(c.cmd(&["PFCOUNT", "h"]).await, int(5));
    assert_eq!(c.cmd(&["PFCOUNT", "h1", "h2"]).await, int(4));
    assert_eq!(c.cmd(&["PFMERGE", "h1", "h3"]).await, OK);
    assert_eq!(c.cmd(&["PFCOUNT", "h1"]).await, int(5));
    h.shutdown().await;
}

/// `hll-sparse-max-bytes` bounds the sparse form (CONFIG SET, as in Redis).
#[tokio::test]
async fn the_sparse_limit_is_a_setting() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "hll-sparse-max-bytes"]).await,
        "*2\r\n$20\r\nhll-sparse-max-bytes\r\n$4\r\n3000\r\n"
    );
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "hll-sparse-max-bytes", "30"])
            .await,
        OK
    );
    let args: Vec<String> = ["PFADD", "h"]
        .iter()
        .map(|s| s.to_string())
        .chain((0..20).map(|i| format!("e{i}")))
        .collect();
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_eq!(c.cmd(&refs).await, int(1));
    assert_eq!(c.cmd(&["PFDEBUG", "ENCODING", "h"]).await, "+dense\r\n");
    assert_eq!(c.cmd(&["PFCOUNT", "h"]).await, int(20));
    h.shutdown().await;
}
