//! Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH, with Redis 7's replies.
//!
//! After MULTI, a connection's commands are checked (name, arity, auth, the restart
//! fence, BUSY) and queued in the client, answered +QUEUED; a refusal at that point
//! marks the transaction failed, and EXEC then answers EXECABORT without running
//! anything. EXEC runs the queue holding the keyspace gate exclusively (see
//! `gate.rs`), each command through `commands::run` as the network and Lua run it;
//! a command's runtime error is its own entry in EXEC's reply and the rest still run.
//!
//! The restart fence is checked at queue time, as Redis checks its own refusals of a
//! write for the server's state (OOM, READONLY): the refused command gets its
//! -TRYAGAIN and EXEC aborts. A TTL above --max-ttl is an argument error, found when
//! the command runs, as Redis finds an invalid expire time: it is that command's entry
//! in EXEC's reply.
//!
//! WATCH registers the client in the store's per-database watch registry; any write
//! to a watched key (by anyone: a command, a script, expiry, FLUSHDB...) sets the
//! client's dirty flag, and EXEC then answers the null array.

use crate::commands::{run, CmdResult, Ctx, Spec};
use crate::protocol::{errors, Reply};
use crate::store::WatchFlag;
use bytes::Bytes;
use std::sync::Arc;

pub const EXECABORT: &str = "EXECABORT Transaction discarded because of previous errors.";

/// A transaction being queued (between MULTI and EXEC/DISCARD).
#[derive(Default)]
pub struct Transaction {
    queue: Vec<(&'static Spec, Vec<Bytes>)>,
    /// A command was refused while queueing: EXEC will abort.
    failed: bool,
}

/// The keys a client watches, and the flag writes to them set.
#[derive(Default)]
pub struct Watching {
    flag: Arc<WatchFlag>,
    keys: Vec<(usize, Bytes)>,
}

/// Whether a command sent after MULTI is queued (everything but the commands that
/// drive the transaction itself).
pub fn queues(spec: &Spec) -> bool {
    !matches!(
        spec.name,
        "exec" | "discard" | "multi" | "watch" | "quit" | "reset"
    )
}

/// Marks the client's transaction, if any, as failed (Redis's flagTransaction).
pub fn flag_failed(ctx: &mut Ctx) {
    if let Some(t) = ctx.client.multi.as_mut() {
        t.failed = true;
    }
}

/// After MULTI: queues the command, or refuses it (failing the transaction) as Redis
/// refuses it at that point. `None` when the client is not in MULTI.
pub fn queue(ctx: &mut Ctx, spec: &'static Spec, args: &mut Vec<Bytes>) -> Option<Reply> {
    use crate::commands::command_table::flags;
    ctx.client.multi.as_ref()?;
    let own_flags = spec.flags_of(args);
    let refusal = if own_flags & flags::NO_MULTI != 0 {
        Some(Reply::error("ERR Command not allowed inside a transaction"))
    } else if own_flags & flags::FENCED != 0 {
        crate::commands::check_fences(ctx, spec, args).err()
    } else {
        None
    };
    let refusal = refusal.or_else(|| {
        (!spec.allows_busy(args) && ctx.shared.scripts.is_busy(ctx.now_ms))
            .then(|| Reply::error(errors::BUSY))
    });
    let t = ctx.client.multi.as_mut()?;
    if let Some(e) = refusal {
        t.failed = true;
        return Some(e);
    }
    // A failed transaction will not run: no point keeping its commands.
    if !t.failed {
        t.queue.push((spec, std::mem::take(args)));
    }
    Some(Reply::status("QUEUED"))
}

impl Transaction {
    /// Every key of every queued command, in order (the cluster's routing check of
    /// the transaction as a whole).
    pub fn keys(&self) -> impl Iterator<Item = &[u8]> {
        self.queue
            .iter()
            .flat_map(|(spec, args)| spec.keys(args).map(|k| &k[..]))
    }

