//! Reconfiguring a cluster without two holders of a lock (issue 41): a node that
//! restarts with a saved map confirms it with the other nodes before serving; a slot
//! taken over is fenced for its old owner's published max-ttl, not the new owner's;
//! the new owner's token mark ends above the old owner's; a slot moved with
//! `CLUSTER SETMAP` on its owner (what `redlockd slots move` sends) moves with every
//! key, TTL and the token mark, and the lock's holder goes on at the new owner.

use crate::support;
use redlockd::config::ClusterMode as Mode;
use std::time::Duration;
use support::*;

/// A 40-hex id for node `i` of a test map.
fn node_id(i: usize) -> String {
    format!("{:040x}", i + 1)
}

/// One node of a test map: its port, its slot ranges, the max-ttl the map publishes.
type Entry = (u16, Vec<(u16, u16)>, Option<u64>);

/// A map, ids from `node_id`.
fn map_json(version: u64, nodes: &[Entry]) -> String {
    let nodes: Vec<String> = nodes
        .iter()
        .enumerate()
        .map(|(i, (port, ranges, ttl))| {
            let ranges: Vec<String> = ranges.iter().map(|(a, b)| format!("[{a},{b}]")).collect();
            let ttl = ttl.map_or(String::new(), |t| format!(r#","max_ttl_ms":{t}"#));
            format!(
                r#"{{"id":"{}","host":"127.0.0.1","port":{port},"slots":[{}]{ttl}}}"#,
                node_id(i),
                ranges.join(",")
            )
        })
        .collect();
    format!(r#"{{"version":{version},"nodes":[{}]}}"#, nodes.join(","))
}

fn map_mode(c: &mut Config, i: usize) {
    c.cluster.mode = Mode::Map;
    c.cluster.node_id = Some(node_id(i));
}

async fn setmap(node: &TestServer, json: &str) -> String {
    Raw::to(node).await.cmd(&["CLUSTER", "SETMAP", json]).await
}

/// A key of `slot`.
fn key_in(slot: u16) -> String {
    (0..1_000_000)
        .map(|i| format!("k{i}"))
        .find(|k| redlockd::slot::key_slot(k.as_bytes()) == slot)
        .unwrap()
}

/// r2: A is down while its slots are given to B; restarted with its saved map, A
/// serves nothing until it has asked B (no majority of the map: CLUSTERDOWN, said in
/// INFO and CLUSTER INFO), then takes B's newer map and sends clients to B.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_node_confirms_its_saved_map_before_serving() {
    let dir = TempPath::new("cluster-confirm");
    let config_a = |c: &mut Config| {
        map_mode(c, 0);
        c.dir = Some(dir.0.clone());
    };
    let a = start_with(config_a).await;
    let b = start_with(|c| map_mode(c, 1)).await;
    let (pa, pb) = (a.addr().port(), b.addr().port());
    let key = key_in(100);
    let v1 = map_json(
        1,
        &[(pa, vec![(0, 8191)], None), (pb, vec![(8192, 16383)], None)],
    );
    assert_eq!(setmap(&a, &v1).await, OK);
    assert_eq!(setmap(&b, &v1).await, OK);
    assert_eq!(
        Raw::to(&a)
            .await
            .cmd(&["SET", &key, "x", "PX", "500"])
            .await,
        OK
    );
    a.shutdown().await;
    // A is down: B takes its slots, fenced for what A published (30 s).
    let v2 = map_json(2, &[(pa, vec![], None), (pb, vec![(0, 16383)], None)]);
    assert_eq!(setmap(&b, &v2).await, OK);
    let mut cb = Raw::to(&b).await;
    let fenced = cb.cmd(&["SET", &key, "y", "PX", "500"]).await;
    assert!(fenced.contains("another 31000 ms"), "{fenced}");
    b.advance(Duration::from_millis(31_001));
    assert_eq!(cb.cmd(&["SET", &key, "y", "PX", "10000"]).await, OK);

    // B unreachable: A restarts with its saved v1 and serves no slot.
    b.stop().await;
    let a = start_with(config_a).await;
    let mut ca = Raw::to(&a).await;
    let refused = ca.cmd(&["SET", &key, "z", "PX", "10000"]).await;
    assert!(
        refused.starts_with("-CLUSTERDOWN The slot map is not confirmed"),
        "{refused}"
    );
    assert!(ca.cmd(&["GET", &key]).await.starts_with("-CLUSTERDOWN"));
    assert!(ca
        .cmd(&["INFO", "cluster"])
        .await
        .contains("cluster_map_confirmed:0"));
    assert!(ca
        .cmd(&["CLUSTER", "INFO"])
        .await
        .contains("cluster_state:fail"));
    // Keyless commands still run.
    assert_eq!(ca.cmd(&["PING"]).await, "+PONG\r\n");

    // B is back: A takes B's newer map and redirects.
    b.start_again().await;
    wait_until("A confirms its map", Duration::from_secs(10), || {
        a.handle().cluster_map_version() == 2
    })
    .await;
    let moved = ca.cmd(&["SET", &key, "z", "PX", "10000"]).await;
    assert_eq!(moved, format!("-MOVED 100 127.0.0.1:{pb}\r\n"));
    assert!(ca
        .cmd(&["INFO", "cluster"])
        .await
        .contains("cluster_map_confirmed:1"));
}

/// A restarted node whose map is current serves once a majority answers: here the
/// one other node of a two-node map.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_current_saved_map_is_confirmed_by_the_other_nodes() {
    let dir = TempPath::new("cluster-confirm-current");
    let config_a = |c: &mut Config| {
        map_mode(c, 0);
        c.dir = Some(dir.0.clone());
    };
    let a = start_with(config_a).await;
    let b = start_with(|c| map_mode(c, 1)).await;
    let (pa, pb) = (a.addr().port(), b.addr().port());
    let v1 = map_json(
        1,
        &[(pa, vec![(0, 8191)], None), (pb, vec![(8192, 16383)], None)],
    );
    assert_eq!(setmap(&a, &v1).await, OK);
    assert_eq!(setmap(&b, &v1).await, OK);
    a.shutdown().await;
    let a = start_with(config_a).await;
    let mut ca = Raw::to(&a).await;
    let key = key_in(100);
    assert_eq!(ca.cmd(&["SET", &key, "x", "PX", "500"]).await, OK);
    assert!(ca
        .cmd(&["INFO", "cluster"])
        .await
        .contains("cluster_map_confirmed:1"));
}

/// r14: the old owner runs --max-ttl 20s, the new owner 2s. The old owner is down
/// when its slot is taken: the slot is fenced for the old owner's published 20 s +
/// 1 s (learned when the new owner installed the first map), not the new owner's 2 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_slot_is_fenced_for_the_old_owners_max_ttl() {
    let nodes = TestGroup::try_start_with(2, |i, mut c| {
        map_mode(&mut c, i);
        c.max_ttl = Duration::from_secs(if i == 0 { 20 } else { 2 });
        c
    })
    .await
    .unwrap();
    let (a, b) = (nodes.node(0), nodes.node(1));
    let (pa, pb) = (a.addr().port(), b.addr().port());
    let v1 = map_json(
        1,
        &[(pa, vec![(0, 8191)], None), (pb, vec![(8192, 16383)], None)],
    );
    assert_eq!(setmap(a, &v1).await, OK);
    assert_eq!(setmap(b, &v1).await, OK);
    // What B learned is in its map: A's max-ttl, for a takeover.
    let map = Raw::to(b).await.cmd(&["CLUSTER", "GETMAP"]).await;
    assert!(map.contains(r#""max_ttl_ms":20000"#), "{map}");
    let key = key_in(2906);
    assert_eq!(
        Raw::to(a)
            .await
            .cmd(&["SET", &key, "X", "NX", "PX", "20000"])
            .await,
        OK
    );
    a.stop().await;
    let v2 = map_json(
        2,
        &[
            (pa, vec![(0, 2905), (2907, 8191)], None),
            (pb, vec![(2906, 2906), (8192, 16383)], None),
        ],
    );
    assert_eq!(setmap(b, &v2).await, OK);
    nodes.advance(Duration::from_millis(3_100));
    let mut cb = Raw::to(b).await;
    let refused = cb.cmd(&["SET", &key, "Y", "NX", "PX", "2000"]).await;
    assert!(refused.contains("another 17900 ms"), "{refused}");
    nodes.advance(Duration::from_millis(17_901));
    assert_eq!(cb.cmd(&["SET", &key, "Y", "NX", "PX", "2000"]).await, OK);
}

/// An old owner that neither answers nor published its max-ttl: the map is refused
/// with the reason (the operator gives max_ttl_ms in its entry).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_needs_the_old_owners_max_ttl() {
    let b = start_with(|c| map_mode(c, 1)).await;
    let pb = b.addr().port();
    // Node 0 at port 1: never started.
    let v1 = map_json(
        1,
        &[(1, vec![(0, 8191)], None), (pb, vec![(8192, 16383)], None)],
    );
    assert_eq!(setmap(&b, &v1).await, OK);
    let v2 = map_json(2, &[(1, vec![], None), (pb, vec![(0, 16383)], None)]);
    let refused = setmap(&b, &v2).await;
    assert!(refused.contains("never published its max-ttl"), "{refused}");
    let v2 = map_json(2, &[(1, vec![], Some(5_000)), (pb, vec![(0, 16383)], None)]);
    assert_eq!(setmap(&b, &v2).await, OK);
    let mut cb = Raw::to(&b).await;
    let refused = cb.cmd(&["SET", &key_in(0), "y", "PX", "500"]).await;
    assert!(refused.contains("another 6000 ms"), "{refused}");
}

/// r4: the new owner's token mark ends above every token the old owner handed out,
/// not at `version << 40`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_new_owners_mark_passes_the_old_owners() {
    let nodes = TestGroup::try_start_with(2, |i, mut c| {
        map_mode(&mut c, i);
        c
    })
    .await
    .unwrap();
    let (a, b) = (nodes.node(0), nodes.node(1));
    let (pa, pb) = (a.addr().port(), b.addr().port());
    let v1 = map_json(
        1,
        &[(pa, vec![(0, 8191)], None), (pb, vec![(8192, 16383)], None)],
    );
    assert_eq!(setmap(a, &v1).await, OK);
    assert_eq!(setmap(b, &v1).await, OK);
    // A Redlock over clusters pushed A's mark past 3 << 40 (another cluster's tokens).
    let key = key_in(2906);
    let high = ((3u64 << 40) + 7).to_string();
    let mut ca = Raw::to(a).await;
    assert!(ca
        .cmd(&["FENCING.GRANT", &key, "h", "PX", "1000"])
        .await
        .starts_with(':'));
    assert_eq!(ca.cmd(&["FENCING.COMMIT", &key, "h", &high]).await, int(1));
    let v2 = map_json(
        2,
        &[
            (pa, vec![(0, 2905), (2907, 8191)], None),
            (pb, vec![(2906, 2906), (8192, 16383)], None),
        ],
    );
    assert_eq!(setmap(a, &v2).await, OK);
    assert_eq!(setmap(b, &v2).await, OK);
    let mark: u64 = Raw::to(b).await.cmd(&["FENCING.MARK"]).await[1..]
        .trim()
        .parse()
        .unwrap();
    assert!(mark >= (3u64 << 40) + 7, "B's mark {mark} is below A's");
}

