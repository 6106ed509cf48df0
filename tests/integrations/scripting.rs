//! Scripting (issue 3): EVAL/EVALSHA/SCRIPT through the `redis` crate, against Redis
//! 7's replies (checked side by side with redis-server 7.0.15 while writing these).

use crate::support;

use redis::aio::MultiplexedConnection;
use redis::Value;
use std::time::Duration;
use support::{conn, conn_resp3, error_text, query, start, start_with, unsha, TestServer};

/// A node with `Config::for_tests()` and a RESP2 connection to it.
async fn start_default() -> (TestServer, MultiplexedConnection) {
    let server = start().await;
    let con = conn(&server).await;
    (server, con)
}

/// Error text as Redis sends it (code and message).
fn text(e: redis::RedisError) -> String {
    error_text(&e)
}

async fn cmd(con: &mut MultiplexedConnection, args: &[&str]) -> Result<Value, String> {
    query(con, args).await.map_err(text)
}

async fn eval(
    con: &mut MultiplexedConnection,
    script: &str,
    keys: &[&str],
    argv: &[&str],
) -> Result<Value, String> {
    let mut c = redis::cmd("EVAL");
    c.arg(script).arg(keys.len());
    for k in keys {
        c.arg(*k);
    }
    for a in argv {
        c.arg(*a);
    }
    c.query_async::<Value>(con).await.map_err(text)
}

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

fn sha1(s: &str) -> String {
    sha1_smol::Sha1::from(s).digest().to_string()
}

