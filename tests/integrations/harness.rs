//! `redlockd harness` (docs/testing.md): the control protocol's replies to good and bad
//! requests, one clock for all nodes, and the process's ready line and exit.

use crate::support;

use redlockd::config::Config;
use redlockd::testing::harness::Harness;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::process::{wait_bounded, BIN};
use support::Raw;

const STEP: Duration = Duration::from_secs(2);

async fn harness(n: usize) -> Harness {
    Harness::start(n, Config::default(), None).await.unwrap()
}

async fn ask(h: &mut Harness, line: &str) -> Value {
    let (reply, stop) = h.handle(line.as_bytes()).await;
    assert!(!stop, "{line} stopped the harness");
    reply
}

/// The error text of a reply, failing if it is not an error.
async fn error_of(h: &mut Harness, line: &str) -> String {
    let reply = ask(h, line).await;
    match reply.get("error").and_then(Value::as_str) {
        Some(e) => e.to_string(),
        None => panic!("{line}: expected an error, got {reply}"),
    }
}

#[tokio::test]
async fn bad_requests_get_clear_errors_and_the_harness_goes_on() {
    let mut h = harness(3).await;
    let cases: &[(&str, &str)] = &[
        ("not json", "bad request: not JSON"),
        ("[1,2]", "bad request: not a JSON object"),
        (r#"{"id":1}"#, r#"missing "op": a string, one of ping,"#),
        (r#"{"id":1,"op":7}"#, r#"missing "op""#),
        (
            r#"{"op":"frobnicate"}"#,
            r#"unknown op "frobnicate"; ops: ping,"#,
        ),
        (
            r#"{"op":"kill","node":3}"#,
            "kill: node 3 is out of range: this harness has 3 nodes (0 to 2)",
        ),
        (
            r#"{"op":"pause","node":99999999999}"#,
            "pause: node 99999999999 is out of range",
        ),
        (
            r#"{"op":"kill","node":-1}"#,
            r#"kill: "node" must be a node index (0 to 2), not -1"#,
        ),
        (
            r#"{"op":"kill","node":"0"}"#,
            r#""node" must be a node index"#,
        ),
        (
            r#"{"op":"kill"}"#,
            r#"kill needs "node": a node index, 0 to 2"#,
        ),
        (r#"{"op":"advance"}"#, r#"advance needs "ms""#),
        (
            r#"{"op":"advance","ms":-1}"#,
            "the monotonic clock never goes back",
        ),
        (
            r#"{"op":"advance","ms":1.5}"#,
            r#""ms" must be a whole number"#,
        ),
        (
            r#"{"op":"advance","ms":"10"}"#,
            r#""ms" must be a whole number"#,
        ),
        (
            r#"{"op":"advance","ms":1e300}"#,
            r#""ms" must be a whole number"#,
        ),
        (
            r#"{"op":"advance","ms":1,"node":0}"#,
            r#"advance: unknown field "node""#,
        ),
        (
            r#"{"op":"advance","msec":1}"#,
            r#"advance: unknown field "msec""#,
        ),
        (
            r#"{"op":"ping","x":1}"#,
            "ping: unknown field \"x\" (ping takes no arguments)",
        ),
        (
            r#"{"op":"set_wall","unix_ms":-5}"#,
            r#"set_wall: "unix_ms" must be a whole number from 0"#,
        ),
        (
            r#"{"op":"restart","node":0,"mode":"gentle"}"#,
            r#"restart: "mode" must be "crash", "lose_dir" or "clean", not "gentle""#,
        ),
        (
            r#"{"op":"resume","node":0}"#,
            "resume: node 0 is up; only a paused node resumes",
        ),
        (
            r#"{"op":"heal","node":0}"#,
            "heal: node 0 is up; only an isolated node heals",
        ),
    ];
    for (line, want) in cases {
        let got = error_of(&mut h, line).await;
        assert!(got.contains(want), "{line}: {got:?} does not say {want:?}");
    }
    // The id comes back with the error, whatever JSON it is.
    let reply = ask(&mut h, r#"{"id":"abc","op":"nope"}"#).await;
    assert_eq!(reply["id"], json!("abc"));
    let reply = ask(&mut h, r#"{"id":[1],"op":"kill","node":9}"#).await;
    assert_eq!(reply["id"], json!([1]));

    // Ops on a node that is gone.
    assert_eq!(
        ask(&mut h, r#"{"id":1,"op":"kill","node":1}"#).await["ok"]["state"],
        json!("killed")
    );
    for (line, want) in [
        (
            r#"{"op":"kill","node":1}"#,
            "kill: node 1 is killed; restart it first",
        ),
        (
            r#"{"op":"pause","node":1}"#,
            "pause: node 1 is killed; restart it first",
        ),
        (
            r#"{"op":"isolate","node":1}"#,
            "isolate: node 1 is killed; restart it first",
        ),
        (
            r#"{"op":"heal","node":1}"#,
            "heal: node 1 is killed; restart it first",
        ),
        (
            r#"{"op":"restart","node":1,"mode":"clean"}"#,
            "restart: node 1 was killed, so it saved nothing to restart cleanly from",
        ),
    ] {
        let got = error_of(&mut h, line).await;
        assert!(got.contains(want), "{line}: {got:?} does not say {want:?}");
    }
    assert_eq!(
        ask(&mut h, r#"{"op":"pause","node":2}"#).await["ok"]["state"],
        json!("paused")
    );
    let got = error_of(&mut h, r#"{"op":"isolate","node":2}"#).await;
    assert_eq!(got, "isolate: node 2 is paused; resume it first");

    // Still serving, and the states are what the good requests made them.
    assert_eq!(
        ask(&mut h, r#"{"id":9,"op":"ping"}"#).await,
        json!({"id": 9, "ok": true})
    );
    let nodes = ask(&mut h, r#"{"op":"nodes"}"#).await;
    let states: Vec<&str> = nodes["ok"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["up", "killed", "paused"]);
    let restarted = ask(&mut h, r#"{"op":"restart","node":1}"#).await;
    assert_eq!(restarted["ok"]["state"], json!("up"));
    assert_eq!(restarted["ok"]["boot"], json!("fence"));
    // Killed and restarted on the same boot, holding no lock: the fence is the margin.
    assert_eq!(restarted["ok"]["fence_ms"], json!(1_000));
    ask(&mut h, r#"{"op":"resume","node":2}"#).await;
    h.shutdown().await;
}

#[tokio::test]
async fn serve_answers_in_order_skips_long_lines_and_stops_at_the_end_of_input() {
    let mut h = harness(1).await;
    let long = format!("{{\"op\":\"ping\",\"pad\":\"{}\"}}", "x".repeat(70 * 1024));
    let input = format!(
        "{{\"id\":1,\"op\":\"ping\"}}\n\n   \n{long}\n{{\"id\":2,\"op\":\"advance\",\"ms\":5}}\n{{\"id\":3,\"op\":\"clock\"}}"
    );
    let mut out = Vec::new();
    tokio::time::timeout(STEP, h.serve(input.as_bytes(), &mut out))
        .await
        .expect("serve returns at the end of its input")
        .unwrap();
    let replies: Vec<Value> = String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(replies.len(), 4, "{replies:?}");
    assert_eq!(replies[0], json!({"id": 1, "ok": true}));
    assert_eq!(
        replies[1]["error"],
        json!("bad request: a line longer than 65536 bytes")
    );
    assert_eq!(replies[2]["id"], json!(2));
    // The last line had no newline: still a request.
    assert_eq!(replies[3]["ok"]["mono_ms"], json!(1_000_005));
    h.shutdown().await;
}

#[tokio::test]
async fn shutdown_replies_then_stops() {
    let mut h = harness(1).await;
    let input = "{\"id\":1,\"op\":\"shutdown\"}\n{\"id\":2,\"op\":\"ping\"}\n";
    let mut out = Vec::new();
    h.serve(input.as_bytes(), &mut out).await.unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), "{\"id\":1,\"ok\":true}\n");
    h.shutdown().await;
}

#[tokio::test]
async fn one_advance_moves_every_node_and_wall_jumps_are_per_node() {
    let mut h = harness(3).await;
    let mut clients = Vec::new();
    for node in h.group().nodes() {
        let mut c = Raw::connect(node.addr()).await;
        assert_eq!(
            c.try_cmd(STEP, &["SET", "k", "v", "PX", "1000"])
                .await
                .as_deref(),
            Some("+OK\r\n")
        );
        clients.push(c);
    }
    let reply = ask(&mut h, r#"{"op":"advance","ms":1000}"#).await;
    assert_eq!(reply["ok"]["mono_ms"], json!(1_001_000));
    for c in &mut clients {
        assert_eq!(
            c.try_cmd(STEP, &["PTTL", "k"]).await.as_deref(),
            Some(":0\r\n")
        );
    }
    ask(&mut h, r#"{"op":"advance","ms":1}"#).await;
    for c in &mut clients {
        assert_eq!(
            c.try_cmd(STEP, &["EXISTS", "k"]).await.as_deref(),
            Some(":0\r\n")
        );
    }
    let start = redlockd::clock::MANUAL_WALL_START_MS + 1001;
    let reply = ask(&mut h, r#"{"op":"jump_wall","ms":-3600000,"node":1}"#).await;
    assert_eq!(
        reply["ok"]["wall_ms"],
        json!([start, start - 3_600_000, start])
    );
    let time = clients[1].try_cmd(STEP, &["TIME"]).await.unwrap();
    assert!(
        time.contains(&format!("{}\r\n", (start - 3_600_000) / 1000)),
        "{time}"
    );
    let reply = ask(&mut h, r#"{"op":"jump_wall","ms":1000}"#).await;
    assert_eq!(
        reply["ok"]["wall_ms"],
        json!([start + 1000, start - 3_599_000, start + 1000])
    );
    h.shutdown().await;
}

fn spawn_harness(args: &[&str]) -> std::process::Child {
    Command::new(BIN)
        .arg("harness")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

#[test]
fn the_process_prints_one_ready_line_serves_stdin_and_exits_at_its_end() {
    let started = Instant::now();
    let mut child = spawn_harness(&["--nodes", "3"]);
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let ready: Value = serde_json::from_str(&line).unwrap();
    eprintln!("ready after {:?}", started.elapsed());
    assert_eq!(ready["ready"], json!(true));
    assert_eq!(ready["pid"], json!(child.id()));
    let nodes = ready["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 3);
    let mut dirs = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        assert_eq!(node["index"], json!(i));
        let port = node["port"].as_u64().unwrap();
        assert_ne!(port, 0);
        assert_eq!(node["url"], json!(format!("redis://127.0.0.1:{port}")));
        let mut s = TcpStream::connect(("127.0.0.1", port as u16)).unwrap();
        s.write_all(b"PING\r\n").unwrap();
        let dir = std::path::PathBuf::from(node["dir"].as_str().unwrap());
        assert!(dir.is_dir());
        dirs.push(dir);
    }
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(
            b"{\"id\":1,\"op\":\"kill\",\"node\":7}\n{\"id\":2,\"op\":\"advance\",\"ms\":10}\n",
        )
        .unwrap();
    let mut reply = String::new();
    out.read_line(&mut reply).unwrap();
    assert!(reply.contains("out of range"), "{reply}");
    reply.clear();
    out.read_line(&mut reply).unwrap();
    assert!(
        reply.starts_with("{\"id\":2,\"ok\":{\"mono_ms\":1000010"),
        "{reply}"
    );
    drop(stdin); // the end of input: the harness stops
    let status = wait_bounded(&mut child);
    assert!(status.success(), "{status:?}");
    for dir in &dirs {
        assert!(!dir.exists(), "{} left behind", dir.display());
    }
    for node in nodes {
        assert!(TcpStream::connect(("127.0.0.1", node["port"].as_u64().unwrap() as u16)).is_err());
    }
}

#[test]
fn a_start_that_cannot_work_says_so_on_the_ready_line() {
    // A restart fence shorter than max-ttl is refused (a lock could outlive it).
    let mut child = spawn_harness(&["--restart-delay", "1s"]);
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let ready: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(ready["ready"], json!(false), "{line}");
    assert!(
        ready["error"]
            .as_str()
            .unwrap()
            .contains("cannot start the nodes"),
        "{line}"
    );
    let status = wait_bounded(&mut child);
    assert_eq!(status.code(), Some(64));
}

#[test]
fn a_given_dir_is_kept_without_a_snapshot() {
    let dir = std::env::temp_dir().join(format!("redlockd-harness-dir-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut child = spawn_harness(&["--nodes", "2", "--dir", dir.to_str().unwrap()]);
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let ready: Value = serde_json::from_str(&line).unwrap();
    let port = ready["nodes"][0]["port"].as_u64().unwrap() as u16;
    assert_eq!(
        ready["nodes"][1]["dir"],
        json!(dir.join("node-1").display().to_string())
    );
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(b"SET k v\r\n").unwrap();
    let mut buf = [0u8; 5];
    std::io::Read::read_exact(&mut s, &mut buf).unwrap();
    assert_eq!(&buf, b"+OK\r\n");
    drop(child.stdin.take());
    assert!(wait_bounded(&mut child).success());
    for node in ["node-0", "node-1"] {
        let d = dir.join(node);
        assert!(d.is_dir(), "{} removed", d.display());
        let names: Vec<String> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(!names.iter().any(|n| n.contains("snapshot")), "{names:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A client's SHUTDOWN stops that node alone: the harness reports it `shut_down`,
/// refuses ops on it with a clear error, and the other nodes keep serving.
#[tokio::test]
async fn a_node_stopped_by_shutdown_is_reported_and_the_others_serve() {
    let mut h = harness(3).await;
    let addr = h.group().node(1).addr();
    let mut c = Raw::connect(addr).await;
    c.send(&support::resp(&["SHUTDOWN", "NOSAVE"])).await;
    assert_eq!(c.read_to_close().await, b"", "no reply, as redis-server");
    let deadline = Instant::now() + STEP;
    while TcpStream::connect(addr).is_ok() {
        assert!(Instant::now() < deadline, "node 1 still accepts");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let nodes = ask(&mut h, r#"{"op":"nodes"}"#).await;
    let states: Vec<&str> = nodes["ok"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["up", "shut_down", "up"]);
    for op in ["kill", "restart", "pause"] {
        assert_eq!(
            error_of(&mut h, &format!(r#"{{"op":"{op}","node":1}}"#)).await,
            format!("{op}: node 1 is shut_down (a client sent SHUTDOWN); the harness does not start it again")
        );
    }
    for i in [0, 2] {
        let mut c = Raw::to(h.group().node(i)).await;
        assert_eq!(c.cmd(&["PING"]).await, "+PONG\r\n");
    }
    h.shutdown().await;
}

/// Scoped faults over the protocol: added (in force on the reply), fired as scoped,
/// listed with their firings, cleared one and all; the history; bad requests.
#[tokio::test]
async fn scoped_faults_and_the_history_over_the_protocol() {
    let mut h = harness(2).await;
    let addr = h.group().node(1).addr();
    let mut c = Raw::connect(addr).await;
    c.cmd(&["CLIENT", "SETNAME", "w1"]).await;
    let mut other = Raw::connect(addr).await;
    let r = ask(&mut h, r#"{"id":1,"op":"record","node":1,"capacity":100}"#).await;
    assert_eq!(r, json!({"id": 1, "ok": true}));
    let r = ask(
        &mut h,
        r#"{"id":2,"op":"fault","node":1,"action":"drop_reply","command":"set","key":"lock:*","client_name":"w1","count":1}"#,
    )
    .await;
    let f = &r["ok"];
    assert_eq!(f["fault"], 1);
    assert_eq!(f["action"], "drop_reply");
    assert_eq!(f["fired"], 0);
    // In force now, on node 1 only and for w1's SET of lock:* only.
    let mut n0 = Raw::connect(h.group().node(0).addr()).await;
    n0.cmd(&["CLIENT", "SETNAME", "w1"]).await;
    assert_eq!(n0.cmd(&["SET", "lock:a", "x", "NX"]).await, "+OK\r\n");
    assert_eq!(other.cmd(&["SET", "lock:b", "x", "NX"]).await, "+OK\r\n");
    c.send_cmd(&["SET", "lock:a", "w1", "NX", "PX", "1000"])
        .await;
    assert!(c.closed().await);
    assert_eq!(other.cmd(&["GET", "lock:a"]).await, "$2\r\nw1\r\n");
    let list = ask(&mut h, r#"{"op":"faults"}"#).await;
    let list = list["ok"].as_array().unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["node"], 1);
    assert_eq!(list[0]["fired"], 1);
    let firing = &list[0]["firings"][0];
    assert_eq!(
        firing["command"],
        json!(["SET", "lock:a", "w1", "NX", "PX", "1000"])
    );
    assert_eq!(firing["client"]["name"], "w1");
    assert_eq!(firing["mono_ms"], h.group().clock().now_ms());
    let hist = ask(&mut h, r#"{"op":"history","node":1}"#).await;
    let hist = hist["ok"].as_array().unwrap();
    let last = &hist[hist.len() - 2];
    assert_eq!(last["outcome"], "reply_dropped");
    assert_eq!(hist[hist.len() - 1]["command"], json!(["GET", "lock:a"]));
    assert_eq!(last["reply"], "OK");
    assert_eq!(last["fault"], 1);
    assert_eq!(hist[0]["command"], json!(["SET", "lock:b", "x", "NX"]));
    // An error of the test's choosing, with a delay fault beside it; both cleared.
    ask(
        &mut h,
        r#"{"op":"fault","node":1,"action":"error","error":"ERR nope","command":"get"}"#,
    )
    .await;
    ask(
        &mut h,
        r#"{"op":"fault","node":1,"action":"noscript","command":"evalsha"}"#,
    )
    .await;
    assert_eq!(other.cmd(&["GET", "x"]).await, "-ERR nope\r\n");
    assert_eq!(
        other
            .cmd(&["EVALSHA", "0000000000000000000000000000000000000000", "0"])
            .await,
        "-NOSCRIPT No matching script. Please use EVAL.\r\n"
    );
    let gone = ask(&mut h, r#"{"op":"clear_fault","node":1,"fault":2}"#).await;
    assert_eq!(gone["ok"]["error"], "ERR nope");
    assert_eq!(other.cmd(&["GET", "x"]).await, "$-1\r\n");
    let all = ask(&mut h, r#"{"op":"clear_faults"}"#).await;
    assert_eq!(all["ok"].as_array().unwrap().len(), 2);
    let hist = ask(&mut h, r#"{"op":"history","node":1,"take":true}"#).await;
    let refused = hist["ok"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["outcome"] == "refused")
        .count();
    assert_eq!(refused, 2);
    let errors: &[(&str, &str)] = &[
        (r#"{"op":"fault","node":0}"#, r#"fault needs "action""#),
        (
            r#"{"op":"fault","node":0,"action":"explode"}"#,
            "unknown action \"explode\"",
        ),
        (
            r#"{"op":"fault","node":0,"action":"delay"}"#,
            r#"fault needs "ms""#,
        ),
        (
            r#"{"op":"fault","node":0,"action":"drop_reply","ms":5}"#,
            r#""ms" goes with action "delay" only"#,
        ),
        (
            r#"{"op":"fault","node":0,"action":"error"}"#,
            r#"action "error" needs "error""#,
        ),
        (
            r#"{"op":"fault","node":0,"action":"error","error":"oops"}"#,
            "starts with its code",
        ),
        (
            r#"{"op":"fault","node":0,"action":"drop_reply","command":"nosuch"}"#,
            "unknown command",
        ),
        (
            r#"{"op":"fault","node":0,"action":"drop_reply","probability":2}"#,
            "probability must be from 0 to 1",
        ),
        (
            r#"{"op":"fault","node":0,"action":"drop_reply","count":-1}"#,
            r#""count" must be a whole number"#,
        ),
        (
            r#"{"op":"fault","node":0,"action":"drop_reply","kee":"x"}"#,
            r#"unknown field "kee""#,
        ),
        (
            r#"{"op":"fault","action":"drop_reply"}"#,
            r#"fault needs "node""#,
        ),
        (
            r#"{"op":"clear_fault","node":0,"fault":9}"#,
            "node 0 has no fault 9",
        ),
        (
            r#"{"op":"history","take":1}"#,
            r#""take" must be true or false"#,
        ),
    ];
    for (line, want) in errors {
        let e = error_of(&mut h, line).await;
        assert!(e.contains(want), "{line}: {e}");
    }
    h.shutdown().await;
}
