//! FUNCTION (LOAD, LIST, DELETE, FLUSH, DUMP, RESTORE, STATS, KILL, HELP), FCALL and
//! FCALL_RO. The libraries and the run live in `crate::scripting::functions`; these
//! handlers parse arguments and shape Redis's replies.

use crate::commands::{eq_ignore_case, CmdResult, Ctx};
use crate::protocol::{errors, Reply};
use crate::scripting::functions::{one_line, Library, RestorePolicy};
use crate::scripting::{flag_names, function_dump};
use bytes::Bytes;

pub fn fcall(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    fcall_generic(ctx, args, false)
}

pub fn fcall_ro(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    fcall_generic(ctx, args, true)
}

fn fcall_generic(ctx: &mut Ctx, args: &[Bytes], ro: bool) -> CmdResult {
    let shared = ctx.shared;
    let own = ctx.client.info.last_touched();
    let reply = shared.scripts.fcall(ctx, args, ro);
    // Commands run by the function marked themselves as the client's last command.
    ctx.client.info.retouch(own, ctx.now_ms);
    result(reply)
}

fn result(reply: Reply) -> CmdResult {
    if reply.is_error() {
        Err(reply)
    } else {
        Ok(reply)
    }
}

/// FUNCTION's subcommands and their arities (Redis's, counting FUNCTION itself).
const SUBCOMMANDS: &[(&str, i32)] = &[
    ("load", -3),
    ("list", -2),
    ("delete", 3),
    ("flush", -2),
    ("dump", 2),
    ("restore", -3),
    ("stats", 2),
    ("kill", 2),
    ("help", 2),
];

pub fn function(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let sub = &args[1];
    let Some((name, arity)) = SUBCOMMANDS
        .iter()
        .find(|(name, _)| eq_ignore_case(sub, name))
    else {
        return Err(errors::unknown_subcommand("function", sub));
    };
    let n = args.len() as i32;
    if (*arity >= 0 && n != *arity) || (*arity < 0 && n < -arity) {
        return Err(errors::wrong_arity(&format!("function|{name}")));
    }
    let scripts = &ctx.shared.scripts;
    match *name {
        "load" => load(ctx, args),
        "list" => list(ctx, args),
        "delete" => {
            let lib = String::from_utf8_lossy(&args[2]).into_owned();
            let removed = scripts.with_libraries(|libs| libs.remove(&lib).is_some());
            if removed {
                Ok(Reply::Ok)
            } else {
                Err(Reply::error("ERR Library not found"))
            }
        }
        "flush" => {
            if args.len() > 3 {
                return Err(syntax(args));
            }
            if args.len() == 3
                && !eq_ignore_case(&args[2], "sync")
                && !eq_ignore_case(&args[2], "async")
            {
                return Err(Reply::error(
                    "ERR FUNCTION FLUSH only supports SYNC|ASYNC option",
                ));
            }
            scripts.flush_functions();
            Ok(Reply::Ok)
        }
        "dump" => {
            let codes: Vec<Bytes> =
                scripts.with_libraries(|libs| libs.values().map(|l| l.code.clone()).collect());
            Ok(Reply::Bulk(function_dump::dump(&codes).into()))
        }
        "restore" => restore(ctx, args),
        "stats" => Ok(stats(ctx)),
        "kill" => result(scripts.kill(true)),
        _ => Ok(Reply::Array(
            HELP.iter().map(|l| Reply::status(l)).collect(),
        )),
    }
}

/// Redis's reply for a bad subcommand argument count that its own parser finds.
fn syntax(args: &[Bytes]) -> Reply {
    Reply::error(one_line(&format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try FUNCTION HELP.",
        String::from_utf8_lossy(&args[1])
    )))
}

/// FUNCTION LOAD [REPLACE] code.
fn load(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let mut replace = false;
    let mut at = 2;
    while at < args.len() - 1 {
        if eq_ignore_case(&args[at], "replace") {
            replace = true;
            at += 1;
            continue;
        }
        return Err(Reply::error(one_line(&format!(
            "ERR Unknown option given: {}",
            String::from_utf8_lossy(&args[at])
        ))));
    }
    result(ctx.shared.scripts.function_load(&args[at], replace))
}

/// FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE].
fn list(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let mut with_code = false;
    let mut pattern: Option<Vec<u8>> = None;
    let mut i = 2;
    while i < args.len() {
        if !with_code && eq_ignore_case(&args[i], "withcode") {
            with_code = true;
        } else if pattern.is_none() && eq_ignore_case(&args[i], "libraryname") {
            if i >= args.len() - 1 {
                return Err(Reply::error("ERR library name argument was not given"));
            }
            i += 1;
            pattern = Some(args[i].to_ascii_lowercase());
        } else {
            return Err(Reply::error(one_line(&format!(
                "ERR Unknown argument {}",
                String::from_utf8_lossy(&args[i])
            ))));
        }
        i += 1;
    }
    let reply = ctx.shared.scripts.with_libraries(|libs| {
        libs.values()
            .filter(|l| {
                // Redis matches the pattern ignoring case.
                pattern
                    .as_deref()
                    .is_none_or(|p| crate::glob::matches(p, l.name.to_ascii_lowercase().as_bytes()))
            })
            .map(|l| library_entry(l, with_code))
            .collect()
    });
    Ok(Reply::Array(reply))
}