/// r3: a live move keeps every key of the slot (a lock without a TTL, a lock with
/// one, a hash, a stream, a list, a set, a sorted set), with its remaining TTL; the
/// holder extends and releases on the new owner, a contender never gets the lock;
/// the old owner drops its copies; the new owner's mark passes the old one's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_move_carries_every_key_and_the_holder_goes_on() {
    let nodes = TestGroup::try_start_with(2, |i, mut c| {
        map_mode(&mut c, i);
        c
    })
    .await
    .unwrap();
    let (a, b) = (nodes.node(0), nodes.node(1));
    let (pa, pb) = (a.addr().port(), b.addr().port());
    let v1 = map_json(
        1,
        &[(pa, vec![(0, 8191)], None), (pb, vec![(8192, 16383)], None)],
    );
    assert_eq!(setmap(a, &v1).await, OK);
    assert_eq!(setmap(b, &v1).await, OK);
    let mut ca = Raw::to(a).await;
    // "job" is in slot 2906, and so is every "{job}..." key.
    ca.check(&["SET", "job", "X", "NX"], OK).await;
    ca.check(&["SET", "{job}ttl", "X", "NX", "PX", "20000"], OK)
        .await;
    ca.check(&["HSET", "{job}:cfg", "owner", "X", "n", "1"], &int(2))
        .await;
    assert!(ca
        .cmd(&["XADD", "{job}:events", "1-1", "e", "started"])
        .await
        .contains("1-1"));
    ca.check(&["RPUSH", "{job}:list", "a", "b"], &int(2)).await;
    ca.check(&["SADD", "{job}:set", "a"], &int(1)).await;
    ca.check(&["ZADD", "{job}:z", "1", "a"], &int(1)).await;
    // Other slots stay.
    let other = key_in(100);
    ca.check(&["SET", &other, "stays"], OK).await;
    let high = ((5u64 << 40) + 3).to_string();
    assert!(ca
        .cmd(&["FENCING.GRANT", "{job}f", "h", "PX", "1000"])
        .await
        .starts_with(':'));
    ca.check(&["FENCING.COMMIT", "{job}f", "h", &high], &int(1))
        .await;
    nodes.advance(Duration::from_millis(5_000));

    let v2 = map_json(
        2,
        &[
            (pa, vec![(0, 2905), (2907, 8191)], None),
            (pb, vec![(2906, 2906), (8192, 16383)], None),
        ],
    );
    // Only the old owner is told: it moves the keys and pushes the map to B.
    assert_eq!(setmap(a, &v2).await, OK);
    assert_eq!(b.handle().cluster_map_version(), 2);
    let info = ca.cmd(&["INFO", "cluster"]).await;
    assert!(info.contains("cluster_last_move_keys:7\r\n"), "{info}");
    ca.check(&["GET", "job"], &err(&format!("MOVED 2906 127.0.0.1:{pb}")))
        .await;
    ca.check(&["GET", &other], &bulk("stays")).await;
    ca.check(&["DBSIZE"], &int(1)).await;

    let mut cb = Raw::to(b).await;
    cb.check(&["GET", "job"], &bulk("X")).await;
    cb.check(&["PTTL", "job"], &int(-1)).await;
    cb.check(&["PTTL", "{job}ttl"], &int(15_000)).await;
    cb.check(&["HGET", "{job}:cfg", "owner"], &bulk("X")).await;
    cb.check(&["XLEN", "{job}:events"], &int(1)).await;
    cb.check(
        &["LRANGE", "{job}:list", "0", "-1"],
        "*2\r\n$1\r\na\r\n$1\r\nb\r\n",
    )
    .await;
    cb.check(&["SISMEMBER", "{job}:set", "a"], &int(1)).await;
    cb.check(&["ZSCORE", "{job}:z", "a"], &bulk("1")).await;
    // Not fenced: the contender is refused because the lock is held, the holder
    // extends and releases.
    cb.check(&["SET", "{job}ttl", "Y", "NX", "PX", "20000"], NIL)
        .await;
    cb.check(&["SET", "job", "Y", "NX"], NIL).await;
    cb.check(&["PEXPIRE", "{job}ttl", "20000"], &int(1)).await;
    cb.check(&["DELIFEQ", "{job}ttl", "X"], &int(1)).await;
    cb.check(&["SET", "{job}ttl", "Y", "NX", "PX", "20000"], OK)
        .await;
    let mark: u64 = cb.cmd(&["FENCING.MARK"]).await[1..].trim().parse().unwrap();
    assert!(mark >= (5u64 << 40) + 3, "B's mark {mark} is below A's");
}

