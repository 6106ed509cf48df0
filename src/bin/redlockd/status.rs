//! `redlockd status NODE...`: one screen for a Redlock deployment. For each node: up or
//! not, the restart fence and its rule, the cluster map's version, the locks it holds,
//! grants, refusals (contention), locks that expired while held and overruns, and its
//! clock's offset from the others' (its offset from this machine's, TIME against the
//! round trip's middle, less the median of the nodes' offsets; the offset from this
//! machine is shown too); then the locks the
//! nodes hold (LOCKS LIST) with their holders. Refreshes like `top` (`--interval`);
//! `--once` prints one screen, `--json` one JSON document for scripts.
//!
//! It speaks RESP2 over plain TCP with a small blocking client of its own: it reads
//! INFO, TIME and LOCKS LIST and changes nothing.

use clap::Args;
use serde_json::{json, Map, Value};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[derive(Args, Debug)]
pub struct StatusArgs {
    /// The nodes, as HOST:PORT.
    #[arg(required = true)]
    nodes: Vec<String>,
    /// Print one JSON document and exit.
    #[arg(long)]
    json: bool,
    /// Print one screen and exit.
    #[arg(long)]
    once: bool,
    /// Seconds between refreshes.
    #[arg(long, default_value = "2")]
    interval: f64,
    /// How many locks to list per node.
    #[arg(long, default_value = "20")]
    locks: usize,
    /// AUTH with this user (with --password).
    #[arg(long, env = "REDLOCKD_STATUS_USER")]
    user: Option<String>,
    /// AUTH with this password.
    #[arg(long, env = "REDLOCKD_STATUS_PASSWORD", hide_env_values = true)]
    password: Option<String>,
}

/// A RESP2 reply.
#[derive(Debug)]
enum Resp {
    Text(String),
    Int(i64),
    Nil,
    Error(String),
    Array(Vec<Resp>),
}

impl Resp {
    fn text(&self) -> String {
        match self {
            Resp::Text(s) | Resp::Error(s) => s.clone(),
            Resp::Int(n) => n.to_string(),
            Resp::Nil => String::new(),
            Resp::Array(_) => String::from("[...]"),
        }
    }
}

/// One connection to a node, every read and write bounded by a timeout.
struct Conn {
    reader: BufReader<TcpStream>,
}

impl Conn {
    fn open(addr: &str, args: &StatusArgs) -> std::io::Result<Conn> {
        let addrs: Vec<_> = std::net::ToSocketAddrs::to_socket_addrs(addr)?.collect();
        let first = addrs
            .first()
            .ok_or_else(|| std::io::Error::other("no address"))?;
        let stream = TcpStream::connect_timeout(first, Duration::from_secs(2))?;
        stream.set_read_timeout(Some(Duration::from_secs(2)))?;
        stream.set_write_timeout(Some(Duration::from_secs(2)))?;
        let mut conn = Conn {
            reader: BufReader::new(stream),
        };
        if let Some(password) = &args.password {
            let mut auth = vec!["AUTH"];
            auth.extend(args.user.as_deref());
            auth.push(password);
            if let Resp::Error(e) = conn.call(&auth)? {
                return Err(std::io::Error::other(e));
            }
        }
        Ok(conn)
    }

    fn call(&mut self, args: &[&str]) -> std::io::Result<Resp> {
        let mut req = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            req.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            req.extend_from_slice(a.as_bytes());
            req.extend_from_slice(b"\r\n");
        }
        self.reader.get_mut().write_all(&req)?;
        self.read()
    }

    fn read(&mut self) -> std::io::Result<Resp> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(std::io::Error::other("connection closed"));
        }
        let line = line.trim_end_matches("\r\n");
        let bad = || std::io::Error::other(format!("bad reply line {line:?}"));
        let (kind, rest) = line.split_at_checked(1).ok_or_else(bad)?;
        Ok(match kind {
            "+" => Resp::Text(rest.to_string()),
            "-" => Resp::Error(rest.to_string()),
            ":" => Resp::Int(rest.parse().map_err(|_| bad())?),
            "$" => {
                let n: i64 = rest.parse().map_err(|_| bad())?;
                if n < 0 {
                    return Ok(Resp::Nil);
                }
                let mut buf = vec![0; n as usize + 2];
                std::io::Read::read_exact(&mut self.reader, &mut buf)?;
                buf.truncate(n as usize);
                Resp::Text(String::from_utf8_lossy(&buf).into_owned())
            }
            "*" => {
                let n: i64 = rest.parse().map_err(|_| bad())?;
                if n < 0 {
                    return Ok(Resp::Nil);
                }
                let mut items = Vec::with_capacity(n.min(1024) as usize);
                for _ in 0..n {
                    items.push(self.read()?);
                }
                Resp::Array(items)
            }
            _ => return Err(bad()),
        })
    }
}

