//! The command table: name -> spec (arity, flags, ACL categories, key specs and
//! positions, subcommands), as in Redis's own table: the command descriptor, below every
//! room that reads it (dispatch, ACL, stats, the client registry, COMMAND, INFO,
//! scripting). It names no handler and imports no command family: `super::handlers`
//! binds a handler to each row by its index. Arity counts the command name; negative means "at least".
//! Every check that reads keys (ACL key patterns, cluster routing, the restart and
//! slot fences, COMMAND GETKEYS, client-side caching) finds them with
//! `Spec::key_positions`, which reads a container command's subcommand row.

use bytes::Bytes;
use std::sync::LazyLock;

pub mod key_specs;
mod rows;
use key_specs::KeySpec;
use rows::{Row, ROWS, SUB_ROWS};

pub mod flags {
    /// Changes the keyspace.
    pub const WRITE: u32 = 1;
    /// Only reads.
    pub const READONLY: u32 = 1 << 1;
    /// Can create a key or lengthen a TTL: refused while the restart fence is up.
    pub const FENCED: u32 = 1 << 2;
    /// Not callable from a script.
    pub const NOSCRIPT: u32 = 1 << 3;
    /// Allowed before AUTH.
    pub const NO_AUTH: u32 = 1 << 4;
    /// Allowed in RESP2 subscribed mode.
    pub const PUBSUB: u32 = 1 << 5;
    pub const FAST: u32 = 1 << 6;
    pub const ADMIN: u32 = 1 << 7;
    /// May block the client (BLPOP...).
    pub const BLOCKING: u32 = 1 << 8;
    /// Allowed while a script is running past its time limit (SCRIPT KILL...).
    pub const ALLOW_BUSY: u32 = 1 << 9;
    /// Touches several keys at once: runs holding the keyspace gate exclusively, so no
    /// other command sees it half done (as scripts do).
    pub const EXCLUSIVE: u32 = 1 << 10;
    /// Refused after MULTI ("Command not allowed inside a transaction").
    pub const NO_MULTI: u32 = 1 << 11;
    /// May grow memory: refused with OOM while used memory is above `--maxmemory`
    /// (Redis's `denyoom`, on the same commands: EXPIRE, PERSIST, RENAME and SMOVE are
    /// fenced, as they can lengthen a TTL or move a key, but not denyoom).
    pub const DENYOOM: u32 = 1 << 12;
    /// Redis's "movablekeys": besides any keys at first_key..last_key, the keys given
    /// by a numkeys argument at args[1], right after it (ZUNION, ZINTERCARD).
    pub const NUMKEYS_AT_1: u32 = 1 << 13;
    /// The same with numkeys at args[2] (EVAL, FCALL; ZUNIONSTORE after its
    /// destination at first_key).
    pub const NUMKEYS_AT_2: u32 = 1 << 14;
    /// No key is required (EVAL with numkeys 0): COMMAND GETKEYS then answers an empty
    /// array where it would otherwise refuse the arguments.
    pub const NO_MANDATORY_KEYS: u32 = 1 << 15;
    /// Redis's "movablekeys" of XREAD / XREADGROUP: the keys are the first half of
    /// the arguments after the STREAMS keyword.
    pub const STREAMS_KEYS: u32 = 1 << 16;
    /// SORT's destination: the argument after the last STORE (Redis's sortGetKeys,
    /// which skips LIMIT's two arguments and BY's and GET's one).
    pub const STORE_KEY: u32 = 1 << 17;
    /// Keys found by the command's own parsing (SORT, SORT_RO): COMMAND INFO lists
    /// Redis's "movablekeys".
    pub const MOVABLE: u32 = 1 << 18;
    /// Redis's "movablekeys" for GEORADIUS / GEORADIUSBYMEMBER: besides the fixed key,
    /// the keys after their STORE and STOREDIST keywords.
    pub const GEO_STORE_KEYS: u32 = 1 << 19;
    /// FENCED only with some arguments, read from the arguments here
    /// (`Spec::fenced`), never by the handler: BITFIELD with a write op, SORT /
    /// GEORADIUS / GEORADIUSBYMEMBER with STORE or STOREDIST, GETEX with a TTL
    /// option or PERSIST, XGROUP CREATE with MKSTREAM.
    pub const FENCED_BY_ARGS: u32 = 1 << 20;
}

