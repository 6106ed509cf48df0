//! Redisson's fair lock (RedissonFairLock), semaphore (RedissonSemaphore) and
//! permit-expirable semaphore (RedissonPermitExpirableSemaphore): their Lua scripts,
//! copied from Redisson's source (RedissonFairLock at redisson/redisson 4339c99), sent with
//! EVAL as Redisson sends them. The fair lock
//! keeps its waiters in a list plus a sorted set of timeouts; the permit-expirable
//! semaphore keeps its permits' lease ends in a sorted set. Redisson passes the client's
//! clock in ARGV, so these tests choose the times.

use crate::support;

use redis::aio::MultiplexedConnection;
use redis::Value;
use support::*;

// -- RedissonFairLock: KEYS = lock, redisson_lock_queue:{lock}, redisson_lock_timeout:{lock}

/// tryLockInnerAsync (EVAL_LONG): ARGV lease, holder, wait, now. nil when acquired,
/// else the estimated wait.
const FAIR_TRY_LOCK: &str = "while true do local firstThreadId2 = redis.call('lindex', KEYS[2], 0);if firstThreadId2 == false then break;end;local timeout = tonumber(redis.call('zscore', KEYS[3], firstThreadId2));if timeout <= tonumber(ARGV[4]) then redis.call('zrem', KEYS[3], firstThreadId2);redis.call('lpop', KEYS[2]);else break;end;end;if (redis.call('exists', KEYS[1]) == 0) and ((redis.call('exists', KEYS[2]) == 0) or (redis.call('lindex', KEYS[2], 0) == ARGV[2])) then redis.call('lpop', KEYS[2]);redis.call('zrem', KEYS[3], ARGV[2]);local keys = redis.call('zrange', KEYS[3], 0, -1);for i = 1, #keys, 1 do redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), keys[i]);end;redis.call('hset', KEYS[1], ARGV[2], 1);redis.call('pexpire', KEYS[1], ARGV[1]);return nil;end;if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then redis.call('hincrby', KEYS[1], ARGV[2],1);redis.call('pexpire', KEYS[1], ARGV[1]);return nil;end;local timeout = redis.call('zscore', KEYS[3], ARGV[2]);if timeout ~= false then return timeout - tonumber(ARGV[3]) - tonumber(ARGV[4]);end;local lastThreadId = redis.call('lindex', KEYS[2], -1);local ttl;if lastThreadId ~= false and lastThreadId ~= ARGV[2] then ttl = tonumber(redis.call('zscore', KEYS[3], lastThreadId)) - tonumber(ARGV[4]);else ttl = redis.call('pttl', KEYS[1]);end;local timeout = ttl + tonumber(ARGV[3]) + tonumber(ARGV[4]);if redis.call('zadd', KEYS[3], timeout, ARGV[2]) == 1 then redis.call('rpush', KEYS[2], ARGV[2]);end;return ttl;";

/// unlockInnerAsync: KEYS + the channel prefix; ARGV message, lease, holder, now.
const FAIR_UNLOCK: &str = "while true do local firstThreadId2 = redis.call('lindex', KEYS[2], 0);if firstThreadId2 == false then break;end; local timeout = tonumber(redis.call('zscore', KEYS[3], firstThreadId2));if timeout <= tonumber(ARGV[4]) then redis.call('zrem', KEYS[3], firstThreadId2); redis.call('lpop', KEYS[2]); else break;end; end;if (redis.call('exists', KEYS[1]) == 0) then local nextThreadId = redis.call('lindex', KEYS[2], 0); if nextThreadId ~= false then redis.call('publish', KEYS[4] .. ':' .. nextThreadId, ARGV[1]); end; return 1; end;if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil;end; local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; end; redis.call('del', KEYS[1]); local nextThreadId = redis.call('lindex', KEYS[2], 0); if nextThreadId ~= false then redis.call('publish', KEYS[4] .. ':' .. nextThreadId, ARGV[1]); end; return 1; ";

const LEASE: &str = "30000";
const WAIT: &str = "300000";
const QUEUE: &str = "redisson_lock_queue:{fair}";
const TIMEOUTS: &str = "redisson_lock_timeout:{fair}";

async fn fair_try(c: &mut MultiplexedConnection, id: &str, now: i64) -> Option<i64> {
    let now = now.to_string();
    let args = [
        "eval",
        FAIR_TRY_LOCK,
        "3",
        "fair",
        QUEUE,
        TIMEOUTS,
        LEASE,
        id,
        WAIT,
        &now,
    ];
    q(c, &args).await.unwrap()
}

async fn fair_unlock(c: &mut MultiplexedConnection, id: &str, now: i64) -> Option<i64> {
    let now = now.to_string();
    let chan = "redisson_lock__channel:{fair}";
    let args = [
        "eval",
        FAIR_UNLOCK,
        "4",
        "fair",
        QUEUE,
        TIMEOUTS,
        chan,
        "0",
        LEASE,
        id,
        &now,
    ];
    q(c, &args).await.unwrap()
}

