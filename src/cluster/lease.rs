//! The lease of a serving node: a node of a map serves its slots only while a majority
//! of the map's slot owners (itself included) answered it within
//! `--cluster-node-timeout` with the same map or an older one; a node that answers with a newer map gives it
//! at once (installed: its slots go where it says). Past the timeout without a
//! majority the node stops serving (`-CLUSTERDOWN`, logged, `INFO cluster`) until a
//! majority answers again: what Redis Cluster does to a master on the minority side of
//! a partition.
//!
//! Why: a takeover moves a dead owner's slots without its agreement. If the owner was
//! only cut off (a partition, a long pause), it would go on granting locks on the
//! slots the new owner serves. With the lease, the cut-off owner stops within the
//! timeout of the takeover: a majority has the new map by then (the operator pushes
//! it to every node it reaches), so no majority answers the old owner with an older
//! one. The new owner fences a slot taken over for the old owner's max-ttl, the
//! restart margin and this timeout (`Cluster::takeover_margin_ms`), which covers the
//! locks the old owner granted before it stopped.
//!
//! A node that stops cleanly says so (`CLUSTER LEAVING`, once its connections have
//! ended): a takeover of its slots then fences for its max-ttl and the margin only.
//! Whoever did not hear it, or heard from the node again since, fences in full.
//!
//! The lease runs on the real monotonic clock (`Instant`), as the calls to the other
//! nodes do; tests that move the manual clock do not expire it. A node timeout of 0
//! turns the lease off (no expiry, no newer map learned, no longer takeover fence):
//! the test backend's nodes start so (`TestServer::config`), so that a seeded run on
//! the manual clock does not depend on real time; tests of the lease set a timeout.

use super::{Cluster, PeerState};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// `--cluster-node-timeout`'s default.
pub const DEFAULT_NODE_TIMEOUT: Duration = Duration::from_secs(5);

impl Cluster {
    /// What a fence on a slot taken over adds to the old owner's max-ttl: the restart
    /// margin, and the time the old owner may go on serving if it was only cut off.
    pub(super) fn takeover_margin_ms(&self) -> u64 {
        self.margin_ms + self.node_timeout_ms
    }

    /// `takeover_margin_ms` for slots of the node `id`: the margin alone if it said it
    /// stopped cleanly and has not asked anything since (it serves nothing until a
    /// majority confirms its map, and the majority has the newer one).
    pub(super) fn takeover_margin_for(&self, id: &str) -> u64 {
        if self.left.lock().contains(id) {
            self.margin_ms
        } else {
            self.takeover_margin_ms()
        }
    }

    /// `CLUSTER LEAVING <id>`: the node `id` stopped cleanly.
    pub fn note_leaving(&self, id: &str) {
        if id != self.my_id {
            tracing::info!(node = %id, "a node of the map stopped cleanly");
            self.left.lock().insert(id.to_string());
        }
    }

    /// At a clean stop, once no command runs any more: tells the other nodes of the
    /// map (`CLUSTER LEAVING`), so that a takeover of this node's slots need not wait
    /// out the node timeout on top of its max-ttl. Only with the lease on (without it
    /// there is nothing to shorten); a node that does not hear it fences in full.
    pub fn announce_leaving(&self) {
        if self.mode != super::Mode::Map || self.node_timeout_ms == 0 {
            return;
        }
        let others = self.others();
        std::thread::scope(|scope| {
            for (id, addr) in &others {
                scope.spawn(move || {
                    let call: [&[u8]; 3] = [b"CLUSTER", b"LEAVING", self.my_id.as_bytes()];
                    if let Err(e) =
                        super::peer::call_once(addr, super::PEER_TIMEOUT, self.peer_auth.as_ref(), &call)
                    {
                        tracing::info!(node = %id, addr = %addr, error = %e, "could not say this node stops");
                    }
                });
            }
        });
    }

    /// How often a serving node renews its lease (with the lease off, asks the others
    /// for what they publish).
    pub fn renew_every(&self) -> Duration {
        if self.node_timeout_ms == 0 {
            return Duration::from_secs(2);
        }
        Duration::from_millis((self.node_timeout_ms / 4).clamp(100, 2_000))
    }

    /// One renewal (`confirm`'s thread, while the map is confirmed or the lease was
    /// lost): asks every other node of the map; installs a newer map one serves;
    /// renews when a majority has this map or an older one; stops serving once the
    /// timeout passed without that, and serves again when a majority answers.
    pub fn renew_round(
        &self,
        now_ms: u64,
        tokens: &crate::durability::tokens::TokenMark,
        dir: Option<&Path>,
    ) {
        if self.confirm_off.load(Ordering::SeqCst) {
            return;
        }
        let view = self.view();
        let others = self.others();
        let answers: Vec<Result<PeerState, String>> = if others.is_empty() {
            Vec::new()
        } else {
            self.ask_all(&others, view.map.version, tokens)
        };
        if self.node_timeout_ms == 0 {
            // The lease is off (the test backend's default): what the others
            // published is learned, nothing more.
            return;
        }
        let adopted = self.adopt_newer(&view, &answers, now_ms, tokens, dir);
        // The voters: the nodes that own slots in this map (a node the map leaves
        // without slots, such as a dead owner taken over, has nothing to confirm).
        let mut voters: Vec<bool> = vec![false; view.map.nodes.len()];
        for &o in view
            .map
            .owner
            .iter()
            .filter(|&&o| o != super::map::UNASSIGNED)
        {
            voters[usize::from(o)] = true;
        }
        let is_voter =
            |id: &str| (view.map.nodes.iter().zip(&voters)).any(|(n, &v)| v && n.id == id);
        let with_us = usize::from(is_voter(&self.my_id))
            + (answers.iter().zip(&others))
                .filter(|(a, (id, _))| {
                    is_voter(id) && matches!(a, Ok(st) if st.version <= view.map.version)
                })
                .count();
        let need = voters.iter().filter(|&&v| v).count() / 2 + 1;
        let majority = !is_voter(&self.my_id) || with_us >= need;
        if adopted || majority {
            *self.renewed_at.lock() = Instant::now();
            if self.lease_lost.swap(false, Ordering::SeqCst) {
                tracing::info!(
                    version = self.view().map.version,
                    "a majority of the map's nodes answered again: serving the slots"
                );
                self.set_confirmed();
            }
            return;
        }
        let silent = self.renewed_at.lock().elapsed();
        if silent.as_millis() as u64 > self.node_timeout_ms
            && !self.lease_lost.swap(true, Ordering::SeqCst)
        {
            let why = format!(
                "this node has not reached a majority of its map's nodes for {} ms (cluster-node-timeout {} ms): it serves no slot until it does; {} of the {} needed answered",
                silent.as_millis(),
                self.node_timeout_ms,
                with_us,
                need
            );
            tracing::warn!(unreachable = ?answers.iter().filter_map(|a| a.as_ref().err()).collect::<Vec<_>>(), "{why}");
            *self.unconfirmed_why.lock() = why;
            self.confirmed.store(false, Ordering::Release);
        }
    }

    /// Test hook: map confirmation off (or on again): a node started with a saved map
    /// serves it at once, and its lease neither stops it nor learns newer maps (what a
    /// node did before maps were confirmed; the checkers show what that costs).
    pub fn set_map_confirmation(&self, on: bool) {
        self.confirm_off.store(!on, Ordering::SeqCst);
    }

    /// Whether serving stopped for the lease (then `renew_round` runs, not the
    /// restart's confirmation).
    pub fn lease_lost(&self) -> bool {
        self.lease_lost.load(Ordering::SeqCst)
    }
}