/// ACL categories (Redis 7's, in its order: ACL CAT and COMMAND INFO list them so).
/// A row names only the categories its flags do not imply (@keyspace, @string,
/// @dangerous without admin...); `with_implicit_cats` adds the rest, as Redis does.
/// The result is checked against a real redis-server's COMMAND INFO and ACL CAT by
/// tests/integrations/acl.rs; redlockd's own commands get the categories of the Redis
/// commands they stand beside.
pub mod cats {
    pub const NAMES: [&str; 21] = [
        "keyspace",
        "read",
        "write",
        "set",
        "sortedset",
        "list",
        "hash",
        "string",
        "bitmap",
        "hyperloglog",
        "geo",
        "stream",
        "pubsub",
        "admin",
        "fast",
        "slow",
        "blocking",
        "dangerous",
        "connection",
        "transaction",
        "scripting",
    ];
    pub const C_KEYSPACE: u32 = 1;
    pub const C_READ: u32 = 1 << 1;
    pub const C_WRITE: u32 = 1 << 2;
    pub const C_SET: u32 = 1 << 3;
    pub const C_SORTEDSET: u32 = 1 << 4;
    pub const C_LIST: u32 = 1 << 5;
    pub const C_HASH: u32 = 1 << 6;
    pub const C_STRING: u32 = 1 << 7;
    pub const C_BITMAP: u32 = 1 << 8;
    pub const C_HYPERLOGLOG: u32 = 1 << 9;
    pub const C_GEO: u32 = 1 << 10;
    pub const C_STREAM: u32 = 1 << 11;
    pub const C_PUBSUB: u32 = 1 << 12;
    pub const C_ADMIN: u32 = 1 << 13;
    pub const C_FAST: u32 = 1 << 14;
    pub const C_SLOW: u32 = 1 << 15;
    pub const C_BLOCKING: u32 = 1 << 16;
    pub const C_DANGEROUS: u32 = 1 << 17;
    pub const C_CONNECTION: u32 = 1 << 18;
    pub const C_TRANSACTION: u32 = 1 << 19;
    pub const C_SCRIPTING: u32 = 1 << 20;

    /// A category's bit, by name (any case).
    pub fn by_name(name: &[u8]) -> Option<u32> {
        NAMES
            .iter()
            .position(|n| n.as_bytes().eq_ignore_ascii_case(name))
            .map(|i| 1 << i)
    }

    /// The names of the categories in `bits`, in Redis's order.
    pub fn names(bits: u32) -> impl Iterator<Item = &'static str> {
        NAMES
            .iter()
            .enumerate()
            .filter(move |(i, _)| bits & (1 << i) != 0)
            .map(|(_, n)| *n)
    }
}

use cats::*;
use flags::*;

pub struct Spec {
    /// Lowercase, as Redis names commands in errors and COMMAND replies.
    pub name: &'static str,
    pub arity: i32,
    pub flags: u32,
    /// ACL categories (`cats`).
    pub cats: u32,
    /// Redis's key specs (COMMAND INFO); none for a container command.
    pub key_specs: &'static [KeySpec],
    /// The legacy key positions, derived from `key_specs` (`key_specs::legacy_range`).
    pub first_key: i32,
    pub last_key: i32,
    pub step: i32,
    /// Position in `COMMANDS` (for per-command stats; its handler in
    /// `commands::handlers`); also its ACL id.
    pub index: usize,
    /// A container's subcommands (CONFIG GET...), for ACL rules and categories.
    pub subcommands: &'static [Subcommand],
}

/// A container command's subcommand, as ACL rules name it (`config|get`).
pub struct Subcommand {
    /// `parent|sub`, lowercase.
    pub fullname: &'static str,
    /// Counting both names (`XINFO STREAM key`: -3).
    pub arity: i32,
    /// Redis's flags for it (XGROUP CREATE: `WRITE | DENYOOM`; XINFO STREAM:
    /// `READONLY`; CONFIG SET: `ADMIN | NOSCRIPT`...), plus redlockd's `FENCED`
    /// where it applies: every check reads them, not the container's
    /// (`Spec::flags_of`).
    pub flags: u32,
    pub cats: u32,
    /// Redis's key specs, and the legacy positions derived from them, as a command's.
    pub key_specs: &'static [KeySpec],
    pub first_key: i32,
    pub last_key: i32,
    pub step: i32,
    /// Its ACL id: after every command's (`COMMANDS.len() + ` its place in `SUBCOMMANDS`).
    pub id: usize,
}

impl Subcommand {
    /// Flag names as COMMAND INFO lists them in the container's entry.
    pub fn flag_names(&self) -> Vec<&'static str> {
        flag_names(self.flags, self.cats)
    }
}

/// How many ACL ids there are: one per command and one per subcommand.
pub fn acl_ids() -> usize {
    COMMANDS.len() + SUBCOMMANDS.len()
}

