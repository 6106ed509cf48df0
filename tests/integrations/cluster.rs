//! Redis Cluster's protocol: the replies and errors of emulated mode compared with a
//! real redis-server started with `--cluster-enabled yes`, a configured 3-node map
//! (keys spread, MOVED, CROSSSLOT in commands, transactions and scripts, the map's
//! refusals, MOVED after a map change, the map persisted), and a slot moved while two
//! clients contend for a lock in it, checked for overlapping grants with the move's
//! fence on (none) and off (some: the checker can fail).

use crate::support;
use redlockd::config::ClusterMode as Mode;
use std::time::Duration;
use support::redis_server::RedisNode;
use support::*;

fn emulated(c: &mut Config) {
    c.cluster.mode = Mode::Emulated;
}

/// A 40-hex id for node `i` of a test map.
fn node_id(i: usize) -> String {
    format!("{:040x}", i + 1)
}

/// A map: (port, slot ranges) per node, ids from `node_id`.
fn map_json(version: u64, nodes: &[(u16, Vec<(u16, u16)>)]) -> String {
    let nodes: Vec<String> = nodes
        .iter()
        .enumerate()
        .map(|(i, (port, ranges))| {
            let ranges: Vec<String> = ranges.iter().map(|(a, b)| format!("[{a},{b}]")).collect();
            format!(
                r#"{{"id":"{}","host":"127.0.0.1","port":{port},"slots":[{}]}}"#,
                node_id(i),
                ranges.join(",")
            )
        })
        .collect();
    format!(r#"{{"version":{version},"nodes":[{}]}}"#, nodes.join(","))
}

/// `n` nodes in map mode sharing one manual clock, with ids `node_id(i)` and no map.
async fn map_nodes(n: usize) -> TestGroup {
    TestGroup::try_start_with(n, |i, mut c| {
        c.cluster.mode = Mode::Map;
        c.cluster.node_id = Some(node_id(i));
        c
    })
    .await
    .expect("map-mode nodes start")
}

/// The even three-way split, as `redlockd group` makes it.
fn thirds(nodes: &TestGroup, version: u64) -> String {
    let p = |i: usize| nodes.node(i).addr().port();
    map_json(
        version,
        &[
            (p(0), vec![(0, 5460)]),
            (p(1), vec![(5461, 10922)]),
            (p(2), vec![(10923, 16383)]),
        ],
    )
}

async fn setmap(node: &TestServer, json: &str) -> String {
    Raw::to(node).await.cmd(&["CLUSTER", "SETMAP", json]).await
}

/// A redis-server serving all 16384 slots alone: Redis's own emulated node.
async fn redis_single_node_cluster() -> RedisNode {
    // Redis Cluster's bus listens on port + 10000: on a port above 55535 redis-server
    // answers for a moment, then exits. Such a port is drawn again.
    let (node, conf) = loop {
        let conf = std::env::temp_dir().join(format!(
            "redlockd-cluster-test-{}-{:x}.conf",
            std::process::id(),
            rand::random::<u64>()
        ));
        let node = RedisNode::start_with_args(
            None,
            &[
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                conf.to_str().unwrap(),
            ],
        );
        if node.port <= 55535 {
            break (node, conf);
        }
        drop(node);
        let _ = std::fs::remove_file(conf);
    };
    let mut r = Raw::to(&node).await;
    assert_eq!(r.cmd(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]).await, OK);
    wait_until("redis cluster_state:ok", TIMEOUT, || {
        std::process::Command::new("redis-cli")
            .args(["-p", &node.port.to_string(), "cluster", "info"])
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("cluster_state:ok"))
    })
    .await;
    let _ = std::fs::remove_file(conf);
    node
}

