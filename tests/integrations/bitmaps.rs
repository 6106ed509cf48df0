//! Bitmaps (SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD, BITFIELD_RO) and LCS,
//! with Redis 7.0's exact replies and errors (tests/integrations/differential_bits.rs
//! compares random sequences of them with a real redis-server).

use crate::support;
use support::*;

const NOT_INT: &str = "-ERR value is not an integer or out of range\r\n";
const BAD_OFFSET: &str = "-ERR bit offset is not an integer or out of range\r\n";
const WRONGTYPE: &str = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

#[tokio::test]
async fn setbit_pads_with_zeros_and_answers_the_old_bit() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["SETBIT", "b", "7", "1"]).await, int(0));
    assert_eq!(c.cmd(&["SETBIT", "b", "7", "1"]).await, int(1));
    assert_eq!(c.cmd(&["SETBIT", "b", "17", "1"]).await, int(0));
    assert_eq!(c.cmd(&["GET", "b"]).await, "$3\r\n\x01\x00\x40\r\n");
    assert_eq!(c.cmd(&["SETBIT", "b", "7", "0"]).await, int(1));
    assert_eq!(c.cmd(&["GETBIT", "b", "7"]).await, int(0));
    assert_eq!(c.cmd(&["GETBIT", "b", "17"]).await, int(1));
    assert_eq!(c.cmd(&["GETBIT", "b", "1000"]).await, int(0));
    assert_eq!(c.cmd(&["GETBIT", "nokey", "0"]).await, int(0));
    h.shutdown().await;
}

#[tokio::test]
async fn bad_offsets_and_bits_get_redis_errors_and_change_nothing() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    for off in ["-1", "x", "4294967296", "1.5", ""] {
        assert_eq!(c.cmd(&["SETBIT", "b", off, "1"]).await, BAD_OFFSET, "{off}");
        assert_eq!(c.cmd(&["GETBIT", "b", off]).await, BAD_OFFSET, "{off}");
    }
    let bad_bit = "-ERR bit is not an integer or out of range\r\n";
    for bit in ["2", "-1", "x"] {
        assert_eq!(c.cmd(&["SETBIT", "b", "1", bit]).await, bad_bit);
    }
    assert_eq!(c.cmd(&["EXISTS", "b"]).await, int(0));
    c.cmd(&["RPUSH", "l", "x"]).await;
    assert_eq!(c.cmd(&["SETBIT", "l", "1", "1"]).await, WRONGTYPE);
    assert_eq!(c.cmd(&["GETBIT", "l", "1"]).await, WRONGTYPE);
    h.shutdown().await;
}

/// An offset whose byte is at or past proto-max-bulk-len is refused before the string
/// grows (512 MB by default: SETBIT 4294967296 above).
#[tokio::test]
async fn the_largest_bit_follows_proto_max_bulk_len() {
    let h = start_with(|c| c.proto_max_bulk_len = 1024).await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["SETBIT", "b", "8192", "1"]).await, BAD_OFFSET);
    assert_eq!(
        c.cmd(&["BITFIELD", "b", "SET", "u8", "#1024", "1"]).await,
        BAD_OFFSET
    );
    assert_eq!(c.cmd(&["SETBIT", "b", "8191", "1"]).await, int(0));
    assert_eq!(c.cmd(&["STRLEN", "b"]).await, int(1024));
    h.shutdown().await;
}

#[tokio::test]
async fn bit_writes_keep_the_ttl_and_bitop_replaces_it() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["SET", "b", "a", "PX", "10000"]).await, OK);
    assert_eq!(c.cmd(&["SETBIT", "b", "100", "1"]).await, int(0));
    assert_eq!(
        c.cmd(&["BITFIELD", "b", "SET", "u8", "0", "7"]).await,
        "*1\r\n:97\r\n"
    );
    assert_eq!(c.cmd(&["PTTL", "b"]).await, int(10000));
    assert_eq!(c.cmd(&["SET", "d", "x", "PX", "10000"]).await, OK);
    assert_eq!(c.cmd(&["BITOP", "NOT", "d", "b"]).await, int(13));
    assert_eq!(c.cmd(&["PTTL", "d"]).await, int(-1));
    h.shutdown().await;
}

#[tokio::test]
async fn bitcount_counts_bytes_or_bits() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["SET", "s", "foobar"]).await;
    assert_eq!(c.cmd(&["BITCOUNT", "s"]).await, int(26));
    assert_eq!(c.cmd(&["BITCOUNT", "s", "1", "1"]).await, int(6));
    assert_eq!(c.cmd(&["BITCOUNT", "s", "-2", "-1"]).await, int(7));
    assert_eq!(c.cmd(&["BITCOUNT", "s", "5", "30", "BIT"]).await, int(17));
    assert_eq!(c.cmd(&["BITCOUNT", "s", "5", "30", "byte"]).await, int(4));
    assert_eq!(c.cmd(&["BITCOUNT", "s", "-1", "-5"]).await, int(0));
    assert_eq!(
        c.cmd(&["BITCOUNT", "s", "0"]).await,
        err("ERR syntax error")
    );
    assert_eq!(
        c.cmd(&["BITCOUNT", "s", "0", "1", "BITS"]).await,
        err("ERR syntax error")
    );
    assert_eq!(c.cmd(&["BITCOUNT", "s", "a", "1"]).await, NOT_INT);
    // A missing key answers 0 before its arguments are read, as in Redis.
    assert_eq!(c.cmd(&["BITCOUNT", "nokey", "a", "b"]).await, int(0));
    h.shutdown().await;
}

