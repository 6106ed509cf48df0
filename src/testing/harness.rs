//! The test harness: a [`TestCluster`] driven over JSON lines, so that tests in any
//! language get the manual clock and the node faults (`redlockd harness`, docs/testing.md).
//!
//! The harness prints one ready line, then answers one reply line per request line, in
//! order. Bad input of any kind gets an error reply and the harness goes on; it stops at
//! the end of its input (or on `{"op":"shutdown"}`).

use super::TestCluster;
use crate::config::Config;
use crate::durability::restart::BootKind;
use crate::server::StartError;
use serde_json::{json, Map, Value};
use std::io;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};

/// The longest request line read; a longer one gets an error reply and is skipped.
pub const MAX_LINE: usize = 64 * 1024;

/// Moves of the clock are bounded to a century either way (no overflow, no nonsense).
const MAX_MOVE_MS: i64 = 100 * 366 * 24 * 3600 * 1000;

/// Wall times `set_wall` accepts: 1970-01-01 to 9999-12-31.
const MAX_WALL_MS: i64 = 253_402_300_799_999;

/// What every request may name.
const OPS: &str = "ping, clock, nodes, advance, jump_wall, set_wall, kill, restart, pause, resume, isolate, heal, shutdown";

/// A node's state as the harness's faults left it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeState {
    Up,
    Paused,
    Isolated,
    Killed,
}

impl NodeState {
    pub fn name(self) -> &'static str {
        match self {
            NodeState::Up => "up",
            NodeState::Paused => "paused",
            NodeState::Isolated => "isolated",
            NodeState::Killed => "killed",
        }
    }
}

/// How a node restarts (`{"op":"restart","mode":...}`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RestartMode {
    /// A crash and a new process on the same directory: keys lost, fence up.
    Crash,
    /// A crash that loses the data directory too (a replaced disk).
    LoseDir,
    /// SIGTERM and a new process: keys and TTLs kept through the snapshot, no fence.
    Clean,
}

/// N test nodes on one manual clock, with the state of each.
pub struct Harness {
    cluster: TestCluster,
    states: Vec<NodeState>,
}

/// Why a request failed: the text of its error reply.
type OpResult = Result<Value, String>;

impl Harness {
    /// `n` nodes on ephemeral ports of 127.0.0.1 (or `config.bind`), each with `config`
    /// on one shared manual clock: DEBUG enabled, no fence at first boot. With `dir`,
    /// node i keeps its data in `dir/node-i`; without, in a temporary directory removed
    /// when the harness ends.
    pub async fn start(
        n: usize,
        config: Config,
        dir: Option<PathBuf>,
    ) -> Result<Harness, StartError> {
        if n == 0 {
            let e = io::Error::new(
                io::ErrorKind::InvalidInput,
                "a harness needs at least one node",
            );
            return Err(StartError::Io(e));
        }
        let cluster = TestCluster::try_start_with(n, |i, c| Config {
            port: 0,
            fence_at_boot: false,
            enable_debug_command: true,
            dir: dir.as_ref().map(|d| d.join(format!("node-{i}"))),
            clock: c.clock,
            ..config.clone()
        })
        .await?;
        // A test server leaves nothing behind: no clean-shutdown snapshot at the end.
        for node in cluster.nodes() {
            node.shared()
                .save_on_shutdown
                .store(false, Ordering::SeqCst);
        }
        Ok(Harness {
            states: vec![NodeState::Up; n],
            cluster,
        })
    }

    pub fn cluster(&self) -> &TestCluster {
        &self.cluster
    }

    /// The ready line (without its newline): every node's address, the process, the
    /// clock.
    pub fn ready_line(&self) -> String {
        let pid = std::process::id();
        let nodes: Vec<Value> = self
            .cluster
            .nodes()
            .iter()
            .enumerate()
            .map(|(i, node)| {
                let addr = node.addr();
                json!({
                    "index": i,
                    "host": addr.ip().to_string(),
                    "port": addr.port(),
                    "addr": addr.to_string(),
                    "url": format!("redis://{addr}"),
                    "pid": pid,
                    "dir": node.dir().map(|d| d.display().to_string()),
                })
            })
            .collect();
        json!({
            "ready": true,
            "version": env!("CARGO_PKG_VERSION"),
            "pid": pid,
            "nodes": nodes,
            "clock": self.clock_reading(),
        })
        .to_string()
    }

