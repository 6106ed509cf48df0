//! Connection commands: PING, ECHO, HELLO, AUTH, SELECT, QUIT, RESET, CLIENT.

use crate::commands::{eq_ignore_case, parse_i64, CmdResult, Ctx};
use crate::protocol::{errors, Reply};
use bytes::Bytes;

/// The Redis version we report: clients gate features on it (CLIENT SETINFO is 7.2).
pub const REDIS_VERSION: &str = "7.2.4";

pub fn ping(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    if args.len() > 2 {
        return Err(errors::wrong_arity("ping"));
    }
    if ctx.client.resp2_subscribed() {
        // In RESP2 subscribed mode PING answers in the pub/sub message shape.
        let msg = args.get(1).cloned().unwrap_or_default();
        return Ok(Reply::Array(vec![
            Reply::bulk_str("pong"),
            Reply::Bulk(msg),
        ]));
    }
    Ok(match args.get(1) {
        Some(msg) => Reply::Bulk(msg.clone()),
        None => Reply::status("PONG"),
    })
}

pub fn echo(_ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    Ok(Reply::Bulk(args[1].clone()))
}

/// Authenticates the client as `user` (the default user when `None`) if the user is on
/// and `pass` is one of its passwords (any, for a nopass user). A failure is counted
/// (INFO's `acl_access_denied_auth`, as Redis counts it), logged, and an ACL LOG
/// entry: someone guessing passwords leaves a trace.
fn authenticate(ctx: &mut Ctx, user: Option<&[u8]>, pass: &[u8]) -> Result<(), Reply> {
    let name = user.unwrap_or(b"default");
    match ctx.shared.acl.get(name) {
        Some(u) if u.enabled && u.password_ok(pass) => {
            ctx.client.set_user(u, &ctx.shared.acl);
            ctx.client.authed = true;
            Ok(())
        }
        _ => {
            let n = ctx
                .shared
                .stats
                .auth_failures
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                + 1;
            // The name is the client's input, sent before any authentication: written
            // escaped and cut short, and at most one line a second for all clients.
            if let Some(events) = ctx
                .shared
                .stats
                .auth_log
                .event(crate::clock::mono_ns() / 1_000_000)
            {
                tracing::warn!(
                    client = ctx.client.id(),
                    addr = %ctx.client.info.addr,
                    user = %loggable_name(name),
                    failed_auth_total = n,
                    since_last_line = events,
                    "AUTH failed: wrong password, unknown or disabled user (ACL LOG has the last ones)"
                );
            }
            let name = Bytes::copy_from_slice(name);
            crate::commands::log_denial(ctx, "auth", "toplevel", Bytes::from_static(b"AUTH"), name);
            Err(Reply::error(errors::WRONGPASS))
        }
    }
}

/// A user name as a log line shows it: at most 64 bytes, every byte outside
/// printable ASCII escaped (a newline cannot start a forged line, nor ESC drive a
/// terminal).
fn loggable_name(name: &[u8]) -> String {
    const MAX: usize = 64;
    let shown = name[..name.len().min(MAX)].escape_ascii().to_string();
    if name.len() > MAX {
        format!("{shown}... ({} more bytes)", name.len() - MAX)
    } else {
        shown
    }
}

/// `AUTH [username] password`
pub fn auth(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    if args.len() > 3 {
        return Err(errors::syntax());
    }
    if args.len() == 2 && ctx.shared.acl.default_user().auto_auth() {
        return Err(Reply::error(
            "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
        ));
    }
    let (user, pass) = match args.len() {
        2 => (None, &args[1]),
        _ => (Some(&args[1][..]), &args[2]),
    };
    authenticate(ctx, user, pass)?;
    Ok(Reply::Ok)
}

/// HELLO [protover [AUTH username password] [SETNAME clientname]]
pub fn hello(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let mut proto = ctx.client.proto;
    if let Some(v) = args.get(1) {
        let v = parse_i64(v).ok_or_else(|| {
            Reply::error("ERR Protocol version is not an integer or out of range")
        })?;
        if !(2..=3).contains(&v) {
            return Err(Reply::error("NOPROTO unsupported protocol version"));
        }
        proto = v as u8;
    }
    let mut auth: Option<(&[u8], &[u8])> = None;
    let mut setname: Option<&Bytes> = None;
    let mut i = 2;
    while i < args.len() {
        let more = args.len() - i - 1;
        if eq_ignore_case(&args[i], "auth") && more >= 2 {
            auth = Some((&args[i + 1], &args[i + 2]));
            i += 3;
        } else if eq_ignore_case(&args[i], "setname") && more >= 1 {
            setname = Some(&args[i + 1]);
            i += 2;
        } else {
            return Err(Reply::error(format!(
                "ERR Syntax error in HELLO option '{}'",
                errors::printable(&args[i])
            )));
        }
    }
    if let Some((user, pass)) = auth {
        authenticate(ctx, Some(user), pass)?;
    }
    if !ctx.client.authed {
        return Err(Reply::error(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time",
        ));
    }
    if let Some(name) = setname {
        validate_client_name(name)?;
        *ctx.client.info.name.lock() = (!name.is_empty()).then(|| name.clone());
    }
    ctx.client.set_proto(proto);
    Ok(Reply::Map(vec![
        (Reply::bulk_str("server"), Reply::bulk_str("redis")),
        (Reply::bulk_str("version"), Reply::bulk_str(REDIS_VERSION)),
        (Reply::bulk_str("proto"), Reply::Integer(proto as i64)),
        (
            Reply::bulk_str("id"),
            Reply::Integer(ctx.client.id() as i64),
        ),
        (
            Reply::bulk_str("mode"),
            Reply::bulk_str(if ctx.shared.cluster.enabled() {
                "cluster"
            } else {
                "standalone"
            }),
        ),
        (Reply::bulk_str("role"), Reply::bulk_str("master")),
        (Reply::bulk_str("modules"), Reply::Array(vec![])),
    ]))
}

