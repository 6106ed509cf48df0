//! Pub/sub: exact frames in RESP2 and RESP3 (checked against redis-server 7.0.15),
//! subscribed-mode rules, receiver counts, patterns, and the slow-subscriber limit.

use crate::support;

use futures_util::StreamExt;
use std::time::Duration;
use support::*;

#[tokio::test]
async fn subscribe_confirms_each_channel_in_its_own_frame() {
    let h = start().await;
    let mut r = Raw::to(&h).await;
    r.check(
        &["SUBSCRIBE", "a", "b"],
        "*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n*3\r\n$9\r\nsubscribe\r\n$1\r\nb\r\n:2\r\n",
    )
    .await;
    r.check(
        &["SUBSCRIBE", "a"],
        "*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:2\r\n",
    )
    .await;
    r.check(
        &["PSUBSCRIBE", "n*"],
        "*3\r\n$10\r\npsubscribe\r\n$2\r\nn*\r\n:3\r\n",
    )
    .await;
    r.check(
        &["UNSUBSCRIBE", "a"],
        "*3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n:2\r\n",
    )
    .await;
    r.check(
        &["UNSUBSCRIBE"],
        "*3\r\n$11\r\nunsubscribe\r\n$1\r\nb\r\n:1\r\n",
    )
    .await;
    // Only patterns left: UNSUBSCRIBE with none has a nil name and the remaining count.
    r.check(
        &["UNSUBSCRIBE"],
        "*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:1\r\n",
    )
    .await;
    r.check(
        &["PUNSUBSCRIBE"],
        "*3\r\n$12\r\npunsubscribe\r\n$2\r\nn*\r\n:0\r\n",
    )
    .await;
    r.check(
        &["PUNSUBSCRIBE"],
        "*3\r\n$12\r\npunsubscribe\r\n$-1\r\n:0\r\n",
    )
    .await;
    // Out of subscribed mode again.
    r.check(&["GET", "x"], "$-1\r\n").await;
    r.check(
        &["SUBSCRIBE"],
        "-ERR wrong number of arguments for 'subscribe' command\r\n",
    )
    .await;
}

#[tokio::test]
async fn resp2_subscribed_mode_allows_only_pubsub_commands() {
    let h = start().await;
    let mut r = Raw::to(&h).await;
    r.check(
        &["SUBSCRIBE", "a"],
        "*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n",
    )
    .await;
    r.check(&["GET", "x"], "-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n").await;
    r.check(&["PUBLISH", "a", "m"], "-ERR Can't execute 'publish': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n").await;
    r.check(&["PING"], "*2\r\n$4\r\npong\r\n$0\r\n\r\n").await;
    r.check(&["PING", "hi"], "*2\r\n$4\r\npong\r\n$2\r\nhi\r\n")
        .await;
    r.check(&["RESET"], "+RESET\r\n").await;
    r.check(&["GET", "x"], "$-1\r\n").await;
    let mut c = conn(&h).await;
    let n: Vec<(String, i64)> = q(&mut c, &["PUBSUB", "NUMSUB", "a"]).await.unwrap();
    assert_eq!(n, vec![("a".to_string(), 0)]);
    r.check(
        &["SUBSCRIBE", "a"],
        "*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n",
    )
    .await;
    r.check(&["QUIT"], "+OK\r\n").await;
    assert!(r.read_to_close().await.is_empty());
}