/// A move whose new owner cannot be reached is refused: the old owner keeps the map,
/// the slot and every key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_to_an_unreachable_node_is_refused_and_keeps_the_keys() {
    let a = start_with(|c| map_mode(c, 0)).await;
    let pa = a.addr().port();
    let v1 = map_json(1, &[(pa, vec![(0, 16383)], None), (1, vec![], Some(1000))]);
    assert_eq!(setmap(&a, &v1).await, OK);
    let mut ca = Raw::to(&a).await;
    ca.check(&["SET", "job", "X"], OK).await;
    let v2 = map_json(
        2,
        &[
            (pa, vec![(0, 2905), (2907, 16383)], None),
            (1, vec![(2906, 2906)], Some(1000)),
        ],
    );
    let refused = setmap(&a, &v2).await;
    assert!(
        refused.starts_with("-ERR map refused: cannot move slots 2906-2906"),
        "{refused}"
    );
    assert_eq!(a.handle().cluster_map_version(), 1);
    ca.check(&["GET", "job"], &bulk("X")).await;
}

/// r5: a mode change is a move. A served every slot in emulated mode; restarted in map
/// mode with the cluster's first map, it publishes the slots it gave up, and the new
/// node B that serves them fences them for the rest of A's max-ttl + 1 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn emulated_to_map_fences_the_slots_the_node_gave_up() {
    let dir = TempPath::new("cluster-mode-change");
    let a = start_with(|c| {
        c.cluster.mode = Mode::Emulated;
        c.cluster.node_id = Some(node_id(0));
        c.dir = Some(dir.0.clone());
    })
    .await;
    let key = key_in(15495);
    Raw::to(&a)
        .await
        .check(&["SET", &key, "X", "NX", "PX", "20000"], OK)
        .await;
    a.shutdown().await;
    // B's port is taken first, so A's map file can name it.
    let b_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let a_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let v1 = map_json(
        1,
        &[
            (a_port, vec![(0, 8191)], None),
            (b_port, vec![(8192, 16383)], None),
        ],
    );
    let file = TempPath::new("cluster-mode-change-map");
    std::fs::write(&file.0, &v1).unwrap();
    let a = start_with(|c| {
        map_mode(c, 0);
        c.port = a_port;
        c.dir = Some(dir.0.clone());
        c.cluster.map_file = Some(file.0.clone());
    })
    .await;
    let b = start_with(|c| {
        map_mode(c, 1);
        c.port = b_port;
        c.cluster.map_file = Some(file.0.clone());
    })
    .await;
    Raw::to(&a)
        .await
        .check(
            &["GET", &key],
            &err(&format!("MOVED 15495 127.0.0.1:{b_port}")),
        )
        .await;
    let mut cb = Raw::to(&b).await;
    let refused = cb.cmd(&["SET", &key, "Y", "NX", "PX", "20000"]).await;
    assert!(refused.starts_with("-TRYAGAIN slot 15495"), "{refused}");
    assert!(cb
        .cmd(&["INFO", "cluster"])
        .await
        .contains("cluster_slots_fenced:8192\r\n"));
}

