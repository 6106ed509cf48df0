//! ACL users, as Redis 7 has them: passwords (SHA-256), command permissions (commands,
//! subcommands and categories from the command table), key patterns and pub/sub
//! channel patterns; the rule language of ACL SETUSER and the ACL file; the ACL log;
//! the check every command passes (check.rs). It reads only the command descriptor
//! (`commands::command_table`), never a command family.
//!
//! A connection holds an `Arc<User>` and re-reads it only when `Acl::generation`
//! moves (any SETUSER or DELUSER), so the check on the hot path of a user allowed
//! everything (the default user) is one atomic load and one flag.
//!
//! Left out (refused with an error naming the rule): selectors `(...)`, read/write-only
//! key patterns `%R~` / `%W~`, first-argument rules on plain commands (`+select|0`).

use crate::commands::command_table::{self, Spec};
use crate::glob;
use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

pub mod check;
mod log;
pub mod redact;
mod rules;

pub use check::{Context, Refusal};
pub use log::AclLog;
pub use rules::{
    check_file_with_requirepass, read_file, user_from_rules, valid_username, RuleError,
};

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
    /// and shown, as Redis does; RESTORE checks every payload whole either way).
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

    /// Whether every key is allowed (`~*` or allkeys): SORT's BY and GET read keys no
    /// argument names.
    pub fn all_keys(&self) -> bool {
        self.unrestricted || self.allkeys
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

    /// Whether the user needs no password.
    pub fn nopass(&self) -> bool {
        self.nopass
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

    /// Whether the user may use `channel` (PUBLISH, SUBSCRIBE: matched against the
    /// user's patterns) or the pattern `channel` (`literal`, PSUBSCRIBE: only a
    /// pattern of the user's, as written, allows it).
    pub fn channel_allowed(&self, channel: &[u8], literal: bool) -> bool {
        self.allchannels
            || self.channels.iter().any(|p| {
                if literal {
                    p[..] == channel[..]
                } else {
                    glob::matches(p, channel)
                }
            })
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
                if !self.channel_allowed(&args[i], literal) {
                    return Err(Denied::Channel(i));
                }
            }
        }
        Ok(())
    }
}

/// The users of one server, the generation connections compare with their cached
/// user, and the ACL log.
pub struct Acl {
    users: RwLock<BTreeMap<Bytes, Arc<User>>>,
    /// `--requirepass`: the default user's password whenever it is made afresh.
    requirepass: Option<String>,
    generation: AtomicU64,
    pub log: Mutex<AclLog>,
    /// `protected-mode`: while the default user has no password, only loopback
    /// clients are served.
    protected_mode: AtomicBool,
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
            protected_mode: AtomicBool::new(true),
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

    pub fn protected_mode(&self) -> bool {
        self.protected_mode.load(Ordering::Relaxed)
    }

    /// `protected-mode yes|no` (flag, config file, CONFIG SET).
    pub fn set_protected_mode(&self, on: bool) {
        self.protected_mode.store(on, Ordering::Relaxed);
    }

    /// Whether a new connection from `peer` is refused by protected mode: it is on,
    /// the default user has no password, and the peer is not the loopback address
    /// (Redis's test: 127.0.0.1 or ::1, an IPv4-mapped 127.0.0.1 counted as the
    /// former).
    pub fn protected_refuses(&self, peer: IpAddr) -> bool {
        if !self.protected_mode() || !self.default_user().nopass {
            return false;
        }
        let local = match peer.to_canonical() {
            IpAddr::V4(a) => a == std::net::Ipv4Addr::LOCALHOST,
            IpAddr::V6(a) => a == std::net::Ipv6Addr::LOCALHOST,
        };
        !local
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
        self.get(b"default")
            .expect("the default user cannot be removed")
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
        let n = names
            .iter()
            .filter(|n| map.remove(&n[..]).is_some())
            .count();
        self.generation.fetch_add(1, Ordering::Release);
        n
    }
}

/// Compares secrets in time that does not depend on where the first difference is
/// (Redis's time_independent_strcmp), so response times leak nothing but length.
pub fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

pub fn sha256(data: &[u8]) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, data);
    d.as_ref().try_into().expect("SHA-256 is 32 bytes")
}

#[cfg(test)]
mod tests {
    use super::rules::*;
    use super::*;
    use crate::protocol::numfmt::hex;

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
        let err = parse_file(b"user a on nopass\n\n# comment\nuser b on bogus\n")
            .err()
            .unwrap();
        assert_eq!(
            err,
            (
                4,
                "Error in applying operation 'bogus': Syntax error".into()
            )
        );
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
