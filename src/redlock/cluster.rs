//! A Redis Cluster (redlockd's cluster mode, or Redis's own) as one Redlock vote:
//! `cluster:host:port[,host:port...]`, the cluster's seed addresses.
//!
//! The client learns the slot map with `CLUSTER SLOTS` (from the seeds, or any node it
//! knows), sends each request to the node serving its key's slot, and follows `-MOVED`
//! to the node named there, marking the map stale so the next request reloads it. Any
//! other error is the vote's answer: `-TRYAGAIN` (a slot fenced after a move, a node's
//! restart fence) and `-CLUSTERDOWN` count as a failed vote, as a down node does. All
//! of it, the map's loading and every redirection, is bounded by the per-node timeout:
//! one cluster is one vote, and it answers within the time a node has.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use parking_lot::Mutex;
use redis_protocol::resp2::types::BytesFrame;
use tokio::time::Instant;

use super::conn::{Node, NodeError, Request};
use super::nodes::Target;
use crate::slot::{key_slot, SLOTS};

/// How a node spec names a cluster.
pub(crate) const PREFIX: &str = "cluster:";

/// MOVED replies followed for one request before it fails (as go-redis's default).
const MAX_REDIRECTS: usize = 3;

/// One vote: a single node, or a cluster of nodes sharing the hash slots.
pub(crate) enum Vote {
    Node(Node),
    Cluster(ClusterVote),
}

impl Vote {
    /// The spec as given: what errors name.
    pub(crate) fn addr(&self) -> &str {
        match self {
            Vote::Node(n) => n.addr(),
            Vote::Cluster(c) => &c.spec,
        }
    }

    /// Runs `req` on the node (or the cluster's node for its key), all of it bounded by
    /// `timeout`.
    pub(crate) async fn run(
        &self,
        timeout: Duration,
        req: &Request<'_>,
    ) -> Result<BytesFrame, NodeError> {
        match self {
            Vote::Node(n) => n.run(timeout, req).await,
            Vote::Cluster(c) => c.run(timeout, req).await,
        }
    }
}

/// Which node serves which slots, as the cluster last said.
struct SlotMap {
    /// Inclusive slot ranges and their node, as `CLUSTER SLOTS` listed them.
    ranges: Vec<(u16, u16, Arc<Node>)>,
}

impl SlotMap {
    fn owner(&self, slot: u16) -> Option<Arc<Node>> {
        self.ranges
            .iter()
            .find(|(first, last, _)| (*first..=*last).contains(&slot))
            .map(|(_, _, n)| n.clone())
    }
}

#[derive(Default)]
struct State {
    map: Option<Arc<SlotMap>>,
    /// A MOVED or a broken connection since the map was loaded: reload it first.
    stale: bool,
    /// Maps loaded so far: a request that waited for another's reload uses its map.
    loads: u64,
    /// Every node met (seeds, the map's, MOVED targets), by `host:port`, with its pool.
    nodes: HashMap<String, Arc<Node>>,
}

/// A cluster's seeds, its slot map and a connection pool per node.
pub(crate) struct ClusterVote {
    /// `cluster:a:1,b:2` as given.
    spec: String,
    /// The seeds' `host:port`, tried (with the map's nodes) to load the map.
    seeds: Vec<String>,
    /// The first seed's target: its TLS setting and credentials are every node's.
    template: Target,
    state: Mutex<State>,
    /// One map load at a time; the others wait for it and use its result.
    loading: tokio::sync::Mutex<()>,
}

impl ClusterVote {
    /// `seeds`: the spec's addresses, already made into targets (the first one's TLS and
    /// credentials are used for every node the cluster names).
    pub(crate) fn new(spec: String, seeds: Vec<Target>) -> Result<ClusterVote, String> {
        let Some(template) = seeds.first().cloned() else {
            return Err(format!(
                "{spec:?}: a cluster needs at least one seed address"
            ));
        };
        let mut state = State::default();
        let mut dials = Vec::new();
        for t in seeds {
            dials.push(t.dial.clone());
            state
                .nodes
                .entry(t.dial.clone())
                .or_insert_with(|| Arc::new(Node::new(t.dial.clone(), t)));
        }
        Ok(ClusterVote {
            spec,
            seeds: dials,
            template,
            state: Mutex::new(state),
            loading: tokio::sync::Mutex::new(()),
        })
    }

    async fn run(&self, timeout: Duration, req: &Request<'_>) -> Result<BytesFrame, NodeError> {
        let deadline = Instant::now() + timeout;
        let work = async {
            let slot = key_slot(req.key());
            let mut node = self.owner(slot, deadline).await?;
            for _ in 0..=MAX_REDIRECTS {
                let left = deadline.saturating_duration_since(Instant::now());
                match node.run(left, req).await {
                    Err(NodeError::Server(e)) if e.starts_with("MOVED ") => {
                        let to = moved_target(&e).ok_or_else(|| {
                            NodeError::Protocol(format!("a MOVED reply without an address: {e}"))
                        })?;
                        self.state.lock().stale = true;
                        node = self.node_at(to).map_err(NodeError::Protocol)?;
                    }
                    Err(NodeError::Io(e)) => {
                        // The node may have left the cluster: reload before the next use.
                        self.state.lock().stale = true;
                        return Err(NodeError::Io(format!("{}: {e}", node.addr())));
                    }
                    other => return other,
                }
            }
            Err(NodeError::Protocol(format!(
                "more than {MAX_REDIRECTS} MOVED redirections for slot {slot}"
            )))
        };
        match tokio::time::timeout_at(deadline, work).await {
            Ok(r) => r,
            Err(_) => Err(NodeError::Timeout),
        }
    }

