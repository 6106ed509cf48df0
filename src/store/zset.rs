//! A sorted set: members ordered by (score, member bytes), as Redis's skiplist orders
//! them, plus a member -> score map for O(1) ZSCORE.
//!
//! Each member's bytes are stored once, in an `Arc<[u8]>` shared by both indexes
//! (16 bytes a reference, one allocation a member), which keeps the memory per member
//! close to Redis's skiplist + dict. The ordered index is a B-tree: ranges by score or
//! by lex are O(log n) to find; a rank is O(rank) (the B-tree keeps no subtree
//! counts), which is cheap for the small sets semaphores and fair locks keep.

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap};
use std::ops::Bound;
use std::sync::Arc;

/// Redis keeps a small sorted set as a listpack until it has more than 128 members or
/// a member longer than 64 bytes (zset-max-listpack-entries / -value); it never
/// converts back.
const LISTPACK_MAX_ENTRIES: usize = 128;
const LISTPACK_MAX_VALUE: usize = 64;

type Member = Arc<[u8]>;

/// One element of the ordered index. Scores are never NaN, so `partial_cmp` is a
/// total order; -0 and 0 compare equal, as Redis's `<` comparisons treat them.
#[derive(Debug, Clone)]
struct Scored {
    score: f64,
    member: Member,
}

impl PartialEq for Scored {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Scored {}

impl PartialOrd for Scored {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Scored {
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .partial_cmp(&other.score)
            .unwrap_or(Ordering::Equal)
            .then_with(|| self.member.cmp(&other.member))
    }
}

/// A score range bound: `(1.5` is exclusive, `-inf` / `+inf` are unbounded in effect.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScoreBound {
    pub value: f64,
    pub exclusive: bool,
}

/// A lex range bound: `-`, `+`, `[member` (inclusive) or `(member` (exclusive).
#[derive(Debug, Clone, PartialEq)]
pub enum LexBound {
    Min,
    Max,
    Inclusive(Vec<u8>),
    Exclusive(Vec<u8>),
}

impl LexBound {
    /// Whether min > max, or min == max with either end exclusive (an empty range).
    fn inverted(min: &LexBound, max: &LexBound) -> bool {
        fn key(b: &LexBound) -> (u8, &[u8], bool) {
            match b {
                LexBound::Min => (0, &[], false),
                LexBound::Inclusive(x) => (1, x, false),
                LexBound::Exclusive(x) => (1, x, true),
                LexBound::Max => (2, &[], false),
            }
        }
        let ((a, x, ax), (b, y, bx)) = (key(min), key(max));
        match (a, x).cmp(&(b, y)) {
            Ordering::Greater => true,
            Ordering::Equal => ax || bx,
            Ordering::Less => false,
        }
    }

    /// Whether `member` is at or above this bound taken as a minimum.
    fn admits_from_below(&self, member: &[u8]) -> bool {
        match self {
            LexBound::Min => true,
            LexBound::Max => false,
            LexBound::Inclusive(b) => member >= &b[..],
            LexBound::Exclusive(b) => member > &b[..],
        }
    }

    /// Whether `member` is at or below this bound taken as a maximum.
    fn admits_from_above(&self, member: &[u8]) -> bool {
        match self {
            LexBound::Min => false,
            LexBound::Max => true,
            LexBound::Inclusive(b) => member <= &b[..],
            LexBound::Exclusive(b) => member < &b[..],
        }
    }
}

impl ScoreBound {
    fn above_min(&self, score: f64) -> bool {
        if self.exclusive {
            score > self.value
        } else {
            score >= self.value
        }
    }

    fn below_max(&self, score: f64) -> bool {
        if self.exclusive {
            score < self.value
        } else {
            score <= self.value
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct ZSet {
    scores: HashMap<Member, f64>,
    ordered: BTreeSet<Scored>,
    /// Past the listpack limits once (OBJECT ENCODING answers "skiplist").
    big: bool,
}

impl PartialEq for ZSet {
    fn eq(&self, other: &Self) -> bool {
        self.scores == other.scores
    }
}

impl ZSet {
    pub fn new() -> ZSet {
        ZSet::default()
    }

    pub fn len(&self) -> usize {
        self.scores.len()
    }

    pub fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }

    /// "listpack" or "skiplist", as Redis 7 reports for this set's history.
    pub fn encoding(&self) -> &'static str {
        if self.big {
            "skiplist"
        } else {
            "listpack"
        }
    }

    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.scores.get(member).copied()
    }

