//! The client against five in-process nodes on one manual clock: the majority and
//! validity rules, what a failed round leaves on the nodes, the reports in its errors,
//! and the fenced acquire. The nodes' TTLs run on the manual clock; the client's
//! validity on tokio's real one, so it is checked against bounds.

use super::*;
use crate::testing::TestGroup;

const TTL: Duration = Duration::from_secs(10);
/// TTL minus the drift allowance (1% + 2 ms): no validity can be longer.
const MOST: Duration = Duration::from_millis(10_000 - 102);
/// The validity a round on a loaded machine still leaves (it takes milliseconds).
const LEAST: Duration = Duration::from_secs(5);

/// A client whose per-node timeout leaves room for a loaded machine (the default, 50 ms
/// at most, can count a busy node as failed).
fn client(c: &TestGroup, fencing_tokens: bool) -> Redlock {
    Redlock::new(
        c.urls(),
        RedlockOptions {
            node_timeout: Some(Duration::from_millis(500)),
            retry_count: 0,
            fencing_tokens,
            ..RedlockOptions::default()
        },
    )
    .unwrap()
}

/// Runs one command on each node of `nodes`, in order.
async fn on<T: redis::FromRedisValue>(c: &TestGroup, nodes: &[usize], args: &[&str]) -> Vec<T> {
    let mut out = Vec::new();
    for &i in nodes {
        let client = redis::Client::open(c.node(i).url()).unwrap();
        // The crate's defaults (1 s to connect, 500 ms per reply) are met by a loaded
        // machine.
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(std::time::Duration::from_secs(10)))
            .set_response_timeout(Some(std::time::Duration::from_secs(10)));
        let mut con = client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .unwrap();
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        out.push(cmd.query_async(&mut con).await.unwrap());
    }
    out
}

const ALL: [usize; 5] = [0, 1, 2, 3, 4];

/// `acquire_within`, bounded: a wait that does not end is a failure, not a hang.
async fn within(rl: &Redlock, key: &[u8], wait: Duration) -> Result<Lock, RedlockError> {
    tokio::time::timeout(Duration::from_secs(30), rl.acquire_within(key, TTL, wait))
        .await
        .expect("acquire_within returns soon after its wait")
}

fn text(b: &[u8]) -> String {
    String::from_utf8(b.to_vec()).unwrap()
}

fn report(granted: usize, refused: usize, expired: bool) -> AttemptReport {
    AttemptReport {
        nodes: 5,
        granted,
        refused,
        failed: Vec::new(),
        expired,
    }
}