#[tokio::test]
async fn bitpos_finds_the_first_bit_and_pads_only_without_an_end() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd_bytes(&[b"SET", b"ones", b"\xff\xff\xff"]).await;
    assert_eq!(c.cmd(&["BITPOS", "ones", "0"]).await, int(24));
    assert_eq!(c.cmd(&["BITPOS", "ones", "0", "1"]).await, int(24));
    assert_eq!(c.cmd(&["BITPOS", "ones", "0", "0", "-1"]).await, int(-1));
    assert_eq!(
        c.cmd(&["BITPOS", "ones", "1", "7", "15", "BIT"]).await,
        int(7)
    );
    c.cmd_bytes(&[b"SET", b"s", b"\x00\x0f\x00"]).await;
    assert_eq!(c.cmd(&["BITPOS", "s", "1"]).await, int(12));
    assert_eq!(c.cmd(&["BITPOS", "s", "1", "2"]).await, int(-1));
    assert_eq!(
        c.cmd(&["BITPOS", "s", "0", "12", "15", "BIT"]).await,
        int(-1)
    );
    assert_eq!(
        c.cmd(&["BITPOS", "s", "0", "12", "16", "BIT"]).await,
        int(16)
    );
    assert_eq!(c.cmd(&["BITPOS", "nokey", "1"]).await, int(-1));
    assert_eq!(c.cmd(&["BITPOS", "nokey", "0"]).await, int(0));
    assert_eq!(
        c.cmd(&["BITPOS", "s", "2"]).await,
        err("ERR The bit argument must be 1 or 0.")
    );
    assert_eq!(
        c.cmd(&["BITPOS", "s", "1", "0", "1", "x"]).await,
        err("ERR syntax error")
    );
    h.shutdown().await;
}

#[tokio::test]
async fn bitop_combines_zero_padded_sources() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["MSET", "a", "abc", "b", "\x01"]).await;
    assert_eq!(c.cmd(&["BITOP", "AND", "d", "a", "b"]).await, int(3));
    assert_eq!(c.cmd(&["GET", "d"]).await, "$3\r\n\x01\x00\x00\r\n");
    assert_eq!(
        c.cmd(&["BITOP", "OR", "d", "a", "b", "nokey"]).await,
        int(3)
    );
    assert_eq!(c.cmd(&["GET", "d"]).await, bulk("abc"));
    assert_eq!(c.cmd(&["BITOP", "XOR", "d", "a", "a"]).await, int(3));
    assert_eq!(c.cmd(&["GET", "d"]).await, "$3\r\n\x00\x00\x00\r\n");
    assert_eq!(c.cmd(&["BITOP", "NOT", "d", "b"]).await, int(1));
    assert_eq!(c.cmd_bytes(&[b"GET", b"d"]).await, b"$1\r\n\xfe\r\n");
    // Nothing but empty sources: the destination is deleted.
    assert_eq!(c.cmd(&["BITOP", "AND", "d", "nokey"]).await, int(0));
    assert_eq!(c.cmd(&["EXISTS", "d"]).await, int(0));
    assert_eq!(
        c.cmd(&["BITOP", "NOT", "d", "a", "b"]).await,
        err("ERR BITOP NOT must be called with a single source key.")
    );
    assert_eq!(
        c.cmd(&["BITOP", "NAND", "d", "a"]).await,
        err("ERR syntax error")
    );
    c.cmd(&["RPUSH", "l", "x"]).await;
    assert_eq!(c.cmd(&["BITOP", "AND", "d", "a", "l"]).await, WRONGTYPE);
    h.shutdown().await;
}