    /// A sorted set of distinct members, built whole as Redis's ZUNIONSTORE and
    /// snapshot loads build one: its encoding follows from the final size, so a -0
    /// score survives when that is a skiplist (see `insert`).
    pub fn from_members(members: Vec<(Vec<u8>, f64)>) -> ZSet {
        let mut z = ZSet {
            big: members.len() > LISTPACK_MAX_ENTRIES
                || members.iter().any(|(m, _)| m.len() > LISTPACK_MAX_VALUE),
            ..ZSet::default()
        };
        for (m, score) in members {
            z.insert(&m, score);
        }
        z
    }

    /// Sets `member`'s score (never NaN); returns true when the member is new.
    /// A listpack stores -0 as 0; a skiplist keeps it (`ZADD big -0 m` answers
    /// ZSCORE with "-0" in Redis), and a set turns skiplist before its new member
    /// goes in.
    pub fn insert(&mut self, member: &[u8], score: f64) -> bool {
        if !self.scores.contains_key(member)
            && (self.scores.len() >= LISTPACK_MAX_ENTRIES || member.len() > LISTPACK_MAX_VALUE)
        {
            self.big = true;
        }
        let score = if self.big { score } else { score + 0.0 };
        if let Some((m, old)) = self.scores.get_key_value(member) {
            let (m, old) = (m.clone(), *old);
            if old.to_bits() != score.to_bits() {
                self.ordered.remove(&Scored {
                    score: old,
                    member: m.clone(),
                });
                self.ordered.insert(Scored {
                    score,
                    member: m.clone(),
                });
                self.scores.insert(m, score);
            }
            return false;
        }
        let m: Member = Arc::from(member);
        self.ordered.insert(Scored {
            score,
            member: m.clone(),
        });
        self.scores.insert(m, score);
        true
    }

