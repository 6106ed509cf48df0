//! Pub/sub: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE, PUBLISH, PUBSUB.
//!
//! Redisson's lock waiters SUBSCRIBE to `redisson_lock__channel:{name}` and are woken
//! by the PUBLISH in the unlock script, so delivery must be prompt and never lost for a
//! live subscriber. PUBLISH never waits on a subscriber: each connection has an
//! unbounded queue that its task drains alongside the socket (woken through the
//! client's wake slot), and the bytes queued are
//! counted; a subscriber past `pubsub_output_limit` is disconnected (Redis's
//! client-output-buffer-limit for pubsub), so a slow reader costs bounded memory.

use crate::commands::{eq_ignore_case, CmdResult, Ctx};

use crate::glob;
use crate::node::ClientInfo;
use crate::protocol::{errors, Reply};
use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A message on its way to a subscriber's connection, with the bytes it was counted as.
pub struct Message {
    pub reply: Reply,
    pub size: usize,
}

/// A connection's delivery end, shared by every channel and pattern it subscribes to.
/// Every connection has one (invalidations can be redirected to any client), and most
/// never receive a message: an empty queue allocates nothing (a channel would allocate
/// its first block of slots, ~2 KB, per connection).
pub struct Subscriber {
    info: Arc<ClientInfo>,
    /// Messages not yet taken; `None` once the connection has ended.
    queue: Mutex<Option<VecDeque<Message>>>,
    /// Bytes queued and not yet taken by the connection.
    queued: AtomicUsize,
}

impl Subscriber {
    /// A delivery end for a connection, woken through its client's wake slot.
    pub fn new(info: Arc<ClientInfo>) -> Arc<Subscriber> {
        Arc::new(Subscriber {
            info,
            queue: Mutex::new(Some(VecDeque::new())),
            queued: AtomicUsize::new(0),
        })
    }

    /// The oldest queued message. The connection calls it after registering its waker
    /// in the wake slot: a message queued after this found nothing wakes it.
    pub fn pop(&self) -> Option<Message> {
        self.queue.lock().as_mut()?.pop_front()
    }

    /// The connection has ended: later messages are dropped, not queued.
    pub fn close(&self) {
        let left = self.queue.lock().take();
        for msg in left.into_iter().flatten() {
            self.taken(&msg);
        }
    }

    /// Whether a message is queued (or being queued) for the connection: `deliver`
    /// counts a message before it sends it.
    pub fn has_queued(&self) -> bool {
        self.queued.load(Ordering::Relaxed) > 0
    }

    /// Called by the connection as it takes a message out of its queue.
    pub fn taken(&self, msg: &Message) {
        self.queued.fetch_sub(msg.size, Ordering::Relaxed);
    }

    /// Queues a message that is not a publication (an invalidation of client-side
    /// caching), counted against the same output limit.
    pub fn push(&self, reply: Reply, limit: usize) {
        self.deliver(reply, 64, limit);
    }

    fn deliver(&self, reply: Reply, size: usize, limit: usize) {
        if self.info.killed.load(Ordering::Relaxed) {
            return;
        }
        let queued = self.queued.fetch_add(size, Ordering::Relaxed) + size;
        if queued > limit {
            tracing::warn!(
                client = self.info.id,
                queued,
                limit,
                "disconnecting a subscriber past the pubsub output limit"
            );
            self.info.kill();
            return;
        }
        let sent = match self.queue.lock().as_mut() {
            Some(queue) => {
                queue.push_back(Message { reply, size });
                true
            }
            // The connection has ended; its task unsubscribes it.
            None => false,
        };
        if sent {
            self.info.wake.wake();
        } else {
            self.queued.fetch_sub(size, Ordering::Relaxed);
        }
    }
}

/// A connection's subscriptions.
#[derive(Default)]
pub struct ClientSubs {
    pub channels: HashSet<Bytes>,
    pub patterns: HashSet<Bytes>,
    /// Set by the connection (scripts and other callers without a socket have none).
    pub handle: Option<Arc<Subscriber>>,
}

type Subscribers = BTreeMap<u64, Arc<Subscriber>>;

/// The server's registry: channel (or pattern) -> subscribers by client id.
#[derive(Default)]
pub struct PubSub {
    channels: RwLock<HashMap<Bytes, Subscribers>>,
    patterns: RwLock<HashMap<Bytes, Subscribers>>,
}

impl PubSub {
    pub fn new() -> PubSub {
        PubSub::default()
    }

    /// Channels with at least one subscriber (INFO's pubsub_channels).
    pub fn channel_count(&self) -> usize {
        self.channels.read().len()
    }

