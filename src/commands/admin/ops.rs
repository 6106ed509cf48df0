//! Operator commands: SLOWLOG, LATENCY and WAIT, as Redis 7 answers them.

use crate::commands::{command_table, int_arg, CmdResult, Ctx};
use crate::protocol::{errors, Reply};
use bytes::Bytes;

fn help(lines: &[&'static str]) -> Reply {
    Reply::Array(lines.iter().map(|l| Reply::status(l)).collect())
}

/// `SLOWLOG GET [count] | LEN | RESET | HELP`
pub fn slowlog(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let log = &ctx.shared.stats.slowlog;
    let sub = args[1].to_ascii_lowercase();
    let arity_ok = match sub.as_slice() {
        b"get" => args.len() <= 3,
        b"len" | b"reset" | b"help" => args.len() == 2,
        _ => true,
    };
    if !arity_ok {
        return Err(errors::wrong_arity(&format!(
            "slowlog|{}",
            String::from_utf8_lossy(&sub)
        )));
    }
    match (sub.as_slice(), args.len()) {
        (b"get", 2 | 3) => {
            let count = match args.get(2) {
                None => Some(10),
                Some(a) => match crate::commands::parse_i64(a) {
                    Some(-1) => None,
                    Some(n) if n >= 0 => Some(n as usize),
                    _ => {
                        return Err(Reply::error(
                            "ERR count should be greater than or equal to -1",
                        ))
                    }
                },
            };
            Ok(Reply::Array(log.newest(count, |e| {
                Reply::Array(vec![
                    Reply::Integer(e.id as i64),
                    Reply::Integer(e.unix_s),
                    Reply::Integer(e.usec as i64),
                    Reply::Array(e.args.iter().cloned().map(Reply::Bulk).collect()),
                    Reply::bulk_str(&e.addr),
                    Reply::Bulk(e.name.clone()),
                ])
            })))
        }
        (b"len", 2) => Ok(Reply::Integer(log.len() as i64)),
        (b"reset", 2) => {
            log.reset();
            Ok(Reply::Ok)
        }
        (b"help", 2) => Ok(help(&[
            "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "GET [<count>]",
            "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
            "    Entries are made of:",
            "    id, timestamp, time in microseconds, arguments array, client IP and port,",
            "    client name",
            "LEN",
            "    Return the length of the slowlog.",
            "RESET",
            "    Reset the slowlog.",
            "HELP",
            "    Prints this help.",
        ])),
        _ => Err(errors::unknown_subcommand("slowlog", &args[1])),
    }
}

/// `LATENCY LATEST | HISTORY event | RESET [event...] | HISTOGRAM [command...] | HELP`
pub fn latency(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let monitor = &ctx.shared.stats.latency;
    let sub = args[1].to_ascii_lowercase();
    let arity_ok = match sub.as_slice() {
        b"latest" | b"help" | b"doctor" => args.len() == 2,
        b"history" | b"graph" => args.len() == 3,
        _ => true,
    };
    if !arity_ok {
        return Err(errors::wrong_arity(&format!(
            "latency|{}",
            String::from_utf8_lossy(&sub)
        )));
    }
    match (sub.as_slice(), args.len()) {
        (b"latest", 2) => Ok(monitor.with_events(|events| {
            Reply::Array(
                events
                    .iter()
                    .filter_map(|(name, e)| {
                        let (t, ms) = *e.samples.back()?;
                        Some(Reply::Array(vec![
                            Reply::bulk_str(name),
                            Reply::Integer(t),
                            Reply::Integer(ms as i64),
                            Reply::Integer(e.max_ms as i64),
                        ]))
                    })
                    .collect(),
            )
        })),
        (b"history", 3) => {
            let name = String::from_utf8_lossy(&args[2]).to_ascii_lowercase();
            Ok(monitor.with_events(|events| {
                Reply::Array(events.get(name.as_str()).map_or_else(Vec::new, |e| {
                    e.samples
                        .iter()
                        .map(|&(t, ms)| Reply::Array(vec![Reply::Integer(t), Reply::Integer(ms as i64)]))
                        .collect()
                }))
            }))
        }
        (b"reset", _) => Ok(Reply::Integer(monitor.reset(&args[2..]) as i64)),
        (b"histogram", _) => Ok(histograms(ctx, &args[2..])),
        (b"help", 2) => Ok(help(&[
            "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "DOCTOR",
            "    Return a human readable latency analysis report.",
            "GRAPH <event>",
            "    Return an ASCII latency graph for the <event> class.",
            "HISTORY <event>",
            "    Return time-latency samples for the <event> class.",
            "LATEST",
            "    Return the latest latency samples for all events.",
            "RESET [<event> ...]",
            "    Reset latency data of one or more <event> classes.",
            "    (default: reset all data for all event classes)",
            "HISTOGRAM [COMMAND ...]",
            "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
            "    If no commands are specified then all histograms are replied.",
            "HELP",
            "    Prints this help.",
        ])),
        _ => Err(errors::unknown_subcommand("latency", &args[1])),
    }
}

/// LATENCY HISTOGRAM: per command that ran, its calls and the cumulative count of
/// calls up to each power-of-two microsecond bound (empty buckets left out).
fn histograms(ctx: &Ctx, names: &[Bytes]) -> Reply {
    let stats = &ctx.shared.stats;
    let specs: Vec<&command_table::Spec> = if names.is_empty() {
        command_table::COMMANDS.iter().collect()
    } else {
        names
            .iter()
            .filter_map(|n| command_table::lookup(n))
            .collect()
    };
    let mut out = Vec::new();
    for spec in specs {
        let s = stats.command(spec.index);
        let calls = s.calls();
        if calls == 0 {
            continue;
        }
        let mut cumulative = 0;
        let mut buckets = Vec::new();
        for (i, n) in s.histogram.into_iter().enumerate() {
            if n == 0 {
                continue;
            }
            cumulative += n;
            buckets.push((Reply::Integer(1i64 << i), Reply::Integer(cumulative as i64)));
        }
        out.push((
            Reply::bulk_str(spec.name),
            Reply::Map(vec![
                (Reply::bulk_str("calls"), Reply::Integer(calls as i64)),
                (Reply::bulk_str("histogram_usec"), Reply::Map(buckets)),
            ]),
        ));
    }
    Reply::Map(out)
}

/// `WAIT numreplicas timeout`: a lock node has no replicas, so 0 at once (Redis would
/// block until the timeout when asked for replicas it does not have; a Redlock
/// client's safety comes from the majority of nodes, not from replication).
pub fn wait(_ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    int_arg(&args[1])?;
    let timeout = crate::commands::parse_i64(&args[2])
        .ok_or_else(|| Reply::error("ERR timeout is not an integer or out of range"))?;
    if timeout < 0 {
        return Err(Reply::error("ERR timeout is negative"));
    }
    Ok(Reply::Integer(0))
}
