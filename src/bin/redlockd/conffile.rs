//! `redlockd /path/redlockd.conf [flags]`: a config file in Redis's format (`name value`
//! per line, `#` comments, quoted values), turned into the flags it stands for, so the
//! file, the flags and the environment share one definition (clap's). Flags given on
//! the command line come after the file's and win; the file wins over environment
//! variables.
//!
//! Names are the flags' names (`max-ttl 30s`, `require-ttl yes`), plus Redis's names
//! for the same settings (`loglevel`, `busy-reply-threshold`, `lua-time-limit`). Redis
//! directives that only restate what redlockd always does (`daemonize no`,
//! `save ""`, `tls-replication no`, `tls-cluster no`) are accepted;
//! anything else is an error naming the line, never silently ignored.

use std::fmt;

/// Flags that take no value: `yes` turns them on, `no` leaves them off.
const SWITCHES: &[&str] = &["require-ttl", "enable-debug-command"];

/// Flags that take one value.
const VALUED: &[&str] = &[
    "bind",
    "port",
    "max-ttl",
    "restart-delay",
    "lock-delay",
    "lock-delay-prefix",
    "requirepass",
    "protected-mode",
    "aclfile",
    "maxclients",
    "proto-max-bulk-len",
    "busy-script-time",
    "clock",
    "seed",
    "metrics-addr",
    "metrics-auth",
    "metrics-auth-file",
    "dir",
    "appendonly",
    "appendfsync",
    "appenddirname",
    "appendfilename",
    "aof-load-truncated",
    "auto-aof-rewrite-percentage",
    "auto-aof-rewrite-min-size",
    "memory-only-ttl",
    "log",
    "tls-port",
    "tls-cert-file",
    "tls-key-file",
    "tls-ca-cert-file",
    "tls-auth-clients",
    "maxmemory",
    "notify-keyspace-events",
    "lock-introspection",
    "threads",
];

/// A line the file cannot mean.
#[derive(Debug)]
pub struct ConfFileError {
    pub line: usize,
    pub text: String,
    pub reason: String,
}

impl fmt::Display for ConfFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "config file line {}: {}\n>>> '{}'",
            self.line, self.reason, self.text
        )
    }
}

/// The flags `text` stands for, in file order.
pub fn to_flags(text: &str) -> Result<Vec<String>, ConfFileError> {
    let mut flags = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let err = |reason: &str| ConfFileError {
            line: i + 1,
            text: raw.trim().to_string(),
            reason: reason.to_string(),
        };
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let words = split(line).ok_or_else(|| err("unbalanced quotes"))?;
        let name = words[0].to_ascii_lowercase();
        let [value] = &words[1..] else {
            return Err(err("expected one value after the name"));
        };
        match name.as_str() {
            "daemonize" | "tls-replication" | "tls-cluster" if value == "no" => {}
            "save" if value.is_empty() => {}
            "maxmemory-policy" if value == "noeviction" => {}
            "maxmemory-policy" => {
                return Err(err(
                    "redlockd never evicts a lock: only noeviction is supported",
                ))
            }
            n if SWITCHES.contains(&n) => match value.as_str() {
                "yes" | "local" => flags.push(format!("--{n}")),
                "no" => {}
                _ => return Err(err("expected yes or no")),
            },
            "loglevel" => {
                let level = match value.as_str() {
                    "debug" => "debug",
                    "verbose" => "debug",
                    "notice" => "info",
                    "warning" => "warn",
                    "nothing" => "off",
                    _ => return Err(err("expected debug, verbose, notice, warning or nothing")),
                };
                flags.extend(["--log".to_string(), level.to_string()]);
            }
            "busy-reply-threshold" | "lua-time-limit" => {
                flags.extend(["--busy-script-time".to_string(), format!("{value}ms")]);
            }
            n if VALUED.contains(&n) => flags.extend([format!("--{n}"), value.clone()]),
            _ => return Err(err("unknown setting (redlockd --help lists them)")),
        }
    }
    Ok(flags)
}

/// Splits a line into words: whitespace-separated, with "double" (backslash escapes)
/// and 'single' quoted words; `None` on an unclosed quote.
fn split(line: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let Some(&first) = chars.peek() else {
            return Some(words);
        };
        let mut word = String::new();
        if first == '"' || first == '\'' {
            chars.next();
            loop {
                match chars.next()? {
                    c if c == first => break,
                    '\\' if first == '"' => word.push(chars.next()?),
                    c => word.push(c),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                word.push(c);
                chars.next();
            }
        }
        words.push(word);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_become_flags() {
        let text = "# a lock node\nport 7001\nmax-ttl 10s\nrequire-ttl yes\n\
                    requirepass \"p w\\\"d\"\nloglevel warning\nlua-time-limit 2000\n\
                    daemonize no\nsave ''\nenable-debug-command no\n\
                    tls-port 7443\ntls-auth-clients optional\ntls-replication no\n";
        assert_eq!(
            to_flags(text).unwrap(),
            [
                "--port",
                "7001",
                "--max-ttl",
                "10s",
                "--require-ttl",
                "--requirepass",
                "p w\"d",
                "--log",
                "warn",
                "--busy-script-time",
                "2000ms",
                "--tls-port",
                "7443",
                "--tls-auth-clients",
                "optional"
            ]
        );
    }

    #[test]
    fn notifications_and_introspection_are_settings() {
        assert_eq!(
            to_flags(
                "notify-keyspace-events KEA
lock-introspection no
"
            )
            .unwrap(),
            [
                "--notify-keyspace-events",
                "KEA",
                "--lock-introspection",
                "no"
            ]
        );
    }

    #[test]
    fn maxmemory_is_a_size_and_the_policy_only_noeviction() {
        assert_eq!(
            to_flags("maxmemory 100mb\nmaxmemory-policy noeviction\n").unwrap(),
            ["--maxmemory", "100mb"]
        );
        let e = to_flags("maxmemory-policy allkeys-lru\n").unwrap_err();
        assert!(e.to_string().contains("never evicts"), "{e}");
    }

    #[test]
    fn unknown_or_malformed_lines_are_errors_naming_the_line() {
        let e = to_flags("port 1\nhz 10\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.to_string().contains("unknown setting"), "{e}");
        assert!(to_flags("port\n").is_err());
        assert!(to_flags("port 1 2\n").is_err());
        assert!(to_flags("requirepass \"open\n").is_err());
        assert!(to_flags("require-ttl maybe\n").is_err());
        assert!(
            to_flags("appendfsync everysec\n").is_ok(),
            "clap refuses it"
        );
        assert_eq!(to_flags("appendonly no\n").unwrap(), ["--appendonly", "no"]);
    }
}