    /// Patterns with at least one subscriber (INFO's pubsub_patterns).
    pub fn pattern_count(&self) -> usize {
        self.patterns.read().len()
    }

    /// Sends `payload` to every subscriber of `channel` and of a matching pattern;
    /// returns how many deliveries that made (a client subscribed both ways counts
    /// twice, as in Redis).
    pub fn publish(&self, channel: &Bytes, payload: &Bytes, limit: usize) -> usize {
        let mut receivers = 0;
        let base = channel.len() + payload.len() + 48;
        if let Some(subs) = self.channels.read().get(channel) {
            for sub in subs.values() {
                let msg = Reply::Push(vec![
                    Reply::bulk_str("message"),
                    Reply::Bulk(channel.clone()),
                    Reply::Bulk(payload.clone()),
                ]);
                sub.deliver(msg, base, limit);
                receivers += 1;
            }
        }
        for (pattern, subs) in self.patterns.read().iter() {
            if !glob::matches(pattern, channel) {
                continue;
            }
            for sub in subs.values() {
                let msg = Reply::Push(vec![
                    Reply::bulk_str("pmessage"),
                    Reply::Bulk(pattern.clone()),
                    Reply::Bulk(channel.clone()),
                    Reply::Bulk(payload.clone()),
                ]);
                sub.deliver(msg, base + pattern.len(), limit);
                receivers += 1;
            }
        }
        receivers
    }

    /// Every subscribed client's channels and patterns, by client id (a walk of the
    /// whole registry: for ACL changes, not for the request path).
    pub fn by_client(&self) -> HashMap<u64, ClientSubs> {
        let mut out: HashMap<u64, ClientSubs> = HashMap::new();
        for (kind, map) in [
            (Kind::Channel, &self.channels),
            (Kind::Pattern, &self.patterns),
        ] {
            for (name, subs) in map.read().iter() {
                for id in subs.keys() {
                    kind.set(out.entry(*id).or_default()).insert(name.clone());
                }
            }
        }
        out
    }

    /// Takes client `id` off every channel and pattern at once: a client disconnected
    /// for rights it lost gets no message from the next PUBLISH, even before its
    /// connection has ended.
    pub fn drop_client(&self, id: u64) {
        for map in [&self.channels, &self.patterns] {
            let mut map = map.write();
            map.retain(|_, subs| {
                subs.remove(&id);
                !subs.is_empty()
            });
        }
    }

    /// Whether client `id` subscribes to `channel`.
    pub fn subscribed(&self, channel: &[u8], id: u64) -> bool {
        self.channels
            .read()
            .get(channel)
            .is_some_and(|subs| subs.contains_key(&id))
    }

    /// Drops every subscription of a client (RESET, disconnect).
    pub fn forget(&self, id: u64, subs: &mut ClientSubs) {
        for name in subs.channels.drain() {
            remove(&self.channels, &name, id);
        }
        for name in subs.patterns.drain() {
            remove(&self.patterns, &name, id);
        }
    }
}