async fn eval_err(con: &mut MultiplexedConnection, script: &str) -> String {
    unsha(
        &eval(con, script, &[], &[])
            .await
            .expect_err("script errors"),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn lua_values_convert_to_replies_as_redis() {
    let (_s, mut con) = start_default().await;
    let cases: Vec<(&str, Value)> = vec![
        ("return 3.99", Value::Int(3)),
        ("return -3.99", Value::Int(-3)),
        ("return 1e20", Value::Int(i64::MIN)),
        ("return 0/0", Value::Int(i64::MIN)),
        ("return true", Value::Int(1)),
        ("return false", Value::Nil),
        ("return nil", Value::Nil),
        ("return 'x'", bulk("x")),
        (
            "return {1,2,nil,4}",
            Value::Array(vec![Value::Int(1), Value::Int(2)]),
        ),
        (
            "return {1,{2,'a'},false,3}",
            Value::Array(vec![
                Value::Int(1),
                Value::Array(vec![Value::Int(2), bulk("a")]),
                Value::Nil,
                Value::Int(3),
            ]),
        ),
        ("return {ok='fine'}", Value::SimpleString("fine".into())),
        ("return {ok=1}", Value::Array(vec![])),
        (
            "return redis.status_reply('FOO')",
            Value::SimpleString("FOO".into()),
        ),
        ("return {}", Value::Array(vec![])),
    ];
    for (script, want) in cases {
        assert_eq!(eval(&mut con, script, &[], &[]).await, Ok(want), "{script}");
    }
    assert_eq!(
        eval(&mut con, "return {err='x'}", &[], &[]).await,
        Err("x".into())
    );
    assert_eq!(
        eval(&mut con, "return {err='My own error'}", &[], &[]).await,
        Err("My own error".into())
    );
    assert_eq!(
        eval(&mut con, "return redis.error_reply('MY err')", &[], &[]).await,
        Err("MY err".into())
    );
    assert_eq!(
        eval(&mut con, "return redis.error_reply('noerr')", &[], &[]).await,
        Err("ERR noerr".into())
    );
    assert_eq!(
        eval(&mut con, "return redis.error_reply('-X y')", &[], &[]).await,
        Err("X y".into())
    );
    assert_eq!(
        eval(&mut con, "return redis.status_reply()", &[], &[]).await,
        Err("ERR wrong number or type of arguments".into())
    );
    // An error inside an array stays an error element (the redis crate surfaces it).
    assert_eq!(
        eval(&mut con, "return {1, {err='y'}}", &[], &[]).await,
        Err("y".into())
    );
    assert_eq!(
        eval(&mut con, "local t = {} t[1] = t return t", &[], &[]).await,
        Err("ERR reached lua stack limit".into())
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn replies_convert_to_lua_values_as_redis() {
    let (_s, mut con) = start_default().await;
    let cases: Vec<(&str, Value)> = vec![
        ("return type(redis.call('get','nokey'))", bulk("boolean")),
        ("return redis.call('get','nokey') == false", Value::Int(1)),
        ("return redis.call('set','k','v')['ok']", bulk("OK")),
        ("return redis.call('set','k','v')", Value::Okay),
        ("return redis.call('get','k')", bulk("v")),
        ("return type(redis.call('exists','k'))", bulk("number")),
        ("return redis.call('exists','k') + 1", Value::Int(2)),
        (
            "return redis.call('mget','k','nokey')",
            Value::Array(vec![bulk("v"), Value::Nil]),
        ),
        ("return redis.call('PiNg')['ok']", bulk("PONG")),
        ("local c = 'GeT' return redis.call(c, 'k')", bulk("v")),
        (
            "if redis.call('SET', 'k', 'v2', 'NX') then return 1 else return 0 end",
            Value::Int(0),
        ),
        (
            "return redis.pcall('incrby', 'k', 'x')['err']",
            bulk("ERR value is not an integer or out of range"),
        ),
        (
            "local r = redis.pcall('nosuch') return r.err",
            bulk("ERR Unknown Redis command called from script"),
        ),
        (
            "local ok, e = pcall(redis.call, 'nosuch') return {tostring(ok), e}",
            Value::Array(vec![
                bulk("false"),
                bulk("ERR Unknown Redis command called from script"),
            ]),
        ),
        (
            "local ok, e = pcall(function() error({err='E1 x'}) end) return e",
            bulk("E1 x"),
        ),
    ];
    for (script, want) in cases {
        assert_eq!(eval(&mut con, script, &[], &[]).await, Ok(want), "{script}");
    }
    assert_eq!(
        eval(&mut con, "return redis.pcall('incr','k')", &[], &[]).await,
        Err("ERR value is not an integer or out of range".into())
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn number_arguments_become_redis_number_text() {
    let (_s, mut con) = start_default().await;
    let cases = [
        ("15000", "15000"),
        ("1.5", "1.5"),
        ("0.1", "0.10000000000000001"),
        ("1e20", "1e+20"),
        ("-0.0", "-0"),
        ("2^53", "9007199254740992"),
        // %.17g from 1e17 on, as redis-server 7.0.15 prints them (an integer fast
        // path printed "100000000000000000" here once).
        ("1e17", "1e+17"),
        ("1e17 - 16", "99999999999999984"),
        ("2^63", "9.2233720368547758e+18"),
    ];
    for (lua, want) in cases {
        let script = format!("redis.call('set', 'n', {lua}) return redis.call('get', 'n')");
        assert_eq!(
            eval(&mut con, &script, &[], &[]).await,
            Ok(bulk(want)),
            "{lua}"
        );
    }
    // A lock TTL computed in Lua arrives as integer text, so PX accepts it.
    let r = eval(
        &mut con,
        "return redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2] * 1)",
        &["lock"],
        &["tok", "15000"],
    )
    .await;
    assert_eq!(r, Ok(Value::Okay));
    for bad in ["true", "nil", "{}"] {
        let e = eval_err(&mut con, &format!("return redis.call('get', {bad})")).await;
        assert_eq!(
            e,
            "ERR Lua redis lib command arguments must be strings or integers script: SHA, on @user_script:1."
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn errors_have_redis_7_formats() {
    let (_s, mut con) = start_default().await;
    let cases = [
        (
            "return +",
            "ERR Error compiling script (new function): user_script:1: unexpected symbol near '+'",
        ),
        (
            "return x",
            "ERR user_script:1: Script attempted to access nonexistent global variable 'x' script: SHA, on @user_script:1.",
        ),
        (
            "x = 1",
            "ERR user_script:1: Attempt to modify a readonly table script: SHA, on @user_script:1.",
        ),
        (
            "\nlocal a = 1\nreturn y",
            "ERR user_script:3: Script attempted to access nonexistent global variable 'y' script: SHA, on @user_script:3.",
        ),
        ("error('boom')", "ERR user_script:1: boom script: SHA, on @user_script:1."),
        ("error('x', 0)", "ERR x script: SHA, on @user_script:1."),
        ("error()", "ERR nil script: SHA, on @user_script:1."),
        ("error({err='XX boom'})", "XX boom script: SHA, on @user_script:1."),
        (
            "return redis.call('nosuch')",
            "ERR Unknown Redis command called from script script: SHA, on @user_script:1.",
        ),
        (
            "return redis.call('get')",
            "ERR Wrong number of args calling Redis command from script script: SHA, on @user_script:1.",
        ),
        (
            "return redis.call()",
            "ERR Please specify at least one argument for this redis lib call script: SHA, on @user_script:1.",
        ),
        (
            "return redis.call('eval', 'return 1', 0)",
            "ERR This Redis command is not allowed from script script: SHA, on @user_script:1.",
        ),
        (
            "redis.call('set','s','foo')\nredis.call('incr','s')",
            "ERR value is not an integer or out of range script: SHA, on @user_script:2.",
        ),
        (
            "return redis.sha1hex()",
            "ERR wrong number of arguments script: SHA, on @user_script:1.",
        ),
        (
            "return redis.setresp(4)",
            "ERR RESP version must be 2 or 3. script: SHA, on @user_script:1.",
        ),
        (
            "return redis.log()",
            "ERR redis.log() requires two arguments or more. script: SHA, on @user_script:1.",
        ),
        // A container's subcommand decides (Redis 7.0's flags): CLIENT ID, CONFIG GET
        // and CLUSTER RESET may not run in a script; CLIENT HELP may (below).
        (
            "return redis.call('client', 'id')",
            "ERR This Redis command is not allowed from script script: SHA, on @user_script:1.",
        ),
        (
            "return redis.call('config', 'get', 'maxmemory')",
            "ERR This Redis command is not allowed from script script: SHA, on @user_script:1.",
        ),
        (
            "return redis.call('cluster', 'reset')",
            "ERR This Redis command is not allowed from script script: SHA, on @user_script:1.",
        ),
        (
            "return redis.acl_check_cmd('nosuch')",
            "ERR Invalid command passed to redis.acl_check_cmd() script: SHA, on @user_script:1.",
        ),
        (
            "return redis.acl_check_cmd()",
            "ERR Please specify at least one argument for this redis lib call script: SHA, on @user_script:1.",
        ),
        (
            "return redis.acl_check_cmd('set', 'a', {})",
            "ERR Lua redis lib command arguments must be strings or integers script: SHA, on @user_script:1.",
        ),
    ];
    for (script, want) in cases {
        assert_eq!(eval_err(&mut con, script).await, want, "{script}");
    }
    // The sha in the error is the script's.
    let e = eval(&mut con, "return x", &[], &[]).await.unwrap_err();
    assert!(e.contains(&sha1("return x")), "{e}");
    // A client-side pcall sees the message without the ERR decoration.
    assert_eq!(
        eval(
            &mut con,
            "local ok, e = pcall(function() return x end) return e",
            &[],
            &[]
        )
        .await,
        Ok(bulk(
            "user_script:1: Script attempted to access nonexistent global variable 'x'"
        ))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn numkeys_is_checked_like_redis() {
    let (_s, mut con) = start_default().await;
    let c = &mut con;
    assert_eq!(
        cmd(c, &["EVAL", "return 1", "-1"]).await,
        Err("ERR Number of keys can't be negative".into())
    );
    assert_eq!(
        cmd(c, &["EVAL", "return 1", "2", "a"]).await,
        Err("ERR Number of keys can't be greater than number of args".into())
    );
    assert_eq!(
        cmd(c, &["EVAL", "return 1", "x"]).await,
        Err("ERR value is not an integer or out of range".into())
    );
    assert_eq!(
        cmd(c, &["EVAL", "return 1"]).await,
        Err("ERR wrong number of arguments for 'eval' command".into())
    );
    assert_eq!(
        cmd(
            c,
            &[
                "EVAL",
                "return {KEYS[1], KEYS[2], ARGV[1], #KEYS, #ARGV}",
                "2",
                "a",
                "b",
                "c"
            ]
        )
        .await,
        Ok(Value::Array(vec![
            bulk("a"),
            bulk("b"),
            bulk("c"),
            Value::Int(2),
            Value::Int(1)
        ]))
    );
    // A short sha is NOSCRIPT before numkeys is read, as in Redis.
    assert_eq!(
        cmd(c, &["EVALSHA", "nosuch", "abc"]).await,
        Err("NOSCRIPT No matching script. Please use EVAL.".into())
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn evalsha_noscript_then_load_then_evalsha() {
    let (_s, mut con) = start_default().await;
    let c = &mut con;
    let body = "return ARGV[1]";
    let sha = sha1(body);
    assert_eq!(
        cmd(c, &["EVALSHA", &sha, "0", "hi"]).await,
        Err("NOSCRIPT No matching script. Please use EVAL.".into())
    );
    assert_eq!(
        cmd(c, &["SCRIPT", "EXISTS", &sha, "nope"]).await,
        Ok(Value::Array(vec![Value::Int(0), Value::Int(0)]))
    );
    assert_eq!(cmd(c, &["SCRIPT", "LOAD", body]).await, Ok(bulk(&sha)));
    assert_eq!(cmd(c, &["EVALSHA", &sha, "0", "hi"]).await, Ok(bulk("hi")));
    assert_eq!(
        cmd(c, &["EVALSHA", &sha.to_uppercase(), "0", "hi"]).await,
        Ok(bulk("hi"))
    );
    assert_eq!(
        cmd(c, &["EVALSHA_RO", &sha, "0", "ro"]).await,
        Ok(bulk("ro"))
    );
    assert_eq!(
        cmd(c, &["SCRIPT", "EXISTS", &sha.to_uppercase()]).await,
        Ok(Value::Array(vec![Value::Int(1)]))
    );
    // EVAL caches too.
    let other = "return 2";
    assert_eq!(cmd(c, &["EVAL", other, "0"]).await, Ok(Value::Int(2)));
    assert_eq!(
        cmd(c, &["EVALSHA", &sha1(other), "0"]).await,
        Ok(Value::Int(2))
    );
    assert_eq!(cmd(c, &["SCRIPT", "FLUSH", "ASYNC"]).await, Ok(Value::Okay));
    assert_eq!(
        cmd(c, &["EVALSHA", &sha, "0", "hi"]).await,
        Err("NOSCRIPT No matching script. Please use EVAL.".into())
    );
    assert_eq!(
        cmd(c, &["SCRIPT", "FLUSH", "bad"]).await,
        Err("ERR SCRIPT FLUSH only support SYNC|ASYNC option".into())
    );
    assert_eq!(
        cmd(c, &["SCRIPT", "LOAD", "return +"]).await,
        Err(
            "ERR Error compiling script (new function): user_script:1: unexpected symbol near '+'"
                .into()
        )
    );
    assert_eq!(
        cmd(c, &["SCRIPT", "LOAD"]).await,
        Err("ERR wrong number of arguments for 'script|load' command".into())
    );
    assert_eq!(
        cmd(c, &["SCRIPT", "KILL"]).await,
        Err("NOTBUSY No scripts in execution right now.".into())
    );
    assert_eq!(
        cmd(c, &["SCRIPT", "FOO"]).await,
        Err("ERR unknown subcommand 'FOO'. Try SCRIPT HELP.".into())
    );
    let Ok(Value::Array(help)) = cmd(c, &["SCRIPT", "HELP"]).await else {
        panic!("help")
    };
    assert!(help.len() > 5);
}

#[tokio::test(flavor = "multi_thread")]
async fn sandbox_escapes_are_refused() {
    let (_s, mut con) = start_default().await;
    for name in [
        "os", "io", "debug", "require", "package", "loadfile", "dofile", "getfenv", "setfenv",
        "print", "newproxy", "module",
    ] {
        let e = eval_err(&mut con, &format!("return {name}")).await;
        assert_eq!(
            e,
            format!("ERR user_script:1: Script attempted to access nonexistent global variable '{name}' script: SHA, on @user_script:1."),
        );
    }
    for script in [
        "return os.execute('touch /tmp/pwned')",
        "return io.open('/etc/passwd')",
        "return debug.getinfo(1)",
        "return require('os')",
    ] {
        assert!(
            eval_err(&mut con, script)
                .await
                .contains("nonexistent global variable"),
            "{script}"
        );
    }
    // Bytecode is refused (loadstring returns nil, as Redis).
    assert_eq!(
        eval(
            &mut con,
            "return loadstring(string.dump(function() return 1 end))",
            &[],
            &[]
        )
        .await,
        Ok(Value::Nil)
    );
    assert_eq!(
        eval(
            &mut con,
            "return load(function() return nil end) ~= nil",
            &[],
            &[]
        )
        .await,
        Ok(Value::Int(1))
    );
    // Code loaded at run time is sandboxed too.
    assert!(eval_err(&mut con, "return loadstring('return os')()")
        .await
        .contains("nonexistent global variable 'os'"));
    assert!(eval_err(&mut con, "loadstring('y = 1')()")
        .await
        .contains("Attempt to modify a readonly table"));
    for script in [
        "redis.call = nil",
        "string.foo = 1",
        "cjson.encode = nil",
        "KEYS = {}",
    ] {
        assert!(
            eval_err(&mut con, script)
                .await
                .contains("Attempt to modify a readonly table"),
            "{script}"
        );
    }
    assert_eq!(
        eval_err(&mut con, "return rawset(_G, 'x', 1)").await,
        "ERR Attempt to modify a readonly table script: SHA, on @user_script:1."
    );
    assert_eq!(
        eval_err(&mut con, "setmetatable(_G, nil)").await,
        "ERR Attempt to modify a readonly table script: SHA, on @user_script:1."
    );
    // One script cannot change what the next one sees.
    let _ = eval(&mut con, "getmetatable('').__index = nil", &[], &[]).await;
    assert_eq!(
        eval(&mut con, "return ('ab'):upper()", &[], &[]).await,
        Ok(bulk("AB"))
    );
    assert_eq!(
        eval(&mut con, "return tostring(1)", &[], &[]).await,
        Ok(bulk("1"))
    );
    // Allowed libraries are there.
    assert_eq!(
        eval(&mut con, "return {select('#', 1, 2), table.concat({1,2}, ','), string.rep('x', 3), tonumber('0x10'), unpack({7})}", &[], &[]).await,
        Ok(Value::Array(vec![Value::Int(2), bulk("1,2"), bulk("xxx"), Value::Int(16), Value::Int(7)]))
    );
    assert_eq!(
        eval(&mut con, "return type(coroutine)", &[], &[]).await,
        Ok(bulk("table"))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_runaway_allocation_hits_the_memory_limit() {
    let (_s, mut con) = start_default().await;
    let e = eval_err(
        &mut con,
        "local t = {} for i = 1, 1e9 do t[i] = string.rep('x', 1048576) .. i end",
    )
    .await;
    assert!(e.contains("not enough memory"), "{e}");
    // The VM is still usable afterwards.
    assert_eq!(
        eval(&mut con, "return 1", &[], &[]).await,
        Ok(Value::Int(1))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn redis_library_functions() {
    let (_s, mut con) = start_default().await;
    assert_eq!(
        eval(&mut con, "return redis.sha1hex('')", &[], &[]).await,
        Ok(bulk("da39a3ee5e6b4b0d3255bfef95601890afd80709"))
    );
    assert_eq!(
        eval(&mut con, "redis.log(redis.LOG_WARNING, 'hello', 'from', 1) return redis.LOG_DEBUG + redis.LOG_VERBOSE + redis.LOG_NOTICE + redis.LOG_WARNING", &[], &[]).await,
        Ok(Value::Int(6))
    );
    assert_eq!(
        eval(&mut con, "return type(redis.REDIS_VERSION)", &[], &[]).await,
        Ok(bulk("string"))
    );
    assert_eq!(
        eval(&mut con, "return redis.replicate_commands()", &[], &[]).await,
        Ok(Value::Int(1))
    );
    // setresp(3): RESP3 null reads as nil; booleans return as booleans (1/0 in RESP2).
    assert_eq!(
        eval(
            &mut con,
            "redis.setresp(3) return type(redis.call('get', 'nokey'))",
            &[],
            &[]
        )
        .await,
        Ok(bulk("nil"))
    );
    assert_eq!(
        eval(&mut con, "redis.setresp(3) return false", &[], &[]).await,
        Ok(Value::Int(0))
    );
    assert_eq!(
        eval(&mut con, "redis.setresp(3) return true", &[], &[]).await,
        Ok(Value::Int(1))
    );
    assert_eq!(
        eval(&mut con, "redis.setresp(3) local t = redis.call('info', 'server') return t['verbatim_string']['format']", &[], &[]).await,
        Ok(bulk("txt"))
    );
    // RESP3 maps, sets and doubles as tables (redis-server 7.0.15's replies).
    for setup in [
        &["HSET", "h", "f", "v", "g", "w"][..],
        &["SADD", "s", "a", "b"],
        &["ZADD", "z", "1.5", "m"],
    ] {
        assert!(cmd(&mut con, setup).await.is_ok(), "{setup:?}");
    }
    for (script, want) in [
        (
            "redis.setresp(3) local m = redis.call('hgetall', 'h') return {m.map.f, m.map.g, type(m.map)}",
            Value::Array(vec![bulk("v"), bulk("w"), bulk("table")]),
        ),
        (
            "redis.setresp(3) local m = redis.call('smembers', 's') return {tostring(m.set.a), tostring(m.set.b), tostring(m.set.c)}",
            Value::Array(vec![bulk("true"), bulk("true"), bulk("nil")]),
        ),
        (
            "redis.setresp(3) return tostring(redis.call('zscore', 'z', 'm').double)",
            bulk("1.5"),
        ),
        ("return #redis.call('hgetall', 'h')", Value::Int(4)),
        ("return redis.call('zscore', 'z', 'm')", bulk("1.5")),
    ] {
        assert_eq!(eval(&mut con, script, &[], &[]).await, Ok(want), "{script}");
    }
    // Per run: the next script is back to RESP2 shapes.
    assert_eq!(
        eval(
            &mut con,
            "return type(redis.call('get', 'nokey'))",
            &[],
            &[]
        )
        .await,
        Ok(bulk("boolean"))
    );
    // math.random follows Lua 5.1's ranges.
    assert_eq!(
        eval(&mut con, "local ok = true for i = 1, 1000 do local r = math.random(3) ok = ok and r >= 1 and r <= 3 end return ok", &[], &[]).await,
        Ok(Value::Int(1))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn cjson_and_bit_libraries() {
    let (_s, mut con) = start_default().await;
    let cases: Vec<(&str, Value)> = vec![
        ("return cjson.encode({1,2,{a=1}})", bulk("[1,2,{\"a\":1}]")),
        ("return cjson.encode({a=1.5})", bulk("{\"a\":1.5}")),
        ("return cjson.encode({})", bulk("{}")),
        ("return cjson.encode({[1]=1,[3]=3})", bulk("[1,null,3]")),
        (
            "return cjson.encode('a\"\\\\/\\n')",
            bulk("\"a\\\"\\\\\\/\\n\""),
        ),
        ("return cjson.encode(1/3)", bulk("0.33333333333333")),
        ("return cjson.encode(100000000000000)", bulk("1e+14")),
        // cjson.null is a value, not nil: the array goes on past it (as Redis).
        (
            "return cjson.decode('[1,2,null]')",
            Value::Array(vec![Value::Int(1), Value::Int(2), Value::Nil]),
        ),
        (
            "return cjson.decode('{\"a\":[1,2,{\"b\":null}]}').a[3].b == cjson.null",
            Value::Int(1),
        ),
        ("return cjson.decode('\"\\\\u00e9\"')", bulk("é")),
        ("return cjson.decode(cjson.encode({k='v'})).k", bulk("v")),
        ("return bit.tohex(65535)", bulk("0000ffff")),
        ("return bit.tohex(-1, -4)", bulk("FFFF")),
        ("return bit.band(-1, 0xff)", Value::Int(255)),
        ("return bit.bor(1, 2, 4)", Value::Int(7)),
        ("return bit.bxor(5, 1)", Value::Int(4)),
        ("return bit.bnot(0)", Value::Int(-1)),
        ("return bit.lshift(1, 31)", Value::Int(-2147483648)),
        ("return bit.rshift(-1, 28)", Value::Int(15)),
        ("return bit.arshift(-256, 4)", Value::Int(-16)),
        ("return bit.tobit(2^32 + 5)", Value::Int(5)),
        ("return bit.rol(1, 33)", Value::Int(2)),
        ("return bit.bswap(1)", Value::Int(16777216)),
        ("return bit.bor(1.5)", Value::Int(2)),
    ];
    for (script, want) in cases {
        assert_eq!(eval(&mut con, script, &[], &[]).await, Ok(want), "{script}");
    }
    assert_eq!(
        eval_err(&mut con, "return cjson.decode('x')").await,
        "ERR user_script:1: Expected value but found invalid token at character 1 script: SHA, on @user_script:1."
    );
    assert_eq!(
        eval_err(&mut con, "return cjson.encode(function() end)").await,
        "ERR user_script:1: Cannot serialise function: type not supported script: SHA, on @user_script:1."
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn eval_ro_refuses_writes_and_select_stays_inside_the_script() {
    let (_s, mut con) = start_default().await;
    assert_eq!(
        unsha(&cmd(&mut con, &["EVAL_RO", "return redis.call('set','a','b')", "0"]).await.unwrap_err()),
        "ERR Write commands are not allowed from read-only scripts. script: SHA, on @user_script:1."
    );
    assert_eq!(
        cmd(&mut con, &["EVAL_RO", "return redis.call('get','a')", "0"]).await,
        Ok(Value::Nil)
    );
    assert_eq!(
        eval(
            &mut con,
            "redis.call('select', 3) redis.call('set', 'dbkey', 1) return redis.call('dbsize')",
            &[],
            &[]
        )
        .await,
        Ok(Value::Int(1))
    );
    assert_eq!(cmd(&mut con, &["DBSIZE"]).await, Ok(Value::Int(0)));
}

/// The lock clients' scripts, transcribed from their sources (redis-py's lock.py:
/// Lock.LUA_*_SCRIPT; node-redlock v5's index.ts: ACQUIRE/EXTEND/RELEASE_SCRIPT;
/// redsync v4's mutex.go: deleteScript/touchScript; python-redis-lock's `__init__.py`:
/// EXTEND_SCRIPT). Only scripts made of string/key commands are here: python-redis-lock's
/// unlock (lpush) and Redisson's (hash + publish) need the ecosystem commands.
mod fixtures {
    pub const REDIS_PY_RELEASE: &str = "
        local token = redis.call('get', KEYS[1])
        if not token or token ~= ARGV[1] then
            return 0
        end
        redis.call('del', KEYS[1])
        return 1
    ";
    pub const REDIS_PY_EXTEND: &str = "
        local token = redis.call('get', KEYS[1])
        if not token or token ~= ARGV[1] then
            return 0
        end
        local expiration = redis.call('pttl', KEYS[1])
        if not expiration then
            expiration = 0
        end
        if expiration < 0 then
            return 0
        end

        local newttl = ARGV[2]
        if ARGV[3] == \"0\" then
            newttl = ARGV[2] + expiration
        end
        redis.call('pexpire', KEYS[1], newttl)
        return 1
    ";
    pub const REDIS_PY_REACQUIRE: &str = "
        local token = redis.call('get', KEYS[1])
        if not token or token ~= ARGV[1] then
            return 0
        end
        redis.call('pexpire', KEYS[1], ARGV[2])
        return 1
    ";
    pub const REDLOCK_ACQUIRE: &str = r#"
  -- Return 0 if an entry already exists.
  for i, key in ipairs(KEYS) do
    if redis.call("exists", key) == 1 then
      return 0
    end
  end

  -- Create an entry for each provided key.
  for i, key in ipairs(KEYS) do
    redis.call("set", key, ARGV[1], "PX", ARGV[2])
  end

  -- Return the number of entries added.
  return #KEYS
"#;
    pub const REDLOCK_EXTEND: &str = r#"
  -- Return 0 if an entry exists with a *different* lock value.
  for i, key in ipairs(KEYS) do
    if redis.call("get", key) ~= ARGV[1] then
      return 0
    end
  end

  -- Update the entry for each provided key.
  for i, key in ipairs(KEYS) do
    redis.call("set", key, ARGV[1], "PX", ARGV[2])
  end

  -- Return the number of entries updated.
  return #KEYS
"#;
    pub const REDLOCK_RELEASE: &str = r#"
  local count = 0
  for i, key in ipairs(KEYS) do
    -- Only remove entries for *this* lock value.
    if redis.call("get", key) == ARGV[1] then
      redis.pcall("del", key)
      count = count + 1
    end
  end

  -- Return the number of entries removed.
  return count
"#;
    pub const REDSYNC_DELETE: &str = r#"
	local val = redis.call("GET", KEYS[1])
	if val == ARGV[1] then
		return redis.call("DEL", KEYS[1])
	elseif val == false then
		return -1
	else
		return 0
	end
"#;
    pub const REDSYNC_TOUCH: &str = r#"
	if redis.call("GET", KEYS[1]) == ARGV[1] then
		return redis.call("PEXPIRE", KEYS[1], ARGV[2])
	else
		return 0
	end
"#;
    pub const PYTHON_REDIS_LOCK_EXTEND: &str = r#"
    if redis.call("get", KEYS[1]) ~= ARGV[1] then
        return 1
    elseif redis.call("ttl", KEYS[1]) < 0 then
        return 2
    else
        redis.call("expire", KEYS[1], ARGV[2])
        return 0
    end
"#;
    /// The canonical compare-and-delete (Redis docs, rslock, pottery...).
    pub const COMPARE_AND_DELETE: &str =
        "if redis.call(\"get\",KEYS[1]) == ARGV[1] then\n    return redis.call(\"del\",KEYS[1])\nelse\n    return 0\nend";
}

async fn evalsha_or_load(
    con: &mut MultiplexedConnection,
    body: &str,
    keys: &[&str],
    argv: &[&str],
) -> Result<Value, String> {
    let sha = sha1(body);
    let mut args = vec!["EVALSHA", sha.as_str()];
    let n = keys.len().to_string();
    args.push(&n);
    args.extend_from_slice(keys);
    args.extend_from_slice(argv);
    match cmd(con, &args).await {
        Err(e) if e.starts_with("NOSCRIPT ") => {
            cmd(con, &["SCRIPT", "LOAD", body]).await?;
            cmd(con, &args).await
        }
        other => other,
    }
}

async fn pttl(con: &mut MultiplexedConnection, key: &str) -> Value {
    cmd(con, &["PTTL", key]).await.unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn redis_py_lock_scripts() {
    use fixtures::*;
    let (_s, mut con) = start_default().await;
    let c = &mut con;
    assert_eq!(
        cmd(c, &["SET", "lk", "tok", "NX", "PX", "10000"]).await,
        Ok(Value::Okay)
    );
    // extend, additive (ARGV[3] == "0"): 10000 + 5000
    assert_eq!(
        evalsha_or_load(c, REDIS_PY_EXTEND, &["lk"], &["tok", "5000", "0"]).await,
        Ok(Value::Int(1))
    );
    assert_eq!(pttl(c, "lk").await, Value::Int(15000));
    // extend, replace_ttl (ARGV[3] == "1")
    assert_eq!(
        evalsha_or_load(c, REDIS_PY_EXTEND, &["lk"], &["tok", "3000", "1"]).await,
        Ok(Value::Int(1))
    );
    assert_eq!(pttl(c, "lk").await, Value::Int(3000));
    assert_eq!(
        evalsha_or_load(c, REDIS_PY_EXTEND, &["lk"], &["other", "3000", "1"]).await,
        Ok(Value::Int(0))
    );
    assert_eq!(
        evalsha_or_load(c, REDIS_PY_REACQUIRE, &["lk"], &["tok", "9000"]).await,
        Ok(Value::Int(1))
    );
    assert_eq!(pttl(c, "lk").await, Value::Int(9000));
    assert_eq!(
        evalsha_or_load(c, REDIS_PY_RELEASE, &["lk"], &["other"]).await,
        Ok(Value::Int(0))
    );
    assert_eq!(
        evalsha_or_load(c, REDIS_PY_RELEASE, &["lk"], &["tok"]).await,
        Ok(Value::Int(1))
    );
    assert_eq!(
        evalsha_or_load(c, REDIS_PY_RELEASE, &["lk"], &["tok"]).await,
        Ok(Value::Int(0))
    );
    // A key without a TTL cannot be extended (pttl -1).
    cmd(c, &["SET", "lk", "tok"]).await.unwrap();
    assert_eq!(
        evalsha_or_load(c, REDIS_PY_EXTEND, &["lk"], &["tok", "3000", "0"]).await,
        Ok(Value::Int(0))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn node_redlock_scripts() {
    use fixtures::*;
    let (_s, mut con) = start_default().await;
    let c = &mut con;
    let keys = ["r:a", "r:b", "r:c"];
    assert_eq!(
        eval(c, REDLOCK_ACQUIRE, &keys, &["v1", "5000"]).await,
        Ok(Value::Int(3))
    );
    assert_eq!(pttl(c, "r:b").await, Value::Int(5000));
    assert_eq!(
        eval(c, REDLOCK_ACQUIRE, &["r:z", "r:a"], &["v2", "5000"]).await,
        Ok(Value::Int(0))
    );
    assert_eq!(cmd(c, &["EXISTS", "r:z"]).await, Ok(Value::Int(0)));
    assert_eq!(
        eval(c, REDLOCK_EXTEND, &keys, &["v1", "8000"]).await,
        Ok(Value::Int(3))
    );
    assert_eq!(pttl(c, "r:c").await, Value::Int(8000));
    assert_eq!(
        eval(c, REDLOCK_EXTEND, &keys, &["v2", "8000"]).await,
        Ok(Value::Int(0))
    );
    assert_eq!(
        eval(c, REDLOCK_RELEASE, &keys, &["v2"]).await,
        Ok(Value::Int(0))
    );
    assert_eq!(
        eval(c, REDLOCK_RELEASE, &keys, &["v1"]).await,
        Ok(Value::Int(3))
    );
    assert_eq!(
        cmd(c, &["EXISTS", "r:a", "r:b", "r:c"]).await,
        Ok(Value::Int(0))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn redsync_and_python_redis_lock_scripts() {
    use fixtures::*;
    let (_s, mut con) = start_default().await;
    let c = &mut con;
    cmd(c, &["SET", "rs", "tok", "NX", "PX", "8000"])
        .await
        .unwrap();
    assert_eq!(
        eval(c, REDSYNC_TOUCH, &["rs"], &["tok", "9000"]).await,
        Ok(Value::Int(1))
    );
    assert_eq!(pttl(c, "rs").await, Value::Int(9000));
    assert_eq!(
        eval(c, REDSYNC_TOUCH, &["rs"], &["nope", "9000"]).await,
        Ok(Value::Int(0))
    );
    assert_eq!(
        eval(c, REDSYNC_DELETE, &["rs"], &["nope"]).await,
        Ok(Value::Int(0))
    );
    assert_eq!(
        eval(c, REDSYNC_DELETE, &["rs"], &["tok"]).await,
        Ok(Value::Int(1))
    );
    assert_eq!(
        eval(c, REDSYNC_DELETE, &["rs"], &["tok"]).await,
        Ok(Value::Int(-1))
    );
    // redsync hard-codes the sha1 of its script bytes: EVALSHA of our hash of the same
    // bytes must find the script EVAL cached.
    assert_eq!(
        cmd(c, &["EVALSHA", &sha1(REDSYNC_DELETE), "1", "rs", "tok"]).await,
        Ok(Value::Int(-1))
    );

    cmd(c, &["SET", "prl", "tok", "NX", "EX", "10"])
        .await
        .unwrap();
    assert_eq!(
        eval(c, PYTHON_REDIS_LOCK_EXTEND, &["prl"], &["tok", "20"]).await,
        Ok(Value::Int(0))
    );
    assert_eq!(cmd(c, &["TTL", "prl"]).await, Ok(Value::Int(20)));
    assert_eq!(
        eval(c, PYTHON_REDIS_LOCK_EXTEND, &["prl"], &["nope", "20"]).await,
        Ok(Value::Int(1))
    );
    cmd(c, &["SET", "prl", "tok"]).await.unwrap();
    assert_eq!(
        eval(c, PYTHON_REDIS_LOCK_EXTEND, &["prl"], &["tok", "20"]).await,
        Ok(Value::Int(2))
    );

    cmd(c, &["SET", "cad", "tok"]).await.unwrap();
    assert_eq!(
        evalsha_or_load(c, COMPARE_AND_DELETE, &["cad"], &["x"]).await,
        Ok(Value::Int(0))
    );
    assert_eq!(
        evalsha_or_load(c, COMPARE_AND_DELETE, &["cad"], &["tok"]).await,
        Ok(Value::Int(1))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn scripts_are_atomic_against_other_commands() {
    let (server, mut con) = start_default().await;
    cmd(&mut con, &["SET", "counter", "0"]).await.unwrap();
    let rmw = "local v = tonumber(redis.call('get', KEYS[1])) redis.call('set', KEYS[1], v + 1) return v + 1";
    let clients = 16;
    let rounds = 150;
    let mut tasks = Vec::new();
    for i in 0..clients {
        let mut c = conn(&server).await;
        tasks.push(tokio::spawn(async move {
            for _ in 0..rounds {
                if i % 2 == 0 {
                    eval(&mut c, rmw, &["counter"], &[]).await.unwrap();
                } else {
                    cmd(&mut c, &["INCR", "counter"]).await.unwrap();
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(
        cmd(&mut con, &["GET", "counter"]).await,
        Ok(bulk(&(clients * rounds).to_string()))
    );
}

/// Starts `script` on its own connection and waits until the server runs it.
async fn start_long_script(
    server: &TestServer,
    script: &'static str,
) -> tokio::task::JoinHandle<Result<Value, String>> {
    let mut c = conn(server).await;
    let task = tokio::spawn(async move { eval(&mut c, script, &[], &[]).await });
    for _ in 0..2000 {
        if server.script_running() {
            return task;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("script did not start");
}

#[tokio::test(flavor = "multi_thread")]
async fn busy_script_gets_killed_by_script_kill() {
    let (server, mut con) = start_default().await;
    let script = "local i = 0 while true do i = i + 1 end";
    let looping = start_long_script(&server, script).await;
    // Past busy_script_time (5 s on the manual clock) others get BUSY.
    server.clock().advance(Duration::from_secs(6));
    let busy =
        "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
    assert_eq!(cmd(&mut con, &["GET", "x"]).await, Err(busy.into()));
    assert_eq!(cmd(&mut con, &["PING"]).await, Err(busy.into()));
    assert_eq!(
        cmd(&mut con, &["SCRIPT", "LOAD", "return 1"]).await,
        Err(busy.into())
    );
    assert_eq!(
        cmd(&mut con, &["EVAL", "return 1", "0"]).await,
        Err(busy.into())
    );
    // The handshake is answered, as in Redis (HELLO and AUTH are allow_busy): a client
    // connecting now gets BUSY on its first data command, not on connecting.
    assert!(cmd(&mut con, &["HELLO", "2"]).await.is_ok());
    assert_eq!(
        cmd(&mut con, &["AUTH", "default", "any"]).await,
        Ok(Value::Okay)
    );
    assert_eq!(cmd(&mut con, &["SCRIPT", "KILL"]).await, Ok(Value::Okay));
    let result = looping.await.unwrap();
    assert_eq!(
        result,
        Err(format!(
            "ERR Script killed by user with SCRIPT KILL... script: {}, on @user_script:1.",
            sha1(script)
        ))
    );
    assert_eq!(
        cmd(&mut con, &["PING"]).await,
        Ok(Value::SimpleString("PONG".into()))
    );
    assert_eq!(
        cmd(&mut con, &["SCRIPT", "KILL"]).await,
        Err("NOTBUSY No scripts in execution right now.".into())
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn script_kill_cannot_be_escaped_with_pcall() {
    let (server, mut con) = start_default().await;
    let script = "while true do pcall(function() while true do end end) end";
    let looping = start_long_script(&server, script).await;
    assert_eq!(cmd(&mut con, &["SCRIPT", "KILL"]).await, Ok(Value::Okay));
    let result = looping.await.unwrap().unwrap_err();
    assert!(
        result.starts_with("ERR Script killed by user with SCRIPT KILL..."),
        "{result}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_script_that_wrote_is_unkillable() {
    let (server, mut con) = start_default().await;
    // The script says when it has written (a publish is not a write): SCRIPT KILL is
    // refused only from then on, so waiting for "running" alone would race the write.
    let client = redis::Client::open(format!("redis://{}", server.addr())).unwrap();
    let mut wrote = client.get_async_pubsub().await.unwrap();
    wrote.subscribe("wrote").await.unwrap();
    let script =
        "redis.call('set', 'w', '1') redis.call('publish', 'wrote', '1') while true do end";
    let looping = start_long_script(&server, script).await;
    tokio::time::timeout(
        Duration::from_secs(10),
        futures_util::StreamExt::next(&mut wrote.on_message()),
    )
    .await
    .expect("the script wrote")
    .expect("a message");
    server.clock().advance(Duration::from_secs(6));
    assert_eq!(
        cmd(&mut con, &["SCRIPT", "KILL"]).await,
        Err("UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.".into())
    );
    assert!(cmd(&mut con, &["GET", "w"])
        .await
        .unwrap_err()
        .starts_with("BUSY "));
    // Shutting the server down stops it (the test's way of SHUTDOWN NOSAVE).
    server.shutdown().await;
    assert!(looping.await.unwrap().is_err());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_fence_inside_scripts() {
    let server = start_with(|c| c.restart_delay = Some(Duration::from_secs(31))).await;
    let mut con = conn(&server).await;
    let e = eval(
        &mut con,
        "return redis.call('set', KEYS[1], ARGV[1], 'PX', 1000)",
        &["f"],
        &["v"],
    )
    .await
    .unwrap_err();
    assert!(e.starts_with("TRYAGAIN "), "{e}");
    assert!(
        e.ends_with(&format!(
            "script: {}, on @user_script:1.",
            sha1("return redis.call('set', KEYS[1], ARGV[1], 'PX', 1000)")
        )),
        "{e}"
    );
    let r = eval(
        &mut con,
        "local r = redis.pcall('set', KEYS[1], ARGV[1], 'PX', 1000) return r.err",
        &["f"],
        &["v"],
    )
    .await
    .unwrap();
    let Value::BulkString(err) = r else {
        panic!("err text")
    };
    assert!(err.starts_with(b"TRYAGAIN "));
    // Releases keep working: the compare-and-delete script runs under the fence.
    assert_eq!(
        eval(&mut con, fixtures::COMPARE_AND_DELETE, &["f"], &["v"]).await,
        Ok(Value::Int(0))
    );
    server.clock().advance(Duration::from_secs(32));
    assert_eq!(
        eval(
            &mut con,
            "return redis.call('set', KEYS[1], ARGV[1], 'PX', 1000)",
            &["f"],
            &["v"]
        )
        .await,
        Ok(Value::Okay)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn resp3_callers_get_resp3_results() {
    let (server, _con) = start_default().await;
    let mut c3 = conn_resp3(&server).await;
    assert_eq!(
        eval(&mut c3, "return {map={a=1}}", &[], &[]).await,
        Ok(Value::Map(vec![(bulk("a"), Value::Int(1))]))
    );
    assert_eq!(
        eval(&mut c3, "return {double=1.5}", &[], &[]).await,
        Ok(Value::Double(1.5))
    );
    assert_eq!(
        eval(&mut c3, "return {set={a=true}}", &[], &[]).await,
        Ok(Value::Set(vec![bulk("a")]))
    );
    assert_eq!(
        eval(&mut c3, "redis.setresp(3) return true", &[], &[]).await,
        Ok(Value::Boolean(true))
    );
    assert_eq!(
        eval(&mut c3, "redis.setresp(3) return false", &[], &[]).await,
        Ok(Value::Boolean(false))
    );
    assert_eq!(
        eval(&mut c3, "return false", &[], &[]).await,
        Ok(Value::Nil)
    );
    // Inside the script replies keep RESP2 shapes whatever the caller speaks.
    assert_eq!(
        eval(&mut c3, "return type(redis.call('get', 'nokey'))", &[], &[]).await,
        Ok(bulk("boolean"))
    );
    // RESP2 callers get the RESP2 downgrade.
    let mut c2 = conn(&server).await;
    assert_eq!(
        eval(&mut c2, "return {map={a=1}}", &[], &[]).await,
        Ok(Value::Array(vec![bulk("a"), Value::Int(1)]))
    );
    assert_eq!(
        eval(&mut c2, "return {double=1.5}", &[], &[]).await,
        Ok(bulk("1.5"))
    );
}

/// KEYS and ARGV are fresh arrays in every run, whatever the last script did to them
/// (redlockd refills the last run's tables when that cannot be seen). Replies read
/// from redis-server 7.0.15.
#[tokio::test(flavor = "multi_thread")]
async fn keys_and_argv_are_fresh_in_every_run() {
    let (_server, mut con) = start_default().await;
    let c = &mut con;
    let fields = "KEYS.extra = 'y' table.insert(ARGV, 'z') return #ARGV";
    assert_eq!(eval(c, fields, &["a"], &["b"]).await, Ok(Value::Int(2)));
    assert_eq!(
        eval(
            c,
            "return {#KEYS, #ARGV, tostring(KEYS.extra), tostring(ARGV[2])}",
            &["k"],
            &[]
        )
        .await,
        Ok(Value::Array(vec![
            Value::Int(1),
            Value::Int(0),
            bulk("nil"),
            bulk("nil")
        ]))
    );
    let meta = "setmetatable(KEYS, {__index = function() return 'meta' end}) return KEYS[9]";
    assert_eq!(eval(c, meta, &[], &[]).await, Ok(bulk("meta")));
    assert_eq!(
        eval(c, "return tostring(KEYS[9])", &[], &[]).await,
        Ok(bulk("nil"))
    );
    for _ in 0..2 {
        assert_eq!(
            eval(c, "return KEYS", &["a", "b", "c"], &[]).await,
            Ok(Value::Array(vec![bulk("a"), bulk("b"), bulk("c")]))
        );
        assert_eq!(
            eval(c, "return KEYS", &["k"], &[]).await,
            Ok(Value::Array(vec![bulk("k")]))
        );
    }
    // A hole's `#` depends on the array part's size: Redis grows it from empty.
    for _ in 0..2 {
        assert_eq!(
            eval(c, "KEYS[2] = nil return #KEYS", &["a", "b", "c"], &[]).await,
            Ok(Value::Int(1))
        );
    }
    assert_eq!(
        eval(c, "return KEYS", &["x", "y", "z"], &[]).await,
        Ok(Value::Array(vec![bulk("x"), bulk("y"), bulk("z")]))
    );
    assert_eq!(
        eval(c, "KEYS[1] = 'changed' return ARGV", &["a"], &["v"]).await,
        Ok(Value::Array(vec![bulk("v")]))
    );
    assert_eq!(eval(c, "return KEYS[1]", &["a"], &[]).await, Ok(bulk("a")));
}

/// CLIENT LIST shows a script's caller as running EVAL (or FCALL), as Redis does, not
/// the last command the script ran.
#[tokio::test(flavor = "multi_thread")]
async fn a_scripts_caller_shows_the_script_command_as_its_last() {
    let (server, mut a) = start_default().await;
    let mut b = conn(&server).await;
    let Ok(Value::Int(id)) = cmd(&mut a, &["CLIENT", "ID"]).await else {
        panic!("client id")
    };
    let id = id.to_string();
    let last_of_a = |list: Value| match list {
        Value::BulkString(b) => String::from_utf8(b).unwrap(),
        Value::VerbatimString { text, .. } => text,
        other => panic!("{other:?}"),
    };
    eval(
        &mut a,
        "redis.call('set', KEYS[1], 'v') return redis.call('get', KEYS[1])",
        &["k"],
        &[],
    )
    .await
    .unwrap();
    let list = last_of_a(cmd(&mut b, &["CLIENT", "LIST", "ID", &id]).await.unwrap());
    assert!(list.contains(" cmd=eval "), "{list}");
    let lib = "#!lua name=lastcmd\nredis.register_function('f', function(keys) return redis.call('del', keys[1]) end)";
    cmd(&mut a, &["FUNCTION", "LOAD", lib]).await.unwrap();
    assert_eq!(
        cmd(&mut a, &["FCALL", "f", "1", "k"]).await,
        Ok(Value::Int(1))
    );
    let list = last_of_a(cmd(&mut b, &["CLIENT", "LIST", "ID", &id]).await.unwrap());
    assert!(list.contains(" cmd=fcall "), "{list}");
}

#[tokio::test]
async fn acl_check_cmd_answers_for_the_callers_user_and_help_runs_in_scripts() {
    let server = start().await;
    let mut admin = support::Raw::to(&server).await;
    admin
        .check(
            &[
                "ACL", "SETUSER", "reader", "on", "nopass", "~*", "+@all", "-set",
            ],
            "+OK\r\n",
        )
        .await;
    let mut reader = support::Raw::to(&server).await;
    reader.check(&["AUTH", "reader", "x"], "+OK\r\n").await;
    let check = "return {redis.acl_check_cmd('get', 'k'), redis.acl_check_cmd('set', 'k', 1)}";
    // Lua's true is 1, false is nil (RESP2).
    admin
        .check(&["EVAL", check, "0"], "*2\r\n:1\r\n:1\r\n")
        .await;
    reader
        .check(&["EVAL", check, "0"], "*2\r\n:1\r\n$-1\r\n")
        .await;
    // Nothing was refused: no ACL LOG entry.
    admin.check(&["ACL", "LOG"], "*0\r\n").await;
    // A container's harmless subcommand runs in a script.
    let help = admin
        .cmd(&["EVAL", "return redis.call('client', 'help')[1]", "0"])
        .await;
    assert!(help.starts_with("+CLIENT <subcommand>"), "{help}");
    server.shutdown().await;
}