pub fn select(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let db = parse_i64(&args[1]).ok_or_else(errors::not_integer)?;
    if db != 0 && ctx.shared.cluster.enabled() {
        return Err(Reply::error("ERR SELECT is not allowed in cluster mode"));
    }
    if db < 0 || db as usize >= ctx.shared.keyspace.len() {
        return Err(Reply::error(errors::DB_INDEX));
    }
    ctx.client.select(db as usize);
    Ok(Reply::Ok)
}

pub fn quit(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    ctx.client.close_after_reply = true;
    Ok(Reply::Ok)
}

/// RESET: back to a fresh connection's state (db 0, RESP2, no name, unsubscribed).
pub fn reset(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    ctx.client.select(0);
    ctx.client.set_proto(2);
    *ctx.client.info.name.lock() = None;
    let default = ctx.shared.acl.default_user();
    ctx.client.authed = default.auto_auth();
    ctx.client.set_user(default, &ctx.shared.acl);
    crate::commands::families::pubsub::unsubscribe_all(ctx);
    crate::commands::exec::multi::reset(ctx);
    super::tracking::disable(ctx.shared, ctx.client);
    Ok(Reply::status("RESET"))
}

fn validate_client_name(name: &[u8]) -> Result<(), Reply> {
    if name.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
        return Err(Reply::error(
            "ERR Client names cannot contain spaces, newlines or special characters.",
        ));
    }
    Ok(())
}

