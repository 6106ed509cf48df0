//! DEBUG: test controls over the wire, only with `--enable-debug-command`; and
//! DIGEST-VALUE, Redis's digest of a value.
//! CLOCK ADVANCE / SET-WALL / JUMP-WALL need `--clock manual`.

use crate::commands::{eq_ignore_case, int_arg, CmdResult, Ctx};
use crate::protocol::numfmt::hex;
use crate::protocol::{errors, Reply};
use crate::store::ValueRef;
use bytes::Bytes;
use std::sync::atomic::Ordering;
use std::time::Duration;

pub fn debug(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    if !ctx.shared.config.enable_debug_command {
        return Err(Reply::error(
            "ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.",
        ));
    }
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    match (sub.as_str(), args.len()) {
        ("clock", 4) => clock(ctx, &args[2], &args[3]),
        ("crash-restart", 2) => {
            tracing::warn!("DEBUG CRASH-RESTART: keyspace dropped, restart fence started");
            // Everyone else is cut off at once; the caller gets its OK, then the close.
            ctx.shared.boot();
            ctx.shared.kill_clients_except(Some(ctx.client.id()));
            ctx.client.close_after_reply = true;
            Ok(Reply::Ok)
        }
        ("sleep", 3) => {
            let secs: f64 = std::str::from_utf8(&args[2])
                .ok()
                .and_then(|s| s.parse().ok())
                .filter(|s: &f64| s.is_finite() && *s >= 0.0)
                .ok_or_else(|| Reply::error(errors::NOT_FLOAT))?;
            // The whole server stops answering, as in Redis: dispatch already holds the
            // keyspace gate exclusively for DEBUG (EXCLUSIVE in the table); taking it
            // again here would deadlock (parking_lot's RwLock is not reentrant).
            // A manual clock does not move during the sleep; real time passes.
            std::thread::sleep(Duration::from_secs_f64(secs.min(3600.0)));
            Ok(Reply::Ok)
        }
        ("digest-value", _) => Ok(Reply::Array(
            args[2..]
                .iter()
                .map(|k| Reply::Status(Bytes::from(hex(&value_digest(ctx, k)))))
                .collect(),
        )),
        ("set-active-expire", 3) => {
            let on = int_arg(&args[2])?;
            ctx.shared.active_expire.store(on != 0, Ordering::Relaxed);
            Ok(Reply::Ok)
        }
        ("object", 3) => {
            // As Redis's DEBUG OBJECT: the entry as stored, even past its deadline (no
            // lazy expiry: time 0 is before every deadline).
            let Some(entry) = ctx.db().peek(&args[2], 0) else {
                return Err(Reply::error("ERR no such key"));
            };
            let value = entry.value();
            // The value's RDB form less its type byte and the payload's footer.
            let serialized = crate::store::rdb::dump_value(value).len() - 11;
            Ok(Reply::Status(Bytes::from(format!(
                "Value at:{:p} refcount:1 encoding:{} serializedlength:{serialized} lru:0 lru_seconds_idle:{}",
                entry.key().as_ptr(),
                value.encoding(),
                entry.idle_seconds(ctx.now_ms)
            ))))
        }
        ("set-disable-deny-scripts", 3) => {
            let on = int_arg(&args[2])?;
            ctx.shared
                .scripts_may_call_anything
                .store(on != 0, Ordering::Relaxed);
            Ok(Reply::Ok)
        }
        ("help", _) => Ok(Reply::Array(
            [
                "DEBUG <subcommand> [<arg> ...]. Subcommands are:",
                "CLOCK ADVANCE <ms>    Move the manual clock forward (monotonic and wall).",
                "CLOCK SET-WALL <unix-ms>    Set the manual clock's wall time only.",
                "CLOCK JUMP-WALL <+/-ms>    Step the manual clock's wall time only.",
                "CRASH-RESTART    Drop the keyspace and start the restart fence, as a crash would.",
                "DIGEST-VALUE <key> [<key> ...]    Redis's digest of each key's value (and whether it has a TTL).",
                "OBJECT <key>    The key's encoding and serialized length, without expiring it.",
                "SLEEP <seconds>    Stop answering for this long.",
                "SET-ACTIVE-EXPIRE <0|1>    Turn the active expiry sweeper off or on.",
                "SET-DISABLE-DENY-SCRIPTS <0|1>    Let scripts call commands they may not (CLIENT LIST...).",
            ]
            .iter()
            .map(|s| Reply::status(s))
            .collect(),
        )),
        _ => Err(errors::unknown_subcommand("debug", &args[1])),
    }
}

