//! How a lock operation failed ([`RedlockError`]) and how one round over the nodes went
//! ([`AttemptReport`]: granted, held elsewhere, failed and why).

use std::fmt;
use std::time::Duration;

use super::{quorum, NodeError};

/// Why a lock operation failed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RedlockError {
    /// Every attempt allowed by `retry_count` failed; `last` says how the final one went.
    NotAcquired {
        /// Attempts made.
        attempts: u32,
        /// How the final attempt went.
        last: AttemptReport,
    },
    /// The wait given to [`Redlock::acquire_within`](super::Redlock::acquire_within) ran
    /// out before a majority was won.
    Timeout {
        /// How long it waited.
        waited: Duration,
        /// Attempts made.
        attempts: u32,
        /// How the final attempt went, if one was made.
        last: Option<AttemptReport>,
    },
    /// The lock can no longer be guaranteed: an extension did not win a majority before
    /// the validity ended, or the validity has already ended.
    Lost,
    /// Invalid arguments (no nodes, a zero TTL...): retrying cannot help.
    Config(String),
}

impl RedlockError {
    /// True when the last attempt failed because too few nodes could be reached (down,
    /// timed out, refusing with an error) rather than because the lock is held elsewhere.
    pub fn nodes_unavailable(&self) -> bool {
        match self {
            RedlockError::NotAcquired { last, .. } => last.majority_unreachable(),
            RedlockError::Timeout { last: Some(l), .. } => l.majority_unreachable(),
            _ => false,
        }
    }
}

impl fmt::Display for RedlockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RedlockError::NotAcquired { attempts, last } => {
                write!(f, "lock not acquired after {attempts} attempt(s): {last}")
            }
            RedlockError::Timeout {
                waited,
                attempts,
                last,
            } => {
                write!(
                    f,
                    "timed out waiting for the lock after {} ms ({attempts} attempt(s))",
                    waited.as_millis()
                )?;
                if let Some(last) = last {
                    write!(f, ": {last}")?;
                }
                Ok(())
            }
            RedlockError::Lost => f.write_str("lock lost: a majority could not be kept"),
            RedlockError::Config(e) => write!(f, "invalid configuration: {e}"),
        }
    }
}

impl std::error::Error for RedlockError {}

/// How one round over all nodes went: kept in errors so a caller can tell "held
/// elsewhere" from "nodes unreachable" and print which nodes failed and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptReport {
    /// Nodes in the cluster.
    pub nodes: usize,
    /// Nodes that granted the request.
    pub granted: usize,
    /// Nodes that answered but refused (the key is held by another value).
    pub refused: usize,
    /// Nodes that failed: address and reason.
    pub failed: Vec<(String, NodeError)>,
    /// Whether enough nodes granted but the validity left was not positive (too slow).
    pub expired: bool,
}

impl AttemptReport {
    /// Even if every reachable node had granted, there would be no majority.
    pub fn majority_unreachable(&self) -> bool {
        self.nodes - self.failed.len() < quorum(self.nodes)
    }
}

impl fmt::Display for AttemptReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{} nodes granted (need {}), {} held elsewhere, {} failed",
            self.granted,
            self.nodes,
            quorum(self.nodes),
            self.refused,
            self.failed.len()
        )?;
        if self.expired {
            f.write_str(", validity used up before the majority was reached")?;
        }
        for (addr, e) in &self.failed {
            write!(f, "; {addr}: {e}")?;
        }
        Ok(())
    }
}