impl Spec {
    /// Flag names as COMMAND INFO lists them.
    pub fn flag_names(&self) -> Vec<&'static str> {
        flag_names(self.flags, self.cats)
    }

    /// The subcommand `args` names, for a container command (`None` for a plain
    /// command, or a subcommand it does not know: the handler answers that one).
    pub fn subcommand(&self, args: &[Bytes]) -> Option<&'static Subcommand> {
        let sub = args.get(1)?;
        self.subcommands
            .iter()
            .find(|s| s.fullname.as_bytes()[self.name.len() + 1..].eq_ignore_ascii_case(sub))
    }

    /// The flags this call is checked by (WRITE, READONLY, DENYOOM, FENCED, NOSCRIPT,
    /// ALLOW_BUSY, NO_MULTI...), as Redis checks `c->cmd`, the subcommand's command:
    /// a plain command has the row's; a container command's subcommand has its own
    /// (XGROUP CREATE is `write denyoom`, XINFO STREAM `readonly`, SCRIPT KILL
    /// `allow_busy`, CLIENT ID `noscript`); a container's unknown subcommand has none.
    /// A plain command pays one length test for the container case.
    #[inline]
    pub fn flags_of(&self, args: &[Bytes]) -> u32 {
        if self.subcommands.is_empty() {
            return self.flags;
        }
        self.subcommand(args).map_or(0, |sub| sub.flags)
    }

    /// Whether this call must pass the fences (the restart fence, the slot fences and
    /// the lock-delay: `commands::check_fences`): a FENCED row or subcommand always;
    /// a FENCED_BY_ARGS one when its arguments can create a key or lengthen a TTL.
    /// The one rule every path (network, EXEC, Lua) reads.
    pub fn fenced(&self, args: &[Bytes]) -> bool {
        let own = self.flags_of(args);
        if own & FENCED != 0 {
            return true;
        }
        if own & FENCED_BY_ARGS == 0 {
            return false;
        }
        fenced_by_args(self.name, args)
    }

    /// Whether this call runs while a script is busy (Redis's `allow_busy`): a
    /// container command's subcommand decides for itself (SCRIPT KILL does, SCRIPT
    /// LOAD does not); a container's unknown subcommand does not.
    pub fn allows_busy(&self, args: &[Bytes]) -> bool {
        self.flags_of(args) & ALLOW_BUSY != 0
    }

    /// The positions of the keys in `args`, in Redis's order: the one key extraction
    /// (COMMAND GETKEYS, ACL key patterns, cluster routing, the fences). A container
    /// command's keys are its subcommand's (XINFO STREAM key: 2; none for an unknown
    /// subcommand). Otherwise from first_key to last_key (negative: from the end) by
    /// step, then those a numkeys argument gives (`NUMKEYS_AT_1` / `NUMKEYS_AT_2`). A
    /// numkeys that is not a positive count of the arguments left gives no keys at all
    /// (the command refuses it), except as Redis's fallback reads it with C's `atoi`
    /// ("1x", " 2"): then the numkeys keys come first and the destination last.
    pub fn key_positions(&self, args: &[Bytes]) -> impl Iterator<Item = usize> {
        let n = args.len();
        let empty = (0..0).step_by(1);
        if !self.subcommands.is_empty() {
            let fixed = self.subcommand(args).map_or(empty.clone(), |sub| {
                fixed_positions(sub.first_key, sub.last_key, sub.step, n)
            });
            return fixed.chain(0..0).chain(None);
        }
        let fixed = fixed_positions(self.first_key, self.last_key, self.step, n);
        if self.flags & STREAMS_KEYS != 0 {
            // Redis reads the row's key spec (STREAMS, then half of what is left)
            // and only when that is out of bounds falls back to xreadGetKeys.
            let keys = self
                .key_specs
                .first()
                .and_then(|spec| spec.keyword_range(args));
            return empty
                .chain(keys.unwrap_or_else(|| streams_keys(args)))
                .chain(None);
        }
        if self.flags & STORE_KEY != 0 {
            return fixed.chain(0..0).chain(store_key(args));
        }
        if self.flags & GEO_STORE_KEYS != 0 {
            // Redis's key specs: the key after the first STORE, then the one after the
            // first STOREDIST, each searched from args[6] (GEORADIUS) or args[5]
            // (GEORADIUSBYMEMBER).
            let from = if self.name == "georadius" { 6 } else { 5 };
            let after = |word: &[u8]| {
                (from..n.saturating_sub(1)).find(|&i| args[i].eq_ignore_ascii_case(word))
            };
            let store = after(b"store").map_or(0..0, |i| i + 1..i + 2);
            return fixed.chain(store).chain(after(b"storedist").map(|i| i + 1));
        }
        let at = if self.flags & NUMKEYS_AT_1 != 0 {
            1
        } else if self.flags & NUMKEYS_AT_2 != 0 {
            2
        } else {
            return fixed.chain(0..0).chain(None);
        };
        let left = n.saturating_sub(at + 1);
        // Redis's key spec: numkeys by string2ll, not negative, then as an int (its
        // low 32 bits).
        let count = args.get(at).and_then(|a| crate::protocol::parse_i64(a));
        let count = count.filter(|&k| k >= 0).map(|k| k as i32);
        if let Some(k) = count.filter(|&k| k >= 1 && k as usize <= left) {
            return fixed.chain(at + 1..at + 1 + k as usize).chain(None);
        }
        // Redis's fallback, the command's own getkeys function.
        let count = args.get(at).map_or(0, |a| atoi(a));
        if count >= 1 && count as usize <= left {
            let dest = (self.first_key > 0).then_some(self.first_key as usize);
            return empty.chain(at + 1..at + 1 + count as usize).chain(dest);
        }
        empty.chain(0..0).chain(None)
    }

    /// The keys of `args`, in order (see `key_positions`).
    pub fn keys<'a>(&self, args: &'a [Bytes]) -> impl Iterator<Item = &'a Bytes> {
        self.key_positions(args).map(|i| &args[i])
    }
}

