//! GEOSEARCH, GEOSEARCHSTORE and the legacy GEORADIUS / GEORADIUSBYMEMBER (and their
//! _RO forms), as Redis's georadiusGeneric: the arguments are read into `Search`
//! (centre, shape, options, in Redis's order of checks and errors), then one search
//! replies or stores.

use super::hash::{point_of, Hash, Shape, ShapeKind};
use super::{coord, distance_reply, float, lon_lat, radius_arg, read, unit};
use crate::commands::notify::{self as nt, notify};
use crate::commands::{eq_ignore_case, int_arg, CmdResult, Ctx};
use crate::protocol::{errors, Reply};
use crate::store::{Entry, ScoreBound, Value, ZSet};
use bytes::Bytes;

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

#[derive(PartialEq)]
enum Sort {
    None,
    Asc,
    Desc,
}

/// A search's arguments, read and checked.
struct Search<'a> {
    /// The centre: `None` when the key or FROMMEMBER's member is missing.
    center: Option<(f64, f64)>,
    /// The shape and its unit (meters per unit): `None` as `center`.
    shape: Option<(ShapeKind, f64)>,
    /// Where to store (STORE / STOREDIST, GEOSEARCHSTORE's destination).
    store: Option<&'a Bytes>,
    store_dist: bool,
    with_dist: bool,
    with_hash: bool,
    with_coord: bool,
    any: bool,
    sort: Sort,
    /// COUNT (0: none).
    count: i64,
}

impl Search<'_> {
    fn with_any(&self) -> bool {
        self.with_dist || self.with_hash || self.with_coord
    }
}