    /// Serves requests from `input` until it ends or a `shutdown` request, one reply
    /// line each on `output`. Errors are only those of `output` (the reader is gone).
    pub async fn serve<R, W>(&mut self, mut input: R, output: &mut W) -> io::Result<()>
    where
        R: AsyncBufRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        let mut line = Vec::new();
        loop {
            line.clear();
            let reply = match read_line(&mut input, &mut line).await {
                Ok(Line::End) => return Ok(()),
                Ok(Line::TooLong) => json!({
                    "id": Value::Null,
                    "error": format!("bad request: a line longer than {MAX_LINE} bytes"),
                }),
                Ok(Line::Read) => {
                    if line.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    let (reply, stop) = self.handle(&line).await;
                    if stop {
                        write_line(output, &reply).await?;
                        return Ok(());
                    }
                    reply
                }
                // Unreadable input (not a pipe any more): as good as its end.
                Err(_) => return Ok(()),
            };
            write_line(output, &reply).await?;
        }
    }

    /// One request line: its reply, and whether the harness stops after it.
    pub async fn handle(&mut self, line: &[u8]) -> (Value, bool) {
        let req: Map<String, Value> = match serde_json::from_slice::<Value>(line) {
            Ok(Value::Object(m)) => m,
            Ok(_) => return (error(Value::Null, "bad request: not a JSON object"), false),
            Err(e) => {
                return (
                    error(Value::Null, format!("bad request: not JSON ({e})")),
                    false,
                )
            }
        };
        let id = req.get("id").cloned().unwrap_or(Value::Null);
        let Some(op) = req.get("op").and_then(Value::as_str).map(str::to_owned) else {
            return (
                error(id, format!("missing \"op\": a string, one of {OPS}")),
                false,
            );
        };
        let result = self.dispatch(&op, &req).await;
        let stop = op == "shutdown" && result.is_ok();
        let reply = match result {
            Ok(v) => json!({"id": id, "ok": v}),
            Err(e) => error(id, e),
        };
        (reply, stop)
    }

    async fn dispatch(&mut self, op: &str, req: &Map<String, Value>) -> OpResult {
        let args = Args { op, req };
        match op {
            "ping" => {
                args.only(&[])?;
                Ok(Value::Bool(true))
            }
            "shutdown" => {
                args.only(&[])?;
                Ok(Value::Bool(true))
            }
            "clock" => {
                args.only(&[])?;
                Ok(self.clock_reading())
            }
            "nodes" => {
                args.only(&[])?;
                Ok(Value::Array(
                    (0..self.states.len())
                        .map(|i| self.node_status(i))
                        .collect(),
                ))
            }
            "advance" => {
                args.only(&["ms"])?;
                let ms = args.int("ms", 0, MAX_MOVE_MS).map_err(|e| {
                    if args
                        .req
                        .get("ms")
                        .and_then(Value::as_i64)
                        .is_some_and(|v| v < 0)
                    {
                        format!(
                            "{e}; the monotonic clock never goes back (jump_wall steps wall time)"
                        )
                    } else {
                        e
                    }
                })?;
                self.cluster.advance(Duration::from_millis(ms as u64));
                Ok(self.clock_reading())
            }
            "jump_wall" | "set_wall" => {
                let key = if op == "jump_wall" { "ms" } else { "unix_ms" };
                args.only(&[key, "node"])?;
                let v = if op == "jump_wall" {
                    args.int(key, -MAX_MOVE_MS, MAX_MOVE_MS)?
                } else {
                    args.int(key, 0, MAX_WALL_MS)?
                };
                // Wall time is each node's own: without "node", every node's moves.
                let nodes = match args.opt_node(self.states.len())? {
                    Some(i) => vec![i],
                    None => (0..self.states.len()).collect(),
                };
                for i in nodes {
                    let node = self.cluster.node(i);
                    if op == "jump_wall" {
                        node.jump_wall(v);
                    } else {
                        node.set_wall(v);
                    }
                }
                Ok(self.clock_reading())
            }
            "kill" | "pause" | "resume" | "isolate" | "heal" => {
                args.only(&["node"])?;
                let i = args.node(self.states.len())?;
                self.fault(op, i).await?;
                Ok(self.node_status(i))
            }
            "restart" => {
                args.only(&["node", "mode"])?;
                let i = args.node(self.states.len())?;
                let mode = match args.req.get("mode") {
                    None => RestartMode::Crash,
                    Some(Value::String(s)) if s == "crash" => RestartMode::Crash,
                    Some(Value::String(s)) if s == "lose_dir" => RestartMode::LoseDir,
                    Some(Value::String(s)) if s == "clean" => RestartMode::Clean,
                    Some(other) => {
                        return Err(format!(
                            "restart: \"mode\" must be \"crash\", \"lose_dir\" or \"clean\", not {other}"
                        ))
                    }
                };
                let boot = self.restart(i, mode).await?;
                let mut status = self.node_status(i);
                status["boot"] = Value::from(boot.name());
                Ok(status)
            }
            _ => Err(format!("unknown op {:?}; ops: {OPS}", op)),
        }
    }

    /// kill, pause, resume, isolate, heal: each from the one state it makes sense in.
    async fn fault(&mut self, op: &str, i: usize) -> Result<(), String> {
        self.refuse_if_shut_down(op, i)?;
        let state = self.states[i];
        let node = self.cluster.node(i);
        let refuse = |hint: &str| {
            Err(format!(
                "{op}: node {i} is {}{}",
                state.name(),
                if hint.is_empty() {
                    String::new()
                } else {
                    format!("; {hint}")
                }
            ))
        };
        let next = match (op, state) {
            ("kill", NodeState::Killed) => return refuse("restart it first"),
            ("kill", _) => {
                node.stop().await;
                NodeState::Killed
            }
            ("pause", NodeState::Up) => {
                node.pause();
                NodeState::Paused
            }
            ("resume", NodeState::Paused) => {
                node.resume().await;
                NodeState::Up
            }
            ("isolate", NodeState::Up) => {
                node.isolate().await;
                NodeState::Isolated
            }
            ("heal", NodeState::Isolated) => {
                node.heal().await;
                NodeState::Up
            }
            (_, NodeState::Killed) => return refuse("restart it first"),
            ("pause" | "isolate", NodeState::Paused) => return refuse("resume it first"),
            ("pause" | "isolate", NodeState::Isolated) => return refuse("heal it first"),
            ("resume", _) => return refuse("only a paused node resumes"),
            ("heal", _) => return refuse("only an isolated node heals"),
            _ => return refuse(""),
        };
        self.states[i] = next;
        Ok(())
    }

    async fn restart(&mut self, i: usize, mode: RestartMode) -> Result<BootKind, String> {
        self.refuse_if_shut_down("restart", i)?;
        let node = self.cluster.node(i);
        let killed = self.states[i] == NodeState::Killed;
        match (mode, killed) {
            (RestartMode::Clean, true) => {
                return Err(format!(
                    "restart: node {i} was killed, so it saved nothing to restart cleanly from; use mode \"crash\" or \"lose_dir\""
                ))
            }
            (RestartMode::Clean, false) => {
                node.restart_clean();
            }
            (RestartMode::Crash, false) => node.crash_restart(),
            (RestartMode::LoseDir, false) => node.crash_restart_losing_dir(),
            (RestartMode::Crash, true) => node.start_again().await,
            (RestartMode::LoseDir, true) => {
                if let Some(dir) = &node.shared().node_dir {
                    dir.wipe()
                        .map_err(|e| format!("restart: cannot wipe node {i}'s directory: {e}"))?;
                }
                node.start_again().await;
            }
        }
        self.states[i] = NodeState::Up;
        let boot = *node.shared().last_boot.lock();
        Ok(boot)
    }

    /// Whether a client's SHUTDOWN stopped node `i` (its port refuses connections).
    fn shut_down(&self, i: usize) -> bool {
        let shared = self.cluster.node(i).shared();
        shared.shutting_down.load(Ordering::SeqCst)
    }

    /// A node that SHUTDOWN stopped takes no more ops: its accept loop has ended, as a
    /// redis-server process that exited.
    fn refuse_if_shut_down(&self, op: &str, i: usize) -> Result<(), String> {
        if self.shut_down(i) {
            return Err(format!(
                "{op}: node {i} is shut_down (a client sent SHUTDOWN); the harness does not start it again"
            ));
        }
        Ok(())
    }

    fn node_status(&self, i: usize) -> Value {
        let node = self.cluster.node(i);
        let state = if self.shut_down(i) {
            "shut_down"
        } else {
            self.states[i].name()
        };
        json!({
            "index": i,
            "port": node.addr().port(),
            "state": state,
            "fence_ms": node.fence_remaining().as_millis() as u64,
            "wall_ms": node.clock().wall_ms(),
        })
    }

    /// The shared monotonic reading and each node's wall time.
    fn clock_reading(&self) -> Value {
        let nodes = self.cluster.nodes();
        json!({
            "mono_ms": self.cluster.clock().now_ms(),
            "wall_ms": nodes.iter().map(|n| n.clock().wall_ms()).collect::<Vec<_>>(),
        })
    }

    /// Stops every node (no snapshot) and removes the temporary directories.
    pub async fn shutdown(self) {
        self.cluster.shutdown().await;
    }
}