/// The arguments that make a FENCED_BY_ARGS command write: `None` for a command
/// without such a rule (a row flagged without one is caught by the table's test).
fn fenced_by_args_rule(name: &str) -> Option<fn(&[Bytes]) -> bool> {
    fn has(args: &[Bytes], from: usize, words: &[&str]) -> bool {
        args.iter()
            .skip(from)
            .any(|a| words.iter().any(|w| a.eq_ignore_ascii_case(w.as_bytes())))
    }
    Some(match name {
        // Any op but GET writes (SET, INCRBY; OVERFLOW alone changes nothing, and
        // a BITFIELD with only GETs is a read).
        "bitfield" => |a| {
            a.iter()
                .skip(2)
                .any(|w| w.eq_ignore_ascii_case(b"set") || w.eq_ignore_ascii_case(b"incrby"))
        },
        "sort" => |a| has(a, 2, &["store"]),
        "georadius" | "georadiusbymember" => |a| has(a, 2, &["store", "storedist"]),
        "getex" => |a| has(a, 2, &["ex", "px", "exat", "pxat", "persist"]),
        "xgroup" => |a| {
            a.get(1).is_some_and(|s| s.eq_ignore_ascii_case(b"create")) && has(a, 5, &["mkstream"])
        },
        _ => return None,
    })
}

fn fenced_by_args(name: &str, args: &[Bytes]) -> bool {
    // A row flagged without a rule is fenced always (and fails the table's test).
    fenced_by_args_rule(name).is_none_or(|rule| rule(args))
}

/// The names COMMAND INFO lists for `flags`, in Redis 7's order (a command's or a
/// subcommand's). Redis's `pubsub` flag marks the @pubsub commands (SUBSCRIBE,
/// PUBLISH, PUBSUB CHANNELS...), not what our PUBSUB flag means (allowed while
/// subscribed: PING, QUIT, RESET too). Redis's flags about replicas, loading and the
/// monitor (`loading`, `stale`, `skip_monitor`...) are not modelled.
fn flag_names(flags: u32, cats: u32) -> Vec<&'static str> {
    let has = |bits: u32| flags & bits != 0;
    let names = [
        (has(WRITE), "write"),
        (has(READONLY), "readonly"),
        (has(DENYOOM), "denyoom"),
        (has(ADMIN), "admin"),
        (cats & cats::C_PUBSUB != 0, "pubsub"),
        (has(NOSCRIPT), "noscript"),
        (has(BLOCKING), "blocking"),
        (has(FAST), "fast"),
        (has(NO_AUTH), "no_auth"),
        (has(NO_MANDATORY_KEYS), "no_mandatory_keys"),
        (has(NO_MULTI), "no_multi"),
        (
            has(NUMKEYS_AT_1 | NUMKEYS_AT_2 | STREAMS_KEYS | MOVABLE | GEO_STORE_KEYS),
            "movablekeys",
        ),
        (has(ALLOW_BUSY), "allow_busy"),
    ];
    names
        .into_iter()
        .filter(|(on, _)| *on)
        .map(|(_, name)| name)
        .collect()
}

/// The positions first..=last (negative last: from the end) by step, within `n`
/// arguments.
fn fixed_positions(
    first: i32,
    last: i32,
    step: i32,
    n: usize,
) -> std::iter::StepBy<std::ops::Range<usize>> {
    let range = if first <= 0 || first as usize >= n {
        0..0
    } else {
        let last = if last < 0 {
            n as i32 + last
        } else {
            last.min(n as i32 - 1)
        };
        (first as usize)..(last.max(first - 1) + 1) as usize
    };
    range.step_by(step.max(1) as usize)
}

/// XREAD's and XREADGROUP's keys, as Redis's xreadGetKeys finds them: the options
/// are skipped up to STREAMS; then half of what follows (none for a syntax error).
fn streams_keys(args: &[Bytes]) -> std::ops::Range<usize> {
    let mut i = 1;
    while i < args.len() {
        let a = &args[i][..];
        if a.eq_ignore_ascii_case(b"block") || a.eq_ignore_ascii_case(b"count") {
            i += 2;
        } else if a.eq_ignore_ascii_case(b"group") {
            i += 3;
        } else if a.eq_ignore_ascii_case(b"noack") {
            i += 1;
        } else if a.eq_ignore_ascii_case(b"streams") {
            let num = args.len() - i - 1;
            if num == 0 || !num.is_multiple_of(2) {
                return 0..0;
            }
            return i + 1..i + 1 + num / 2;
        } else {
            break;
        }
    }
    0..0
}

/// The position of SORT's destination key: after the last STORE that has an argument
/// after it, LIMIT's two arguments and BY's and GET's one skipped, as Redis's
/// sortGetKeys reads them.
fn store_key(args: &[Bytes]) -> Option<usize> {
    let mut found = None;
    let mut i = 2;
    while i < args.len() {
        let a = &args[i];
        if a.eq_ignore_ascii_case(b"limit") {
            i += 2;
        } else if a.eq_ignore_ascii_case(b"get") || a.eq_ignore_ascii_case(b"by") {
            i += 1;
        } else if a.eq_ignore_ascii_case(b"store") && i + 1 < args.len() {
            found = Some(i + 1);
        }
        i += 1;
    }
    found
}

