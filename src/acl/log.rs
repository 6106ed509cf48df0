//! The ACL log: refused commands and failed AUTHs, grouped as Redis groups them.

use bytes::Bytes;
use std::collections::VecDeque;

/// Redis's ACL log: the last `MAX_LOG` denials, a repeat of a recent one (same
/// reason, context, object and user within 60 s) counted on its entry.
#[derive(Default)]
pub struct AclLog {
    entries: VecDeque<LogEntry>,
    next_id: u64,
}

const MAX_LOG: usize = 128;
const GROUPING_MS: u64 = 60_000;

pub struct LogEntry {
    pub count: u64,
    pub reason: &'static str,
    pub context: &'static str,
    pub object: Bytes,
    pub username: Bytes,
    pub client_info: String,
    pub entry_id: u64,
    pub created_ms: u64,
    pub updated_ms: u64,
}

impl AclLog {
    /// Records a denial (`reason`: command, key, channel, auth) at wall time `now_ms`.
    pub fn add(
        &mut self,
        reason: &'static str,
        context: &'static str,
        object: Bytes,
        username: Bytes,
        client_info: String,
        now_ms: u64,
    ) {
        let same = self.entries.iter().take(10).position(|e| {
            e.reason == reason
                && e.context == context
                && e.object == object
                && e.username == username
                && now_ms.saturating_sub(e.updated_ms) < GROUPING_MS
        });
        if let Some(i) = same {
            let mut e = self.entries.remove(i).expect("found");
            e.count += 1;
            e.updated_ms = now_ms;
            e.client_info = client_info;
            self.entries.push_front(e);
            return;
        }
        self.entries.push_front(LogEntry {
            count: 1,
            reason,
            context,
            object,
            username,
            client_info,
            entry_id: self.next_id,
            created_ms: now_ms,
            updated_ms: now_ms,
        });
        self.next_id += 1;
        self.entries.truncate(MAX_LOG);
    }

    /// The newest `n` entries, newest first.
    pub fn newest(&self, n: usize) -> impl Iterator<Item = &LogEntry> {
        self.entries.iter().take(n)
    }

    pub fn reset(&mut self) {
        self.entries.clear();
    }
}