#[tokio::test]
async fn resp3_subscribers_get_push_frames_and_may_run_any_command() {
    let h = start().await;
    let mut r = Raw::to(&h).await;
    r.hello3().await;
    r.check(&["UNSUBSCRIBE"], ">3\r\n$11\r\nunsubscribe\r\n_\r\n:0\r\n")
        .await;
    r.check(
        &["SUBSCRIBE", "a", "b"],
        ">3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n>3\r\n$9\r\nsubscribe\r\n$1\r\nb\r\n:2\r\n",
    )
    .await;
    r.check(&["GET", "x"], "_\r\n").await;
    r.check(&["PING"], "+PONG\r\n").await;
    // Publishing to itself: the message comes before PUBLISH's reply, as in Redis.
    r.check(
        &["PUBLISH", "a", "m"],
        ">3\r\n$7\r\nmessage\r\n$1\r\na\r\n$1\r\nm\r\n:1\r\n",
    )
    .await;
    r.check(
        &["PSUBSCRIBE", "p*"],
        ">3\r\n$10\r\npsubscribe\r\n$2\r\np*\r\n:3\r\n",
    )
    .await;
    r.check(
        &["PUBLISH", "pz", "1"],
        ">4\r\n$8\r\npmessage\r\n$2\r\np*\r\n$2\r\npz\r\n$1\r\n1\r\n:1\r\n",
    )
    .await;
}

#[tokio::test]
async fn messages_reach_resp2_subscribers() {
    let h = start().await;
    let mut sub = Raw::to(&h).await;
    sub.check(
        &["SUBSCRIBE", "ch"],
        "*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n",
    )
    .await;
    sub.check(
        &["PSUBSCRIBE", "c?"],
        "*3\r\n$10\r\npsubscribe\r\n$2\r\nc?\r\n:2\r\n",
    )
    .await;
    let mut c = conn(&h).await;
    // Subscribed by channel and by pattern: two deliveries, counted twice.
    assert_eq!(
        q::<i64>(&mut c, &["PUBLISH", "ch", "hello"]).await.unwrap(),
        2
    );
    sub.expect("*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$5\r\nhello\r\n")
        .await;
    sub.expect("*4\r\n$8\r\npmessage\r\n$2\r\nc?\r\n$2\r\nch\r\n$5\r\nhello\r\n")
        .await;
    assert_eq!(q::<i64>(&mut c, &["PUBLISH", "cx", "p"]).await.unwrap(), 1);
    sub.expect("*4\r\n$8\r\npmessage\r\n$2\r\nc?\r\n$2\r\ncx\r\n$1\r\np\r\n")
        .await;
    assert_eq!(
        q::<i64>(&mut c, &["PUBLISH", "other", "p"]).await.unwrap(),
        0
    );
    sub.expect_silence(20).await;
}

