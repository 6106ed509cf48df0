//! DUMP / RESTORE of streams beside redis-server 7.0: a stream of several nodes with
//! deletions, a trimmed start and consumer groups (pending entries, several consumers,
//! NOACK reads, claimed entries, a pending entry whose entry was deleted) is dumped by
//! Redis and restored here, and dumped here and restored in Redis; XINFO STREAM [FULL],
//! XRANGE, XREVRANGE, XPENDING (both forms), XINFO GROUPS and XINFO CONSUMERS must
//! answer the same on both sides. Left out of the comparison, and only these: XINFO's
//! radix-tree-nodes (the inner nodes of Redis's radix tree; redlockd keeps its nodes in
//! a B-tree), and the idle times of XPENDING's extended form and XINFO CONSUMERS (now
//! minus a time the payload carries, so they follow each server's clock). The payload
//! bytes are compared where Redis's are determined by the commands: Redis's payload
//! dumped back from redlockd, and a stream without groups built on both. Malformed
//! stream payloads get `ERR Bad data format` and leave the key as it was.

use crate::support;
use redis::aio::MultiplexedConnection;
use redis::Value;
use support::redis_server::RedisNode;
use support::*;

const BAD_DATA: &str = "ERR Bad data format";

/// Entries with explicit IDs over four nodes of 100 (Redis's stream-node-max-entries),
/// most with the node's first fields, some with others, integers and longer values.
fn entries(key: &str, n: u64) -> Vec<Vec<String>> {
    (1..=n)
        .map(|i| {
            let id = format!("{}-{}", 1000 + i, i % 3);
            let mut c = vec!["XADD".to_string(), key.to_string(), id];
            let long = format!("{}{i}", "long value ".repeat(5));
            let pairs: Vec<String> = match i % 7 {
                0 => vec!["other".into(), "x".into(), "n".into(), i.to_string()],
                3 => vec!["f".into(), long, "g".into(), format!("-{i}")],
                _ => vec!["f".into(), format!("v{i}"), "g".into(), i.to_string()],
            };
            c.extend(pairs);
            c
        })
        .collect()
}