fn unix_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

/// INFO's `field:value` lines as a map.
fn info_fields(text: &str) -> Map<String, Value> {
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), Value::String(v.trim().to_string())))
        .collect()
}

/// One node's state, as JSON (`up: false` and the error when it cannot be read).
fn node_state(addr: &str, args: &StatusArgs) -> Value {
    match read_node(addr, args) {
        Ok(v) => v,
        Err(e) => json!({ "node": addr, "up": false, "error": e.to_string() }),
    }
}

fn read_node(addr: &str, args: &StatusArgs) -> std::io::Result<Value> {
    let mut c = Conn::open(addr, args)?;
    let info = c.call(&["INFO", "all"])?;
    if let Resp::Error(e) = &info {
        return Err(std::io::Error::other(e.clone()));
    }
    let fields = info_fields(&info.text());
    let before = unix_us();
    let time = c.call(&["TIME"])?;
    let after = unix_us();
    let offset_ms = match &time {
        Resp::Array(t) if t.len() == 2 => {
            let secs: i64 = t[0].text().parse().unwrap_or(0);
            let us: i64 = t[1].text().parse().unwrap_or(0);
            Some((secs * 1_000_000 + us - (before + after) / 2) as f64 / 1000.0)
        }
        _ => None,
    };
    let count = args.locks.max(1).to_string();
    let locks = match c.call(&["LOCKS", "LIST", "COUNT", &count])? {
        Resp::Array(items) => items
            .iter()
            .map(|lock| match lock {
                Resp::Array(kv) => kv
                    .chunks(2)
                    .map(|p| {
                        let v = match &p[1] {
                            Resp::Int(n) => json!(n),
                            Resp::Nil => Value::Null,
                            other => json!(other.text()),
                        };
                        (p[0].text(), v)
                    })
                    .collect::<Map<String, Value>>()
                    .into(),
                _ => Value::Null,
            })
            .collect(),
        _ => Vec::new(),
    };
    let get = |k: &str| fields.get(k).cloned().unwrap_or(Value::Null);
    let num = |k: &str| {
        fields
            .get(k)
            .and_then(|v| v.as_str()?.parse::<i64>().ok())
            .map_or(Value::Null, |n| json!(n))
    };
    Ok(json!({
        "node": addr,
        "up": true,
        "fence_active": num("fence_active"),
        "fence_remaining_ms": num("fence_remaining_ms"),
        "fence_rule": get("fence_rule"),
        "cluster_map_version": num("cluster_map_version"),
        "locks_held": num("locks_held"),
        "lock_grants": num("lock_grants"),
        "lock_refusals_held": num("lock_refusals_held"),
        "lock_expired_held": num("lock_expired_held"),
        "lock_overruns": num("lock_overruns"),
        "clock_offset_ms": offset_ms,
        "locks": locks,
    }))
}

/// Sets each answering node's `clock_skew_ms`: its clock's offset from the others',
/// that is its offset from this machine less the median of the nodes' offsets (this
/// machine's own clock cancels out; one node far off moves the median little).
fn clock_skews(nodes: &mut [Value]) {
    let mut offsets: Vec<f64> = nodes
        .iter()
        .filter_map(|n| n["clock_offset_ms"].as_f64())
        .collect();
    if offsets.is_empty() {
        return;
    }
    offsets.sort_by(f64::total_cmp);
    let mid = offsets.len() / 2;
    let median = if offsets.len() % 2 == 1 {
        offsets[mid]
    } else {
        (offsets[mid - 1] + offsets[mid]) / 2.0
    };
    for n in nodes.iter_mut() {
        if let Some(o) = n["clock_offset_ms"].as_f64() {
            n["clock_skew_ms"] = json!(((o - median) * 1000.0).round() / 1000.0);
        }
    }
}

