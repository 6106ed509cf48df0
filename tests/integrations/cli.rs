//! The binary: --help, one node, a local group, signals, and flag errors.

use crate::support;

use std::io::Read;
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::process::{
    call, free_ports, os_args, signal, wait_bounded, wait_for_pong, Node, Proc, BIN,
};

#[test]
fn help_describes_the_flags() {
    let out = Command::new(BIN).arg("--help").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--port",
        "--max-ttl",
        "--restart-delay",
        "--require-ttl",
        "group",
    ] {
        assert!(text.contains(flag), "{flag} missing from --help:\n{text}");
    }
}

#[test]
fn a_node_answers_ping_and_stops_on_sigterm() {
    // The default worker count, and one worker, and three.
    for threads in [None, Some("1"), Some("3")] {
        let mut args = vec!["--restart-delay", "0", "--log", "warn"];
        args.extend(threads.map(|t| ["--threads", t]).into_iter().flatten());
        let mut node = Node::spawn(&args);
        node.signal("-TERM");
        let status = node.wait_exit();
        assert!(status.success(), "{threads:?}: {status:?}");
        assert!(TcpStream::connect(node.addr()).is_err());
    }
}

#[test]
fn a_group_answers_on_consecutive_ports_and_stops_on_sigint() {
    let log = std::env::temp_dir().join(format!("redlockd-cli-group-{}.log", std::process::id()));
    // Another process may take one of the ports between the check and the bind; the
    // group then exits with "cannot start a node", and only then is it tried again.
    for attempt in 1..=3 {
        let base = free_ports(3);
        let mut group = Proc::spawn(
            &os_args(&["group", "--nodes", "3", "--base-port", &base.to_string()]),
            std::fs::File::create(&log).unwrap().into(),
        );
        let answered = (base..base + 3).try_for_each(wait_for_pong);
        if let Err(e) = answered {
            // A group that failed to bind exits at once; give it a moment to.
            let deadline = Instant::now() + Duration::from_secs(2);
            let mut exited = group.child.try_wait().ok().flatten();
            while exited.is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
                exited = group.child.try_wait().ok().flatten();
            }
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let bind_failed =
                exited.is_some_and(|s| !s.success()) && text.contains("cannot start a node");
            if attempt < 3 && bind_failed {
                continue;
            }
            panic!("{e}; group exit: {exited:?}; its log:\n{text}");
        }
        let _ = std::fs::remove_file(&log);
        signal(&group.child, "-INT");
        let status = wait_bounded(&mut group.child);
        assert!(status.success(), "{status:?}");
        return;
    }
}