    /// Whether a queued command may grow memory (EXEC is refused above --maxmemory),
    /// a subcommand by its own flags (XGROUP CREATE).
    pub fn holds_denyoom(&self) -> bool {
        use crate::commands::command_table::flags;
        self.queue
            .iter()
            .any(|(spec, args)| spec.flags_of(args) & flags::DENYOOM != 0)
    }
}

pub fn multi(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    if ctx.client.multi.is_some() {
        return Err(Reply::error("ERR MULTI calls can not be nested"));
    }
    ctx.client.multi = Some(Transaction::default());
    Ok(Reply::Ok)
}

pub fn discard(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    if ctx.client.multi.is_none() {
        return Err(Reply::error("ERR DISCARD without MULTI"));
    }
    discard_transaction(ctx);
    Ok(Reply::Ok)
}

/// Runs under the keyspace gate held exclusively (EXCLUSIVE in the table).
pub fn exec(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    let Some(t) = ctx.client.multi.take() else {
        return Err(Reply::error("ERR EXEC without MULTI"));
    };
    let watch_failed = watched_changed(ctx);
    unwatch_all(ctx);
    if t.failed {
        return Err(Reply::error(EXECABORT));
    }
    if watch_failed {
        return Ok(Reply::NullArray);
    }
    let saved = std::mem::replace(&mut ctx.in_exec, true);
    // ACL rules are checked again: they may have changed since the queueing.
    let replies = t
        .queue
        .iter()
        .map(|(spec, args)| {
            match crate::commands::check_acl(ctx, spec, args, crate::acl::Context::Exec) {
                Ok(()) => run(ctx, spec, args),
                Err(e) => e,
            }
        })
        .collect();
    ctx.in_exec = saved;
    if let Some(spec) = crate::commands::lookup(b"exec") {
        ctx.client.info.touch(spec, ctx.now_ms);
    }
    Ok(Reply::Array(replies))
}

/// EXEC refused before it could run (BUSY, wrong arity, NOAUTH...): the transaction
/// is discarded and the reason given behind EXECABORT, as Redis's execCommandAbort
/// (which shows a generic error without its "ERR " code).
pub fn exec_refused(ctx: &mut Ctx, reason: Reply) -> Reply {
    discard_transaction(ctx);
    let text = match &reason {
        Reply::Error(e) => String::from_utf8_lossy(e).into_owned(),
        _ => String::new(),
    };
    let text = text.trim_end();
    Reply::error(format!(
        "EXECABORT Transaction discarded because of: {}",
        text.strip_prefix("ERR ").unwrap_or(text)
    ))
}

pub fn watch(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    if ctx.client.multi.is_some() {
        return Err(Reply::error("ERR WATCH inside MULTI is not allowed"));
    }
    let watching = &mut ctx.client.watch;
    // No point in watching more once a watched key has changed.
    if watching.flag.is_dirty() {
        return Ok(Reply::Ok);
    }
    let db_index = ctx.client.db;
    let db = ctx.shared.keyspace.db(db_index);
    for key in &args[1..] {
        if watching
            .keys
            .iter()
            .any(|(d, k)| *d == db_index && k == key)
        {
            continue;
        }
        db.watch(key, &watching.flag, ctx.now_ms);
        watching.keys.push((db_index, Bytes::copy_from_slice(key)));
    }
    Ok(Reply::Ok)
}

pub fn unwatch(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    unwatch_all(ctx);
    Ok(Reply::Ok)
}

/// RESET: leaves MULTI and forgets the watched keys.
pub fn reset(ctx: &mut Ctx) {
    discard_transaction(ctx);
}

/// The connection is closing: its watches leave the registries.
pub fn forget(shared: &crate::node::Shared, client: &mut crate::node::ClientState) {
    client.multi = None;
    unwatch_keys(shared, &mut client.watch);
}

/// Ends the transaction without running it (EXEC refused by the cluster's routing).
pub fn discard_now(ctx: &mut Ctx) {
    discard_transaction(ctx);
}

fn discard_transaction(ctx: &mut Ctx) {
    ctx.client.multi = None;
    unwatch_all(ctx);
}

/// Whether EXEC must fail for WATCH: a watched key was touched, or one that was live
/// when watched has expired since (Redis's isWatchedKeyExpired).
fn watched_changed(ctx: &Ctx) -> bool {
    let watching = &ctx.client.watch;
    watching.flag.is_dirty()
        || watching.keys.iter().any(|(db, key)| {
            ctx.shared
                .keyspace
                .db(*db)
                .watched_key_expired(key, &watching.flag, ctx.now_ms)
        })
}

fn unwatch_all(ctx: &mut Ctx) {
    unwatch_keys(ctx.shared, &mut ctx.client.watch);
}

fn unwatch_keys(shared: &crate::node::Shared, watching: &mut Watching) {
    for (db, key) in watching.keys.drain(..) {
        shared.keyspace.db(db).unwatch(&key, &watching.flag);
    }
    // No registry holds the flag any more: nothing can set it after this.
    watching.flag.clear();
}
