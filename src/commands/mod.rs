//! Commands: the table (name -> spec), the handlers bound to it, the context a handler
//! runs in, and dispatch.
//! The network, Lua's redis.call and the in-memory door all reach a command through
//! `run`: one implementation of every command.

pub mod admin;
pub mod command_table;
pub mod context;
pub mod exec;
pub mod families;
pub mod handlers;
pub mod notify;

pub use command_table::{lookup, Spec};
pub use context::Ctx;

use crate::acl;
use crate::protocol::{errors, Reply};
use bytes::Bytes;
use command_table::flags;
use std::sync::atomic::Ordering;

/// What a handler returns: `Err` carries an error reply, so handlers can use `?`.
pub type CmdResult = Result<Reply, Reply>;

/// Runs one request from a network client: the checks only the network makes (auth,
/// subscribed mode), then, after MULTI, queueing; else `gate::run`, which takes the
/// keyspace gate as the command needs and runs it. A refusal here fails an open
/// transaction, as in Redis. A queued command takes `args` (moved, not cloned: each
/// clone of a `Bytes` is an atomic increment, and its drop a decrement), leaving the
/// vector empty.
pub async fn dispatch(ctx: &mut Ctx<'_>, args: &mut Vec<Bytes>) -> Reply {
    let client_command = eq_ignore_case(&args[0], "client");
    let reply = dispatch_checked(ctx, args).await;
    admin::tracking::end_of_request(ctx.client, client_command);
    reply
}

async fn dispatch_checked(ctx: &mut Ctx<'_>, args: &mut Vec<Bytes>) -> Reply {
    let spec = match check(ctx, args) {
        Ok(spec) => spec,
        Err(e) => {
            // A refused EXEC still ends the transaction (Redis's execCommandAbort).
            if lookup(&args[0]).is_some_and(|s| s.name == "exec") {
                return exec::multi::exec_refused(ctx, e);
            }
            exec::multi::flag_failed(ctx);
            return e;
        }
    };
    // A transaction whose commands hash to different slots (or, after a map change,
    // to a slot served elsewhere) is discarded with the routing error itself.
    if spec.name == "exec" && ctx.shared.cluster.enabled() {
        if let Some(t) = ctx.client.multi.as_ref() {
            if let Err(r) = ctx.shared.cluster.route(t.keys()) {
                exec::multi::discard_now(ctx);
                return r.reply();
            }
        }
    }
    if exec::multi::queues(spec) {
        if let Some(reply) = exec::multi::queue(ctx, spec, args) {
            return reply;
        }
    }
    match exec::gate::run(ctx, spec, &args[..]).await {
        Ok(reply) => reply,
        Err(busy) if spec.name == "exec" => exec::multi::exec_refused(ctx, busy),
        Err(busy) => busy,
    }
}

/// The checks before a network command runs or is queued, in Redis's order.
fn check(ctx: &mut Ctx, args: &[Bytes]) -> Result<&'static Spec, Reply> {
    let Some(spec) = lookup(&args[0]) else {
        return Err(errors::unknown_command(&args[0], &args[1..]));
    };
    if let Some(err) = check_arity(spec, args) {
        return Err(err);
    }
    if !ctx.client.authed && spec.flags & flags::NO_AUTH == 0 {
        return Err(Reply::error(errors::NOAUTH));
    }
    check_acl(ctx, spec, args, acl::Context::Toplevel)?;
    // Redis Cluster's routing, after the ACL check as in Redis (EXEC's queue is
    // checked as a whole in `dispatch_checked`).
    if ctx.shared.cluster.enabled() && spec.name != "exec" {
        ctx.shared
            .cluster
            .route(spec.keys(args).map(|k| &k[..]))
            .map_err(|r| r.reply())?;
    }
    if ctx.client.resp2_subscribed() && spec.flags & flags::PUBSUB == 0 {
        return Err(Reply::error(format!(
            "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
            spec.name
        )));
    }
    if may_grow_memory(ctx, spec, args) && ctx.shared.over_maxmemory() {
        (ctx.shared.stats).record_rejected(spec.index, crate::node::stats::Refusal::Oom);
        return Err(Reply::error(errors::OOM));
    }
    Ok(spec)
}

