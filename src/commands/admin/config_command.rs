//! CONFIG GET / SET / RESETSTAT: every setting of Redis 7.0 by its name and its alias
//! (`redis_settings::SETTINGS`), validated as Redis validates it. The settings redlockd
//! applies (`APPLIED`) are read from and written to the node; the rest are stored per
//! node and reported, and change nothing here (docs/compatibility.md). redlockd's own
//! settings (`OWN`) are reported too; the lock-delay's can be set.

use super::redis_settings::{self, Access, Found, Setting};
use crate::commands::{CmdResult, Ctx};
use crate::config::{AuthClients, Config, TlsConfig};
use crate::glob;
use crate::node::Shared;
use crate::protocol::{errors, Reply};
use bytes::Bytes;
use std::path::PathBuf;
use std::sync::atomic::Ordering::Relaxed;

/// CONFIG GET pattern... | CONFIG SET name value... | CONFIG RESETSTAT
pub fn config(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    match sub.as_str() {
        "get" => {
            if args.len() < 3 {
                return Err(errors::wrong_arity("config|get"));
            }
            Ok(config_get(ctx.shared, &args[2..]))
        }
        "set" => config_set(ctx.shared, &args[2..]),
        "resetstat" if args.len() == 2 => {
            ctx.shared.stats.reset();
            Ok(Reply::Ok)
        }
        _ => Err(errors::unknown_subcommand("config", &args[1])),
    }
}

/// Reads a setting's value from the node, in CONFIG GET's form.
type Get = fn(&Shared) -> String;

/// A Redis setting that redlockd applies: where its value lives on the node.
struct Applied {
    name: &'static str,
    get: Get,
    /// How CONFIG SET changes it (the value in CONFIG GET's form, checked by Redis's
    /// rules); `None`: fixed when the node starts (its flag), refused as immutable.
    set: Option<fn(&Shared, &str)>,
    /// A value Redis takes that redlockd refuses, and why.
    refuse: fn(&str) -> Option<&'static str>,
}

/// Whatever Redis takes.
fn takes_all(_: &str) -> Option<&'static str> {
    None
}

/// A setting read from the node that CONFIG SET cannot change.
const fn fixed(name: &'static str, get: Get) -> Applied {
    Applied {
        name,
        get,
        set: None,
        refuse: takes_all,
    }
}

/// A setting CONFIG SET changes on the running node.
const fn live(name: &'static str, get: Get, set: fn(&Shared, &str)) -> Applied {
    Applied {
        name,
        get,
        set: Some(set),
        refuse: takes_all,
    }
}

/// A number CONFIG SET checked against the setting's bounds.
fn num(value: &str) -> i64 {
    value.parse().unwrap_or_default()
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.to_string()
}

