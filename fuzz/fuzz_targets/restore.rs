//! Bytes -> RESTORE payloads: the reply is +OK or one of Redis's two payload errors,
//! never a panic, a hang or an allocation beyond the payload's size; a value that
//! restores DUMPs to a payload that restores again, and SORT reads it; a restored
//! stream answers XINFO STREAM FULL, XREVRANGE and XINFO GROUPS, and takes XADD and
//! XTRIM.
//!
//! Input: the first byte's low bit says whether the rest is a payload as sent (the
//! footer fuzzed too) or a value body to which a valid footer is added (RDB version
//! 10 and the right CRC-64), so the fuzzer reaches the value decoders. Seeds in
//! fuzz/seeds/restore are redis-server 7.0's DUMPs of every encoding, footer removed
//! (a stream with deletions and a group among them), and Redis 5's DUMP of a stream
//! as sent (from Redis's own test suite).
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use redlockd::inmem::Session;
use redlockd::{Clock, Config};
use std::cell::RefCell;
use std::time::Duration;

thread_local! {
    static SESSION: RefCell<Option<Session>> = const { RefCell::new(None) };
}

/// Redis's CRC-64 (Jones), bit by bit: the harness's own, independent of the server's.
fn crc64(data: &[u8]) -> u64 {
    let mut crc = 0u64;
    for &b in data {
        crc ^= b as u64;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x95ac_9329_ac4b_c9b5
            } else {
                crc >> 1
            };
        }
    }
    crc
}

fn call(session: &mut Session, args: &[&[u8]]) -> Vec<u8> {
    let mut out = BytesMut::new();
    session.call(args, &mut out);
    out.to_vec()
}

/// A bulk reply's payload.
fn bulk(frame: &[u8]) -> Vec<u8> {
    assert_eq!(
        frame.first(),
        Some(&b'$'),
        "{:?}",
        String::from_utf8_lossy(frame)
    );
    let nl = frame.iter().position(|&b| b == b'\n').unwrap();
    frame[nl + 1..frame.len() - 2].to_vec()
}

const OK: &[u8] = b"+OK\r\n";
const BAD_FOOTER: &[u8] = b"-ERR DUMP payload version or checksum are wrong\r\n";
const BAD_DATA: &[u8] = b"-ERR Bad data format\r\n";

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let mut payload = rest.to_vec();
    if mode & 1 == 1 {
        payload.extend_from_slice(&10u16.to_le_bytes());
        let crc = crc64(&payload);
        payload.extend_from_slice(&crc.to_le_bytes());
    }
    SESSION.with_borrow_mut(|slot| {
        let session = slot.get_or_insert_with(|| {
            Session::new(Config {
                port: 0,
                databases: 1,
                max_ttl: Duration::from_secs(30),
                restart_delay: Some(Duration::ZERO),
                clock: Some(Clock::manual()),
                seed: Some(1),
                ..Config::default()
            })
        });
        let reply = call(session, &[b"RESTORE", b"k", b"0", &payload, b"REPLACE"]);
        assert!(
            reply == OK || reply == BAD_FOOTER || reply == BAD_DATA,
            "{:?}",
            String::from_utf8_lossy(&reply)
        );
        if reply == OK {
            let dumped = bulk(&call(session, &[b"DUMP", b"k"]));
            let again = call(session, &[b"RESTORE", b"k2", b"0", &dumped]);
            assert_eq!(again, OK, "our own DUMP restores");
            assert_eq!(
                call(session, &[b"TYPE", b"k"]),
                call(session, &[b"TYPE", b"k2"])
            );
            let sorted = call(session, &[b"SORT", b"k", b"ALPHA", b"LIMIT", b"0", b"5"]);
            assert!(sorted[0] == b'*' || sorted.starts_with(b"-WRONGTYPE"));
            // A restored stream is walked whole, its groups read, and written to.
            if call(session, &[b"TYPE", b"k"]) == b"+stream\r\n" {
                for cmd in [
                    &[&b"XINFO"[..], b"STREAM", b"k", b"FULL"][..],
                    &[b"XREVRANGE", b"k", b"+", b"-"],
                    &[b"XINFO", b"GROUPS", b"k"],
                    &[b"XADD", b"k", b"*", b"f", b"v"],
                    &[b"XTRIM", b"k", b"MAXLEN", b"1"],
                    &[b"XINFO", b"STREAM", b"k"],
                ] {
                    let reply = call(session, cmd);
                    assert!(!reply.is_empty());
                }
            }
            call(session, &[b"FLUSHALL"]);
        }
    });
});
