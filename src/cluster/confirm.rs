//! The background side of a map a node must confirm (`Cluster::confirm_round`): a
//! node that started with its saved map serves no slot until a majority of the map's
//! nodes have answered with the same map or an older one, or one of them serves a
//! newer map (installed at once). This thread retries every `RETRY` until then, and
//! afterwards renews the node's lease (`lease.rs`) every `Cluster::renew_every`,
//! which also learns what the other nodes publish (max-ttl, token bound: a later
//! takeover of their slots uses it when they are down) and the newer maps they serve.

use super::{write_durably, Cluster, PeerState, View};
use crate::node::shared::Shared;
use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

const RETRY: Duration = Duration::from_millis(200);

/// Starts the thread for a map-mode node; it ends with the node.
pub fn spawn(shared: &Arc<Shared>) {
    if shared.cluster.mode() != super::Mode::Map {
        return;
    }
    let weak: Weak<Shared> = Arc::downgrade(shared);
    let _ = std::thread::Builder::new()
        .name("cluster-confirm".into())
        .spawn(move || {
            let mut since_renewal = Duration::ZERO;
            loop {
                std::thread::sleep(RETRY);
                let Some(s) = weak.upgrade() else { return };
                if s.shutting_down.load(std::sync::atomic::Ordering::Relaxed) {
                    return;
                }
                let c = &s.cluster;
                let dir = s.node_dir.as_ref().map(|d| d.path());
                if !c.confirmed() && !c.lease_lost() {
                    c.confirm_round(s.clock.now_ms(), &s.tokens, dir);
                    continue;
                }
                since_renewal += RETRY;
                if c.lease_lost() || since_renewal >= c.renew_every() {
                    since_renewal = Duration::ZERO;
                    c.renew_round(s.clock.now_ms(), &s.tokens, dir);
                }
            }
        });
}

/// Confirmation itself: the rounds this thread runs.
impl Cluster {
    /// Whether the node serves the slots of its map (false until a map a node
    /// started with is confirmed).
    pub fn confirmed(&self) -> bool {
        self.confirmed.load(Ordering::Acquire)
    }

    /// Why the map is not confirmed (empty once it is).
    pub fn unconfirmed_why(&self) -> String {
        self.unconfirmed_why.lock().clone()
    }

    /// One confirmation round (`confirm`): asks every other node of the map for its
    /// state; a newer map among the answers is installed (and serves at once); else
    /// the map is confirmed once a majority of the map's nodes (this one included, and
    /// those that asked us with a map no newer) have it or an older one. Returns
    /// whether the map is confirmed.
    pub fn confirm_round(
        &self,
        now_ms: u64,
        tokens: &crate::durability::tokens::TokenMark,
        dir: Option<&Path>,
    ) -> bool {
        if self.confirmed() {
            return true;
        }
        let view = self.view();
        let others = self.others();
        let answers = self.ask_all(&others, view.map.version, tokens);
        if self.adopt_newer(&view, &answers, now_ms, tokens, dir) {
            self.set_confirmed();
            return true;
        }
        let mut with_us: HashSet<&str> = HashSet::new();
        if view.me.is_some() {
            with_us.insert(&self.my_id);
        }
        for (a, (id, _)) in answers.iter().zip(&others) {
            if matches!(a, Ok(st) if st.version <= view.map.version) {
                with_us.insert(id);
            }
        }
        let heard = self.heard.lock().clone();
        for (id, _) in &others {
            if heard.contains(id) {
                with_us.insert(id);
            }
        }
        let need = view.map.nodes.len() / 2 + 1;
        if with_us.len() >= need {
            tracing::info!(
                version = view.map.version,
                confirmed_by = with_us.len(),
                of = view.map.nodes.len(),
                "the slot map is confirmed: serving its slots"
            );
            self.set_confirmed();
            return true;
        }
        let why = format!(
            "this node started with its saved map (version {}) and serves no slot until a majority of the map's nodes confirm it is current: {} of the {} needed answered (CLUSTER INFO, INFO cluster)",
            view.map.version,
            with_us.len(),
            need
        );
        let mut last = self.unconfirmed_why.lock();
        if *last != why {
            tracing::warn!(unreachable = ?answers.iter().filter_map(|a| a.as_ref().err()).collect::<Vec<_>>(), "{why}");
            *last = why;
        }
        false
    }

    /// Installs the newest map among `answers` if it is newer than `view`'s (a node
    /// of the cluster serves it); whether it did.
    pub(super) fn adopt_newer(
        &self,
        view: &View,
        answers: &[Result<PeerState, String>],
        now_ms: u64,
        tokens: &crate::durability::tokens::TokenMark,
        dir: Option<&Path>,
    ) -> bool {
        let newest = answers
            .iter()
            .filter_map(|a| a.as_ref().ok())
            .filter(|a| a.version > view.map.version)
            .max_by_key(|a| a.version);
        let Some((newest, map)) = newest.and_then(|n| Some((n, n.map.as_ref()?))) else {
            return false;
        };
        let version = map.version;
        match self.install(map.clone(), now_ms, tokens, |text| match dir {
            Some(dir) => write_durably(dir, text),
            None => Ok(()),
        }) {
            Ok(fenced) => {
                tracing::warn!(version, from = %newest.id, fenced_slots = fenced, "this node's slot map was stale: installed the newer map a node of the cluster serves");
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot install the newer map a node serves");
                false
            }
        }
    }

    pub(super) fn set_confirmed(&self) {
        self.unconfirmed_why.lock().clear();
        self.confirmed.store(true, Ordering::Release);
    }
}