/// Every reply and error of emulated mode is redis-server's, byte for byte, once the
/// node's own id, address and port are put in place of Redis's.
#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn emulated_replies_match_redis_cluster() {
    let redis = redis_single_node_cluster().await;
    let ours = start_with(emulated).await;
    let mut r = Raw::to(&redis).await;
    let mut o = Raw::to(&ours).await;
    let their_id = r.cmd(&["CLUSTER", "MYID"]).await;
    let our_id = o.cmd(&["CLUSTER", "MYID"]).await;
    assert_eq!(our_id.len(), their_id.len(), "{our_id}");
    // Redis does not know its own address on a one-node cluster: an empty host. Ours
    // is the bind address.
    let normalize_theirs = |s: String| {
        s.replace(&their_id[5..45], "ID")
            .replace(&redis.port.to_string(), "PORT")
            .replace(&(u32::from(redis.port) + 10000).to_string(), "BUSPORT")
    };
    let normalize_ours = |s: String| {
        s.replace(&our_id[5..45], "ID")
            .replace(&ours.addr().port().to_string(), "PORT")
            .replace(
                &(u32::from(ours.addr().port()) + 10000).to_string(),
                "BUSPORT",
            )
            .replace("$9\r\n127.0.0.1\r\n", "$0\r\n\r\n")
            .replace("ID 127.0.0.1:", "ID :")
            .replace("$103\r\n", "$94\r\n")
            .replace("=107\r\n", "=98\r\n")
    };
    let script_cross = "return redis.call('mget','{x}a','b')";
    let cases: Vec<Vec<&str>> = vec![
        vec!["CLUSTER", "SLOTS"],
        vec!["CLUSTER", "SHARDS"],
        vec!["CLUSTER", "NODES"],
        vec!["CLUSTER", "INFO"],
        vec!["CLUSTER", "KEYSLOT", "foo"],
        vec!["CLUSTER", "KEYSLOT", "{user1}a"],
        vec!["CLUSTER", "KEYSLOT", "a{}{b}"],
        vec!["CLUSTER", "KEYSLOT"],
        vec!["CLUSTER", "KEYSLOT", "a", "b"],
        vec!["CLUSTER", "COUNTKEYSINSLOT", "16384"],
        vec!["CLUSTER", "COUNTKEYSINSLOT", "-1"],
        vec!["CLUSTER", "COUNTKEYSINSLOT", "x"],
        vec!["CLUSTER", "GETKEYSINSLOT", "1", "-1"],
        vec!["CLUSTER", "GETKEYSINSLOT", "16384", "1"],
        vec!["CLUSTER", "GETKEYSINSLOT", "1", "x"],
        vec!["CLUSTER", "GETKEYSINSLOT", "1"],
        vec!["CLUSTER", "LINKS"],
        vec!["CLUSTER", "FOO"],
        vec!["CLUSTER"],
        vec!["READONLY"],
        vec!["READWRITE"],
        vec!["ASKING"],
        vec!["READONLY", "x"],
        vec!["MSET", "a", "1", "b", "2"],
        vec!["MSET", "{a}1", "1", "{a}2", "2"],
        vec!["CLUSTER", "COUNTKEYSINSLOT", "15495"],
        vec!["CLUSTER", "GETKEYSINSLOT", "15495", "10"],
        vec!["DEL", "a", "{a}1", "{a}2"],
        vec!["MULTI"],
        vec!["SET", "foo", "1"],
        vec!["SET", "bar", "2"],
        vec!["EXEC"],
        vec!["EXEC"],
        vec!["MULTI"],
        vec!["MSET", "a", "1", "b", "2"],
        vec!["EXEC"],
        vec!["MULTI"],
        vec!["SET", "{x}a", "1"],
        vec!["GET", "{x}b"],
        vec!["EXEC"],
        vec!["EVAL", "return 1", "2", "a", "b"],
        vec!["EVAL", "return 1", "2", "{t}a", "{t}b"],
        vec!["EVAL", script_cross, "0"],
        vec!["EVAL", "return redis.pcall('mget','{x}a','b')", "0"],
        vec![
            "EVAL",
            "redis.call('get','a'); return redis.call('get','b')",
            "0",
        ],
        vec!["WATCH", "a", "b"],
        vec!["SELECT", "1"],
        vec!["SELECT", "0"],
        vec!["DEL", "{x}a"],
    ];
    for case in &cases {
        let theirs = normalize_theirs(r.cmd(case).await);
        let mine = normalize_ours(o.cmd(case).await);
        if case[0] == "CLUSTER" && case.get(1) == Some(&"GETKEYSINSLOT") {
            assert_eq!(sorted_bulks(&mine), sorted_bulks(&theirs), "{case:?}");
            continue;
        }
        assert_eq!(unsha(&mine), unsha(&theirs), "{case:?}");
    }
    // INFO's cluster section and HELLO's mode.
    let info = o.cmd(&["INFO", "cluster"]).await;
    assert!(
        info.contains("# Cluster\r\ncluster_enabled:1\r\n"),
        "{info}"
    );
    let hello = o.cmd(&["HELLO", "3"]).await;
    assert!(hello.contains("$4\r\nmode\r\n$7\r\ncluster\r\n"), "{hello}");
    // RESP3: CLUSTER NODES and INFO are verbatim strings, SLOTS' metadata a map.
    r.cmd(&["HELLO", "3"]).await;
    for case in [
        ["CLUSTER", "NODES"],
        ["CLUSTER", "SLOTS"],
        ["CLUSTER", "INFO"],
    ] {
        let theirs = normalize_theirs(r.cmd(&case).await);
        let mine = normalize_ours(o.cmd(&case).await);
        assert_eq!(mine, theirs, "{case:?} over RESP3");
    }
}

