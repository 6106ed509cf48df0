//! What the mutual-exclusion checkers share: a grant's window on the manual clock and
//! the overlap check (`overlaps`); a storage that refuses a fencing token below the
//! highest it has accepted, and the check of a token history (`check_tokens`).

/// One client's hold on a lock: from the grant to the end of its validity, or to its
/// release if that came first. Times are manual-clock milliseconds.
#[derive(Debug, Clone)]
pub struct Grant {
    pub client: usize,
    pub from_ms: u64,
    pub until_ms: u64,
}

/// Pairs of grants to different clients whose windows overlap.
pub fn overlaps(grants: &[Grant]) -> Vec<(Grant, Grant)> {
    let mut found = Vec::new();
    for (i, a) in grants.iter().enumerate() {
        for b in &grants[i + 1..] {
            if a.client != b.client && a.from_ms < b.until_ms && b.from_ms < a.until_ms {
                found.push((a.clone(), b.clone()));
            }
        }
    }
    found
}

/// One write offered to the storage: by which holder (holders are numbered in the
/// order they were granted the lock), with which token, when.
#[derive(Clone, Debug)]
pub struct Write {
    pub holder: usize,
    pub token: u64,
    pub at_ms: u64,
}

/// The resource the lock protects: it refuses a token below the highest it has
/// accepted (a holder may write again with its own token).
#[derive(Default)]
pub struct Storage {
    highest: Option<u64>,
    pub accepted: Vec<Write>,
    pub refused: Vec<Write>,
}

impl Storage {
    /// Offers `w`; whether it was accepted.
    pub fn write(&mut self, w: Write) -> bool {
        let ok = self.highest.is_none_or(|h| w.token >= h);
        if ok {
            self.highest = Some(w.token);
            self.accepted.push(w);
        } else {
            self.refused.push(w);
        }
        ok
    }
}

/// What a token history got wrong.
#[derive(Debug, Default)]
pub struct TokenViolations {
    /// Consecutive tokens handed out, in grant order (holder, token), that did not
    /// grow.
    pub backwards: Vec<((usize, u64), (usize, u64))>,
    /// An accepted write of a holder granted before the holder of a write the storage
    /// had already accepted: an update lost to a stale holder.
    pub lost_to_stale: Vec<(Write, Write)>,
}

impl TokenViolations {
    pub fn is_empty(&self) -> bool {
        self.backwards.is_empty() && self.lost_to_stale.is_empty()
    }

    pub fn len(&self) -> usize {
        self.backwards.len() + self.lost_to_stale.len()
    }
}

/// Checks the tokens `issued` in grant order (holder number, token) and the writes
/// the storage accepted.
pub fn check_tokens(storage: &Storage, issued: &[(usize, u64)]) -> TokenViolations {
    let mut v = TokenViolations::default();
    for pair in issued.windows(2) {
        if pair[1].1 <= pair[0].1 {
            v.backwards.push((pair[0], pair[1]));
        }
    }
    let mut newest: Option<&Write> = None;
    for w in &storage.accepted {
        match newest {
            Some(n) if w.holder < n.holder => v.lost_to_stale.push((n.clone(), w.clone())),
            Some(n) if w.holder == n.holder => {}
            _ => newest = Some(w),
        }
    }
    v
}
