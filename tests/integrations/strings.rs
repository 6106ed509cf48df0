//! String commands: SET and its options, SETNX/SETEX/PSETEX/GETSET, GET, GETDEL, GETEX,
//! MGET, MSET/MSETNX, the INCR family with INCRBYFLOAT, APPEND, STRLEN, GETRANGE and
//! SETRANGE, with Redis's exact replies (tests/integrations/differential.rs compares them all with a
//! real redis-server).

use crate::support;
use std::time::Duration;
use support::*;

const SYNTAX: &str = "-ERR syntax error\r\n";
const NOT_INT: &str = "-ERR value is not an integer or out of range\r\n";

#[tokio::test]
async fn set_then_get_returns_the_value() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["SET", "k", "v"]).await, OK);
    assert_eq!(c.cmd(&["GET", "k"]).await, bulk("v"));
    assert_eq!(c.cmd(&["GET", "missing"]).await, NIL);
    h.shutdown().await;
}

#[tokio::test]
async fn set_through_the_redis_crate_round_trips_binary_values() {
    let h = start().await;
    let mut con = conn(&h).await;
    let value: Vec<u8> = (0..=255u8).collect();
    let () = redis::cmd("SET")
        .arg(&value[..20])
        .arg(&value)
        .arg("NX")
        .arg("PX")
        .arg(30_000)
        .query_async(&mut con)
        .await
        .unwrap();
    let got: Vec<u8> = redis::cmd("GET")
        .arg(&value[..20])
        .query_async(&mut con)
        .await
        .unwrap();
    assert_eq!(got, value);
    h.shutdown().await;
}

#[tokio::test]
async fn set_nx_on_existing_key_returns_null() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["SET", "k", "a", "NX"]).await, OK);
    assert_eq!(c.cmd(&["SET", "k", "b", "NX"]).await, NIL);
    assert_eq!(c.cmd(&["GET", "k"]).await, bulk("a"));
    h.shutdown().await;
}

#[tokio::test]
async fn set_xx_on_missing_key_returns_null_and_sets_nothing() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["SET", "k", "a", "XX"]).await, NIL);
    assert_eq!(c.cmd(&["EXISTS", "k"]).await, int(0));
    assert_eq!(c.cmd(&["SET", "k", "a"]).await, OK);
    assert_eq!(c.cmd(&["SET", "k", "b", "xx"]).await, OK);
    assert_eq!(c.cmd(&["GET", "k"]).await, bulk("b"));
    h.shutdown().await;
}

#[tokio::test]
async fn set_options_are_accepted_in_any_order_and_case() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    for (i, opts) in [
        vec!["NX", "PX", "30000"],
        vec!["PX", "30000", "NX"],
        vec!["px", "30000", "nx"],
        vec!["Nx", "Ex", "30"],
        vec!["ex", "30", "NX", "GET"],
        vec!["GET", "pxat", "1735689630000", "nX"],
    ]
    .into_iter()
    .enumerate()
    {
        let key = format!("lock:{i}");
        let mut args = vec!["SET", key.as_str(), "token"];
        args.extend(opts.iter().copied());
        let want = if opts.iter().any(|o| o.eq_ignore_ascii_case("get")) {
            NIL
        } else {
            OK
        };
        assert_eq!(c.cmd(&args).await, want, "{opts:?}");
        assert_eq!(c.cmd(&["PTTL", &key]).await, int(30_000), "{opts:?}");
    }
    h.shutdown().await;
}

#[tokio::test]
async fn set_conflicting_options_are_a_syntax_error() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    for opts in [
        vec!["NX", "XX"],
        vec!["XX", "NX"],
        vec!["EX", "10", "PX", "100"],
        vec!["PX", "100", "EXAT", "100"],
        vec!["KEEPTTL", "EX", "10"],
        vec!["PX", "100", "KEEPTTL"],
        vec!["EX"],
        vec!["NX", "PX"],
        vec!["FOO"],
        vec!["PERSIST"],
    ] {
        let mut args = vec!["SET", "k", "v"];
        args.extend(opts.iter().copied());
        assert_eq!(c.cmd(&args).await, SYNTAX, "{opts:?}");
    }
    assert_eq!(c.cmd(&["EXISTS", "k"]).await, int(0));
    h.shutdown().await;
}

