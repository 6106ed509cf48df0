//! Consumer groups: a group's last delivered ID, its pending entries (PEL) and its
//! consumers.

use super::StreamId;
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet};

/// A pending entry of a group: delivered to `consumer`, not yet acknowledged.
#[derive(Clone, Debug, PartialEq)]
pub struct Nack {
    pub consumer: Bytes,
    /// Unix ms of the last delivery.
    pub delivery_time: i64,
    pub delivery_count: u64,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Consumer {
    /// Unix ms of the consumer's last read or claim.
    pub seen_time: i64,
    /// The IDs it holds (each also in its group's PEL, with the details there).
    pub pel: BTreeSet<StreamId>,
}

/// A consumer group.
#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    pub last_id: StreamId,
    /// The logical read counter of `last_id`; `None` when it is not known (Redis's -1).
    pub entries_read: Option<u64>,
    pub pel: BTreeMap<StreamId, Nack>,
    pub consumers: BTreeMap<Bytes, Consumer>,
}

impl Group {
    pub fn new(last_id: StreamId, entries_read: Option<u64>) -> Group {
        Group {
            last_id,
            entries_read,
            pel: BTreeMap::new(),
            consumers: BTreeMap::new(),
        }
    }

    /// Removes `id` from the PEL and from its consumer's; whether it was pending.
    pub fn ack(&mut self, id: StreamId) -> bool {
        let Some(nack) = self.pel.remove(&id) else {
            return false;
        };
        if let Some(c) = self.consumers.get_mut(&nack.consumer) {
            c.pel.remove(&id);
        }
        true
    }

    /// Hands the pending `id` to `consumer` (which must exist), moving it from its
    /// previous owner's PEL.
    pub fn assign(&mut self, id: StreamId, consumer: &Bytes, delivery_time: i64, count: u64) {
        let old = self.pel.insert(
            id,
            Nack {
                consumer: consumer.clone(),
                delivery_time,
                delivery_count: count,
            },
        );
        if let Some(old) = old {
            if old.consumer != *consumer {
                if let Some(c) = self.consumers.get_mut(&old.consumer) {
                    c.pel.remove(&id);
                }
            }
        }
        if let Some(c) = self.consumers.get_mut(consumer) {
            c.pel.insert(id);
        }
    }

    /// Creates the consumer unless it exists; whether it was created.
    pub fn create_consumer(&mut self, name: &[u8], now: i64) -> bool {
        if self.consumers.contains_key(name) {
            return false;
        }
        self.consumers.insert(
            Bytes::copy_from_slice(name),
            Consumer {
                seen_time: now,
                pel: BTreeSet::new(),
            },
        );
        true
    }

    /// Deletes a consumer and its pending entries; how many it had.
    pub fn delete_consumer(&mut self, name: &[u8]) -> Option<usize> {
        let c = self.consumers.remove(name)?;
        for id in &c.pel {
            self.pel.remove(id);
        }
        Some(c.pel.len())
    }

    /// The consumer's key as stored (to share its bytes with the PEL).
    pub fn consumer_key(&self, name: &[u8]) -> Option<Bytes> {
        self.consumers.get_key_value(name).map(|(k, _)| k.clone())
    }
}
