//! A push from inside a script wakes BLPOP waiters once the script has ended, as in
//! Redis (python-redis-lock's release script does `del`, `lpush`, `pexpire`; its
//! waiters BLPOP the signal list). Needs EVAL from the scripting branch.

use crate::support;

use support::*;

#[tokio::test]
async fn push_from_a_script_wakes_the_waiter_after_the_script() {
    let h = start().await;
    let mut waiter = Raw::to(&h).await;
    waiter.send_cmd(&["BLPOP", "signal", "0"]).await;
    wait_blocked(&h, 1).await;
    let mut c = conn(&h).await;
    // The script pushes, then checks the element is still there: the waiter must not
    // be served in the middle of the script.
    let script = "redis.call('del', KEYS[1]); \
                  redis.call('lpush', KEYS[2], 1); \
                  redis.call('pexpire', KEYS[2], 1000); \
                  return redis.call('llen', KEYS[2])";
    let len: i64 = q(&mut c, &["EVAL", script, "2", "lock", "signal"])
        .await
        .unwrap();
    assert_eq!(len, 1, "the waiter was served before the script ended");
    waiter.expect("*2\r\n$6\r\nsignal\r\n$1\r\n1\r\n").await;
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "signal"]).await.unwrap(), 0);
}

/// BLPOP and BRPOP are refused inside a script, as Redis 7.0 refuses them (its
/// `noscript` flag); BLMPOP is allowed there and answers at once.
#[tokio::test]
async fn blpop_inside_a_script_is_refused_as_in_redis_7() {
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.cmd(&["RPUSH", "full", "v"]).await;
    for cmd in ["blpop", "brpop"] {
        let script = format!("return redis.call('{cmd}', KEYS[1], 0)");
        let reply = c.cmd(&["EVAL", &script, "1", "full"]).await;
        assert!(
            reply.starts_with("-ERR This Redis command is not allowed from script"),
            "{cmd}: {reply}"
        );
    }
    assert_eq!(c.cmd(&["LLEN", "full"]).await, int(1));
    assert_eq!(
        c.cmd(&[
            "EVAL",
            "return redis.call('blmpop', 0, 1, KEYS[1], 'left')",
            "1",
            "full"
        ])
        .await,
        "*2\r\n$4\r\nfull\r\n*1\r\n$1\r\nv\r\n"
    );
}