#[tokio::test]
async fn set_repeated_expire_option_takes_the_last_value() {
    // Redis accepts the same option twice (EX 10 EX 20): the last one wins, and an
    // earlier bad number is never parsed.
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["SET", "k", "v", "EX", "10", "EX", "20"]).await, OK);
    assert_eq!(c.cmd(&["TTL", "k"]).await, int(20));
    assert_eq!(
        c.cmd(&["SET", "k", "v", "PX", "abc", "PX", "500"]).await,
        OK
    );
    assert_eq!(c.cmd(&["PTTL", "k"]).await, int(500));
    assert_eq!(c.cmd(&["SET", "k", "v", "NX", "NX"]).await, NIL);
    assert_eq!(c.cmd(&["SET", "k", "w", "KEEPTTL", "KEEPTTL"]).await, OK);
    assert_eq!(c.cmd(&["PTTL", "k"]).await, int(500));
    h.shutdown().await;
}

#[tokio::test]
async fn set_syntax_error_wins_over_a_bad_number() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(
        c.cmd(&["SET", "k", "v", "EX", "abc", "BOGUS"]).await,
        SYNTAX
    );
    assert_eq!(
        c.cmd(&["SET", "k", "v", "EX", "0", "NX", "XX"]).await,
        SYNTAX
    );
    h.shutdown().await;
}

#[tokio::test]
async fn set_zero_or_negative_expire_is_invalid_expire_time() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    let want = err("ERR invalid expire time in 'set' command");
    for opts in [
        ["EX", "0"],
        ["PX", "0"],
        ["EX", "-5"],
        ["PX", "-1"],
        ["EXAT", "0"],
        ["PXAT", "-1"],
        ["EX", "9223372036854775807"],
        ["PX", "9223372036854775807"],
    ] {
        assert_eq!(
            c.cmd(&["SET", "k", "v", opts[0], opts[1]]).await,
            want,
            "{opts:?}"
        );
    }
    assert_eq!(c.cmd(&["EXISTS", "k"]).await, int(0));
    h.shutdown().await;
}

#[tokio::test]
async fn set_non_integer_expire_is_not_an_integer_error() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    for v in ["abc", "1.5", " 1", "+1", "01", ""] {
        assert_eq!(c.cmd(&["SET", "k", "v", "PX", v]).await, NOT_INT, "{v:?}");
    }
    h.shutdown().await;
}

#[tokio::test]
async fn set_get_returns_the_old_value_or_null() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["SET", "k", "a", "GET"]).await, NIL);
    assert_eq!(c.cmd(&["SET", "k", "b", "GET"]).await, bulk("a"));
    assert_eq!(c.cmd(&["SET", "k", "c", "NX", "GET"]).await, bulk("b"));
    assert_eq!(c.cmd(&["GET", "k"]).await, bulk("b"));
    assert_eq!(c.cmd(&["SET", "n", "c", "XX", "GET"]).await, NIL);
    assert_eq!(c.cmd(&["EXISTS", "n"]).await, int(0));
    h.shutdown().await;
}

#[tokio::test]
async fn set_without_ttl_option_clears_the_ttl_and_keepttl_keeps_it() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["SET", "k", "a", "PX", "5000"]).await, OK);
    assert_eq!(c.cmd(&["SET", "k", "b", "KEEPTTL"]).await, OK);
    assert_eq!(c.cmd(&["PTTL", "k"]).await, int(5000));
    assert_eq!(c.cmd(&["SET", "k", "c"]).await, OK);
    assert_eq!(c.cmd(&["PTTL", "k"]).await, int(-1));
    h.shutdown().await;
}

#[tokio::test]
async fn set_exat_and_pxat_use_wall_time() {
    let h = start().await;
    let wall = h.clock().wall_ms();
    let mut c = Raw::to(&h).await;
    let at = ((wall + 7000) / 1000).to_string();
    assert_eq!(c.cmd(&["SET", "k", "v", "EXAT", &at]).await, OK);
    assert_eq!(c.cmd(&["PTTL", "k"]).await, int(7000));
    let at = (wall + 1234).to_string();
    assert_eq!(c.cmd(&["SET", "k", "v", "PXAT", &at]).await, OK);
    assert_eq!(c.cmd(&["PEXPIRETIME", "k"]).await, int(wall + 1234));
    h.shutdown().await;
}