/// Whether a network command is refused while used memory is above --maxmemory
/// (Redis's processCommand with noeviction; nothing is ever evicted): a command that
/// may grow memory; after MULTI, every command but EXEC, DISCARD, QUIT and RESET
/// (queueing takes memory); EXEC when its queue holds one. Reads, DEL and releases
/// still run. A container command's subcommand decides for itself (XGROUP CREATE is
/// denyoom, XGROUP DESTROY is not). Scripts have their own rule
/// (`scripting::flags::check_oom`).
fn may_grow_memory(ctx: &Ctx, spec: &Spec, args: &[Bytes]) -> bool {
    if spec.flags_of(args) & flags::DENYOOM != 0 {
        return true;
    }
    let Some(t) = ctx.client.multi.as_ref() else {
        return false;
    };
    match spec.name {
        "exec" => t.holds_denyoom(),
        "discard" | "quit" | "reset" => false,
        _ => true,
    }
}

fn check_arity(spec: &Spec, args: &[Bytes]) -> Option<Reply> {
    (!arity_ok(spec.arity, args.len())).then(|| errors::wrong_arity(spec.name))
}

/// Whether `n` arguments (the command name counted) fit `arity` (negative: at least).
pub fn arity_ok(arity: i32, n: usize) -> bool {
    let n = n as i32;
    if arity >= 0 {
        n == arity
    } else {
        n >= -arity
    }
}

/// Runs a command already looked up and arity-checked (and, from a script, checked by
/// `redis.call`: noscript, ACL, read-only, OOM): the fence, then the handler, with its
/// stats.
pub fn run(ctx: &mut Ctx, spec: &'static Spec, args: &[Bytes]) -> Reply {
    // A container command's subcommand carries its own flags (XINFO STREAM is
    // READONLY); whether the call is fenced is the table's rule (`Spec::fenced`:
    // FENCED, or FENCED_BY_ARGS with arguments that write, as BITFIELD SET).
    let own_flags = spec.flags_of(args);
    if spec.fenced(args) {
        if let Err(e) = check_fences(ctx, spec, args) {
            return e;
        }
        if let Err(e) = check_lock_delay(ctx, spec, args) {
            return e;
        }
    }
    // The append-only log (`durability::aof`): a write is refused once the log has
    // failed; one that may log runs under the log's order mutex (a script's or EXEC's
    // calls run under the exclusive gate instead), and its entries are appended when
    // the request ends.
    let shared = ctx.shared;
    let logs = own_flags & flags::WRITE != 0
        && shared.aof.logging()
        && !crate::durability::aof::propagate::is_memory_only_grant(
            spec,
            args,
            shared.aof.threshold_ms(),
        );
    if shared.aof.is_failed() && touches_keys(spec, own_flags) {
        if let Some(e) = shared.aof.refusal() {
            return Reply::error(e);
        }
    }
    let top_level = !ctx.in_script && !ctx.in_exec;
    let order = (logs && top_level).then(|| shared.aof.order());
    let before = logs.then(|| crate::durability::aof::propagate::before(ctx, spec, args));
    ctx.client.info.touch(spec, ctx.now_ms);
    // A network command's duration starts at the clock reading its context already
    // holds; a command called from a script or run by EXEC times itself.
    let started = if ctx.in_script || ctx.in_exec {
        crate::clock::mono_ns()
    } else {
        ctx.started()
    };
    // MONITOR: a script's command is shown before its calls, others once they ran.
    let monitored = ctx.shared.monitors.active();
    if monitored && runs_script(spec) {
        admin::monitor::feed(ctx, spec, args);
    }
    let reply = {
        // Key changes made now are this client's (client-side caching's NOLOOP).
        let _actor = crate::store::Actor::enter(ctx.client.id());
        match handlers::handler(spec)(ctx, args) {
            Ok(r) => r,
            Err(e) => e,
        }
    };
    if let Some(before) = before {
        crate::durability::aof::propagate::after(ctx, spec, args, &reply, before);
    }
    if top_level && !ctx.client.aof_pending.is_empty() {
        let entries = std::mem::take(&mut ctx.client.aof_pending);
        shared.aof.append(&entries);
    }
    drop(order);
    if monitored && !runs_script(spec) {
        admin::monitor::feed(ctx, spec, args);
    }
    // A release script that came after its lock expired (lock introspection).
    if families::locks::any_expired(ctx.shared) && !ctx.in_script && runs_script(spec) {
        families::locks::script_ran(ctx, spec, args);
    }
    // Keyspace notifications: the store's `expired` / `new` left unsent, and `keymiss`
    // (OBJECT and MEMORY look their keys up without it, as in Redis).
    if own_flags & flags::READONLY != 0
        && ctx.shared.notify.flags() & notify::KEY_MISS != 0
        && !matches!(spec.name, "object" | "memory" | "locks")
    {
        notify::key_misses(ctx, spec.keys(args));
    }
    notify::flush(ctx.shared);
    // The row's flag, not the subcommand's: no container row is WRITE, as Redis wakes
    // no stream reader after XGROUP CREATE / SETID (a reader blocked on a group moved
    // back by SETID waits for the next XADD); XGROUP DESTROY signals itself.
    if spec.flags & flags::WRITE != 0 {
        // Stream readers blocked on a key this changed (see `signal_write`).
        (ctx.shared.blocking).signal_write(ctx.client.db, spec.keys(args).cloned());
    }
    // Client-side caching remembers the keys of a read, a subcommand's too (XINFO
    // STREAM, OBJECT ENCODING), as Redis does by the subcommand's `readonly`.
    if own_flags & flags::READONLY != 0 && !reply.is_error() {
        admin::tracking::remember_reads(ctx, spec, args);
    }
    if !ctx.in_script {
        admin::tracking::remember_script_reads(ctx, spec, args);
    }
    let end_of_request = !ctx.in_script && !ctx.in_exec;
    admin::tracking::deliver(ctx.shared, Some(&mut *ctx.client), end_of_request);
    let failed = reply.is_error();
    let usec = crate::clock::mono_ns().saturating_sub(started) / 1000;
    let stats = &ctx.shared.stats;
    stats.record(spec.index, usec, failed);
    if !ctx.in_script {
        stats.observe(spec, args, usec, &ctx.client.info, &ctx.shared.clock);
    }
    reply
}

