//! Client-side caching: CLIENT TRACKING / CACHING / TRACKINGINFO / GETREDIR and the
//! invalidation messages, byte for byte as redis-server 7.0.15 sends them (each
//! expected frame below was read from it; `same_transcript_as_redis_server` replays a
//! scenario on both). rueidis, and so rueidislock's lock waiters, depend on these.

use crate::support;

use std::time::Duration;
use support::redis_server::RedisNode;
use support::*;

/// `>2 invalidate [keys...]`, as a RESP3 push.
fn invalidate(keys: &[&str]) -> String {
    let mut s = format!(">2\r\n$10\r\ninvalidate\r\n*{}\r\n", keys.len());
    for k in keys {
        s.push_str(&bulk(k));
    }
    s
}

const FLUSHED: &str = ">2\r\n$10\r\ninvalidate\r\n_\r\n";

async fn resp3(node: &impl Addressed) -> Raw {
    let mut r = Raw::to(node).await;
    r.hello3().await;
    r
}

async fn id_of(r: &mut Raw) -> String {
    let reply = r.cmd(&["CLIENT", "ID"]).await;
    reply.trim_start_matches(':').trim_end().to_string()
}

#[tokio::test]
async fn options_and_their_errors() {
    let h = start().await;
    let mut a = resp3(&h).await;
    for (args, expected) in [
        (&["CLIENT", "TRACKING"][..], "-ERR wrong number of arguments for 'client|tracking' command\r\n"),
        (&["CLIENT", "TRACKING", "maybe"], "-ERR syntax error\r\n"),
        (&["CLIENT", "TRACKING", "on", "foo"], "-ERR syntax error\r\n"),
        (&["CLIENT", "TRACKING", "on", "PREFIX"], "-ERR syntax error\r\n"),
        (&["CLIENT", "TRACKING", "off", "BLAH"], "-ERR syntax error\r\n"),
        (&["CLIENT", "TRACKING", "on", "PREFIX", "x"], "-ERR PREFIX option requires BCAST mode to be enabled\r\n"),
        (&["CLIENT", "TRACKING", "on", "OPTIN", "OPTOUT"], "-ERR You can't specify both OPTIN mode and OPTOUT mode\r\n"),
        (&["CLIENT", "TRACKING", "on", "BCAST", "OPTIN"], "-ERR OPTIN and OPTOUT are not compatible with BCAST\r\n"),
        (&["CLIENT", "TRACKING", "on", "REDIRECT", "999"], "-ERR The client ID you want redirect to does not exist\r\n"),
        (&["CLIENT", "TRACKING", "on", "REDIRECT", "0"], "-ERR The client ID you want redirect to does not exist\r\n"),
        (&["CLIENT", "TRACKING", "on", "REDIRECT", "-5"], "-ERR The client ID you want redirect to does not exist\r\n"),
        (&["CLIENT", "TRACKING", "on", "REDIRECT", "abc"], "-ERR value is not an integer or out of range\r\n"),
        (&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "ab", "PREFIX", "a"], "-ERR Prefix 'ab' overlaps with another provided prefix 'a'. Prefixes for a single client must not overlap.\r\n"),
        (&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "x", "PREFIX", "x"], "-ERR Prefix 'x' overlaps with another provided prefix 'x'. Prefixes for a single client must not overlap.\r\n"),
        (&["CLIENT", "CACHING"], "-ERR wrong number of arguments for 'client|caching' command\r\n"),
        (&["CLIENT", "CACHING", "yes", "no"], "-ERR wrong number of arguments for 'client|caching' command\r\n"),
        (&["CLIENT", "CACHING", "yes"], "-ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled\r\n"),
        (&["CLIENT", "TRACKINGINFO", "x"], "-ERR wrong number of arguments for 'client|trackinginfo' command\r\n"),
        (&["CLIENT", "GETREDIR", "x"], "-ERR wrong number of arguments for 'client|getredir' command\r\n"),
        (&["CLIENT", "GETREDIR"], ":-1\r\n"),
        (&["CLIENT", "TRACKINGINFO"], "%3\r\n$5\r\nflags\r\n~1\r\n$3\r\noff\r\n$8\r\nredirect\r\n:-1\r\n$8\r\nprefixes\r\n*0\r\n"),
        // OPTOUT with NOLOOP; then CACHING's rules for that mode
        (&["CLIENT", "TRACKING", "on", "NOLOOP", "OPTOUT"], OK),
        (&["CLIENT", "TRACKINGINFO"], "%3\r\n$5\r\nflags\r\n~3\r\n$2\r\non\r\n$6\r\noptout\r\n$6\r\nnoloop\r\n$8\r\nredirect\r\n:0\r\n$8\r\nprefixes\r\n*0\r\n"),
        (&["CLIENT", "GETREDIR"], ":0\r\n"),
        (&["CLIENT", "CACHING", "yes"], "-ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.\r\n"),
        (&["CLIENT", "CACHING", "maybe"], "-ERR syntax error\r\n"),
        (&["CLIENT", "CACHING", "no"], OK),
        (&["CLIENT", "TRACKINGINFO"], "%3\r\n$5\r\nflags\r\n~4\r\n$2\r\non\r\n$6\r\noptout\r\n$10\r\ncaching-no\r\n$6\r\nnoloop\r\n$8\r\nredirect\r\n:0\r\n$8\r\nprefixes\r\n*0\r\n"),
        (&["CLIENT", "TRACKING", "on", "OPTIN"], "-ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.\r\n"),
        (&["CLIENT", "TRACKING", "on", "BCAST"], "-ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.\r\n"),
        // ON again replaces the flags
        (&["CLIENT", "TRACKING", "on"], OK),
        (&["CLIENT", "TRACKINGINFO"], "%3\r\n$5\r\nflags\r\n~1\r\n$2\r\non\r\n$8\r\nredirect\r\n:0\r\n$8\r\nprefixes\r\n*0\r\n"),
        (&["CLIENT", "TRACKING", "off"], OK),
        // BCAST prefixes accumulate and must not overlap the ones already set
        (&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "cd", "PREFIX", "ab"], OK),
        (&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "abc"], "-ERR Prefix 'abc' overlaps with an existing prefix 'ab'. Prefixes for a single client must not overlap.\r\n"),
        (&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a"], "-ERR Prefix 'a' overlaps with an existing prefix 'ab'. Prefixes for a single client must not overlap.\r\n"),
        (&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "e"], OK),
        (&["CLIENT", "TRACKINGINFO"], "%3\r\n$5\r\nflags\r\n~2\r\n$2\r\non\r\n$5\r\nbcast\r\n$8\r\nredirect\r\n:0\r\n$8\r\nprefixes\r\n*3\r\n$2\r\nab\r\n$2\r\ncd\r\n$1\r\ne\r\n"),
        (&["CLIENT", "TRACKING", "off"], OK),
        (&["CLIENT", "TRACKING", "on", "OPTIN"], OK),
        (&["CLIENT", "CACHING", "no"], "-ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.\r\n"),
        (&["CLIENT", "CACHING", "yes"], OK),
        (&["CLIENT", "TRACKINGINFO"], "%3\r\n$5\r\nflags\r\n~3\r\n$2\r\non\r\n$5\r\noptin\r\n$11\r\ncaching-yes\r\n$8\r\nredirect\r\n:0\r\n$8\r\nprefixes\r\n*0\r\n"),
    ] {
        a.check(args, expected).await;
    }
    let me = id_of(&mut a).await;
    a.check(
        &["CLIENT", "TRACKING", "on", "REDIRECT", &me, "REDIRECT", &me],
        "-ERR A client can only redirect to a single other client\r\n",
    )
    .await;

    // RESP2: the same map as a flat array, the set as an array
    let mut b = Raw::to(&h).await;
    b.check(&["CLIENT", "TRACKING", "on"], OK).await;
    b.check(
        &["CLIENT", "TRACKINGINFO"],
        "*6\r\n$5\r\nflags\r\n*1\r\n$2\r\non\r\n$8\r\nredirect\r\n:0\r\n$8\r\nprefixes\r\n*0\r\n",
    )
    .await;
    let info = b.cmd(&["CLIENT", "INFO"]).await;
    assert!(
        info.contains(" flags=t ") && info.contains(" redir=0 "),
        "{info}"
    );
    h.shutdown().await;
}