fn library_entry(l: &Library, with_code: bool) -> Reply {
    let functions = l
        .functions
        .values()
        .map(|f| {
            Reply::Map(vec![
                (Reply::bulk_str("name"), Reply::bulk(f.name.clone())),
                (
                    Reply::bulk_str("description"),
                    f.description.clone().map_or(Reply::Null, Reply::Bulk),
                ),
                (
                    Reply::bulk_str("flags"),
                    Reply::Set(flag_names(f.flags).into_iter().map(Reply::status).collect()),
                ),
            ])
        })
        .collect();
    let mut entry = vec![
        (Reply::bulk_str("library_name"), Reply::bulk(l.name.clone())),
        (Reply::bulk_str("engine"), Reply::bulk_str("LUA")),
        (Reply::bulk_str("functions"), Reply::Array(functions)),
    ];
    if with_code {
        entry.push((Reply::bulk_str("library_code"), Reply::Bulk(l.code.clone())));
    }
    Reply::Map(entry)
}

/// FUNCTION RESTORE payload [FLUSH|APPEND|REPLACE].
fn restore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    if args.len() > 4 {
        return Err(syntax(args));
    }
    let policy =
        match args.get(3) {
            None => RestorePolicy::Append,
            Some(p) if eq_ignore_case(p, "append") => RestorePolicy::Append,
            Some(p) if eq_ignore_case(p, "replace") => RestorePolicy::Replace,
            Some(p) if eq_ignore_case(p, "flush") => RestorePolicy::Flush,
            Some(_) => return Err(Reply::error(
                "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
            )),
        };
    let codes = function_dump::parse(&args[2]).map_err(Reply::error)?;
    result(ctx.shared.scripts.function_restore(&codes, policy))
}

/// FUNCTION STATS: the running function (if any) and the library counts. Answers while
/// a function runs (it is how one finds out what to kill); while an EVAL script runs
/// it is BUSY, as in Redis.
fn stats(ctx: &mut Ctx) -> Reply {
    let scripts = &ctx.shared.scripts;
    let running = match scripts.running_function(ctx.now_ms) {
        Err(()) => return Reply::error(errors::BUSY),
        Ok(None) => Reply::Null,
        Ok(Some((name, command, duration_ms))) => Reply::Map(vec![
            (Reply::bulk_str("name"), Reply::bulk(name)),
            (
                Reply::bulk_str("command"),
                Reply::Array(command.into_iter().map(Reply::Bulk).collect()),
            ),
            (
                Reply::bulk_str("duration_ms"),
                Reply::Integer(duration_ms as i64),
            ),
        ]),
    };
    let (libraries, functions) = scripts.function_counts();
    Reply::Map(vec![
        (Reply::bulk_str("running_script"), running),
        (
            Reply::bulk_str("engines"),
            Reply::Map(vec![(
                Reply::bulk_str("LUA"),
                Reply::Map(vec![
                    (
                        Reply::bulk_str("libraries_count"),
                        Reply::Integer(libraries as i64),
                    ),
                    (
                        Reply::bulk_str("functions_count"),
                        Reply::Integer(functions as i64),
                    ),
                ]),
            )]),
        ),
    ])
}

const HELP: &[&str] = &[
    "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "LOAD [REPLACE] <FUNCTION CODE>",
    "    Create a new library with the given library name and code.",
    "DELETE <LIBRARY NAME>",
    "    Delete the given library.",
    "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
    "    Return general information on all the libraries:",
    "    * Library name",
    "    * The engine used to run the Library",
    "    * Library description",
    "    * Functions list",
    "    * Library code (if WITHCODE is given)",
    "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
    "STATS",
    "    Return information about the current function running:",
    "    * Function name",
    "    * Command used to run the function",
    "    * Duration in MS that the function is running",
    "    If no function is running, return nil",
    "    In addition, returns a list of available engines.",
    "KILL",
    "    Kill the current running function.",
    "FLUSH [ASYNC|SYNC]",
    "    Delete all the libraries.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the libraries.",
    "    * SYNC: Synchronously flush the libraries.",
    "DUMP",
    "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
    "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
    "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
    "    control how to handle existing libraries (default APPEND):",
    "    * FLUSH: delete all existing libraries.",
    "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
    "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
    "      libraries with the new libraries (notice that even on this option there is a chance of failure",
    "      in case of functions name collision with another library).",
    "HELP",
    "    Prints this help.",
];