/// Whether `spec` runs a script (EVAL, EVALSHA, FCALL and their _RO forms): MONITOR
/// shows it before its calls, and lock introspection looks at it after it ran.
pub fn runs_script(spec: &Spec) -> bool {
    matches!(
        spec.name,
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro"
    )
}

/// Whether a command reads or writes keys (refused once the append-only log failed):
/// READONLY and WRITE rows, scripts, functions and EXEC.
fn touches_keys(spec: &Spec, own_flags: u32) -> bool {
    own_flags & (flags::WRITE | flags::READONLY) != 0
        || matches!(
            spec.name,
            "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro" | "exec"
        )
}

/// Redis's refusal of a script's call to a `noscript` command, by the call's own flags
/// (`Spec::flags_of`: CLIENT ID is refused, CLIENT HELP is not); none while DEBUG
/// SET-DISABLE-DENY-SCRIPTS has turned `scripts_may_call_anything` on. `redis.call`
/// checks it first, before the ACL and the script's write and OOM rules, in Redis's
/// scriptCall order.
pub fn refused_in_script(ctx: &Ctx, own_flags: u32) -> Option<&'static str> {
    (own_flags & flags::NOSCRIPT != 0
        && !ctx.shared.scripts_may_call_anything.load(Ordering::Relaxed))
    .then_some("ERR This Redis command is not allowed from script")
}