#[tokio::test]
async fn a_change_by_another_client_invalidates_what_was_read() {
    let h = start().await;
    let mut a = resp3(&h).await;
    let mut b = Raw::to(&h).await;
    a.check(&["CLIENT", "TRACKING", "on"], OK).await;

    a.check(&["GET", "k"], "_\r\n").await;
    b.check(&["SET", "k", "1"], OK).await;
    a.expect(&invalidate(&["k"])).await;
    // told once: k is not tracked again until read again
    b.check(&["SET", "k", "2"], OK).await;
    a.expect_silence(50).await;

    // one message per key, in the order they changed
    a.check(&["MGET", "k", "k2"], "*2\r\n$1\r\n2\r\n_\r\n")
        .await;
    b.check(&["MSET", "k", "3", "k2", "3"], OK).await;
    a.expect(&(invalidate(&["k"]) + &invalidate(&["k2"]))).await;

    // a write that changes nothing invalidates nothing (a lock waiter's failed SET NX
    // must not wake the holder's cache)
    a.check(&["GET", "k"], "$1\r\n3\r\n").await;
    b.check(&["SET", "k", "v", "NX"], "$-1\r\n").await;
    b.check(&["PEXPIRE", "k", "100", "XX"], ":0\r\n").await;
    a.expect_silence(50).await;
    b.check(&["PEXPIRE", "k", "100"], ":1\r\n").await;
    a.expect(&invalidate(&["k"])).await;

    // EXISTS and PTTL read keys too; so does a GET inside a script
    a.check(&["EXISTS", "e"], ":0\r\n").await;
    a.check(&["PTTL", "p"], ":-2\r\n").await;
    a.check(
        &["EVAL", "return redis.call('GET', KEYS[1])", "1", "s"],
        "_\r\n",
    )
    .await;
    b.check(&["MSET", "e", "1", "p", "1", "s", "1"], OK).await;
    a.expect(&(invalidate(&["e"]) + &invalidate(&["p"]) + &invalidate(&["s"])))
        .await;

    // a DEL, a HSET, a script's write
    a.check(&["MGET", "d", "h", "w"], "*3\r\n_\r\n_\r\n_\r\n")
        .await;
    b.check(&["SET", "d", "x"], OK).await;
    a.expect(&invalidate(&["d"])).await;
    a.check(&["GET", "d"], "$1\r\nx\r\n").await;
    b.check(&["DEL", "d"], ":1\r\n").await;
    a.expect(&invalidate(&["d"])).await;
    b.check(&["HSET", "h", "f", "v"], ":1\r\n").await;
    a.expect(&invalidate(&["h"])).await;
    b.check(
        &["EVAL", "return redis.call('SET', KEYS[1], 'v')", "1", "w"],
        OK,
    )
    .await;
    a.expect(&invalidate(&["w"])).await;
    h.shutdown().await;
}

