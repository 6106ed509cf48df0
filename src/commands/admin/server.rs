//! Server commands: DBSIZE, FLUSHDB, FLUSHALL, TIME, COMMAND, SHUTDOWN (INFO and
//! CONFIG have files of their own).

use crate::commands::command_table::{flags, key_specs, Subcommand, COMMANDS};
use crate::commands::{eq_ignore_case, CmdResult, Ctx, Spec};
use crate::protocol::{errors, Reply};
use bytes::Bytes;
use std::sync::atomic::Ordering;

pub fn dbsize(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    Ok(Reply::Integer(ctx.db().len() as i64))
}

fn check_flush_args(args: &[Bytes]) -> Result<(), Reply> {
    match args.len() {
        1 => Ok(()),
        2 if eq_ignore_case(&args[1], "sync") || eq_ignore_case(&args[1], "async") => Ok(()),
        _ => Err(errors::syntax()),
    }
}

pub fn flushdb(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    check_flush_args(args)?;
    ctx.db().clear();
    Ok(Reply::Ok)
}

pub fn flushall(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    check_flush_args(args)?;
    ctx.shared.keyspace.flush_all();
    Ok(Reply::Ok)
}

/// TIME: wall-clock seconds and microseconds (the manual clock's wall time in tests).
pub fn time(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    let us = ctx.shared.clock.wall_us();
    Ok(Reply::Array(vec![
        Reply::Bulk(Bytes::from(us.div_euclid(1_000_000).to_string())),
        Reply::Bulk(Bytes::from(us.rem_euclid(1_000_000).to_string())),
    ]))
}

/// SHUTDOWN [NOSAVE | SAVE] [NOW] [FORCE] | SHUTDOWN ABORT: stops this node alone, as
/// Redis 7.0 stops its one server. On success nothing is replied: the connection
/// closes, as redis-server's does when it exits (redis-cli then prints nothing). The
/// node's clean-shutdown snapshot (`server::accept_loop`'s end) is written unless
/// NOSAVE; SAVE asks for it, which is the default here. NOW and FORCE change nothing:
/// there are no replicas to wait for, and a failed snapshot never stops the shutdown
/// (the next boot raises the restart fence instead). Other nodes of the process keep
/// serving.
pub fn shutdown(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (mut nosave, mut save, mut abort, mut other) = (false, false, false, false);
    for a in &args[1..] {
        if eq_ignore_case(a, "nosave") {
            nosave = true;
        } else if eq_ignore_case(a, "save") {
            save = true;
        } else if eq_ignore_case(a, "now") || eq_ignore_case(a, "force") {
            other = true;
        } else if eq_ignore_case(a, "abort") {
            abort = true;
        } else {
            return Err(errors::syntax());
        }
    }
    if (abort && (nosave || save || other)) || (nosave && save) {
        return Err(errors::syntax());
    }
    if abort {
        // A shutdown here never waits (no replicas to catch up), so none is pending.
        return Err(Reply::error("ERR No shutdown in progress."));
    }
    // A script past its time limit: only SHUTDOWN NOSAVE stops the node, as in Redis
    // (a snapshot taken under a running script would record half of it).
    if !nosave && ctx.shared.scripts.is_busy(ctx.now_ms) {
        return Err(ctx.shared.scripts.busy_reply());
    }
    // NOSAVE: no snapshot, so the next boot raises the restart fence.
    ctx.shared.save_on_shutdown.store(!nosave, Ordering::SeqCst);
    tracing::info!("SHUTDOWN requested by client {}", ctx.client.id());
    ctx.shared.request_shutdown();
    ctx.client.close_after_reply = true;
    // No frame at all: the client sees the connection close.
    Ok(Reply::Multi(Vec::new()))
}

/// COMMAND INFO's 10-element entry for a command: name, arity, flags, first key,
/// last key, step, ACL categories, tips, key specs, subcommands.
fn command_entry(spec: &Spec) -> Reply {
    // A container command (CONFIG, OBJECT...) has no flags of its own, as in Redis 7:
    // its subcommands do.
    entry(
        spec.name,
        spec.arity,
        spec.flag_names(),
        (spec.first_key, spec.last_key, spec.step),
        spec.cats,
        spec.key_specs,
        Reply::Array(spec.subcommands.iter().map(subcommand_entry).collect()),
    )
}

