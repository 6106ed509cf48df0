//! Bytes -> argument vectors -> the in-memory door on a fresh server with a manual
//! clock: SET options (IFEQ/IFNE/IFDEQ/IFDNE included), EXPIRE options, ZADD and
//! ZRANGE grammars, everything in the table; never panics, and every command gets a
//! reply. Seeds in fuzz/seeds/commands (`collections` for sorted sets, sets, lists and
//! the native lock commands).
//!
//! Input: lines (split on '\n'), each a command whose arguments are split on ' '. A line
//! starting with 0xff moves the clock instead: the next byte is milliseconds x 100, the
//! one after it a wall-clock jump in seconds (signed).
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use redlockd::inmem::Session;
use redlockd::{Clock, Config};
use std::time::Duration;

fuzz_target!(|data: &[u8]| {
    let clock = Clock::manual();
    let mut session = Session::new(Config {
        port: 0,
        databases: 2,
        max_ttl: Duration::from_secs(30),
        restart_delay: Some(if data.first() == Some(&b'F') {
            Duration::from_secs(31)
        } else {
            Duration::ZERO
        }),
        require_ttl: data.get(1) == Some(&b'R'),
        requirepass: (data.get(2) == Some(&b'P')).then(|| "pw".to_string()),
        clock: Some(clock.clone()),
        seed: Some(1),
        // DEBUG SLEEP would stall the fuzzer; DEBUG is covered by the tests.
        enable_debug_command: false,
        ..Config::default()
    });
    let mut out = BytesMut::new();
    for line in data.split(|&b| b == b'\n') {
        if line.first() == Some(&0xff) {
            let ms = *line.get(1).unwrap_or(&0) as u64 * 100;
            clock.advance(Duration::from_millis(ms));
            let jump = *line.get(2).unwrap_or(&0) as i8 as i64 * 1000;
            clock.jump_wall(jump);
            continue;
        }
        let args: Vec<&[u8]> = line.split(|&b| b == b' ').filter(|a| !a.is_empty()).collect();
        if args.is_empty() {
            continue;
        }
        out.clear();
        session.call(&args, &mut out);
        assert!(!out.is_empty());
    }
});
