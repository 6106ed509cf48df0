//! One client of the network-fault harness (tests/netfault/): loops acquire / work /
//! release through the Redlock client against five nodes and prints its history as
//! JSON lines on stdout (one event per line, flushed as it happens), for the
//! harness's checkers.
//!
//! ```text
//! netfault_client --nodes 10.0.0.1:6379,... --workload mutex|set|fenced --client 3
//!     [--cluster 10.0.0.1:6379,10.0.0.2:6379 ...]
//!     [--storage 10.0.0.9:7000] [--tokens] [--key nf:lock] [--ttl-ms 1000]
//!     [--hold-ms 100..400 as --hold-min-ms/--hold-max-ms] [--wait-ms 2000]
//!     [--seconds 30] [--storage-timeout-ms 8000]
//! ```
//!
//! Workloads:
//! - `mutex`: acquire, hold (sleep), release;
//! - `set`: acquire, read the shared set from the storage process, sleep, write it back
//!   with one more element (read-modify-write under the lock), release; with tokens
//!   the read carries the token as well as the write;
//! - `fenced`: acquire, sleep, write a value to the storage process, release.
//!
//! `--cluster SEEDS` (repeatable) adds a Redis Cluster of redlockd nodes (map mode) as
//! one Redlock vote, given by its seed addresses: the client loads the slot map and
//! follows `MOVED` (docs/cluster.md); `--nodes` may then be left out.
//!
//! With `--tokens` the lock is taken with a fencing token and every write carries it;
//! without, writes carry `-` (the storage then cannot refuse a stale one).
//!
//! Times are nanoseconds of the host's realtime clock, read once at start and advanced
//! by the monotonic clock, so histories of processes on one host compare. Every
//! acquire and release also reports its duration and the bound the client's options
//! promise for it (`bound_ms`), which the harness checks.

use std::io::Write;
use std::time::{Duration, Instant};

use redlockd::redlock::{Lock, Redlock, RedlockOptions};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

struct Args {
    nodes: Vec<String>,
    storage: Option<String>,
    workload: String,
    client: u64,
    tokens: bool,
    key: String,
    ttl: Duration,
    hold_min: u64,
    hold_max: u64,
    wait: Duration,
    seconds: u64,
    storage_timeout: Duration,
}

fn usage(msg: &str) -> ! {
    eprintln!("netfault_client: {msg}");
    eprintln!(
        "usage: netfault_client --nodes A,B,.. [--cluster A,B ..] --workload mutex|set|fenced --client N \
         [--storage HOST:PORT] [--tokens] [--key K] [--ttl-ms N] [--hold-min-ms N] \
         [--hold-max-ms N] [--wait-ms N] [--seconds N] [--storage-timeout-ms N]"
    );
    std::process::exit(64);
}

fn parse_args() -> Args {
    let mut a = Args {
        nodes: Vec::new(),
        storage: None,
        workload: String::new(),
        client: 0,
        tokens: false,
        key: "nf:lock".into(),
        ttl: Duration::from_millis(1000),
        hold_min: 100,
        hold_max: 400,
        wait: Duration::from_millis(2000),
        seconds: 30,
        storage_timeout: Duration::from_millis(8000),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--tokens" {
            a.tokens = true;
            continue;
        }
        let Some(v) = it.next() else {
            usage(&format!("{flag} needs a value"))
        };
        let num = |v: &str| -> u64 {
            v.parse()
                .unwrap_or_else(|_| usage(&format!("{flag}: not a number: {v}")))
        };
        match flag.as_str() {
            "--nodes" => a.nodes.extend(v.split(',').map(str::to_string)),
            "--cluster" => a.nodes.push(format!("cluster:{v}")),
            "--storage" => a.storage = Some(v),
            "--workload" => a.workload = v,
            "--client" => a.client = num(&v),
            "--key" => a.key = v,
            "--ttl-ms" => a.ttl = Duration::from_millis(num(&v)),
            "--hold-min-ms" => a.hold_min = num(&v),
            "--hold-max-ms" => a.hold_max = num(&v),
            "--wait-ms" => a.wait = Duration::from_millis(num(&v)),
            "--seconds" => a.seconds = num(&v),
            "--storage-timeout-ms" => a.storage_timeout = Duration::from_millis(num(&v)),
            _ => usage(&format!("unknown flag {flag}")),
        }
    }
    if a.nodes.is_empty() {
        usage("--nodes or --cluster is required");
    }
    if !matches!(a.workload.as_str(), "mutex" | "set" | "fenced") {
        usage("--workload must be mutex, set or fenced");
    }
    if a.workload != "mutex" && a.storage.is_none() {
        usage("--storage is required for set and fenced");
    }
    if a.hold_max < a.hold_min {
        usage("--hold-max-ms is below --hold-min-ms");
    }
    a
}

