//! GEO commands over sorted sets, as Redis 7.0's geo.c, geohash.c and
//! geohash_helper.c answer them: GEOADD, GEOPOS, GEODIST, GEOHASH, GEOSEARCH,
//! GEOSEARCHSTORE and the legacy GEORADIUS / GEORADIUSBYMEMBER (and their _RO forms).
//!
//! A member's score is its 52-bit geohash (26 steps of longitude and latitude bits
//! interleaved, latitude in the even bits) as an integer-valued double, exactly as
//! Redis stores it, so ZRANGE ... WITHSCORES, DUMP and a Redis-side reader see the
//! same numbers. A search walks the same nine geohash boxes in the same order, with
//! the same step estimate and the same distance formula (haversine on Redis's earth
//! radius), so unsorted results come back in Redis's order.

use crate::commands::families::typed;
use crate::commands::families::zsets::parse_score;
use crate::commands::{eq_ignore_case, CmdResult, Ctx};
use crate::protocol::{errors, Reply};
use crate::store::ZSet;
use bytes::Bytes;

mod hash;
mod search;

use hash::{
    distance, encode, point_of, Range, LAT_MAX, LAT_MIN, LAT_RANGE, LON_MAX, LON_MIN, LON_RANGE,
    STEP_MAX,
};
pub use search::{
    georadius, georadius_ro, georadiusbymember, georadiusbymember_ro, geosearch, geosearchstore,
};

/// A longitude, latitude pair argument, with Redis's range check.
fn lon_lat(args: &[Bytes]) -> Result<(f64, f64), Reply> {
    let lon = float(&args[0], errors::NOT_FLOAT)?;
    let lat = float(&args[1], errors::NOT_FLOAT)?;
    if !(LON_MIN..=LON_MAX).contains(&lon) || !(LAT_MIN..=LAT_MAX).contains(&lat) {
        return Err(Reply::error(format!(
            "ERR invalid longitude,latitude pair {lon:.6},{lat:.6}"
        )));
    }
    Ok((lon, lat))
}

fn float(arg: &[u8], err: &str) -> Result<f64, Reply> {
    parse_score(arg).ok_or_else(|| Reply::error(err))
}

/// Meters per unit: M, KM, FT, MI.
fn unit(arg: &[u8]) -> Result<f64, Reply> {
    for (name, m) in [("m", 1.0), ("km", 1000.0), ("ft", 0.3048), ("mi", 1609.34)] {
        if eq_ignore_case(arg, name) {
            return Ok(m);
        }
    }
    Err(Reply::error(
        "ERR unsupported unit provided. please use M, KM, FT, MI",
    ))
}

/// `radius unit`: (radius, meters per unit).
fn radius_arg(args: &[Bytes]) -> Result<(f64, f64), Reply> {
    let r = float(&args[0], "ERR need numeric radius")?;
    if r < 0.0 {
        return Err(Reply::error("ERR radius cannot be negative"));
    }
    Ok((r, unit(&args[1])?))
}

/// A distance as Redis prints it: four decimals, the last rounded half to even.
fn distance_reply(d: f64) -> Reply {
    let scaled = (d * 10_000.0).round_ties_even() as i64;
    let sign = if scaled < 0 { "-" } else { "" };
    let v = scaled.unsigned_abs();
    Reply::Bulk(Bytes::from(format!(
        "{sign}{}.{:04}",
        v / 10_000,
        v % 10_000
    )))
}

