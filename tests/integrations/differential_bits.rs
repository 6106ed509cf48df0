//! Differential test for the bitmap, HyperLogLog, LCS and GEO commands: a seeded random
//! sequence (valid and invalid forms: offsets past the end, negative and `#` offsets,
//! every BITFIELD type and overflow rule, BIT/BYTE ranges, HyperLogLogs that go from
//! sparse to dense and strings that only look like one, LCS's options, GEO searches
//! by radius and box from coordinates and members, with and without STORE) is sent to
//! a real redis-server and to redlockd, and the replies must be byte for byte equal:
//! the HyperLogLog strings themselves (GET), the geohash scores (ZRANGE WITHSCORES),
//! distances and coordinates. The second half of each run speaks RESP3 (doubles,
//! maps).
//!
//! Runs the fixed seeds and one random seed (printed, and in every failure message);
//! `DIFF_SEED=n` replays one run, `DIFF_OPS=n` changes its length.

use crate::support;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use support::redis_server::{diff_seeds, Differential};

const BKEYS: &[&str] = &["b0", "b1", "b2"];
const HKEYS: &[&str] = &["h0", "h1", "h2"];
const GKEYS: &[&str] = &["g0", "g1"];
const OTHER: &[&str] = &["nokey", "list"];

struct Gen {
    rng: SmallRng,
}

