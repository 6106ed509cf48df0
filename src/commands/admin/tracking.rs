//! Client-side caching (CLIENT TRACKING, CACHING, TRACKINGINFO, GETREDIR) and the
//! invalidation messages, as Redis 7.0 sends them.
//!
//! A tracking client is told when a key it read changes: after a read-only command
//! (also one a script runs for it) its keys are remembered in the keyspace's
//! `TrackedKeys`; after every command the keys changed meanwhile are taken from there
//! and each reader gets `invalidate [key]` (RESP3 push, or a `__redis__:invalidate`
//! message to the RESP2 client it redirects to). Broadcasting clients (BCAST) get every
//! change under their prefixes, one message per prefix per request (a whole EXEC or
//! script is one). A flush sends
//! `invalidate` with a null to every tracking client. The client that made a change
//! gets its invalidations after its reply (Redis 7.0's order), or none with NOLOOP.
//! rueidis (and so rueidislock) turns caching on by default: its lock waiters wake on
//! these messages.

use crate::commands::{eq_ignore_case, parse_i64, CmdResult, Ctx, Spec};
use crate::node::{ClientInfo, ClientState, Shared};
use crate::protocol::{errors, Reply};
use bytes::Bytes;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The channel a RESP2 client subscribes to for redirected invalidations.
pub const CHANNEL: &str = "__redis__:invalidate";

/// One client's tracking mode, as its last CLIENT TRACKING ON set it.
pub struct Tracker {
    /// The tracking client's id.
    pub id: u64,
    /// Client id the messages go to; 0: the client itself.
    pub redirect: u64,
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
    /// BCAST prefixes, sorted ("" when none was given: every key).
    pub prefixes: Vec<Bytes>,
    /// The redirect target was gone when a message was due (flag `R`).
    pub broken: AtomicBool,
}

impl Tracker {
    /// CLIENT LIST's tracking flags: `t`, then `R` (broken redirect), `B` (broadcast).
    pub fn list_flags(&self) -> String {
        let mut f = String::from("t");
        if self.broken.load(Ordering::Relaxed) {
            f.push('R');
        }
        if self.bcast {
            f.push('B');
        }
        f
    }
}

/// INFO's tracking_clients and tracking_total_prefixes (distinct BCAST prefixes).
pub fn info_counts(shared: &Shared) -> (usize, usize) {
    let mut clients = 0;
    let mut prefixes: Vec<Bytes> = Vec::new();
    for c in shared.clients.iter() {
        if let Some(t) = c.tracking.lock().as_ref() {
            clients += 1;
            prefixes.extend(t.prefixes.iter().cloned());
        }
    }
    prefixes.sort();
    prefixes.dedup();
    (clients, prefixes.len())
}

/// A connection's own tracking state.
#[derive(Default)]
pub struct ClientTracking {
    pub mode: Option<Arc<Tracker>>,
    /// CLIENT CACHING YES (OPTIN) or NO (OPTOUT) given for the next command (or the
    /// next transaction).
    pub caching: bool,
    /// Invalidations for this client caused by its own command: sent after its reply.
    pub after_reply: Vec<Reply>,
    /// The running script called a read-only command: its declared keys are
    /// remembered when it ends.
    pub script_read: bool,
}