    /// Removes `member`; returns whether it was there.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        let Some((m, score)) = self.scores.remove_entry(member) else {
            return false;
        };
        self.ordered.remove(&Scored { score, member: m });
        true
    }

    /// Every (member, score), lowest first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&[u8], f64)> {
        self.ordered.iter().map(|s| (&s.member[..], s.score))
    }

    /// The 0-based rank of `member` from the lowest score (or the highest, `rev`).
    pub fn rank(&self, member: &[u8], rev: bool) -> Option<usize> {
        let (m, score) = self.scores.get_key_value(member)?;
        let probe = Scored {
            score: *score,
            member: m.clone(),
        };
        Some(if rev {
            self.ordered
                .range((Bound::Excluded(&probe), Bound::Unbounded))
                .count()
        } else {
            self.ordered.range(..&probe).count()
        })
    }

    /// Elements at ranks `start..=stop` (both already within 0..len), lowest first
    /// or, with `rev`, highest first.
    pub fn by_rank(&self, start: usize, stop: usize, rev: bool) -> Vec<(&[u8], f64)> {
        let take = stop + 1 - start;
        // Walk from whichever end is nearer to the range.
        let from_front = start <= self.len() - 1 - stop;
        fn pick(s: &Scored) -> (&[u8], f64) {
            (&s.member[..], s.score)
        }
        match (rev, from_front) {
            (false, true) => self
                .ordered
                .iter()
                .skip(start)
                .take(take)
                .map(pick)
                .collect(),
            (true, true) => self
                .ordered
                .iter()
                .rev()
                .skip(start)
                .take(take)
                .map(pick)
                .collect(),
            (false, false) => {
                let mut v: Vec<_> = self
                    .ordered
                    .iter()
                    .rev()
                    .skip(self.len() - 1 - stop)
                    .take(take)
                    .map(pick)
                    .collect();
                v.reverse();
                v
            }
            (true, false) => {
                let mut v: Vec<_> = self
                    .ordered
                    .iter()
                    .skip(self.len() - 1 - stop)
                    .take(take)
                    .map(pick)
                    .collect();
                v.reverse();
                v
            }
        }
    }

    /// The probe that sorts before every member with `score`.
    fn lowest_at(score: f64) -> Scored {
        Scored {
            score,
            member: Arc::from(&[][..]),
        }
    }

    /// Members with min <= score <= max (bounds as given), lowest first, or highest
    /// first with `rev`.
    pub fn by_score(
        &self,
        min: ScoreBound,
        max: ScoreBound,
        rev: bool,
    ) -> Box<dyn Iterator<Item = (&[u8], f64)> + '_> {
        fn pick(s: &Scored) -> (&[u8], f64) {
            (&s.member[..], s.score)
        }
        if min.value > max.value || min.value.is_nan() || max.value.is_nan() {
            return Box::new(std::iter::empty());
        }
        if rev {
            // Everything below the first score above max, from the top.
            let upper = if max.value == f64::INFINITY {
                Bound::Unbounded
            } else {
                Bound::Excluded(Self::lowest_at(max.value.next_up()))
            };
            Box::new(
                self.ordered
                    .range((Bound::Unbounded, upper))
                    .rev()
                    .skip_while(move |s| !max.below_max(s.score))
                    .take_while(move |s| min.above_min(s.score))
                    .map(pick),
            )
        } else {
            Box::new(
                self.ordered
                    .range(Self::lowest_at(min.value)..)
                    .skip_while(move |s| !min.above_min(s.score))
                    .take_while(move |s| max.below_max(s.score))
                    .map(pick),
            )
        }
    }

    /// Members between lex bounds (meaningful when all scores are equal, as Redis
    /// documents), lowest first or highest first with `rev`, after skipping `offset`
    /// members from the first one in range. As in Redis's scan, the member the scan
    /// starts from must be within both bounds (else nothing: zzlFirstInLexRange /
    /// zzlLastInLexRange), and the skipped members are not checked against the far
    /// bound; both matter only with mixed scores.
    pub fn by_lex<'a>(
        &'a self,
        min: &'a LexBound,
        max: &'a LexBound,
        rev: bool,
        offset: usize,
    ) -> Box<dyn Iterator<Item = (&'a [u8], f64)> + 'a> {
        let pick = |s: &'a Scored| (&s.member[..], s.score);
        // Redis's early exits (zzlIsInLexRange): an inverted range, a last member
        // below min or a first member above max give nothing. They matter when the
        // scores are not all equal, where the scan below alone would differ.
        let (Some(first), Some(last)) = (self.ordered.first(), self.ordered.last()) else {
            return Box::new(std::iter::empty());
        };
        if LexBound::inverted(min, max)
            || !min.admits_from_below(&last.member)
            || !max.admits_from_above(&first.member)
        {
            return Box::new(std::iter::empty());
        }
        if rev {
            let mut from = self
                .ordered
                .iter()
                .rev()
                .skip_while(move |s| !max.admits_from_above(&s.member))
                .peekable();
            if !from
                .peek()
                .is_some_and(|s| min.admits_from_below(&s.member))
            {
                return Box::new(std::iter::empty());
            }
            Box::new(
                from.skip(offset)
                    .take_while(move |s| min.admits_from_below(&s.member))
                    .map(pick),
            )
        } else {
            let mut from = self
                .ordered
                .iter()
                .skip_while(move |s| !min.admits_from_below(&s.member))
                .peekable();
            if !from
                .peek()
                .is_some_and(|s| max.admits_from_above(&s.member))
            {
                return Box::new(std::iter::empty());
            }
            Box::new(
                from.skip(offset)
                    .take_while(move |s| max.admits_from_above(&s.member))
                    .map(pick),
            )
        }
    }

    /// Removes and returns the lowest (or, `max`, highest) element.
    pub fn pop(&mut self, max: bool) -> Option<(Vec<u8>, f64)> {
        let first = if max {
            self.ordered.pop_last()
        } else {
            self.ordered.pop_first()
        }?;
        self.scores.remove(&first.member[..]);
        Some((first.member.to_vec(), first.score))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inc(v: f64) -> ScoreBound {
        ScoreBound {
            value: v,
            exclusive: false,
        }
    }

    fn members(v: Vec<(&[u8], f64)>) -> Vec<String> {
        v.into_iter()
            .map(|(m, _)| String::from_utf8_lossy(m).into_owned())
            .collect()
    }

    #[test]
    fn orders_by_score_then_member() {
        let mut z = ZSet::new();
        assert!(z.insert(b"b", 1.0));
        assert!(z.insert(b"a", 1.0));
        assert!(z.insert(b"c", 0.5));
        assert!(!z.insert(b"c", 2.0));
        assert_eq!(members(z.iter().collect()), ["a", "b", "c"]);
        assert_eq!(z.rank(b"c", false), Some(2));
        assert_eq!(z.rank(b"c", true), Some(0));
        assert_eq!(z.rank(b"zz", false), None);
    }

    #[test]
    fn score_ranges_honour_exclusive_bounds() {
        let mut z = ZSet::new();
        for (m, s) in [("a", 1.0), ("b", 2.0), ("c", 2.0), ("d", 3.0)] {
            z.insert(m.as_bytes(), s);
        }
        let ex2 = ScoreBound {
            value: 2.0,
            exclusive: true,
        };
        assert_eq!(
            members(z.by_score(ex2, inc(f64::INFINITY), false).collect()),
            ["d"]
        );
        assert_eq!(
            members(z.by_score(inc(2.0), inc(2.0), true).collect()),
            ["c", "b"]
        );
        assert_eq!(
            members(z.by_score(inc(f64::NEG_INFINITY), ex2, true).collect()),
            ["a"]
        );
        assert!(z.by_score(inc(3.0), inc(1.0), false).next().is_none());
    }

    /// Mixed scores (differential_types, DIFF_SEED=11792857782335933061): the member a
    /// lex scan starts from must be within both bounds, whatever the offset; each
    /// expectation is redis-server 7.0.15's reply to the same ZADDs and ZRANGE.
    #[test]
    fn lex_scans_with_mixed_scores_start_where_redis_starts() {
        let (b, d) = (
            LexBound::Inclusive(b"b".to_vec()),
            LexBound::Inclusive(b"d".to_vec()),
        );
        let mut z = ZSet::new();
        for (m, s) in [("a", 1.0), ("e", 2.0), ("x", 3.0), ("c", 4.0)] {
            z.insert(m.as_bytes(), s);
        }
        // From the lowest score: "e" is the first >= b, and it is above d.
        assert!(z.by_lex(&b, &d, false, 2).next().is_none());
        assert!(z.by_lex(&b, &d, false, 0).next().is_none());
        let mut r = ZSet::new();
        for (m, s) in [("c", 1.0), ("x", 2.0), ("a", 3.0), ("e", 4.0)] {
            r.insert(m.as_bytes(), s);
        }
        // From the highest score: "a" is the first <= d, and it is below b.
        assert!(r.by_lex(&b, &d, true, 1).next().is_none());
        assert!(r.by_lex(&b, &d, true, 0).next().is_none());
        // Equal scores, the case Redis documents: offsets count members in range.
        let mut eq = ZSet::new();
        for m in ["a", "b", "c", "d", "e"] {
            eq.insert(m.as_bytes(), 0.0);
        }
        assert_eq!(members(eq.by_lex(&b, &d, false, 1).collect()), ["c", "d"]);
        assert_eq!(members(eq.by_lex(&b, &d, true, 1).collect()), ["c", "b"]);
    }

    #[test]
    fn rank_ranges_from_either_end() {
        let mut z = ZSet::new();
        for i in 0..10 {
            z.insert(format!("m{i}").as_bytes(), i as f64);
        }
        assert_eq!(members(z.by_rank(1, 2, false)), ["m1", "m2"]);
        assert_eq!(members(z.by_rank(7, 8, false)), ["m7", "m8"]);
        assert_eq!(members(z.by_rank(1, 2, true)), ["m8", "m7"]);
        assert_eq!(members(z.by_rank(7, 8, true)), ["m2", "m1"]);
    }

    /// redis-server 7.0.15: `ZADD z -0 m` answers ZSCORE "0" on a listpack, "-0" on a
    /// skiplist (and on one the new member makes a skiplist).
    #[test]
    fn only_a_skiplist_keeps_minus_zero() {
        let long = [b'x'; 65];
        let mut z = ZSet::new();
        z.insert(b"a", -0.0);
        assert!(z.score(b"a").unwrap().is_sign_positive());
        z.insert(&long, -0.0);
        assert!(z.score(&long).unwrap().is_sign_negative());
        z.insert(b"b", -0.0);
        assert!(z.score(b"b").unwrap().is_sign_negative());
        let small = ZSet::from_members(vec![(b"a".to_vec(), -0.0)]);
        assert_eq!(small.encoding(), "listpack");
        assert!(small.score(b"a").unwrap().is_sign_positive());
        let big = ZSet::from_members(vec![(b"a".to_vec(), -0.0), (long.to_vec(), 1.0)]);
        assert_eq!(big.encoding(), "skiplist");
        assert!(big.score(b"a").unwrap().is_sign_negative());
    }

    #[test]
    fn encoding_turns_to_skiplist_for_good() {
        let mut z = ZSet::new();
        z.insert(b"a", 1.0);
        assert_eq!(z.encoding(), "listpack");
        z.insert(&[b'x'; 65], 1.0);
        assert_eq!(z.encoding(), "skiplist");
        z.remove(&[b'x'; 65]);
        assert_eq!(z.encoding(), "skiplist");
    }
}
