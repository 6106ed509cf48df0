//! Redis's error strings, defined once. Every text starts with its error code.

use super::Reply;

pub const SYNTAX: &str = "ERR syntax error";
pub const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
pub const NOT_FLOAT: &str = "ERR value is not a valid float";
pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
pub const OVERFLOW: &str = "ERR increment or decrement would overflow";
pub const NO_SUCH_KEY: &str = "ERR no such key";
pub const NOAUTH: &str = "NOAUTH Authentication required.";
pub const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";
pub const DB_INDEX: &str = "ERR DB index is out of range";
/// Above --maxmemory, a command that may grow memory (Redis's shared oomerr).
pub const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";
pub const NOSCRIPT: &str = "NOSCRIPT No matching script. Please use EVAL.";
// -- scripting --
pub const NEGATIVE_KEYS: &str = "ERR Number of keys can't be negative";
pub const TOO_MANY_KEYS: &str = "ERR Number of keys can't be greater than number of args";
pub const BUSY: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
/// BUSY while a function (FCALL) runs: it is stopped with FUNCTION KILL.
pub const BUSY_FUNCTION: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";
pub const NOTBUSY: &str = "NOTBUSY No scripts in execution right now.";
pub const UNKILLABLE: &str = "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.";
/// A panic caught while a command or script ran (no Redis equivalent: Redis would crash).
pub const INTERNAL_PANIC: &str =
    "ERR internal error while running this command (logged); the server keeps running";
pub const INTERNAL_SCRIPT_PANIC: &str =
    "ERR internal error while running this script (logged); the Lua engine was reset";
// -- end scripting --

pub fn syntax() -> Reply {
    Reply::error(SYNTAX)
}

pub fn not_integer() -> Reply {
    Reply::error(NOT_INTEGER)
}

pub fn wrongtype() -> Reply {
    Reply::error(WRONGTYPE)
}

pub fn unknown_command(name: &[u8], args: &[bytes::Bytes]) -> Reply {
    let mut s = format!(
        "ERR unknown command '{}', with args beginning with: ",
        printable(name)
    );
    // As Redis: arguments are appended while the list is shorter than 128 bytes,
    // each cut so the list does not pass 128.
    let mut list = String::new();
    for a in args {
        if list.len() >= 128 {
            break;
        }
        let room = 128 - list.len();
        let text = printable(&a[..a.len().min(room)]);
        list.push('\'');
        list.push_str(&text);
        list.push_str("' ");
    }
    s.push_str(&list);
    Reply::error(s)
}

pub fn unknown_subcommand(cmd: &str, sub: &[u8]) -> Reply {
    Reply::error(format!(
        "ERR unknown subcommand '{}'. Try {} HELP.",
        printable(sub),
        cmd.to_ascii_uppercase()
    ))
}

pub fn wrong_arity(name: &str) -> Reply {
    Reply::error(format!(
        "ERR wrong number of arguments for '{}' command",
        name.to_ascii_lowercase()
    ))
}

pub fn invalid_expire(cmd: &str) -> Reply {
    Reply::error(format!(
        "ERR invalid expire time in '{}' command",
        cmd.to_ascii_lowercase()
    ))
}

/// Text as Redis prints client input in errors: lossy UTF-8, at most 128 bytes,
/// with newlines replaced so an error stays on one line.
pub fn printable(b: &[u8]) -> String {
    let cut = &b[..b.len().min(128)];
    String::from_utf8_lossy(cut).replace(['\r', '\n'], " ")
}