#[tokio::test]
async fn publish_counts_every_receiver() {
    let h = start().await;
    let client = client(&h);
    let mut subs = Vec::new();
    for _ in 0..3 {
        let mut ps = client.get_async_pubsub().await.unwrap();
        ps.subscribe("news").await.unwrap();
        subs.push(ps);
    }
    let mut p = client.get_async_pubsub().await.unwrap();
    p.psubscribe("n*").await.unwrap();
    subs.push(p);
    let mut c = conn(&h).await;
    assert_eq!(
        q::<i64>(&mut c, &["PUBLISH", "news", "x"]).await.unwrap(),
        4
    );
    for ps in &mut subs {
        let msg = tokio::time::timeout(Duration::from_secs(5), ps.on_message().next())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(msg.get_channel_name(), "news");
        assert_eq!(msg.get_payload::<String>().unwrap(), "x");
    }
    drop(subs);
    // Disconnected subscribers are forgotten.
    for _ in 0..1000 {
        if q::<i64>(&mut c, &["PUBLISH", "news", "x"]).await.unwrap() == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("disconnected subscribers still counted");
}

#[tokio::test]
async fn pubsub_introspection_matches_redis() {
    let h = start().await;
    let mut s1 = Raw::to(&h).await;
    s1.check(
        &["SUBSCRIBE", "a", "b"],
        "*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n*3\r\n$9\r\nsubscribe\r\n$1\r\nb\r\n:2\r\n",
    )
    .await;
    let mut s2 = Raw::to(&h).await;
    s2.check(
        &["SUBSCRIBE", "a"],
        "*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n",
    )
    .await;
    s2.check(
        &["PSUBSCRIBE", "x*"],
        "*3\r\n$10\r\npsubscribe\r\n$2\r\nx*\r\n:2\r\n",
    )
    .await;
    let mut r = Raw::to(&h).await;
    r.check(&["PUBSUB", "CHANNELS"], "*2\r\n$1\r\na\r\n$1\r\nb\r\n")
        .await;
    r.check(&["PUBSUB", "CHANNELS", "b*"], "*1\r\n$1\r\nb\r\n")
        .await;
    r.check(
        &["PUBSUB", "NUMSUB", "a", "b", "c"],
        "*6\r\n$1\r\na\r\n:2\r\n$1\r\nb\r\n:1\r\n$1\r\nc\r\n:0\r\n",
    )
    .await;
    r.check(&["PUBSUB", "NUMSUB"], "*0\r\n").await;
    r.check(&["PUBSUB", "NUMPAT"], ":1\r\n").await;
    r.check(
        &["PUBSUB", "NUMPAT", "x"],
        "-ERR wrong number of arguments for 'pubsub|numpat' command\r\n",
    )
    .await;
    r.check(
        &["PUBSUB", "CHANNELS", "a", "b"],
        "-ERR unknown subcommand or wrong number of arguments for 'channels'. Try PUBSUB HELP.\r\n",
    )
    .await;
    r.check(
        &["PUBSUB", "x"],
        "-ERR unknown subcommand 'x'. Try PUBSUB HELP.\r\n",
    )
    .await;
    let mut c = conn(&h).await;
    let info: String = q(&mut c, &["INFO", "stats"]).await.unwrap();
    assert!(info.contains("pubsub_channels:2\r\n"), "{info}");
    assert!(info.contains("pubsub_patterns:1\r\n"), "{info}");
    // RESET drops the subscriptions from the registry.
    s2.check(&["RESET"], "+RESET\r\n").await;
    r.check(&["PUBSUB", "NUMSUB", "a"], "*2\r\n$1\r\na\r\n:1\r\n")
        .await;
    r.check(&["PUBSUB", "NUMPAT"], ":0\r\n").await;
}

#[tokio::test]
async fn a_slow_subscriber_is_disconnected_and_publish_stays_fast() {
    let h = start_with(|c| c.pubsub_output_limit = 256 * 1024).await;
    let mut slow = Raw::to(&h).await;
    slow.check(
        &["SUBSCRIBE", "firehose"],
        "*3\r\n$9\r\nsubscribe\r\n$8\r\nfirehose\r\n:1\r\n",
    )
    .await;
    let mut fast = client(&h).get_async_pubsub().await.unwrap();
    fast.subscribe("firehose").await.unwrap();
    let mut c = conn(&h).await;
    let payload = "x".repeat(64 * 1024);
    let started = std::time::Instant::now();
    // The slow client never reads: past what the kernel buffers, its queue grows to
    // the limit and it is disconnected; PUBLISH never waits for it.
    let mut published = 0;
    for _ in 0..2000 {
        q::<i64>(&mut c, &["PUBLISH", "firehose", &payload])
            .await
            .unwrap();
        published += 1;
        let n: Vec<(String, i64)> = q(&mut c, &["PUBSUB", "NUMSUB", "firehose"]).await.unwrap();
        if n[0].1 == 1 {
            break;
        }
        // Keep the fast subscriber drained.
        while let Ok(Some(_)) =
            tokio::time::timeout(Duration::from_millis(0), fast.on_message().next()).await
        {}
    }
    let n: Vec<(String, i64)> = q(&mut c, &["PUBSUB", "NUMSUB", "firehose"]).await.unwrap();
    assert_eq!(
        n[0].1, 1,
        "slow subscriber still subscribed after {published} messages"
    );
    assert!(started.elapsed() < Duration::from_secs(20));
    // The slow client sees its connection closed after whatever was already sent.
    slow.read_to_close().await;
    // The fast one is still served.
    assert_eq!(
        q::<i64>(&mut c, &["PUBLISH", "firehose", "last"])
            .await
            .unwrap(),
        1
    );
}