async fn run(c: &mut MultiplexedConnection, args: &[String]) -> Value {
    let mut cmd = redis::cmd(&args[0]);
    for a in &args[1..] {
        cmd.arg(a);
    }
    cmd.query_async(c)
        .await
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

async fn run_str(c: &mut MultiplexedConnection, args: &str) -> Value {
    let args: Vec<String> = args.split_whitespace().map(String::from).collect();
    run(c, &args).await
}

/// The IDs of an XPENDING extended reply, in order.
fn pending_ids(v: &Value) -> Vec<String> {
    let Value::Array(rows) = v else {
        panic!("{v:?}")
    };
    rows.iter()
        .map(|r| match r {
            Value::Array(f) => match &f[0] {
                Value::BulkString(id) => String::from_utf8(id.clone()).unwrap(),
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        })
        .collect()
}

/// Builds the stream `s` with its groups, on either server (the same replies on both).
async fn build(c: &mut MultiplexedConnection) {
    for cmd in entries("s", 400) {
        run(c, &cmd).await;
    }
    for cmd in [
        // A trimmed start: the first node goes whole, then entries of the next one are
        // flagged deleted in place.
        "XTRIM s MAXLEN ~ 300",
        "XDEL s 1101-2 1150-0 1260-0 1400-1",
        "XTRIM s MAXLEN = 290",
        "XGROUP CREATE s g1 0",
        "XREADGROUP GROUP g1 alice COUNT 5 STREAMS s >",
        "XREADGROUP GROUP g1 bob COUNT 3 STREAMS s >",
        "XREADGROUP GROUP g1 carol COUNT 2 NOACK STREAMS s >",
        "XGROUP CREATECONSUMER s g1 erin",
        "XGROUP CREATE s g2 $",
        "XGROUP CREATE s g3 1300-0 ENTRIESREAD 50",
        "XREADGROUP GROUP g3 zed COUNT 2 STREAMS s >",
    ] {
        run_str(c, cmd).await;
    }
    let alice = pending_ids(&run_str(c, "XPENDING s g1 - + 10 alice").await);
    let bob = pending_ids(&run_str(c, "XPENDING s g1 - + 10 bob").await);
    assert_eq!((alice.len(), bob.len()), (5, 3));
    for cmd in [
        format!("XACK s g1 {}", alice[1]),
        // Claimed: bob's delivery count goes up; dave's JUSTID claim leaves it.
        format!("XCLAIM s g1 bob 0 {}", alice[0]),
        format!("XCLAIM s g1 dave 0 {} JUSTID", alice[2]),
        // A pending entry whose entry is gone.
        format!("XDEL s {}", bob[0]),
    ] {
        run_str(c, &cmd).await;
    }
    // A stream emptied by XDEL (its last and max deleted IDs stay), one made by
    // XGROUP CREATE MKSTREAM, and one of long values, whose nodes end by bytes.
    for cmd in [
        "XADD e 5-0 f v",
        "XDEL e 5-0",
        "XGROUP CREATE m g $ MKSTREAM",
    ] {
        run_str(c, cmd).await;
    }
    for i in 1..=40 {
        let big = format!("{i}{}", "x".repeat(300));
        run(
            c,
            &["XADD".into(), "w".into(), format!("{i}-0"), "f".into(), big],
        )
        .await;
    }
}

/// `v` with the values that follow the keys in `blank` set to nil, at any depth (XINFO's
/// key-value arrays); with `pending`, also the idle time (third item) of every
/// four-item row (XPENDING's extended form).
fn blank(v: Value, keys: &[&[u8]], pending: bool) -> Value {
    match v {
        Value::Array(items) => {
            let four = pending && items.len() == 4 && matches!(items[2], Value::Int(_));
            let mut out: Vec<Value> = Vec::with_capacity(items.len());
            let mut skip = false;
            for (i, item) in items.into_iter().enumerate() {
                if skip || (four && i == 2) {
                    out.push(Value::Nil);
                    skip = false;
                    continue;
                }
                skip = matches!(&item, Value::BulkString(k) if keys.contains(&&k[..]));
                out.push(blank(item, keys, pending));
            }
            Value::Array(out)
        }
        other => other,
    }
}

/// What the two servers must answer alike about the stream at `key`.
async fn views(c: &mut MultiplexedConnection, key: &str) -> Vec<(String, Value)> {
    let nodes: &[&[u8]] = &[b"radix-tree-nodes"];
    let idle: &[&[u8]] = &[b"idle"];
    let mut out = Vec::new();
    for (cmd, keys, pending) in [
        (format!("XINFO STREAM {key} FULL COUNT 0"), nodes, false),
        (format!("XINFO STREAM {key}"), nodes, false),
        (format!("XRANGE {key} - +"), nodes, false),
        (format!("XREVRANGE {key} + - COUNT 7"), nodes, false),
        (format!("XLEN {key}"), nodes, false),
        (format!("XINFO GROUPS {key}"), nodes, false),
    ] {
        let v = blank(run_str(c, &cmd).await, keys, pending);
        out.push((cmd, v));
    }
    let Value::Array(groups) = run_str(c, &format!("XINFO GROUPS {key}")).await else {
        panic!("XINFO GROUPS")
    };
    for g in groups {
        let Value::Array(fields) = g else { panic!() };
        let Value::BulkString(name) = &fields[1] else {
            panic!()
        };
        let g = String::from_utf8(name.clone()).unwrap();
        for (cmd, keys, pending) in [
            (format!("XPENDING {key} {g}"), idle, false),
            (format!("XPENDING {key} {g} - + 1000"), idle, true),
            (format!("XPENDING {key} {g} - + 1000 bob"), idle, true),
            (format!("XPENDING {key} {g} IDLE 0 - + 2"), idle, true),
            (format!("XINFO CONSUMERS {key} {g}"), idle, false),
        ] {
            let v = blank(run_str(c, &cmd).await, keys, pending);
            out.push((cmd, v));
        }
    }
    out
}

async fn dump(c: &mut MultiplexedConnection, key: &str) -> Vec<u8> {
    match run_str(c, &format!("DUMP {key}")).await {
        Value::BulkString(p) => p,
        other => panic!("DUMP {key}: {other:?}"),
    }
}

async fn restore(c: &mut MultiplexedConnection, key: &str, payload: &[u8]) -> Result<(), String> {
    redis::cmd("RESTORE")
        .arg(key)
        .arg(0)
        .arg(payload)
        .arg("REPLACE")
        .query_async::<()>(c)
        .await
        .map_err(|e| error_text(&e))
}

/// Views of `key` on `from` equal views of `copy` on `to`.
async fn assert_same(
    from: &mut MultiplexedConnection,
    key: &str,
    to: &mut MultiplexedConnection,
    copy: &str,
    what: &str,
) {
    let want = views(from, key).await;
    let got = views(to, copy).await;
    assert_eq!(want.len(), got.len(), "{what} {key}");
    for ((cmd, w), (_, g)) in want.iter().zip(&got) {
        assert_eq!(g, w, "{what}: {cmd} on {key}");
    }
}

const KEYS: &[&str] = &["s", "e", "m", "w"];

#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_stream_payloads_restore_here_and_dump_back_to_the_same_bytes() {
    let redis = RedisNode::start(None);
    let ours = start().await;
    let mut r = conn(&redis).await;
    let mut o = conn(&ours).await;
    build(&mut r).await;
    for key in KEYS {
        let theirs = dump(&mut r, key).await;
        restore(&mut o, key, &theirs).await.expect("RESTORE here");
        assert_same(&mut r, key, &mut o, key, "Redis's payload restored here").await;
        // Nodes, deleted entries and groups are kept as Redis wrote them.
        assert_eq!(dump(&mut o, key).await, theirs, "DUMP {key} back");
    }
    // What was restored takes writes as Redis's own stream does: a new entry goes into
    // the tail node while it has room.
    for c in [&mut r, &mut o] {
        for cmd in [
            "XADD s 9000-0 f v g 1",
            "XREADGROUP GROUP g2 new COUNT 1 STREAMS s >",
            "XACK s g1 1401-0",
            "XTRIM s MINID 1300-0",
        ] {
            run_str(c, cmd).await;
        }
    }
    // (Only `s`: a node's byte limit counts Redis's listpack bytes there and redlockd's
    // own encoding here, so `w`'s long entries may fill its tail node differently.)
    for key in ["s"] {
        let mut want = views(&mut r, key).await;
        let mut got = views(&mut o, key).await;
        // The new consumer's seen and delivery times are each server's clock.
        for v in [&mut want, &mut got] {
            v.retain(|(cmd, _)| !cmd.contains("FULL") && !cmd.contains("CONSUMERS"));
        }
        assert_eq!(got, want, "{key} after writes");
    }
    // Redis 5's payload (type 15, RDB version 9) from Redis's own test suite.
    let legacy = &include_bytes!("../../fuzz/seeds/restore/stream_legacy_as_sent")[1..];
    restore(&mut r, "old", legacy)
        .await
        .expect("Redis reads it");
    restore(&mut o, "old", legacy)
        .await
        .expect("redlockd reads it");
    assert_same(&mut r, "old", &mut o, "old", "Redis 5's payload").await;
    assert_eq!(dump(&mut o, "old").await, dump(&mut r, "old").await);
    ours.shutdown().await;
}

#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_stream_payloads_restore_in_redis() {
    let redis = RedisNode::start(None);
    let ours = start().await;
    let mut r = conn(&redis).await;
    let mut o = conn(&ours).await;
    build(&mut o).await;
    for key in KEYS {
        let mine = dump(&mut o, key).await;
        restore(&mut r, key, &mine).await.expect("RESTORE in Redis");
        assert_same(
            &mut o,
            key,
            &mut r,
            key,
            "redlockd's payload restored in Redis",
        )
        .await;
        assert_eq!(dump(&mut r, key).await, mine, "Redis dumps {key} back");
    }
    ours.shutdown().await;
}