/// CLIENT TRACKING (ON|OFF) [REDIRECT id] [BCAST] [PREFIX p ...] [OPTIN] [OPTOUT] [NOLOOP]
pub fn tracking(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let mut redirect = 0u64;
    let (mut bcast, mut optin, mut optout, mut noloop) = (false, false, false, false);
    let mut prefixes: Vec<Bytes> = Vec::new();
    let mut j = 3;
    while j < args.len() {
        let more = j + 1 < args.len();
        let a = &args[j];
        if eq_ignore_case(a, "redirect") && more {
            j += 1;
            if redirect != 0 {
                return Err(Reply::error(
                    "ERR A client can only redirect to a single other client",
                ));
            }
            let id = parse_i64(&args[j]).ok_or_else(errors::not_integer)?;
            if id <= 0 || !ctx.shared.clients.contains_key(&(id as u64)) {
                return Err(Reply::error(
                    "ERR The client ID you want redirect to does not exist",
                ));
            }
            redirect = id as u64;
        } else if eq_ignore_case(a, "bcast") {
            bcast = true;
        } else if eq_ignore_case(a, "optin") {
            optin = true;
        } else if eq_ignore_case(a, "optout") {
            optout = true;
        } else if eq_ignore_case(a, "noloop") {
            noloop = true;
        } else if eq_ignore_case(a, "prefix") && more {
            j += 1;
            prefixes.push(args[j].clone());
        } else {
            return Err(errors::syntax());
        }
        j += 1;
    }
    if eq_ignore_case(&args[2], "off") {
        disable(ctx.shared, ctx.client);
        return Ok(Reply::Ok);
    }
    if !eq_ignore_case(&args[2], "on") {
        return Err(errors::syntax());
    }
    if !bcast && !prefixes.is_empty() {
        return Err(Reply::error(
            "ERR PREFIX option requires BCAST mode to be enabled",
        ));
    }
    let old = ctx.client.tracking.mode.clone();
    if old.as_ref().is_some_and(|o| o.bcast != bcast) {
        return Err(Reply::error(
            "ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.",
        ));
    }
    if bcast && (optin || optout) {
        return Err(Reply::error(
            "ERR OPTIN and OPTOUT are not compatible with BCAST",
        ));
    }
    if optin && optout {
        return Err(Reply::error(
            "ERR You can't specify both OPTIN mode and OPTOUT mode",
        ));
    }
    if old
        .as_ref()
        .is_some_and(|o| (optin && o.optout) || (optout && o.optin))
    {
        return Err(Reply::error(
            "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.",
        ));
    }
    let existing: &[Bytes] = old.as_ref().map_or(&[], |o| &o.prefixes);
    if bcast {
        check_prefixes(existing, &prefixes)?;
    }
    let mut all: Vec<Bytes> = existing.to_vec();
    if bcast {
        if prefixes.is_empty() && all.is_empty() {
            all.push(Bytes::new());
        }
        for p in prefixes {
            if !all.contains(&p) {
                all.push(p);
            }
        }
        all.sort();
    }
    let tracker = Arc::new(Tracker {
        id: ctx.client.id(),
        redirect,
        bcast,
        optin,
        optout,
        noloop,
        prefixes: all,
        broken: AtomicBool::new(false),
    });
    let tracked = ctx.shared.keyspace.tracked();
    if bcast && old.is_none() {
        tracked.broadcasting(true);
    }
    *ctx.client.info.tracking.lock() = Some(tracker.clone());
    ctx.client.tracking.mode = Some(tracker);
    Ok(Reply::Ok)
}

/// Redis's checkPrefixCollisionsOrReply: no new prefix may be a prefix of an existing
/// one or of another new one, or the other way round.
fn check_prefixes(existing: &[Bytes], new: &[Bytes]) -> Result<(), Reply> {
    let overlap = |a: &[u8], b: &[u8]| {
        let n = a.len().min(b.len());
        a[..n] == b[..n]
    };
    for (i, p) in new.iter().enumerate() {
        if let Some(e) = existing.iter().find(|e| overlap(e, p)) {
            return Err(Reply::error(format!(
                "ERR Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
                String::from_utf8_lossy(p),
                String::from_utf8_lossy(e)
            )));
        }
        if let Some(q) = new[i + 1..].iter().find(|q| overlap(p, q)) {
            return Err(Reply::error(format!(
                "ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
                String::from_utf8_lossy(p),
                String::from_utf8_lossy(q)
            )));
        }
    }
    Ok(())
}

/// Tracking off (CLIENT TRACKING OFF, RESET, disconnect).
pub fn disable(shared: &Shared, client: &mut ClientState) {
    let t = &mut client.tracking;
    t.caching = false;
    let Some(mode) = t.mode.take() else {
        return;
    };
    *client.info.tracking.lock() = None;
    if mode.bcast {
        shared.keyspace.tracked().broadcasting(false);
    }
}

/// CLIENT CACHING (YES|NO)
pub fn caching(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let Some(mode) = ctx.client.tracking.mode.clone() else {
        return Err(Reply::error(
            "ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled",
        ));
    };
    if eq_ignore_case(&args[2], "yes") {
        if !mode.optin {
            return Err(Reply::error(
                "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
            ));
        }
    } else if eq_ignore_case(&args[2], "no") {
        if !mode.optout {
            return Err(Reply::error(
                "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
            ));
        }
    } else {
        return Err(errors::syntax());
    }
    ctx.client.tracking.caching = true;
    Ok(Reply::Ok)
}

