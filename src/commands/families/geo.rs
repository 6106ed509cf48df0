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
use crate::commands::{eq_ignore_case, int_arg, CmdResult, Ctx};
use crate::protocol::{errors, Reply};
use crate::store::{Entry, ScoreBound, Value, ZSet};
use bytes::Bytes;

const LON_MIN: f64 = -180.0;
const LON_MAX: f64 = 180.0;
const LAT_MIN: f64 = -85.051_128_78;
const LAT_MAX: f64 = 85.051_128_78;
const STEP_MAX: u8 = 26;
const EARTH_RADIUS_M: f64 = 6_372_797.560_856;
const MERCATOR_MAX: f64 = 20_037_726.37;
const D_R: f64 = std::f64::consts::PI / 180.0;

fn deg_rad(d: f64) -> f64 {
    d * D_R
}

fn rad_deg(r: f64) -> f64 {
    r / D_R
}

#[derive(Clone, Copy, PartialEq, Debug, Default)]
struct Hash {
    bits: u64,
    step: u8,
}

impl Hash {
    fn is_zero(self) -> bool {
        self.bits == 0 && self.step == 0
    }

    /// The hash as the 52-bit score it stands for.
    fn align52(self) -> u64 {
        self.bits << (52 - u32::from(self.step) * 2)
    }
}

#[derive(Clone, Copy, Debug)]
struct Range {
    min: f64,
    max: f64,
}

const LON_RANGE: Range = Range {
    min: LON_MIN,
    max: LON_MAX,
};
const LAT_RANGE: Range = Range {
    min: LAT_MIN,
    max: LAT_MAX,
};

#[derive(Clone, Copy, Debug)]
struct Area {
    lon: Range,
    lat: Range,
}

/// Spreads the 32 bits of `v` over the even bits of a u64.
fn spread(v: u32) -> u64 {
    let mut x = u64::from(v);
    x = (x | (x << 16)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x << 8)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x << 2)) & 0x3333_3333_3333_3333;
    (x | (x << 1)) & 0x5555_5555_5555_5555
}

/// The inverse of `spread`: the even bits of `x`, packed.
fn squash(x: u64) -> u32 {
    let mut x = x & 0x5555_5555_5555_5555;
    x = (x | (x >> 1)) & 0x3333_3333_3333_3333;
    x = (x | (x >> 2)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x >> 4)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x >> 8)) & 0x0000_FFFF_0000_FFFF;
    ((x | (x >> 16)) & 0xFFFF_FFFF) as u32
}

fn encode(lon_r: Range, lat_r: Range, lon: f64, lat: f64, step: u8) -> Option<Hash> {
    if !(LON_MIN..=LON_MAX).contains(&lon) || !(LAT_MIN..=LAT_MAX).contains(&lat) {
        return None;
    }
    if lat < lat_r.min || lat > lat_r.max || lon < lon_r.min || lon > lon_r.max {
        return None;
    }
    let scale = (1u64 << step) as f64;
    let lat_off = (lat - lat_r.min) / (lat_r.max - lat_r.min) * scale;
    let lon_off = (lon - lon_r.min) / (lon_r.max - lon_r.min) * scale;
    Some(Hash {
        bits: spread(lat_off as u32) | (spread(lon_off as u32) << 1),
        step,
    })
}

fn decode(hash: Hash) -> Area {
    let ilat = f64::from(squash(hash.bits));
    let ilon = f64::from(squash(hash.bits >> 1));
    let scale = (1u64 << hash.step) as f64;
    let lat_span = LAT_MAX - LAT_MIN;
    let lon_span = LON_MAX - LON_MIN;
    Area {
        lat: Range {
            min: LAT_MIN + (ilat / scale) * lat_span,
            max: LAT_MIN + ((ilat + 1.0) / scale) * lat_span,
        },
        lon: Range {
            min: LON_MIN + (ilon / scale) * lon_span,
            max: LON_MIN + ((ilon + 1.0) / scale) * lon_span,
        },
    }
}

/// The point a score stands for: the middle of its 26-step box.
fn point_of(score: f64) -> (f64, f64) {
    let area = decode(Hash {
        bits: score as u64,
        step: STEP_MAX,
    });
    let lon = ((area.lon.min + area.lon.max) / 2.0).clamp(LON_MIN, LON_MAX);
    let lat = ((area.lat.min + area.lat.max) / 2.0).clamp(LAT_MIN, LAT_MAX);
    (lon, lat)
}