/// `redlockd slots move`: the operator's one command moves a slot with its keys to
/// another node, in the safe order, and says what it moved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlockd_slots_move_moves_a_slot_with_its_keys() {
    let nodes = TestGroup::try_start_with(2, |i, mut c| {
        map_mode(&mut c, i);
        c
    })
    .await
    .unwrap();
    let (a, b) = (nodes.node(0), nodes.node(1));
    let (pa, pb) = (a.addr().port(), b.addr().port());
    let v1 = map_json(
        1,
        &[(pa, vec![(0, 8191)], None), (pb, vec![(8192, 16383)], None)],
    );
    assert_eq!(setmap(a, &v1).await, OK);
    assert_eq!(setmap(b, &v1).await, OK);
    let mut ca = Raw::to(a).await;
    ca.check(&["SET", "job", "X", "NX", "PX", "20000"], OK)
        .await;
    ca.check(&["HSET", "{job}:cfg", "owner", "X"], &int(1))
        .await;
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_redlockd"))
            .args(["slots", "move", "--slots", "2906", "--to"])
            .arg(format!("127.0.0.1:{pb}"))
            .arg("--seed")
            .arg(format!("127.0.0.1:{pa}"))
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("moved slots 2906 from 127.0.0.1:"),
        "{stdout}"
    );
    assert!(stdout.contains(": 2 keys"), "{stdout}");
    assert!(
        stdout.contains("map version 2 on every node of the map"),
        "{stdout}"
    );
    assert_eq!(a.handle().cluster_map_version(), 2);
    assert_eq!(b.handle().cluster_map_version(), 2);
    let mut cb = Raw::to(b).await;
    cb.check(&["GET", "job"], &bulk("X")).await;
    cb.check(&["PTTL", "job"], &int(20_000)).await;
    cb.check(&["HGET", "{job}:cfg", "owner"], &bulk("X")).await;
    cb.check(&["SET", "job", "Y", "NX", "PX", "20000"], NIL)
        .await;
    ca.check(&["GET", "job"], &err(&format!("MOVED 2906 127.0.0.1:{pb}")))
        .await;
}

