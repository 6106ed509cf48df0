//! Redis 7 functions (FUNCTION LOAD/LIST/DELETE/FLUSH/DUMP/RESTORE/STATS/KILL, FCALL,
//! FCALL_RO) and EVAL shebang flags. Expected replies were read from redis-server
//! 7.0.15 running the same commands.

use crate::support;

use support::{bulk, dump_payload, err, int, Raw, OK};

const LIB: &str = "#!lua name=mylib
redis.register_function('set_it', function(keys, args) return redis.call('set', keys[1], args[1]) end)
redis.register_function{function_name='get_it', callback=function(keys) return redis.call('get', keys[1]) end,
  flags={'no-writes'}, description='reads a key'}
redis.register_function('fails', function() local x = nil; return x.y end)";

async fn load(con: &mut Raw, code: &str) -> String {
    con.cmd(&["FUNCTION", "LOAD", code]).await
}

#[tokio::test(flavor = "multi_thread")]
async fn functions_load_run_and_refuse_writes_from_fcall_ro() {
    let server = support::start().await;
    let mut con = Raw::to(&server).await;
    assert_eq!(load(&mut con, LIB).await, bulk("mylib"));
    assert_eq!(con.cmd(&["FCALL", "set_it", "1", "k", "v"]).await, OK);
    assert_eq!(con.cmd(&["FCALL_RO", "get_it", "1", "k"]).await, bulk("v"));
    assert_eq!(
        con.cmd(&["FCALL_RO", "set_it", "1", "k", "v"]).await,
        err("ERR Can not execute a script with write flag using *_ro command.")
    );
    assert_eq!(
        con.cmd(&["FCALL", "fails", "0"]).await,
        err("ERR user_function:5: attempt to index local 'x' (a nil value) script: fails, on @user_function:5.")
    );
    assert_eq!(
        con.cmd(&["FCALL", "nope", "0"]).await,
        err("ERR Function not found")
    );
    assert_eq!(
        con.cmd(&["FCALL", "set_it", "x"]).await,
        err("ERR Bad number of keys provided")
    );
    assert_eq!(
        con.cmd(&["FCALL", "set_it", "3", "a"]).await,
        err("ERR Number of keys can't be greater than number of args")
    );
    assert_eq!(
        con.cmd(&["FCALL", "set_it", "-1"]).await,
        err("ERR Number of keys can't be negative")
    );
    // Loading again needs REPLACE; a function name belongs to one library.
    assert_eq!(
        load(&mut con, LIB).await,
        err("ERR Library 'mylib' already exists")
    );
    assert_eq!(
        con.cmd(&["FUNCTION", "LOAD", "REPLACE", LIB]).await,
        bulk("mylib")
    );
    assert_eq!(
        load(
            &mut con,
            "#!lua name=other\nredis.register_function('get_it', function() end)"
        )
        .await,
        err("ERR Function get_it already exists")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn library_load_errors_are_redis_errors() {
    let server = support::start().await;
    let mut con = Raw::to(&server).await;
    let cases = [
        ("return 1", "ERR Missing library metadata"),
        ("#!lua name=a", "ERR Invalid library metadata"),
        ("#!lua\nx", "ERR Library name was not given"),
        ("#!lua name=a foo=b\nx", "ERR Invalid metadata value given: foo=b"),
        ("#!lua name=a-b\nx", "ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long"),
        ("#!js name=a\nx", "ERR Engine 'js' not found"),
        ("#!lua name=a\nreturn 1", "ERR No functions registered"),
        ("#!lua name=a\nlocal a = 1 +", "ERR Error compiling function: user_function:2: unexpected symbol near '<eof>'"),
        ("#!lua name=a\nlocal x = string.len('a')", "ERR Error registering functions: ERR user_function:2: Script attempted to access nonexistent global variable 'string'"),
        ("#!lua name=a\nredis.call('ping')", "ERR Error registering functions: ERR user_function:2: Script attempted to access nonexistent global variable 'call'"),
        ("#!lua name=a\nredis.register_function('x')", "ERR Error registering functions: ERR calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments)."),
        ("#!lua name=a\nredis.register_function('x', 1)", "ERR Error registering functions: ERR second argument to redis.register_function must be a function"),
        ("#!lua name=a\nredis.register_function{function_name='x', callback=function() end, flags={'bad'}}", "ERR Error registering functions: ERR unknown flag given"),
        ("#!lua name=a\nredis.register_function{callback=function() end}", "ERR Error registering functions: ERR redis.register_function must get a function name argument"),
        ("#!lua name=a\nredis.register_function('x', function() end) redis.register_function('x', function() end)", "ERR Error registering functions: ERR Function already exists in the library"),
        ("#!lua name=a\nredis.register_function()", "ERR Error registering functions: ERR wrong number of arguments to redis.register_function"),
    ];
    for (code, want) in cases {
        assert_eq!(load(&mut con, code).await, err(want), "{code}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn list_delete_flush_stats_and_script_flush_keeps_functions() {
    let server = support::start().await;
    let mut con = Raw::to(&server).await;
    assert_eq!(load(&mut con, LIB).await, bulk("mylib"));
    let listed = con.cmd(&["FUNCTION", "LIST", "LIBRARYNAME", "MY*"]).await;
    assert_eq!(
        listed,
        "*1\r\n*6\r\n$12\r\nlibrary_name\r\n$5\r\nmylib\r\n$6\r\nengine\r\n$3\r\nLUA\r\n$9\r\nfunctions\r\n*3\r\n\
         *6\r\n$4\r\nname\r\n$5\r\nfails\r\n$11\r\ndescription\r\n$-1\r\n$5\r\nflags\r\n*0\r\n\
         *6\r\n$4\r\nname\r\n$6\r\nget_it\r\n$11\r\ndescription\r\n$11\r\nreads a key\r\n$5\r\nflags\r\n*1\r\n+no-writes\r\n\
         *6\r\n$4\r\nname\r\n$6\r\nset_it\r\n$11\r\ndescription\r\n$-1\r\n$5\r\nflags\r\n*0\r\n"
    );
    assert!(con
        .cmd(&["FUNCTION", "LIST", "WITHCODE"])
        .await
        .contains("library_code"));
    assert_eq!(
        con.cmd(&["FUNCTION", "LIST", "LIBRARYNAME", "x*"]).await,
        "*0\r\n"
    );
    assert_eq!(
        con.cmd(&["FUNCTION", "STATS"]).await,
        "*4\r\n$14\r\nrunning_script\r\n$-1\r\n$7\r\nengines\r\n*2\r\n$3\r\nLUA\r\n*4\r\n\
         $15\r\nlibraries_count\r\n:1\r\n$15\r\nfunctions_count\r\n:3\r\n"
    );
    // SCRIPT FLUSH resets the EVAL VM only.
    assert_eq!(con.cmd(&["SCRIPT", "FLUSH"]).await, OK);
    assert_eq!(con.cmd(&["FCALL", "set_it", "1", "k", "v"]).await, OK);
    assert_eq!(
        con.cmd(&["FUNCTION", "DELETE", "nolib"]).await,
        err("ERR Library not found")
    );
    assert_eq!(con.cmd(&["FUNCTION", "DELETE", "mylib"]).await, OK);
    assert_eq!(
        con.cmd(&["FCALL", "set_it", "1", "k", "v"]).await,
        err("ERR Function not found")
    );
    assert_eq!(load(&mut con, LIB).await, bulk("mylib"));
    assert_eq!(con.cmd(&["FUNCTION", "FLUSH"]).await, OK);
    assert_eq!(con.cmd(&["FUNCTION", "LIST"]).await, "*0\r\n");
    assert_eq!(
        con.cmd(&["FUNCTION", "FLUSH", "LATER"]).await,
        err("ERR FUNCTION FLUSH only supports SYNC|ASYNC option")
    );
    assert_eq!(
        con.cmd(&["FUNCTION", "KILL"]).await,
        err("NOTBUSY No scripts in execution right now.")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn dump_and_restore_round_trip_with_policies() {
    let server = support::start().await;
    let mut con = Raw::to(&server).await;
    assert_eq!(load(&mut con, LIB).await, bulk("mylib"));
    let dump = con.cmd_bytes(&[b"FUNCTION", b"DUMP"]).await;
    // $<len>\r\n<payload>\r\n
    let start = dump.iter().position(|&c| c == b'\n').unwrap() + 1;
    let payload = dump[start..dump.len() - 2].to_vec();
    assert_eq!(payload[0], 245, "RDB opcode FUNCTION2");
    assert_eq!(
        String::from_utf8_lossy(&con.cmd_bytes(&[b"FUNCTION", b"RESTORE", &payload]).await),
        err("ERR Library mylib already exists")
    );
    assert_eq!(con.cmd(&["FUNCTION", "FLUSH"]).await, OK);
    assert_eq!(
        String::from_utf8_lossy(&con.cmd_bytes(&[b"FUNCTION", b"RESTORE", &payload]).await),
        OK
    );
    assert_eq!(con.cmd(&["FCALL", "set_it", "1", "k", "v"]).await, OK);
    assert_eq!(
        String::from_utf8_lossy(
            &con.cmd_bytes(&[b"FUNCTION", b"RESTORE", &payload, b"REPLACE"])
                .await
        ),
        OK
    );
    assert_eq!(
        String::from_utf8_lossy(
            &con.cmd_bytes(&[b"FUNCTION", b"RESTORE", &payload, b"FLUSH"])
                .await
        ),
        OK
    );
    assert_eq!(
        String::from_utf8_lossy(
            &con.cmd_bytes(&[b"FUNCTION", b"RESTORE", &payload, b"KEEP"])
                .await
        ),
        err("ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.")
    );
    let mut bad = payload.clone();
    bad[3] ^= 1;
    assert_eq!(
        String::from_utf8_lossy(&con.cmd_bytes(&[b"FUNCTION", b"RESTORE", &bad]).await),
        err("ERR DUMP payload version or checksum are wrong")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restart_forgets_functions_as_it_forgets_keys() {
    let server = redlockd::testing::TestServer::start().await;
    let mut con = Raw::connect(server.addr()).await;
    assert_eq!(load(&mut con, LIB).await, bulk("mylib"));
    server.crash_restart();
    let mut con = Raw::connect(server.addr()).await;
    assert_eq!(
        con.cmd(&["FCALL", "get_it", "1", "k"]).await,
        err("ERR Function not found")
    );
    assert_eq!(con.cmd(&["FUNCTION", "LIST"]).await, "*0\r\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn eval_shebang_flags_are_checked_as_redis_checks_them() {
    let server = support::start().await;
    let mut con = Raw::to(&server).await;
    let eval = |script: &'static str| ["EVAL", script, "0"];
    assert_eq!(
        con.cmd(&eval("#!lua flags=no-writes\nreturn redis.call('set','x','y')")).await,
        err("ERR Write commands are not allowed from read-only scripts. script: 43f5fe910d84b5ee2ef496f122831920e4095915, on @user_script:2.")
    );
    assert_eq!(
        con.cmd(&["EVAL_RO", "#!lua\nreturn 1", "0"]).await,
        err("ERR Can not execute a script with write flag using *_ro command.")
    );
    assert_eq!(
        con.cmd(&["EVAL_RO", "#!lua flags=no-writes\nreturn 1", "0"])
            .await,
        int(1)
    );
    assert_eq!(
        con.cmd(&eval("#!lua flags=bad\nreturn 1")).await,
        err("ERR Unexpected flag in script shebang: bad")
    );
    assert_eq!(
        con.cmd(&eval("#!lua name=x\nreturn 1")).await,
        err("ERR Unknown lua shebang option: name=x")
    );
    assert_eq!(
        con.cmd(&eval("#!python\nreturn 1")).await,
        err("ERR Unexpected engine in script shebang: #!python")
    );
    assert_eq!(
        con.cmd(&eval("#!lua")).await,
        err("ERR Invalid script shebang")
    );
    assert_eq!(
        con.cmd(&["SCRIPT", "LOAD", "#!lua flags=bad\nreturn 1"])
            .await,
        err("ERR Unexpected flag in script shebang: bad")
    );
    // EVALSHA keeps the flags of the script it names.
    let sha = con
        .cmd(&["SCRIPT", "LOAD", "#!lua\nreturn redis.call('set','y','1')"])
        .await;
    let sha = sha.trim_end().rsplit('\n').next().unwrap().to_string();
    assert_eq!(
        con.cmd(&["EVALSHA_RO", &sha, "0"]).await,
        err("ERR Can not execute a script with write flag using *_ro command.")
    );
    assert_eq!(con.cmd(&["EVALSHA", &sha, "0"]).await, OK);
    // Error line numbers count the shebang line, as in Redis.
    assert_eq!(
        con.cmd(&eval("#!lua\nlocal x = nil\nreturn x.y")).await,
        err("ERR user_script:3: attempt to index local 'x' (a nil value) script: 879237e7c8cc98c2fa16cab8e6417966b2c40ad7, on @user_script:3.")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_library_that_loops_at_load_times_out_and_names_are_case_insensitive() {
    let server = support::start().await;
    let mut con = Raw::to(&server).await;
    assert_eq!(
        load(
            &mut con,
            "#!lua name=lib\nlocal a = 1\nwhile 1 do a = a + 1 end"
        )
        .await,
        err("ERR Error registering functions: ERR FUNCTION LOAD timeout")
    );
    assert_eq!(
        load(&mut con, "#!lua name=lib\na = 1").await,
        err("ERR Error registering functions: ERR user_function:2: Attempt to modify a readonly table")
    );
    assert_eq!(load(&mut con, LIB).await, bulk("mylib"));
    assert_eq!(con.cmd(&["FCALL", "SET_IT", "1", "k", "v"]).await, OK);
    assert_eq!(
        load(
            &mut con,
            "#!lua name=other\nredis.register_function('GET_IT', function() end)"
        )
        .await,
        err("ERR Function GET_IT already exists")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_busy_threshold_can_be_set_at_run_time() {
    let server = support::start().await;
    let mut con = Raw::to(&server).await;
    assert_eq!(
        con.cmd(&["CONFIG", "SET", "busy-reply-threshold", "10"])
            .await,
        OK
    );
    assert_eq!(
        con.cmd(&["CONFIG", "GET", "lua-time-limit"]).await,
        "*2\r\n$14\r\nlua-time-limit\r\n$2\r\n10\r\n"
    );
}

/// A function gets its keys and arguments as parameters; the KEYS and ARGV globals of
/// EVAL do not exist in the functions' VM (Redis 7.0.15's reply, byte for byte), even
/// after an EVAL set them in the EVAL VM.
#[tokio::test(flavor = "multi_thread")]
async fn functions_have_no_keys_or_argv_globals() {
    let server = support::start().await;
    let mut con = Raw::to(&server).await;
    let lib = "#!lua name=kk
redis.register_function('keys_type', function(keys, args) return type(KEYS) end)
redis.register_function('params', function(keys, args) return {keys[1], args[1]} end)";
    assert_eq!(load(&mut con, lib).await, bulk("kk"));
    assert_eq!(
        con.cmd(&["EVAL", "return type(KEYS)", "1", "k"]).await,
        bulk("table")
    );
    assert_eq!(
        con.cmd(&["FCALL", "keys_type", "1", "k"]).await,
        err("ERR user_function:2: Script attempted to access nonexistent global variable 'KEYS' script: keys_type, on @user_function:2.")
    );
    assert_eq!(
        con.cmd(&["FCALL", "params", "1", "k", "a"]).await,
        "*2\r\n$1\r\nk\r\n$1\r\na\r\n"
    );
}

/// `payload` with its footer's RDB version set to `version` and the CRC-64 redone.
fn refooter(payload: &[u8], version: u16) -> Vec<u8> {
    dump_payload(&payload[..payload.len() - 10], version)
}

#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn function_dump_writes_and_reads_rdb_version_10_as_redis_7_0() {
    let redis = support::redis_server::RedisNode::start(None);
    let server = support::start().await;
    let mut r = Raw::to(&redis).await;
    let mut o = Raw::to(&server).await;
    let dump = async |c: &mut Raw| {
        let frame = c.cmd_bytes(&[b"FUNCTION", b"DUMP"]).await;
        let nl = frame.iter().position(|&b| b == b'\n').unwrap();
        frame[nl + 1..frame.len() - 2].to_vec()
    };
    let mut payloads = Vec::new();
    for c in [&mut r, &mut o] {
        assert_eq!(load(c, LIB).await, bulk("mylib"));
        let p = dump(c).await;
        // Redis 7.0.15 writes RDB version 10 in every payload.
        assert_eq!(p[p.len() - 10..p.len() - 8], [10, 0]);
        payloads.push(p);
    }
    // Each server's payload restores on the other; one of a newer RDB version (7.2's
    // 11) is refused by both alike, and an older one (9) read by both.
    let wrong = err("ERR DUMP payload version or checksum are wrong");
    for (c, p) in [(&mut r, &payloads[1]), (&mut o, &payloads[0])] {
        let restore = async |c: &mut Raw, p: &[u8]| {
            String::from_utf8_lossy(&c.cmd_bytes(&[b"FUNCTION", b"RESTORE", p, b"REPLACE"]).await)
                .into_owned()
        };
        assert_eq!(restore(c, p).await, OK);
        assert_eq!(restore(c, &refooter(p, 11)).await, wrong);
        assert_eq!(restore(c, &refooter(p, 9)).await, OK);
        assert_eq!(c.cmd(&["FCALL", "set_it", "1", "k", "v"]).await, OK);
    }
    server.shutdown().await;
}