fn clock(ctx: &mut Ctx, what: &[u8], value: &[u8]) -> CmdResult {
    let clock = &ctx.shared.clock;
    if !clock.is_manual() {
        return Err(Reply::error(
            "ERR DEBUG CLOCK needs a manual clock (start the server with --clock manual)",
        ));
    }
    // "+500" is accepted for JUMP-WALL, as the natural way to write a forward jump.
    let value = value.strip_prefix(b"+").unwrap_or(value);
    let n = int_arg(value)?;
    if eq_ignore_case(what, "advance") {
        if n < 0 {
            return Err(Reply::error(
                "ERR the monotonic clock cannot go backwards; use JUMP-WALL for wall time",
            ));
        }
        clock.advance(Duration::from_millis(n as u64));
    } else if eq_ignore_case(what, "set-wall") {
        clock.set_wall(n);
    } else if eq_ignore_case(what, "jump-wall") {
        clock.jump_wall(n);
    } else {
        return Err(errors::syntax());
    }
    ctx.now_ms = clock.now_ms();
    Ok(Reply::Ok)
}

/// Redis's DEBUG DIGEST-VALUE digest (debug.c's xorObjectDigest), so two values can be
/// compared (COPY's tests do) and the digests match Redis's for the same data: SHA-1s
/// mixed in order for strings and lists, XORed (order-free) for set, hash and
/// sorted-set elements; all zeros for a missing key.
fn value_digest(ctx: &Ctx, key: &[u8]) -> [u8; 20] {
    let mut digest = [0u8; 20];
    let Some(entry) = ctx.db().get(key, ctx.now_ms) else {
        return digest;
    };
    let value = entry.value();
    let type_code: u32 = match value {
        ValueRef::Str(_) => 0,
        ValueRef::List(_) => 1,
        ValueRef::Set(_) => 2,
        ValueRef::ZSet(_) => 3,
        ValueRef::Stream(_) => 6,
        ValueRef::Hash(_) => 4,
    };
    mix_digest(&mut digest, &type_code.to_be_bytes());
    match value {
        ValueRef::Str(s) => mix_digest(&mut digest, s),
        ValueRef::List(l) => l.iter().for_each(|e| mix_digest(&mut digest, e)),
        ValueRef::Set(s) => s.iter().for_each(|m| xor_digest(&mut digest, m)),
        ValueRef::ZSet(z) => {
            for (m, score) in z.iter() {
                let mut element = [0u8; 20];
                mix_digest(&mut element, m);
                mix_digest(
                    &mut element,
                    crate::protocol::numfmt::fmt_g(score, 17).as_bytes(),
                );
                xor_digest(&mut digest, &element);
            }
        }
        ValueRef::Stream(st) => {
            for (id, pairs) in st.entries() {
                mix_digest(&mut digest, format!("{}.{}", id.ms, id.seq).as_bytes());
                for (f, v) in pairs {
                    mix_digest(&mut digest, f);
                    mix_digest(&mut digest, v);
                }
            }
        }
        ValueRef::Hash(h) => {
            for (f, v) in h {
                let mut element = [0u8; 20];
                mix_digest(&mut element, f);
                mix_digest(&mut element, v);
                xor_digest(&mut digest, &element);
            }
        }
    }
    if entry.deadline_ms().is_some() {
        xor_digest(&mut digest, b"!!expire!!");
    }
    digest
}

/// digest ^= SHA-1(bytes)
fn xor_digest(digest: &mut [u8; 20], bytes: &[u8]) {
    let hash = sha1_smol::Sha1::from(bytes).digest().bytes();
    digest.iter_mut().zip(hash).for_each(|(d, h)| *d ^= h);
}

/// digest = SHA-1(digest ^ SHA-1(bytes)): order matters.
fn mix_digest(digest: &mut [u8; 20], bytes: &[u8]) {
    xor_digest(digest, bytes);
    *digest = sha1_smol::Sha1::from(&digest[..]).digest().bytes();
}