#[test]
fn a_bad_duration_is_a_clear_error() {
    let out = Command::new(BIN)
        .args(["--max-ttl", "5d", "--port", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("invalid duration \"5d\": unknown unit \"d\" (use ms, s, m or h)"),
        "{text}"
    );
    let out = Command::new(BIN)
        .args(["--restart-delay", "soon"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid duration \"soon\""));
}

#[test]
fn a_restart_delay_shorter_than_max_ttl_is_refused_at_startup() {
    let out = Command::new(BIN)
        .args(["--port", "0", "--max-ttl", "10s", "--restart-delay", "5s"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("restart-delay (5000 ms) is shorter than max-ttl"),
        "{text}"
    );
}

#[test]
fn bad_usage_exits_64_everywhere_and_help_exits_0() {
    for args in [
        &["lock", "--bogus"][..],
        &["lock", "--ttl", "10s"][..],
        &["group", "--port", "7000"][..],
        &["cluster", "--port", "7000"][..],
        &["--max-ttl", "5d"][..],
        &["--threads", "0"][..],
    ] {
        let out = Command::new(BIN).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(64), "{args:?}");
    }
    let out = Command::new(BIN).arg("--help").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn logs_to_a_pipe_carry_no_colour_codes() {
    let mut child = Proc::spawn(
        &os_args(&["--port", "0", "--restart-delay", "0", "--log", "info"]),
        Stdio::piped(),
    );
    // The start's log lines (identity, then "listening ...") are written at once: read
    // up to the one that says where it listens, then stop.
    let mut stderr = child.child.stderr.take().unwrap();
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    for _ in 0..20 {
        line.clear();
        while !line.ends_with(b"\n") && stderr.read(&mut byte).unwrap() == 1 {
            line.push(byte[0]);
        }
        if line.is_empty() || String::from_utf8_lossy(&line).contains("listening") {
            break;
        }
    }
    signal(&child.child, "-TERM");
    wait_bounded(&mut child.child);
    let text = String::from_utf8_lossy(&line);
    assert!(text.contains("listening"), "{text:?}");
    assert!(!text.contains('\u{1b}'), "{text:?}");
}

#[test]
fn a_config_file_in_redis_format_sets_flags_and_the_command_line_wins() {
    let dir = std::env::temp_dir().join(format!("redlockd-conf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("redlockd.conf");
    std::fs::write(
        &conf,
        "# lock node\nport 0\nmax-ttl 10s\nrestart-delay \"5s\"\nthreads 2\n",
    )
    .unwrap();
    // The file's values are used: they are refused together at startup.
    let out = Command::new(BIN)
        .arg(&conf)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("restart-delay (5000 ms) is shorter than max-ttl (10000 ms)"),
        "{text}"
    );
    // Flags on the command line override the file: this one starts, on our port.
    let mut args = vec![conf.clone().into_os_string()];
    args.extend(os_args(&["--restart-delay", "0", "--log", "warn"]));
    let mut node = Node::new(free_ports(1), args);
    node.start();
    node.terminate();
    // An unknown setting names its line and is bad usage.
    std::fs::write(&conf, "port 0\nno-such-setting yes\n").unwrap();
    let out = Command::new(BIN).arg(&conf).output().unwrap();
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("line 2: unknown setting"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Spawns redlockd with stdout piped and reads its JSON ready line.
fn spawn_reading_ready(
    args: &[&str],
    dir: &std::path::Path,
) -> (std::process::Child, serde_json::Value) {
    use std::io::BufRead;
    let mut child = Command::new(BIN)
        .args(args)
        .arg("--dir")
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let ready: serde_json::Value =
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
    assert_eq!(ready["ready"], serde_json::json!(true), "{line}");
    (child, ready)
}

#[test]
fn port_0_is_told_on_a_ready_line() {
    let dir = support::process::data_dir("port0");
    let (mut child, ready) = spawn_reading_ready(&["--port", "0", "--restart-delay", "0"], &dir);
    let port = ready["nodes"][0]["port"].as_u64().unwrap() as u16;
    assert_ne!(port, 0);
    assert_eq!(
        ready["nodes"][0]["url"],
        serde_json::json!(format!("redis://127.0.0.1:{port}"))
    );
    assert_eq!(ready["pid"], serde_json::json!(child.id()));
    wait_for_pong(port).unwrap();
    signal(&child, "-TERM");
    assert!(wait_bounded(&mut child).success());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_group_on_base_port_0_gets_ephemeral_ports_and_one_manual_clock() {
    let dir = support::process::data_dir("group0");
    let (mut child, ready) = spawn_reading_ready(
        &[
            "group",
            "--nodes",
            "3",
            "--base-port",
            "0",
            "--clock",
            "manual",
            "--enable-debug-command",
            "--restart-delay",
            "0",
        ],
        &dir,
    );
    let ports: Vec<u16> = ready["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["port"].as_u64().unwrap() as u16)
        .collect();
    assert_eq!(ports.len(), 3);
    // Not 0, 1, 2 (the base plus the index): ports of the system's choosing.
    assert!(ports.iter().all(|&p| p >= 1024), "{ports:?}");
    assert_eq!(
        ports.iter().collect::<std::collections::HashSet<_>>().len(),
        3
    );
    for (i, &port) in ports.iter().enumerate() {
        wait_for_pong(port).unwrap();
        assert!(dir.join(format!("node-{i}")).is_dir());
        assert_eq!(
            call(port, &["SET", "k", "v", "PX", "1000"]).as_deref(),
            Some("+OK")
        );
    }
    // One clock: an advance on node 0 moves every node.
    assert_eq!(
        call(ports[0], &["DEBUG", "CLOCK", "ADVANCE", "400"]).as_deref(),
        Some("+OK")
    );
    for &port in &ports {
        assert_eq!(call(port, &["PTTL", "k"]).as_deref(), Some(":600"));
    }
    // Wall time is each node's own.
    assert_eq!(
        call(ports[1], &["DEBUG", "CLOCK", "SET-WALL", "0"]).as_deref(),
        Some("+OK")
    );
    assert_eq!(call(ports[1], &["EXPIRETIME", "k"]).as_deref(), Some(":1"));
    assert_eq!(
        call(ports[2], &["EXPIRETIME", "k"]).as_deref(),
        Some(":1735689601")
    );
    signal(&child, "-INT");
    assert!(wait_bounded(&mut child).success());
    let _ = std::fs::remove_dir_all(&dir);
}

/// `redlockd cluster`, the group's old name, still runs a group, and says on stderr
/// that it is the old name ("cluster" now means Redis Cluster only).
#[test]
fn the_old_name_cluster_runs_a_group_and_says_so() {
    use std::io::{BufRead, Read};
    let dir = support::process::data_dir("oldname");
    let mut child = Command::new(BIN)
        .args(["cluster", "--nodes", "2", "--base-port", "0"])
        .args(["--restart-delay", "0", "--log", "warn", "--dir"])
        .arg(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let ready: serde_json::Value =
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
    let nodes = ready["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 2, "{line}");
    for n in nodes {
        wait_for_pong(n["port"].as_u64().unwrap() as u16).unwrap();
    }
    signal(&child, "-INT");
    assert!(wait_bounded(&mut child).success());
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(
        stderr.contains("`cluster` is the old name of `group`"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
