//! redis-lock (crates.io) against redlockd, with the crate's own calls:
//! - `MultiResourceLock` loads a FUNCTION library (`FUNCTION LOAD REPLACE`) and locks a
//!   set of resources with `FCALL acquire_lock` / `FCALL release_lock`; its functions use
//!   GET, SET EX, SCAN MATCH, DEL and cjson.
//! - `lock_across` is Redlock over N connections: SET NX PX, released by an EVAL
//!   compare-and-delete.
//!
//! A surprise worth knowing (README, "Clients"): redis-lock 0.5 passes the expiration in
//! milliseconds to a script that sets it with `EX` (seconds), so its default expiration of
//! one hour asks for `EX 3600000`, 41 days (1000 h). On a node with default flags such a
//! key is durable (docs/operations.md "Durable keys: the append-only log"): granted
//! whatever the max-ttl, kept across a crash. Only a node with the log off
//! (`appendonly no`) bounds it by `--max-ttl`.

use crate::support;

use redis027 as redis;
use redlockd::{Clock, Config};
use std::sync::Arc;
use std::time::Duration;
use support::nodes::{get, on_every_node, on_node, pttl, Nodes};
use support::{TestGroup, TestServer};
use tokio::sync::Mutex;

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// A connection of the `redis` version redis-lock is built on (0.27).
async fn connect(url: &str) -> redis::aio::MultiplexedConnection {
    let client = redis::Client::open(url).unwrap();
    client.get_multiplexed_async_connection().await.unwrap()
}