/// CLIENT TRACKINGINFO
pub fn trackinginfo(ctx: &mut Ctx) -> CmdResult {
    let t = &ctx.client.tracking;
    let mut flags = Vec::new();
    let (redirect, prefixes) = match &t.mode {
        None => {
            flags.push("off");
            (-1, Vec::new())
        }
        Some(m) => {
            flags.push("on");
            if m.bcast {
                flags.push("bcast");
            }
            if m.optin {
                flags.push("optin");
                if t.caching {
                    flags.push("caching-yes");
                }
            }
            if m.optout {
                flags.push("optout");
                if t.caching {
                    flags.push("caching-no");
                }
            }
            if m.noloop {
                flags.push("noloop");
            }
            if m.broken.load(Ordering::Relaxed) {
                flags.push("broken_redirect");
            }
            let prefixes = if m.bcast {
                m.prefixes.iter().cloned().map(Reply::Bulk).collect()
            } else {
                Vec::new()
            };
            (m.redirect as i64, prefixes)
        }
    };
    Ok(Reply::Map(vec![
        (
            Reply::bulk_str("flags"),
            Reply::Set(flags.into_iter().map(Reply::bulk_str).collect()),
        ),
        (Reply::bulk_str("redirect"), Reply::Integer(redirect)),
        (Reply::bulk_str("prefixes"), Reply::Array(prefixes)),
    ]))
}

/// CLIENT GETREDIR
pub fn getredir(ctx: &mut Ctx) -> CmdResult {
    Ok(Reply::Integer(
        ctx.client
            .tracking
            .mode
            .as_ref()
            .map_or(-1, |m| m.redirect as i64),
    ))
}

const SCRIPTS: [&str; 6] = [
    "eval",
    "evalsha",
    "eval_ro",
    "evalsha_ro",
    "fcall",
    "fcall_ro",
];

/// After a command has run (also one a script or EXEC runs): remembers the keys a
/// read-only command read for a tracking caller. As Redis 7.0: a read inside a script
/// tracks the script's declared keys (KEYS), not the keys of the command it called,
/// and a script that reads nothing tracks nothing, read-only script or not.
pub fn remember_reads(ctx: &mut Ctx, spec: &Spec, args: &[Bytes]) {
    if ctx.client.tracking.mode.is_none() {
        return;
    }
    if ctx.in_script {
        ctx.client.tracking.script_read = true;
        return;
    }
    if !SCRIPTS.contains(&spec.name) {
        remember_keys(ctx, spec, args);
    }
}

/// After a script command (EVAL, FCALL and their forms) has run: its declared keys
/// when it called a read-only command.
pub fn remember_script_reads(ctx: &mut Ctx, spec: &Spec, args: &[Bytes]) {
    if SCRIPTS.contains(&spec.name) && std::mem::take(&mut ctx.client.tracking.script_read) {
        remember_keys(ctx, spec, args);
    }
}

fn remember_keys(ctx: &mut Ctx, spec: &Spec, args: &[Bytes]) {
    let t = &ctx.client.tracking;
    let Some(mode) = &t.mode else {
        return;
    };
    if mode.bcast || (mode.optin && !t.caching) || (mode.optout && t.caching) {
        return;
    }
    let tracked = ctx.shared.keyspace.tracked();
    let id = ctx.client.id();
    for key in spec.keys(args) {
        tracked.remember(key, id);
    }
}

/// After a network command: CLIENT CACHING holds for one command, or for a whole
/// transaction (Redis clears it unless the client is in MULTI or ran CLIENT).
pub fn end_of_request(client: &mut ClientState, client_command: bool) {
    if client.multi.is_none() && !client_command {
        client.tracking.caching = false;
    }
}