/// A node waiting to confirm its saved map (no other node answers) serves a map the
/// operator pushes: CLUSTER SETMAP is their word that it is current.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pushed_map_ends_the_wait_for_confirmation() {
    let dir = TempPath::new("cluster-confirm-push");
    let config_a = |c: &mut Config| {
        map_mode(c, 0);
        c.dir = Some(dir.0.clone());
    };
    let a = start_with(config_a).await;
    let pa = a.addr().port();
    // Node 1 (port 1) never answers.
    let v1 = map_json(
        1,
        &[
            (pa, vec![(0, 8191)], None),
            (1, vec![(8192, 16383)], Some(1000)),
        ],
    );
    assert_eq!(setmap(&a, &v1).await, OK);
    a.shutdown().await;
    let a = start_with(config_a).await;
    let mut ca = Raw::to(&a).await;
    let key = key_in(100);
    assert!(ca
        .cmd(&["GET", &key])
        .await
        .starts_with("-CLUSTERDOWN The slot map is not confirmed"));
    let v2 = map_json(
        2,
        &[
            (pa, vec![(0, 8191)], None),
            (1, vec![(8192, 16383)], Some(1000)),
        ],
    );
    assert_eq!(setmap(&a, &v2).await, OK);
    ca.check(&["GET", &key], NIL).await;
    assert!(ca
        .cmd(&["INFO", "cluster"])
        .await
        .contains("cluster_map_confirmed:1"));
}

/// Two map-mode nodes (A: slots 0-8191, B: the rest), each configured by `more`.
async fn two_nodes(more: impl Fn(usize, &mut Config) + Send + Sync + 'static) -> TestGroup {
    let nodes = TestGroup::try_start_with(2, move |i, mut c| {
        map_mode(&mut c, i);
        more(i, &mut c);
        c
    })
    .await
    .unwrap();
    let (pa, pb) = (nodes.node(0).addr().port(), nodes.node(1).addr().port());
    let v1 = map_json(
        1,
        &[(pa, vec![(0, 8191)], None), (pb, vec![(8192, 16383)], None)],
    );
    assert_eq!(setmap(nodes.node(0), &v1).await, OK);
    assert_eq!(setmap(nodes.node(1), &v1).await, OK);
    nodes
}

