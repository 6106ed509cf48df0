//! The Lua bridge: script text and arguments -> EVAL (and EVALSHA, SCRIPT LOAD) on the
//! in-memory door. Never panics, every call gets a reply, and the server answers PING
//! afterwards. A script that runs past 200 ms is stopped the way SCRIPT KILL does it,
//! so loops do not stall the fuzzer (and the kill path is fuzzed too).
//!
//! Input: byte 0 is numkeys (mod 4) and picks EVAL / EVALSHA_RO / SCRIPT LOAD; the rest,
//! split on 0x00, is the script, then its arguments.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use redlockd::inmem::{ScriptKiller, Session};
use redlockd::Config;
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

/// The running input's start and how to stop its script.
static RUNNING: Mutex<Option<(Instant, ScriptKiller)>> = Mutex::new(None);
static WATCHDOG: Once = Once::new();

fn watchdog() {
    WATCHDOG.call_once(|| {
        std::thread::spawn(|| loop {
            std::thread::sleep(Duration::from_millis(20));
            if let Some((started, killer)) = RUNNING.lock().unwrap().as_ref() {
                if started.elapsed() > Duration::from_millis(200) {
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
    let mut session = Session::new(Config::for_tests());
    *RUNNING.lock().unwrap() = Some((Instant::now(), session.script_killer()));
    let numkeys_text = numkeys.to_string();
    let sha = sha1_smol::Sha1::from(script).digest().to_string();
    let mut call: Vec<&[u8]> = match head >> 6 {
        0 | 1 => vec![b"EVAL", script, numkeys_text.as_bytes()],
        2 => vec![b"SCRIPT", b"LOAD", script],
        _ => vec![b"EVALSHA_RO", sha.as_bytes(), numkeys_text.as_bytes()],
    };
    if head >> 6 != 2 {
        call.extend(&args);
    }
    let mut out = BytesMut::new();
    session.call(&call, &mut out);
    assert!(!out.is_empty());
    if head >> 6 == 2 && out.starts_with(b"$40") {
        // Loaded: run it by sha as well.
        let mut by_sha: Vec<&[u8]> = vec![b"EVALSHA", sha.as_bytes(), numkeys_text.as_bytes()];
        by_sha.extend(&args);
        out.clear();
        session.call(&by_sha, &mut out);
        assert!(!out.is_empty());
    }
    *RUNNING.lock().unwrap() = None;
    out.clear();
    session.call(&[b"PING"], &mut out);
    assert_eq!(&out[..], b"+PONG\r\n");
});