/// The ACL check (`acl::check`) of the caller's user for `spec` with `args`, run by
/// dispatch, EXEC and redis.call (`context`). A refusal is counted (INFO,
/// commandstats' rejected_calls, the metrics' noperm), logged (ACL LOG) and answered
/// as Redis words it there. A user allowed everything passes on one atomic load and
/// one flag.
#[inline]
pub fn check_acl(
    ctx: &mut Ctx,
    spec: &'static Spec,
    args: &[Bytes],
    context: acl::Context,
) -> Result<(), Reply> {
    let in_multi = ctx.client.multi.is_some();
    let user = ctx.client.current_user(&ctx.shared.acl);
    acl::check::check(user, spec, args, context, in_multi)
        .map_err(|refusal| acl_refused(ctx, spec, *refusal, context))
}

#[cold]
fn acl_refused(ctx: &Ctx, spec: &Spec, refusal: acl::Refusal, context: acl::Context) -> Reply {
    if context == acl::Context::Toplevel {
        // As Redis: the refused command is the client's last one (CLIENT LIST, the
        // log entry's client-info).
        ctx.client.info.touch(spec, ctx.now_ms);
    }
    let s = &ctx.shared.stats;
    s.record_rejected(spec.index, crate::node::stats::Refusal::Noperm);
    let counter = match refusal.denied {
        acl::Denied::Command => &s.acl_denied_cmd,
        acl::Denied::Key(_) => &s.acl_denied_key,
        acl::Denied::Channel(_) => &s.acl_denied_channel,
    };
    counter.fetch_add(1, Ordering::Relaxed);
    let user = ctx.client.user.name.clone();
    log_denial(
        ctx,
        refusal.reason,
        refusal.log_context,
        refusal.object,
        user,
    );
    refusal.reply
}

/// An ACL LOG entry for this client (a refused command: `check_acl`; a failed AUTH:
/// reason `auth`, object `AUTH`).
pub fn log_denial(
    ctx: &Ctx,
    reason: &'static str,
    context: &'static str,
    object: Bytes,
    username: Bytes,
) {
    let info = ctx.client.info.list_line(ctx.shared.clock.now_ms());
    let now = ctx.shared.clock.wall_ms().max(0) as u64;
    ctx.shared
        .acl
        .log
        .lock()
        .add(reason, context, object, username, info, now);
}

/// The fences a FENCED command (one that could grant a lock) must pass: the restart
/// fence, and the fence on hash slots this node took over from another
/// (`crate::cluster`), for the slots of the keys `Spec::key_positions` finds. Counted
/// as fence refusals.
pub fn check_fences(ctx: &Ctx, spec: &Spec, args: &[Bytes]) -> Result<(), Reply> {
    ctx.shared
        .fence
        .check_write(ctx.now_ms)
        .and_then(|()| {
            ctx.shared
                .cluster
                .check_fence(spec.keys(args).map(|k| &k[..]), ctx.now_ms)
        })
        .inspect_err(|_| {
            (ctx.shared.stats).record_rejected(spec.index, crate::node::stats::Refusal::Fence)
        })
}

/// The lock-delay (`store/lock.rs`): a FENCED command (one that could create a key or
/// lengthen a TTL) naming a delayed lock is refused the way its client reads "held
/// elsewhere": `-TRYAGAIN` with the milliseconds left (`lock_delay_refused`). The same
/// check runs for the network, for EXEC's queued commands and for redis.call. Passed
/// over: the EXPIRE family, PERSIST and GETEX (they create nothing and answer 0 for the key,
/// which reads as absent), and the grants, SET, SETNX and FENCING.GRANT, which check
/// the slot they look up anyway (no second lookup on the hand-over path) and answer
/// null or 0, as on a held key. Counted as lock-delay refusals.
pub fn check_lock_delay(ctx: &Ctx, spec: &Spec, args: &[Bytes]) -> Result<(), Reply> {
    if ctx.shared.keyspace.lock_delay().ms() == 0
        || matches!(
            spec.name,
            "set"
                | "setnx"
                | "fencing.grant"
                | "expire"
                | "pexpire"
                | "expireat"
                | "pexpireat"
                | "persist"
                | "getex"
        )
    {
        return Ok(());
    }
    let db = ctx.db();
    let Some(left) = spec
        .keys(args)
        .find_map(|k| db.lock_delay_left(k, ctx.now_ms))
    else {
        return Ok(());
    };
    let stats = &ctx.shared.stats;
    stats.per_command_rejected(spec.index);
    Err(lock_delay_refused(ctx, left))
}