#[tokio::test]
async fn set_pxat_in_the_past_replies_ok_and_deletes_the_key() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["SET", "k", "v"]).await, OK);
    assert_eq!(
        c.cmd(&["SET", "k", "w", "PXAT", "1000", "GET"]).await,
        bulk("v")
    );
    assert_eq!(c.cmd(&["EXISTS", "k"]).await, int(0));
    assert_eq!(c.cmd(&["SET", "k", "w", "EXAT", "1"]).await, OK);
    assert_eq!(c.cmd(&["DBSIZE"]).await, int(0));
    h.shutdown().await;
}

#[tokio::test]
async fn set_with_wrong_arity_is_an_error() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(
        c.cmd(&["SET", "k"]).await,
        err("ERR wrong number of arguments for 'set' command")
    );
    h.shutdown().await;
}

#[tokio::test]
async fn setnx_returns_one_then_zero() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["SETNX", "k", "a"]).await, int(1));
    assert_eq!(c.cmd(&["SETNX", "k", "b"]).await, int(0));
    assert_eq!(c.cmd(&["GET", "k"]).await, bulk("a"));
    h.shutdown().await;
}

#[tokio::test]
async fn setex_and_psetex_set_value_and_ttl() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["SETEX", "a", "10", "v"]).await, OK);
    assert_eq!(c.cmd(&["PTTL", "a"]).await, int(10_000));
    assert_eq!(c.cmd(&["PSETEX", "b", "1500", "v"]).await, OK);
    assert_eq!(c.cmd(&["PTTL", "b"]).await, int(1500));
    assert_eq!(c.cmd(&["GET", "b"]).await, bulk("v"));
    h.shutdown().await;
}

#[tokio::test]
async fn setex_invalid_ttls_name_their_command() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(
        c.cmd(&["SETEX", "a", "0", "v"]).await,
        err("ERR invalid expire time in 'setex' command")
    );
    assert_eq!(
        c.cmd(&["PSETEX", "a", "-1", "v"]).await,
        err("ERR invalid expire time in 'psetex' command")
    );
    assert_eq!(c.cmd(&["SETEX", "a", "x", "v"]).await, NOT_INT);
    assert_eq!(c.cmd(&["EXISTS", "a"]).await, int(0));
    h.shutdown().await;
}

#[tokio::test]
async fn getdel_returns_the_value_and_removes_the_key() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["GETDEL", "k"]).await, NIL);
    c.cmd(&["SET", "k", "v"]).await;
    assert_eq!(c.cmd(&["GETDEL", "k"]).await, bulk("v"));
    assert_eq!(c.cmd(&["EXISTS", "k"]).await, int(0));
    h.shutdown().await;
}

#[tokio::test]
async fn getex_without_options_only_reads() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["SET", "k", "v", "PX", "5000"]).await;
    assert_eq!(c.cmd(&["GETEX", "k"]).await, bulk("v"));
    assert_eq!(c.cmd(&["PTTL", "k"]).await, int(5000));
    assert_eq!(c.cmd(&["GETEX", "missing"]).await, NIL);
    h.shutdown().await;
}

#[tokio::test]
async fn getex_sets_the_ttl_with_every_option() {
    let h = start().await;
    let wall = h.clock().wall_ms();
    let mut c = Raw::to(&h).await;
    c.cmd(&["SET", "k", "v"]).await;
    assert_eq!(c.cmd(&["GETEX", "k", "EX", "20"]).await, bulk("v"));
    assert_eq!(c.cmd(&["PTTL", "k"]).await, int(20_000));
    assert_eq!(c.cmd(&["GETEX", "k", "px", "1500"]).await, bulk("v"));
    assert_eq!(c.cmd(&["PTTL", "k"]).await, int(1500));
    let at = ((wall + 9000) / 1000).to_string();
    assert_eq!(c.cmd(&["GETEX", "k", "EXAT", &at]).await, bulk("v"));
    assert_eq!(c.cmd(&["PTTL", "k"]).await, int(9000));
    let at = (wall + 4321).to_string();
    assert_eq!(c.cmd(&["GETEX", "k", "PXAT", &at]).await, bulk("v"));
    assert_eq!(c.cmd(&["PTTL", "k"]).await, int(4321));
    assert_eq!(c.cmd(&["GETEX", "k", "PERSIST"]).await, bulk("v"));
    assert_eq!(c.cmd(&["PTTL", "k"]).await, int(-1));
    h.shutdown().await;
}

