//! Expiry commands: EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT (NX|XX|GT|LT), TTL, PTTL,
//! EXPIRETIME, PEXPIRETIME, PERSIST. Deadlines are monotonic; Unix times are
//! converted at the edge.

use crate::commands::notify::{self as nt, notify};
use crate::commands::{eq_ignore_case, int_arg, CmdResult, Ctx};
use crate::protocol::{errors, Reply};
use bytes::Bytes;

#[derive(Default)]
struct Conditions {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
}

fn parse_conditions(args: &[Bytes]) -> Result<Conditions, Reply> {
    let mut c = Conditions::default();
    for a in args {
        if eq_ignore_case(a, "nx") {
            c.nx = true;
        } else if eq_ignore_case(a, "xx") {
            c.xx = true;
        } else if eq_ignore_case(a, "gt") {
            c.gt = true;
        } else if eq_ignore_case(a, "lt") {
            c.lt = true;
        } else {
            return Err(Reply::error(format!(
                "ERR Unsupported option {}",
                errors::printable(a)
            )));
        }
    }
    if c.nx && (c.xx || c.gt || c.lt) {
        return Err(Reply::error(
            "ERR NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    if c.gt && c.lt {
        return Err(Reply::error(
            "ERR GT and LT options at the same time are not compatible",
        ));
    }
    Ok(c)
}

/// The shared body of the four EXPIRE commands. `unit_ms` is 1000 for seconds;
/// `absolute` for the *AT forms.
fn expire_generic(
    ctx: &mut Ctx,
    args: &[Bytes],
    unit_ms: i64,
    absolute: bool,
    cmd: &str,
) -> CmdResult {
    let cond = parse_conditions(&args[3..])?;
    let amount = int_arg(&args[2])?;
    let ms = amount
        .checked_mul(unit_ms)
        .ok_or_else(|| errors::invalid_expire(cmd))?;
    let now = ctx.now_ms;
    // The command's time in Unix ms: converted back by PEXPIRETIME through the same
    // offset (`Clock::mono_to_wall`).
    let wall = ctx.shared.clock.mono_to_wall(now);
    // As Redis: the absolute time must fit in a signed 64-bit millisecond count.
    let unix_ms = if absolute {
        ms
    } else {
        ms.checked_add(wall)
            .ok_or_else(|| errors::invalid_expire(cmd))?
    };
    let ttl_ms = unix_ms.saturating_sub(wall);
    let db = ctx.db();
    let Some(mut entry) = db.get_mut(&args[1], now) else {
        return Ok(Reply::Integer(0));
    };
    let new_deadline = (now as i64).saturating_add(ttl_ms);
    let current = entry.deadline_ms();
    let allowed = if cond.nx {
        current.is_none()
    } else if cond.xx && current.is_none() {
        false
    } else if cond.gt {
        matches!(current, Some(d) if new_deadline > d as i64)
    } else if cond.lt {
        current.is_none_or(|d| new_deadline < d as i64)
    } else {
        true
    };
    if !allowed {
        return Ok(Reply::Integer(0));
    }
    if ttl_ms <= 0 {
        // Already expired: Redis deletes the key and reports success.
        drop(entry);
        db.remove(&args[1], now);
        notify(ctx, nt::GENERIC, "del", &args[1]);
        return Ok(Reply::Integer(1));
    }
    ctx.shared.fence.check_ttl(ttl_ms)?;
    ctx.cover(new_deadline as u64)?;
    entry.set_deadline(Some(new_deadline as u64));
    // A key a script gives a TTL is a lock (`store/lock.rs`: Redisson's HINCRBY +
    // PEXPIRE); outside a script the mark is left as it is.
    let mut grant = None;
    if ctx.in_script {
        let was_lock = entry.is_lock();
        entry.set_lock(true);
        if ctx.shared.locks.on() {
            let token = match entry.value() {
                crate::store::ValueRef::Str(s) => Bytes::copy_from_slice(s),
                _ => Bytes::new(),
            };
            grant = Some((token, was_lock));
        }
    }
    drop(entry);
    if let Some((token, was_lock)) = grant {
        let deadline = new_deadline as u64;
        crate::commands::families::locks::granted(ctx, &args[1], &token, deadline, was_lock);
    }
    notify(ctx, nt::GENERIC, "expire", &args[1]);
    Ok(Reply::Integer(1))
}

pub fn expire(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    expire_generic(ctx, args, 1000, false, "expire")
}

pub fn pexpire(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    expire_generic(ctx, args, 1, false, "pexpire")
}

pub fn expireat(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    expire_generic(ctx, args, 1000, true, "expireat")
}

pub fn pexpireat(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    expire_generic(ctx, args, 1, true, "pexpireat")
}

/// Remaining TTL in ms: -2 for no key, -1 for no TTL. Not an access of the key (as
/// Redis's TTL family, which leaves OBJECT IDLETIME alone). Inside a script a delayed
/// lock (`store/lock.rs`) is held: its TTL is the delay left (Redisson's acquire
/// script answers it as the time to wait).
fn remaining_ms(ctx: &Ctx, key: &[u8]) -> i64 {
    match ctx.db().peek(key, ctx.now_ms) {
        None if ctx.in_script => ctx
            .db()
            .lock_delay_left(key, ctx.now_ms)
            .map_or(-2, |left| left as i64),
        None => -2,
        Some(e) => match e.deadline_ms() {
            None => -1,
            Some(d) => d.saturating_sub(ctx.now_ms) as i64,
        },
    }
}

pub fn pttl(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    Ok(Reply::Integer(remaining_ms(ctx, &args[1])))
}

/// TTL rounds to the nearest second, as Redis does.
pub fn ttl(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let ms = remaining_ms(ctx, &args[1]);
    Ok(Reply::Integer(if ms < 0 { ms } else { (ms + 500) / 1000 }))
}

/// The Unix-ms expiry of a key: -2 for no key, -1 for no TTL.
fn expire_unix_ms(ctx: &Ctx, key: &[u8]) -> i64 {
    match ctx.db().peek(key, ctx.now_ms) {
        None => -2,
        Some(e) => match e.deadline_ms() {
            None => -1,
            Some(d) => ctx.shared.clock.mono_to_wall(d),
        },
    }
}

pub fn pexpiretime(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    Ok(Reply::Integer(expire_unix_ms(ctx, &args[1])))
}

/// EXPIRETIME rounds to the nearest second, as Redis does (like TTL).
pub fn expiretime(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let ms = expire_unix_ms(ctx, &args[1]);
    Ok(Reply::Integer(if ms < 0 { ms } else { (ms + 500) / 1000 }))
}

/// PERSIST key: 1 if a TTL was removed.
pub fn persist(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let now = ctx.now_ms;
    let Some(mut e) = ctx.db().get_mut(&args[1], now) else {
        return Ok(Reply::Integer(0));
    };
    if e.deadline_ms().is_none() {
        return Ok(Reply::Integer(0));
    }
    ctx.shared.fence.check_has_ttl()?;
    e.set_deadline(None);
    // A key without a TTL is no lock (`store/lock.rs`).
    let was_lock = e.is_lock();
    e.set_lock(false);
    drop(e);
    if was_lock {
        crate::commands::families::locks::unmarked(ctx, &args[1]);
    }
    notify(ctx, nt::GENERIC, "persist", &args[1]);
    Ok(Reply::Integer(1))
}
