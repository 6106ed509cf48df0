//! --maxmemory: above it, commands that may grow memory get Redis's OOM error and
//! nothing is ever evicted; reads, DEL, TTL extensions and lock releases keep working.
//! Every reply here was read from redis-server 7.0.15 with `maxmemory 1` and
//! `maxmemory-policy noeviction` running the same commands.
//!
//! Used memory is the whole test process's (the counting allocator is global), so the
//! tests go over the limit with `CONFIG SET maxmemory 1` rather than by filling memory.

mod support;

use support::*;

const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";
const RELEASE: &str =
    "if redis.call('get',KEYS[1]) == ARGV[1] then return redis.call('del',KEYS[1]) else return 0 end";

async fn over_the_limit() -> (TestServer, Raw) {
    let server = start().await;
    let mut c = Raw::to(&server).await;
    for i in 0..100 {
        let key = format!("lock:{i}");
        assert_eq!(c.cmd(&["SET", &key, "tok", "NX", "PX", "30000"]).await, OK);
    }
    assert_eq!(c.cmd(&["SET", "plain", "x"]).await, OK);
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory", "1"]).await, OK);
    (server, c)
}

#[tokio::test(flavor = "multi_thread")]
async fn writes_get_oom_and_no_lock_is_lost_or_evicted() {
    let (_server, mut c) = over_the_limit().await;
    assert_eq!(
        c.cmd(&["SET", "lock:new", "t", "NX", "PX", "1000"]).await,
        err(OOM)
    );
    assert_eq!(c.cmd(&["INCR", "plain"]).await, err(OOM));
    assert_eq!(c.cmd(&["LPUSH", "l", "x"]).await, err(OOM));
    // Nothing was evicted to make room.
    assert_eq!(c.cmd(&["DBSIZE"]).await, int(101));
    assert_eq!(c.cmd(&["GET", "lock:7"]).await, bulk("tok"));
    // A holder can still extend and release.
    assert_eq!(c.cmd(&["PEXPIRE", "lock:1", "20000"]).await, int(1));
    assert_eq!(
        c.cmd(&["EVAL", RELEASE, "1", "lock:1", "tok"]).await,
        int(1)
    );
    assert_eq!(c.cmd(&["DEL", "lock:2"]).await, int(1));
    assert_eq!(c.cmd(&["GETDEL", "lock:3"]).await, bulk("tok"));
    assert_eq!(c.cmd(&["DBSIZE"]).await, int(98));
    // Refusals count as rejected calls, as in Redis.
    let stats = c.cmd(&["INFO", "commandstats"]).await;
    assert!(
        stats.contains("cmdstat_set:calls=101,") && stats.contains("rejected_calls=1,"),
        "{stats}"
    );

    // Back under the limit: writes work again.
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory", "0"]).await, OK);
    assert_eq!(
        c.cmd(&["SET", "lock:new", "t", "NX", "PX", "1000"]).await,
        OK
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn scripts_follow_redis_maxmemory_rules() {
    let (_server, mut c) = over_the_limit().await;
    // Without a shebang: runs, but its first command that may grow memory is refused...
    assert_eq!(
        c.cmd(&["EVAL", "return redis.call('set','a','b')", "0"])
            .await,
        err(&format!(
            "{OOM} script: ff967d0ae0e68b4f9e360fa91c54598bc25ad9b6, on @user_script:1."
        ))
    );
    assert_eq!(
        c.cmd(&["EVAL", "return redis.pcall('set','a','b')", "0"])
            .await,
        err(OOM)
    );
    // ...unless it already wrote (Redis cannot stop a script half way).
    let del_then_set = "redis.call('del','zz'); return redis.call('set','a','b')";
    assert_eq!(c.cmd(&["EVAL", del_then_set, "0"]).await, OK);
    // With a shebang: refused up front unless no-writes or allow-oom.
    assert_eq!(
        c.cmd(&["EVAL", "#!lua\nreturn redis.call('get','plain')", "0"])
            .await,
        err(OOM)
    );
    assert_eq!(
        c.cmd(&[
            "EVAL",
            "#!lua flags=no-writes\nreturn redis.call('get','plain')",
            "0"
        ])
        .await,
        bulk("x")
    );
    assert_eq!(
        c.cmd(&[
            "EVAL",
            "#!lua flags=allow-oom\nreturn redis.call('set','b','c')",
            "0"
        ])
        .await,
        OK
    );
    // Functions: the same rules by their flags.
    let lib = "#!lua name=ol
redis.register_function('w', function(k, a) return redis.call('set', 'x', 'y') end)
redis.register_function{function_name='r', callback=function(k, a) return redis.call('get', 'plain') end, flags={'no-writes'}}";
    // FUNCTION LOAD is `write denyoom` in Redis 7.0: refused above the limit too.
    assert_eq!(c.cmd(&["FUNCTION", "LOAD", lib]).await, err(OOM));
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory", "0"]).await, OK);
    assert_eq!(c.cmd(&["FUNCTION", "LOAD", lib]).await, bulk("ol"));
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory", "1"]).await, OK);
    assert_eq!(c.cmd(&["FCALL", "w", "0"]).await, err(OOM));
    assert_eq!(c.cmd(&["FCALL", "r", "0"]).await, bulk("x"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_transaction_above_the_limit_is_aborted_at_queue_time() {
    let (_server, mut c) = over_the_limit().await;
    assert_eq!(c.cmd(&["MULTI"]).await, OK);
    // Queueing takes memory: every command is refused, reads too.
    assert_eq!(c.cmd(&["GET", "plain"]).await, err(OOM));
    assert_eq!(
        c.cmd(&["EXEC"]).await,
        err("EXECABORT Transaction discarded because of previous errors.")
    );
    assert_eq!(c.cmd(&["MULTI"]).await, OK);
    assert_eq!(c.cmd(&["DEL", "plain"]).await, err(OOM));
    assert_eq!(c.cmd(&["DISCARD"]).await, OK);
    assert_eq!(c.cmd(&["GET", "plain"]).await, bulk("x"));
}

#[tokio::test(flavor = "multi_thread")]
async fn maxmemory_settings_read_and_change_as_in_redis() {
    let server = start().await;
    let mut c = Raw::to(&server).await;
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory", "100mb"]).await, OK);
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "maxmemory"]).await,
        "*2\r\n$9\r\nmaxmemory\r\n$9\r\n104857600\r\n"
    );
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "maxmemory", "1.5mb"]).await,
        err("ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value")
    );
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "maxmemory-policy", "noeviction"])
            .await,
        OK
    );
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "maxmemory-policy", "bogus"]).await,
        err("ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy') - argument(s) must be one of the following: volatile-lru, volatile-lfu, volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction")
    );
    // Redis would evict with this policy; a lock server never does.
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]).await,
        err("ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy') - redlockd never evicts a lock: noeviction is the only policy")
    );
    let info = c.cmd(&["INFO", "memory"]).await;
    for line in [
        "maxmemory:104857600\r\n",
        "maxmemory_human:100.00M\r\n",
        "maxmemory_policy:noeviction\r\n",
    ] {
        assert!(info.contains(line), "{line} in {info}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_flag_sets_the_limit_from_start() {
    let server = start_with(|c| c.maxmemory = 1).await;
    let mut c = Raw::to(&server).await;
    assert_eq!(c.cmd(&["SET", "k", "v"]).await, err(OOM));
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "maxmemory"]).await,
        "*2\r\n$9\r\nmaxmemory\r\n$1\r\n1\r\n"
    );
}
