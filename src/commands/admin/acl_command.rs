//! ACL: the command (WHOAMI, LIST, USERS, CAT, SETUSER, DELUSER, GETUSER, LOG, DRYRUN,
//! LOAD, SAVE). The users, their rules and the check every command passes are
//! `crate::acl` (the check: `acl/check.rs`, counted and logged by
//! `commands::check_acl`).

use crate::acl::{self, User};
use crate::commands::command_table::{cats, COMMANDS, SUBCOMMANDS};
use crate::commands::{eq_ignore_case, CmdResult, Ctx};
use crate::protocol::{errors, Reply};
use bytes::Bytes;

/// ACL subcommand ...
pub fn acl(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    let n = args.len();
    let arity = || errors::wrong_arity(&format!("acl|{sub}"));
    let a = &ctx.shared.acl;
    match sub.as_str() {
        "whoami" if n == 2 => Ok(Reply::Bulk(ctx.client.user.name.clone())),
        "users" if n == 2 => Ok(Reply::Array(
            a.users()
                .iter()
                .map(|u| Reply::Bulk(u.name.clone()))
                .collect(),
        )),
        "list" if n == 2 => Ok(Reply::Array(
            a.users()
                .iter()
                .map(|u| Reply::Bulk(Bytes::from(u.describe())))
                .collect(),
        )),
        "cat" if n <= 3 => Ok(Reply::Array(match args.get(2) {
            None => cats::NAMES.iter().map(|c| Reply::bulk_str(c)).collect(),
            Some(name) => {
                let bit = cats::by_name(name).ok_or_else(|| {
                    Reply::error(format!(
                        "ERR Unknown category '{}'",
                        errors::printable(name)
                    ))
                })?;
                let commands = COMMANDS
                    .iter()
                    .filter(|c| c.cats & bit != 0)
                    .map(|c| c.name);
                let subs = SUBCOMMANDS
                    .iter()
                    .filter(|s| s.cats & bit != 0)
                    .map(|s| s.fullname);
                commands.chain(subs).map(Reply::bulk_str).collect()
            }
        })),
        "setuser" if n >= 3 => {
            acl::valid_username(&args[2]).map_err(Reply::error)?;
            a.set_user(&args[2], &args[3..]).map_err(|(rule, e)| {
                Reply::error(format!(
                    "ERR Error in ACL SETUSER modifier '{}': {}",
                    errors::printable(&rule),
                    e.0
                ))
            })?;
            disconnect_revoked(ctx, Some(&args[2]));
            Ok(Reply::Ok)
        }
        "deluser" if n >= 3 => {
            if args[2..].iter().any(|u| &u[..] == b"default") {
                return Err(Reply::error("ERR The 'default' user cannot be removed"));
            }
            let deleted = a.delete(&args[2..]);
            disconnect_revoked(ctx, None);
            Ok(Reply::Integer(deleted as i64))
        }
        "getuser" if n == 3 => Ok(a.get(&args[2]).map_or(Reply::Null, |u| getuser(&u))),
        "log" if n <= 3 => log(ctx, args.get(2)),
        "dryrun" if n >= 4 => dryrun(ctx, args),
        "load" if n == 2 => load(ctx),
        "save" if n == 2 => save(ctx),
        "help" if n == 2 => Ok(Reply::Array(
            HELP.iter().map(|s| Reply::status(s)).collect(),
        )),
        "whoami" | "users" | "list" | "setuser" | "deluser" | "getuser" | "dryrun" | "load"
        | "save" | "help" => Err(arity()),
        "cat" | "log" => Err(Reply::error(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try ACL HELP.",
            errors::printable(&args[1])
        ))),
        _ => Err(errors::unknown_subcommand("acl", &args[1])),
    }
}

const HELP: &[&str] = &[
    "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CAT [<category>]",
    "    List all commands that belong to <category>, or all command categories",
    "    when no category is specified.",
    "DELUSER <username> [<username> ...]",
    "    Delete a list of users.",
    "DRYRUN <username> <command> [<arg> ...]",
    "    Returns whether the user can execute the given command without executing the command.",
    "GETUSER <username>",
    "    Get the user's details.",
    "LIST",
    "    Show users details in config file format.",
    "LOAD",
    "    Reload users from the ACL file.",
    "LOG [<count> | RESET]",
    "    Show the ACL log entries.",
    "SAVE",
    "    Save the current config to the ACL file.",
    "SETUSER <username> <attribute> [<attribute> ...]",
    "    Create or modify a user with the specified attributes.",
    "USERS",
    "    List all the registered usernames.",
    "WHOAMI",
    "    Return the current connection username.",
    "HELP",
    "    Print this help.",
];

fn getuser(u: &User) -> Reply {
    let field = |name: &str, value: Reply| (Reply::bulk_str(name), value);
    Reply::Map(vec![
        field(
            "flags",
            Reply::Set(u.flag_names().into_iter().map(Reply::bulk_str).collect()),
        ),
        field(
            "passwords",
            Reply::Array(
                u.password_hashes()
                    .iter()
                    .map(|h| Reply::bulk_str(h))
                    .collect(),
            ),
        ),
        field("commands", Reply::bulk_str(&u.command_rules())),
        field("keys", Reply::Bulk(Bytes::from(u.key_rules()))),
        field("channels", Reply::Bulk(Bytes::from(u.channel_rules()))),
        field("selectors", Reply::Array(vec![])),
    ])
}