fn cell(v: &Value) -> String {
    match v {
        Value::Null => "-".to_string(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// One screen of text for the nodes' states.
fn screen(nodes: &[Value]) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "{:<22} {:<4} {:<16} {:>6} {:>7} {:>9} {:>9} {:>8} {:>8} {:>9} {:>9}\n",
        "NODE",
        "UP",
        "FENCE",
        "MAP",
        "HELD",
        "GRANTS",
        "REFUSED",
        "EXPIRED",
        "OVERRUN",
        "SKEW ms",
        "CLOCK ms"
    ));
    for n in nodes {
        let up = n["up"].as_bool().unwrap_or(false);
        if !up {
            out.push_str(&format!(
                "{:<22} {:<4} {}\n",
                cell(&n["node"]),
                "no",
                cell(&n["error"])
            ));
            continue;
        }
        let fence = match n["fence_active"].as_i64() {
            Some(1) => format!(
                "up {}s ({})",
                n["fence_remaining_ms"].as_i64().unwrap_or(0) / 1000,
                cell(&n["fence_rule"])
            ),
            _ => format!("down ({})", cell(&n["fence_rule"])),
        };
        // Tenths of a millisecond; a value that rounds to 0 is "+0.0", never "-0.0".
        let ms = |v: &Value| {
            v.as_f64().map_or("-".to_string(), |o| {
                format!("{:+.1}", (o * 10.0).round() / 10.0 + 0.0)
            })
        };
        out.push_str(&format!(
            "{:<22} {:<4} {:<16} {:>6} {:>7} {:>9} {:>9} {:>8} {:>8} {:>9} {:>9}\n",
            cell(&n["node"]),
            "yes",
            fence,
            cell(&n["cluster_map_version"]),
            cell(&n["locks_held"]),
            cell(&n["lock_grants"]),
            cell(&n["lock_refusals_held"]),
            cell(&n["lock_expired_held"]),
            cell(&n["lock_overruns"]),
            ms(&n["clock_skew_ms"]),
            ms(&n["clock_offset_ms"]),
        ));
    }
    out.push_str(&format!(
        "\n{:<22} {:<28} {:>8} {:<24} {:>8} {:>7} {:>4}\n",
        "NODE", "LOCK", "TTL ms", "HOLDER", "HELD ms", "REFUSED", "EXT"
    ));
    for n in nodes {
        for lock in n["locks"].as_array().into_iter().flatten() {
            let holder = match (&lock["client-name"], &lock["client-addr"]) {
                (Value::String(name), _) if !name.is_empty() => name.clone(),
                (_, addr) => cell(addr),
            };
            let holder = if lock["client-connected"].as_i64() == Some(0) {
                format!("{holder} (gone)")
            } else {
                holder
            };
            out.push_str(&format!(
                "{:<22} {:<28} {:>8} {:<24} {:>8} {:>7} {:>4}\n",
                cell(&n["node"]),
                cell(&lock["key"]),
                cell(&lock["ttl-ms"]),
                holder,
                cell(&lock["held-ms"]),
                cell(&lock["refused"]),
                cell(&lock["extensions"]),
            ));
        }
    }
    out
}

/// Runs `redlockd status`: 0, or 1 when no node could be read.
pub fn run(args: StatusArgs) -> u8 {
    loop {
        let started = Instant::now();
        let mut nodes: Vec<Value> = args.nodes.iter().map(|n| node_state(n, &args)).collect();
        clock_skews(&mut nodes);
        let any_up = nodes.iter().any(|n| n["up"].as_bool() == Some(true));
        if args.json {
            println!("{}", json!({ "nodes": nodes }));
            return u8::from(!any_up);
        }
        if args.once {
            print!("{}", screen(&nodes));
            return u8::from(!any_up);
        }
        // Clear the screen and home the cursor, as top does.
        print!("\x1b[2J\x1b[H{}", screen(&nodes));
        let _ = std::io::stdout().flush();
        let wait = Duration::from_secs_f64(args.interval.max(0.1));
        std::thread::sleep(wait.saturating_sub(started.elapsed()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_lines_become_fields() {
        let f = info_fields("# Locks\r\nlocks_held:3\r\nlock_overruns:1\r\n");
        assert_eq!(f["locks_held"], "3");
        assert_eq!(f["lock_overruns"], "1");
    }

    #[test]
    fn skew_is_the_offset_from_the_median_of_the_nodes() {
        let node = |o: f64| json!({"up": true, "clock_offset_ms": o});
        let mut nodes = [
            node(10.0),
            node(12.5),
            json!({"up": false, "error": "refused"}),
            node(40.0),
        ];
        clock_skews(&mut nodes);
        let skews: Vec<_> = nodes.iter().map(|n| n["clock_skew_ms"].clone()).collect();
        assert_eq!(skews, [json!(-2.5), json!(0.0), Value::Null, json!(27.5)]);
        let mut two = [node(-3.0), node(5.0), node(0.96), node(1.04)];
        clock_skews(&mut two);
        assert_eq!(two[0]["clock_skew_ms"], json!(-4.0));
        assert_eq!(two[1]["clock_skew_ms"], json!(4.0));
        assert_eq!(two[2]["clock_skew_ms"], json!(-0.04));
        let s = screen(&two);
        assert!(s.contains("SKEW ms  CLOCK ms"), "{s}");
        assert!(s.contains("-4.0      -3.0"), "{s}");
        assert!(s.contains("+0.0      +1.0"), "{s}");
        assert!(!s.contains("-0.0"), "{s}");
    }

    #[test]
    fn a_node_that_is_down_says_so() {
        let nodes = [json!({"node": "127.0.0.1:1", "up": false, "error": "refused"})];
        let s = screen(&nodes);
        assert!(s.contains("127.0.0.1:1"), "{s}");
        assert!(
            s.contains("no     refused") || s.contains("no   refused"),
            "{s}"
        );
    }
}