fn error(id: Value, msg: impl Into<String>) -> Value {
    json!({"id": id, "error": msg.into()})
}

/// A request's fields, checked.
struct Args<'a> {
    op: &'a str,
    req: &'a Map<String, Value>,
}

impl Args<'_> {
    /// Refuses fields other than `id`, `op` and `allowed` (a typo must not be ignored).
    fn only(&self, allowed: &[&str]) -> Result<(), String> {
        for key in self.req.keys() {
            if key != "id" && key != "op" && !allowed.contains(&key.as_str()) {
                let takes = if allowed.is_empty() {
                    "no arguments".to_string()
                } else {
                    allowed
                        .iter()
                        .map(|a| format!("\"{a}\""))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                return Err(format!(
                    "{}: unknown field \"{key}\" ({} takes {takes})",
                    self.op, self.op
                ));
            }
        }
        Ok(())
    }

    /// A whole number in `lo..=hi`.
    fn int(&self, key: &str, lo: i64, hi: i64) -> Result<i64, String> {
        let op = self.op;
        match self.req.get(key) {
            None => Err(format!(
                "{op} needs \"{key}\": a whole number of milliseconds"
            )),
            Some(v) => match v.as_i64() {
                Some(n) if (lo..=hi).contains(&n) => Ok(n),
                _ => Err(format!(
                    "{op}: \"{key}\" must be a whole number from {lo} to {hi}, not {v}"
                )),
            },
        }
    }

    fn node(&self, n: usize) -> Result<usize, String> {
        self.opt_node(n)?
            .ok_or_else(|| format!("{} needs \"node\": a node index, 0 to {}", self.op, n - 1))
    }

    fn opt_node(&self, n: usize) -> Result<Option<usize>, String> {
        let Some(v) = self.req.get("node") else {
            return Ok(None);
        };
        match v.as_u64() {
            Some(i) if (i as usize) < n && i < u64::from(u32::MAX) => Ok(Some(i as usize)),
            Some(i) => Err(format!(
                "{}: node {i} is out of range: this harness has {n} node{} (0 to {})",
                self.op,
                if n == 1 { "" } else { "s" },
                n - 1
            )),
            None => Err(format!(
                "{}: \"node\" must be a node index (0 to {}), not {v}",
                self.op,
                n - 1
            )),
        }
    }
}