/// C's `atoi` as glibc has it: `(int) strtol(s, NULL, 10)`: leading white space, a
/// sign, then as many digits as there are (none: 0), clamped to a long, then cut to
/// its low 32 bits.
fn atoi(arg: &[u8]) -> i32 {
    let start = arg.iter().position(|b| !b" \t\n\x0b\x0c\r".contains(b));
    let s = &arg[start.unwrap_or(arg.len())..];
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let mut value: i64 = 0;
    for d in digits.iter().take_while(|b| b.is_ascii_digit()) {
        let d = i64::from(d - b'0');
        value = if neg {
            value.saturating_mul(10).saturating_sub(d)
        } else {
            value.saturating_mul(10).saturating_add(d)
        };
    }
    value as i32
}

/// Every subcommand, in `SUB_ROWS` order (grouped by parent).
pub static SUBCOMMANDS: LazyLock<Vec<Subcommand>> = LazyLock::new(|| {
    SUB_ROWS
        .iter()
        .enumerate()
        .map(|(i, row)| {
            let (first_key, last_key, step) = key_specs::legacy_range(row.keys);
            Subcommand {
                fullname: row.name,
                arity: row.arity,
                flags: row.flags,
                cats: row.cats,
                key_specs: row.keys,
                first_key,
                last_key,
                step,
                id: ROWS.len() + i,
            }
        })
        .collect()
});

/// Every command, in table order.
pub static COMMANDS: LazyLock<Vec<Spec>> = LazyLock::new(|| {
    ROWS.iter()
        .enumerate()
        .map(|(index, row)| {
            let Row {
                name,
                arity,
                flags,
                cats,
                keys,
            } = *row;
            let subs = &SUBCOMMANDS[..];
            let start = subs
                .iter()
                .position(|s| is_sub_of(s.fullname, name))
                .unwrap_or(0);
            let len = subs[start..]
                .iter()
                .take_while(|s| is_sub_of(s.fullname, name))
                .count();
            assert!(
                len == 0 || keys.is_empty(),
                "{name}: a container's keys are its subcommands'"
            );
            // A container has no flags, as in Redis: every check reads its
            // subcommand's (`Spec::flags_of`).
            assert!(
                len == 0 || flags == 0,
                "{name}: a container's flags are its subcommands'"
            );
            let (first_key, last_key, step) = key_specs::legacy_range(keys);
            Spec {
                name,
                arity,
                flags,
                cats: with_implicit_cats(flags, cats),
                key_specs: keys,
                first_key,
                last_key,
                step,
                index,
                subcommands: &SUBCOMMANDS[start..start + len],
            }
        })
        .collect()
});

/// A row's categories plus those its flags imply, as Redis's
/// `setImplicitACLCategories` adds them: write -> @write, readonly -> @read (not for
/// @scripting commands), admin -> @admin @dangerous, fast -> @fast, blocking ->
/// @blocking, and whatever is not @fast is @slow. (Our PUBSUB flag means "allowed
/// while subscribed", not Redis's pubsub flag: @pubsub stays explicit.)
fn with_implicit_cats(flags: u32, cats: u32) -> u32 {
    let mut out = cats;
    let implied = [
        (WRITE, C_WRITE),
        (ADMIN, C_ADMIN | C_DANGEROUS),
        (FAST, C_FAST),
        (BLOCKING, C_BLOCKING),
    ];
    for (flag, cat) in implied {
        if flags & flag != 0 {
            out |= cat;
        }
    }
    if flags & READONLY != 0 && cats & C_SCRIPTING == 0 {
        out |= C_READ;
    }
    if out & C_FAST == 0 {
        out |= C_SLOW;
    }
    out
}

/// Whether `fullname` (`parent|sub`) is a subcommand of `parent`.
fn is_sub_of(fullname: &str, parent: &str) -> bool {
    fullname
        .strip_prefix(parent)
        .is_some_and(|rest| rest.starts_with('|'))
}

/// The name table: open addressing over a power-of-two array of `COMMANDS` indices
/// (+1; 0 is empty), at most a quarter full, looked up without copying the name.
/// The hash folds ASCII case (`b | 0x20`), so "GET", "get" and "GeT" probe the same
/// slots, and a candidate is confirmed with `eq_ignore_ascii_case`. Unkeyed: the
/// table is fixed at startup, so no input can add collisions to it. It replaced a
/// HashMap keyed by the lowercased name (a copy, then FNV over a length prefix and
/// the bytes): ~190 instructions per lookup, and every command runs one.
static BY_NAME: LazyLock<Box<[u16]>> = LazyLock::new(|| {
    let size = (COMMANDS.len() * 4).next_power_of_two();
    let mut slots = vec![0u16; size].into_boxed_slice();
    for spec in COMMANDS.iter() {
        let mut at = name_hash(spec.name.as_bytes()) & (size - 1);
        while slots[at] != 0 {
            at = (at + 1) & (size - 1);
        }
        slots[at] = u16::try_from(spec.index + 1).expect("fewer than 65535 commands");
    }
    slots
});