#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_built_alike_dumps_to_redis_bytes() {
    let redis = RedisNode::start(None);
    let ours = start().await;
    let mut r = conn(&redis).await;
    let mut o = conn(&ours).await;
    for c in [&mut r, &mut o] {
        for cmd in entries("p", 350) {
            run(c, &cmd).await;
        }
        for cmd in [
            "XTRIM p MAXLEN ~ 250",
            "XDEL p 1101-2 1201-0 1350-2",
            "XTRIM p MAXLEN = 240",
            "XADD p 99999999999-18446744073709551615 f 18446744073709551616 g -9223372036854775808",
            "XADD one 1-1 field value",
            "XADD one 2-0 field 12",
            "XSETID one 5-5 ENTRIESADDED 9 MAXDELETEDID 3-0",
        ] {
            run_str(c, cmd).await;
        }
    }
    for key in ["p", "one"] {
        let theirs = dump(&mut r, key).await;
        assert_eq!(dump(&mut o, key).await, theirs, "DUMP {key}");
    }
    ours.shutdown().await;
}

/// Nodes end where Redis's end also when entries are long: the byte limit counts the
/// bytes of Redis's listpack of the node (integers and strings in their listpack
/// encodings, the master's counts as they change with deletions), so the same commands
/// give the same nodes, the same XINFO radix-tree-keys, the same approximate trims and
/// byte-equal DUMPs. Three node settings: the defaults (100 entries, 4096 bytes), a
/// small byte limit, and limits loose enough that a node's counts pass 127 (their
/// encoding grows a byte) and come back below it after deletions.
#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_entries_end_nodes_where_redis_ends_them() {
    let redis = RedisNode::start(None);
    let ours = start().await;
    let mut r = conn(&redis).await;
    let mut o = conn(&ours).await;
    let settings = [("100", "4096"), ("100", "700"), ("1000", "12000")];
    for (round, (entries, bytes)) in settings.into_iter().enumerate() {
        let key = format!("long{round}");
        let mut cmds: Vec<Vec<String>> = vec![
            vec![
                "CONFIG".into(),
                "SET".into(),
                "stream-node-max-entries".into(),
                entries.into(),
            ],
            vec![
                "CONFIG".into(),
                "SET".into(),
                "stream-node-max-bytes".into(),
                bytes.into(),
            ],
        ];
        for i in 1..=300u64 {
            let id = format!("{}-{}", 5000 + i / 2, i % 2);
            // Lengths from 1 to ~1500 bytes, integers of every listpack width, a field
            // set that changes now and then.
            let value = match i % 5 {
                0 => (i * i * 7919).to_string(),
                1 => format!("-{}", i * 100_003),
                2 => "v".repeat(((i * 37) % 1500) as usize + 1),
                3 => "w".repeat(((i * 11) % 70) as usize),
                _ => format!("0{i}"),
            };
            let mut c = vec!["XADD".into(), key.clone(), id, "f".into(), value];
            if i % 9 == 0 {
                c.extend(["extra".into(), "e".repeat((i % 200) as usize)]);
            }
            cmds.push(c);
        }
        // Deletions that bring a node's counts back across 127, then more entries.
        for i in (2..=300u64).step_by(2).take(140) {
            cmds.push(vec![
                "XDEL".into(),
                key.clone(),
                format!("{}-{}", 5000 + i / 2, i % 2),
            ]);
        }
        for i in 301..=340u64 {
            let id = format!("{}-{}", 5000 + i / 2, i % 2);
            cmds.push(vec![
                "XADD".into(),
                key.clone(),
                id,
                "f".into(),
                "x".repeat((i * 13 % 300) as usize),
            ]);
        }
        cmds.push(vec![
            "XTRIM".into(),
            key.clone(),
            "MAXLEN".into(),
            "~".into(),
            "120".into(),
        ]);
        for c in [&mut r, &mut o] {
            for cmd in &cmds {
                run(c, cmd).await;
            }
        }
        let info = |v: Value| -> (Value, Value) {
            let Value::Array(kv) = v else { panic!("{v:?}") };
            let field = |name: &str| {
                let at = kv
                    .iter()
                    .position(|x| *x == Value::BulkString(name.as_bytes().to_vec()))
                    .unwrap_or_else(|| panic!("no {name}"));
                kv[at + 1].clone()
            };
            (field("length"), field("radix-tree-keys"))
        };
        let xinfo = format!("XINFO STREAM {key}");
        let theirs = info(run_str(&mut r, &xinfo).await);
        assert_eq!(
            info(run_str(&mut o, &xinfo).await),
            theirs,
            "{key}: length and nodes"
        );
        let theirs = dump(&mut r, &key).await;
        assert_eq!(
            dump(&mut o, &key).await,
            theirs,
            "DUMP {key} ({entries} entries, {bytes} bytes)"
        );
    }
    ours.shutdown().await;
}

