//! Acquiring with a fencing token (`RedlockOptions::fencing_tokens`), in two phases:
//!
//! 1. `FENCING.GRANT key value PX ttl` on every node: SET NX PX, and each granting node's
//!    token mark read atomically with the grant.
//! 2. token = max(marks of the granted nodes) + 1, then `FENCING.COMMIT key value token`
//!    on the granted nodes: each raises its mark only while the key still holds our
//!    value. The token is ours once a majority committed it, within the validity.
//!
//! A later holder's quorum meets one of our committing nodes, which granted it only
//! after our key was gone there, so after our commit: its mark, and so its token, is
//! larger. A holder paused between the phases finds its keys gone (expired, taken) and
//! gets no token.

use super::{
    drift, ms_arg, random_value, release_value, AttemptReport, Lock, NodeError, Redlock, Request,
};
use bytes::Bytes;
use redis_protocol::resp2::types::BytesFrame;
use std::time::Duration;
use tokio::time::Instant;

/// Tokens are Redis integers (i64).
const MAX_TOKEN: u64 = i64::MAX as u64;

impl Redlock {
    /// One round with a token. On failure the value is released everywhere.
    pub(super) async fn attempt_fenced(
        &self,
        resource: &[u8],
        ttl: Duration,
    ) -> Result<Lock, AttemptReport> {
        let value = random_value();
        let ttl_ms = ms_arg(ttl);
        let grant: [&[u8]; 5] = [b"FENCING.GRANT", resource, &value, b"PX", ttl_ms.as_bytes()];
        let start = Instant::now();
        let all: Vec<usize> = (0..self.node_count()).collect();
        let (mut granted, mut refused, mut failed) = (Vec::new(), 0, Vec::new());
        let mut highest: u64 = 0;
        for (i, r) in self.on_nodes(&all, ttl, &Request::Command(&grant)).await {
            match r {
                Ok(BytesFrame::Integer(mark)) if mark >= 0 => {
                    granted.push(i);
                    highest = highest.max(mark as u64);
                }
                Ok(BytesFrame::Null) => refused += 1,
                Ok(other) => failed.push((
                    self.inner.nodes[i].addr().to_string(),
                    NodeError::Protocol(format!("unexpected FENCING.GRANT reply {other:?}")),
                )),
                Err(e) => failed.push((self.inner.nodes[i].addr().to_string(), e)),
            }
        }
        let validity_left = |now: Instant| {
            ttl.checked_sub(now - start)
                .and_then(|v| v.checked_sub(drift(ttl)))
                .unwrap_or(Duration::ZERO)
        };
        let majority = granted.len() >= self.quorum();
        let mut committed = granted.len();
        let token = highest + 1;
        if majority && !validity_left(Instant::now()).is_zero() && token <= MAX_TOKEN {
            let token_arg = token.to_string();
            let commit: [&[u8]; 4] = [b"FENCING.COMMIT", resource, &value, token_arg.as_bytes()];
            committed = 0;
            for (i, r) in self
                .on_nodes(&granted, ttl, &Request::Command(&commit))
                .await
            {
                match r {
                    Ok(BytesFrame::Integer(1)) => committed += 1,
                    Ok(_) => refused += 1,
                    Err(e) => failed.push((self.inner.nodes[i].addr().to_string(), e)),
                }
            }
            let validity = validity_left(Instant::now());
            if committed >= self.quorum() && !validity.is_zero() {
                return Ok(Lock {
                    resource: Bytes::copy_from_slice(resource),
                    value,
                    ttl,
                    // As for plain acquires: the time spent is taken off twice (the
                    // validity is counted from the start), the conservative side.
                    valid_until: start + validity,
                    token: Some(token),
                });
            }
        }
        if !granted.is_empty() || !failed.is_empty() {
            release_value(self, resource, &value, ttl).await;
        }
        Err(AttemptReport {
            nodes: self.node_count(),
            granted: committed,
            refused,
            failed,
            expired: majority && committed >= self.quorum(),
        })
    }
}
