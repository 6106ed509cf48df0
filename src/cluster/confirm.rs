//! The background side of a map a node must confirm (`Cluster::confirm_round`): a
//! node that started with its saved map serves no slot until a majority of the map's
//! nodes have answered with the same map or an older one, or one of them serves a
//! newer map (installed at once). This thread retries every `RETRY` until then, and
//! afterwards asks the other nodes every `REFRESH` for what they publish (max-ttl,
//! token bound), which a later takeover of their slots uses when they are down.

use crate::node::shared::Shared;
use std::sync::{Arc, Weak};
use std::time::Duration;

const RETRY: Duration = Duration::from_millis(200);
const REFRESH: Duration = Duration::from_secs(2);

/// Starts the thread for a map-mode node; it ends with the node.
pub fn spawn(shared: &Arc<Shared>) {
    if shared.cluster.mode() != super::Mode::Map {
        return;
    }
    let weak: Weak<Shared> = Arc::downgrade(shared);
    let _ = std::thread::Builder::new()
        .name("cluster-confirm".into())
        .spawn(move || {
            let mut since_refresh = Duration::ZERO;
            loop {
                std::thread::sleep(RETRY);
                let Some(s) = weak.upgrade() else { return };
                if s.shutting_down.load(std::sync::atomic::Ordering::Relaxed) {
                    return;
                }
                let c = &s.cluster;
                if !c.confirmed() {
                    let dir = s.node_dir.as_ref().map(|d| d.path());
                    c.confirm_round(s.clock.now_ms(), &s.tokens, dir);
                    continue;
                }
                since_refresh += RETRY;
                if since_refresh >= REFRESH {
                    since_refresh = Duration::ZERO;
                    let others = c.others();
                    c.ask_all(&others, c.view().map.version, &s.tokens);
                }
            }
        });
}