#[tokio::test]
async fn own_changes_follow_the_reply_or_are_skipped_with_noloop() {
    let h = start().await;
    let mut a = resp3(&h).await;
    let mut b = Raw::to(&h).await;
    a.check(&["CLIENT", "TRACKING", "on"], OK).await;
    a.check(&["GET", "k"], "_\r\n").await;
    a.check(&["SET", "k", "1"], &(OK.to_string() + &invalidate(&["k"])))
        .await;

    // in a transaction: after EXEC's reply
    a.check(&["GET", "m"], "_\r\n").await;
    a.check(&["MULTI"], OK).await;
    a.check(&["SET", "m", "1"], "+QUEUED\r\n").await;
    a.check(&["GET", "m"], "+QUEUED\r\n").await;
    a.check(
        &["EXEC"],
        &("*2\r\n+OK\r\n$1\r\n1\r\n".to_string() + &invalidate(&["m"])),
    )
    .await;
    // the GET inside EXEC tracked m again
    b.check(&["SET", "m", "2"], OK).await;
    a.expect(&invalidate(&["m"])).await;

    a.check(&["CLIENT", "TRACKING", "off"], OK).await;
    a.check(&["CLIENT", "TRACKING", "on", "NOLOOP"], OK).await;
    a.check(&["GET", "n"], "_\r\n").await;
    a.check(&["SET", "n", "1"], OK).await;
    a.expect_silence(50).await;
    a.check(&["GET", "n"], "$1\r\n1\r\n").await;
    b.check(&["SET", "n", "2"], OK).await;
    a.expect(&invalidate(&["n"])).await;

    // a flush tells every tracking client, NOLOOP or not, with a null
    a.check(&["GET", "x"], "_\r\n").await;
    a.check(&["FLUSHALL"], &(OK.to_string() + FLUSHED)).await;
    h.shutdown().await;
}