/// Moves slot 2906 ("job", "{job}...") from A to B, telling A only.
async fn move_job_slot(nodes: &TestGroup) {
    let (pa, pb) = (nodes.node(0).addr().port(), nodes.node(1).addr().port());
    let v2 = map_json(
        2,
        &[
            (pa, vec![(0, 2905), (2907, 8191)], None),
            (pb, vec![(2906, 2906), (8192, 16383)], None),
        ],
    );
    assert_eq!(setmap(nodes.node(0), &v2).await, OK);
    assert_eq!(nodes.node(1).handle().cluster_map_version(), 2);
}

/// The lock-delay moves with the slot: a lock moved live is still a lock on the new
/// owner (delayed when it runs out there), and a lock already run out and delayed
/// on the old owner stays refused on the new one for what was left of its delay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_carries_the_lock_delay() {
    let nodes = two_nodes(|_, c| c.lock_delay = Duration::from_secs(5)).await;
    let (a, b) = (nodes.node(0), nodes.node(1));
    let mut ca = Raw::to(a).await;
    ca.check(&["SET", "{job}ran-out", "X", "NX", "PX", "1000"], OK)
        .await;
    nodes.advance(Duration::from_millis(1_500));
    // Run out on A: delayed until 6000 ms.
    ca.check(&["SET", "{job}ran-out", "Y", "NX", "PX", "1000"], NIL)
        .await;
    ca.check(&["SET", "{job}held", "X", "NX", "PX", "1000"], OK)
        .await;
    ca.check(&["SET", "{job}cache", "X", "PX", "1000"], OK)
        .await;
    move_job_slot(&nodes).await;

    let mut cb = Raw::to(b).await;
    cb.check(&["GET", "{job}ran-out"], NIL).await;
    cb.check(&["SET", "{job}ran-out", "Y", "NX", "PX", "1000"], NIL)
        .await;
    let tryagain = cb.cmd(&["HSET", "{job}ran-out", "f", "1"]).await;
    assert!(
        tryagain.starts_with("-TRYAGAIN lock-delay: ") && tryagain.contains("another 4501 ms"),
        "{tryagain}"
    );
    nodes.advance(Duration::from_millis(1_500));
    // The moved lock ran out on B: delayed there too; the cache key was no lock.
    cb.check(&["SET", "{job}held", "Y", "NX", "PX", "1000"], NIL)
        .await;
    cb.check(&["SET", "{job}cache", "Y", "NX", "PX", "1000"], OK)
        .await;
    nodes.advance(Duration::from_millis(3_001));
    cb.check(&["SET", "{job}ran-out", "Y", "NX", "PX", "1000"], OK)
        .await;
    cb.check(&["SET", "{job}held", "Y", "NX", "PX", "1000"], NIL)
        .await;
    nodes.advance(Duration::from_millis(1_500));
    cb.check(&["SET", "{job}held", "Y", "NX", "PX", "1000"], OK)
        .await;
}

/// A move forgets nothing in a crash: the new owner has the moved durable keys in its
/// append-only log before the old owner drops them, and the old owner's log has the
/// drops, so a crash of either brings back each key on its owner only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moved_durable_keys_survive_a_crash_of_either_node() {
    let nodes = two_nodes(|_, c| c.aof.appendonly = true).await;
    let (a, b) = (nodes.node(0), nodes.node(1));
    let mut ca = Raw::to(a).await;
    ca.check(&["RPUSH", "{job}:queue", "job1", "job2"], &int(2))
        .await;
    ca.check(&["INCR", "{job}:token"], &int(1)).await;
    ca.check(&["HSET", "{job}:cfg", "owner", "X"], &int(1))
        .await;
    let other = key_in(100);
    ca.check(&["SET", &other, "stays"], OK).await;
    move_job_slot(&nodes).await;

    b.crash_restart();
    a.crash_restart();
    for node in [a, b] {
        wait_until("the map is confirmed", Duration::from_secs(10), || {
            node.handle().cluster_map_confirmed()
        })
        .await;
    }
    let mut cb = Raw::to(b).await;
    cb.check(
        &["LRANGE", "{job}:queue", "0", "-1"],
        "*2\r\n$4\r\njob1\r\n$4\r\njob2\r\n",
    )
    .await;
    cb.check(&["GET", "{job}:token"], &bulk("1")).await;
    cb.check(&["HGET", "{job}:cfg", "owner"], &bulk("X")).await;
    cb.check(&["DBSIZE"], &int(3)).await;
    let mut ca = Raw::to(a).await;
    ca.check(&["GET", &other], &bulk("stays")).await;
    ca.check(&["DBSIZE"], &int(1)).await;
}