/// Counts a write refused by the lock-delay (INFO's `lock_delayed_refusals`).
pub fn note_lock_delay_refusal(ctx: &Ctx) {
    let refusals = &ctx.shared.stats.locks.lock_delayed;
    refusals.fetch_add(1, Ordering::Relaxed);
}

/// A write refused by the lock-delay, `left_ms` before it ends: counted, and its
/// `-TRYAGAIN` error.
pub fn lock_delay_refused(ctx: &Ctx, left_ms: u64) -> Reply {
    note_lock_delay_refusal(ctx);
    Reply::error(format!(
        "TRYAGAIN lock-delay: the lock at this key expired without being released; it is refused to new holders for another {left_ms} ms"
    ))
}

/// Case-insensitive comparison of an argument with an ASCII keyword.
pub fn eq_ignore_case(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

pub use crate::protocol::parse_i64;

/// `parse_i64` with Redis's error reply.
pub fn int_arg(arg: &[u8]) -> Result<i64, Reply> {
    parse_i64(arg).ok_or_else(errors::not_integer)
}

/// The most members a negative SRANDMEMBER / ZRANDMEMBER count (repeats allowed) may
/// ask for: 2^24. Redis has no bound and streams such a reply until the client or its
/// memory gives out (`SRANDMEMBER s -8888888888888888882` wedges redis-server 7.0.15);
/// here a reply is built before it is sent, so a larger count gets Redis's range error
/// instead of the server's memory.
pub const MAX_RANDOM_REPEATS: u64 = 1 << 24;

/// How many members a negative random-member `count` asks for (see `MAX_RANDOM_REPEATS`).
pub fn random_repeats(count: i64) -> Result<usize, Reply> {
    let n = count.unsigned_abs();
    if n > MAX_RANDOM_REPEATS {
        return Err(Reply::error("ERR value is out of range"));
    }
    Ok(n as usize)
}

/// ZRANDMEMBER's and HRANDFIELD's arguments after the key, checked in Redis's order:
/// `None` for no count (one pick), else the count and whether `with_word`
/// (WITHSCORES / WITHVALUES) follows it.
pub fn random_count(args: &[Bytes], with_word: &str) -> Result<Option<(i64, bool)>, Reply> {
    if args.len() > 4 {
        return Err(errors::syntax());
    }
    let with = match args.get(3) {
        None => false,
        Some(a) if eq_ignore_case(a, with_word) => true,
        Some(_) => return Err(errors::syntax()),
    };
    let Some(count_arg) = args.get(2) else {
        return Ok(None);
    };
    let count = int_arg(count_arg)?;
    if with && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&count) {
        return Err(Reply::error("ERR value is out of range"));
    }
    if count < 0 {
        random_repeats(count)?;
    }
    Ok(Some((count, with)))
}

/// `count` random picks of `all` (as `random_count` read it): distinct ones in `all`'s
/// order for a positive count, that many with repeats for a negative one.
pub fn random_picks<T: Copy>(all: &[T], count: i64) -> Vec<T> {
    use rand::seq::IndexedRandom;
    let mut rng = rand::rng();
    if count >= 0 {
        let n = (count as usize).min(all.len());
        let mut idx = rand::seq::index::sample(&mut rng, all.len(), n).into_vec();
        idx.sort_unstable();
        idx.into_iter().map(|i| all[i]).collect()
    } else {
        (0..count.unsigned_abs())
            .filter_map(|_| all.choose(&mut rng).copied())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_parse_like_redis() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-15"), Some(-15));
        assert_eq!(parse_i64(b"15000"), Some(15000));
        assert_eq!(parse_i64(b"015"), None);
        assert_eq!(parse_i64(b"+1"), None);
        assert_eq!(parse_i64(b" 1"), None);
        assert_eq!(parse_i64(b"1.0"), None);
        assert_eq!(parse_i64(b"-"), None);
        assert_eq!(parse_i64(b"-0"), None);
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"9223372036854775808"), None);
    }
}