async fn zscores(c: &mut MultiplexedConnection, key: &str) -> Vec<(String, String)> {
    q(c, &["zrange", key, "0", "-1", "withscores"])
        .await
        .unwrap()
}

#[tokio::test]
async fn fair_lock_queues_waiters_and_hands_over_in_order() {
    let h = start().await;
    let mut c = conn(&h).await;
    assert_eq!(fair_try(&mut c, "a:1", 1000).await, None);
    // B waits the lock's ttl; C waits behind B.
    assert_eq!(fair_try(&mut c, "b:1", 1000).await, Some(30_000));
    assert_eq!(fair_try(&mut c, "c:1", 1000).await, Some(330_000));
    assert_eq!(fair_try(&mut c, "b:1", 1000).await, Some(30_000));
    assert_eq!(
        zscores(&mut c, TIMEOUTS).await,
        [
            ("b:1".to_string(), "331000".to_string()),
            ("c:1".to_string(), "631000".to_string())
        ]
    );
    let queue: Vec<String> = q(&mut c, &["lrange", QUEUE, "0", "-1"]).await.unwrap();
    assert_eq!(queue, ["b:1", "c:1"]);
    // C cannot jump the queue while A holds the lock; A re-enters.
    assert_eq!(fair_try(&mut c, "c:1", 2000).await, Some(329_000));
    assert_eq!(fair_try(&mut c, "a:1", 2000).await, None);
    assert_eq!(fair_unlock(&mut c, "a:1", 2000).await, Some(0));
    // The last unlock wakes B (its own channel) and B, first in line, takes the lock;
    // the waiters behind it move up by the wait time.
    let mut sub = client(&h).get_async_pubsub().await.unwrap();
    sub.subscribe("redisson_lock__channel:{fair}:b:1")
        .await
        .unwrap();
    assert_eq!(fair_unlock(&mut c, "a:1", 2000).await, Some(1));
    let msg = futures_util::StreamExt::next(&mut sub.on_message())
        .await
        .unwrap();
    assert_eq!(msg.get_payload::<String>().unwrap(), "0");
    assert_eq!(fair_try(&mut c, "b:1", 2500).await, None);
    assert_eq!(
        zscores(&mut c, TIMEOUTS).await,
        [("c:1".to_string(), "331000".to_string())]
    );
    assert_eq!(fair_unlock(&mut c, "z:1", 2500).await, None);
}

#[tokio::test]
async fn fair_lock_drops_waiters_whose_turn_timed_out() {
    let h = start().await;
    let mut c = conn(&h).await;
    assert_eq!(fair_try(&mut c, "a:1", 1000).await, None);
    assert_eq!(fair_try(&mut c, "b:1", 1000).await, Some(30_000));
    // Past B's timeout (331000) the next attempt removes B from the line.
    assert_eq!(fair_try(&mut c, "c:1", 331_000).await, Some(30_000));
    let queue: Vec<String> = q(&mut c, &["lrange", QUEUE, "0", "-1"]).await.unwrap();
    assert_eq!(queue, ["c:1"]);
}

// -- RedissonSemaphore: a counter string, released with publish.

const SEM_TRY_SET: &str = "local value = redis.call('get', KEYS[1]); if (value == false) then redis.call('set', KEYS[1], ARGV[1]); redis.call('publish', KEYS[2], ARGV[1]); return 1;end;return 0;";
const SEM_TRY_ACQUIRE: &str = "local value = redis.call('get', KEYS[1]); if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then local val = redis.call('decrby', KEYS[1], ARGV[1]); return 1; end; return 0;";
const SEM_RELEASE: &str =
    "local value = redis.call('incrby', KEYS[1], ARGV[1]); redis.call('publish', KEYS[2], value); ";

#[tokio::test]
async fn semaphore_hands_out_its_permits_and_takes_them_back() {
    let h = start().await;
    let mut c = conn(&h).await;
    let chan = "redisson_sc:{sem}";
    let set = |n: &'static str| ["eval", SEM_TRY_SET, "2", "sem", chan, n];
    assert_eq!(q::<i64>(&mut c, &set("2")).await.unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &set("5")).await.unwrap(), 0);
    let acquire = ["eval", SEM_TRY_ACQUIRE, "1", "sem", "1"];
    assert_eq!(q::<i64>(&mut c, &acquire).await.unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &acquire).await.unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &acquire).await.unwrap(), 0);
    let release = ["eval", SEM_RELEASE, "2", "sem", chan, "1"];
    assert_eq!(q::<Value>(&mut c, &release).await.unwrap(), Value::Nil);
    assert_eq!(q::<i64>(&mut c, &acquire).await.unwrap(), 1);
}

// -- RedissonPermitExpirableSemaphore: KEYS = sem, {sem}:timeout, redisson_sc:{sem}