/// A subcommand's entry in its container's (the same ten fields), with its own flags.
fn subcommand_entry(sub: &Subcommand) -> Reply {
    entry(
        sub.fullname,
        sub.arity,
        sub.flag_names(),
        (sub.first_key, sub.last_key, sub.step),
        sub.cats,
        sub.key_specs,
        Reply::Array(vec![]),
    )
}

fn entry(
    name: &str,
    arity: i32,
    flags: Vec<&'static str>,
    (first, last, step): (i32, i32, i32),
    cats: u32,
    key_specs: &[key_specs::KeySpec],
    subcommands: Reply,
) -> Reply {
    Reply::Array(vec![
        Reply::bulk_str(name),
        Reply::Integer(arity as i64),
        Reply::Set(
            flags
                .into_iter()
                .map(|f| Reply::Status(Bytes::from_static(f.as_bytes())))
                .collect(),
        ),
        Reply::Integer(first as i64),
        Reply::Integer(last as i64),
        Reply::Integer(step as i64),
        Reply::Set(
            crate::commands::command_table::cats::names(cats)
                .map(|c| Reply::Status(Bytes::from(format!("@{c}"))))
                .collect(),
        ),
        Reply::Set(vec![]),
        key_specs::reply(key_specs),
        subcommands,
    ])
}

/// COMMAND [COUNT | INFO name... | DOCS [name...] | LIST]
pub fn command(_ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let Some(sub) = args.get(1) else {
        return Ok(Reply::Array(COMMANDS.iter().map(command_entry).collect()));
    };
    let sub_lower = String::from_utf8_lossy(sub).to_ascii_lowercase();
    match sub_lower.as_str() {
        "count" if args.len() == 2 => Ok(Reply::Integer(COMMANDS.len() as i64)),
        "list" => Ok(Reply::Array(
            COMMANDS.iter().map(|s| Reply::bulk_str(s.name)).collect(),
        )),
        "info" => {
            if args.len() == 2 {
                return Ok(Reply::Array(COMMANDS.iter().map(command_entry).collect()));
            }
            Ok(Reply::Array(
                args[2..]
                    .iter()
                    .map(|n| crate::commands::lookup(n).map_or(Reply::NullArray, command_entry))
                    .collect(),
            ))
        }
        "docs" => {
            let specs: Vec<&Spec> = if args.len() == 2 {
                COMMANDS.iter().collect()
            } else {
                args[2..]
                    .iter()
                    .filter_map(|n| crate::commands::lookup(n))
                    .collect()
            };
            Ok(Reply::Map(
                specs
                    .into_iter()
                    .map(|s| {
                        (
                            Reply::bulk_str(s.name),
                            Reply::Map(vec![
                                (
                                    Reply::bulk_str("summary"),
                                    Reply::bulk_str(&format!(
                                        "The {} command.",
                                        s.name.to_ascii_uppercase()
                                    )),
                                ),
                                (Reply::bulk_str("since"), Reply::bulk_str("1.0.0")),
                                (Reply::bulk_str("group"), Reply::bulk_str("generic")),
                            ]),
                        )
                    })
                    .collect(),
            ))
        }
        "getkeys" if args.len() >= 4 => {
            let cmd = &args[2..];
            let invalid = || Reply::error("ERR Invalid command specified");
            let spec = crate::commands::lookup(&cmd[0]).ok_or_else(invalid)?;
            // A container's subcommand is the command (Redis's lookupCommand): it must
            // be one, and its arity is checked.
            let arity = if spec.subcommands.is_empty() {
                spec.arity
            } else {
                spec.subcommand(cmd).ok_or_else(invalid)?.arity
            };
            if !crate::commands::arity_ok(arity, cmd.len()) {
                return Err(Reply::error(
                    "ERR Invalid number of arguments specified for command",
                ));
            }
            let keys: Vec<Reply> = spec.keys(cmd).map(|k| Reply::Bulk(k.clone())).collect();
            if !keys.is_empty() || spec.flags & flags::NO_MANDATORY_KEYS != 0 {
                return Ok(Reply::Array(keys));
            }
            // No keys from a numkeys command: its numkeys is refused (ZUNION 0 a); GET
            // can have none only by arity.
            if spec.flags & (flags::NUMKEYS_AT_1 | flags::NUMKEYS_AT_2) != 0 {
                return Err(Reply::error("ERR Invalid arguments specified for command"));
            }
            Err(Reply::error("ERR The command has no key arguments"))
        }
        "count" => Err(errors::wrong_arity("command|count")),
        "getkeys" => Err(errors::wrong_arity("command|getkeys")),
        _ => Err(errors::unknown_subcommand("command", sub)),
    }
}