fn move_x(h: &mut Hash, d: i8) {
    if d == 0 {
        return;
    }
    let shift = 64 - u32::from(h.step) * 2;
    let mut x = h.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let y = h.bits & 0x5555_5555_5555_5555;
    let zz = 0x5555_5555_5555_5555u64 >> shift;
    if d > 0 {
        x = x.wrapping_add(zz + 1);
    } else {
        x |= zz;
        x = x.wrapping_sub(zz + 1);
    }
    x &= 0xaaaa_aaaa_aaaa_aaaau64 >> shift;
    h.bits = x | y;
}

fn move_y(h: &mut Hash, d: i8) {
    if d == 0 {
        return;
    }
    let shift = 64 - u32::from(h.step) * 2;
    let x = h.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let mut y = h.bits & 0x5555_5555_5555_5555;
    let zz = 0xaaaa_aaaa_aaaa_aaaau64 >> shift;
    if d > 0 {
        y = y.wrapping_add(zz + 1);
    } else {
        y |= zz;
        y = y.wrapping_sub(zz + 1);
    }
    y &= 0x5555_5555_5555_5555u64 >> shift;
    h.bits = x | y;
}

/// The box and its eight neighbours, in Redis's order: the box, N, S, E, W, NE, NW,
/// SE, SW.
fn neighbours(h: Hash) -> [Hash; 9] {
    let at = |dx: i8, dy: i8| {
        let mut n = h;
        move_x(&mut n, dx);
        move_y(&mut n, dy);
        n
    };
    [
        h,
        at(0, 1),
        at(0, -1),
        at(1, 0),
        at(-1, 0),
        at(1, 1),
        at(-1, 1),
        at(1, -1),
        at(-1, -1),
    ]
}

fn steps_for_radius(mut range_m: f64, lat: f64) -> u8 {
    if range_m == 0.0 {
        return 26;
    }
    let mut step: i32 = 1;
    while range_m < MERCATOR_MAX {
        range_m *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, 26) as u8
}

fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS_M * (deg_rad(lat2) - deg_rad(lat1)).abs()
}

/// Haversine distance in meters, as Redis computes it.
fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let (lon1r, lon2r) = (deg_rad(lon1), deg_rad(lon2));
    let v = ((lon2r - lon1r) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1, lat2);
    }
    let (lat1r, lat2r) = (deg_rad(lat1), deg_rad(lat2));
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_M * a.sqrt().asin()
}

#[derive(Clone, Copy)]
enum ShapeKind {
    Circle { radius: f64 },
    Rect { width: f64, height: f64 },
}

#[derive(Clone, Copy)]
struct Shape {
    lon: f64,
    lat: f64,
    /// Meters per unit.
    conversion: f64,
    kind: ShapeKind,
}

impl Shape {
    /// The distance from the centre to the point at `score`, when it is inside.
    fn contains(&self, score: f64) -> Option<(f64, f64, f64)> {
        let (lon, lat) = point_of(score);
        match self.kind {
            ShapeKind::Circle { radius } => {
                let d = distance(self.lon, self.lat, lon, lat);
                (d <= radius * self.conversion).then_some((d, lon, lat))
            }
            ShapeKind::Rect { width, height } => {
                let (w, h) = (width * self.conversion, height * self.conversion);
                if lat_distance(lat, self.lat) > h / 2.0 {
                    return None;
                }
                if distance(lon, lat, self.lon, lat) > w / 2.0 {
                    return None;
                }
                Some((distance(self.lon, self.lat, lon, lat), lon, lat))
            }
        }
    }

