//! A push from inside a script wakes BLPOP waiters once the script has ended, as in
//! Redis (python-redis-lock's release script does `del`, `lpush`, `pexpire`; its
//! waiters BLPOP the signal list). Needs EVAL from the scripting branch.

mod support;

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

#[tokio::test]
async fn blpop_inside_a_script_does_not_block() {
    let h = start().await;
    let mut c = conn(&h).await;
    let got: Option<Vec<String>> = q(
        &mut c,
        &[
            "EVAL",
            "return redis.call('blpop', KEYS[1], 0)",
            "1",
            "empty",
        ],
    )
    .await
    .unwrap();
    assert_eq!(got, None);
    q::<i64>(&mut c, &["RPUSH", "full", "v"]).await.unwrap();
    let got: Vec<String> = q(
        &mut c,
        &[
            "EVAL",
            "return redis.call('blpop', KEYS[1], 0)",
            "1",
            "full",
        ],
    )
    .await
    .unwrap();
    assert_eq!(got, ["full", "v"]);
}
