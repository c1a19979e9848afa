//! The bounded log of API requests the admin API and the test handle expose.

use std::collections::VecDeque;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// One logged API request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestRecord {
    pub seq: u64,
    /// RFC 3339 with milliseconds, UTC.
    pub time: String,
    /// `get|list|watch|create|update|patch|delete|deletecollection`; `get` for non-resource paths.
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    pub code: u16,
    /// HTTP method and path (with query), for requests outside the resource API too.
    pub method: String,
    pub path: String,
}

/// A ring buffer of records.
#[derive(Debug)]
pub struct RequestLog {
    inner: Mutex<(u64, VecDeque<RequestRecord>)>,
    capacity: usize,
}

impl RequestLog {
    pub fn new(capacity: usize) -> RequestLog {
        RequestLog {
            inner: Mutex::new((0, VecDeque::new())),
            capacity: capacity.max(1),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (u64, VecDeque<RequestRecord>)> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Appends a record, assigning its sequence number.
    pub fn push(&self, mut rec: RequestRecord) {
        let mut g = self.lock();
        g.0 += 1;
        rec.seq = g.0;
        g.1.push_back(rec);
        while g.1.len() > self.capacity {
            g.1.pop_front();
        }
    }

    /// Records with `seq > since`.
    pub fn since(&self, since: u64) -> Vec<RequestRecord> {
        let g = self.lock();
        let start = g.1.partition_point(|r| r.seq <= since);
        g.1.range(start..).cloned().collect()
    }

    pub fn clear(&self) {
        self.lock().1.clear();
    }

    /// Sequence number of the newest record (0 when none was ever logged).
    pub fn last_seq(&self) -> u64 {
        self.lock().0
    }
}
