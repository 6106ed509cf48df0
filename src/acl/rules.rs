//! The rule language of ACL SETUSER and the ACL file: applying a rule to a user,
//! describing a user back as rules (ACL LIST, GETUSER), and reading the file.

use super::*;
use crate::commands::command_table::{self, cats, COMMANDS, SUBCOMMANDS};
use crate::protocol::numfmt::hex;
use bytes::Bytes;

/// An ACL rule that cannot apply: Redis's reason (after "Error in ACL SETUSER
/// modifier '...': ").
#[derive(Debug)]
pub struct RuleError(pub &'static str);

pub(super) const SYNTAX: RuleError = RuleError("Syntax error");
pub(super) const UNKNOWN: RuleError = RuleError("Unknown command or category name in ACL");

impl User {
    /// Applies one rule (ACL SETUSER's and the ACL file's language).
    pub fn apply(&mut self, rule: &[u8]) -> Result<(), RuleError> {
        let lower = rule.to_ascii_lowercase();
        match &lower[..] {
            b"on" => self.enabled = true,
            b"off" => self.enabled = false,
            b"nopass" => {
                self.nopass = true;
                self.passwords.clear();
            }
            b"resetpass" => {
                self.nopass = false;
                self.passwords.clear();
            }
            b"allkeys" => {
                self.allkeys = true;
                self.keys.clear();
            }
            b"resetkeys" => {
                self.allkeys = false;
                self.keys.clear();
            }
            b"allchannels" => {
                self.allchannels = true;
                self.channels.clear();
            }
            b"resetchannels" => {
                self.allchannels = false;
                self.channels.clear();
            }
            b"allcommands" => self.apply(b"+@all")?,
            b"nocommands" => self.apply(b"-@all")?,
            b"sanitize-payload" => self.sanitize = Some(true),
            b"skip-sanitize-payload" => self.sanitize = Some(false),
            b"clearselectors" => {}
            b"reset" => {
                for r in ["resetpass", "resetkeys", "resetchannels", "off", "-@all"] {
                    self.apply(r.as_bytes())?;
                }
                self.sanitize = Some(true);
            }
            _ => match rule.first() {
                Some(b'>') => {
                    self.add_password(sha256(&rule[1..]));
                }
                Some(b'#') => {
                    let hash = parse_hash(&rule[1..])?;
                    self.add_password(hash);
                }
                Some(b'<') => self.remove_password(&sha256(&rule[1..]))?,
                Some(b'!') => {
                    let hash = parse_hash(&rule[1..])?;
                    self.remove_password(&hash)?;
                }
                Some(b'~') => {
                    let pattern = &rule[1..];
                    if self.allkeys {
                        return Err(RuleError("Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns"));
                    }
                    if pattern == b"*" {
                        self.allkeys = true;
                        self.keys.clear();
                    } else if !self.keys.iter().any(|k| k[..] == *pattern) {
                        self.keys.push(Bytes::copy_from_slice(pattern));
                    }
                }
                Some(b'%') => {
                    return Err(RuleError(
                        "redlockd does not support read-only or write-only key patterns (%R~, %W~): use ~pattern",
                    ))
                }
                Some(b'&') => {
                    let pattern = &rule[1..];
                    if self.allchannels {
                        return Err(RuleError("Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels"));
                    }
                    if pattern == b"*" {
                        self.allchannels = true;
                        self.channels.clear();
                    } else if !self.channels.iter().any(|c| c[..] == *pattern) {
                        self.channels.push(Bytes::copy_from_slice(pattern));
                    }
                }
                Some(b'(') => {
                    return Err(RuleError(
                        "redlockd does not support selectors: give the rules without parentheses",
                    ))
                }
                Some(&sign @ (b'+' | b'-')) => self.apply_command_rule(sign == b'+', &lower[1..])?,
                _ => return Err(SYNTAX),
            },
        }
        self.unrestricted = self.allkeys
            && self.allchannels
            && (0..command_table::acl_ids()).all(|id| self.bit(id));
        Ok(())
    }

    fn add_password(&mut self, hash: [u8; 32]) {
        self.nopass = false;
        if !self.passwords.contains(&hash) {
            self.passwords.push(hash);
        }
    }

    fn remove_password(&mut self, hash: &[u8; 32]) -> Result<(), RuleError> {
        let before = self.passwords.len();
        self.passwords.retain(|p| p != hash);
        if self.passwords.len() == before {
            return Err(RuleError(
                "The password you are trying to remove from the user does not exist",
            ));
        }
        Ok(())
    }

    /// `+name` / `-name`: `@category`, a command, or `command|subcommand`.
    fn apply_command_rule(&mut self, allow: bool, what: &[u8]) -> Result<(), RuleError> {
        let what = std::str::from_utf8(what).map_err(|_| UNKNOWN)?;
        if let Some(cat) = what.strip_prefix('@') {
            if cat == "all" {
                self.allowed
                    .iter_mut()
                    .for_each(|w| *w = if allow { !0 } else { 0 });
                self.all_commands = allow;
                self.rules.clear();
                return Ok(());
            }
            let bit = cats::by_name(cat.as_bytes()).ok_or(UNKNOWN)?;
            for spec in COMMANDS.iter() {
                if spec.cats & bit != 0 {
                    self.set_bit(spec.index, allow);
                }
            }
            for sub in SUBCOMMANDS.iter() {
                if sub.cats & bit != 0 {
                    self.set_bit(sub.id, allow);
                }
            }
            self.note_rule(allow, what, false);
            return Ok(());
        }
        if let Some((parent, _)) = what.split_once('|') {
            let spec = command_table::lookup(parent.as_bytes()).ok_or(UNKNOWN)?;
            if spec.subcommands.is_empty() {
                return Err(RuleError(
                    "redlockd does not support first-argument rules on commands without subcommands",
                ));
            }
            let sub = spec
                .subcommands
                .iter()
                .find(|s| s.fullname == what)
                .ok_or(UNKNOWN)?;
            self.set_bit(sub.id, allow);
            self.note_rule(allow, what, false);
            return Ok(());
        }
        let spec = command_table::lookup(what.as_bytes()).ok_or(UNKNOWN)?;
        self.set_bit(spec.index, allow);
        for sub in spec.subcommands {
            self.set_bit(sub.id, allow);
        }
        self.note_rule(allow, what, true);
        Ok(())
    }

    /// Keeps the rules compact as Redis 7.2 does: a rule replaces an earlier one on
    /// the same name (and a whole command's rule its subcommands' rules).
    fn note_rule(&mut self, allow: bool, what: &str, whole_command: bool) {
        self.rules.retain(|r| {
            let name = &r[1..];
            name != what
                && !(whole_command
                    && name
                        .strip_prefix(what)
                        .is_some_and(|rest| rest.starts_with('|')))
        });
        self.rules
            .push(format!("{}{what}", if allow { '+' } else { '-' }));
    }

    /// The command rules, as ACL LIST and ACL GETUSER show them.
    pub fn command_rules(&self) -> String {
        let mut out = String::from(if self.all_commands { "+@all" } else { "-@all" });
        for r in &self.rules {
            out.push(' ');
            out.push_str(r);
        }
        out
    }

    /// The flags, as ACL GETUSER lists them.
    pub fn flag_names(&self) -> Vec<&'static str> {
        let mut out = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            out.push("nopass");
        }
        match self.sanitize {
            Some(false) => out.push("skip-sanitize-payload"),
            Some(true) => out.push("sanitize-payload"),
            None => {}
        }
        out
    }

    /// The password hashes, hex.
    pub fn password_hashes(&self) -> Vec<String> {
        self.passwords.iter().map(|h| hex(h)).collect()
    }

    /// The key patterns (`~*` for allkeys), space-separated.
    pub fn key_rules(&self) -> Vec<u8> {
        describe_patterns(b'~', self.allkeys, &self.keys)
    }

    /// The channel patterns (`&*` for allchannels), space-separated.
    pub fn channel_rules(&self) -> Vec<u8> {
        describe_patterns(b'&', self.allchannels, &self.channels)
    }

    /// The user as one ACL LIST line (also the ACL file's syntax).
    pub fn describe(&self) -> Vec<u8> {
        let mut out = b"user ".to_vec();
        out.extend_from_slice(&self.name);
        for f in self.flag_names() {
            out.push(b' ');
            out.extend_from_slice(f.as_bytes());
        }
        for h in self.password_hashes() {
            out.extend_from_slice(b" #");
            out.extend_from_slice(h.as_bytes());
        }
        let keys = self.key_rules();
        if !keys.is_empty() {
            out.push(b' ');
            out.extend_from_slice(&keys);
        }
        out.push(b' ');
        if self.allchannels {
            out.extend_from_slice(b"&*");
        } else {
            out.extend_from_slice(b"resetchannels");
            for c in &self.channels {
                out.extend_from_slice(b" &");
                out.extend_from_slice(c);
            }
        }
        out.push(b' ');
        out.extend_from_slice(self.command_rules().as_bytes());
        out
    }
}

