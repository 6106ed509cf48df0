//! The test harness: a [`TestGroup`] driven over JSON lines, so that tests in any
//! language get the manual clock and the node faults (`redlockd harness`, docs/testing.md).
//!
//! The harness prints one ready line, then answers one reply line per request line, in
//! order. Bad input of any kind gets an error reply and the harness goes on; it stops at
//! the end of its input (or on `{"op":"shutdown"}`).

use super::{Action, ClientRef, DelayClock, Exchange, FaultSpec, FaultStatus, TestGroup};
use crate::config::Config;
use crate::durability::restart::BootKind;
use crate::protocol::Reply;
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
const OPS: &str = "ping, clock, nodes, advance, jump_wall, set_wall, kill, restart, pause, resume, isolate, heal, fault, faults, clear_fault, clear_faults, record, history, shutdown";

/// The fields of a `fault` request.
const FAULT_FIELDS: &[&str] = &[
    "node",
    "action",
    "command",
    "key",
    "client_name",
    "client_id",
    "client_addr",
    "count",
    "skip",
    "probability",
    "seed",
    "ms",
    "clock",
    "error",
];

/// The `action`s a `fault` request names.
const ACTIONS: &str = "delay, error, noscript, tryagain, busy, loading, drop_reply, drop_request, close_before, close_after";

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
    group: TestGroup,
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
        let group = TestGroup::try_start_with(n, |i, c| Config {
            port: 0,
            fence_at_boot: false,
            enable_debug_command: true,
            dir: dir.as_ref().map(|d| d.join(format!("node-{i}"))),
            clock: c.clock,
            ..config.clone()
        })
        .await?;
        // A test server leaves nothing behind: no clean-shutdown snapshot at the end.
        for node in group.nodes() {
            node.shared()
                .save_on_shutdown
                .store(false, Ordering::SeqCst);
        }
        Ok(Harness {
            states: vec![NodeState::Up; n],
            group,
        })
    }

    pub fn group(&self) -> &TestGroup {
        &self.group
    }

    /// The ready line (without its newline): every node's address, the process, the
    /// clock.
    pub fn ready_line(&self) -> String {
        let pid = std::process::id();
        let nodes: Vec<Value> = self
            .group
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
                self.group.advance(Duration::from_millis(ms as u64));
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
                    let node = self.group.node(i);
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
            "fault" => {
                args.only(FAULT_FIELDS)?;
                let i = args.node(self.states.len())?;
                let spec = fault_spec(&args)?;
                let node = self.group.node(i);
                let id = node.add_fault(spec).map_err(|e| format!("fault: {e}"))?;
                let status = node.fault(id).expect("a fault just added is listed");
                Ok(fault_json(i, &status))
            }
            "faults" | "clear_faults" => {
                args.only(&["node"])?;
                let mut out = Vec::new();
                for i in self.nodes_named(&args)? {
                    let node = self.group.node(i);
                    let list = if op == "faults" {
                        node.faults()
                    } else {
                        node.clear_faults()
                    };
                    out.extend(list.iter().map(|f| fault_json(i, f)));
                }
                Ok(Value::Array(out))
            }
            "clear_fault" => {
                args.only(&["node", "fault"])?;
                let i = args.node(self.states.len())?;
                let id = args.int("fault", 1, i64::MAX)?;
                match self.group.node(i).remove_fault(id as u64) {
                    Some(f) => Ok(fault_json(i, &f)),
                    None => Err(format!("clear_fault: node {i} has no fault {id}")),
                }
            }
            "record" => {
                args.only(&["node", "capacity"])?;
                let capacity = match args.req.get("capacity") {
                    None => DEFAULT_HISTORY,
                    Some(_) => args.int("capacity", 0, MAX_HISTORY as i64)? as usize,
                };
                for i in self.nodes_named(&args)? {
                    self.group.node(i).record(capacity);
                }
                Ok(Value::Bool(capacity > 0))
            }
            "history" => {
                args.only(&["node", "take"])?;
                let take = match args.req.get("take") {
                    None => false,
                    Some(Value::Bool(b)) => *b,
                    Some(v) => {
                        return Err(format!("history: \"take\" must be true or false, not {v}"))
                    }
                };
                let mut out = Vec::new();
                for i in self.nodes_named(&args)? {
                    let node = self.group.node(i);
                    let h = if take {
                        node.take_history()
                    } else {
                        node.history()
                    };
                    out.extend(h.iter().map(|e| exchange_json(i, e)));
                }
                Ok(Value::Array(out))
            }
            _ => Err(format!("unknown op {:?}; ops: {OPS}", op)),
        }
    }

    /// The node a request names, or every node.
    fn nodes_named(&self, args: &Args) -> Result<Vec<usize>, String> {
        Ok(match args.opt_node(self.states.len())? {
            Some(i) => vec![i],
            None => (0..self.states.len()).collect(),
        })
    }

    /// kill, pause, resume, isolate, heal: each from the one state it makes sense in.
    async fn fault(&mut self, op: &str, i: usize) -> Result<(), String> {
        self.refuse_if_shut_down(op, i)?;
        let state = self.states[i];
        let node = self.group.node(i);
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
        let node = self.group.node(i);
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
        let shared = self.group.node(i).shared();
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
        let node = self.group.node(i);
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
        let nodes = self.group.nodes();
        json!({
            "mono_ms": self.group.clock().now_ms(),
            "wall_ms": nodes.iter().map(|n| n.clock().wall_ms()).collect::<Vec<_>>(),
        })
    }

    /// Stops every node (no snapshot) and removes the temporary directories.
    pub async fn shutdown(self) {
        self.group.shutdown().await;
    }
}