/// Only the moving slot pauses: while the new owner takes its time to accept the keys,
/// the old owner answers commands on its other slots at once; a write to the moving
/// slot waits for the move and is then sent to the new owner (it never ran on the old
/// one), and so does a script (it may touch any key).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_moving_slot_pauses() {
    let nodes = two_nodes(|_, _| {}).await;
    let (a, b) = (nodes.node(0), nodes.node(1));
    let pb = b.addr().port();
    let other = key_in(100);
    let mut ca = Raw::to(a).await;
    ca.check(&["SET", "{job}held", "X", "NX", "PX", "20000"], OK)
        .await;
    ca.check(&["SET", &other, "stays"], OK).await;
    b.pause();
    let mover = {
        let nodes_a = a.addr();
        let (pa, pb) = (nodes_a.port(), pb);
        tokio::spawn(async move {
            let v2 = map_json(
                2,
                &[
                    (pa, vec![(0, 2905), (2907, 8191)], None),
                    (pb, vec![(2906, 2906), (8192, 16383)], None),
                ],
            );
            let mut c = Raw::connect(nodes_a).await;
            c.cmd(&["CLUSTER", "SETMAP", &v2]).await
        })
    };
    let mut info = Raw::to(a).await;
    for _ in 0..5000 {
        if info
            .cmd(&["INFO", "cluster"])
            .await
            .contains("cluster_slots_moving:1\r\n")
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    // The other slot: served while the move waits for B.
    ca.check(&["GET", &other], &bulk("stays")).await;
    ca.check(&["SET", &other, "changed"], OK).await;
    // The moving slot, and a script: they wait.
    let waiting = tokio::spawn({
        let addr = a.addr();
        async move {
            let mut c = Raw::connect(addr).await;
            c.cmd(&["SET", "{job}held", "Y", "XX"]).await
        }
    });
    let script = tokio::spawn({
        let addr = a.addr();
        let other = other.clone();
        async move {
            let mut c = Raw::connect(addr).await;
            c.cmd(&["EVAL", "return redis.call('GET', KEYS[1])", "1", &other])
                .await
        }
    });
    assert!(!waiting.is_finished() && !script.is_finished());
    b.resume().await;
    assert_eq!(mover.await.unwrap(), OK);
    assert_eq!(
        waiting.await.unwrap(),
        format!("-MOVED 2906 127.0.0.1:{pb}\r\n")
    );
    assert_eq!(script.await.unwrap(), bulk("changed"));
    let mut cb = Raw::to(b).await;
    cb.check(&["GET", "{job}held"], &bulk("X")).await;
    let info = ca.cmd(&["INFO", "cluster"]).await;
    assert!(info.contains("cluster_slots_moving:0\r\n"), "{info}");
}

/// Three map-mode nodes, a third of the slots each, with `node_timeout`.
async fn three_nodes(node_timeout: Duration) -> TestGroup {
    let nodes = TestGroup::try_start_with(3, move |i, mut c| {
        map_mode(&mut c, i);
        c.cluster.node_timeout = Some(node_timeout);
        c
    })
    .await
    .unwrap();
    let p: Vec<u16> = (0..3).map(|i| nodes.node(i).addr().port()).collect();
    let v1 = map_json(
        1,
        &[
            (p[0], vec![(0, 5460)], None),
            (p[1], vec![(5461, 10922)], None),
            (p[2], vec![(10923, 16383)], None),
        ],
    );
    for i in 0..3 {
        assert_eq!(setmap(nodes.node(i), &v1).await, OK);
    }
    nodes
}