    /// The node serving `slot`: from the map, loaded (again) first when there is none
    /// or it is stale. A stale map that cannot be reloaded is still used (MOVED corrects
    /// it); a slot no node serves is the cluster's CLUSTERDOWN.
    async fn owner(&self, slot: u16, deadline: Instant) -> Result<Arc<Node>, NodeError> {
        let (map, stale, loads) = {
            let s = self.state.lock();
            (s.map.clone(), s.stale, s.loads)
        };
        let map = match map {
            Some(map) if !stale => map,
            old => match self.load(loads, deadline).await {
                Ok(map) => map,
                Err(e) => old.ok_or(e)?,
            },
        };
        map.owner(slot).ok_or_else(|| {
            NodeError::Server(format!(
                "CLUSTERDOWN Hash slot not served (slot {slot} is in no range of the map)"
            ))
        })
    }

    /// Loads the map with `CLUSTER SLOTS`, asking every known node at once and taking
    /// the first answer. `seen` is the number of loads the caller saw: when another
    /// request loaded it meanwhile, that map is used.
    async fn load(&self, seen: u64, deadline: Instant) -> Result<Arc<SlotMap>, NodeError> {
        let _one = self.loading.lock().await;
        let asked: Vec<Arc<Node>> = {
            let s = self.state.lock();
            if s.loads != seen {
                if let Some(map) = &s.map {
                    return Ok(map.clone());
                }
            }
            // The seeds first, then the other nodes met.
            let mut asked: Vec<Arc<Node>> = self
                .seeds
                .iter()
                .filter_map(|d| s.nodes.get(d).cloned())
                .collect();
            for (dial, n) in &s.nodes {
                if !self.seeds.contains(dial) {
                    asked.push(n.clone());
                }
            }
            asked
        };
        let timeout = deadline.saturating_duration_since(Instant::now());
        const CLUSTER_SLOTS: [&[u8]; 2] = [b"CLUSTER", b"SLOTS"];
        let req = &Request::Command(&CLUSTER_SLOTS);
        let tries = asked
            .iter()
            .map(|n| async move {
                let reply = n.run(timeout, req).await.map_err(|e| match e {
                    NodeError::Io(e) => NodeError::Io(format!("{}: {e}", n.addr())),
                    e => e,
                })?;
                parse_slots(&reply, n.addr()).map_err(NodeError::Protocol)
            })
            .collect();
        let ranges = first_ok(tries).await?;
        let mut s = self.state.lock();
        let mut map = Vec::with_capacity(ranges.len());
        for (first, last, dial) in ranges {
            let node = match s.nodes.get(&dial) {
                Some(n) => n.clone(),
                None => {
                    let target = self
                        .template
                        .sibling(dial.clone())
                        .map_err(NodeError::Protocol)?;
                    let n = Arc::new(Node::new(dial.clone(), target));
                    s.nodes.insert(dial, n.clone());
                    n
                }
            };
            map.push((first, last, node));
        }
        let map = Arc::new(SlotMap { ranges: map });
        s.map = Some(map.clone());
        s.stale = false;
        s.loads += 1;
        Ok(map)
    }

    /// The node at `dial` (a MOVED target), met before or new.
    fn node_at(&self, dial: String) -> Result<Arc<Node>, String> {
        let mut s = self.state.lock();
        if let Some(n) = s.nodes.get(&dial) {
            return Ok(n.clone());
        }
        let n = Arc::new(Node::new(
            dial.clone(),
            self.template.sibling(dial.clone())?,
        ));
        s.nodes.insert(dial, n.clone());
        Ok(n)
    }
}

/// `host:port` of a `MOVED <slot> <host>:<port>` reply.
fn moved_target(error: &str) -> Option<String> {
    let mut words = error.split(' ');
    let (_, _, addr) = (words.next()?, words.next()?, words.next()?);
    let (host, port) = addr.rsplit_once(':')?;
    port.parse::<u16>().ok()?;
    (!host.is_empty()).then(|| addr.to_string())
}