/// Off (the default): Redis's standalone answers, and no CROSSSLOT ever (Redisson's
/// single-server mode takes a CROSSSLOT for a cluster).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn off_mode_is_a_standalone_node() {
    let node = start().await;
    let mut o = Raw::to(&node).await;
    let disabled = err("ERR This instance has cluster support disabled");
    o.check(&["CLUSTER", "INFO"], &disabled).await;
    o.check(&["READONLY"], &disabled).await;
    o.check(&["ASKING"], &disabled).await;
    o.check(
        &["CLUSTER", "FOO"],
        &err("ERR unknown subcommand 'FOO'. Try CLUSTER HELP."),
    )
    .await;
    o.check(&["MSET", "a", "1", "b", "2"], OK).await;
    let script = "redis.call('get',KEYS[1]) redis.call('get',KEYS[2])";
    o.check(&["EVAL", script, "2", "test1", "test2"], NIL).await;
    assert!(o
        .cmd(&["INFO", "cluster"])
        .await
        .contains("cluster_enabled:0\r\n"));
}

/// Three nodes with the even split: every node answers the same topology, keys land
/// on all three, a key asked of the wrong node gets MOVED to its owner, and
/// cross-slot requests get CROSSSLOT while hash-tagged ones work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_route_keys_by_slot() {
    let nodes = map_nodes(3).await;
    let mut before = Raw::to(nodes.node(0)).await;
    before
        .check(&["GET", "foo"], &err("CLUSTERDOWN Hash slot not served"))
        .await;
    assert!(before
        .cmd(&["CLUSTER", "INFO"])
        .await
        .contains("cluster_state:fail\r\n"));
    let map = thirds(&nodes, 1);
    for n in nodes.nodes() {
        assert_eq!(setmap(n, &map).await, OK);
    }
    let addr = |i: usize| nodes.node(i).addr().to_string();
    let slots = Raw::to(nodes.node(1))
        .await
        .cmd(&["CLUSTER", "SLOTS"])
        .await;
    let entry = |i: usize, a: u16, b: u16| {
        let port = nodes.node(i).addr().port();
        format!(
            "*3\r\n:{a}\r\n:{b}\r\n*4\r\n$9\r\n127.0.0.1\r\n:{port}\r\n$40\r\n{}\r\n*0\r\n",
            node_id(i)
        )
    };
    assert_eq!(
        slots,
        format!(
            "*3\r\n{}{}{}",
            entry(0, 0, 5460),
            entry(1, 5461, 10922),
            entry(2, 10923, 16383)
        )
    );
    let nodes_text = Raw::to(nodes.node(1))
        .await
        .cmd(&["CLUSTER", "NODES"])
        .await;
    let port = |i: usize| nodes.node(i).addr().port();
    let expected = format!(
        "{} {}@{} master - 0 0 1 connected 0-5460\n{} {}@{} myself,master - 0 0 1 connected 5461-10922\n{} {}@{} master - 0 0 1 connected 10923-16383\n",
        node_id(0), addr(0), port(0) + 10000,
        node_id(1), addr(1), port(1) + 10000,
        node_id(2), addr(2), port(2) + 10000,
    );
    assert_eq!(nodes_text, bulk(&expected));
    let mut n0 = Raw::to(nodes.node(0)).await;
    // foo: slot 12182 (node 2); b: 3300 (node 0); a: 15495 (node 2).
    n0.check(
        &["SET", "foo", "1"],
        &err(&format!("MOVED 12182 {}", addr(2))),
    )
    .await;
    n0.check(&["SET", "b", "1", "PX", "10000"], OK).await;
    n0.check(
        &["MSET", "a", "1", "b", "2"],
        &err("CROSSSLOT Keys in request don't hash to the same slot"),
    )
    .await;
    // Spread: 300 keys, each set on its owner after following MOVED.
    let mut conns = [
        Raw::to(nodes.node(0)).await,
        Raw::to(nodes.node(1)).await,
        Raw::to(nodes.node(2)).await,
    ];
    let mut per_node = [0; 3];
    for i in 0..300 {
        let key = format!("k{i}");
        let reply = conns[0].cmd(&["SET", &key, "v", "PX", "20000"]).await;
        let owner = if reply == OK {
            0
        } else {
            let target = reply.trim_end().rsplit(' ').next().unwrap().to_string();
            let owner = (0..3)
                .find(|&j| addr(j) == target)
                .expect("MOVED to a node");
            assert_eq!(
                conns[owner].cmd(&["SET", &key, "v", "PX", "20000"]).await,
                OK
            );
            owner
        };
        per_node[owner] += 1;
    }
    assert!(per_node.iter().all(|&n| n > 70), "{per_node:?}");
    // A transaction on hash-tagged keys runs; one over two slots is discarded with
    // CROSSSLOT; a script's cross-slot call gets Redis's script error.
    let mut n2 = Raw::to(nodes.node(2)).await; // {t}: slot 15891
    n2.check(&["MULTI"], OK).await;
    n2.check(&["SET", "{t}a", "1", "PX", "10000"], "+QUEUED\r\n")
        .await;
    n2.check(&["GET", "{t}b"], "+QUEUED\r\n").await;
    n2.check(&["EXEC"], &format!("*2\r\n{OK}{NIL}")).await;
    n2.check(&["MULTI"], OK).await;
    n2.check(&["SET", "{t}a", "1"], "+QUEUED\r\n").await;
    n2.check(&["SET", "a", "1"], "+QUEUED\r\n").await;
    n2.check(
        &["EXEC"],
        &err("CROSSSLOT Keys in request don't hash to the same slot"),
    )
    .await;
    n2.check(&["EXEC"], &err("ERR EXEC without MULTI")).await;
    let reply = n2.cmd(&["EVAL", "return redis.call('get','b')", "0"]).await;
    assert_eq!(
        unsha(&reply),
        err("ERR Script attempted to access a non local key in a cluster node script: SHA, on @user_script:1.")
    );
    let info = n2.cmd(&["INFO", "cluster"]).await;
    assert!(info.contains("cluster_map_version:1\r\n"), "{info}");
    assert!(info.contains("cluster_crossslot_replies:1\r\n"), "{info}");
}

