//! OBJECT: what Redis 7.0 reports about a key's value. ENCODING is the encoding Redis
//! would have chosen for the same commands (see `ValueRef::encoding`); REFCOUNT is 1,
//! or INT_MAX for the integers 0..9999 that Redis shares between keys; FREQ answers
//! Redis's error for a server without an LFU eviction policy (redlockd never evicts);
//! IDLETIME is the seconds since a command last read or wrote the key, on the node's
//! clock (the manual clock in tests), as Redis's 24-bit LRU clock counts them.
//! OBJECT itself does not count as an access.

use crate::commands::{eq_ignore_case, CmdResult, Ctx};
use crate::protocol::{errors, Reply};
use crate::store::ValueRef;
use bytes::Bytes;

const HELP: &[&str] = &[
    "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "ENCODING <key>",
    "    Return the kind of internal representation used in order to store the value",
    "    associated with a <key>.",
    "FREQ <key>",
    "    Return the access frequency index of the <key>. The returned integer is",
    "    proportional to the logarithm of the recent access frequency of the key.",
    "IDLETIME <key>",
    "    Return the idle time of the <key>, that is the approximated number of",
    "    seconds elapsed since the last access to the key.",
    "REFCOUNT <key>",
    "    Return the number of references of the value associated with the specified",
    "    <key>.",
    "HELP",
    "    Prints this help.",
];

/// Redis's OBJ_SHARED_REFCOUNT: the refcount of a shared integer.
const SHARED_REFCOUNT: i64 = i32::MAX as i64;
/// Redis shares the integers below OBJ_SHARED_INTEGERS.
const SHARED_INTEGERS: i64 = 10_000;

const NO_LFU: &str = "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.";

pub fn object(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let sub = &args[1];
    if eq_ignore_case(sub, "help") {
        if args.len() != 2 {
            return Err(errors::wrong_arity("object|help"));
        }
        return Ok(Reply::Array(
            HELP.iter()
                .map(|l| Reply::Status(Bytes::from_static(l.as_bytes())))
                .collect(),
        ));
    }
    let Some(name) = ["encoding", "freq", "idletime", "refcount"]
        .into_iter()
        .find(|w| eq_ignore_case(sub, w))
    else {
        return Err(errors::unknown_subcommand("object", sub));
    };
    if args.len() != 3 {
        return Err(errors::wrong_arity(&format!("object|{name}")));
    }
    let Some(e) = ctx.db().peek(&args[2], ctx.now_ms) else {
        return Ok(Reply::Null);
    };
    let value = e.value();
    match name {
        "encoding" => Ok(Reply::Bulk(Bytes::from_static(value.encoding().as_bytes()))),
        "refcount" => Ok(Reply::Integer(match value {
            ValueRef::Str(s) if value.encoding() == "int" => crate::protocol::parse_int(s)
                .filter(|v| (0..SHARED_INTEGERS).contains(v))
                .map_or(1, |_| SHARED_REFCOUNT),
            _ => 1,
        })),
        "freq" => Err(Reply::error(NO_LFU)),
        _ => Ok(Reply::Integer(e.idle_seconds(ctx.now_ms) as i64)),
    }
}