/// Reads a search's arguments as Redis does, in its order: the form's positional
/// arguments, then the options, then the checks between them. `exists`: whether the
/// source key holds a set (a missing one leaves the centre of a member unknown).
fn parse<'a>(
    ctx: &Ctx,
    args: &'a [Bytes],
    kind: Form,
    src: usize,
    exists: bool,
) -> Result<Search<'a>, Reply> {
    let member_point = |m: &[u8]| -> Result<(f64, f64), Reply> {
        read(ctx, &args[src], |z| z.score(m))?
            .flatten()
            .map(point_of)
            .ok_or_else(|| Reply::error("ERR could not decode requested zset member"))
    };
    let mut s = Search {
        center: None,
        shape: None,
        store: (kind == Form::GeoSearchStore).then_some(&args[1]),
        store_dist: false,
        with_dist: false,
        with_hash: false,
        with_coord: false,
        any: false,
        sort: Sort::None,
        count: 0,
    };
    let base = match kind {
        Form::Radius { .. } => {
            s.center = Some(lon_lat(&args[2..4])?);
            let (r, conv) = radius_arg(&args[4..6])?;
            s.shape = Some((ShapeKind::Circle { radius: r }, conv));
            6
        }
        Form::ByMember { .. } => {
            if exists {
                s.center = Some(member_point(&args[2])?);
                let (r, conv) = radius_arg(&args[3..5])?;
                s.shape = Some((ShapeKind::Circle { radius: r }, conv));
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
    let (mut from_member, mut from_loc, mut by_radius, mut by_box) = (false, false, false, false);
    let rest = &args[base.min(args.len())..];
    let mut i = 0;
    while i < rest.len() {
        let a = &rest[i];
        let left = rest.len() - i - 1;
        if eq_ignore_case(a, "withdist") {
            s.with_dist = true;
        } else if eq_ignore_case(a, "withhash") {
            s.with_hash = true;
        } else if eq_ignore_case(a, "withcoord") {
            s.with_coord = true;
        } else if eq_ignore_case(a, "any") {
            s.any = true;
        } else if eq_ignore_case(a, "asc") {
            s.sort = Sort::Asc;
        } else if eq_ignore_case(a, "desc") {
            s.sort = Sort::Desc;
        } else if eq_ignore_case(a, "count") && left >= 1 {
            s.count = int_arg(&rest[i + 1])?;
            if s.count <= 0 {
                return Err(Reply::error("ERR COUNT must be > 0"));
            }
            i += 1;
        } else if (eq_ignore_case(a, "store") || eq_ignore_case(a, "storedist"))
            && left >= 1
            && may_store
        {
            s.store = Some(&rest[i + 1]);
            s.store_dist = eq_ignore_case(a, "storedist");
            i += 1;
        } else if eq_ignore_case(a, "storedist") && kind == Form::GeoSearchStore {
            s.store_dist = true;
        } else if eq_ignore_case(a, "frommember") && left >= 1 && geosearch && !from_loc {
            if exists {
                s.center = Some(member_point(&rest[i + 1])?);
            }
            from_member = true;
            i += 1;
        } else if eq_ignore_case(a, "fromlonlat") && left >= 2 && geosearch && !from_member {
            s.center = Some(lon_lat(&rest[i + 1..i + 3])?);
            from_loc = true;
            i += 2;
        } else if eq_ignore_case(a, "byradius") && left >= 2 && geosearch && !by_box {
            let (r, conv) = radius_arg(&rest[i + 1..i + 3])?;
            s.shape = Some((ShapeKind::Circle { radius: r }, conv));
            by_radius = true;
            i += 2;
        } else if eq_ignore_case(a, "bybox") && left >= 3 && geosearch && !by_radius {
            let w = float(&rest[i + 1], "ERR need numeric width")?;
            let h = float(&rest[i + 2], "ERR need numeric height")?;
            if h < 0.0 || w < 0.0 {
                return Err(Reply::error("ERR height or width cannot be negative"));
            }
            let conv = unit(&rest[i + 3])?;
            s.shape = Some((
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
    if s.store.is_some() && s.with_any() {
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
    if s.any && s.count == 0 {
        return Err(Reply::error("ERR the ANY argument requires COUNT argument"));
    }
    Ok(s)
}

/// Every search command: the arguments (`parse`), the members found, in the order
/// asked, COUNT of them; stored, or the reply.
fn search(ctx: &mut Ctx, args: &[Bytes], kind: Form) -> CmdResult {
    let src = if kind == Form::GeoSearchStore { 2 } else { 1 };
    let exists = read(ctx, &args[src], |_| ())?.is_some();
    // GEORADIUS[BYMEMBER] and GEOSEARCHSTORE are write commands: their read sends
    // `keymiss` itself, before the options are parsed, as in Redis.
    let writes = matches!(
        kind,
        Form::Radius { store: true } | Form::ByMember { store: true } | Form::GeoSearchStore
    );
    if writes && !exists {
        nt::key_miss(ctx, &args[src]);
    }
    let mut s = parse(ctx, args, kind, src, exists)?;
    if let Some(dest) = s.store {
        if !exists {
            if ctx.db().remove(dest, ctx.now_ms) {
                notify(ctx, nt::GENERIC, "del", dest);
            }
            return Ok(Reply::Integer(0));
        }
    } else if !exists {
        return Ok(Reply::Array(Vec::new()));
    }
    let (Some((lon, lat)), Some((kind_, conversion))) = (s.center, s.shape) else {
        return Ok(Reply::Array(Vec::new()));
    };
    let shape = Shape {
        lon,
        lat,
        conversion,
        kind: kind_,
    };
    if s.count != 0 && s.sort == Sort::None && !s.any {
        s.sort = Sort::Asc;
    }
    let limit = if s.any { s.count as usize } else { 0 };
    let mut found = read(ctx, &args[src], |z| collect(z, &shape, limit))?.unwrap_or_default();
    match s.sort {
        Sort::Asc => found.sort_by(|a, b| a.dist.total_cmp(&b.dist)),
        Sort::Desc => found.sort_by(|a, b| b.dist.total_cmp(&a.dist)),
        Sort::None => {}
    }
    if s.count > 0 {
        found.truncate(s.count as usize);
    }
    for f in &mut found {
        f.dist /= conversion;
    }
    match s.store {
        Some(dest) => {
            let event = match kind {
                Form::GeoSearchStore => "geosearchstore",
                _ => "georadiusstore",
            };
            store(ctx, dest, found, s.store_dist, event)
        }
        None => Ok(reply(found, &s)),
    }
}

/// STORE / STOREDIST / GEOSEARCHSTORE: the members found as a sorted set at `dest`
/// (scored by geohash, or by distance), or `dest` deleted when none.
fn store(
    ctx: &mut Ctx,
    dest: &Bytes,
    found: Vec<Found>,
    by_dist: bool,
    event: &'static str,
) -> CmdResult {
    let n = found.len();
    if n == 0 {
        if ctx.db().remove(dest, ctx.now_ms) {
            notify(ctx, nt::GENERIC, "del", dest);
        }
    } else {
        let members = found
            .into_iter()
            .map(|f| (f.member, if by_dist { f.dist } else { f.score }))
            .collect();
        ctx.shared.fence.check_has_ttl()?;
        ctx.db().insert(
            dest,
            Entry::new(Value::ZSet(Box::new(ZSet::from_members(members)))),
        );
        notify(ctx, nt::ZSET, event, dest);
    }
    Ok(Reply::Integer(n as i64))
}

/// The members found, each with what WITHDIST / WITHHASH / WITHCOORD ask.
fn reply(found: Vec<Found>, s: &Search) -> Reply {
    let options = s.with_any();
    Reply::Array(
        found
            .into_iter()
            .map(|f| {
                let member = Reply::Bulk(Bytes::from(f.member));
                if !options {
                    return member;
                }
                let mut item = vec![member];
                if s.with_dist {
                    item.push(distance_reply(f.dist));
                }
                if s.with_hash {
                    item.push(Reply::Integer(f.score as i64));
                }
                if s.with_coord {
                    item.push(Reply::Array(vec![coord(f.lon), coord(f.lat)]));
                }
                Reply::Array(item)
            })
            .collect(),
    )
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