/// The Redis settings redlockd applies. Every other one is stored and reported.
const APPLIED: &[Applied] = &[
    fixed("bind", |s| s.config.bind.to_string()),
    fixed("port", |s| {
        let c = &s.config;
        if c.plain { c.port } else { 0 }.to_string()
    }),
    fixed("tls-port", |s| {
        s.config.tls.as_ref().map_or(0, |t| t.port).to_string()
    }),
    fixed("tls-cert-file", |s| {
        tls_path(&s.config, |t| Some(&t.cert_file))
    }),
    fixed("tls-key-file", |s| {
        tls_path(&s.config, |t| Some(&t.key_file))
    }),
    fixed("tls-ca-cert-file", |s| {
        tls_path(&s.config, |t| t.ca_cert_file.as_ref())
    }),
    fixed("tls-auth-clients", |s| {
        let auth = s
            .config
            .tls
            .as_ref()
            .map_or(AuthClients::Yes, |t| t.auth_clients);
        match auth {
            AuthClients::Yes => "yes",
            AuthClients::Optional => "optional",
            AuthClients::No => "no",
        }
        .to_string()
    }),
    fixed("databases", |s| s.config.databases.to_string()),
    fixed("proto-max-bulk-len", |s| {
        s.config.proto_max_bulk_len.to_string()
    }),
    fixed("requirepass", |s| {
        s.config.requirepass.clone().unwrap_or_default()
    }),
    fixed("aclfile", |s| {
        let file = s.config.aclfile.as_ref();
        file.map_or(String::new(), |p| p.display().to_string())
    }),
    fixed("cluster-enabled", |s| yes_no(s.cluster.enabled())),
    fixed("enable-debug-command", |s| {
        yes_no(s.config.enable_debug_command)
    }),
    fixed("dir", |s| {
        let dir = s.node_dir.as_ref().map(|d| d.path().to_path_buf());
        dir.or_else(|| std::env::current_dir().ok())
            .map_or(String::new(), |d| d.display().to_string())
    }),
    live(
        "maxclients",
        |s| s.maxclients().to_string(),
        |s, v| s.set_maxclients(num(v) as usize),
    ),
    live(
        "slowlog-log-slower-than",
        |s| s.stats.slowlog.slower_than_us.load(Relaxed).to_string(),
        |s, v| s.stats.slowlog.slower_than_us.store(num(v), Relaxed),
    ),
    live(
        "slowlog-max-len",
        |s| s.stats.slowlog.max_len.load(Relaxed).to_string(),
        |s, v| s.stats.slowlog.set_max_len(num(v) as usize),
    ),
    live(
        "latency-monitor-threshold",
        |s| s.stats.latency.threshold_ms.load(Relaxed).to_string(),
        |s, v| s.stats.latency.threshold_ms.store(num(v) as u64, Relaxed),
    ),
    live(
        "busy-reply-threshold",
        |s| s.scripts.busy_ms().to_string(),
        |s, v| s.scripts.set_busy_ms(num(v) as u64),
    ),
    live(
        "protected-mode",
        |s| yes_no(s.acl.protected_mode()),
        |s, v| s.acl.set_protected_mode(v == "yes"),
    ),
    // Memory form: up to u64::MAX, which `num` would not read.
    live(
        "maxmemory",
        |s| s.maxmemory().to_string(),
        |s, v| s.set_maxmemory(v.parse().unwrap_or_default()),
    ),
    Applied {
        name: "maxmemory-policy",
        get: |_| "noeviction".to_string(),
        set: Some(|_, _| {}),
        refuse: |v| {
            (v != "noeviction")
                .then_some("redlockd never evicts a lock: noeviction is the only policy")
        },
    },
    // The append-only log's settings are chosen at start (their flags).
    Applied {
        name: "appendonly",
        get: |s| yes_no(s.aof.enabled()),
        set: None,
        refuse: takes_all,
    },
    live(
        "stream-node-max-entries",
        |s| s.streams.limits().max_entries.to_string(),
        |s, v| s.streams.set_max_entries(num(v) as u64),
    ),
    live(
        "stream-node-max-bytes",
        |s| s.streams.limits().max_bytes.to_string(),
        |s, v| s.streams.set_max_bytes(num(v) as u64),
    ),
    live(
        "notify-keyspace-events",
        |s| crate::commands::notify::text(s.notify.flags()),
        |s, v| {
            crate::commands::notify::configure(s, crate::commands::notify::parse(v).unwrap_or(0))
        },
    ),
    live(
        "hll-sparse-max-bytes",
        |s| s.hll_sparse_max_bytes.load(Relaxed).to_string(),
        |s, v| s.hll_sparse_max_bytes.store(num(v) as u64, Relaxed),
    ),
];

/// Stored settings whose default here is not Redis's: redlockd never writes an RDB
/// file, so it reports no save points until CONFIG SET gives some.
pub const OWN_DEFAULTS: &[(&str, &str)] = &[("save", "")];

/// One of redlockd's own settings (its flags), reported by CONFIG GET.
struct Own {
    name: &'static str,
    get: Get,
    /// How CONFIG SET checks a value (the reason it is refused) and applies it;
    /// `None`: fixed when the node starts, refused as immutable.
    set: Option<(OwnCheck, OwnApply)>,
}

/// Why CONFIG SET refuses a value of one of redlockd's own settings.
type OwnCheck = fn(&Shared, &[u8]) -> Result<(), String>;

/// How CONFIG SET applies a checked value of one of redlockd's own settings.
type OwnApply = fn(&Shared, &[u8]);

