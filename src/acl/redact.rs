//! Which arguments of a command are secrets: what the slow log (and anything else
//! that keeps a command's arguments) shows as `(redacted)`. Redis 7.0 redacts them
//! from inside the commands (`redactClientCommandArgument`); these rules follow the
//! same parsing, so the same arguments are hidden on the same input, errors included.

use crate::commands::command_table::Spec;
use bytes::Bytes;

/// What a redacted argument is shown as.
pub const REDACTED: &[u8] = b"(redacted)";

/// Settings whose value is a secret (Redis's SENSITIVE_CONFIG).
const SENSITIVE_CONFIGS: &[&[u8]] = &[
    b"requirepass",
    b"masterauth",
    b"masteruser",
    b"tls-key-file-pass",
    b"tls-client-key-file-pass",
];

/// Whether argument `i` of `args` (a call of `spec`) is to be hidden.
pub fn is_secret(spec: &Spec, args: &[Bytes], i: usize) -> bool {
    let is = |a: &[u8], word: &str| a.eq_ignore_ascii_case(word.as_bytes());
    match spec.name {
        // AUTH [user] pass; with more arguments Redis refuses it before redacting.
        "auth" => args.len() <= 3 && i >= 1,
        // HELLO [protover [AUTH user pass] [SETNAME name]]: the AUTH pair of each AUTH
        // option before the first bad one, once the version was accepted.
        "hello" => {
            let version_ok = args.get(1).is_none_or(|v| {
                crate::protocol::parse_i64(v).is_some_and(|v| (2..=3).contains(&v))
            });
            if !version_ok {
                return false;
            }
            let mut j = 2;
            while j < args.len() {
                let more = args.len() - j - 1;
                if is(&args[j], "auth") && more >= 2 {
                    if i == j + 1 || i == j + 2 {
                        return true;
                    }
                    j += 3;
                } else if is(&args[j], "setname") && more >= 1 {
                    j += 2;
                } else {
                    return false;
                }
            }
            false
        }
        // ACL SETUSER name rules...: everything after the subcommand.
        "acl" => args.len() >= 3 && is(&args[1], "setuser") && i >= 2,
        // CONFIG SET name value...: the values of secret settings, whatever else fails.
        "config" => {
            args.len() >= 4
                && args.len().is_multiple_of(2)
                && is(&args[1], "set")
                && i >= 3
                && !i.is_multiple_of(2)
                && SENSITIVE_CONFIGS
                    .iter()
                    .any(|name| args[i - 1].eq_ignore_ascii_case(name))
        }
        _ => false,
    }
}

/// Whether any argument of this call is a secret (cheap: by command name first).
#[inline]
pub fn has_secrets(spec: &Spec) -> bool {
    matches!(spec.name, "auth" | "hello" | "acl" | "config")
}