/// Sends the invalidations for the changes since the last call. `current` is the
/// client running a command now (None: the expiry sweeper): invalidations of its own
/// changes follow its reply, or are skipped with NOLOOP. A reader's invalidation goes
/// after each command (also inside EXEC and scripts: a key read again after its change
/// is tracked again); broadcasts only when `end_of_request`, one message per prefix
/// for all the changes of a request (a whole EXEC or script), as Redis sends them once
/// per event loop turn.
pub fn deliver(shared: &Shared, mut current: Option<&mut ClientState>, end_of_request: bool) {
    let tracked = shared.keyspace.tracked();
    if !tracked.pending() {
        return;
    }
    let changes = tracked.take(end_of_request);
    let current_id = current.as_ref().map_or(0, |c| c.id());
    let mut send = |info: &ClientInfo, t: &Tracker, payload: Reply| {
        let own = if t.id == current_id {
            current.as_deref_mut().map(|c| &mut c.tracking.after_reply)
        } else {
            None
        };
        route(shared, info, t, payload, own);
    };
    // Every tracking client, for a flush and for broadcasting (only then).
    let everyone = || -> Vec<(Arc<ClientInfo>, Arc<Tracker>)> {
        shared
            .clients
            .iter()
            .filter_map(|c| Some((c.value().clone(), c.tracking.lock().clone()?)))
            .collect()
    };
    if changes.flushed {
        for (info, t) in everyone() {
            send(&info, &t, Reply::Null);
        }
    }
    for (key, ids, by) in changes.keys {
        for id in ids {
            let Some(info) = shared.clients.get(&id).map(|c| c.value().clone()) else {
                continue;
            };
            let tracker = info.tracking.lock().clone();
            match tracker {
                Some(t) if !(t.bcast || (t.noloop && by == id)) => {
                    send(&info, &t, Reply::Array(vec![Reply::Bulk(key.clone())]))
                }
                _ => {}
            }
        }
    }
    if !changes.all.is_empty() {
        let mut all = changes.all;
        all.sort();
        for (info, t) in everyone().iter().filter(|(_, t)| t.bcast) {
            for p in &t.prefixes {
                let mut keys: Vec<&Bytes> = all
                    .iter()
                    .filter(|(k, by)| k.starts_with(p) && !(t.noloop && *by == t.id))
                    .map(|(k, _)| k)
                    .collect();
                keys.dedup();
                if !keys.is_empty() {
                    let keys = keys.into_iter().cloned().map(Reply::Bulk).collect();
                    send(info, t, Reply::Array(keys));
                }
            }
        }
    }
}

/// One invalidation (`payload`: the keys, or null for a flush) for tracker `t`: to
/// the client itself or to its redirect target, RESP3 as a push, RESP2 as a message
/// on `__redis__:invalidate` (a RESP2 client that is not a subscribed redirect target
/// gets nothing: it has no way to receive it). `own` collects what goes to the client
/// running the current command, to follow its reply.
fn route(
    shared: &Shared,
    info: &ClientInfo,
    t: &Tracker,
    payload: Reply,
    own: Option<&mut Vec<Reply>>,
) {
    let target;
    let dest = if t.redirect == 0 {
        info
    } else {
        match shared.clients.get(&t.redirect) {
            Some(c) => {
                target = c.value().clone();
                &target
            }
            None => {
                // Redis tells a RESP3 client once that its target is gone.
                if !t.broken.swap(true, Ordering::Relaxed) && info.resp.load(Ordering::Relaxed) >= 3
                {
                    let msg = Reply::Push(vec![
                        Reply::bulk_str("tracking-redir-broken"),
                        Reply::Integer(t.redirect as i64),
                    ]);
                    push_to(shared, info, msg, own);
                }
                return;
            }
        }
    };
    let msg = if dest.resp.load(Ordering::Relaxed) >= 3 {
        Reply::Push(vec![Reply::bulk_str("invalidate"), payload])
    } else if t.redirect != 0 && shared.pubsub.subscribed(CHANNEL.as_bytes(), dest.id) {
        Reply::Push(vec![
            Reply::bulk_str("message"),
            Reply::bulk_str(CHANNEL),
            payload,
        ])
    } else {
        return;
    };
    let own = if dest.id == t.id { own } else { None };
    push_to(shared, dest, msg, own);
}

fn push_to(shared: &Shared, dest: &ClientInfo, msg: Reply, own: Option<&mut Vec<Reply>>) {
    match own {
        Some(after_reply) => after_reply.push(msg),
        None => {
            if let Some(sub) = dest.pushes.get().and_then(|w| w.upgrade()) {
                sub.push(msg, shared.config.pubsub_output_limit);
                dest.wake.wake();
            }
        }
    }
}
