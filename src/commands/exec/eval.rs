//! EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT. The engine lives in `crate::scripting`;
//! these handlers parse arguments and report Redis's errors.

use crate::commands::{eq_ignore_case, int_arg, CmdResult, Ctx};
use crate::protocol::{errors, Reply};
use crate::scripting::{Call, Source};
use bytes::Bytes;

pub fn eval(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    eval_generic(ctx, args, false, false)
}

pub fn evalsha(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    eval_generic(ctx, args, true, false)
}

pub fn eval_ro(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    eval_generic(ctx, args, false, true)
}

pub fn evalsha_ro(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    eval_generic(ctx, args, true, true)
}

/// Checks in Redis's order: a sha1 that is not 40 bytes is NOSCRIPT at once, then
/// numkeys, then the cache lookup.
fn eval_generic(ctx: &mut Ctx, args: &[Bytes], by_sha: bool, read_only: bool) -> CmdResult {
    if by_sha && args[1].len() != 40 {
        return Err(Reply::error(errors::NOSCRIPT));
    }
    let numkeys = int_arg(&args[2])?;
    if numkeys < 0 {
        return Err(Reply::error(errors::NEGATIVE_KEYS));
    }
    let rest = &args[3..];
    if numkeys as u64 > rest.len() as u64 {
        return Err(Reply::error(errors::TOO_MANY_KEYS));
    }
    let (keys, argv) = rest.split_at(numkeys as usize);
    let source = if by_sha {
        Source::Sha(&args[1])
    } else {
        Source::Body(&args[1])
    };
    let call = Call {
        keys,
        argv,
        read_only,
        globals: true,
        deny_oom: false,
    };
    let shared = ctx.shared;
    let own = ctx.client.info.last_touched();
    let reply = shared.scripts.run(ctx, source, call);
    // Commands run by the script marked themselves as the client's last command.
    ctx.client.info.retouch(own, ctx.now_ms);
    if reply.is_error() {
        Err(reply)
    } else {
        Ok(reply)
    }
}

const HELP: &[&str] = &[
    "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "EXISTS <sha1> [<sha1> ...]",
    "    Return information about the existence of the scripts in the script cache.",
    "FLUSH [ASYNC|SYNC]",
    "    Flush the Lua scripts cache. Very dangerous on replicas.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the scripts cache.",
    "    * SYNC: Synchronously flush the scripts cache.",
    "KILL",
    "    Kill the currently executing Lua script.",
    "LOAD <script>",
    "    Load a script into the scripts cache without executing it.",
    "HELP",
    "    Prints this help.",
];

pub fn script(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let sub = &args[1];
    let scripts = &ctx.shared.scripts;
    let arity = |ok: bool, name: &str| {
        if ok {
            Ok(())
        } else {
            Err(errors::wrong_arity(&format!("script|{name}")))
        }
    };
    if eq_ignore_case(sub, "load") {
        arity(args.len() == 3, "load")?;
        let reply = scripts.load(&args[2]);
        return if reply.is_error() {
            Err(reply)
        } else {
            Ok(reply)
        };
    }
    if eq_ignore_case(sub, "exists") {
        arity(args.len() >= 3, "exists")?;
        return Ok(Reply::Array(
            args[2..]
                .iter()
                .map(|sha| Reply::Integer(scripts.exists(sha) as i64))
                .collect(),
        ));
    }
    if eq_ignore_case(sub, "flush") {
        if args.len() > 3 || (args.len() == 3 && !is_flush_mode(&args[2])) {
            return Err(Reply::error(
                "ERR SCRIPT FLUSH only support SYNC|ASYNC option",
            ));
        }
        scripts.flush();
        return Ok(Reply::Ok);
    }
    if eq_ignore_case(sub, "kill") {
        arity(args.len() == 2, "kill")?;
        let reply = scripts.kill(false);
        return if reply.is_error() {
            Err(reply)
        } else {
            Ok(reply)
        };
    }
    if eq_ignore_case(sub, "help") && args.len() == 2 {
        return Ok(Reply::Array(
            HELP.iter().map(|l| Reply::status(l)).collect(),
        ));
    }
    Err(errors::unknown_subcommand("script", sub))
}

fn is_flush_mode(arg: &[u8]) -> bool {
    eq_ignore_case(arg, "sync") || eq_ignore_case(arg, "async")
}