/// The byte limit at every value around the points where a node's counts cross 127
/// (a byte more or less each in the listpack): each limit's stream must end its nodes
/// where Redis's does, a byte early or late shows. First the live count passes 128 and
/// deletions bring it back; then, in a node of 250 entries, 140 deletions take the
/// deleted count past 128 and the live count back below it.
#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_byte_limit_counts_the_node_counts_as_redis_encodes_them() {
    let redis = RedisNode::start(None);
    let ours = start().await;
    let mut r = conn(&redis).await;
    let mut o = conn(&ours).await;
    // (limits, entries added, then deleted from the first, then added)
    let cases = [(1350..1480u32, 150, 60, 230), (3500..3540, 250, 140, 400)];
    let mut nodes = Vec::new();
    for c in [&mut r, &mut o] {
        let mut found = Vec::new();
        for (limits, first, deleted, last) in cases.clone() {
            for limit in limits {
                let key = format!("edge{first}-{limit}");
                let mut p = redis::pipe();
                p.cmd("CONFIG")
                    .arg(&["SET", "stream-node-max-entries", "0"])
                    .ignore();
                p.cmd("CONFIG")
                    .arg(&["SET", "stream-node-max-bytes", &limit.to_string()])
                    .ignore();
                for seq in (1..=first).chain(first + 1..=last) {
                    if seq == first + 1 {
                        for gone in 1..=deleted {
                            p.cmd("XDEL").arg(&key).arg(format!("1-{gone}")).ignore();
                        }
                    }
                    p.cmd("XADD")
                        .arg(&key)
                        .arg(format!("1-{seq}"))
                        .arg(&["f", "v"])
                        .ignore();
                }
                p.cmd("XINFO").arg(&["STREAM", &key]);
                let (info,): (Vec<Value>,) = p.query_async(c).await.expect("pipeline");
                let at = info
                    .iter()
                    .position(|x| *x == Value::BulkString(b"radix-tree-keys".to_vec()))
                    .expect("radix-tree-keys");
                found.push((key.clone(), info[at + 1].clone(), dump(c, &key).await));
            }
        }
        nodes.push(found);
    }
    for (theirs, ours_) in nodes[0].iter().zip(&nodes[1]) {
        assert_eq!(ours_, theirs, "{}", theirs.0);
    }
    ours.shutdown().await;
}