/// redlockd's own settings: `--max-ttl`, `--restart-delay` and `--require-ttl` are
/// fixed at start; the lock-delay is live.
const OWN: &[Own] = &[
    Own {
        name: "max-ttl",
        get: |s| s.config.max_ttl.as_millis().to_string(),
        set: None,
    },
    Own {
        name: "restart-delay",
        get: |s| s.config.effective_restart_delay().as_millis().to_string(),
        set: None,
    },
    Own {
        name: "require-ttl",
        get: |s| yes_no(s.config.require_ttl),
        set: None,
    },
    Own {
        name: "lock-delay",
        get: |s| s.keyspace.lock_delay().ms().to_string(),
        set: Some((check_lock_delay, |s, v| {
            let ms = lock_delay_ms(v).unwrap_or_default();
            s.keyspace.lock_delay().set_ms(ms)
        })),
    },
    Own {
        name: "lock-delay-prefix",
        get: |s| {
            let prefixes = s.keyspace.lock_delay().prefixes();
            let names: Vec<_> = prefixes
                .iter()
                .map(|p| String::from_utf8_lossy(p))
                .collect();
            names.join(",")
        },
        set: Some((
            |_, _| Ok(()),
            |s, v| {
                let list = (v.split(|&b| b == b','))
                    .filter(|p| !p.is_empty())
                    .map(Bytes::copy_from_slice);
                s.keyspace.lock_delay().set_prefixes(list.collect())
            },
        )),
    },
    Own {
        name: "lock-introspection",
        get: |s| yes_no(s.locks.on()),
        set: Some((
            |_, v| match v {
                b"yes" | b"no" => Ok(()),
                _ => Err("argument must be 'yes' or 'no'".into()),
            },
            |s, v| crate::commands::families::locks::set_on(s, v == b"yes"),
        )),
    },
];

/// A lock-delay as CONFIG SET takes it: a duration (1500, 1500ms, 5s, 2m), in ms.
fn lock_delay_ms(value: &[u8]) -> Option<u64> {
    let text = String::from_utf8_lossy(value);
    let ms = crate::config::parse_duration(&text).ok()?.as_millis();
    u64::try_from(ms).ok()
}

/// The lock-delay's bounds: a duration, at most the node's max-ttl.
fn check_lock_delay(shared: &Shared, value: &[u8]) -> Result<(), String> {
    let ms = lock_delay_ms(value)
        .ok_or_else(|| "argument must be a duration (1500, 1500ms, 5s, 2m)".to_string())?;
    let max = shared.fence.max_ttl_ms();
    if ms > max {
        return Err(format!("argument must be at most max-ttl ({max} ms)"));
    }
    Ok(())
}

fn own(name: &[u8]) -> Option<&'static Own> {
    OWN.iter()
        .find(|o| o.name.as_bytes().eq_ignore_ascii_case(name))
}

fn applied(s: &Setting) -> Option<&'static Applied> {
    APPLIED.iter().find(|a| a.name == s.name)
}

/// Whether CONFIG SET is refused here though Redis takes it: a setting redlockd reads
/// from a flag at start, and every TLS setting (the certificates are loaded at start,
/// and a cipher or protocol setting stored but not applied would mislead).
fn fixed_here(s: &Setting) -> bool {
    applied(s).is_some_and(|a| a.set.is_none()) || s.name.starts_with("tls-")
}

/// What CONFIG GET shows for a Redis setting on this node.
fn value(shared: &Shared, s: &'static Setting) -> Vec<u8> {
    if let Some(a) = applied(s) {
        return (a.get)(shared).into_bytes();
    }
    let own_default = OWN_DEFAULTS.iter().find(|(n, _)| *n == s.name);
    shared.redis_settings.get(s, own_default.map(|(_, d)| *d))
}

/// A TLS file setting as CONFIG GET shows it (empty when unset, as in Redis).
fn tls_path(c: &Config, path: impl Fn(&TlsConfig) -> Option<&PathBuf>) -> String {
    c.tls
        .as_ref()
        .and_then(path)
        .map(|p| p.display().to_string())
        .unwrap_or_default()
}