#[tokio::test]
async fn getex_pxat_in_the_past_returns_the_value_and_deletes_the_key() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["SET", "k", "v"]).await;
    assert_eq!(c.cmd(&["GETEX", "k", "PXAT", "1"]).await, bulk("v"));
    assert_eq!(c.cmd(&["EXISTS", "k"]).await, int(0));
    h.shutdown().await;
}

#[tokio::test]
async fn getex_option_errors_match_redis() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["SET", "k", "v"]).await;
    assert_eq!(c.cmd(&["GETEX", "k", "EX", "10", "PERSIST"]).await, SYNTAX);
    assert_eq!(c.cmd(&["GETEX", "k", "PERSIST", "PX", "10"]).await, SYNTAX);
    assert_eq!(c.cmd(&["GETEX", "k", "EX"]).await, SYNTAX);
    assert_eq!(c.cmd(&["GETEX", "k", "NX"]).await, SYNTAX);
    assert_eq!(c.cmd(&["GETEX", "k", "KEEPTTL"]).await, SYNTAX);
    assert_eq!(
        c.cmd(&["GETEX", "k", "EX", "0"]).await,
        err("ERR invalid expire time in 'getex' command")
    );
    assert_eq!(c.cmd(&["GETEX", "k", "PX", "x"]).await, NOT_INT);
    assert_eq!(
        c.cmd(&["GETEX", "k", "PERSIST", "PERSIST"]).await,
        bulk("v")
    );
    h.shutdown().await;
}

#[tokio::test]
async fn getex_on_a_missing_key_returns_null_before_checking_the_expire_value() {
    // Redis looks the key up before it validates the time: a missing key is null even
    // with EX 0 or EX abc.
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["GETEX", "missing", "EX", "0"]).await, NIL);
    assert_eq!(c.cmd(&["GETEX", "missing", "EX", "abc"]).await, NIL);
    assert_eq!(c.cmd(&["GETEX", "missing", "PX", "-1"]).await, NIL);
    h.shutdown().await;
}

#[tokio::test]
async fn mget_returns_values_and_nulls_in_order() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["MSET", "a", "1", "b", "2"]).await;
    assert_eq!(
        c.cmd(&["MGET", "a", "missing", "b", "a"]).await,
        format!("*4\r\n{}{NIL}{}{}", bulk("1"), bulk("2"), bulk("1"))
    );
    h.shutdown().await;
}

#[tokio::test]
async fn mset_sets_every_pair_and_clears_ttls() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["SET", "a", "old", "PX", "5000"]).await;
    assert_eq!(c.cmd(&["MSET", "a", "1", "b", "2"]).await, OK);
    assert_eq!(c.cmd(&["GET", "a"]).await, bulk("1"));
    assert_eq!(c.cmd(&["GET", "b"]).await, bulk("2"));
    assert_eq!(c.cmd(&["PTTL", "a"]).await, int(-1));
    h.shutdown().await;
}

#[tokio::test]
async fn mset_with_odd_arguments_is_wrong_arity() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    let want = err("ERR wrong number of arguments for 'mset' command");
    assert_eq!(c.cmd(&["MSET", "a", "1", "b"]).await, want);
    assert_eq!(c.cmd(&["MSET", "a"]).await, want);
    assert_eq!(c.cmd(&["DBSIZE"]).await, int(0));
    h.shutdown().await;
}

#[tokio::test]
async fn incr_family_counts_from_zero() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["INCR", "n"]).await, int(1));
    assert_eq!(c.cmd(&["INCRBY", "n", "10"]).await, int(11));
    assert_eq!(c.cmd(&["DECR", "n"]).await, int(10));
    assert_eq!(c.cmd(&["DECRBY", "n", "15"]).await, int(-5));
    assert_eq!(c.cmd(&["GET", "n"]).await, bulk("-5"));
    assert_eq!(c.cmd(&["DECRBY", "m", "-3"]).await, int(3));
    h.shutdown().await;
}

#[tokio::test]
async fn incr_keeps_the_ttl() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["SET", "n", "5", "PX", "5000"]).await;
    assert_eq!(c.cmd(&["INCR", "n"]).await, int(6));
    assert_eq!(c.cmd(&["PTTL", "n"]).await, int(5000));
    h.shutdown().await;
}

