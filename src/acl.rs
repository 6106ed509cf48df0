//! ACL users, as Redis 7 has them: passwords (SHA-256), command permissions (commands,
//! subcommands and categories from the command table), key patterns and pub/sub
//! channel patterns; the rule language of ACL SETUSER and the ACL file; the ACL log.
//!
//! A connection holds an `Arc<User>` and re-reads it only when `Acl::generation`
//! moves (any SETUSER or DELUSER), so the check on the hot path of a user allowed
//! everything (the default user) is one atomic load and one flag.
//!
//! Left out (refused with an error naming the rule): selectors `(...)`, read/write-only
//! key patterns `%R~` / `%W~`, first-argument rules on plain commands (`+select|0`).

use crate::commands::command_table::{self, cats, Spec, COMMANDS, SUBCOMMANDS};
use crate::glob;
use crate::protocol::numfmt::hex;
use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Why a command was refused.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Denied {
    Command,
    /// The argument index of the first key out of the user's patterns.
    Key(usize),
    /// The argument index of the first channel out of the user's patterns.
    Channel(usize),
}

/// One user: Redis's user object (without selectors).
#[derive(Clone)]
pub struct User {
    pub name: Bytes,
    pub enabled: bool,
    nopass: bool,
    /// `Some(true)`: sanitize-payload, `Some(false)`: skip-sanitize-payload (accepted
    /// and shown, as Redis does; redlockd has no payload to sanitize: no RESTORE).
    sanitize: Option<bool>,
    /// SHA-256 of each password, in the order they were added.
    passwords: Vec<[u8; 32]>,
    /// One bit per ACL id (commands, then subcommands: `command_table::acl_ids`).
    allowed: Vec<u64>,
    /// The command rules start from +@all (else -@all).
    all_commands: bool,
    /// The command rules after that start, as ACL LIST shows them.
    rules: Vec<String>,
    allkeys: bool,
    keys: Vec<Bytes>,
    allchannels: bool,
    channels: Vec<Bytes>,
    /// Every command, key and channel allowed: the checks are skipped.
    unrestricted: bool,
}

/// An ACL rule that cannot apply: Redis's reason (after "Error in ACL SETUSER
/// modifier '...': ").
#[derive(Debug)]
pub struct RuleError(pub &'static str);

const SYNTAX: RuleError = RuleError("Syntax error");
const UNKNOWN: RuleError = RuleError("Unknown command or category name in ACL");

impl User {
    /// A new user as ACL SETUSER creates one: off, no password, no permissions.
    pub fn new(name: &[u8]) -> User {
        User {
            name: Bytes::copy_from_slice(name),
            enabled: false,
            nopass: false,
            sanitize: None,
            passwords: Vec::new(),
            allowed: vec![0; command_table::acl_ids().div_ceil(64)],
            all_commands: false,
            rules: Vec::new(),
            allkeys: false,
            keys: Vec::new(),
            allchannels: false,
            channels: Vec::new(),
            unrestricted: false,
        }
    }

    /// The default user: on, nopass, every command, key and channel; with a
    /// password when `requirepass` is set.
    pub fn default_user(requirepass: Option<&str>) -> User {
        let mut u = User::new(b"default");
        for rule in ["on", "nopass", "~*", "&*", "+@all"] {
            u.apply(rule.as_bytes()).expect("valid rule");
        }
        if let Some(p) = requirepass {
            u.apply(b"resetpass").expect("valid rule");
            u.passwords.push(sha256(p.as_bytes()));
        }
        u
    }

    /// Whether every command, key and channel is allowed (no check needed).
    #[inline]
    pub fn unrestricted(&self) -> bool {
        self.unrestricted
    }

    /// Whether `pass` is one of the user's passwords (or it has nopass). Compares
    /// digests in constant time.
    pub fn password_ok(&self, pass: &[u8]) -> bool {
        if self.nopass {
            return true;
        }
        let digest = sha256(pass);
        self.passwords
            .iter()
            .fold(false, |found, p| found | same_secret(p, &digest))
    }

    /// Whether a new connection is this user without AUTH (the default user, on
    /// and nopass).
    pub fn auto_auth(&self) -> bool {
        self.enabled && self.nopass
    }

    fn bit(&self, id: usize) -> bool {
        self.allowed[id / 64] & (1 << (id % 64)) != 0
    }

    fn set_bit(&mut self, id: usize, on: bool) {
        if on {
            self.allowed[id / 64] |= 1 << (id % 64);
        } else {
            self.allowed[id / 64] &= !(1 << (id % 64));
        }
    }

    /// Whether the user may run `spec` with `args`: the command (or subcommand),
    /// then its keys, then its channels, as Redis checks them.
    pub fn check(&self, spec: &Spec, args: &[Bytes]) -> Result<(), Denied> {
        if self.unrestricted {
            return Ok(());
        }
        if spec.flags & command_table::flags::NO_AUTH == 0 {
            let id = spec.subcommand(args).map_or(spec.index, |s| s.id);
            if !self.bit(id) {
                return Err(Denied::Command);
            }
        }
        if !self.allkeys {
            for i in spec.key_positions(args) {
                if !self.keys.iter().any(|p| glob::matches(p, &args[i])) {
                    return Err(Denied::Key(i));
                }
            }
        }
        if !self.allchannels {
            let (channels, literal) = match spec.name {
                "publish" => (1..2, false),
                "subscribe" => (1..args.len(), false),
                "psubscribe" => (1..args.len(), true),
                _ => (0..0, false),
            };
            for i in channels {
                let ok = self.channels.iter().any(|p| {
                    if literal {
                        p[..] == args[i][..]
                    } else {
                        glob::matches(p, &args[i])
                    }
                });
                if !ok {
                    return Err(Denied::Channel(i));
                }
            }
        }
        Ok(())
    }

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
                self.allowed.iter_mut().for_each(|w| *w = if allow { !0 } else { 0 });
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

/// Compares secrets in time that does not depend on where the first difference is
/// (Redis's time_independent_strcmp), so response times leak nothing but length.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

pub fn sha256(data: &[u8]) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, data);
    d.as_ref().try_into().expect("SHA-256 is 32 bytes")
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
        let user = user_from_rules(name, words[2..].iter().copied(), User::new(name))
            .map_err(|(rule, e)| {
                (
                    i + 1,
                    format!(
                        "Error in applying operation '{}': {}",
                        String::from_utf8_lossy(&rule),
                        e.0
                    ),
                )
            })?;
        users.push(user);
    }
    Ok(users)
}