#[tokio::test]
async fn optin_and_optout_decide_per_command() {
    let h = start().await;
    let mut a = resp3(&h).await;
    let mut b = Raw::to(&h).await;
    a.check(&["CLIENT", "TRACKING", "on", "OPTIN"], OK).await;
    a.check(&["GET", "not-opted"], "_\r\n").await;
    a.check(&["CLIENT", "CACHING", "yes"], OK).await;
    a.check(&["GET", "opted"], "_\r\n").await;
    // only for the next command
    a.check(&["GET", "after"], "_\r\n").await;
    b.check(&["MSET", "not-opted", "1", "opted", "1", "after", "1"], OK)
        .await;
    a.expect(&invalidate(&["opted"])).await;
    a.expect_silence(50).await;
    // for a whole transaction
    a.check(&["CLIENT", "CACHING", "yes"], OK).await;
    a.check(&["MULTI"], OK).await;
    a.check(&["GET", "t1"], "+QUEUED\r\n").await;
    a.check(&["GET", "t2"], "+QUEUED\r\n").await;
    a.check(&["EXEC"], "*2\r\n_\r\n_\r\n").await;
    b.check(&["MSET", "t1", "1", "t2", "1"], OK).await;
    a.expect(&(invalidate(&["t1"]) + &invalidate(&["t2"])))
        .await;

    a.check(&["CLIENT", "TRACKING", "off"], OK).await;
    a.check(&["CLIENT", "TRACKING", "on", "OPTOUT"], OK).await;
    a.check(&["CLIENT", "CACHING", "no"], OK).await;
    a.check(&["GET", "skipped"], "_\r\n").await;
    a.check(&["GET", "opted"], "$1\r\n1\r\n").await;
    b.check(&["MSET", "skipped", "2", "opted", "2"], OK).await;
    a.expect(&invalidate(&["opted"])).await;
    a.expect_silence(50).await;
    h.shutdown().await;
}

#[tokio::test]
async fn broadcast_sends_each_prefix_its_changed_keys() {
    let h = start().await;
    let mut d = resp3(&h).await;
    let mut c = Raw::to(&h).await;
    d.check(
        &[
            "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "p:", "PREFIX", "q",
        ],
        OK,
    )
    .await;
    // nothing read first: every change under a prefix, one message per prefix per
    // command, its keys sorted
    c.check(&["MSET", "p:2", "2", "p:1", "1", "q1", "x", "z", "z"], OK)
        .await;
    d.expect(&(invalidate(&["p:1", "p:2"]) + &invalidate(&["q1"])))
        .await;
    d.check(
        &["SET", "p:3", "1"],
        &(OK.to_string() + &invalidate(&["p:3"])),
    )
    .await;
    c.check(&["SET", "zz", "1"], OK).await;
    d.expect_silence(50).await;
    // BCAST without a prefix: every key
    d.check(&["CLIENT", "TRACKING", "off"], OK).await;
    d.check(&["CLIENT", "TRACKING", "on", "BCAST"], OK).await;
    c.check(&["SET", "anything", "1"], OK).await;
    d.expect(&invalidate(&["anything"])).await;
    let stats = c.cmd(&["INFO", "stats"]).await;
    assert!(
        stats.contains("\r\ntracking_total_prefixes:1\r\n"),
        "{stats}"
    );
    h.shutdown().await;
}