/// A listpack of small items: numbers 0-127 as 7-bit integers, negative ones as 13-bit,
/// anything else as a string of at most 63 bytes.
fn lp(items: &[&str]) -> Vec<u8> {
    let mut body = Vec::new();
    for item in items {
        let start = body.len();
        match item.parse::<i64>() {
            Ok(v) if (0..128).contains(&v) => body.push(v as u8),
            Ok(v) if (-4096..0).contains(&v) => {
                let u = (8192 + v) as u16;
                body.extend_from_slice(&[0xc0 | (u >> 8) as u8, u as u8]);
            }
            _ => {
                body.push(0x80 | item.len() as u8);
                body.extend_from_slice(item.as_bytes());
            }
        }
        body.push((body.len() - start) as u8);
    }
    let mut out = ((body.len() + 7) as u32).to_le_bytes().to_vec();
    out.extend_from_slice(&(items.len() as u16).to_le_bytes());
    out.extend_from_slice(&body);
    out.push(0xff);
    out
}

/// A raw 128-bit ID.
fn raw_id(ms: u64, seq: u64) -> Vec<u8> {
    [ms.to_be_bytes(), seq.to_be_bytes()].concat()
}

/// A stream body (type 19) of one node keyed 5-0: `node` is its listpack, `length` and
/// `last` the stream's, then one group `g` whose PEL holds 5-0 and 6-0 and whose
/// consumers hold `owned`.
fn body(node: &[u8], length: u8, last_ms: u8, owned: &[(&str, &[u64])]) -> Vec<u8> {
    let mut b = vec![19, 1, 16];
    b.extend_from_slice(&raw_id(5, 0));
    b.push(node.len() as u8);
    b.extend_from_slice(node);
    b.extend_from_slice(&[length, last_ms, 0, 5, 0, 0, 0, length + 1]);
    b.extend_from_slice(&[1, 1, b'g', 0, 0, 0, 2]);
    for ms in [5, 6] {
        b.extend_from_slice(&raw_id(ms, 0));
        b.extend_from_slice(&77i64.to_le_bytes());
        b.push(1);
    }
    b.push(owned.len() as u8);
    for (name, ids) in owned {
        b.push(name.len() as u8);
        b.extend_from_slice(name.as_bytes());
        b.extend_from_slice(&88i64.to_le_bytes());
        b.push(ids.len() as u8);
        for &ms in *ids {
            b.extend_from_slice(&raw_id(ms, 0));
        }
    }
    b
}

// Master entry (2 live, 0 deleted, field f, terminator), then 5-0 f=a, 6-0 f=b.
const NODE: &[&str] = &[
    "2", "0", "1", "f", "0", "2", "0", "0", "a", "4", "2", "1", "0", "b", "4",
];