/// The history's clock: CLOCK_MONOTONIC in nanoseconds, the one clock every process of
/// the harness reads (storage.py and netfault.py use `time.monotonic_ns()`). A wall
/// reading at start plus elapsed monotonic time would put each process's timeline off by
/// however long it was descheduled between the two reads (and by any step of the wall
/// clock between the processes' starts): a hand-over from one holder to the next then
/// reads as a few milliseconds of overlap.
struct Clock;

impl Clock {
    fn new() -> Clock {
        Clock
    }
    fn now(&self) -> u128 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid place to write; CLOCK_MONOTONIC always exists.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
        ts.tv_sec as u128 * 1_000_000_000 + ts.tv_nsec as u128
    }
}

/// A small xorshift generator: hold times only, seeded per client.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

fn emit(line: String) {
    let mut out = std::io::stdout().lock();
    // A closed stdout (the harness is gone) ends the client.
    if writeln!(out, "{line}").and_then(|_| out.flush()).is_err() {
        std::process::exit(0);
    }
}

fn json_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

fn token_json(lock: &Lock) -> String {
    lock.token()
        .map(|t| t.to_string())
        .unwrap_or_else(|| "null".into())
}

/// One request to the storage process (a line out, a line back), bounded by `timeout`.
async fn storage_call(addr: &str, line: &str, timeout: Duration) -> Result<String, String> {
    let work = async {
        let mut s = TcpStream::connect(addr)
            .await
            .map_err(|e| format!("connect: {e}"))?;
        s.set_nodelay(true).ok();
        s.write_all(format!("{line}\n").as_bytes())
            .await
            .map_err(|e| format!("write: {e}"))?;
        let mut r = BufReader::new(s);
        let mut reply = String::new();
        r.read_line(&mut reply)
            .await
            .map_err(|e| format!("read: {e}"))?;
        if reply.is_empty() {
            return Err("closed".into());
        }
        Ok(reply.trim_end().to_string())
    };
    match tokio::time::timeout(timeout, work).await {
        Ok(r) => r,
        Err(_) => Err("timeout".into()),
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let a = parse_args();
    let clock = Clock::new();
    let opts = RedlockOptions {
        fencing_tokens: a.tokens,
        ..Default::default()
    };
    let rl = Redlock::new(a.nodes.clone(), opts.clone())
        .unwrap_or_else(|e| usage(&format!("bad nodes: {e}")));
    let nt = rl.node_timeout(a.ttl);
    // acquire_within: attempts until `wait` has passed, then one last attempt; one
    // attempt is at most a grant round, a commit round and a release round, each bounded
    // by the node timeout.
    let acquire_bound = a.wait + nt * 3;
    let release_bound = nt;
    let c = a.client;
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (c + 1).wrapping_mul(0x2545_F491_4F6C_DD1D));
    emit(format!(
        "{{\"ev\":\"start\",\"c\":{c},\"t\":{},\"workload\":{},\"tokens\":{},\"ttl_ms\":{},\"node_timeout_ms\":{},\"pid\":{}}}",
        clock.now(),
        json_str(&a.workload),
        a.tokens,
        a.ttl.as_millis(),
        nt.as_millis(),
        std::process::id()
    ));
    let end = Instant::now() + Duration::from_secs(a.seconds);
    let mut seq = 0u64;
    while Instant::now() < end {
        seq += 1;
        let hid = format!("{c}-{seq}");
        let t0 = clock.now();
        let m0 = Instant::now();
        emit(format!(
            "{{\"ev\":\"acquire\",\"ph\":\"invoke\",\"c\":{c},\"hid\":\"{hid}\",\"t\":{t0}}}"
        ));
        let res = rl.acquire_within(a.key.as_bytes(), a.ttl, a.wait).await;
        let dur = m0.elapsed();
        let lock = match res {
            Ok(lock) => {
                emit(format!(
                    "{{\"ev\":\"acquire\",\"ph\":\"ok\",\"c\":{c},\"hid\":\"{hid}\",\"t\":{},\"token\":{},\"valid_ms\":{},\"dur_ms\":{:.3},\"bound_ms\":{}}}",
                    clock.now(),
                    token_json(&lock),
                    lock.validity().as_millis(),
                    dur.as_secs_f64() * 1e3,
                    acquire_bound.as_millis()
                ));
                lock
            }
            Err(e) => {
                emit(format!(
                    "{{\"ev\":\"acquire\",\"ph\":\"fail\",\"c\":{c},\"hid\":\"{hid}\",\"t\":{},\"err\":{},\"dur_ms\":{:.3},\"bound_ms\":{}}}",
                    clock.now(),
                    json_str(&e.to_string()),
                    dur.as_secs_f64() * 1e3,
                    acquire_bound.as_millis()
                ));
                tokio::time::sleep(Duration::from_millis(rng.between(10, 50))).await;
                continue;
            }
        };
        let token = lock
            .token()
            .map(|t| t.to_string())
            .unwrap_or_else(|| "-".into());
        let hold = Duration::from_millis(rng.between(a.hold_min, a.hold_max));
        match a.workload.as_str() {
            "mutex" => tokio::time::sleep(hold).await,
            "set" => {
                let st = a.storage.as_deref().unwrap_or_default();
                // The read carries the token too: a store that fenced only writes
                // would let a later holder that read the same state overwrite us.
                let read =
                    storage_call(st, &format!("GET {} {token}", a.key), a.storage_timeout).await;
                let value = match read {
                    Ok(r) if r.starts_with("VAL ") => r[4..].to_string(),
                    Ok(r) if r.starts_with("STALE") => {
                        emit(format!(
                            "{{\"ev\":\"read\",\"ph\":\"refused\",\"c\":{c},\"hid\":\"{hid}\",\"t\":{},\"detail\":{}}}",
                            clock.now(),
                            json_str(&r)
                        ));
                        String::new()
                    }
                    other => {
                        emit(format!(
                            "{{\"ev\":\"read\",\"ph\":\"fail\",\"c\":{c},\"hid\":\"{hid}\",\"t\":{},\"err\":{}}}",
                            clock.now(),
                            json_str(&format!("{other:?}"))
                        ));
                        String::new()
                    }
                };
                if !value.is_empty() {
                    tokio::time::sleep(hold).await;
                    // The set is a JSON array of integers; add ours at the end.
                    let elem = c * 1_000_000 + seq;
                    let inner = value.trim().trim_start_matches('[').trim_end_matches(']');
                    let new = if inner.trim().is_empty() {
                        format!("[{elem}]")
                    } else {
                        format!("[{inner},{elem}]")
                    };
                    write_storage(&clock, &a, c, &hid, &token, elem, &new).await;
                }
            }
            _ => {
                tokio::time::sleep(hold).await;
                let elem = c * 1_000_000 + seq;
                write_storage(&clock, &a, c, &hid, &token, elem, &elem.to_string()).await;
            }
        }
        let m1 = Instant::now();
        emit(format!(
            "{{\"ev\":\"release\",\"ph\":\"invoke\",\"c\":{c},\"hid\":\"{hid}\",\"t\":{}}}",
            clock.now()
        ));
        let deleted = rl.release(&lock).await;
        emit(format!(
            "{{\"ev\":\"release\",\"ph\":\"ok\",\"c\":{c},\"hid\":\"{hid}\",\"t\":{},\"deleted\":{deleted},\"dur_ms\":{:.3},\"bound_ms\":{}}}",
            clock.now(),
            m1.elapsed().as_secs_f64() * 1e3,
            release_bound.as_millis()
        ));
    }
    emit(format!(
        "{{\"ev\":\"end\",\"c\":{c},\"t\":{}}}",
        clock.now()
    ));
}