#[tokio::test]
async fn bitfield_follows_the_overflow_rules() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(
        c.cmd(&["BITFIELD", "f", "SET", "u8", "0", "250", "INCRBY", "u8", "0", "10"])
            .await,
        "*2\r\n:0\r\n:4\r\n"
    );
    assert_eq!(
        c.cmd(&[
            "BITFIELD", "f", "OVERFLOW", "SAT", "INCRBY", "u8", "0", "300", "OVERFLOW", "FAIL",
            "INCRBY", "u8", "0", "1", "GET", "u8", "0"
        ])
        .await,
        "*3\r\n:255\r\n$-1\r\n:255\r\n"
    );
    assert_eq!(
        c.cmd(&["BITFIELD", "f", "SET", "i8", "#1", "-100", "INCRBY", "i8", "#1", "-100"])
            .await,
        "*2\r\n:0\r\n:56\r\n"
    );
    assert_eq!(
        c.cmd(&["BITFIELD", "f", "OVERFLOW", "SAT", "INCRBY", "i8", "8", "-300"])
            .await,
        "*1\r\n:-128\r\n"
    );
    assert_eq!(
        c.cmd(&["BITFIELD", "f", "SET", "i64", "16", "-1", "GET", "u63", "16", "GET", "i64", "16"])
            .await,
        "*3\r\n:0\r\n:9223372036854775807\r\n:-1\r\n"
    );
    assert_eq!(
        c.cmd(&["BITFIELD_RO", "f", "GET", "u8", "0"]).await,
        "*1\r\n:255\r\n"
    );
    assert_eq!(
        c.cmd(&["BITFIELD", "nokey", "GET", "u8", "0"]).await,
        "*1\r\n:0\r\n"
    );
    assert_eq!(c.cmd(&["EXISTS", "nokey"]).await, int(0));
    let bad_type = "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";
    for ty in ["u64", "i65", "x8", "u0"] {
        assert_eq!(
            c.cmd(&["BITFIELD", "f", "GET", ty, "0"]).await,
            err(bad_type)
        );
    }
    assert_eq!(
        c.cmd(&["BITFIELD", "f", "OVERFLOW", "NOPE"]).await,
        err("ERR Invalid OVERFLOW type specified")
    );
    assert_eq!(
        c.cmd(&["BITFIELD", "f", "GET", "u8"]).await,
        err("ERR syntax error")
    );
    assert_eq!(
        c.cmd(&["BITFIELD", "f", "SET", "u8", "0", "x"]).await,
        NOT_INT
    );
    assert_eq!(
        c.cmd(&["BITFIELD_RO", "f", "SET", "u8", "0", "1"]).await,
        err("ERR BITFIELD_RO only supports the GET subcommand")
    );
    h.shutdown().await;
}

#[tokio::test]
async fn bit_commands_run_alike_in_scripts_and_transactions() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    let script = "redis.call('setbit', KEYS[1], 9, 1); return {redis.call('getbit', KEYS[1], 9), redis.call('bitcount', KEYS[1]), redis.call('bitfield', KEYS[1], 'incrby', 'u4', 0, 3)}";
    assert_eq!(
        c.cmd(&["EVAL", script, "1", "e"]).await,
        "*3\r\n:1\r\n:1\r\n*1\r\n:3\r\n"
    );
    assert_eq!(c.cmd(&["MULTI"]).await, OK);
    assert_eq!(c.cmd(&["SETBIT", "m", "3", "1"]).await, "+QUEUED\r\n");
    assert_eq!(c.cmd(&["BITPOS", "m", "1"]).await, "+QUEUED\r\n");
    assert_eq!(c.cmd(&["EXEC"]).await, "*2\r\n:0\r\n:3\r\n");
    h.shutdown().await;
}

#[tokio::test]
async fn lcs_answers_the_string_its_length_or_its_ranges() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["MSET", "key1", "ohmytext", "key2", "mynewtext"])
        .await;
    assert_eq!(c.cmd(&["LCS", "key1", "key2"]).await, bulk("mytext"));
    assert_eq!(c.cmd(&["LCS", "key1", "key2", "LEN"]).await, int(6));
    let idx = "$7\r\nmatches\r\n*1\r\n*3\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n:4\r\n$3\r\nlen\r\n:6\r\n";
    let args = [
        "LCS",
        "key1",
        "key2",
        "IDX",
        "MINMATCHLEN",
        "4",
        "WITHMATCHLEN",
    ];
    assert_eq!(c.cmd(&args).await, format!("*4\r\n{idx}"));
    c.hello3().await;
    assert_eq!(c.cmd(&args).await, format!("%2\r\n{idx}"));
    assert_eq!(c.cmd(&["LCS", "key1", "nokey"]).await, bulk(""));
    assert_eq!(
        c.cmd(&["LCS", "key1", "key2", "LEN", "IDX"]).await,
        err("ERR If you want both the length and indexes, please just use IDX.")
    );
    assert_eq!(
        c.cmd(&["LCS", "key1", "key2", "MINMATCHLEN"]).await,
        err("ERR syntax error")
    );
    c.cmd(&["RPUSH", "l", "x"]).await;
    assert_eq!(
        c.cmd(&["LCS", "key1", "l"]).await,
        err("ERR The specified keys must contain string values")
    );
    h.shutdown().await;
}

/// The LCS table is refused, as Redis refuses it, past proto-max-bulk-len bytes.
#[tokio::test]
async fn a_huge_lcs_table_is_refused() {
    let h = start_with(|c| c.proto_max_bulk_len = 4096).await;
    let mut c = Raw::to(&h).await;
    let long = "x".repeat(100);
    c.cmd(&["MSET", "a", &long, "b", &long]).await;
    assert_eq!(
        c.cmd(&["LCS", "a", "b", "LEN"]).await,
        err("ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len")
    );
    h.shutdown().await;
}