/// The map's refusals: malformed, not newer, slots left unassigned (unless FORCE);
/// the node keeps serving its map after each. A map change moves a slot: the old
/// owner answers MOVED at once, the new one serves after the fence, and the map
/// survives a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn map_changes_are_checked_and_clients_get_moved() {
    let nodes = map_nodes(3).await;
    let v1 = thirds(&nodes, 1);
    for n in nodes.nodes() {
        assert_eq!(setmap(n, &v1).await, OK);
    }
    let mut n0 = Raw::to(nodes.node(0)).await;
    let refusals = [
        ("{", "ERR invalid map: the map is not JSON: EOF while parsing an object at line 1 column 1"),
        (r#"{"version":2}"#, "ERR invalid map: \"nodes\" must be a non-empty array"),
        (
            &v1.replace("[0,5460]", "[0,5459]").replace("[5461,10922]", "[5460,10922]"),
            "ERR map refused: map version 1 is not newer than this node's 1",
        ),
        (
            &thirds(&nodes, 2).replace("[10923,16383]", "[10923,16382]"),
            "ERR invalid map: 1 slots are not assigned to any node (first: 16383); add FORCE to accept a map with slots nobody serves",
        ),
        (
            &thirds(&nodes, 2).replace("[5461,10922]", "[5460,10922]"),
            "ERR invalid map: slot 5460 is assigned twice (nodes 0 and 1)",
        ),
    ];
    for (map, expected) in refusals {
        n0.check(&["CLUSTER", "SETMAP", map], &err(expected)).await;
    }
    n0.check(&["CLUSTER", "SETMAP", &v1, "NOW"], &err("ERR syntax error"))
        .await;
    // The same map again (a retried push) is accepted and changes nothing.
    n0.check(&["CLUSTER", "SETMAP", &v1], OK).await;
    // GETMAP: the map, with what each node published (max-ttl, token bound) as far
    // as this node has heard: its own entry always.
    let map = n0.cmd(&["CLUSTER", "GETMAP"]).await;
    assert!(map.contains(r#""max_ttl_ms":30000"#), "{map}");
    assert_eq!(without_facts(&map), bulk(&redlockd_map_json(&nodes, 1)));
    // FORCE: slot 16383 served by nobody.
    let gap = thirds(&nodes, 2).replace("[10923,16383]", "[10923,16382]");
    for n in nodes.nodes() {
        assert_eq!(
            Raw::to(n)
                .await
                .cmd(&["CLUSTER", "SETMAP", &gap, "FORCE"])
                .await,
            OK
        );
    }
    // "{q}x" hashes to 16383? Find a key in slot 16383 by CLUSTER KEYSLOT.
    let key = (0..100_000)
        .map(|i| format!("k{i}"))
        .find(|k| redlockd::slot::key_slot(k.as_bytes()) == 16383)
        .unwrap();
    n0.check(&["GET", &key], &err("CLUSTERDOWN Hash slot not served"))
        .await;
    // Version 3 moves slot 0 (key "{b}0"... any key of slot 0) from node 0 to node 1.
    let key0 = (0..100_000)
        .map(|i| format!("k{i}"))
        .find(|k| redlockd::slot::key_slot(k.as_bytes()) == 0)
        .unwrap();
    n0.check(&["SET", &key0, "held", "PX", "10000"], OK).await;
    n0.check(&["CLUSTER", "COUNTKEYSINSLOT", "0"], &int(1))
        .await;
    let p = |i: usize| nodes.node(i).addr().port();
    let v3 = map_json(
        3,
        &[
            (p(0), vec![(1, 5460)]),
            (p(1), vec![(0, 0), (5461, 10922)]),
            (p(2), vec![(10923, 16383)]),
        ],
    );
    // Node 0 loses slot 0: its SETMAP moves the slot's keys to node 1 and pushes the
    // map there; the same map again on node 1 changes nothing.
    for n in nodes.nodes() {
        assert_eq!(setmap(n, &v3).await, OK);
    }
    let addr1 = nodes.node(1).addr().to_string();
    n0.check(&["GET", &key0], &err(&format!("MOVED 0 {addr1}")))
        .await;
    n0.check(&["CLUSTER", "COUNTKEYSINSLOT", "0"], &int(0))
        .await;
    n0.check(&["DBSIZE"], &int(0)).await;
    let mut n1 = Raw::to(nodes.node(1)).await;
    // The key moved with its TTL; the slot is not fenced (nothing was left behind).
    n1.check(&["GET", &key0], &bulk("held")).await;
    n1.check(&["PTTL", &key0], &int(10_000)).await;
    n1.check(&["SET", &key0, "mine", "NX", "PX", "10000"], NIL)
        .await;
    assert!(n1
        .cmd(&["INFO", "cluster"])
        .await
        .contains("cluster_slots_fenced:0\r\n"));
    nodes.advance(Duration::from_millis(10_001));
    n1.check(&["SET", &key0, "mine", "NX", "PX", "10000"], OK)
        .await;
}

/// A GETMAP reply without the fields nodes publish (`max_ttl_ms`, `token_bound`).
fn without_facts(reply: &str) -> String {
    let json = reply.split("\r\n").nth(1).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(json).unwrap();
    for n in v["nodes"].as_array_mut().unwrap() {
        let n = n.as_object_mut().unwrap();
        n.remove("max_ttl_ms");
        n.remove("token_bound");
    }
    bulk(&v.to_string())
}

/// The map and the fence of a slot taken over are persisted in the data directory: a
/// new process on it serves the same map, with the fence raised again for its full
/// length (the monotonic clock did not survive).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_map_and_its_fences_survive_a_restart() {
    let dir = TempPath::new("cluster-map");
    let config = |c: &mut Config| {
        c.cluster.mode = Mode::Map;
        c.cluster.node_id = Some(node_id(0));
        c.dir = Some(dir.0.clone());
    };
    let node = start_with(config).await;
    let me = node.addr().port();
    // Node 1 (port 1, never started) serves slot 0 at version 1, then gives it up.
    let v1 = map_json(1, &[(me, vec![(1, 16383)]), (1, vec![(0, 0)])])
        .replace(r#""port":1,"#, r#""port":1,"max_ttl_ms":30000,"#);
    // Node 1 leaves the map: this node alone confirms its map when it restarts.
    let v2 = map_json(2, &[(me, vec![(0, 16383)])]);
    assert_eq!(setmap(&node, &v1).await, OK);
    assert_eq!(setmap(&node, &v2).await, OK);
    let key0 = (0..100_000)
        .map(|i| format!("k{i}"))
        .find(|k| redlockd::slot::key_slot(k.as_bytes()) == 0)
        .unwrap();
    let mut c = Raw::to(&node).await;
    let map = c.cmd(&["CLUSTER", "GETMAP"]).await;
    node.advance(Duration::from_millis(1000));
    assert!(c
        .cmd(&["SET", &key0, "x", "PX", "1000"])
        .await
        .contains("another 30000 ms"));
    node.shutdown().await;
    let again = start_with(config).await;
    let mut c = Raw::to(&again).await;
    assert_eq!(c.cmd(&["CLUSTER", "GETMAP"]).await, map);
    assert!(c
        .cmd(&["SET", &key0, "x", "PX", "1000"])
        .await
        .contains("another 31000 ms"));
    // An older map file given at start does not replace the newer persisted map.
    let file = TempPath::new("cluster-map-file");
    std::fs::write(&file.0, &v1).unwrap();
    again.shutdown().await;
    let third = start_with(|c| {
        config(c);
        c.cluster.map_file = Some(file.0.clone());
    })
    .await;
    assert_eq!(Raw::to(&third).await.cmd(&["CLUSTER", "GETMAP"]).await, map);
}

/// The JSON CLUSTER GETMAP gives for `thirds`.
fn redlockd_map_json(nodes: &TestGroup, version: u64) -> String {
    let p = |i: usize| nodes.node(i).addr().port();
    let node = |i: usize, a: u16, b: u16| {
        format!(
            r#"{{"host":"127.0.0.1","id":"{}","port":{},"slots":[[{a},{b}]]}}"#,
            node_id(i),
            p(i)
        )
    };
    format!(
        r#"{{"nodes":[{},{},{}],"version":{version}}}"#,
        node(0, 0, 5460),
        node(1, 5461, 10922),
        node(2, 10923, 16383)
    )
}

/// One client of the contention test: its own connections and its own view of who
/// serves the lock's slot, updated by MOVED.
struct Contender {
    name: &'static str,
    conns: Vec<Raw>,
    addrs: Vec<String>,
    route: usize,
    /// The grant it holds: (granted at, valid until) on the shared clock.
    holding: Option<(u64, u64)>,
}

impl Contender {
    /// One command on the lock's owner, following MOVED (at most 3 hops).
    async fn send(&mut self, args: &[&str]) -> String {
        for _ in 0..3 {
            let reply = self.conns[self.route].cmd(args).await;
            let Some(rest) = reply.strip_prefix("-MOVED ") else {
                return reply;
            };
            let target = rest.trim_end().rsplit(' ').next().unwrap();
            self.route = self
                .addrs
                .iter()
                .position(|a| a == target)
                .expect("known node");
        }
        panic!("{}: too many redirections", self.name);
    }
}

/// Two clients contend for one lock (SET NX PX, released with DELIFEQ) in rounds one
/// second apart while its slot moves from node 0 to node 1. Returns the grant windows
/// that overlap (a grant lasts until its release succeeds, else until it expires).
async fn contend_across_a_move(fence: bool) -> Vec<String> {
    const TTL: u64 = 10_000;
    let nodes = map_nodes(2).await;
    let p = |i: usize| nodes.node(i).addr().port();
    let lock = "lock:orders";
    let slot = redlockd::slot::key_slot(lock.as_bytes());
    let v1 = map_json(1, &[(p(0), vec![(0, 16383)]), (p(1), vec![])]);
    for n in nodes.nodes() {
        assert_eq!(setmap(n, &v1).await, OK);
        // Off: no fence, and the old owner keeps the keys (no live move either).
        n.handle().set_cluster_move_fence(fence);
        n.handle().set_cluster_move_keys(fence);
    }
    let mut v2_ranges = Vec::new();
    if slot > 0 {
        v2_ranges.push((0, slot - 1));
    }
    if slot < 16383 {
        v2_ranges.push((slot + 1, 16383));
    }
    let v2 = map_json(2, &[(p(0), v2_ranges), (p(1), vec![(slot, slot)])]);
    let addrs: Vec<String> = nodes.nodes().iter().map(|n| n.addr().to_string()).collect();
    let mut clients = Vec::new();
    for name in ["A", "B"] {
        let mut conns = Vec::new();
        for n in nodes.nodes() {
            conns.push(Raw::to(n).await);
        }
        clients.push(Contender {
            name,
            conns,
            addrs: addrs.clone(),
            route: 0,
            holding: None,
        });
    }
    let mut windows: Vec<(&str, u64, u64)> = Vec::new();
    for round in 0..80u64 {
        if round == 3 {
            // The move: the old owner first, then the new one.
            assert_eq!(setmap(nodes.node(0), &v2).await, OK);
            assert_eq!(setmap(nodes.node(1), &v2).await, OK);
        }
        let now = nodes.clock().now_ms();
        for c in clients.iter_mut() {
            let me = c.name;
            match c.holding {
                // Holds for half its TTL, then releases.
                Some((at, until)) if now >= at + TTL / 2 => {
                    let released = c.send(&["DELIFEQ", lock, me]).await == int(1);
                    let end = if released { now.min(until) } else { until };
                    windows.push((me, at, end));
                    c.holding = None;
                }
                Some(_) => {}
                None => {
                    let ttl = TTL.to_string();
                    if c.send(&["SET", lock, me, "NX", "PX", &ttl]).await == OK {
                        c.holding = Some((now, now + TTL));
                    }
                }
            }
        }
        nodes.advance(Duration::from_secs(1));
    }
    for c in &clients {
        if let Some((at, until)) = c.holding {
            windows.push((c.name, at, until));
        }
    }
    assert!(
        windows.len() >= 4,
        "the clients kept getting the lock across the move: {windows:?}"
    );
    let mut overlaps = Vec::new();
    for (i, a) in windows.iter().enumerate() {
        for b in &windows[i + 1..] {
            if a.1 < b.2 && b.1 < a.2 {
                overlaps.push(format!("{a:?} and {b:?}"));
            }
        }
    }
    overlaps
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_moved_slot_never_grants_a_held_lock_twice() {
    let overlaps = contend_across_a_move(true).await;
    assert!(overlaps.is_empty(), "overlapping grants: {overlaps:?}");
}

/// The checker can fail: without the move's fence the new owner grants the lock the
/// old owner still holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_move_fence_the_checker_finds_overlaps() {
    let overlaps = contend_across_a_move(false).await;
    assert!(
        !overlaps.is_empty(),
        "the checker found no overlap without the fence"
    );
}