/// The history's length when `record` does not say.
const DEFAULT_HISTORY: usize = 10_000;
/// The longest history a node keeps.
const MAX_HISTORY: usize = 1_000_000;

/// A `fault` request's fault.
fn fault_spec(args: &Args) -> Result<FaultSpec, String> {
    let req = args.req;
    let action_name = match req.get("action") {
        Some(Value::String(s)) => s.as_str(),
        Some(v) => {
            return Err(format!(
                "fault: \"action\" must be one of {ACTIONS}, not {v}"
            ))
        }
        None => return Err(format!("fault needs \"action\": one of {ACTIONS}")),
    };
    let only_with = |field: &str, action: &str| -> Result<(), String> {
        if req.contains_key(field) && action_name != action {
            return Err(format!(
                "fault: \"{field}\" goes with action \"{action}\" only"
            ));
        }
        Ok(())
    };
    only_with("ms", "delay")?;
    only_with("clock", "delay")?;
    only_with("error", "error")?;
    let action = match action_name {
        "delay" => Action::Delay {
            ms: args.int("ms", 0, MAX_MOVE_MS)? as u64,
            clock: match req.get("clock") {
                None => DelayClock::Node,
                Some(Value::String(c)) if c == "manual" => DelayClock::Node,
                Some(Value::String(c)) if c == "real" => DelayClock::Real,
                Some(v) => {
                    return Err(format!(
                        "fault: \"clock\" must be \"manual\" (the test clock) or \"real\", not {v}"
                    ))
                }
            },
        },
        "error" => match req.get("error") {
            Some(Value::String(e)) => Action::Error(e.clone()),
            _ => {
                return Err(
                    "fault: action \"error\" needs \"error\": the error reply's text, code first (\"ERR ...\")".into(),
                )
            }
        },
        "noscript" => Action::noscript(),
        "tryagain" => Action::tryagain(),
        "busy" => Action::busy(),
        "loading" => Action::loading(),
        "drop_reply" => Action::DropReply,
        "drop_request" | "close_before" => Action::DropRequest,
        "close_after" => Action::CloseAfter,
        other => return Err(format!("fault: unknown action {other:?}; actions: {ACTIONS}")),
    };
    let string = |field: &str| -> Result<Option<String>, String> {
        match req.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(v) => Err(format!("fault: \"{field}\" must be a string, not {v}")),
        }
    };
    let number = |field: &str| -> Result<Option<u64>, String> {
        match req.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v.as_u64().map(Some).ok_or_else(|| {
                format!("fault: \"{field}\" must be a whole number from 0, not {v}")
            }),
        }
    };
    let mut spec = FaultSpec::new(action);
    spec.scope.command = string("command")?;
    spec.scope.key = string("key")?.map(bytes::Bytes::from);
    spec.scope.client_name = string("client_name")?.map(bytes::Bytes::from);
    spec.scope.client_addr = string("client_addr")?;
    spec.scope.client_id = number("client_id")?;
    spec.count = number("count")?;
    spec.skip = number("skip")?.unwrap_or(0);
    spec.seed = number("seed")?.unwrap_or(1);
    spec.probability = match req.get("probability") {
        None | Some(Value::Null) => None,
        Some(v) => Some(v.as_f64().ok_or_else(|| {
            format!("fault: \"probability\" must be a number from 0 to 1, not {v}")
        })?),
    };
    Ok(spec)
}

