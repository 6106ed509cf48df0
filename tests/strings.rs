//! String commands: SET and its options, SETNX/SETEX/PSETEX, GET, GETDEL, GETEX, MGET,
//! MSET, and the INCR family, with Redis's exact replies.

mod support;
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
