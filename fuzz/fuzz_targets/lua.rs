//! The Lua bridge: script text and arguments -> EVAL (and EVALSHA, SCRIPT LOAD) on the
//! in-memory door. Never panics, every call gets a reply, and the server answers PING
//! afterwards. A script that runs past 20 ms is stopped the way SCRIPT KILL does it,
//! so loops do not stall the fuzzer (and the kill path is fuzzed too).
//!
//! Input: byte 0 is numkeys (mod 4) and picks EVAL / EVALSHA_RO / SCRIPT LOAD; the rest,
//! split on 0x00, is the script, then its arguments.
//!
//! One session (one server, one Lua VM) serves every input, as a real server serves
//! every script: building a server per input held the fuzzer at ~300 runs/s. FLUSHALL
//! after an input that wrote keeps the keyspace from growing; the script cache is
//! bounded by its own LRU. A crash may therefore depend on the inputs before it: replay the corpus in
//! order (`cargo fuzz run lua corpus/lua -runs=0`) to reproduce.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use redlockd::inmem::{ScriptKiller, Session};
use redlockd::Config;
use std::cell::RefCell;
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

/// The running input's start and how to stop its script.
static RUNNING: Mutex<Option<(Instant, ScriptKiller)>> = Mutex::new(None);
static WATCHDOG: Once = Once::new();

thread_local! {
    static SESSION: RefCell<Option<Session>> = const { RefCell::new(None) };
}

fn watchdog() {
    WATCHDOG.call_once(|| {
        std::thread::spawn(|| loop {
            std::thread::sleep(Duration::from_millis(2));
            if let Some((started, killer)) = RUNNING.lock().unwrap().as_ref() {
                if started.elapsed() > Duration::from_millis(20) {
                    killer.kill();
                }
            }
        });
    });
}

fuzz_target!(|data: &[u8]| {
    watchdog();
    let Some((&head, rest)) = data.split_first() else {
        return;
    };
    let mut parts = rest.split(|&b| b == 0);
    let script = parts.next().unwrap_or_default();
    let args: Vec<&[u8]> = parts.collect();
    let numkeys = (head % 4) as usize;
    if numkeys > args.len() {
        return;
    }
    SESSION.with_borrow_mut(|slot| {
        let session = slot.get_or_insert_with(|| Session::new(Config::for_tests()));
        run(session, head, script, &args, numkeys);
    });
});

fn run(session: &mut Session, head: u8, script: &[u8], args: &[&[u8]], numkeys: usize) {
    *RUNNING.lock().unwrap() = Some((Instant::now(), session.script_killer()));
    let numkeys_text = numkeys.to_string();
    let sha = sha1_smol::Sha1::from(script).digest().to_string();
    let mut call: Vec<&[u8]> = match head >> 6 {
        0 | 1 => vec![b"EVAL", script, numkeys_text.as_bytes()],
        2 => vec![b"SCRIPT", b"LOAD", script],
        _ => vec![b"EVALSHA_RO", sha.as_bytes(), numkeys_text.as_bytes()],
    };
    if head >> 6 != 2 {
        call.extend(args);
    }
    let mut out = BytesMut::new();
    session.call(&call, &mut out);
    assert!(!out.is_empty());
    if head >> 6 == 2 && out.starts_with(b"$40") {
        // Loaded: run it by sha as well.
        let mut by_sha: Vec<&[u8]> = vec![b"EVALSHA", sha.as_bytes(), numkeys_text.as_bytes()];
        by_sha.extend(args);
        out.clear();
        session.call(&by_sha, &mut out);
        assert!(!out.is_empty());
    }
    *RUNNING.lock().unwrap() = None;
    out.clear();
    session.call(&[b"PING"], &mut out);
    assert_eq!(&out[..], b"+PONG\r\n");
    // Most inputs write nothing; FLUSHALL (which also schedules a heap trim) only when
    // the keyspace has something, or every 1,000 inputs for the other databases.
    out.clear();
    session.call(&[b"DBSIZE"], &mut out);
    let count = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    if &out[..] != b":0\r\n" || count % 1_000 == 0 {
        out.clear();
        session.call(&[b"FLUSHALL"], &mut out);
        assert_eq!(&out[..], b"+OK\r\n");
    }
}

static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
