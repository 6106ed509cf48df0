//! The manifest of a multi-part append-only log, Redis 7's format: one line per file,
//! `file <name> seq <n> type <b|h|i>`, the base first, then the incr files in order.
//! Lines starting with `#` are skipped; extra key/value pairs are ignored (Redis's
//! forward compatibility). redlockd never keeps history files: a rewrite deletes the
//! files it replaced once the new manifest is durable.

/// A file the log is made of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    pub name: String,
    pub seq: u64,
}

/// The manifest: at most one base, then the incr files in replay order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Manifest {
    pub base: Option<Part>,
    pub incrs: Vec<Part>,
}

impl Manifest {
    /// The manifest's text.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if let Some(b) = &self.base {
            out.push_str(&format!("file {} seq {} type b\n", b.name, b.seq));
        }
        for i in &self.incrs {
            out.push_str(&format!("file {} seq {} type i\n", i.name, i.seq));
        }
        out
    }

    /// Parses a manifest as Redis's loader does; an error says what is wrong.
    pub fn parse(text: &str) -> Result<Manifest, String> {
        let mut m = Manifest::default();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if line.len() > 1024 {
                return Err(format!("line {} is longer than 1024 bytes", n + 1));
            }
            let words: Vec<&str> = line.split_whitespace().collect();
            if words.len() < 6 || !words.len().is_multiple_of(2) {
                return Err(format!("line {} is not `file NAME seq N type T`", n + 1));
            }
            let (mut name, mut seq, mut kind) = (None, None, None);
            for pair in words.chunks(2) {
                match pair[0] {
                    "file" => name = Some(pair[1]),
                    "seq" => seq = pair[1].parse::<u64>().ok(),
                    "type" => kind = Some(pair[1]),
                    _ => {}
                }
            }
            let (Some(name), Some(seq), Some(kind)) = (name, seq, kind) else {
                return Err(format!("line {} lacks a file, seq or type", n + 1));
            };
            if name.contains('/') || name == "." || name == ".." {
                return Err(format!("line {}: {name} is not a bare file name", n + 1));
            }
            let part = Part {
                name: name.to_string(),
                seq,
            };
            match kind {
                "b" if m.base.is_some() => return Err("two base files".into()),
                "b" => m.base = Some(part),
                // History files are replaced already; a leftover is ignored.
                "h" => {}
                "i" => {
                    if m.incrs.last().is_some_and(|l| l.seq >= seq) {
                        return Err(format!("line {}: incr seq {seq} does not increase", n + 1));
                    }
                    m.incrs.push(part);
                }
                other => return Err(format!("line {}: unknown type {other}", n + 1)),
            }
        }
        if m.base.is_none() && m.incrs.is_empty() {
            return Err("the manifest names no file".into());
        }
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_it_writes_and_redis_s_example() {
        let m = Manifest {
            base: Some(Part {
                name: "appendonly.aof.2.base.aof".into(),
                seq: 2,
            }),
            incrs: vec![Part {
                name: "appendonly.aof.4.incr.aof".into(),
                seq: 4,
            }],
        };
        assert_eq!(Manifest::parse(&m.encode()).unwrap(), m);
        let redis = "file appendonly.aof.2.base.rdb seq 2 type b\nfile appendonly.aof.1.incr.aof seq 1 type h\nfile appendonly.aof.4.incr.aof seq 4 type i\nfile appendonly.aof.5.incr.aof seq 5 type i extra x\n";
        let m = Manifest::parse(redis).unwrap();
        assert_eq!(m.incrs.len(), 2);
        assert!(Manifest::parse("").is_err());
        assert!(Manifest::parse("file a seq 1 type i\nfile b seq 1 type i\n").is_err());
        assert!(Manifest::parse("file ../a seq 1 type i\n").is_err());
        assert!(Manifest::parse("file a seq 1 type z\n").is_err());
    }
}