/// Eight bytes at a time (most names are one or two words), case folded by setting
/// bit 5 of every byte.
fn name_hash(name: &[u8]) -> usize {
    const FOLD: u64 = 0x2020_2020_2020_2020;
    const MIX: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h = name.len() as u64;
    for chunk in name.chunks(8) {
        let mut word = [0u8; 8];
        word[..chunk.len()].copy_from_slice(chunk);
        h = (h ^ (u64::from_le_bytes(word) | FOLD))
            .wrapping_mul(MIX)
            .rotate_left(29);
    }
    (h.wrapping_mul(MIX) >> 32) as usize
}

/// Finds a command by name, in any case.
pub fn lookup(name: &[u8]) -> Option<&'static Spec> {
    let slots = &*BY_NAME;
    let mask = slots.len() - 1;
    let mut at = name_hash(name) & mask;
    loop {
        let spec = &COMMANDS[usize::from(slots[at]).checked_sub(1)?];
        if spec.name.as_bytes().eq_ignore_ascii_case(name) {
            return Some(spec);
        }
        at = (at + 1) & mask;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<Bytes> {
        words
            .iter()
            .map(|w| Bytes::copy_from_slice(w.as_bytes()))
            .collect()
    }

    /// The one rule for every write path (issue 41): a command that can create a key
    /// or lengthen a TTL is fenced by its row, FENCED or FENCED_BY_ARGS, never by
    /// its handler alone. Walks every row and subcommand: each `denyoom` one (Redis's
    /// mark for "may add data") and each TTL setter is fenced by the table, except
    /// the few that provably create nothing; each FENCED_BY_ARGS row has a rule,
    /// fenced for its writing arguments and not for its reads.
    #[test]
    fn every_row_that_can_create_a_key_is_fenced_by_the_table() {
        // These change what exists (or the function libraries), never create a key.
        const DENYOOM_UNFENCED: &[&str] = &[
            "lset",
            "linsert",
            "xsetid",
            "pfdebug",
            "xgroup|createconsumer",
            "function|load",
            "function|restore",
        ];
        const TTL_SETTERS: &[&str] = &[
            "expire",
            "pexpire",
            "expireat",
            "pexpireat",
            "persist",
            "getex",
        ];
        let rows = COMMANDS
            .iter()
            .filter(|c| c.subcommands.is_empty())
            .map(|c| (c.name, c.flags))
            .chain(SUBCOMMANDS.iter().map(|s| (s.fullname, s.flags)));
        let mut walked = 0;
        for (name, f) in rows {
            walked += 1;
            let fenced = f & (FENCED | FENCED_BY_ARGS) != 0;
            if (f & DENYOOM != 0 && !DENYOOM_UNFENCED.contains(&name))
                || TTL_SETTERS.contains(&name)
            {
                assert!(
                    fenced,
                    "{name} can create a key or lengthen a TTL but is not fenced by its row"
                );
            }
            if f & FENCED_BY_ARGS != 0 {
                let base = name.split('|').next().unwrap();
                assert!(
                    fenced_by_args_rule(base).is_some(),
                    "{name} has no argument rule"
                );
            }
        }
        assert!(walked > 300, "{walked} rows");
        let cases: &[(&[&str], bool)] = &[
            (&["BITFIELD", "k", "SET", "u8", "0", "1"], true),
            (
                &["BITFIELD", "k", "GET", "u8", "0", "INCRBY", "u8", "0", "1"],
                true,
            ),
            (&["BITFIELD", "k", "GET", "u8", "0"], false),
            (&["SORT", "l", "STORE", "d"], true),
            (&["SORT", "l", "ALPHA"], false),
            (
                &["GEORADIUS", "z", "0", "0", "1", "km", "STOREDIST", "d"],
                true,
            ),
            (&["GEORADIUS", "z", "0", "0", "1", "km"], false),
            (
                &["GEORADIUSBYMEMBER", "z", "m", "1", "km", "STORE", "d"],
                true,
            ),
            (&["GETEX", "k", "PX", "100"], true),
            (&["GETEX", "k", "PERSIST"], true),
            (&["GETEX", "k"], false),
            (&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"], true),
            (&["XGROUP", "CREATE", "s", "g", "$"], false),
            (&["XGROUP", "DESTROY", "s", "g"], false),
            (&["SET", "k", "v"], true),
            (&["GET", "k"], false),
        ];
        for (words, want) in cases {
            let args = argv(words);
            let spec = lookup(&args[0]).unwrap();
            assert_eq!(spec.fenced(&args), *want, "{words:?}");
        }
    }

    #[test]
    fn every_command_is_found_in_any_case() {
        for spec in COMMANDS.iter() {
            let upper = spec.name.to_ascii_uppercase();
            assert_eq!(lookup(upper.as_bytes()).map(|s| s.index), Some(spec.index));
            assert_eq!(
                lookup(spec.name.as_bytes()).map(|s| s.index),
                Some(spec.index)
            );
        }
        assert!(lookup(b"nosuchcommand").is_none());
        assert_eq!(lookup(b"EvalSha").map(|s| s.name), Some("evalsha"));
        // A name that folds to a command's under `| 0x20` but is not it ('_' and
        // DEL fold alike), and one that is not ASCII.
        assert_eq!(lookup(b"EVAL_RO").map(|s| s.name), Some("eval_ro"));
        assert!(lookup(b"eval\x7fro").is_none());
        assert!(lookup(b"g\xc5t").is_none());
        assert!(lookup(b"").is_none());
        assert!(lookup(&[b'x'; 100]).is_none());
        assert!(lookup(b"").is_none());
        assert!(lookup(&[b'g'; 40]).is_none());
    }

    /// A RESP2 reply, parsed: simple strings, bulk strings and integers as text,
    /// arrays as lists.
    #[derive(Debug, PartialEq)]
    enum R {
        S(String),
        A(Vec<R>),
    }

    fn parse(b: &[u8], at: &mut usize) -> R {
        let end = *at + b[*at..].windows(2).position(|w| w == b"\r\n").unwrap();
        let line = std::str::from_utf8(&b[*at + 1..end]).unwrap().to_string();
        let kind = b[*at];
        *at = end + 2;
        match kind {
            b'+' | b':' | b'-' => R::S(line),
            b'$' => {
                let n: usize = line.parse().unwrap();
                let s = String::from_utf8(b[*at..*at + n].to_vec()).unwrap();
                *at += n + 2;
                R::S(s)
            }
            b'*' => R::A(
                (0..line.parse::<usize>().unwrap())
                    .map(|_| parse(b, at))
                    .collect(),
            ),
            other => panic!("{}", other as char),
        }
    }

    fn call(s: &mut crate::inmem::Session, args: &[&str]) -> R {
        let mut out = bytes::BytesMut::new();
        s.call(args, &mut out);
        parse(&out, &mut 0)
    }

    fn texts(r: &R) -> Vec<&str> {
        let R::A(items) = r else { panic!("{r:?}") };
        items
            .iter()
            .map(|i| match i {
                R::S(s) => s.as_str(),
                other => panic!("{other:?}"),
            })
            .collect()
    }

    /// COMMAND INFO's flags and ACL categories are redis-server 7.0's, less the flags
    /// redlockd does not model (replicas, loading, the monitor).
    #[test]
    fn command_info_gives_redis_flags_and_acl_categories() {
        let mut s = crate::inmem::Session::new(crate::config::Config::for_tests());
        let cases: [(&str, &[&str], &[&str]); 19] = [
            (
                "sadd",
                &["write", "denyoom", "fast"],
                &["@write", "@set", "@fast"],
            ),
            (
                "hset",
                &["write", "denyoom", "fast"],
                &["@write", "@hash", "@fast"],
            ),
            (
                "set",
                &["write", "denyoom"],
                &["@write", "@string", "@slow"],
            ),
            (
                "setnx",
                &["write", "denyoom", "fast"],
                &["@write", "@string", "@fast"],
            ),
            ("get", &["readonly", "fast"], &["@read", "@string", "@fast"]),
            (
                "zunion",
                &["readonly", "movablekeys"],
                &["@read", "@sortedset", "@slow"],
            ),
            (
                "eval",
                &["noscript", "no_mandatory_keys", "movablekeys"],
                &["@slow", "@scripting"],
            ),
            // Each kind of movable keys alone makes a command "movablekeys".
            (
                "xread",
                &["readonly", "blocking", "movablekeys"],
                &["@read", "@stream", "@slow", "@blocking"],
            ),
            (
                "sort",
                &["write", "denyoom", "movablekeys"],
                &[
                    "@write",
                    "@set",
                    "@sortedset",
                    "@list",
                    "@slow",
                    "@dangerous",
                ],
            ),
            (
                "georadius",
                &["write", "denyoom", "movablekeys"],
                &["@write", "@geo", "@slow"],
            ),
            ("subscribe", &["pubsub", "noscript"], &["@pubsub", "@slow"]),
            ("publish", &["pubsub", "fast"], &["@pubsub", "@fast"]),
            ("ping", &["fast"], &["@fast", "@connection"]),
            (
                "blpop",
                &["write", "noscript", "blocking"],
                &["@write", "@list", "@slow", "@blocking"],
            ),
            (
                "expire",
                &["write", "fast"],
                &["@keyspace", "@write", "@fast"],
            ),
            (
                "flushall",
                &["write"],
                &["@keyspace", "@write", "@slow", "@dangerous"],
            ),
            (
                "shutdown",
                &["admin", "noscript", "no_multi", "allow_busy"],
                &["@admin", "@slow", "@dangerous"],
            ),
            (
                "multi",
                &["noscript", "fast", "allow_busy"],
                &["@fast", "@transaction"],
            ),
            (
                "hello",
                &["noscript", "fast", "no_auth", "allow_busy"],
                &["@fast", "@connection"],
            ),
        ];
        for (name, flags, cats) in cases {
            let R::A(infos) = call(&mut s, &["COMMAND", "INFO", name]) else {
                panic!()
            };
            let R::A(info) = &infos[0] else {
                panic!("{name}: {infos:?}")
            };
            assert_eq!(info[0], R::S(name.into()));
            assert_eq!(texts(&info[2]), flags, "{name}'s flags");
            assert_eq!(texts(&info[6]), cats, "{name}'s ACL categories");
        }
    }

    /// A subcommand's ACL categories hold those its flags imply, as Redis's
    /// `setImplicitACLCategories` gives them (write: @write, admin: @admin @dangerous,
    /// readonly: @read...), so the flags and the categories of a row cannot disagree.
    #[test]
    fn subcommand_categories_follow_their_flags() {
        for sub in SUBCOMMANDS.iter() {
            assert_eq!(
                cats::names(with_implicit_cats(sub.flags, sub.cats)).collect::<Vec<_>>(),
                cats::names(sub.cats).collect::<Vec<_>>(),
                "{}",
                sub.fullname
            );
        }
    }

    /// The checks read a subcommand's flags (`Spec::flags_of`), a plain command's row.
    #[test]
    fn flags_of_reads_the_subcommand() {
        let of = |args: &[&str]| {
            let args: Vec<Bytes> = args.iter().map(|a| Bytes::from(a.to_string())).collect();
            lookup(&args[0]).unwrap().flags_of(&args)
        };
        assert_eq!(
            of(&["XGROUP", "CREATE", "s", "g", "$"]),
            WRITE | DENYOOM | FENCED_BY_ARGS
        );
        assert_eq!(of(&["xgroup", "destroy", "s", "g"]), WRITE);
        assert_eq!(of(&["XINFO", "STREAM", "s"]), READONLY);
        assert_eq!(of(&["XINFO", "HELP"]), 0);
        assert_eq!(of(&["XINFO", "NOSUCH"]), 0);
        assert_eq!(of(&["CONFIG", "SET", "a", "b"]), ADMIN | NOSCRIPT);
        assert_eq!(of(&["GET", "k"]), READONLY | FAST);
    }

    /// ACL CAT: the categories in Redis's order, and a category's commands.
    #[test]
    fn acl_cat_lists_redis_categories_and_their_commands() {
        let mut s = crate::inmem::Session::new(crate::config::Config::for_tests());
        assert_eq!(texts(&call(&mut s, &["ACL", "CAT"])), cats::NAMES);
        let mut tx = texts(&call(&mut s, &["ACL", "CAT", "TRANSACTION"]))
            .into_iter()
            .map(String::from)
            .collect::<Vec<_>>();
        tx.sort();
        assert_eq!(tx, ["discard", "exec", "multi", "unwatch", "watch"]);
        let scripting = call(&mut s, &["ACL", "CAT", "scripting"]);
        assert!(texts(&scripting).contains(&"script|kill"), "{scripting:?}");
        assert!(!texts(&scripting).contains(&"get"), "{scripting:?}");
        assert_eq!(
            call(&mut s, &["ACL", "CAT", "nosuch"]),
            R::S("ERR Unknown category 'nosuch'".into())
        );
    }

    /// While a script runs past its time limit, only what Redis marks `allow_busy`
    /// runs: for a container command, its subcommand decides.
    #[test]
    fn allow_busy_is_per_subcommand() {
        let busy = |args: &[&str]| {
            let args: Vec<Bytes> = args.iter().map(|a| Bytes::from(a.to_string())).collect();
            lookup(&args[0]).unwrap().allows_busy(&args)
        };
        assert!(busy(&["SCRIPT", "KILL"]));
        assert!(busy(&["script", "kill"]));
        assert!(busy(&["FUNCTION", "KILL"]));
        assert!(busy(&["FUNCTION", "STATS"]));
        assert!(!busy(&["SCRIPT", "LOAD", "return 1"]));
        assert!(!busy(&["SCRIPT", "NOSUCH"]));
        assert!(!busy(&["SCRIPT"]));
        assert!(busy(&["SHUTDOWN", "NOSAVE"]));
        assert!(busy(&["AUTH", "pw"]));
        assert!(!busy(&["GET", "k"]));
        assert!(!busy(&["EVAL", "return 1", "0"]));
        let script = lookup(b"script").unwrap();
        let args = [Bytes::from("SCRIPT"), Bytes::from("Flush")];
        assert_eq!(
            script.subcommand(&args).map(|s| s.fullname),
            Some("script|flush")
        );
    }

    /// In RESP2 subscribed mode only the commands Redis allows there run (the PUBSUB
    /// flag), with redis-server 7.0's replies.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn subscribed_mode_allows_ping_and_refuses_get() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let server = crate::testing::TestServer::start().await;
        let mut c = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
        c.write_all(b"SUBSCRIBE ch\r\nPING\r\nGET k\r\n")
            .await
            .unwrap();
        let want = "*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n*2\r\n$4\r\npong\r\n$0\r\n\r\n-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n";
        let mut got = Vec::new();
        while got.len() < want.len() {
            let mut buf = [0u8; 512];
            let n = tokio::time::timeout(std::time::Duration::from_secs(10), c.read(&mut buf))
                .await
                .expect("replies within 10 s")
                .unwrap();
            assert!(n > 0, "closed after {:?}", String::from_utf8_lossy(&got));
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(String::from_utf8_lossy(&got), want);
        drop(c);
        server.shutdown().await;
    }
}
