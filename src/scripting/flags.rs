//! Script flags, as Redis 7 declares them: in an EVAL script's shebang
//! (`#!lua flags=no-writes,allow-oom`) or in `redis.register_function{flags=...}`.
//!
//! A script without a shebang runs in "compat" mode (Redis 6 rules: no flag checks).
//! With a shebang, a script without `no-writes` cannot run from EVAL_RO / FCALL_RO
//! and one with it cannot write. `allow-oom`, `allow-stale`, `no-cluster` and
//! `allow-cross-slot-keys` are accepted and listed; redlockd has no maxmemory, no
//! replicas and no cluster mode, so they change nothing here.

pub const NO_WRITES: u32 = 1;
pub const ALLOW_OOM: u32 = 1 << 1;
pub const ALLOW_STALE: u32 = 1 << 2;
pub const NO_CLUSTER: u32 = 1 << 3;
pub const ALLOW_CROSS_SLOT: u32 = 1 << 4;
/// No shebang: Redis 6 compatible EVAL.
pub const EVAL_COMPAT: u32 = 1 << 5;

/// Redis's order (FUNCTION LIST lists flags in it).
pub const NAMES: &[(u32, &str)] = &[
    (NO_WRITES, "no-writes"),
    (ALLOW_OOM, "allow-oom"),
    (ALLOW_STALE, "allow-stale"),
    (NO_CLUSTER, "no-cluster"),
    (ALLOW_CROSS_SLOT, "allow-cross-slot-keys"),
];

pub const RO_WITH_WRITE_FLAG: &str =
    "ERR Can not execute a script with write flag using *_ro command.";

/// The flag called `name` (exact, as the shebang wants).
fn by_name(name: &[u8]) -> Option<u32> {
    NAMES
        .iter()
        .find(|(_, n)| n.as_bytes() == name)
        .map(|(f, _)| *f)
}

/// The flag called `name`, any case (as register_function wants).
pub fn by_name_ignore_case(name: &[u8]) -> Option<u32> {
    NAMES
        .iter()
        .find(|(_, n)| n.as_bytes().eq_ignore_ascii_case(name))
        .map(|(f, _)| *f)
}

/// An EVAL script's flags and the length of its shebang line (without its newline,
/// which stays so that line numbers in errors are the user's). Errors are Redis's
/// replies.
pub fn eval_shebang(body: &[u8]) -> Result<(u32, usize), String> {
    if !body.starts_with(b"#!") {
        return Ok((EVAL_COMPAT, 0));
    }
    let Some(end) = body.iter().position(|&c| c == b'\n') else {
        return Err("ERR Invalid script shebang".into());
    };
    let Some(parts) = split_args(&body[..end]) else {
        return Err("ERR Invalid engine in script shebang".into());
    };
    let Some(engine) = parts.first() else {
        return Err("ERR Invalid engine in script shebang".into());
    };
    if engine.as_slice() != b"#!lua" {
        return Err(format!(
            "ERR Unexpected engine in script shebang: {}",
            String::from_utf8_lossy(engine)
        ));
    }
    let mut flags = 0;
    for part in &parts[1..] {
        let Some(list) = part.strip_prefix(b"flags=") else {
            return Err(format!(
                "ERR Unknown lua shebang option: {}",
                String::from_utf8_lossy(part)
            ));
        };
        // sdssplitlen of an empty string gives no elements.
        if list.is_empty() {
            continue;
        }
        for name in list.split(|&c| c == b',') {
            match by_name(name) {
                Some(f) => flags |= f,
                None => {
                    return Err(format!(
                        "ERR Unexpected flag in script shebang: {}",
                        String::from_utf8_lossy(name)
                    ))
                }
            }
        }
    }
    Ok((flags, end))
}

/// The read-only rule shared by EVAL and FCALL (Redis's scriptPrepareForRun): a
/// script that may write cannot run from a *_RO command; a `no-writes` script runs
/// read-only. Returns whether the run is read-only.
pub fn check_run(flags: u32, ro_command: bool) -> Result<bool, &'static str> {
    if flags & EVAL_COMPAT != 0 {
        return Ok(ro_command);
    }
    if flags & NO_WRITES == 0 && ro_command {
        return Err(RO_WITH_WRITE_FLAG);
    }
    Ok(ro_command || flags & NO_WRITES != 0)
}