fn describe_patterns(prefix: u8, all: bool, patterns: &[Bytes]) -> Vec<u8> {
    if all {
        return vec![prefix, b'*'];
    }
    let mut out = Vec::new();
    for p in patterns {
        if !out.is_empty() {
            out.push(b' ');
        }
        out.push(prefix);
        out.extend_from_slice(p);
    }
    out
}

fn parse_hash(text: &[u8]) -> Result<[u8; 32], RuleError> {
    const BAD: RuleError = RuleError(
        "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters",
    );
    if text.len() != 64 {
        return Err(BAD);
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Ok(c - b'0'),
        b'a'..=b'f' => Ok(c - b'a' + 10),
        _ => Err(BAD),
    };
    let mut out = [0u8; 32];
    for (i, pair) in text.chunks(2).enumerate() {
        out[i] = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Ok(out)
}

/// Checks a username as Redis does.
pub fn valid_username(name: &[u8]) -> Result<(), &'static str> {
    if name.iter().any(|&c| c == b' ' || c == 0) {
        return Err("ERR Usernames can't contain spaces or null characters");
    }
    Ok(())
}

/// A user built from rules (an ACL file line or ACL SETUSER on a new user).
pub fn user_from_rules<'a>(
    name: &[u8],
    rules: impl IntoIterator<Item = &'a [u8]>,
    base: User,
) -> Result<User, (Vec<u8>, RuleError)> {
    let mut user = base;
    user.name = Bytes::copy_from_slice(name);
    for r in rules {
        user.apply(r).map_err(|e| (r.to_vec(), e))?;
    }
    Ok(user)
}

