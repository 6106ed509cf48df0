//! Bytes -> argument vectors -> the in-memory door with a manual clock: SET options
//! (IFEQ/IFNE/IFDEQ/IFDNE included), EXPIRE options, ZADD and ZRANGE grammars,
//! everything in the table; never panics, and every command gets a reply. Seeds in
//! fuzz/seeds/commands (`collections` for sorted sets, sets, lists and the native lock
//! commands, `strings_keys` for APPEND/SETRANGE/INCRBYFLOAT, COPY/MOVE and the
//! sorted-set algebra, `streams` for the stream commands and consumer groups).
//!
//! Input: lines (split on '\n'), each a command whose arguments are split on ' '. A line
//! starting with 0xff moves the clock instead: the next byte is milliseconds x 100, the
//! one after it a wall-clock jump in seconds (signed). Bytes 0-2 choose the server:
//! 'F' a restart fence of 31 s, 'R' require-ttl, 'P' requirepass.
//!
//! A server per input held the fuzzer at ~500 runs/s (building the keyspace and the
//! boot's flush dominate), so each of the 8 configurations keeps one session that is
//! reset between inputs (RESET, AUTH, FLUSHALL when something was written, SCRIPT and
//! FUNCTION FLUSH) and rebuilt after 500 inputs, and after any input that moved the
//! clock or changed server-wide settings (CONFIG, ACL, DEBUG, SHUTDOWN), so the fence
//! and the settings an input starts with are the configuration's. A crash may therefore
//! depend on up to 500 inputs before it: replay the corpus in order to reproduce.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use redlockd::inmem::Session;
use redlockd::{Clock, Config};
use std::cell::RefCell;
use std::time::Duration;

/// How many inputs a session serves before it is rebuilt.
const REUSE: u32 = 500;

thread_local! {
    static SESSIONS: RefCell<[Option<(Session, u32)>; 8]> = RefCell::new(Default::default());
}

fn new_session(fence: bool, require_ttl: bool, password: bool) -> Session {
    Session::new(Config {
        port: 0,
        databases: 2,
        // SETRANGE and APPEND may build strings up to this: keep them small enough
        // that an input cannot spend the fuzzer's memory and time on one string.
        proto_max_bulk_len: 1 << 20,
        max_ttl: Duration::from_secs(30),
        restart_delay: Some(if fence {
            Duration::from_secs(31)
        } else {
            Duration::ZERO
        }),
        require_ttl,
        requirepass: password.then(|| "pw".to_string()),
        clock: Some(Clock::manual()),
        seed: Some(1),
        // DEBUG SLEEP would stall the fuzzer; DEBUG is covered by the tests.
        enable_debug_command: false,
        ..Config::default()
    })
}

/// Commands whose effect outlives a connection's RESET: the session is rebuilt after them.
fn server_wide(name: &[u8]) -> bool {
    [&b"CONFIG"[..], b"ACL", b"DEBUG", b"SHUTDOWN"]
        .iter()
        .any(|c| name.eq_ignore_ascii_case(c))
}

fn call(session: &mut Session, args: &[&[u8]], out: &mut BytesMut) {
    out.clear();
    session.call(args, out);
    assert!(!out.is_empty());
}

fuzz_target!(|data: &[u8]| {
    let fence = data.first() == Some(&b'F');
    let require_ttl = data.get(1) == Some(&b'R');
    let password = data.get(2) == Some(&b'P');
    let which = fence as usize | (require_ttl as usize) << 1 | (password as usize) << 2;
    SESSIONS.with_borrow_mut(|sessions| {
        let slot = &mut sessions[which];
        if slot.as_ref().is_none_or(|(_, served)| *served >= REUSE) {
            *slot = Some((new_session(fence, require_ttl, password), 0));
        }
        let (session, served) = slot.as_mut().unwrap();
        *served += 1;
        let mut out = BytesMut::new();
        let mut rebuild = false;
        for line in data.split(|&b| b == b'\n') {
            if line.first() == Some(&0xff) {
                let ms = *line.get(1).unwrap_or(&0) as u64 * 100;
                session.clock().advance(Duration::from_millis(ms));
                let jump = *line.get(2).unwrap_or(&0) as i8 as i64 * 1000;
                session.clock().jump_wall(jump);
                rebuild = true;
                continue;
            }
            let args: Vec<&[u8]> = line
                .split(|&b| b == b' ')
                .filter(|a| !a.is_empty())
                .collect();
            let Some(name) = args.first() else {
                continue;
            };
            if name.eq_ignore_ascii_case(b"PFSELFTEST") {
                continue;
            }
            rebuild |= server_wide(name);
            call(session, &args, &mut out);
        }
        if rebuild {
            *slot = None;
            return;
        }
        // Back to what a new client of this configuration sees.
        call(session, &[b"RESET"], &mut out);
        if password {
            call(session, &[b"AUTH", b"pw"], &mut out);
            assert_eq!(&out[..], b"+OK\r\n");
        }
        let mut written = false;
        for db in [&b"1"[..], b"0"] {
            call(session, &[b"SELECT", db], &mut out);
            call(session, &[b"DBSIZE"], &mut out);
            written |= &out[..] != b":0\r\n";
        }
        if written {
            call(session, &[b"FLUSHALL"], &mut out);
            assert_eq!(&out[..], b"+OK\r\n");
        }
        call(session, &[b"SCRIPT", b"FLUSH"], &mut out);
        call(session, &[b"FUNCTION", b"FLUSH"], &mut out);
    });
});