/// An action's name in the protocol (the error text for the error ones).
fn action_json(a: &Action, out: &mut Map<String, Value>) {
    let name = match a {
        Action::Delay { ms, clock } => {
            out.insert("ms".into(), Value::from(*ms));
            let clock = match clock {
                DelayClock::Node => "manual",
                DelayClock::Real => "real",
            };
            out.insert("clock".into(), Value::from(clock));
            "delay"
        }
        Action::Error(text) => {
            out.insert("error".into(), Value::from(text.as_str()));
            "error"
        }
        Action::DropReply => "drop_reply",
        Action::DropRequest => "drop_request",
        Action::CloseAfter => "close_after",
    };
    out.insert("action".into(), Value::from(name));
}

fn lossy(b: &[u8]) -> Value {
    Value::from(String::from_utf8_lossy(b).into_owned())
}

fn client_json(c: &ClientRef) -> Value {
    json!({"id": c.id, "name": c.name, "addr": c.addr})
}

fn fault_json(node: usize, f: &FaultStatus) -> Value {
    let mut out = Map::new();
    out.insert("fault".into(), Value::from(f.id));
    out.insert("node".into(), Value::from(node));
    action_json(&f.spec.action, &mut out);
    let sc = &f.spec.scope;
    out.insert("command".into(), json!(sc.command));
    out.insert("key".into(), sc.key.as_deref().map_or(Value::Null, lossy));
    out.insert(
        "client_name".into(),
        sc.client_name.as_deref().map_or(Value::Null, lossy),
    );
    out.insert("client_id".into(), json!(sc.client_id));
    out.insert("client_addr".into(), json!(sc.client_addr));
    out.insert("count".into(), json!(f.spec.count));
    out.insert("skip".into(), json!(f.spec.skip));
    out.insert("probability".into(), json!(f.spec.probability));
    out.insert("seed".into(), json!(f.spec.seed));
    out.insert("matched".into(), json!(f.matched));
    out.insert("fired".into(), json!(f.fired));
    let firings: Vec<Value> = f
        .firings
        .iter()
        .map(|x| {
            json!({
                "command": x.command.iter().map(|a| lossy(a)).collect::<Vec<_>>(),
                "client": client_json(&x.client),
                "mono_ms": x.mono_ms,
                "wall_ms": x.wall_ms,
            })
        })
        .collect();
    out.insert("firings".into(), Value::Array(firings));
    Value::Object(out)
}

fn exchange_json(node: usize, e: &Exchange) -> Value {
    json!({
        "node": node,
        "seq": e.seq,
        "client": client_json(&e.client),
        "command": e.command.iter().map(|a| lossy(a)).collect::<Vec<_>>(),
        "reply": e.reply.as_ref().map_or(Value::Null, reply_json),
        "outcome": e.outcome.name(),
        "fault": e.fault,
        "mono_ms": e.mono_ms,
    })
}

/// A reply as JSON: strings and bulks as strings, an error as `{"error": text}`,
/// nulls as null, aggregates as arrays (a map's as [key, value] pairs).
pub fn reply_json(r: &Reply) -> Value {
    match r {
        Reply::Ok => Value::from("OK"),
        Reply::Status(s) | Reply::Bulk(s) | Reply::Verbatim(_, s) => lossy(s),
        Reply::Error(e) => json!({"error": lossy(e)}),
        Reply::Integer(i) => Value::from(*i),
        Reply::Null | Reply::NullArray => Value::Null,
        Reply::Array(v) | Reply::Set(v) | Reply::Push(v) | Reply::Multi(v) => {
            Value::Array(v.iter().map(reply_json).collect())
        }
        Reply::Map(m) => Value::Array(
            m.iter()
                .map(|(k, v)| Value::Array(vec![reply_json(k), reply_json(v)]))
                .collect(),
        ),
        Reply::Double(d) | Reply::HumanDouble(d) => json!(d),
        Reply::Bool(b) => Value::Bool(*b),
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