#[tokio::test]
async fn expiry_invalidates_on_the_servers_clock() {
    let h = start().await;
    let mut a = resp3(&h).await;
    let mut b = Raw::to(&h).await;
    a.check(&["CLIENT", "TRACKING", "on"], OK).await;
    b.check(&["SET", "lock", "me", "PX", "100"], OK).await;
    a.check(&["GET", "lock"], "$2\r\nme\r\n").await;
    h.advance(Duration::from_millis(100));
    a.expect_silence(50).await;
    // past the deadline the sweeper removes it: the reader is told
    h.advance(Duration::from_millis(1));
    a.expect(&invalidate(&["lock"])).await;

    // and lazily, when another client touches an expired key first
    b.check(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"], OK).await;
    b.check(&["SET", "lazy", "me", "PX", "100"], OK).await;
    a.check(&["GET", "lazy"], "$2\r\nme\r\n").await;
    h.advance(Duration::from_millis(101));
    a.expect_silence(50).await;
    b.check(&["GET", "lazy"], "$-1\r\n").await;
    a.expect(&invalidate(&["lazy"])).await;
    h.shutdown().await;
}

#[tokio::test]
async fn redirect_to_a_resp2_subscriber_and_a_broken_redirect() {
    let h = start().await;
    let mut target = Raw::to(&h).await;
    let target_id = id_of(&mut target).await;
    target
        .check(
            &["SUBSCRIBE", "__redis__:invalidate"],
            "*3\r\n$9\r\nsubscribe\r\n$20\r\n__redis__:invalidate\r\n:1\r\n",
        )
        .await;
    let mut a = resp3(&h).await;
    let mut w = Raw::to(&h).await;
    a.check(&["CLIENT", "TRACKING", "on", "REDIRECT", &target_id], OK)
        .await;
    a.check(&["CLIENT", "GETREDIR"], &int(target_id.parse().unwrap()))
        .await;
    a.check(&["GET", "r"], "_\r\n").await;
    w.check(&["SET", "r", "1"], OK).await;
    target
        .expect("*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*1\r\n$1\r\nr\r\n")
        .await;
    a.expect_silence(50).await;
    w.check(&["FLUSHALL"], OK).await;
    // (redis-server 7.0 writes this null in the tracking client's protocol, `_`, even
    // to a RESP2 target; we write the target's own, which a RESP2 parser reads)
    target
        .expect("*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n$-1\r\n")
        .await;

    drop(target);
    // the target is gone: the RESP3 client is told once
    let gone = async {
        loop {
            let list = w.cmd(&["CLIENT", "LIST"]).await;
            if !list.contains(&format!("id={target_id} ")) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    };
    tokio::time::timeout(TIMEOUT, gone)
        .await
        .expect("target gone");
    a.check(&["GET", "r"], "_\r\n").await;
    w.check(&["SET", "r", "2"], OK).await;
    a.expect(&format!(
        ">2\r\n$21\r\ntracking-redir-broken\r\n:{target_id}\r\n"
    ))
    .await;
    a.check(&["GET", "r"], "$1\r\n2\r\n").await;
    w.check(&["SET", "r", "3"], OK).await;
    a.expect_silence(50).await;
    a.check(
        &["CLIENT", "TRACKINGINFO"],
        &format!("%3\r\n$5\r\nflags\r\n~2\r\n$2\r\non\r\n$15\r\nbroken_redirect\r\n$8\r\nredirect\r\n:{target_id}\r\n$8\r\nprefixes\r\n*0\r\n"),
    )
    .await;
    let info = a.cmd(&["CLIENT", "INFO"]).await;
    assert!(
        info.contains(" flags=tR ") && info.contains(&format!(" redir={target_id} ")),
        "{info}"
    );
    h.shutdown().await;
}

#[tokio::test]
async fn info_counts_and_tracking_off_on_reset_and_disconnect() {
    let h = start().await;
    let mut a = resp3(&h).await;
    let mut b = resp3(&h).await;
    let mut o = Raw::to(&h).await;
    a.check(&["CLIENT", "TRACKING", "on"], OK).await;
    b.check(
        &[
            "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "x", "PREFIX", "y",
        ],
        OK,
    )
    .await;
    a.check(&["MGET", "k1", "k2"], "*2\r\n_\r\n_\r\n").await;
    let fields = |info: &str| -> Vec<String> {
        info.split("\r\n")
            .filter(|l| l.starts_with("tracking_"))
            .map(str::to_string)
            .collect()
    };
    let all = o.cmd(&["INFO", "everything"]).await;
    assert_eq!(
        fields(&all),
        [
            "tracking_clients:2",
            "tracking_total_keys:2",
            "tracking_total_items:2",
            "tracking_total_prefixes:2"
        ]
    );
    a.check(&["RESET"], "+RESET\r\n").await;
    a.check(
        &["CLIENT", "TRACKINGINFO"],
        "*6\r\n$5\r\nflags\r\n*1\r\n$3\r\noff\r\n$8\r\nredirect\r\n:-1\r\n$8\r\nprefixes\r\n*0\r\n",
    )
    .await;
    o.check(&["SET", "k1", "v"], OK).await;
    drop(b);
    let settled = async {
        loop {
            let all = o.cmd(&["INFO", "everything"]).await;
            if fields(&all)[0] == "tracking_clients:0" {
                return fields(&all);
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    };
    let after = tokio::time::timeout(TIMEOUT, settled)
        .await
        .expect("b gone");
    // k2 is still in the table (Redis forgets a reader only when the key changes)
    assert_eq!(
        after,
        [
            "tracking_clients:0",
            "tracking_total_keys:1",
            "tracking_total_items:1",
            "tracking_total_prefixes:0"
        ]
    );
    h.shutdown().await;
}

/// One scenario's frames, as a client sees them (`:<id>` for the redirect target's id
/// where a reply gives it).
async fn transcript(node: &impl Addressed) -> Vec<String> {
    let mut out = Vec::new();
    let mut a = resp3(node).await;
    let mut b = Raw::to(node).await;
    let mut t = Raw::to(node).await;
    let tid = id_of(&mut t).await;
    let id_reply = format!(":{tid}\r\n");
    let mut step = |label: &str, frame: String| {
        let frame = if label == "b-redir" {
            frame.replace(&id_reply, ":<id>\r\n")
        } else {
            frame
        };
        out.push(format!("{label}: {frame}"))
    };
    step("b", b.cmd(&["FLUSHALL"]).await);
    step("t", t.cmd(&["SUBSCRIBE", "__redis__:invalidate"]).await);
    for args in [
        &["CLIENT", "TRACKING", "on"][..],
        &["MGET", "a", "b", "c"],
        &["CLIENT", "TRACKINGINFO"],
    ] {
        step("a", a.cmd(args).await);
    }
    step("b", b.cmd(&["MSET", "b", "1", "a", "1"]).await);
    step("a", a.reply().await);
    step("a", a.reply().await);
    step("a", a.cmd(&["SET", "c", "1"]).await);
    step("a", a.reply().await);
    step("a", a.cmd(&["GET", "c"]).await);
    step("b", b.cmd(&["SET", "c", "2", "NX"]).await);
    step("b", b.cmd(&["INCR", "c"]).await);
    step("a", a.reply().await);
    for args in [
        &["CLIENT", "TRACKING", "off"][..],
        &[
            "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "u:", "NOLOOP",
        ],
        &["SET", "u:self", "1"],
        &["CLIENT", "TRACKINGINFO"],
    ] {
        step("a", a.cmd(args).await);
    }
    step(
        "b",
        b.cmd(&["MSET", "u:2", "1", "u:1", "1", "v", "1"]).await,
    );
    step("a", a.reply().await);
    let redirect = ["CLIENT", "TRACKING", "on", "REDIRECT", tid.as_str()];
    step("b", b.cmd(&redirect).await);
    step("b", b.cmd(&["GET", "r"]).await);
    step("a", a.cmd(&["SET", "r", "x"]).await);
    step("t", t.reply().await);
    step("b-redir", b.cmd(&["CLIENT", "GETREDIR"]).await);
    step("b-redir", b.cmd(&["CLIENT", "TRACKINGINFO"]).await);
    // Broadcast: a whole transaction's changes under a prefix are one message.
    for args in [
        &["CLIENT", "TRACKING", "off"][..],
        &[
            "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "m:", "PREFIX", "n:",
        ],
    ] {
        step("a", a.cmd(args).await);
    }
    for args in [
        &["MULTI"][..],
        &["SET", "m:1", "1"],
        &["SET", "n:1", "1"],
        &["SET", "m:2", "1"],
        &["SET", "o:1", "1"],
        &["EXEC"],
    ] {
        step("b", b.cmd(args).await);
    }
    step("a", a.reply().await);
    step("a", a.reply().await);
    // A script that reads tracks its declared keys; one that reads nothing tracks
    // nothing (had it, the first MSET's invalidations would come first).
    for args in [
        &["CLIENT", "TRACKING", "off"][..],
        &["CLIENT", "TRACKING", "on"],
        &["EVAL", "redis.call('set', 'x3', 'bar')", "2", "x1", "x2"],
    ] {
        step("a", a.cmd(args).await);
    }
    step("b", b.cmd(&["MSET", "x2", "1", "x1", "1"]).await);
    step(
        "a",
        a.cmd(&["EVAL", "return redis.call('get', 'x3')", "2", "x1", "x2"])
            .await,
    );
    step("b", b.cmd(&["MSET", "x2", "2", "x1", "2", "x3", "2"]).await);
    step("a", a.reply().await);
    step("a", a.reply().await);
    step("a", a.cmd(&["PING"]).await);
    out
}

#[tokio::test]
#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
async fn same_transcript_as_redis_server() {
    let redis = RedisNode::start(None);
    let ours = start_with(|c| c.clock = Some(redlockd::Clock::real())).await;
    let theirs = transcript(&redis).await;
    let mine = transcript(&ours).await;
    assert_eq!(mine, theirs);
    ours.shutdown().await;
}

/// Sends PING and returns every frame up to its PONG: the invalidations pushed before.
async fn pushes_then_pong(a: &mut Raw) -> Vec<String> {
    a.send_cmd(&["PING"]).await;
    let mut frames = Vec::new();
    for _ in 0..4 {
        let frame = a.reply().await;
        let pong = frame == "+PONG\r\n";
        frames.push(frame);
        if pong {
            break;
        }
    }
    frames
}

/// A subcommand that reads (XINFO STREAM / GROUPS / CONSUMERS, OBJECT ENCODING) tracks
/// its key as a read command does, directly and from a script; then a change by
/// another client invalidates it. (The changes are XADD and SET: redis-server 7.0
/// sends no invalidation for XGROUP's writes, redlockd does, as for any change.)
async fn subcommand_transcript(node: &impl Addressed) -> Vec<String> {
    let mut out = Vec::new();
    let mut a = resp3(node).await;
    let mut b = Raw::to(node).await;
    for args in [
        &["FLUSHALL"][..],
        &["XADD", "s", "1-0", "f", "v"],
        &["XGROUP", "CREATE", "s", "g", "0"],
        &["SET", "o", "12345"],
    ] {
        out.push(b.cmd(args).await);
    }
    out.push(a.cmd(&["CLIENT", "TRACKING", "on"]).await);
    // Each read, then another client's change to its key.
    let rounds: [(&[&str], &[&str]); 6] = [
        (&["XINFO", "GROUPS", "s"], &["XADD", "s", "2-0", "f", "v"]),
        (&["XINFO", "STREAM", "s"], &["XADD", "s", "3-0", "f", "v"]),
        (
            &["XINFO", "CONSUMERS", "s", "g"],
            &["XADD", "s", "4-0", "f", "v"],
        ),
        (
            &[
                "EVAL",
                "return #redis.call('XINFO', 'GROUPS', KEYS[1])",
                "1",
                "s",
            ],
            &["XADD", "s", "5-0", "f", "v"],
        ),
        (&["OBJECT", "ENCODING", "o"], &["SET", "o", "x"]),
        (&["XINFO", "HELP"], &["XADD", "s", "6-0", "f", "v"]),
    ];
    for (read, change) in rounds {
        let reply = a.cmd(read).await;
        // XINFO's replies are compared elsewhere (streams tests): their kind only.
        let reply = if read[0] == "XINFO" {
            reply[..1].to_string()
        } else {
            reply
        };
        out.push(format!("a {read:?}: {reply}"));
        out.push(format!("b {change:?}: {}", b.cmd(change).await));
        out.push(format!("a: {:?}", pushes_then_pong(&mut a).await));
    }
    out
}

#[tokio::test]
#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
async fn subcommand_reads_are_tracked_as_by_redis_server() {
    let redis = RedisNode::start(None);
    let ours = start_with(|c| c.clock = Some(redlockd::Clock::real())).await;
    let theirs = subcommand_transcript(&redis).await;
    let mine = subcommand_transcript(&ours).await;
    assert_eq!(mine, theirs);
    // Redis's own answer: the first XINFO read was tracked.
    assert_eq!(
        theirs[7],
        format!("a: {:?}", [invalidate(&["s"]), "+PONG\r\n".into()])
    );
    ours.shutdown().await;
}
