//! Differential test for streams: a seeded random sequence of stream commands (explicit,
//! partial `ms-*` and bad IDs, exclusive ranges, COUNT, MAXLEN / MINID with `=` `~` and
//! LIMIT, consumer groups with XREADGROUP, XACK, XCLAIM, XAUTOCLAIM, XPENDING, XSETID,
//! XINFO GROUPS, every type mix) is sent to a real redis-server and to redlockd; the
//! replies must be equal. IDs are explicit (`*` reads each server's own clock), and
//! what carries a time (XPENDING's idle, XINFO CONSUMERS) is left out.
//!
//! Runs the fixed seeds and one random seed; `DIFF_SEED=n` replays one run,
//! `DIFF_OPS=n` changes its length.

use crate::support;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use support::redis_server::{diff_seeds, Differential};

const KEYS: &[&str] = &["x0", "x0", "x1", "str", "nokey"];
const GROUPS: &[&str] = &["g1", "g1", "g2", "nogroup"];
const CONSUMERS: &[&str] = &["alice", "bob", "carol"];
const FIELDS: &[&str] = &["f", "f", "g", "h", ""];

struct Gen {
    rng: SmallRng,
    ms: u64,
}

impl Gen {
    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.rng.random_range(0..from.len())]
    }

    fn chance(&mut self, p: f64) -> bool {
        self.rng.random_bool(p)
    }

    /// An ID near those in use: mostly valid, sometimes partial, special or malformed.
    fn id(&mut self) -> String {
        let ms = self.rng.random_range(0..self.ms + 3);
        match self.rng.random_range(0..12) {
            0 => format!("{ms}"),
            1 => "-".into(),
            2 => "+".into(),
            3 => format!("({ms}-{}", self.rng.random_range(0..3)),
            4 => self
                .pick(&[
                    "abc",
                    "1-2-3",
                    "-1",
                    "18446744073709551615-18446744073709551615",
                    "(-",
                    "0-0",
                ])
                .into(),
            _ => format!("{ms}-{}", self.rng.random_range(0..3)),
        }
    }

    fn count(&mut self) -> String {
        self.pick(&["0", "1", "2", "3", "10", "-1", "x", "9223372036854775807"])
            .into()
    }

    fn xadd(&mut self) -> Vec<String> {
        let mut a = vec!["XADD".to_string(), self.pick(KEYS).into()];
        if self.chance(0.1) {
            a.push("NOMKSTREAM".into());
        }
        if self.chance(0.25) {
            a.push(self.pick(&["MAXLEN", "MINID", "maxlen"]).into());
            if self.chance(0.5) {
                a.push(self.pick(&["~", "="]).into());
            }
            a.push(if a.contains(&"MINID".to_string()) {
                format!("{}", self.rng.random_range(0..self.ms + 2))
            } else {
                self.pick(&["0", "1", "3", "5", "-1"]).into()
            });
            if self.chance(0.3) {
                a.push("LIMIT".into());
                a.push(self.pick(&["0", "1", "2", "-1"]).into());
            }
        }
        if self.chance(0.7) {
            self.ms += self.rng.random_range(0..2);
        }
        let id = match self.rng.random_range(0..10) {
            0 => format!("{}-*", self.ms),
            1 => self.id(),
            _ => format!("{}-{}", self.ms, self.rng.random_range(0..4)),
        };
        a.push(id);
        let pairs = if self.chance(0.05) {
            0
        } else {
            self.rng.random_range(1..3)
        };
        for _ in 0..pairs {
            a.push(self.pick(FIELDS).into());
            a.push(format!("v{}", self.rng.random_range(0..100)));
        }
        a
    }

    fn next(&mut self) -> Vec<String> {
        let key = self.pick(KEYS).to_string();
        let group = self.pick(GROUPS).to_string();
        let consumer = self.pick(CONSUMERS).to_string();
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        match self.rng.random_range(0..24) {
            0..=5 => self.xadd(),
            6 | 7 => {
                let name = self.pick(&["XRANGE", "XREVRANGE"]);
                let (a, b) = (self.id(), self.id());
                let mut v = s(&[name, &key, &a, &b]);
                if self.chance(0.5) {
                    v.push("COUNT".into());
                    v.push(self.count());
                }
                v
            }
            8 => s(&["XLEN", &key]),
            9 => {
                let (a, b) = (self.id(), self.id());
                s(&["XDEL", &key, &a, &b])
            }
            10 => {
                let how = self.pick(&["MAXLEN", "MINID"]);
                let approx = self.pick(&["~", "=", ""]);
                let arg = if how == "MAXLEN" {
                    self.count()
                } else {
                    self.id()
                };
                let mut v = s(&["XTRIM", &key, how]);
                if !approx.is_empty() {
                    v.push(approx.into());
                }
                v.push(arg);
                v
            }
            11 | 12 => {
                let id = self.pick(&["0", "$", "1-0"]).to_string();
                let mut v = s(&["XGROUP", "CREATE", &key, &group, &id]);
                if self.chance(0.3) {
                    v.push("MKSTREAM".into());
                }
                if self.chance(0.2) {
                    v.push("ENTRIESREAD".into());
                    v.push(self.pick(&["0", "2", "-1", "-2"]).into());
                }
                v
            }
            13 => {
                let sub = self.pick(&["SETID", "DESTROY", "CREATECONSUMER", "DELCONSUMER"]);
                match sub {
                    "SETID" => {
                        let id = self.id();
                        s(&["XGROUP", sub, &key, &group, &id])
                    }
                    "DESTROY" => s(&["XGROUP", sub, &key, &group]),
                    _ => s(&["XGROUP", sub, &key, &group, &consumer]),
                }
            }
            14..=16 => {
                let mut v = s(&["XREADGROUP", "GROUP", &group, &consumer]);
                if self.chance(0.5) {
                    v.push("COUNT".into());
                    v.push(self.pick(&["1", "2", "5"]).into());
                }
                if self.chance(0.2) {
                    v.push("NOACK".into());
                }
                v.push("STREAMS".into());
                v.push(key);
                v.push(if self.chance(0.75) {
                    ">".into()
                } else {
                    self.id()
                });
                v
            }
            17 => {
                let mut v = s(&["XREAD"]);
                if self.chance(0.5) {
                    v.push("COUNT".into());
                    v.push(self.pick(&["1", "2", "0"]).into());
                }
                let id = if self.chance(0.3) {
                    "$".to_string()
                } else {
                    self.id()
                };
                v.extend(s(&["STREAMS", &key, &id]));
                v
            }
            18 => {
                let (a, b) = (self.id(), self.id());
                s(&["XACK", &key, &group, &a, &b])
            }
            19 => {
                let id = self.id();
                let mut v = s(&["XCLAIM", &key, &group, &consumer, "0", &id]);
                for opt in ["FORCE", "JUSTID"] {
                    if self.chance(0.3) {
                        v.push(opt.into());
                    }
                }
                if self.chance(0.2) {
                    v.extend(s(&["RETRYCOUNT", "5"]));
                }
                v
            }
            20 => {
                let id = self.id();
                let mut v = s(&["XAUTOCLAIM", &key, &group, &consumer, "0", &id]);
                if self.chance(0.5) {
                    v.push("COUNT".into());
                    v.push(self.pick(&["1", "2", "0"]).into());
                }
                if self.chance(0.5) {
                    v.push("JUSTID".into());
                }
                v
            }
            21 => s(&["XPENDING", &key, &group]),
            22 => s(&["XINFO", "GROUPS", &key]),
            _ => {
                let id = self.id();
                s(&["XSETID", &key, &id])
            }
        }
    }
}

#[cfg_attr(not(have_redis_server), ignore = "needs redis-server on PATH")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_stream_commands_get_the_same_replies_as_redis() {
    for seed in diff_seeds("differential_streams") {
        one_run(seed).await;
    }
}

async fn one_run(seed: u64) {
    let mut diff = Differential::start("differential_streams", seed).await;
    let mut gen = Gen {
        rng: SmallRng::seed_from_u64(diff.seed),
        ms: 1,
    };
    diff.same(&["SET", "str", "v"]).await;
    for i in 0..diff.ops {
        let args = gen.next();
        diff.step(i, &args, |redis, ours| redis == ours).await;
    }
    for k in ["x0", "x1"] {
        diff.same(&["XRANGE", k, "-", "+"]).await;
        diff.same(&["XINFO", "GROUPS", k]).await;
    }
    diff.finish().await;
}