/// CONFIG GET: a name without glob characters is looked up (and answered under the
/// name as the client wrote it, as Redis does); a pattern matches every name and alias
/// but the hidden ones.
fn config_get(shared: &Shared, patterns: &[Bytes]) -> Reply {
    let mut pairs: Vec<(Bytes, Vec<u8>)> = Vec::new();
    let add = |pairs: &mut Vec<(Bytes, Vec<u8>)>, name: Bytes, value: &dyn Fn() -> Vec<u8>| {
        // Redis's dictionary of matches is case-insensitive, as its names are.
        if !pairs.iter().any(|(n, _)| n.eq_ignore_ascii_case(&name)) {
            pairs.push((name, value()));
        }
    };
    for p in patterns {
        if !p.iter().any(|c| matches!(c, b'[' | b'*' | b'?')) {
            if let Some(found) = redis_settings::lookup(p) {
                add(&mut pairs, p.clone(), &|| value(shared, found.setting));
            } else if let Some(o) = own(p) {
                add(&mut pairs, p.clone(), &|| (o.get)(shared).into_bytes());
            }
            continue;
        }
        let pattern = p.to_ascii_lowercase();
        for (name, s) in redis_settings::visible_names() {
            if glob::matches(&pattern, name.as_bytes()) {
                add(&mut pairs, Bytes::from_static(name.as_bytes()), &|| {
                    value(shared, s)
                });
            }
        }
        for o in OWN {
            if glob::matches(&pattern, o.name.as_bytes()) {
                add(&mut pairs, Bytes::from_static(o.name.as_bytes()), &|| {
                    (o.get)(shared).into_bytes()
                });
            }
        }
    }
    Reply::Map(
        pairs
            .into_iter()
            .map(|(n, v)| (Reply::Bulk(n), Reply::Bulk(Bytes::from(v))))
            .collect(),
    )
}

/// `CONFIG SET name value [name value ...]`: all or nothing, checked in Redis's order
/// (names first: unknown, immutable or protected, repeated; then each value).
fn config_set(shared: &Shared, pairs: &[Bytes]) -> CmdResult {
    if pairs.len() < 2 {
        return Err(errors::wrong_arity("config|set"));
    }
    if !pairs.len().is_multiple_of(2) {
        return Err(errors::syntax());
    }
    let failed = |name: &str, why: &str| {
        Reply::error(format!(
            "ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"
        ))
    };
    let mut found: Vec<Found> = Vec::new();
    let mut own_found: Vec<(&Own, &Bytes)> = Vec::new();
    for pair in pairs.chunks(2) {
        let given = errors::printable(&pair[0]);
        let Some(f) = redis_settings::lookup(&pair[0]) else {
            if let Some(o) = own(&pair[0]) {
                if o.set.is_none() {
                    return Err(failed(&given, "can't set immutable config"));
                }
                if own_found.iter().any(|(seen, _)| seen.name == o.name) {
                    return Err(failed(&given, "duplicate parameter"));
                }
                own_found.push((o, &pair[1]));
                continue;
            }
            return Err(Reply::error(format!(
                "ERR Unknown option or number of arguments for CONFIG SET - '{given}'"
            )));
        };
        // Redis's refusals first; then the settings redlockd fixes at start.
        match f.setting.access {
            Access::Immutable => return Err(failed(&given, "can't set immutable config")),
            Access::Protected => return Err(failed(&given, "can't set protected config")),
            Access::Modifiable if fixed_here(f.setting) => {
                return Err(failed(&given, "can't set immutable config"))
            }
            Access::Modifiable => {}
        }
        if found.iter().any(|g| g.same(&f)) {
            return Err(failed(&given, "duplicate parameter"));
        }
        found.push(f);
    }
    let redis_pairs = pairs.chunks(2).filter(|pair| own(&pair[0]).is_none());
    let mut values = Vec::with_capacity(found.len());
    for (f, pair) in found.iter().zip(redis_pairs) {
        let current = value(shared, f.setting);
        let v = redis_settings::parse(f.setting, &pair[1], &current)
            .map_err(|why| failed(f.name, &why))?;
        if let Some(why) = applied(f.setting).and_then(|a| (a.refuse)(&String::from_utf8_lossy(&v)))
        {
            return Err(failed(f.name, why));
        }
        values.push(v);
    }
    for (o, v) in &own_found {
        if let Some((check, _)) = o.set {
            check(shared, v).map_err(|why| failed(o.name, &why))?;
        }
    }
    for (o, v) in own_found {
        if let Some((_, apply)) = o.set {
            apply(shared, v);
        }
    }
    for (f, v) in found.iter().zip(values) {
        match applied(f.setting).and_then(|a| a.set) {
            Some(set) => set(shared, &String::from_utf8_lossy(&v)),
            None => shared.redis_settings.set(f.setting, v),
        }
    }
    Ok(Reply::Ok)
}