#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_stream_payloads_are_bad_data_and_leave_the_key() {
    // Redis with sanitize-dump-payload on: the deep checks redlockd always makes.
    let redis = RedisNode::start_with_args(None, &["--sanitize-dump-payload", "yes"]);
    let ours = start().await;
    let mut r = conn(&redis).await;
    let mut o = conn(&ours).await;
    let owners: &[(&str, &[u64])] = &[("x", &[5]), ("y", &[6])];
    let with = |i: usize, v: &'static str| {
        let mut items = NODE.to_vec();
        items[i] = v;
        lp(&items)
    };
    // The well-formed payload restores on both, alike.
    let good = dump_payload(&body(&lp(NODE), 2, 6, owners), 10);
    for c in [&mut r, &mut o] {
        restore(c, "good", &good).await.expect("a valid payload");
    }
    assert_same(&mut r, "good", &mut o, "good", "a hand-made payload").await;
    let truncated = {
        let mut node = lp(NODE);
        node.truncate(node.len() - 3);
        node
    };
    // Refused by both servers.
    let both = [
        (
            "a PEL entry of no consumer",
            body(&lp(NODE), 2, 6, &[("x", &[5])]),
        ),
        (
            "a consumer's ID not in the PEL",
            body(&lp(NODE), 2, 6, &[("x", &[5, 6, 7])]),
        ),
        (
            "a consumer twice",
            body(&lp(NODE), 2, 6, &[("x", &[5]), ("x", &[6])]),
        ),
        ("an lp-count that lies", body(&with(9, "5"), 2, 6, owners)),
        (
            "a live count that lies about the entries",
            body(&with(0, "3"), 2, 6, owners),
        ),
        ("a truncated listpack", body(&truncated, 2, 6, owners)),
        (
            "a master entry without its 0",
            body(&with(4, "1"), 2, 6, owners),
        ),
    ];
    // Redis 7.0 loads these, and then holds a stream its own commands cannot walk in
    // order or count right; redlockd refuses them.
    let ours_only = [
        ("IDs out of order", body(&with(11, "-1"), 2, 6, owners)),
        ("an ID twice", body(&with(11, "0"), 2, 6, owners)),
        ("an entry past the last ID", body(&lp(NODE), 2, 5, owners)),
        ("a stream length that lies", body(&lp(NODE), 3, 6, owners)),
        ("live and deleted counts split wrong", {
            let mut items = NODE.to_vec();
            items[0] = "1";
            items[1] = "1";
            body(&lp(&items), 2, 6, owners)
        }),
    ];
    for c in [&mut r, &mut o] {
        run_str(c, "SET k keep").await;
    }
    for (what, b) in both.iter().chain(&ours_only) {
        let p = dump_payload(b, 10);
        assert_eq!(
            restore(&mut o, "k", &p).await,
            Err(BAD_DATA.into()),
            "{what}"
        );
        let v = run_str(&mut o, "GET k").await;
        assert_eq!(
            v,
            Value::BulkString(b"keep".to_vec()),
            "{what}: the key is untouched"
        );
    }
    for (what, b) in &both {
        assert_eq!(
            restore(&mut r, "k", &dump_payload(b, 10)).await,
            Err(BAD_DATA.into()),
            "Redis: {what}"
        );
    }
    assert_eq!(
        run_str(&mut o, "PING").await,
        Value::SimpleString("PONG".into())
    );
    ours.shutdown().await;
}

#[tokio::test]
async fn restoring_a_stream_wakes_a_blocked_reader_as_in_redis() {
    // redis-server 7.0.15 answers the blocked XREAD as soon as RESTORE makes the key.
    let h = start().await;
    let mut c = Raw::to(&h).await;
    c.check(&["XADD", "src", "1-0", "a", "1"], &bulk("1-0"))
        .await;
    let frame = c.cmd_bytes(&[b"DUMP", b"src"]).await;
    let nl = frame.iter().position(|&b| b == b'\n').unwrap();
    let payload = &frame[nl + 1..frame.len() - 2];
    let mut w = Raw::to(&h).await;
    w.send_cmd(&["XREAD", "BLOCK", "0", "STREAMS", "k", "0-0"])
        .await;
    wait_blocked(&h, 1).await;
    assert_eq!(
        c.cmd_bytes(&[b"RESTORE", b"k", b"0", payload]).await,
        OK.as_bytes()
    );
    w.expect("*1\r\n*2\r\n$1\r\nk\r\n*1\r\n*2\r\n$3\r\n1-0\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n")
        .await;
    h.shutdown().await;
}