/// One node whose max-ttl admits the crate's default expiration (3,600,000 s).
async fn node_for_multilock() -> TestServer {
    let config = Config {
        max_ttl: Duration::from_secs(3_600_000),
        ..TestServer::config(Clock::manual())
    };
    TestServer::start_with(config).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_resource_lock_excludes_overlapping_sets_and_releases() {
    let node = node_for_multilock().await;
    let client = redis::Client::open(node.url()).unwrap();
    redis_lock::setup(&client).await.unwrap();
    // Loading twice is REPLACE, as the crate says it may be.
    redis_lock::setup(&client).await.unwrap();
    let mut lock = redis_lock::MultiResourceLock::new(client.clone()).unwrap();

    let ab = lock
        .try_acquire_default(&strings(&["a", "b"]))
        .await
        .unwrap()
        .expect("a free set of resources is granted");
    // Each resource key holds the holder and the whole set, as cjson wrote it.
    let held: serde_like::Held = serde_like::parse(&get(&node, 0, "lock:a").await.unwrap());
    assert_eq!(held.holder, ab);
    assert_eq!(held.resources, ["a", "b"]);
    assert_eq!(pttl(&node, 0, "lock:b").await, 3_600_000_000);

    // Any overlap is refused; a disjoint set is not.
    let overlap = lock
        .try_acquire_default(&strings(&["b", "c"]))
        .await
        .unwrap();
    assert_eq!(overlap, None);
    let d = lock
        .try_acquire_default(&strings(&["d"]))
        .await
        .unwrap()
        .expect("a disjoint set is granted");

    // release_lock finds the holder's keys with SCAN MATCH lock:* and deletes them.
    assert_eq!(lock.release(&ab).await.unwrap(), 2);
    assert_eq!(get(&node, 0, "lock:a").await, None);
    let bc = lock
        .try_acquire_default(&strings(&["b", "c"]))
        .await
        .unwrap()
        .expect("granted once the overlapping holder released");
    assert_eq!(lock.release(&bc).await.unwrap(), 2);
    assert_eq!(lock.release(&d).await.unwrap(), 1);
    assert_eq!(lock.release(&d).await.unwrap(), 0);

    // map_default: acquire, run, release.
    let out = lock
        .map_default(&strings(&["x", "y"]), async { 42 })
        .await
        .unwrap();
    assert_eq!(out, 42);
    assert_eq!(get(&node, 0, "lock:x").await, None);
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_resource_lock_expires_on_the_monotonic_clock() {
    let node = node_for_multilock().await;
    let client = redis::Client::open(node.url()).unwrap();
    redis_lock::setup(&client).await.unwrap();
    let mut lock = redis_lock::MultiResourceLock::new(client).unwrap();
    // 5 ms in the crate's units is EX 5: five seconds.
    let expiration = Duration::from_millis(5);
    let first = lock
        .try_acquire(&strings(&["r"]), expiration)
        .await
        .unwrap();
    assert!(first.is_some());
    node.advance(Duration::from_millis(4_999));
    assert_eq!(
        lock.try_acquire(&strings(&["r"]), expiration)
            .await
            .unwrap(),
        None
    );
    // As in Redis, a key is expired once the clock is past its deadline, not at it.
    node.advance(Duration::from_millis(2));
    assert!(lock
        .try_acquire(&strings(&["r"]), expiration)
        .await
        .unwrap()
        .is_some());
    node.shutdown().await;
}

/// A node with redlockd's default flags (max-ttl 5 min, the append-only log on, its
/// data directory declared new as `redlockd init` does), on a manual clock.
async fn node_with_default_flags() -> TestServer {
    TestServer::start_with(Config {
        port: 0,
        clock: Some(Clock::manual()),
        fence_at_boot: false,
        ..Config::default()
    })
    .await
}

/// The crate's defaults on a node with default flags: the 1000 h locks are granted,
/// survive a `kill -9` (they are in the log, with their deadlines) and still exclude
/// an overlapping set, and the holder releases them after the restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_resource_lock_default_expiration_on_default_flags_survives_a_crash() {
    let node = node_with_default_flags().await;
    let client = redis::Client::open(node.url()).unwrap();
    redis_lock::setup(&client).await.unwrap();
    let mut lock = redis_lock::MultiResourceLock::new(client.clone()).unwrap();
    let ab = lock
        .try_acquire_default(&strings(&["a", "b"]))
        .await
        .unwrap()
        .expect("the default expiration is granted on default flags");
    assert_eq!(pttl(&node, 0, "lock:a").await, 3_600_000_000);

    node.crash_restart();
    // The fence after a crash covers only memory-only keys (at most 61 s).
    node.advance(Duration::from_secs(62));
    let held: serde_like::Held = serde_like::parse(&get(&node, 0, "lock:b").await.unwrap());
    assert_eq!(held.holder, ab);
    let left = pttl(&node, 0, "lock:a").await;
    assert!(
        (3_600_000_000 - 62_000..=3_600_000_000).contains(&left),
        "{left}"
    );
    // The function library came back too: the crate's FCALLs work on the restarted
    // node without a new setup.
    let mut lock = redis_lock::MultiResourceLock::new(client).unwrap();
    assert_eq!(
        lock.try_acquire_default(&strings(&["b", "c"]))
            .await
            .unwrap(),
        None
    );
    assert_eq!(lock.release(&ab).await.unwrap(), 2);
    assert!(lock
        .try_acquire_default(&strings(&["b", "c"]))
        .await
        .unwrap()
        .is_some());
    node.shutdown().await;
}

/// With the log off (`appendonly no`) and a max-ttl of 30 s the crate's default
/// expiration is refused by the script's SET, and FCALL answers the error: nothing is
/// locked half-way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_resource_lock_default_expiration_is_above_max_ttl_without_the_log() {
    let node = TestServer::start().await;
    let client = redis::Client::open(node.url()).unwrap();
    redis_lock::setup(&client).await.unwrap();
    let mut lock = redis_lock::MultiResourceLock::new(client).unwrap();
    let err = lock
        .try_acquire_default(&strings(&["a", "b"]))
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("TTL of 3600000000 ms is above this server's max-ttl of 30000 ms"),
        "{text}"
    );
    assert_eq!(get(&node, 0, "lock:a").await, None);
    assert_eq!(get(&node, 0, "lock:b").await, None);
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_across_five_nodes_holds_a_majority_and_releases() {
    let group = TestGroup::start(5).await;
    let mut conns = Vec::new();
    for url in group.urls() {
        conns.push(Arc::new(Mutex::new(connect(&url).await)));
    }
    let options = redis_lock::LockAcrossOptions {
        ttl: Duration::from_secs(10),
        ..Default::default()
    };
    let addrs = Nodes::addrs(&group);
    let seen = redis_lock::lock_across(
        &conns,
        "acct",
        async move { on_every_node::<Option<String>>(&addrs, &["GET", "redlock:acct"]).await },
        options,
    )
    .await
    .unwrap();
    // Held on a majority while the closure ran, with one value: the crate stops waiting
    // for the other nodes once it has a quorum, so they may or may not have it.
    let value = seen
        .iter()
        .flatten()
        .next()
        .expect("held somewhere")
        .clone();
    let holders = seen.iter().filter(|v| v.as_ref() == Some(&value)).count();
    assert!(holders >= 3, "{seen:?}");
    assert!(seen.iter().flatten().all(|v| *v == value), "{seen:?}");
    assert_eq!(
        on_every_node::<Option<String>>(&group, &["GET", "redlock:acct"]).await,
        vec![None; 5]
    );

    // A second holder is refused while the first holds a majority.
    for i in 0..3 {
        on_node::<()>(
            &group,
            i,
            &["SET", "redlock:busy", "someone", "PX", "10000"],
        )
        .await;
    }
    let refused = redis_lock::lock_across(
        &conns,
        "busy",
        async {},
        redis_lock::LockAcrossOptions {
            ttl: Duration::from_secs(10),
            retry: Duration::from_millis(1),
            duration: Duration::from_millis(20),
        },
    )
    .await;
    assert!(
        matches!(refused, Err(redis_lock::LockAcrossError::Acquire(_))),
        "{refused:?}"
    );
    // The refused attempt left the holder's value alone.
    assert_eq!(
        get(&group, 0, "redlock:busy").await.as_deref(),
        Some("someone")
    );
    group.shutdown().await;
}

/// The crate stores `{"holder": id, "resources": [..]}` with cjson; a tiny reader for
/// exactly that shape keeps serde out of the dev-dependencies.
mod serde_like {
    pub struct Held {
        pub holder: String,
        pub resources: Vec<String>,
    }

    pub fn parse(json: &str) -> Held {
        let field = |name: &str| {
            let at = json.find(&format!("\"{name}\":")).expect(name) + name.len() + 3;
            &json[at..]
        };
        let holder = field("holder");
        let holder = holder[1..holder[1..].find('"').unwrap() + 1].to_string();
        let list = field("resources");
        let list = &list[1..list.find(']').unwrap()];
        let resources = list
            .split(',')
            .map(|s| s.trim_matches('"').to_string())
            .collect();
        Held { holder, resources }
    }
}