/// GEOADD key [NX|XX] [CH] longitude latitude member [...]: ZADD with geohash scores.
pub fn geoadd(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (mut nx, mut xx, mut ch) = (false, false, false);
    let mut at = 2;
    while at < args.len() {
        let a = &args[at];
        if eq_ignore_case(a, "nx") {
            nx = true;
        } else if eq_ignore_case(a, "xx") {
            xx = true;
        } else if eq_ignore_case(a, "ch") {
            ch = true;
        } else {
            break;
        }
        at += 1;
    }
    let rest = &args[at..];
    if !rest.len().is_multiple_of(3) || (nx && xx) || rest.is_empty() {
        return Err(errors::syntax());
    }
    let mut points = Vec::with_capacity(rest.len() / 3);
    for t in rest.chunks(3) {
        let (lon, lat) = lon_lat(&t[..2])?;
        let hash = encode(LON_RANGE, LAT_RANGE, lon, lat, STEP_MAX).unwrap_or_default();
        points.push((hash.align52() as f64, &t[2]));
    }
    let key = &args[1];
    // GEOADD is ZADD in Redis, and so is its event.
    let out = typed::write_notify(ctx, key, crate::commands::notify::ZSET, |z: &mut ZSet| {
        let (mut added, mut changed) = (0, 0);
        for (score, member) in &points {
            match z.score(member) {
                Some(_) if nx => {}
                Some(old) => {
                    if old != *score {
                        z.insert(member, *score);
                        changed += 1;
                    }
                }
                None if xx => {}
                None => {
                    z.insert(member, *score);
                    added += 1;
                }
            }
        }
        let event = (added + changed > 0).then_some("zadd");
        Ok((
            Reply::Integer(if ch { added + changed } else { added }),
            event,
        ))
    });
    ctx.shared.blocking.signal(ctx.client.db, key);
    out
}

/// The sorted set at `key` for a read.
fn read<T>(ctx: &Ctx, key: &[u8], f: impl FnOnce(&ZSet) -> T) -> Result<Option<T>, Reply> {
    typed::read(ctx, key, f)
}

/// A coordinate as Redis prints it for GEOPOS and WITHCOORD (`%.17Lf` less its
/// trailing zeros): a RESP3 double, a RESP2 bulk string.
fn coord(v: f64) -> Reply {
    Reply::HumanDouble(v)
}

/// GEOPOS key member...: [longitude, latitude] or null per member.
pub fn geopos(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let scores = read(ctx, &args[1], |z| {
        args[2..].iter().map(|m| z.score(m)).collect::<Vec<_>>()
    })?
    .unwrap_or_else(|| vec![None; args.len() - 2]);
    Ok(Reply::Array(
        scores
            .into_iter()
            .map(|s| match s {
                None => Reply::NullArray,
                Some(score) => {
                    let (lon, lat) = point_of(score);
                    Reply::Array(vec![coord(lon), coord(lat)])
                }
            })
            .collect(),
    ))
}

/// GEODIST key member1 member2 [M|KM|FT|MI]
pub fn geodist(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let to_m = match args.len() {
        4 => 1.0,
        5 => unit(&args[4])?,
        _ => return Err(errors::syntax()),
    };
    let scores = read(ctx, &args[1], |z| (z.score(&args[2]), z.score(&args[3])))?;
    let Some((Some(a), Some(b))) = scores else {
        return Ok(Reply::Null);
    };
    let ((lon1, lat1), (lon2, lat2)) = (point_of(a), point_of(b));
    Ok(distance_reply(distance(lon1, lat1, lon2, lat2) / to_m))
}

/// GEOHASH key member...: the standard 11-character geohash (of the stored point,
/// over latitudes -90..90) or null per member.
pub fn geohash(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let scores = read(ctx, &args[1], |z| {
        args[2..].iter().map(|m| z.score(m)).collect::<Vec<_>>()
    })?
    .unwrap_or_else(|| vec![None; args.len() - 2]);
    let standard_lat = Range {
        min: -90.0,
        max: 90.0,
    };
    Ok(Reply::Array(
        scores
            .into_iter()
            .map(|s| {
                let Some(score) = s else {
                    return Reply::Null;
                };
                let (lon, lat) = point_of(score);
                let bits = encode(LON_RANGE, standard_lat, lon, lat, 26)
                    .unwrap_or_default()
                    .bits;
                let text: Vec<u8> = (0..11)
                    .map(|i| {
                        let idx = if i == 10 {
                            0
                        } else {
                            (bits >> (52 - (i + 1) * 5)) & 0x1f
                        };
                        ALPHABET[idx as usize]
                    })
                    .collect();
                Reply::Bulk(Bytes::from(text))
            })
            .collect(),
    ))
}