/// ACL LOG [count | RESET]
fn log(ctx: &mut Ctx, arg: Option<&Bytes>) -> CmdResult {
    let mut count = 10;
    if let Some(arg) = arg {
        if eq_ignore_case(arg, "reset") {
            ctx.shared.acl.log.lock().reset();
            return Ok(Reply::Ok);
        }
        // A negative count lists nothing, as in Redis.
        count = crate::commands::parse_i64(arg)
            .ok_or_else(errors::not_integer)?
            .max(0) as usize;
    }
    let now = ctx.shared.clock.wall_ms().max(0) as u64;
    let log = ctx.shared.acl.log.lock();
    Ok(Reply::Array(
        log.newest(count)
            .map(|e| {
                let f = |name: &str, value: Reply| (Reply::bulk_str(name), value);
                Reply::Map(vec![
                    f("count", Reply::Integer(e.count as i64)),
                    f("reason", Reply::bulk_str(e.reason)),
                    f("context", Reply::bulk_str(e.context)),
                    f("object", Reply::Bulk(e.object.clone())),
                    f("username", Reply::Bulk(e.username.clone())),
                    f(
                        "age-seconds",
                        Reply::Double(now.saturating_sub(e.updated_ms) as f64 / 1000.0),
                    ),
                    f("client-info", Reply::bulk_str(&e.client_info)),
                    f("entry-id", Reply::Integer(e.entry_id as i64)),
                    f("timestamp-created", Reply::Integer(e.created_ms as i64)),
                    f(
                        "timestamp-last-updated",
                        Reply::Integer(e.updated_ms as i64),
                    ),
                ])
            })
            .collect(),
    ))
}

/// ACL DRYRUN user command [arg...]: whether the user could run it (nothing runs).
fn dryrun(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let user = ctx.shared.acl.get(&args[2]).ok_or_else(|| {
        Reply::error(format!(
            "ERR User '{}' not found",
            errors::printable(&args[2])
        ))
    })?;
    let cmd = &args[3..];
    let spec = crate::commands::lookup(&cmd[0]).ok_or_else(|| {
        Reply::error(format!(
            "ERR Command '{}' not found",
            errors::printable(&cmd[0])
        ))
    })?;
    if let Some(e) = crate::commands::check_arity(spec, cmd) {
        return Err(e);
    }
    Ok(match user.check(spec, cmd) {
        Ok(()) => Reply::Ok,
        Err(d) => Reply::bulk_str(&acl::check::message(&user, spec, cmd, d, true)),
    })
}

const NO_FILE: &str = "ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.";

/// ACL LOAD: the file's users replace every user (a default user the file does not
/// name starts as a fresh one: on, nopass, everything allowed). A bad file changes
/// nothing.
fn load(ctx: &mut Ctx) -> CmdResult {
    let path = ctx
        .shared
        .config
        .aclfile
        .as_ref()
        .ok_or_else(|| Reply::error(NO_FILE))?;
    let users = acl::read_file(path).map_err(|e| Reply::error(format!("ERR {e}")))?;
    ctx.shared.acl.replace(users);
    disconnect_revoked(ctx, None);
    Ok(Reply::Ok)
}

/// Disconnects the clients that lost a right they hold on to, as Redis does: those
/// whose user is gone (ACL DELUSER, ACL LOAD), and subscribers to a channel or pattern
/// their user may no longer use (ACL SETUSER of `changed`, ACL LOAD: every user). Their
/// subscriptions end at once, so the next PUBLISH does not count them; the caller's own
/// connection closes after this reply.
///
/// ACL LOAD does as Redis 7.2's (whose version redlockd reports): Redis 7.0's
/// disconnected every client of every user but the default one, rights lost or not.
fn disconnect_revoked(ctx: &mut Ctx, changed: Option<&[u8]>) {
    let me = ctx.client.id();
    let subscriptions = ctx.shared.pubsub.by_client();
    for c in ctx.shared.clients.iter() {
        let name = c.user.lock().clone();
        if changed.is_some_and(|n| n != &name[..]) {
            continue;
        }
        let lost = match ctx.shared.acl.get(&name) {
            None => true,
            Some(user) => subscriptions.get(&c.id).is_some_and(|subs| {
                subs.channels
                    .iter()
                    .any(|ch| !user.channel_allowed(ch, false))
                    || subs.patterns.iter().any(|p| !user.channel_allowed(p, true))
            }),
        };
        if !lost {
            continue;
        }
        ctx.shared.pubsub.drop_client(c.id);
        if c.id == me {
            ctx.client.close_after_reply = true;
        } else {
            c.kill();
        }
    }
}

/// ACL SAVE: every user, as ACL LIST shows them, written to the file atomically
/// (`durability::atomic_write`, keeping the file's mode, 0600 for a new one: it holds
/// password hashes): a crash leaves the old file or the new one, never a part.
fn save(ctx: &mut Ctx) -> CmdResult {
    let path = ctx
        .shared
        .config
        .aclfile
        .as_ref()
        .ok_or_else(|| Reply::error(NO_FILE))?;
    let mut text = Vec::new();
    for u in ctx.shared.acl.users() {
        text.extend_from_slice(&u.describe());
        text.push(b'\n');
    }
    crate::durability::atomic_write(path, &text).map_err(|e| {
        tracing::warn!(path = %path.display(), "ACL SAVE failed: {e}");
        Reply::error("ERR There was an error trying to save the ACLs. Please check the server logs for more information")
    })?;
    Ok(Reply::Ok)
}