fn not_acquired(r: Result<Lock, RedlockError>) -> (u32, AttemptReport) {
    match r {
        Err(RedlockError::NotAcquired { attempts, last }) => (attempts, last),
        other => panic!("expected NotAcquired, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_is_held_on_every_node_with_its_ttl_and_released_everywhere() {
    let c = TestGroup::start(5).await;
    let rl = client(&c, false);
    let lock = rl.try_acquire(b"r", TTL).await.unwrap();
    assert_eq!(lock.resource(), b"r");
    assert_eq!(lock.ttl(), TTL);
    assert_eq!(lock.token(), None);
    assert_eq!(lock.value().len(), 2 * VALUE_BYTES);
    let validity = lock.validity();
    assert!(validity <= MOST && validity > LEAST, "{validity:?}");
    let value = text(lock.value());
    assert_eq!(on::<String>(&c, &ALL, &["GET", "r"]).await, vec![value; 5]);
    assert_eq!(on::<i64>(&c, &ALL, &["PTTL", "r"]).await, vec![10_000; 5]);
    assert_eq!(rl.release(&lock).await, 5);
    assert_eq!(on::<i64>(&c, &ALL, &["EXISTS", "r"]).await, vec![0; 5]);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_lock_is_refused_with_a_report_that_says_so() {
    let c = TestGroup::start(5).await;
    let (a, b) = (client(&c, false), client(&c, false));
    let held = a.try_acquire(b"r", TTL).await.unwrap();
    let err = b.try_acquire(b"r", TTL).await.unwrap_err();
    assert!(!err.nodes_unavailable());
    assert_eq!(
        err.to_string(),
        "lock not acquired after 1 attempt(s): 0/5 nodes granted (need 3), 5 held elsewhere, 0 failed"
    );
    assert_eq!(not_acquired(Err(err)), (1, report(0, 5, false)));
    assert_eq!(
        on::<String>(&c, &ALL, &["GET", "r"]).await,
        vec![text(held.value()); 5]
    );
    // Nothing was granted and every node answered: there is nothing to take back, so
    // no release round (no script) was sent.
    let stats: Vec<String> = on(&c, &ALL, &["INFO", "commandstats"]).await;
    for s in &stats {
        assert!(s.contains("cmdstat_set:calls=2,"), "{s}");
        assert!(!s.contains("cmdstat_eval"), "{s}");
    }
    // Retries: the first attempt and `retry_count` more, with a pause before each.
    let retrying = Redlock::new(
        c.urls(),
        RedlockOptions {
            node_timeout: Some(Duration::from_millis(500)),
            retry_count: 2,
            retry_delay: Duration::from_millis(20),
            retry_jitter: Duration::ZERO,
            ..RedlockOptions::default()
        },
    )
    .unwrap();
    let start = Instant::now();
    assert_eq!(
        not_acquired(retrying.acquire(b"r", TTL).await),
        (3, report(0, 5, false))
    );
    assert!(start.elapsed() >= Duration::from_millis(40));
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_of_five_is_a_majority_two_is_not_and_a_failed_round_cleans_up() {
    let c = TestGroup::start(5).await;
    let rl = client(&c, false);
    // Someone else holds "two" on nodes 0 and 1: the three others make a majority.
    on::<String>(&c, &[0, 1], &["SET", "two", "other", "PX", "10000"]).await;
    let lock = rl.try_acquire(b"two", TTL).await.unwrap();
    assert_eq!(
        on::<String>(&c, &[2, 3, 4], &["GET", "two"]).await,
        vec![text(lock.value()); 3]
    );
    // ... and "three" on nodes 0, 1 and 2: two grants are not enough, and they are
    // taken back.
    on::<String>(&c, &[0, 1, 2], &["SET", "three", "other", "PX", "10000"]).await;
    let (_, last) = not_acquired(rl.try_acquire(b"three", TTL).await);
    assert_eq!(last, report(2, 3, false));
    assert_eq!(
        on::<Option<String>>(&c, &ALL, &["GET", "three"]).await,
        [Some("other"), Some("other"), Some("other"), None, None].map(|v| v.map(String::from))
    );
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_three_nodes_down_the_nodes_are_unavailable_and_with_two_they_are_not() {
    let c = TestGroup::start(5).await;
    let (a, b) = (client(&c, false), client(&c, false));
    c.node(0).stop().await;
    c.node(1).stop().await;
    let held = a
        .try_acquire(b"r", TTL)
        .await
        .expect("3 of 5 nodes suffice");
    let err = b.try_acquire(b"r", TTL).await.unwrap_err();
    assert!(!err.nodes_unavailable(), "held on the 3 reachable: {err}");
    a.release(&held).await;
    c.node(2).stop().await;
    let err = b.try_acquire(b"r", TTL).await.unwrap_err();
    assert!(err.nodes_unavailable(), "{err}");
    let text = err.to_string();
    assert!(
        text.starts_with("lock not acquired after 1 attempt(s): 2/5 nodes granted (need 3), 0 held elsewhere, 3 failed; "),
        "{text}"
    );
    let (_, last) = not_acquired(Err(err));
    assert_eq!((last.granted, last.refused, last.failed.len()), (2, 0, 3));
    assert_eq!(
        on::<i64>(&c, &[3, 4], &["EXISTS", "r"]).await,
        vec![0, 0],
        "the two grants were taken back"
    );
    // The same from acquire_within, whose error is a timeout.
    let err = within(&b, b"r", Duration::ZERO).await.unwrap_err();
    assert!(err.nodes_unavailable(), "{err}");
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_lock_without_validity_left_and_a_ttl_below_1_ms_is_refused() {
    let c = TestGroup::start(5).await;
    let rl = client(&c, false);
    // 2 ms is all drift allowance: every node grants, and the lock is not held.
    let err = rl
        .try_acquire(b"r", Duration::from_millis(2))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "lock not acquired after 1 attempt(s): 5/5 nodes granted (need 3), 0 held elsewhere, 0 failed, validity used up before the majority was reached"
    );
    assert_eq!(not_acquired(Err(err)), (1, report(5, 0, true)));
    assert_eq!(on::<i64>(&c, &ALL, &["EXISTS", "r"]).await, vec![0; 5]);
    assert_eq!(
        rl.try_acquire(b"r", Duration::ZERO).await.unwrap_err(),
        RedlockError::Config("TTL must be at least 1 ms".into())
    );
    assert_eq!(
        not_acquired(rl.try_acquire(b"r", Duration::from_millis(1)).await),
        (1, report(5, 0, true))
    );
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extend_renews_a_valid_lock_and_refuses_a_lost_one() {
    let c = TestGroup::start(5).await;
    let (a, b) = (client(&c, false), client(&c, false));
    let mut lock = a.try_acquire(b"r", TTL).await.unwrap();
    c.advance(Duration::from_millis(6000));
    a.extend(&mut lock, Duration::from_secs(8)).await.unwrap();
    assert_eq!(on::<i64>(&c, &ALL, &["PTTL", "r"]).await, vec![8000; 5]);
    assert_eq!(lock.ttl(), Duration::from_secs(8));
    let validity = lock.validity();
    assert!(
        validity <= Duration::from_millis(8000 - 82) && validity > LEAST,
        "{validity:?}"
    );

    // Validity already over: refused without touching the nodes.
    let mut over = lock.clone();
    over.valid_until = Instant::now();
    c.advance(Duration::from_millis(1000));
    assert_eq!(a.extend(&mut over, TTL).await, Err(RedlockError::Lost));
    assert_eq!(on::<i64>(&c, &ALL, &["PTTL", "r"]).await, vec![7000; 5]);

    // An extension that leaves no validity is not one.
    let before = lock.valid_until();
    assert_eq!(
        a.extend(&mut lock, Duration::from_millis(2)).await,
        Err(RedlockError::Lost)
    );
    assert_eq!(lock.valid_until(), before, "left as it was");

    // Gone from three nodes: two extensions are not a majority.
    let mut lock = a.try_acquire(b"s", TTL).await.unwrap();
    on::<i64>(&c, &[0, 1, 2], &["DEL", "s"]).await;
    assert_eq!(a.extend(&mut lock, TTL).await, Err(RedlockError::Lost));

    // Expired and taken by another: the new holder's keys are left alone.
    let mut lock = a.try_acquire(b"t", TTL).await.unwrap();
    c.advance(Duration::from_millis(10_001));
    let other = b.try_acquire(b"t", TTL).await.unwrap();
    assert_eq!(a.extend(&mut lock, TTL).await, Err(RedlockError::Lost));
    assert_eq!(a.release(&lock).await, 0);
    assert_eq!(
        on::<String>(&c, &ALL, &["GET", "t"]).await,
        vec![text(other.value()); 5]
    );
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_within_retries_until_its_wait_is_over_and_no_longer() {
    let c = TestGroup::start(5).await;
    let a = client(&c, false);
    let b = Redlock::new(
        c.urls(),
        RedlockOptions {
            node_timeout: Some(Duration::from_millis(500)),
            retry_delay: Duration::from_millis(20),
            retry_jitter: Duration::ZERO,
            ..RedlockOptions::default()
        },
    )
    .unwrap();
    a.try_acquire(b"r", TTL).await.unwrap();
    let start = Instant::now();
    match within(&b, b"r", Duration::from_millis(200)).await {
        Err(RedlockError::Timeout {
            waited,
            attempts,
            last,
        }) => {
            assert!(waited >= Duration::from_millis(200), "{waited:?}");
            assert!(start.elapsed() >= Duration::from_millis(200));
            // A pause of 20 ms between attempts: at most 200 / 20 + 1 of them.
            assert!((2..=11).contains(&attempts), "{attempts}");
            assert_eq!(last, Some(report(0, 5, false)));
        }
        other => panic!("{other:?}"),
    }
    match within(&b, b"r", Duration::ZERO).await {
        Err(e @ RedlockError::Timeout { attempts: 1, .. }) => {
            let text = e.to_string();
            assert!(
                text.starts_with("timed out waiting for the lock after "),
                "{text}"
            );
            assert!(
                text.ends_with(
                    " ms (1 attempt(s)): 0/5 nodes granted (need 3), 5 held elsewhere, 0 failed"
                ),
                "{text}"
            );
        }
        other => panic!("{other:?}"),
    }
    c.advance(Duration::from_millis(10_001));
    within(&b, b"r", Duration::ZERO).await.unwrap();
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_locks_get_growing_tokens_and_failed_rounds_commit_nothing() {
    let c = TestGroup::start(5).await;
    let (a, b) = (client(&c, true), client(&c, true));
    let lock = a.try_acquire(b"r", TTL).await.unwrap();
    assert_eq!(lock.token(), Some(1));
    assert_eq!(lock.resource(), b"r");
    let validity = lock.validity();
    assert!(validity <= MOST && validity > LEAST, "{validity:?}");
    assert_eq!(on::<i64>(&c, &ALL, &["FENCING.MARK"]).await, vec![1; 5]);
    assert_eq!(on::<i64>(&c, &ALL, &["PTTL", "r"]).await, vec![10_000; 5]);
    assert_eq!(
        not_acquired(b.try_acquire(b"r", TTL).await),
        (1, report(0, 5, false))
    );
    // Refused everywhere: nothing to take back, no release round (no script).
    for s in on::<String>(&c, &ALL, &["INFO", "commandstats"]).await {
        assert!(s.contains("cmdstat_fencing.grant:calls=2,"), "{s}");
        assert!(!s.contains("cmdstat_eval"), "{s}");
    }
    assert_eq!(a.release(&lock).await, 5);
    let lock = b.try_acquire(b"r", TTL).await.unwrap();
    assert_eq!(lock.token(), Some(2));
    b.release(&lock).await;

    // Two grants of five: no commit, and the grants are taken back.
    on::<String>(&c, &[0, 1, 2], &["SET", "m", "other", "PX", "10000"]).await;
    assert_eq!(
        not_acquired(a.try_acquire(b"m", TTL).await),
        (1, report(2, 3, false))
    );
    assert_eq!(on::<i64>(&c, &[3, 4], &["EXISTS", "m"]).await, vec![0, 0]);
    // Every node grants, but no validity is left: no commit either.
    assert_eq!(
        not_acquired(a.try_acquire(b"v", Duration::from_millis(2)).await),
        (1, report(5, 0, true))
    );
    assert_eq!(on::<i64>(&c, &ALL, &["EXISTS", "v"]).await, vec![0; 5]);
    assert_eq!(on::<i64>(&c, &ALL, &["FENCING.MARK"]).await, vec![2; 5]);

    // With two nodes down, three commits make the token.
    c.node(3).stop().await;
    c.node(4).stop().await;
    let lock = a.try_acquire(b"d", TTL).await.unwrap();
    assert_eq!(lock.token(), Some(3));
    assert_eq!(
        on::<i64>(&c, &[0, 1, 2], &["FENCING.MARK"]).await,
        vec![3; 3]
    );
    c.shutdown().await;
}

/// A node that answers every command with `reply`, as a broken or hostile server
/// might; returns its address.
async fn answering(reply: &'static [u8]) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                // One reply per command: a command is an array, `*` at a line's start.
                let mut buf = [0u8; 4096];
                let mut at_line_start = true;
                while let Ok(n) = conn.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    for &b in &buf[..n] {
                        if at_line_start && b == b'*' && conn.write_all(reply).await.is_err() {
                            return;
                        }
                        at_line_start = b == b'\n';
                    }
                }
            });
        }
    });
    addr
}

/// Two nodes of five answer FENCING.GRANT with a negative mark, which no node hands
/// out: they count as failed, and the three others make the lock and its token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_answering_a_negative_mark_counts_as_failed() {
    let c = TestGroup::start(3).await;
    let mut nodes = c.urls();
    nodes.push(answering(b":-1\r\n").await);
    nodes.push(answering(b":-1\r\n").await);
    let rl = Redlock::new(
        nodes,
        RedlockOptions {
            node_timeout: Some(Duration::from_millis(500)),
            retry_count: 0,
            fencing_tokens: true,
            ..RedlockOptions::default()
        },
    )
    .unwrap();
    let lock = rl.try_acquire(b"r", TTL).await.unwrap();
    assert_eq!(lock.token(), Some(1));
    assert_eq!(
        on::<i64>(&c, &[0, 1, 2], &["FENCING.MARK"]).await,
        vec![1; 3]
    );
    c.shutdown().await;
}

/// Three nodes of five grant but never commit (they answer 0, as a node whose key
/// went between the phases does): two commits are not a majority, so no token and
/// no lock, and the report counts the three refusals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_majority_of_commits_there_is_no_token() {
    let c = TestGroup::start(2).await;
    let mut nodes = c.urls();
    for _ in 0..3 {
        nodes.push(answering(b":0\r\n").await);
    }
    let rl = Redlock::new(
        nodes,
        RedlockOptions {
            node_timeout: Some(Duration::from_millis(500)),
            retry_count: 0,
            fencing_tokens: true,
            ..RedlockOptions::default()
        },
    )
    .unwrap();
    assert_eq!(
        not_acquired(rl.try_acquire(b"r", TTL).await),
        (1, report(2, 3, false))
    );
    assert_eq!(on::<i64>(&c, &[0, 1], &["EXISTS", "r"]).await, vec![0, 0]);
    c.shutdown().await;
}
