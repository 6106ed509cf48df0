//! The geohash arithmetic of Redis 7.0's geohash.c and geohash_helper.c: a point's
//! 52-bit score and back, the nine boxes a search walks and their step, and the
//! distance formula (haversine on Redis's earth radius).

pub(super) const LON_MIN: f64 = -180.0;
pub(super) const LON_MAX: f64 = 180.0;
pub(super) const LAT_MIN: f64 = -85.051_128_78;
pub(super) const LAT_MAX: f64 = 85.051_128_78;
pub(super) const STEP_MAX: u8 = 26;
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
pub(super) struct Hash {
    pub(super) bits: u64,
    pub(super) step: u8,
}

impl Hash {
    pub(super) fn is_zero(self) -> bool {
        self.bits == 0 && self.step == 0
    }

    /// The hash as the 52-bit score it stands for.
    pub(super) fn align52(self) -> u64 {
        self.bits << (52 - u32::from(self.step) * 2)
    }
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Range {
    pub(super) min: f64,
    pub(super) max: f64,
}

pub(super) const LON_RANGE: Range = Range {
    min: LON_MIN,
    max: LON_MAX,
};
pub(super) const LAT_RANGE: Range = Range {
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

pub(super) fn encode(lon_r: Range, lat_r: Range, lon: f64, lat: f64, step: u8) -> Option<Hash> {
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
pub(super) fn point_of(score: f64) -> (f64, f64) {
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
pub(super) fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
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
pub(super) enum ShapeKind {
    Circle { radius: f64 },
    Rect { width: f64, height: f64 },
}

#[derive(Clone, Copy)]
pub(super) struct Shape {
    pub(super) lon: f64,
    pub(super) lat: f64,
    /// Meters per unit.
    pub(super) conversion: f64,
    pub(super) kind: ShapeKind,
}

impl Shape {
    /// The distance from the centre to the point at `score`, when it is inside.
    pub(super) fn contains(&self, score: f64) -> Option<(f64, f64, f64)> {
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
    pub(super) fn boxes(&self) -> [Hash; 9] {
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