#[tokio::test]
async fn incr_on_a_non_integer_value_is_not_an_integer_error() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    for v in ["abc", "1.5", " 1", "01", "", "99999999999999999999"] {
        c.cmd(&["SET", "n", v]).await;
        assert_eq!(c.cmd(&["INCR", "n"]).await, NOT_INT, "{v:?}");
    }
    assert_eq!(c.cmd(&["INCRBY", "m", "x"]).await, NOT_INT);
    assert_eq!(c.cmd(&["DECRBY", "m", "1.0"]).await, NOT_INT);
    assert_eq!(c.cmd(&["EXISTS", "m"]).await, int(0));
    h.shutdown().await;
}

#[tokio::test]
async fn incr_past_the_i64_range_is_an_overflow_error() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    let overflow = err("ERR increment or decrement would overflow");
    c.cmd(&["SET", "n", "9223372036854775807"]).await;
    assert_eq!(c.cmd(&["INCR", "n"]).await, overflow);
    assert_eq!(c.cmd(&["GET", "n"]).await, bulk("9223372036854775807"));
    c.cmd(&["SET", "n", "-9223372036854775808"]).await;
    assert_eq!(c.cmd(&["DECR", "n"]).await, overflow);
    assert_eq!(c.cmd(&["INCRBY", "n", "-1"]).await, overflow);
    assert_eq!(
        c.cmd(&["DECRBY", "n", "-9223372036854775808"]).await,
        err("ERR decrement would overflow")
    );
    h.shutdown().await;
}

#[tokio::test]
async fn keys_set_with_px_expire_after_the_clock_passes_the_ttl() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["SET", "lock", "t", "NX", "PX", "100"]).await;
    h.clock().advance(Duration::from_millis(100));
    assert_eq!(c.cmd(&["GET", "lock"]).await, bulk("t"));
    h.clock().advance(Duration::from_millis(1));
    assert_eq!(c.cmd(&["GET", "lock"]).await, NIL);
    assert_eq!(c.cmd(&["SET", "lock", "u", "NX", "PX", "100"]).await, OK);
    h.shutdown().await;
}

const WRONGTYPE: &str = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

#[tokio::test]
async fn getset_answers_the_old_value_and_drops_the_ttl() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["GETSET", "k", "a"]).await, NIL);
    assert_eq!(c.cmd(&["PEXPIRE", "k", "5000"]).await, int(1));
    assert_eq!(c.cmd(&["GETSET", "k", "b"]).await, bulk("a"));
    assert_eq!(c.cmd(&["PTTL", "k"]).await, int(-1));
    assert_eq!(c.cmd(&["GET", "k"]).await, bulk("b"));
    c.cmd(&["RPUSH", "l", "x"]).await;
    assert_eq!(c.cmd(&["GETSET", "l", "v"]).await, WRONGTYPE);
    assert_eq!(c.cmd(&["TYPE", "l"]).await, "+list\r\n");
    h.shutdown().await;
}

#[tokio::test]
async fn msetnx_sets_every_key_or_none() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["MSETNX", "a", "1", "b", "2"]).await, int(1));
    assert_eq!(c.cmd(&["MSETNX", "c", "3", "b", "9"]).await, int(0));
    assert_eq!(c.cmd(&["EXISTS", "c"]).await, int(0));
    assert_eq!(
        c.cmd(&["MGET", "a", "b"]).await,
        "*2\r\n$1\r\n1\r\n$1\r\n2\r\n"
    );
    // A key of another type counts as existing; the same key twice: the last wins.
    c.cmd(&["RPUSH", "l", "x"]).await;
    assert_eq!(c.cmd(&["MSETNX", "l", "1"]).await, int(0));
    assert_eq!(c.cmd(&["MSETNX", "d", "1", "d", "2"]).await, int(1));
    assert_eq!(c.cmd(&["GET", "d"]).await, bulk("2"));
    assert_eq!(
        c.cmd(&["MSETNX", "e", "1", "f"]).await,
        err("ERR wrong number of arguments for 'msetnx' command")
    );
    // An expired key is missing.
    c.cmd(&["SET", "t", "v", "PX", "10"]).await;
    h.clock().advance(Duration::from_millis(11));
    assert_eq!(c.cmd(&["MSETNX", "t", "w"]).await, int(1));
    h.shutdown().await;
}