/// CLIENT subcommand ...
pub fn client(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    let arity_err = || errors::wrong_arity(&format!("client|{sub}"));
    match sub.as_str() {
        "id" if args.len() == 2 => Ok(Reply::Integer(ctx.client.id() as i64)),
        "setname" if args.len() == 3 => {
            validate_client_name(&args[2])?;
            *ctx.client.info.name.lock() = (!args[2].is_empty()).then(|| args[2].clone());
            Ok(Reply::Ok)
        }
        "getname" if args.len() == 2 => Ok(ctx
            .client
            .info
            .name
            .lock()
            .clone()
            .map_or(Reply::Null, Reply::Bulk)),
        "setinfo" if args.len() == 4 => {
            let value = &args[3];
            if value.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
                return Err(Reply::error(format!(
                    "ERR {} cannot contain spaces, newlines or special characters.",
                    String::from_utf8_lossy(&args[2]).to_ascii_lowercase()
                )));
            }
            let slot = if eq_ignore_case(&args[2], "lib-name") {
                &ctx.client.info.lib_name
            } else if eq_ignore_case(&args[2], "lib-ver") {
                &ctx.client.info.lib_ver
            } else {
                return Err(Reply::error(format!(
                    "ERR Unrecognized option '{}'",
                    errors::printable(&args[2])
                )));
            };
            *slot.lock() = (!value.is_empty()).then(|| value.clone());
            Ok(Reply::Ok)
        }
        "info" if args.len() == 2 => Ok(Reply::Verbatim(
            "txt",
            Bytes::from(ctx.client.info.list_line(ctx.shared.clock.now_ms()) + "\n"),
        )),
        "list" => {
            let mut ids: Option<Vec<u64>> = None;
            let mut i = 2;
            while i < args.len() {
                if eq_ignore_case(&args[i], "type") && i + 1 < args.len() {
                    let t = &args[i + 1];
                    if !["normal", "master", "replica", "pubsub"]
                        .iter()
                        .any(|w| eq_ignore_case(t, w))
                    {
                        return Err(Reply::error(format!(
                            "ERR Unknown client type '{}'",
                            errors::printable(t)
                        )));
                    }
                    i += 2;
                } else if eq_ignore_case(&args[i], "id") && i + 1 < args.len() {
                    let mut list = Vec::new();
                    for a in &args[i + 1..] {
                        match parse_i64(a) {
                            Some(n) if n > 0 => list.push(n as u64),
                            _ => return Err(Reply::error("ERR Invalid client ID")),
                        }
                    }
                    ids = Some(list);
                    i = args.len();
                } else {
                    return Err(errors::syntax());
                }
            }
            let mut clients: Vec<_> = ctx
                .shared
                .clients
                .iter()
                .map(|c| c.value().clone())
                .filter(|c| ids.as_ref().is_none_or(|ids| ids.contains(&c.id)))
                .collect();
            clients.sort_by_key(|c| c.id);
            let text: String = clients
                .iter()
                .map(|c| c.list_line(ctx.shared.clock.now_ms()) + "\n")
                .collect();
            Ok(Reply::Verbatim("txt", Bytes::from(text)))
        }
        "unblock" if args.len() == 3 || args.len() == 4 => {
            let with_error = match args.get(3) {
                None => false,
                Some(a) if eq_ignore_case(a, "timeout") => false,
                Some(a) if eq_ignore_case(a, "error") => true,
                Some(_) => {
                    return Err(Reply::error(
                        "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR",
                    ))
                }
            };
            let id = parse_i64(&args[2]).ok_or_else(errors::not_integer)?;
            let target = u64::try_from(id)
                .ok()
                .and_then(|id| ctx.shared.clients.get(&id).map(|c| c.value().clone()));
            let unblocked = target.is_some_and(|c| c.unblock(with_error));
            Ok(Reply::Integer(unblocked as i64))
        }
        "kill" if args.len() >= 3 => {
            // CLIENT KILL ID n (the modern form); the old addr form is accepted too.
            let target: Vec<_> = if args.len() == 4 && eq_ignore_case(&args[2], "id") {
                let id = parse_i64(&args[3])
                    .ok_or_else(|| Reply::error("ERR client-id should be greater than 0"))?;
                ctx.shared
                    .clients
                    .get(&(id as u64))
                    .map(|c| c.value().clone())
                    .into_iter()
                    .collect()
            } else if args.len() == 3 {
                let addr = String::from_utf8_lossy(&args[2]).to_string();
                let found: Vec<_> = ctx
                    .shared
                    .clients
                    .iter()
                    .filter(|c| c.addr.to_string() == addr)
                    .map(|c| c.value().clone())
                    .collect();
                if found.is_empty() {
                    return Err(Reply::error("ERR No such client"));
                }
                found.iter().for_each(|c| c.kill());
                return Ok(Reply::Ok);
            } else {
                return Err(errors::syntax());
            };
            target.iter().for_each(|c| c.kill());
            Ok(Reply::Integer(target.len() as i64))
        }
        "no-evict" | "no-touch" if args.len() == 3 => {
            if eq_ignore_case(&args[2], "on") || eq_ignore_case(&args[2], "off") {
                Ok(Reply::Ok)
            } else {
                Err(errors::syntax())
            }
        }
        "tracking" if args.len() >= 3 => super::tracking::tracking(ctx, args),
        "caching" if args.len() == 3 => super::tracking::caching(ctx, args),
        "trackinginfo" if args.len() == 2 => super::tracking::trackinginfo(ctx),
        "getredir" if args.len() == 2 => super::tracking::getredir(ctx),
        "help" => Ok(Reply::Array(
            [
                "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "ID",
                "    Return the ID of the current connection.",
                "GETNAME",
                "    Return the name of the current connection.",
                "SETNAME <name>",
                "    Assign the name <name> to the current connection.",
                "SETINFO <option> <value>",
                "    Set client meta attr (LIB-NAME, LIB-VER).",
                "INFO",
                "    Return information about the current client connection.",
                "LIST [TYPE <type>] [ID <id> [<id> ...]]",
                "    Return information about client connections.",
                "KILL ID <id>",
                "    Kill the connection with the given id.",
                "UNBLOCK <clientid> [TIMEOUT|ERROR]",
                "    Unblock the specified blocked client.",
                "NO-EVICT (ON|OFF)",
                "    Accepted; redlockd never evicts.",
                "NO-TOUCH (ON|OFF)",
                "    Accepted; redlockd keeps no LRU.",
                "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
                "         [OPTIN] [OPTOUT] [NOLOOP]",
                "    Control server assisted client side caching.",
                "TRACKINGINFO",
                "    Report tracking status for the current connection.",
                "CACHING (YES|NO)",
                "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
                "GETREDIR",
                "    Return the client ID we are redirecting to when client tracking is enabled.",
            ]
            .iter()
            .map(|s| Reply::status(s))
            .collect(),
        )),
        "id" | "setname" | "getname" | "setinfo" | "info" | "kill" | "no-evict" | "no-touch"
        | "unblock" | "tracking" | "caching" | "trackinginfo" | "getredir" => Err(arity_err()),
        _ => Err(errors::unknown_subcommand("client", &args[1])),
    }
}
