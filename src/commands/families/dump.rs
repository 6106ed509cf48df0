//! DUMP and RESTORE: a key's value in Redis 7.0's payload format (`store::rdb`), so a
//! payload moves between redis-server and redlockd in either direction.

use crate::commands::notify::{self as nt, notify};
use crate::commands::{eq_ignore_case, int_arg, CmdResult, Ctx};
use crate::protocol::{errors, Reply};
use crate::store::{rdb, Entry, Value};
use bytes::Bytes;

/// DUMP key: the payload, or null for a missing key.
pub fn dump(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    match ctx.db().get(&args[1], ctx.now_ms) {
        Some(e) => Ok(Reply::Bulk(Bytes::from(rdb::dump_value(e.value())))),
        None => Ok(Reply::Null),
    }
}

/// RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME seconds] [FREQ frequency],
/// checked in Redis 7.0's order: the options, the existing key (BUSYKEY), the TTL,
/// the payload's footer, its value. IDLETIME sets the key's idle time (OBJECT
/// IDLETIME); FREQ is checked and then has nothing to set: it counts only under an LFU
/// eviction policy, which a lock server never runs. A TTL then passes the max-ttl
/// rule (or, with none, --require-ttl) before anything changes.
pub fn restore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let mut replace = false;
    let mut absttl = false;
    let mut idletime: Option<u64> = None;
    let mut freq = false;
    let mut i = 4;
    while i < args.len() {
        let more = i + 1 < args.len();
        if eq_ignore_case(&args[i], "replace") {
            replace = true;
        } else if eq_ignore_case(&args[i], "absttl") {
            absttl = true;
        } else if eq_ignore_case(&args[i], "idletime") && more && !freq {
            let secs = int_arg(&args[i + 1])?;
            if secs < 0 {
                return Err(Reply::error("ERR Invalid IDLETIME value, must be >= 0"));
            }
            idletime = Some(secs as u64);
            i += 1;
        } else if eq_ignore_case(&args[i], "freq") && more && idletime.is_none() {
            if !(0..=255).contains(&int_arg(&args[i + 1])?) {
                return Err(Reply::error(
                    "ERR Invalid FREQ value, must be >= 0 and <= 255",
                ));
            }
            freq = true;
            i += 1;
        } else {
            return Err(errors::syntax());
        }
        i += 1;
    }
    let key = &args[1];
    let now = ctx.now_ms;
    if !replace && ctx.db().contains(key, now) {
        return Err(Reply::error("BUSYKEY Target key name already exists."));
    }
    let ttl = int_arg(&args[2])?;
    if ttl < 0 {
        return Err(Reply::error("ERR Invalid TTL value, must be >= 0"));
    }
    let value = rdb::restore_value(&args[3]).map_err(Reply::error)?;
    let wall = ctx.shared.clock.mono_to_wall(now);
    let deadline_ms = match ttl {
        0 => {
            ctx.shared.fence.check_has_ttl()?;
            None
        }
        // Already past: the key is not made (an old one goes with REPLACE).
        at if absttl && at <= wall => {
            if replace && ctx.db().remove(key, now) {
                notify(ctx, nt::GENERIC, "del", key);
            }
            return Ok(Reply::Ok);
        }
        at if absttl => Some(ctx.deadline_at_wall(at)?),
        ms => Some(ctx.deadline_after(ms)?),
    };
    let signals = matches!(value, Value::List(_) | Value::ZSet(_));
    ctx.db().insert(key, Entry { value, deadline_ms });
    if let Some(secs) = idletime {
        if let Some(e) = ctx.db().get_mut(key, now) {
            e.set_idle_seconds(secs, now);
        }
    }
    if signals {
        ctx.shared.blocking.signal(ctx.client.db, key);
    }
    notify(ctx, nt::GENERIC, "restore", key);
    Ok(Reply::Ok)
}