#[tokio::test]
async fn append_and_strlen_grow_a_string_and_keep_its_ttl() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    assert_eq!(c.cmd(&["STRLEN", "k"]).await, int(0));
    assert_eq!(c.cmd(&["APPEND", "k", "hello"]).await, int(5));
    assert_eq!(c.cmd(&["PEXPIRE", "k", "5000"]).await, int(1));
    assert_eq!(c.cmd(&["APPEND", "k", " world"]).await, int(11));
    assert_eq!(c.cmd(&["APPEND", "k", ""]).await, int(11));
    assert_eq!(c.cmd(&["GET", "k"]).await, bulk("hello world"));
    assert_eq!(c.cmd(&["STRLEN", "k"]).await, int(11));
    assert_eq!(c.cmd(&["PTTL", "k"]).await, int(5000));
    // An integer is a string too.
    c.cmd(&["SET", "n", "12"]).await;
    assert_eq!(c.cmd(&["APPEND", "n", "3"]).await, int(3));
    assert_eq!(c.cmd(&["INCR", "n"]).await, int(124));
    c.cmd(&["RPUSH", "l", "x"]).await;
    assert_eq!(c.cmd(&["APPEND", "l", "x"]).await, WRONGTYPE);
    assert_eq!(c.cmd(&["STRLEN", "l"]).await, WRONGTYPE);
    h.shutdown().await;
}

#[tokio::test]
async fn getrange_counts_from_either_end_and_clamps() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["SET", "k", "Hello World"]).await;
    for (start, end, want) in [
        ("0", "3", "Hell"),
        ("-3", "-1", "rld"),
        ("0", "-1", "Hello World"),
        ("10", "100", "d"),
        ("-100", "2", "Hel"),
        ("5", "3", ""),
        ("-1", "-5", ""),
        ("100", "200", ""),
        ("-9223372036854775808", "9223372036854775807", "Hello World"),
    ] {
        assert_eq!(
            c.cmd(&["GETRANGE", "k", start, end]).await,
            bulk(want),
            "{start} {end}"
        );
    }
    assert_eq!(c.cmd(&["SUBSTR", "k", "6", "-1"]).await, bulk("World"));
    assert_eq!(c.cmd(&["GETRANGE", "missing", "0", "-1"]).await, bulk(""));
    assert_eq!(c.cmd(&["GETRANGE", "k", "a", "1"]).await, NOT_INT);
    assert_eq!(c.cmd(&["GETRANGE", "missing", "0", "1.5"]).await, NOT_INT);
    c.cmd(&["RPUSH", "l", "x"]).await;
    assert_eq!(c.cmd(&["GETRANGE", "l", "0", "-1"]).await, WRONGTYPE);
    h.shutdown().await;
}

#[tokio::test]
async fn setrange_overwrites_and_pads_with_zero_bytes() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["SET", "k", "Hello World"]).await;
    assert_eq!(c.cmd(&["PEXPIRE", "k", "5000"]).await, int(1));
    assert_eq!(c.cmd(&["SETRANGE", "k", "6", "Redis"]).await, int(11));
    assert_eq!(c.cmd(&["GET", "k"]).await, bulk("Hello Redis"));
    assert_eq!(c.cmd(&["SETRANGE", "k", "13", "!"]).await, int(14));
    assert_eq!(c.cmd(&["GET", "k"]).await, bulk("Hello Redis\0\0!"));
    assert_eq!(c.cmd(&["PTTL", "k"]).await, int(5000));
    // Nothing to write: the length, and a missing key stays missing.
    assert_eq!(c.cmd(&["SETRANGE", "k", "100", ""]).await, int(14));
    assert_eq!(c.cmd(&["SETRANGE", "new", "3", ""]).await, int(0));
    assert_eq!(c.cmd(&["EXISTS", "new"]).await, int(0));
    assert_eq!(c.cmd(&["SETRANGE", "new", "2", "ab"]).await, int(4));
    assert_eq!(c.cmd(&["GET", "new"]).await, bulk("\0\0ab"));
    assert_eq!(
        c.cmd(&["SETRANGE", "k", "-1", "x"]).await,
        err("ERR offset is out of range")
    );
    assert_eq!(c.cmd(&["SETRANGE", "k", "x", "x"]).await, NOT_INT);
    assert_eq!(
        c.cmd(&["SETRANGE", "k", "536870912", "x"]).await,
        err("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
    );
    c.cmd(&["RPUSH", "l", "x"]).await;
    assert_eq!(c.cmd(&["SETRANGE", "l", "0", "x"]).await, WRONGTYPE);
    h.shutdown().await;
}