/// Polls `node` with `args` (bounded, real time: the lease runs on it) until the
/// reply satisfies `done`; returns it.
async fn poll_until(node: &TestServer, args: &[&str], done: impl Fn(&str) -> bool) -> String {
    let mut c = Raw::to(node).await;
    let mut last = String::new();
    for _ in 0..2_000 {
        last = c.cmd(args).await;
        if done(&last) {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("{args:?} never gave the expected reply; last: {last}");
}

/// The lease (`cluster::lease`): a node that cannot reach a majority of its map's
/// nodes for the node timeout stops serving (CLUSTERDOWN, with the reason), and serves
/// again once a majority answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_cut_off_from_the_majority_stops_serving() {
    let nodes = three_nodes(Duration::from_millis(300)).await;
    let (a, b, c) = (nodes.node(0), nodes.node(1), nodes.node(2));
    let key = key_in(100);
    let mut ca = Raw::to(a).await;
    ca.check(&["SET", &key, "X", "NX", "PX", "20000"], OK).await;
    b.isolate().await;
    c.isolate().await;
    let down = poll_until(a, &["SET", &key, "Y", "NX", "PX", "20000"], |r| {
        r.starts_with("-CLUSTERDOWN")
    })
    .await;
    assert!(
        down.contains("has not reached a majority of its map's nodes"),
        "{down}"
    );
    assert!(Raw::to(a)
        .await
        .cmd(&["INFO", "cluster"])
        .await
        .contains("cluster_map_confirmed:0"));
    b.heal().await;
    poll_until(a, &["GET", &key], |r| r == bulk("X")).await;
    ca = Raw::to(a).await;
    ca.check(&["SET", &key, "Y", "NX", "PX", "20000"], NIL)
        .await;
    c.heal().await;
}

/// A takeover while the old owner was only cut off: the old owner learns the newer
/// map from the nodes it reaches (every renewal) and sends its clients on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_off_owner_learns_the_takeover_map() {
    let nodes = three_nodes(Duration::from_secs(5)).await;
    let (a, b, c) = (nodes.node(0), nodes.node(1), nodes.node(2));
    let p: Vec<u16> = (0..3).map(|i| nodes.node(i).addr().port()).collect();
    let key = key_in(100);
    Raw::to(a)
        .await
        .check(&["SET", &key, "X", "NX", "PX", "20000"], OK)
        .await;
    a.isolate().await;
    let v2 = map_json(
        2,
        &[
            (p[0], vec![], Some(30_000)),
            (p[1], vec![(0, 10922)], None),
            (p[2], vec![(10923, 16383)], None),
        ],
    );
    assert_eq!(setmap(b, &v2).await, OK);
    assert_eq!(setmap(c, &v2).await, OK);
    a.heal().await;
    let moved = poll_until(a, &["GET", &key], |r| r.starts_with("-MOVED")).await;
    assert_eq!(moved, format!("-MOVED 100 127.0.0.1:{}\r\n", p[1]));
    assert_eq!(a.handle().cluster_map_version(), 2);
}

/// The lease counts the map's slot owners: once a takeover map leaves a dead node
/// without slots, the last owner of a two-node map serves alone, past the node
/// timeout; before the takeover, alone, it stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_leaves_the_survivor_serving_past_the_timeout() {
    let nodes = two_nodes(|_, c| c.cluster.node_timeout = Some(Duration::from_millis(200))).await;
    let (a, b) = (nodes.node(0), nodes.node(1));
    let (pa, pb) = (a.addr().port(), b.addr().port());
    let key = key_in(9000);
    a.stop().await;
    // B alone, A still owning half the map: B stops for want of a majority.
    poll_until(b, &["GET", &key], |r| r.starts_with("-CLUSTERDOWN")).await;
    let v2 = map_json(
        2,
        &[(pa, vec![], Some(30_000)), (pb, vec![(0, 16383)], None)],
    );
    assert_eq!(setmap(b, &v2).await, OK);
    poll_until(b, &["GET", &key], |r| r == NIL).await;
    // Serving still after many node timeouts' worth of renewals.
    let mut cb = Raw::to(b).await;
    for _ in 0..200 {
        cb.check(&["GET", &key], NIL).await;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A node that stops cleanly says so (`CLUSTER LEAVING`): a takeover of its slots
/// fences for its max-ttl and the margin only; an owner that was only cut off gets the
/// node timeout on top (it may go on serving until its lease runs out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_stop_spares_the_takeover_the_node_timeout() {
    for clean in [true, false] {
        let timeout = |i: usize| {
            move |c: &mut Config| {
                map_mode(c, i);
                c.cluster.node_timeout = Some(Duration::from_secs(5));
            }
        };
        let a = start_with(timeout(0)).await;
        let b = start_with(timeout(1)).await;
        let (pa, pb) = (a.addr().port(), b.addr().port());
        let v1 = map_json(
            1,
            &[(pa, vec![(0, 8191)], None), (pb, vec![(8192, 16383)], None)],
        );
        assert_eq!(setmap(&a, &v1).await, OK);
        assert_eq!(setmap(&b, &v1).await, OK);
        if clean {
            a.shutdown().await;
        } else {
            a.isolate().await;
        }
        let v2 = map_json(
            2,
            &[(pa, vec![], Some(30_000)), (pb, vec![(0, 16383)], None)],
        );
        assert_eq!(setmap(&b, &v2).await, OK);
        let fenced = Raw::to(&b)
            .await
            .cmd(&["SET", &key_in(100), "y", "PX", "500"])
            .await;
        let left = if clean { 31_000 } else { 36_000 };
        assert!(
            fenced.contains(&format!("another {left} ms")),
            "clean stop {clean}: {fenced}"
        );
    }
}