/// tryAcquireAsync: ARGV count, lease end, now, the "no lease" end, publish command,
/// then the new permit ids (raw bytes).
const PES_ACQUIRE: &str = "local expiredIds = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, ARGV[1]); if #expiredIds > 0 then redis.call('zrem', KEYS[2], unpack(expiredIds)); local value = redis.call('incrby', KEYS[1], #expiredIds); if tonumber(value) > 0 then redis.call(ARGV[5], KEYS[3], value); end;end; local value = redis.call('get', KEYS[1]); if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then redis.call('decrby', KEYS[1], ARGV[1]); for i = 6, #ARGV, 1 do redis.call('zadd', KEYS[2], ARGV[2], ARGV[i]); end; local ttl = redis.call('pttl', KEYS[1]); if ttl > 0 then redis.call('pexpire', KEYS[2], ttl); end; return 'OK'; end; local v = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES'); if v[1] ~= nil and v[2] ~= ARGV[4] then return ':' .. tostring(v[2]); end return nil;";

/// tryReleaseAsync(id): KEYS = sem, channel, timeouts; ARGV id, 1, now, publish.
const PES_RELEASE: &str = "local expire = redis.call('zscore', KEYS[3], ARGV[1]);local removed = redis.call('zrem', KEYS[3], ARGV[1]);if tonumber(removed) ~= 1 then return 0;end;local value = redis.call('incrby', KEYS[1], ARGV[2]); redis.call(ARGV[4], KEYS[2], value); if tonumber(expire) <= tonumber(ARGV[3]) then return 0;end;return 1;";

/// getPermitsAsync: ARGV now, publish.
const PES_PERMITS: &str = "local expiredIds = redis.call('zrangebyscore', KEYS[2], 0, ARGV[1], 'limit', 0, -1); if #expiredIds > 0 then redis.call('zrem', KEYS[2], unpack(expiredIds)); local value = redis.call('incrby', KEYS[1], #expiredIds); if tonumber(value) > 0 then redis.call(ARGV[2], KEYS[3], value); end;end; local available = redis.call('get', KEYS[1]); if available == false then return 0 end;local acquired = redis.call('zcount', KEYS[2], 0, '+inf'); if acquired == false then return tonumber(available) end;return tonumber(available) + acquired;";

const NO_LEASE: &str = "922337203685477";

async fn pes_acquire(
    c: &mut MultiplexedConnection,
    lease_end: &str,
    now: &str,
    id: &[u8],
) -> Value {
    let mut cmd = redis::cmd("eval");
    cmd.arg(PES_ACQUIRE)
        .arg(3)
        .arg("sem")
        .arg("{sem}:timeout")
        .arg("redisson_sc:{sem}");
    cmd.arg(1)
        .arg(lease_end)
        .arg(now)
        .arg(NO_LEASE)
        .arg("publish")
        .arg(id);
    cmd.query_async(c).await.unwrap()
}

async fn pes_release(c: &mut MultiplexedConnection, id: &[u8], now: &str) -> i64 {
    let mut cmd = redis::cmd("eval");
    cmd.arg(PES_RELEASE)
        .arg(3)
        .arg("sem")
        .arg("redisson_sc:{sem}")
        .arg("{sem}:timeout");
    cmd.arg(id).arg(1).arg(now).arg("publish");
    cmd.query_async(c).await.unwrap()
}

fn ok() -> Value {
    Value::BulkString(b"OK".to_vec())
}

#[tokio::test]
async fn permit_expirable_semaphore_reclaims_permits_whose_lease_ended() {
    let h = start().await;
    let mut c = conn(&h).await;
    q::<()>(&mut c, &["set", "sem", "2"]).await.unwrap();
    assert_eq!(
        pes_acquire(&mut c, "5000", "1000", &[0xde, 0xad]).await,
        ok()
    );
    assert_eq!(
        pes_acquire(&mut c, NO_LEASE, "1000", &[0xbe, 0xef]).await,
        ok()
    );
    // None left: the reply names the nearest lease end.
    assert_eq!(
        pes_acquire(&mut c, NO_LEASE, "1000", &[0x01]).await,
        Value::BulkString(b":5000".to_vec())
    );
    // Past that end the expired permit is taken back and handed out again.
    assert_eq!(pes_acquire(&mut c, "9000", "6000", &[0x01]).await, ok());
    let permits = [
        "eval",
        PES_PERMITS,
        "3",
        "sem",
        "{sem}:timeout",
        "redisson_sc:{sem}",
        "6000",
        "publish",
    ];
    assert_eq!(q::<i64>(&mut c, &permits).await.unwrap(), 2);
    assert_eq!(pes_release(&mut c, &[0xbe, 0xef], "6000").await, 1);
    assert_eq!(pes_release(&mut c, &[0xbe, 0xef], "6000").await, 0);
    assert_eq!(q::<i64>(&mut c, &["get", "sem"]).await.unwrap(), 1);
    // Releasing a permit whose lease already ended counts it back but answers 0.
    assert_eq!(pes_release(&mut c, &[0x01], "9500").await, 0);
    assert_eq!(
        q::<i64>(&mut c, &["zcard", "{sem}:timeout"]).await.unwrap(),
        0
    );
}