/// The maxmemory rule for a script about to run while used memory is above
/// --maxmemory (Redis's scriptPrepareForRun and scriptVerifyOOM): a script that
/// declared flags without `no-writes` or `allow-oom` does not run; any other script
/// runs, and unless it declared `allow-oom` its commands that may grow memory are
/// refused until its first write. Returns whether they are refused.
pub fn check_oom(flags: u32, in_exec: bool) -> Result<bool, &'static str> {
    if flags & EVAL_COMPAT != 0 {
        return Ok(true);
    }
    if flags & (NO_WRITES | ALLOW_OOM) == 0 {
        // A network EVAL is refused before it runs, with the shared OOM error; from
        // EXEC, Redis's run-time check answers this one.
        return Err(if in_exec {
            "OOM allow-oom flag is not set on the script, can not run it when used memory > 'maxmemory'"
        } else {
            crate::protocol::errors::OOM
        });
    }
    Ok(flags & ALLOW_OOM == 0)
}

/// Redis's sdssplitargs: words separated by spaces, with "double" (C escapes) and
/// 'single' quotes. None for unbalanced quotes.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        while i < line.len() && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= line.len() {
            return Some(out);
        }
        let mut word = Vec::new();
        let mut in_dq = false;
        let mut in_sq = false;
        loop {
            let c = line.get(i).copied();
            if in_dq {
                match c {
                    None => return None,
                    Some(b'\\')
                        if line.get(i + 1) == Some(&b'x')
                            && line.get(i + 2).is_some_and(u8::is_ascii_hexdigit)
                            && line.get(i + 3).is_some_and(u8::is_ascii_hexdigit) =>
                    {
                        let hex = std::str::from_utf8(&line[i + 2..i + 4]).unwrap_or("0");
                        word.push(u8::from_str_radix(hex, 16).unwrap_or(0));
                        i += 3;
                    }
                    Some(b'\\') if i + 1 < line.len() => {
                        i += 1;
                        word.push(match line[i] {
                            b'n' => b'\n',
                            b'r' => b'\r',
                            b't' => b'\t',
                            b'b' => 0x08,
                            b'a' => 0x07,
                            other => other,
                        });
                    }
                    Some(b'"') => {
                        // The closing quote must be followed by a space or the end.
                        if line.get(i + 1).is_some_and(|c| !c.is_ascii_whitespace()) {
                            return None;
                        }
                        i += 1;
                        break;
                    }
                    Some(c) => word.push(c),
                }
            } else if in_sq {
                match c {
                    None => return None,
                    Some(b'\\') if line.get(i + 1) == Some(&b'\'') => {
                        i += 1;
                        word.push(b'\'');
                    }
                    Some(b'\'') => {
                        if line.get(i + 1).is_some_and(|c| !c.is_ascii_whitespace()) {
                            return None;
                        }
                        i += 1;
                        break;
                    }
                    Some(c) => word.push(c),
                }
            } else {
                match c {
                    None => break,
                    Some(c) if c.is_ascii_whitespace() => break,
                    Some(b'"') => in_dq = true,
                    Some(b'\'') => in_sq = true,
                    Some(c) => word.push(c),
                }
            }
            i += 1;
        }
        out.push(word);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shebangs_parse_as_redis_parses_them() {
        assert_eq!(eval_shebang(b"return 1"), Ok((EVAL_COMPAT, 0)));
        assert_eq!(eval_shebang(b"#!lua\nreturn 1"), Ok((0, 5)));
        assert_eq!(
            eval_shebang(b"#!lua flags=no-writes,allow-oom\nreturn 1"),
            Ok((NO_WRITES | ALLOW_OOM, 31))
        );
        assert_eq!(eval_shebang(b"#!lua flags=\nreturn 1"), Ok((0, 12)));
        assert_eq!(
            eval_shebang(b"#!lua"),
            Err("ERR Invalid script shebang".into())
        );
        assert_eq!(
            eval_shebang(b"#!lua flags=no-writes,bad\n"),
            Err("ERR Unexpected flag in script shebang: bad".into())
        );
        assert_eq!(
            eval_shebang(b"#!lua name=x\n"),
            Err("ERR Unknown lua shebang option: name=x".into())
        );
        assert_eq!(
            eval_shebang(b"#!python\n"),
            Err("ERR Unexpected engine in script shebang: #!python".into())
        );
    }

    #[test]
    fn read_only_rules() {
        assert_eq!(check_run(EVAL_COMPAT, true), Ok(true));
        assert_eq!(check_run(EVAL_COMPAT, false), Ok(false));
        assert_eq!(check_run(0, true), Err(RO_WITH_WRITE_FLAG));
        assert_eq!(check_run(NO_WRITES, false), Ok(true));
        assert_eq!(check_run(0, false), Ok(false));
    }

    #[test]
    fn split_args_handles_quotes() {
        assert_eq!(
            split_args(b"#!lua  name=\"a b\" 'c'"),
            Some(vec![b"#!lua".to_vec(), b"name=a b".to_vec(), b"c".to_vec()])
        );
        assert_eq!(split_args(b"\"open"), None);
    }
}
