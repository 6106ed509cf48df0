//! The background side of a map a node must confirm (`Cluster::confirm_round`): a
//! node that started with its saved map serves no slot until a majority of the map's
//! nodes have answered with the same map or an older one, or one of them serves a
//! newer map (installed at once). This thread retries every `RETRY` until then, and
//! afterwards renews the node's lease (`lease.rs`) every `Cluster::renew_every`,
//! which also learns what the other nodes publish (max-ttl, token bound: a later
//! takeover of their slots uses it when they are down) and the newer maps they serve.

use crate::node::shared::Shared;
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