/// Reads an ACL file (Redis's syntax: one `user NAME rules...` a line). Blank lines
/// and lines starting with `#` are skipped (Redis has no comments: a superset). An
/// error names the file, the line and why.
pub fn read_file(path: &std::path::Path) -> Result<Vec<User>, String> {
    let text = std::fs::read(path)
        .map_err(|e| format!("cannot read the ACL file {}: {e}", path.display()))?;
    parse_file(&text).map_err(|(line, why)| format!("{}:{line}: {why}", path.display()))
}

/// Refuses a file that sets the default user when --requirepass does too (which
/// password would count is not obvious: say so at start).
pub fn check_file_with_requirepass(
    config: &crate::config::Config,
    users: Vec<User>,
) -> Result<Vec<User>, String> {
    if config.requirepass.is_some() && users.iter().any(|u| &u.name[..] == b"default") {
        return Err(
            "requirepass and the ACL file's 'user default' line both set the default user: keep one".into(),
        );
    }
    Ok(users)
}

/// Parses an ACL file's text; an error is (line number, reason).
pub fn parse_file(text: &[u8]) -> Result<Vec<User>, (usize, String)> {
    let mut users: Vec<User> = Vec::new();
    for (i, raw) in text.split(|&c| c == b'\n').enumerate() {
        let line = raw.trim_ascii();
        if line.is_empty() || line[0] == b'#' {
            continue;
        }
        let words: Vec<&[u8]> = line
            .split(|c| c.is_ascii_whitespace())
            .filter(|w| !w.is_empty())
            .collect();
        if words.len() < 2 || words[0] != b"user" {
            return Err((
                i + 1,
                "should start with user keyword followed by the username".into(),
            ));
        }
        let name = words[1];
        valid_username(name).map_err(|e| (i + 1, e.trim_start_matches("ERR ").to_string()))?;
        if users.iter().any(|u| u.name[..] == *name) {
            return Err((
                i + 1,
                format!("Duplicate user '{}' found", String::from_utf8_lossy(name)),
            ));
        }
        let user = user_from_rules(name, words[2..].iter().copied(), User::new(name)).map_err(
            |(rule, e)| {
                (
                    i + 1,
                    format!(
                        "Error in applying operation '{}': {}",
                        String::from_utf8_lossy(&rule),
                        e.0
                    ),
                )
            },
        )?;
        users.push(user);
    }
    Ok(users)
}