enum Line {
    Read,
    TooLong,
    End,
}

/// Reads one line (without its newline) of at most `MAX_LINE` bytes; a longer one is
/// consumed to its end and reported.
async fn read_line<R: AsyncBufRead + Unpin>(input: &mut R, line: &mut Vec<u8>) -> io::Result<Line> {
    let mut too_long = false;
    loop {
        let buf = input.fill_buf().await?;
        if buf.is_empty() {
            // The end: a last line without a newline still counts.
            return Ok(if too_long {
                Line::TooLong
            } else if line.is_empty() {
                Line::End
            } else {
                Line::Read
            });
        }
        let (take, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(p) => (p + 1, true),
            None => (buf.len(), false),
        };
        if !too_long {
            let part = &buf[..if done { take - 1 } else { take }];
            if line.len() + part.len() > MAX_LINE {
                too_long = true;
                line.clear();
            } else {
                line.extend_from_slice(part);
            }
        }
        input.consume(take);
        if done {
            return Ok(if too_long { Line::TooLong } else { Line::Read });
        }
    }
}

async fn write_line<W: AsyncWrite + Unpin>(output: &mut W, v: &Value) -> io::Result<()> {
    let mut bytes = v.to_string().into_bytes();
    bytes.push(b'\n');
    output.write_all(&bytes).await?;
    output.flush().await
}
