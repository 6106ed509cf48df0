//! The ACL check dispatch, EXEC's re-check and redis.call run before a command:
//! whether the user may run the call (`User::check`: the command or subcommand by its
//! ACL id, then its keys, then its channels), and a refusal as Redis logs it (ACL LOG's
//! reason, object and context) and words it where it happened. It reads only the
//! command descriptor; the caller (`commands::check_acl`) holds the client and the
//! counters a refusal is counted in.

use super::{Denied, User};
use crate::commands::command_table::Spec;
use crate::protocol::Reply;
use bytes::Bytes;

/// Where a refusal happened: ACL LOG's `context`, and the error's wording.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Context {
    /// A network command (`multi` when queued after MULTI, as Redis logs it).
    Toplevel,
    /// EXEC's re-check of a queued command.
    Exec,
    /// redis.call from a script or function.
    Script,
}

/// A refused call: what ACL LOG records and the reply the client reads (boxed where
/// it is returned: the allowed path's `Result` stays one word).
#[derive(Debug)]
pub struct Refusal {
    pub denied: Denied,
    /// ACL LOG's reason: `command`, `key` or `channel`.
    pub reason: &'static str,
    /// ACL LOG's object: the command's full name (`config|get`), or the key or the
    /// channel refused.
    pub object: Bytes,
    /// ACL LOG's context: `toplevel`, `multi` or `lua`.
    pub log_context: &'static str,
    /// The error reply, as Redis words it in this context.
    pub reply: Reply,
}

/// Checks `user`'s permission for `spec` with `args`, called in `context`
/// (`in_multi`: the client has a transaction open, so a refused network command is
/// logged as `multi`). A user allowed everything passes on one flag.
#[inline]
pub fn check(
    user: &User,
    spec: &Spec,
    args: &[Bytes],
    context: Context,
    in_multi: bool,
) -> Result<(), Box<Refusal>> {
    if user.unrestricted() {
        return Ok(());
    }
    user.check(spec, args)
        .map_err(|d| refusal(user, spec, args, d, context, in_multi))
}

#[cold]
fn refusal(
    user: &User,
    spec: &Spec,
    args: &[Bytes],
    denied: Denied,
    context: Context,
    in_multi: bool,
) -> Box<Refusal> {
    let (reason, object) = match denied {
        Denied::Command => ("command", Bytes::from(fullname(spec, args))),
        Denied::Key(i) => ("key", args[i].clone()),
        Denied::Channel(i) => ("channel", args[i].clone()),
    };
    let log_context = match context {
        Context::Toplevel if in_multi => "multi",
        Context::Toplevel => "toplevel",
        Context::Exec => "multi",
        Context::Script => "lua",
    };
    let reply = match context {
        Context::Toplevel => Reply::error(format!(
            "NOPERM {}",
            message(user, spec, args, denied, false)
        )),
        Context::Script => Reply::error(format!(
            "ERR ACL failure in script: {}",
            message(user, spec, args, denied, false)
        )),
        Context::Exec => Reply::error(format!(
            "NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: {}",
            match denied {
                Denied::Command => "no permission to execute the command or subcommand",
                Denied::Key(_) => "no permission to touch the specified keys",
                Denied::Channel(_) => "no permission to access one of the channels used as arguments",
            }
        )),
    };
    Box::new(Refusal {
        denied,
        reason,
        object,
        log_context,
        reply,
    })
}

/// `config|get` for a known subcommand, else the command's name.
pub fn fullname(spec: &Spec, args: &[Bytes]) -> &'static str {
    spec.subcommand(args).map_or(spec.name, |s| s.fullname)
}

/// Redis 7.2's getAclErrorMessage (verbose: ACL DRYRUN's form, naming the key).
pub fn message(user: &User, spec: &Spec, args: &[Bytes], d: Denied, verbose: bool) -> String {
    let name = String::from_utf8_lossy(&user.name);
    match d {
        Denied::Command => format!(
            "User {name} has no permissions to run the '{}' command",
            fullname(spec, args)
        ),
        Denied::Key(i) if verbose => format!(
            "User {name} has no permissions to access the '{}' key",
            String::from_utf8_lossy(&args[i])
        ),
        Denied::Key(_) => "No permissions to access a key".into(),
        Denied::Channel(i) if verbose => format!(
            "User {name} has no permissions to access the '{}' channel",
            String::from_utf8_lossy(&args[i])
        ),
        Denied::Channel(_) => "No permissions to access a channel".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::command_table::lookup;

    fn args(words: &[&str]) -> Vec<Bytes> {
        words.iter().map(|w| Bytes::from(w.to_string())).collect()
    }

    fn refused(user: &User, words: &[&str], context: Context, in_multi: bool) -> Box<Refusal> {
        let a = args(words);
        let spec = lookup(&a[0]).unwrap();
        check(user, spec, &a, context, in_multi).unwrap_err()
    }

    /// Each refusal's log fields and reply, in each context, as Redis 7.2 gives them.
    #[test]
    fn refusals_are_logged_and_worded_for_their_context() {
        let rules = ["on", "nopass", "+@all", "-config|get", "~k*", "&ch"];
        let user = crate::acl::user_from_rules(
            b"alice",
            rules.iter().map(|r| r.as_bytes()),
            User::new(b"alice"),
        )
        .unwrap();
        let r = refused(&user, &["CONFIG", "GET", "x"], Context::Toplevel, false);
        assert_eq!(r.denied, Denied::Command);
        assert_eq!((r.reason, &r.object[..]), ("command", &b"config|get"[..]));
        assert_eq!(r.log_context, "toplevel");
        assert_eq!(
            r.reply,
            Reply::error("NOPERM User alice has no permissions to run the 'config|get' command")
        );
        let r = refused(&user, &["GET", "other"], Context::Toplevel, true);
        assert_eq!((r.reason, &r.object[..]), ("key", &b"other"[..]));
        assert_eq!(r.log_context, "multi");
        assert_eq!(
            r.reply,
            Reply::error("NOPERM No permissions to access a key")
        );
        let r = refused(&user, &["PUBLISH", "news", "m"], Context::Script, false);
        assert_eq!(r.denied, Denied::Channel(1));
        assert_eq!(r.log_context, "lua");
        assert_eq!(
            r.reply,
            Reply::error("ERR ACL failure in script: No permissions to access a channel")
        );
        let r = refused(&user, &["SET", "x", "1"], Context::Exec, false);
        assert_eq!(r.log_context, "multi");
        assert_eq!(
            r.reply,
            Reply::error("NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: no permission to touch the specified keys")
        );
        let a = args(&["GET", "other"]);
        assert_eq!(
            message(&user, lookup(b"get").unwrap(), &a, Denied::Key(1), true),
            "User alice has no permissions to access the 'other' key"
        );
        let allowed = args(&["GET", "k1"]);
        assert!(check(
            &user,
            lookup(b"get").unwrap(),
            &allowed,
            Context::Toplevel,
            false
        )
        .is_ok());
    }
}