/// The users of one server, the generation connections compare with their cached
/// user, and the ACL log.
pub struct Acl {
    users: RwLock<BTreeMap<Bytes, Arc<User>>>,
    /// `--requirepass`: the default user's password whenever it is made afresh.
    requirepass: Option<String>,
    generation: AtomicU64,
    pub log: Mutex<AclLog>,
}

impl Acl {
    /// The default user alone (its password from requirepass).
    pub fn new(requirepass: Option<&str>) -> Acl {
        let default = User::default_user(requirepass);
        let mut users = BTreeMap::new();
        users.insert(default.name.clone(), Arc::new(default));
        Acl {
            users: RwLock::new(users),
            requirepass: requirepass.map(str::to_string),
            generation: AtomicU64::new(0),
            log: Mutex::new(AclLog::default()),
        }
    }

    /// Adds the users of an ACL file (one named `default` replaces the default user).
    pub fn load(&self, users: Vec<User>) {
        let mut map = self.users.write();
        for u in users {
            map.insert(u.name.clone(), Arc::new(u));
        }
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// ACL LOAD: the file's users replace every user; the default user, if the file
    /// does not name it, starts afresh (on, nopass or requirepass, everything allowed).
    pub fn replace(&self, users: Vec<User>) {
        let mut map = self.users.write();
        map.clear();
        let default = User::default_user(self.requirepass.as_deref());
        map.insert(default.name.clone(), Arc::new(default));
        for u in users {
            map.insert(u.name.clone(), Arc::new(u));
        }
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// Changes whenever a user changes or goes: connections then re-read theirs.
    #[inline]
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    pub fn get(&self, name: &[u8]) -> Option<Arc<User>> {
        self.users.read().get(name).cloned()
    }

    pub fn default_user(&self) -> Arc<User> {
        self.get(b"default").expect("the default user cannot be removed")
    }

    /// Every user, by name.
    pub fn users(&self) -> Vec<Arc<User>> {
        self.users.read().values().cloned().collect()
    }

    /// ACL SETUSER: the rules apply to a copy (a new user starts empty); on an
    /// error nothing changes.
    pub fn set_user(&self, name: &[u8], rules: &[Bytes]) -> Result<(), (Vec<u8>, RuleError)> {
        let mut map = self.users.write();
        let base = map
            .get(name)
            .map_or_else(|| User::new(name), |u| (**u).clone());
        let user = user_from_rules(name, rules.iter().map(|r| &r[..]), base)?;
        map.insert(user.name.clone(), Arc::new(user));
        self.generation.fetch_add(1, Ordering::Release);
        Ok(())
    }

    /// ACL DELUSER: how many of `names` existed (the default user is refused by the
    /// caller).
    pub fn delete(&self, names: &[Bytes]) -> usize {
        let mut map = self.users.write();
        let n = names.iter().filter(|n| map.remove(&n[..]).is_some()).count();
        self.generation.fetch_add(1, Ordering::Release);
        n
    }
}

/// Redis's ACL log: the last `MAX_LOG` denials, a repeat of a recent one (same
/// reason, context, object and user within 60 s) counted on its entry.
#[derive(Default)]
pub struct AclLog {
    entries: VecDeque<LogEntry>,
    next_id: u64,
}

const MAX_LOG: usize = 128;
const GROUPING_MS: u64 = 60_000;

pub struct LogEntry {
    pub count: u64,
    pub reason: &'static str,
    pub context: &'static str,
    pub object: Bytes,
    pub username: Bytes,
    pub client_info: String,
    pub entry_id: u64,
    pub created_ms: u64,
    pub updated_ms: u64,
}

impl AclLog {
    /// Records a denial (`reason`: command, key, channel, auth) at wall time `now_ms`.
    pub fn add(
        &mut self,
        reason: &'static str,
        context: &'static str,
        object: Bytes,
        username: Bytes,
        client_info: String,
        now_ms: u64,
    ) {
        let same = self.entries.iter().take(10).position(|e| {
            e.reason == reason
                && e.context == context
                && e.object == object
                && e.username == username
                && now_ms.saturating_sub(e.updated_ms) < GROUPING_MS
        });
        if let Some(i) = same {
            let mut e = self.entries.remove(i).expect("found");
            e.count += 1;
            e.updated_ms = now_ms;
            e.client_info = client_info;
            self.entries.push_front(e);
            return;
        }
        self.entries.push_front(LogEntry {
            count: 1,
            reason,
            context,
            object,
            username,
            client_info,
            entry_id: self.next_id,
            created_ms: now_ms,
            updated_ms: now_ms,
        });
        self.next_id += 1;
        self.entries.truncate(MAX_LOG);
    }

    /// The newest `n` entries, newest first.
    pub fn newest(&self, n: usize) -> impl Iterator<Item = &LogEntry> {
        self.entries.iter().take(n)
    }

    pub fn reset(&mut self) {
        self.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(rules: &str) -> User {
        let mut u = User::new(b"u");
        for r in rules.split_whitespace() {
            u.apply(r.as_bytes()).unwrap();
        }
        u
    }

    #[test]
    fn rules_describe_as_redis_lists_them() {
        let u = user("on >pass ~lock:* +@read +@write -@admin");
        assert_eq!(
            String::from_utf8(u.describe()).unwrap(),
            "user u on #d74ff0ee8da3b9806b18c877dbf29bbde50b5bd8e4dad7a3a725000feb82e8f1 ~lock:* resetchannels -@all +@read +@write -@admin"
        );
        assert_eq!(
            String::from_utf8(User::default_user(None).describe()).unwrap(),
            "user default on nopass ~* &* +@all"
        );
        let u = user("+config|get +config -config|set +get -get");
        assert_eq!(u.command_rules(), "-@all +config -config|set -get");
        assert!(User::default_user(None).unrestricted());
        assert!(!user("on nopass ~* &* +@all -get").unrestricted());
    }

    #[test]
    fn bad_rules_are_refused() {
        let mut u = User::new(b"u");
        assert_eq!(u.apply(b"bogus").unwrap_err().0, "Syntax error");
        assert_eq!(u.apply(b"+nosuch").unwrap_err().0, UNKNOWN.0);
        assert_eq!(u.apply(b"+@nosuch").unwrap_err().0, UNKNOWN.0);
        assert!(u.apply(b"#abc").is_err());
        assert!(u.apply(b"<nopass").is_err());
        u.apply(b"allkeys").unwrap();
        assert!(u.apply(b"~x").is_err());
    }

    #[test]
    fn a_bad_file_names_its_line() {
        let err = parse_file(b"user a on nopass\n\n# comment\nuser b on bogus\n").err().unwrap();
        assert_eq!(err, (4, "Error in applying operation 'bogus': Syntax error".into()));
        let err = parse_file(b"user a\nuser a\n").err().unwrap();
        assert_eq!(err.0, 2);
        assert_eq!(parse_file(b"users a\n").err().unwrap().0, 1);
    }

    #[test]
    fn passwords_hash_and_compare() {
        let u = user("on >secret");
        assert!(u.password_ok(b"secret"));
        assert!(!u.password_ok(b"secreT"));
        let hashed = format!("on #{}", hex(&sha256(b"pw")));
        assert!(user(&hashed).password_ok(b"pw"));
    }
}