#[tokio::test]
async fn append_and_setrange_stop_at_proto_max_bulk_len() {
    let h = start_with(|c| c.proto_max_bulk_len = 8).await;
    let mut c = Raw::to(&h).await;
    let too_big = err("ERR string exceeds maximum allowed size (proto-max-bulk-len)");
    assert_eq!(c.cmd(&["APPEND", "k", "12345"]).await, int(5));
    assert_eq!(c.cmd(&["APPEND", "k", "678"]).await, int(8));
    assert_eq!(c.cmd(&["APPEND", "k", "9"]).await, too_big);
    assert_eq!(c.cmd(&["SETRANGE", "k", "8", "9"]).await, too_big);
    assert_eq!(c.cmd(&["SETRANGE", "k", "7", "x"]).await, int(8));
    assert_eq!(c.cmd(&["SETRANGE", "new", "8", "x"]).await, too_big);
    assert_eq!(c.cmd(&["GET", "k"]).await, bulk("1234567x"));
    h.shutdown().await;
}

#[tokio::test]
async fn incrbyfloat_computes_and_prints_as_redis_does() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    // C's long double, printed with %.17Lf less trailing zeros: 0.1 + 0.2 is 0.3
    // (f64 would print 0.30000000000000004).
    assert_eq!(c.cmd(&["INCRBYFLOAT", "f", "0.1"]).await, bulk("0.1"));
    assert_eq!(c.cmd(&["INCRBYFLOAT", "f", "0.2"]).await, bulk("0.3"));
    assert_eq!(c.cmd(&["INCRBYFLOAT", "f", "-0.3"]).await, bulk("0"));
    assert_eq!(c.cmd(&["INCRBYFLOAT", "f", "5.0e3"]).await, bulk("5000"));
    assert_eq!(c.cmd(&["INCRBYFLOAT", "f", "0x10"]).await, bulk("5016"));
    c.cmd(&["SET", "n", "10"]).await;
    assert_eq!(c.cmd(&["PEXPIRE", "n", "5000"]).await, int(1));
    assert_eq!(c.cmd(&["INCRBYFLOAT", "n", "1.5"]).await, bulk("11.5"));
    assert_eq!(c.cmd(&["PTTL", "n"]).await, int(5000));
    let not_float = err("ERR value is not a valid float");
    for bad in ["abc", " 1", "1 ", "", "nan", "1e99999"] {
        assert_eq!(
            c.cmd(&["INCRBYFLOAT", "n", bad]).await,
            not_float,
            "{bad:?}"
        );
    }
    c.cmd(&["SET", "s", "hello"]).await;
    assert_eq!(c.cmd(&["INCRBYFLOAT", "s", "1"]).await, not_float);
    assert_eq!(
        c.cmd(&["INCRBYFLOAT", "n", "inf"]).await,
        err("ERR increment would produce NaN or Infinity")
    );
    assert_eq!(c.cmd(&["GET", "n"]).await, bulk("11.5"));
    // Past f64's range, as Redis on x86-64 goes.
    let big = c.cmd(&["INCRBYFLOAT", "big", "1e400"]).await;
    assert!(big.starts_with("$401\r\n"), "{big}");
    assert_eq!(c.cmd(&["INCRBYFLOAT", "big", "-1e400"]).await, bulk("0"));
    c.cmd(&["RPUSH", "l", "x"]).await;
    assert_eq!(c.cmd(&["INCRBYFLOAT", "l", "1"]).await, WRONGTYPE);
    h.shutdown().await;
}

#[tokio::test]
async fn the_new_string_commands_run_in_scripts_and_transactions() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    let script = "redis.call('append', KEYS[1], 'ab'); redis.call('setrange', KEYS[1], 0, 'x'); \
                  return {redis.call('strlen', KEYS[1]), redis.call('getrange', KEYS[1], 0, -1), \
                  redis.call('incrbyfloat', KEYS[2], '0.25'), redis.call('msetnx', KEYS[3], 'v')}";
    assert_eq!(
        c.cmd(&["EVAL", script, "3", "s", "f", "m"]).await,
        "*4\r\n:2\r\n$2\r\nxb\r\n$4\r\n0.25\r\n:1\r\n"
    );
    assert_eq!(c.cmd(&["MULTI"]).await, OK);
    assert_eq!(c.cmd(&["GETSET", "s", "new"]).await, "+QUEUED\r\n");
    assert_eq!(c.cmd(&["STRLEN", "s"]).await, "+QUEUED\r\n");
    assert_eq!(c.cmd(&["EXEC"]).await, "*2\r\n$2\r\nxb\r\n:3\r\n");
    h.shutdown().await;
}