/// `host:port` for dialling (IPv6 hosts in brackets).
fn dial_of(host: &str, port: i64) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// The ranges of a `CLUSTER SLOTS` reply and their masters' `host:port`. An empty host
/// means the node that answered (`from`), as Redis Cluster clients read it.
fn parse_slots(reply: &BytesFrame, from: &str) -> Result<Vec<(u16, u16, String)>, String> {
    let bad = |what: &str| format!("CLUSTER SLOTS from {from}: {what}");
    let BytesFrame::Array(entries) = reply else {
        return Err(bad(&format!("not an array: {reply:?}")));
    };
    let from_host = from.rsplit_once(':').map_or(from, |(h, _)| h);
    let mut ranges = Vec::with_capacity(entries.len());
    for entry in entries {
        let BytesFrame::Array(fields) = entry else {
            return Err(bad("an entry is not an array"));
        };
        let slot = |i: usize| match fields.get(i) {
            Some(BytesFrame::Integer(s)) if (0..SLOTS as i64).contains(s) => Ok(*s as u16),
            _ => Err(bad("a range's bound is not a slot number")),
        };
        let (first, last) = (slot(0)?, slot(1)?);
        if first > last {
            return Err(bad("a range ends before it starts"));
        }
        let Some(BytesFrame::Array(master)) = fields.get(2) else {
            return Err(bad("a range has no master"));
        };
        let host = match master.first() {
            Some(BytesFrame::BulkString(h)) => String::from_utf8_lossy(h).into_owned(),
            Some(BytesFrame::Null) => String::new(),
            _ => return Err(bad("a master's host is not a string")),
        };
        let port = match master.get(1) {
            Some(BytesFrame::Integer(p)) if (1..=65535).contains(p) => *p,
            _ => return Err(bad("a master's port is not a port number")),
        };
        let host = if host.is_empty() || host == "?" {
            from_host.trim_start_matches('[').trim_end_matches(']')
        } else {
            &host
        };
        ranges.push((first, last, dial_of(host, port)));
    }
    if ranges.is_empty() {
        return Err(bad("no slot is served"));
    }
    Ok(ranges)
}

/// The first of `futs` to succeed; when all fail, the last failure.
async fn first_ok<T, F: Future<Output = Result<T, NodeError>>>(
    futs: Vec<F>,
) -> Result<T, NodeError> {
    let mut pending: Vec<Option<Pin<Box<F>>>> =
        futs.into_iter().map(|f| Some(Box::pin(f))).collect();
    let mut last = NodeError::Io("no node to ask for the slot map".into());
    std::future::poll_fn(|cx| {
        let mut left = false;
        for slot in pending.iter_mut() {
            if let Some(fut) = slot {
                match fut.as_mut().poll(cx) {
                    Poll::Ready(Ok(v)) => return Poll::Ready(Ok(v)),
                    Poll::Ready(Err(e)) => {
                        last = e;
                        *slot = None;
                    }
                    Poll::Pending => left = true,
                }
            }
        }
        if left {
            Poll::Pending
        } else {
            Poll::Ready(Err(last.clone()))
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn int(i: i64) -> BytesFrame {
        BytesFrame::Integer(i)
    }
    fn bulk(s: &str) -> BytesFrame {
        BytesFrame::BulkString(Bytes::copy_from_slice(s.as_bytes()))
    }
    fn arr(v: Vec<BytesFrame>) -> BytesFrame {
        BytesFrame::Array(v)
    }

    #[test]
    fn cluster_slots_replies_are_read_as_clients_read_them() {
        let reply = arr(vec![
            arr(vec![
                int(0),
                int(5460),
                arr(vec![bulk("10.0.0.1"), int(7001), bulk("id1")]),
            ]),
            arr(vec![
                int(5461),
                int(16383),
                arr(vec![bulk(""), int(7002), bulk("id2"), arr(vec![])]),
                arr(vec![bulk("10.0.0.9"), int(7009)]),
            ]),
        ]);
        assert_eq!(
            parse_slots(&reply, "127.0.0.2:7000").unwrap(),
            vec![
                (0, 5460, "10.0.0.1:7001".to_string()),
                (5461, 16383, "127.0.0.2:7002".to_string())
            ]
        );
        let v6 = arr(vec![arr(vec![
            int(0),
            int(1),
            arr(vec![bulk("::1"), int(7)]),
        ])]);
        assert_eq!(parse_slots(&v6, "x:1").unwrap()[0].2, "[::1]:7");
        for bad in [
            arr(vec![]),
            bulk("x"),
            arr(vec![arr(vec![
                int(0),
                int(16384),
                arr(vec![bulk("h"), int(1)]),
            ])]),
            arr(vec![arr(vec![
                int(5),
                int(4),
                arr(vec![bulk("h"), int(1)]),
            ])]),
            arr(vec![arr(vec![
                int(0),
                int(1),
                arr(vec![bulk("h"), bulk("1")]),
            ])]),
            arr(vec![arr(vec![int(0), int(1)])]),
        ] {
            assert!(parse_slots(&bad, "h:1").is_err(), "{bad:?}");
        }
    }

    #[test]
    fn moved_names_the_new_owner() {
        assert_eq!(
            moved_target("MOVED 3999 127.0.0.1:6381").as_deref(),
            Some("127.0.0.1:6381")
        );
        assert_eq!(
            moved_target("MOVED 3999 [::1]:6381").as_deref(),
            Some("[::1]:6381")
        );
        assert_eq!(moved_target("MOVED 3999"), None);
        assert_eq!(moved_target("MOVED 3999 :6381"), None);
        assert_eq!(moved_target("MOVED 3999 h:x"), None);
    }
}