    /// The boxes to search (Redis's geohashCalculateAreasByShapeWGS84): zero hashes
    /// are boxes left out.
    fn boxes(&self) -> [Hash; 9] {
        let (half_h, half_w) = match self.kind {
            ShapeKind::Circle { radius } => (radius, radius),
            ShapeKind::Rect { width, height } => (height / 2.0, width / 2.0),
        };
        let (height, width) = (self.conversion * half_h, self.conversion * half_w);
        let lat_delta = rad_deg(height / EARTH_RADIUS_M);
        let lon_top = rad_deg(width / EARTH_RADIUS_M / deg_rad(self.lat + lat_delta).cos());
        let lon_bottom = rad_deg(width / EARTH_RADIUS_M / deg_rad(self.lat - lat_delta).cos());
        let south = self.lat < 0.0;
        let min_lon = self.lon - if south { lon_bottom } else { lon_top };
        let max_lon = self.lon + if south { lon_bottom } else { lon_top };
        let min_lat = self.lat - lat_delta;
        let max_lat = self.lat + lat_delta;
        let radius_m = match self.kind {
            ShapeKind::Circle { radius } => radius,
            ShapeKind::Rect { width, height } => {
                ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt()
            }
        } * self.conversion;
        let mut steps = steps_for_radius(radius_m, self.lat);
        let hash_at =
            |steps| encode(LON_RANGE, LAT_RANGE, self.lon, self.lat, steps).unwrap_or_default();
        let mut n = neighbours(hash_at(steps));
        let decrease = decode(n[1]).lat.max < max_lat
            || decode(n[2]).lat.min > min_lat
            || decode(n[3]).lon.max < max_lon
            || decode(n[4]).lon.min > min_lon;
        if steps > 1 && decrease {
            steps -= 1;
            n = neighbours(hash_at(steps));
        }
        if steps >= 2 {
            let area = decode(n[0]);
            let z = Hash::default();
            // N=1 S=2 E=3 W=4 NE=5 NW=6 SE=7 SW=8
            if area.lat.min < min_lat {
                (n[2], n[8], n[7]) = (z, z, z);
            }
            if area.lat.max > max_lat {
                (n[1], n[5], n[6]) = (z, z, z);
            }
            if area.lon.min < min_lon {
                (n[4], n[8], n[6]) = (z, z, z);
            }
            if area.lon.max > max_lon {
                (n[3], n[7], n[5]) = (z, z, z);
            }
        }
        n
    }
}

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
    let out = typed::write(ctx, key, |z: &mut ZSet| {
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
        Ok(Reply::Integer(if ch { added + changed } else { added }))
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

/// Which command is searching (Redis's georadiusGeneric flags).
#[derive(Clone, Copy, PartialEq)]
enum Form {
    /// GEORADIUS[_RO] key lon lat radius unit
    Radius { store: bool },
    /// GEORADIUSBYMEMBER[_RO] key member radius unit
    ByMember { store: bool },
    /// GEOSEARCH key
    GeoSearch,
    /// GEOSEARCHSTORE dest key
    GeoSearchStore,
}

struct Found {
    member: Vec<u8>,
    score: f64,
    dist: f64,
    lon: f64,
    lat: f64,
}

fn search(ctx: &mut Ctx, args: &[Bytes], kind: Form) -> CmdResult {
    let src = if kind == Form::GeoSearchStore { 2 } else { 1 };
    let exists = read(ctx, &args[src], |_| ())?.is_some();
    let mut center: Option<(f64, f64)> = None;
    let mut shape_kind: Option<(ShapeKind, f64)> = None;
    let member_point = |m: &[u8]| -> Result<(f64, f64), Reply> {
        read(ctx, &args[src], |z| z.score(m))?
            .flatten()
            .map(point_of)
            .ok_or_else(|| Reply::error("ERR could not decode requested zset member"))
    };
    let base = match kind {
        Form::Radius { .. } => {
            center = Some(lon_lat(&args[2..4])?);
            let (r, conv) = radius_arg(&args[4..6])?;
            shape_kind = Some((ShapeKind::Circle { radius: r }, conv));
            6
        }
        Form::ByMember { .. } => {
            if exists {
                center = Some(member_point(&args[2])?);
                let (r, conv) = radius_arg(&args[3..5])?;
                shape_kind = Some((ShapeKind::Circle { radius: r }, conv));
            }
            5
        }
        Form::GeoSearch => 2,
        Form::GeoSearchStore => 3,
    };
    let geosearch = matches!(kind, Form::GeoSearch | Form::GeoSearchStore);
    let may_store = matches!(
        kind,
        Form::Radius { store: true } | Form::ByMember { store: true }
    );
    let mut store: Option<&Bytes> = (kind == Form::GeoSearchStore).then_some(&args[1]);
    let (mut with_dist, mut with_hash, mut with_coord) = (false, false, false);
    let (mut any, mut store_dist) = (false, false);
    let (mut from_member, mut from_loc, mut by_radius, mut by_box) = (false, false, false, false);
    #[derive(PartialEq)]
    enum Sort {
        None,
        Asc,
        Desc,
    }
    let mut sort = Sort::None;
    let mut count: i64 = 0;
    let rest = &args[base.min(args.len())..];
    let mut i = 0;
    while i < rest.len() {
        let a = &rest[i];
        let left = rest.len() - i - 1;
        if eq_ignore_case(a, "withdist") {
            with_dist = true;
        } else if eq_ignore_case(a, "withhash") {
            with_hash = true;
        } else if eq_ignore_case(a, "withcoord") {
            with_coord = true;
        } else if eq_ignore_case(a, "any") {
            any = true;
        } else if eq_ignore_case(a, "asc") {
            sort = Sort::Asc;
        } else if eq_ignore_case(a, "desc") {
            sort = Sort::Desc;
        } else if eq_ignore_case(a, "count") && left >= 1 {
            count = int_arg(&rest[i + 1])?;
            if count <= 0 {
                return Err(Reply::error("ERR COUNT must be > 0"));
            }
            i += 1;
        } else if (eq_ignore_case(a, "store") || eq_ignore_case(a, "storedist"))
            && left >= 1
            && may_store
        {
            store = Some(&rest[i + 1]);
            store_dist = eq_ignore_case(a, "storedist");
            i += 1;
        } else if eq_ignore_case(a, "storedist") && kind == Form::GeoSearchStore {
            store_dist = true;
        } else if eq_ignore_case(a, "frommember") && left >= 1 && geosearch && !from_loc {
            if exists {
                center = Some(member_point(&rest[i + 1])?);
            }
            from_member = true;
            i += 1;
        } else if eq_ignore_case(a, "fromlonlat") && left >= 2 && geosearch && !from_member {
            center = Some(lon_lat(&rest[i + 1..i + 3])?);
            from_loc = true;
            i += 2;
        } else if eq_ignore_case(a, "byradius") && left >= 2 && geosearch && !by_box {
            let (r, conv) = radius_arg(&rest[i + 1..i + 3])?;
            shape_kind = Some((ShapeKind::Circle { radius: r }, conv));
            by_radius = true;
            i += 2;
        } else if eq_ignore_case(a, "bybox") && left >= 3 && geosearch && !by_radius {
            let w = float(&rest[i + 1], "ERR need numeric width")?;
            let h = float(&rest[i + 2], "ERR need numeric height")?;
            if h < 0.0 || w < 0.0 {
                return Err(Reply::error("ERR height or width cannot be negative"));
            }
            let conv = unit(&rest[i + 3])?;
            shape_kind = Some((
                ShapeKind::Rect {
                    width: w,
                    height: h,
                },
                conv,
            ));
            by_box = true;
            i += 3;
        } else {
            return Err(errors::syntax());
        }
        i += 1;
    }
    if store.is_some() && (with_dist || with_hash || with_coord) {
        let what = if kind == Form::GeoSearchStore {
            "GEOSEARCHSTORE"
        } else {
            "STORE option in GEORADIUS"
        };
        return Err(Reply::error(format!(
            "ERR {what} is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
        )));
    }
    let name = String::from_utf8_lossy(&args[0]);
    if geosearch && !(from_member || from_loc) {
        return Err(Reply::error(format!(
            "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}"
        )));
    }
    if geosearch && !(by_radius || by_box) {
        return Err(Reply::error(format!(
            "ERR exactly one of BYRADIUS and BYBOX can be specified for {name}"
        )));
    }
    if any && count == 0 {
        return Err(Reply::error("ERR the ANY argument requires COUNT argument"));
    }
    if let Some(dest) = store {
        crate::commands::check_fences_of(ctx, args)?;
        if !exists {
            ctx.db().remove(dest, ctx.now_ms);
            return Ok(Reply::Integer(0));
        }
    } else if !exists {
        return Ok(Reply::Array(Vec::new()));
    }
    let (Some((lon, lat)), Some((kind_, conversion))) = (center, shape_kind) else {
        return Ok(Reply::Array(Vec::new()));
    };
    let shape = Shape {
        lon,
        lat,
        conversion,
        kind: kind_,
    };
    if count != 0 && sort == Sort::None && !any {
        sort = Sort::Asc;
    }
    let limit = if any { count as usize } else { 0 };
    let mut found = read(ctx, &args[src], |z| collect(z, &shape, limit))?.unwrap_or_default();
    match sort {
        Sort::Asc => found.sort_by(|a, b| a.dist.total_cmp(&b.dist)),
        Sort::Desc => found.sort_by(|a, b| b.dist.total_cmp(&a.dist)),
        Sort::None => {}
    }
    if count > 0 {
        found.truncate(count as usize);
    }
    for f in &mut found {
        f.dist /= conversion;
    }
    if let Some(dest) = store {
        let n = found.len();
        if n == 0 {
            ctx.db().remove(dest, ctx.now_ms);
        } else {
            let members = found
                .into_iter()
                .map(|f| (f.member, if store_dist { f.dist } else { f.score }))
                .collect();
            ctx.shared.fence.check_has_ttl()?;
            ctx.db().insert(
                dest,
                Entry::new(Value::ZSet(Box::new(ZSet::from_members(members)))),
            );
        }
        return Ok(Reply::Integer(n as i64));
    }
    let options = with_dist || with_hash || with_coord;
    Ok(Reply::Array(
        found
            .into_iter()
            .map(|f| {
                let member = Reply::Bulk(Bytes::from(f.member));
                if !options {
                    return member;
                }
                let mut item = vec![member];
                if with_dist {
                    item.push(distance_reply(f.dist));
                }
                if with_hash {
                    item.push(Reply::Integer(f.score as i64));
                }
                if with_coord {
                    item.push(Reply::Array(vec![coord(f.lon), coord(f.lat)]));
                }
                Reply::Array(item)
            })
            .collect(),
    ))
}

/// The members inside `shape`, box by box in Redis's order (each box's score range
/// lowest first), stopping at `limit` when non-zero (ANY).
fn collect(z: &ZSet, shape: &Shape, limit: usize) -> Vec<Found> {
    let boxes = shape.boxes();
    let mut out = Vec::new();
    let mut last: usize = 0;
    for (i, b) in boxes.iter().enumerate() {
        if b.is_zero() {
            continue;
        }
        // As Redis: a box equal to the one searched just before is skipped (the
        // centre box is never compared).
        if last != 0 && *b == boxes[last] {
            continue;
        }
        if limit != 0 && out.len() >= limit {
            break;
        }
        let min = b.align52() as f64;
        let max = Hash {
            bits: b.bits + 1,
            step: b.step,
        }
        .align52() as f64;
        let lo = ScoreBound {
            value: min,
            exclusive: false,
        };
        let hi = ScoreBound {
            value: max,
            exclusive: true,
        };
        for (member, score) in z.by_score(lo, hi, false) {
            if let Some((dist, lon, lat)) = shape.contains(score) {
                out.push(Found {
                    member: member.to_vec(),
                    score,
                    dist,
                    lon,
                    lat,
                });
            }
            if limit != 0 && out.len() >= limit {
                break;
            }
        }
        last = i;
    }
    out
}

pub fn georadius(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    search(ctx, args, Form::Radius { store: true })
}

pub fn georadius_ro(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    search(ctx, args, Form::Radius { store: false })
}

pub fn georadiusbymember(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    search(ctx, args, Form::ByMember { store: true })
}

pub fn georadiusbymember_ro(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    search(ctx, args, Form::ByMember { store: false })
}

pub fn geosearch(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    search(ctx, args, Form::GeoSearch)
}

pub fn geosearchstore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    search(ctx, args, Form::GeoSearchStore)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleaving_round_trips() {
        for v in [0u32, 1, 0x3ff_ffff, 0xdead_beef, u32::MAX] {
            assert_eq!(squash(spread(v)), v);
            assert_eq!(squash(spread(v) << 1 >> 1), v);
        }
    }

    #[test]
    fn palermo_scores_as_redis_does() {
        // GEOADD Sicily 13.361389 38.115556 "Palermo" -> ZSCORE 3479099956230698
        let h = encode(LON_RANGE, LAT_RANGE, 13.361389, 38.115556, 26).unwrap();
        assert_eq!(h.align52(), 3_479_099_956_230_698);
        let (lon, lat) = point_of(3_479_099_956_230_698.0);
        assert!((lon - 13.361389).abs() < 1e-5 && (lat - 38.115556).abs() < 1e-5);
    }
}