/// PUT to the storage process; logs the outcome: ok (accepted), refused (a stale
/// token), or info (no answer: the write may or may not have been applied).
async fn write_storage(
    clock: &Clock,
    a: &Args,
    c: u64,
    hid: &str,
    token: &str,
    elem: u64,
    value: &str,
) {
    let st = a.storage.as_deref().unwrap_or_default();
    emit(format!(
        "{{\"ev\":\"write\",\"ph\":\"invoke\",\"c\":{c},\"hid\":\"{hid}\",\"t\":{},\"elem\":{elem}}}",
        clock.now()
    ));
    let line = format!("PUT {} {token} {hid} {value}", a.key);
    let r = storage_call(st, &line, a.storage_timeout).await;
    let (ph, detail) = match &r {
        Ok(s) if s == "OK" => ("ok", String::new()),
        Ok(s) if s.starts_with("STALE") => ("refused", s.clone()),
        Ok(s) => ("info", s.clone()),
        Err(e) => ("info", e.clone()),
    };
    emit(format!(
        "{{\"ev\":\"write\",\"ph\":\"{ph}\",\"c\":{c},\"hid\":\"{hid}\",\"t\":{},\"elem\":{elem},\"detail\":{}}}",
        clock.now(),
        json_str(&detail)
    ));
}