fn remove(map: &RwLock<HashMap<Bytes, Subscribers>>, name: &Bytes, id: u64) {
    let mut map = map.write();
    if let Some(subs) = map.get_mut(name) {
        subs.remove(&id);
        if subs.is_empty() {
            map.remove(name);
        }
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Channel,
    Pattern,
}

impl Kind {
    fn map(self, ps: &PubSub) -> &RwLock<HashMap<Bytes, Subscribers>> {
        match self {
            Kind::Channel => &ps.channels,
            Kind::Pattern => &ps.patterns,
        }
    }

    fn set(self, subs: &mut ClientSubs) -> &mut HashSet<Bytes> {
        match self {
            Kind::Channel => &mut subs.channels,
            Kind::Pattern => &mut subs.patterns,
        }
    }
}

/// The confirmation frame: [kind, name or nil, subscriptions left].
fn frame(word: &'static str, name: Option<Bytes>, count: usize) -> Reply {
    Reply::Push(vec![
        Reply::bulk_str(word),
        name.map_or(Reply::Null, Reply::Bulk),
        Reply::Integer(count as i64),
    ])
}

fn subscribe_generic(ctx: &mut Ctx, args: &[Bytes], kind: Kind, word: &'static str) -> CmdResult {
    let Some(handle) = ctx.client.pubsub.handle.clone() else {
        return Err(Reply::error(format!(
            "ERR {word} is only available to network clients"
        )));
    };
    let id = ctx.client.id();
    let mut frames = Vec::with_capacity(args.len() - 1);
    for name in &args[1..] {
        let name = Bytes::copy_from_slice(name);
        if kind.set(&mut ctx.client.pubsub).insert(name.clone()) {
            kind.map(&ctx.shared.pubsub)
                .write()
                .entry(name.clone())
                .or_default()
                .insert(id, handle.clone());
        }
        let count = ctx.client.subscriptions();
        frames.push(frame(word, Some(name), count));
    }
    Ok(Reply::Multi(frames))
}

fn unsubscribe_generic(ctx: &mut Ctx, args: &[Bytes], kind: Kind, word: &'static str) -> CmdResult {
    let id = ctx.client.id();
    let names: Vec<Bytes> = if args.len() > 1 {
        args[1..]
            .iter()
            .map(|a| Bytes::copy_from_slice(a))
            .collect()
    } else {
        kind.set(&mut ctx.client.pubsub).iter().cloned().collect()
    };
    if names.is_empty() {
        return Ok(frame(word, None, ctx.client.subscriptions()));
    }
    let mut frames = Vec::with_capacity(names.len());
    for name in names {
        if kind.set(&mut ctx.client.pubsub).remove(&name) {
            remove(kind.map(&ctx.shared.pubsub), &name, id);
        }
        let count = ctx.client.subscriptions();
        frames.push(frame(word, Some(name), count));
    }
    Ok(Reply::Multi(frames))
}

/// SUBSCRIBE channel...: one confirmation frame per channel.
pub fn subscribe(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    subscribe_generic(ctx, args, Kind::Channel, "subscribe")
}

/// UNSUBSCRIBE [channel...]: none means all; with none subscribed, one frame with nil.
pub fn unsubscribe(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    unsubscribe_generic(ctx, args, Kind::Channel, "unsubscribe")
}

pub fn psubscribe(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    subscribe_generic(ctx, args, Kind::Pattern, "psubscribe")
}

pub fn punsubscribe(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    unsubscribe_generic(ctx, args, Kind::Pattern, "punsubscribe")
}

/// Drops every subscription of the calling client (RESET).
pub fn unsubscribe_all(ctx: &mut Ctx) {
    let id = ctx.client.id();
    ctx.shared.pubsub.forget(id, &mut ctx.client.pubsub);
}

/// PUBLISH channel message -> number of receivers.
pub fn publish(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let channel = Bytes::copy_from_slice(&args[1]);
    let payload = Bytes::copy_from_slice(&args[2]);
    let n = ctx
        .shared
        .pubsub
        .publish(&channel, &payload, ctx.shared.config.pubsub_output_limit);
    Ok(Reply::Integer(n as i64))
}

/// `PUBSUB CHANNELS [pattern] | NUMSUB [channel...] | NUMPAT | HELP`
pub fn pubsub(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let sub = &args[1];
    let ps = &ctx.shared.pubsub;
    if eq_ignore_case(sub, "channels") {
        if args.len() > 3 {
            return Err(Reply::error(
                "ERR unknown subcommand or wrong number of arguments for 'channels'. Try PUBSUB HELP.",
            ));
        }
        let pattern = args.get(2);
        let mut names: Vec<Bytes> = ps
            .channels
            .read()
            .keys()
            .filter(|c| pattern.is_none_or(|p| glob::matches(p, c)))
            .cloned()
            .collect();
        names.sort();
        Ok(Reply::Array(names.into_iter().map(Reply::Bulk).collect()))
    } else if eq_ignore_case(sub, "numsub") {
        let map = ps.channels.read();
        let mut out = Vec::with_capacity((args.len() - 2) * 2);
        for c in &args[2..] {
            let n = map.get(&c[..]).map_or(0, |s| s.len());
            out.push(Reply::Bulk(c.clone()));
            out.push(Reply::Integer(n as i64));
        }
        Ok(Reply::Array(out))
    } else if eq_ignore_case(sub, "numpat") {
        if args.len() != 2 {
            return Err(errors::wrong_arity("pubsub|numpat"));
        }
        Ok(Reply::Integer(ps.pattern_count() as i64))
    } else if eq_ignore_case(sub, "help") {
        Ok(Reply::Array(
            [
                "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "CHANNELS [<pattern>]",
                "    Return the currently active channels matching a <pattern> (default: '*').",
                "NUMPAT",
                "    Return number of subscriptions to patterns.",
                "NUMSUB [<channel> ...]",
                "    Return the number of subscribers for the specified channels, excluding",
                "    pattern subscriptions(default: no channels).",
                "HELP",
                "    Prints this help.",
            ]
            .iter()
            .map(|s| Reply::status(s))
            .collect(),
        ))
    } else {
        Err(errors::unknown_subcommand("pubsub", sub))
    }
}