impl Gen {
    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.rng.random_range(0..from.len())]
    }

    fn chance(&mut self, p: f64) -> bool {
        self.rng.random_bool(p)
    }

    fn key(&mut self, mine: &[&'static str]) -> String {
        let all = [BKEYS, HKEYS, GKEYS, OTHER].concat();
        if self.chance(0.9) {
            self.pick(mine).to_string()
        } else {
            self.pick(&all).to_string()
        }
    }

    fn int(&mut self) -> String {
        match self.rng.random_range(0..10) {
            0 => self
                .pick(&["-1", "-8", "x", "", "1.5", "99999999999999999999"])
                .into(),
            1 => self.rng.random_range(-30..30).to_string(),
            _ => self.rng.random_range(0..120).to_string(),
        }
    }

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn bits(&mut self) -> Vec<String> {
        let k = self.key(BKEYS);
        match self.rng.random_range(0..12) {
            0..=2 => {
                let bit = self.pick(&["0", "1", "1", "2", "-1"]);
                vec!["SETBIT".into(), k, self.int(), bit.into()]
            }
            3 => vec!["GETBIT".into(), k, self.int()],
            4 | 5 => {
                let mut a = vec!["BITCOUNT".into(), k];
                if self.chance(0.7) {
                    a.push(self.int());
                    a.push(self.int());
                    if self.chance(0.5) {
                        a.push(self.pick(&["BIT", "BYTE", "bit", "bits"]).into());
                    }
                }
                a
            }
            6 | 7 => {
                let mut a = vec!["BITPOS".into(), k, self.pick(&["0", "1", "1", "2"]).into()];
                for _ in 0..self.rng.random_range(0..3) {
                    a.push(self.int());
                }
                if a.len() >= 5 && self.chance(0.5) {
                    a.push(self.pick(&["BIT", "BYTE"]).into());
                }
                a
            }
            8 => {
                let op = self.pick(&["AND", "OR", "XOR", "NOT", "not", "NAND"]);
                let mut a = vec!["BITOP".into(), op.into(), self.key(BKEYS)];
                for _ in 0..self.rng.random_range(1..4) {
                    a.push(self.key(BKEYS));
                }
                a
            }
            9 => vec![
                "SET".into(),
                k,
                self.pick(&["foobar", "", "\u{ff}\u{1}", "12"]).into(),
            ],
            _ => {
                let name = if self.chance(0.2) {
                    "BITFIELD_RO"
                } else {
                    "BITFIELD"
                };
                let mut a = vec![name.into(), k];
                for _ in 0..self.rng.random_range(0..5) {
                    let ty = self
                        .pick(&[
                            "u8", "i8", "u1", "i1", "u63", "i64", "u64", "i5", "u16", "x4",
                        ])
                        .to_string();
                    let off = if self.chance(0.3) {
                        format!("#{}", self.rng.random_range(0..6))
                    } else {
                        self.int()
                    };
                    match self.rng.random_range(0..5) {
                        0 => a.extend(["GET".into(), ty, off]),
                        1 => a.extend(["SET".into(), ty, off, self.value()]),
                        2 => a.extend(["INCRBY".into(), ty, off, self.value()]),
                        3 => a.extend([
                            "OVERFLOW".into(),
                            self.pick(&["WRAP", "SAT", "FAIL", "sat", "nope"]).into(),
                        ]),
                        _ => a.push(self.pick(&["GET", "FOO"]).into()),
                    }
                }
                a
            }
        }
    }

    fn value(&mut self) -> String {
        self.pick(&[
            "0",
            "1",
            "-1",
            "127",
            "128",
            "255",
            "256",
            "-129",
            "300",
            "9223372036854775807",
            "-9223372036854775808",
            "x",
        ])
        .into()
    }

    fn hll(&mut self) -> Vec<String> {
        let k = self.key(HKEYS);
        match self.rng.random_range(0..10) {
            0..=3 => {
                let mut a = vec!["PFADD".into(), k];
                let n = if self.chance(0.1) {
                    self.rng.random_range(100..600)
                } else {
                    self.rng.random_range(0..8)
                };
                for _ in 0..n {
                    a.push(format!("e{}", self.rng.random_range(0..5000)));
                }
                a
            }
            4 | 5 => {
                let mut a = vec!["PFCOUNT".into(), k];
                if self.chance(0.3) {
                    a.push(self.key(HKEYS));
                }
                a
            }
            6 => {
                let mut a = vec!["PFMERGE".into(), k];
                for _ in 0..self.rng.random_range(0..3) {
                    a.push(self.key(HKEYS));
                }
                a
            }
            7 => vec!["GET".into(), k],
            8 => {
                let sub = self.pick(&["ENCODING", "DECODE", "TODENSE", "GETREG", "NOPE"]);
                vec!["PFDEBUG".into(), sub.into(), k]
            }
            _ => {
                // Corruption: a byte overwritten, or bytes appended.
                let at = self.rng.random_range(0..40).to_string();
                let byte = self.pick(&["\u{7f}", "x", "\u{0}", "H", "\u{80}"]);
                if self.chance(0.5) {
                    vec!["SETRANGE".into(), k, at, byte.into()]
                } else {
                    vec!["APPEND".into(), k, byte.into()]
                }
            }
        }
    }

    fn lcs(&mut self) -> Vec<String> {
        if self.chance(0.3) {
            let k = self.pick(&["s0", "s1"]).to_string();
            let len = self.rng.random_range(0..12);
            let v: String = (0..len).map(|_| self.pick(&['a', 'b', 'c', 'd'])).collect();
            return vec!["SET".into(), k, v];
        }
        let mut a = Self::s(&["LCS", self.pick(&["s0", "s1", "nokey", "list"]), "s1"]);
        for _ in 0..self.rng.random_range(0..3) {
            match self.rng.random_range(0..5) {
                0 => a.push("LEN".into()),
                1 => a.push("IDX".into()),
                2 => a.push("WITHMATCHLEN".into()),
                3 => a.extend([
                    "MINMATCHLEN".into(),
                    self.pick(&["0", "2", "-1", "x"]).into(),
                ]),
                _ => a.push("FOO".into()),
            }
        }
        a
    }

    fn lon(&mut self) -> String {
        if self.chance(0.05) {
            return self.pick(&["181", "x", "-180", "180", "nan"]).into();
        }
        format!("{:.6}", 12.0 + self.rng.random::<f64>() * 4.0)
    }

    fn lat(&mut self) -> String {
        if self.chance(0.05) {
            return self
                .pick(&["86", "y", "85.05112878", "-85.05112878"])
                .into();
        }
        format!("{:.6}", 36.5 + self.rng.random::<f64>() * 2.5)
    }

    fn member(&mut self) -> String {
        self.pick(&["Palermo", "Catania", "a", "b", "c", "d", "e", "nope"])
            .into()
    }

    fn unit(&mut self) -> String {
        self.pick(&["m", "km", "km", "mi", "ft", "KM", "yd"]).into()
    }

    fn radius(&mut self) -> String {
        self.pick(&["0", "10", "50", "100", "200", "300000", "-1", "r"])
            .into()
    }

    fn geo_options(&mut self, a: &mut Vec<String>, store: bool) {
        for _ in 0..self.rng.random_range(0..4) {
            match self.rng.random_range(0..9) {
                0 => a.push("WITHDIST".into()),
                1 => a.push("WITHCOORD".into()),
                2 => a.push("WITHHASH".into()),
                3 => a.push(self.pick(&["ASC", "DESC"]).into()),
                4 => a.extend(["COUNT".into(), self.pick(&["1", "2", "3", "0", "x"]).into()]),
                5 => a.push("ANY".into()),
                6 if store => {
                    a.extend([self.pick(&["STORE", "STOREDIST"]).into(), "gdst".into()]);
                }
                _ => {}
            }
        }
    }

    fn geo(&mut self) -> Vec<String> {
        let k = self.key(GKEYS);
        match self.rng.random_range(0..14) {
            0..=2 => {
                let mut a = vec!["GEOADD".into(), k];
                for f in ["NX", "XX", "CH"] {
                    if self.chance(0.1) {
                        a.push(f.into());
                    }
                }
                for _ in 0..self.rng.random_range(1..4) {
                    a.extend([self.lon(), self.lat(), self.member()]);
                }
                a
            }
            3 => {
                let mut a = vec!["GEOPOS".into(), k];
                for _ in 0..self.rng.random_range(1..4) {
                    a.push(self.member());
                }
                a
            }
            4 => {
                let mut a = vec!["GEODIST".into(), k, self.member(), self.member()];
                if self.chance(0.6) {
                    a.push(self.unit());
                }
                a
            }
            5 => vec!["GEOHASH".into(), k, self.member(), self.member()],
            6 | 7 => {
                let name = self.pick(&["GEORADIUS", "GEORADIUS_RO"]);
                let mut a = vec![
                    name.into(),
                    k,
                    self.lon(),
                    self.lat(),
                    self.radius(),
                    self.unit(),
                ];
                self.geo_options(&mut a, name == "GEORADIUS");
                a
            }
            8 => {
                let name = self.pick(&["GEORADIUSBYMEMBER", "GEORADIUSBYMEMBER_RO"]);
                let mut a = vec![name.into(), k, self.member(), self.radius(), self.unit()];
                self.geo_options(&mut a, name == "GEORADIUSBYMEMBER");
                a
            }
            9..=11 => {
                let store = self.chance(0.3);
                let mut a = if store {
                    vec!["GEOSEARCHSTORE".into(), "gdst".into(), k]
                } else {
                    vec!["GEOSEARCH".into(), k]
                };
                if self.chance(0.5) {
                    a.extend(["FROMMEMBER".into(), self.member()]);
                } else if self.chance(0.95) {
                    a.extend(["FROMLONLAT".into(), self.lon(), self.lat()]);
                }
                if self.chance(0.5) {
                    a.extend(["BYRADIUS".into(), self.radius(), self.unit()]);
                } else if self.chance(0.95) {
                    let (w, h) = (self.radius(), self.radius());
                    a.extend(["BYBOX".into(), w, h, self.unit()]);
                }
                self.geo_options(&mut a, false);
                if store && self.chance(0.3) {
                    a.push("STOREDIST".into());
                }
                a
            }
            12 => vec![
                "ZRANGE".into(),
                "gdst".into(),
                "0".into(),
                "-1".into(),
                "WITHSCORES".into(),
            ],
            _ => vec![
                "ZRANGE".into(),
                k,
                "0".into(),
                "-1".into(),
                "WITHSCORES".into(),
            ],
        }
    }

    fn next(&mut self) -> Vec<String> {
        match self.rng.random_range(0..20) {
            0..=6 => self.bits(),
            7..=11 => self.hll(),
            12..=13 => self.lcs(),
            14..=18 => self.geo(),
            _ => Self::s(&["RPUSH", "list", "x"]),
        }
    }
}

#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_bit_hll_lcs_geo_commands_get_the_same_replies_as_redis() {
    for seed in diff_seeds("differential_bits") {
        one_run(seed).await;
    }
}

async fn one_run(seed: u64) {
    let mut diff = Differential::start("differential_bits", seed).await;
    let mut gen = Gen {
        rng: SmallRng::seed_from_u64(diff.seed),
    };
    let half = diff.ops / 2;
    for i in 0..diff.ops {
        if i == half {
            // The second half in RESP3 (HELLO's own reply differs: server, version).
            let (r, o) = diff.both(&["HELLO", "3"]).await;
            assert!(r.starts_with('%') && o.starts_with('%'), "{r:?} {o:?}");
        }
        let args = gen.next();
        diff.step(i, &args, |redis, ours| redis == ours).await;
    }
    for k in BKEYS.iter().chain(HKEYS) {
        diff.same(&["GET", k]).await;
    }
    for k in GKEYS.iter().chain(&["gdst"]) {
        diff.same(&["ZRANGE", k, "0", "-1", "WITHSCORES"]).await;
    }
    diff.finish().await;
}
