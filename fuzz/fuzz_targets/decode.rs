//! Bytes -> parse_request, repeatedly: never panics, and every request taken off the
//! buffer consumes bytes (no infinite loop on a request that consumes nothing).
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use redlockd::inmem::{parse_request, Limits};

fuzz_target!(|data: &[u8]| {
    // The first byte's low bit turns on the pre-AUTH limits.
    let limits = Limits {
        max_bulk_len: 1 << 16,
        max_args: 1024,
        unauthenticated: data.first().is_some_and(|b| b & 1 == 1),
    };
    let mut buf = BytesMut::from(data);
    loop {
        let before = buf.len();
        let inline = buf.first() != Some(&b'*');
        match parse_request(&mut buf, &limits) {
            Ok(Some(args)) => {
                assert!(buf.len() < before, "a request consumed no bytes");
                // A multibulk count is bounded by max_args; an inline request (as in
                // Redis) only by its line, which the server reads at most ~64 KB of.
                if inline {
                    assert!(args.len() <= before - buf.len());
                } else {
                    assert!(args.len() <= limits.max_args);
                }
            }
            Ok(None) => {
                assert_eq!(buf.len(), before, "waiting for more must not consume");
                break;
            }
            Err(e) => {
                assert!(e.to_string().starts_with("Protocol error: "), "{e}");
                break;
            }
        }
    }
});
