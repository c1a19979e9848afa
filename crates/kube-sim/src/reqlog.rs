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

/// What the fault matchers and the request log know of a request: the verb, and for resource
/// requests the resource's coordinates (empty strings otherwise).
#[derive(Debug, Clone, Default)]
pub struct RequestAttrs {
    pub verb: &'static str,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
}

impl RequestAttrs {
    /// A request outside the resource API (discovery, `/version`, ...): the verb of its method.
    pub fn non_resource(method: &http::Method) -> RequestAttrs {
        let verb = match method.as_str() {
            "POST" => "create",
            "PUT" => "update",
            "PATCH" => "patch",
            "DELETE" => "delete",
            _ => "get",
        };
        RequestAttrs {
            verb,
            ..RequestAttrs::default()
        }
    }

    /// The log record of this request (sequence, time and code are filled in when it is
    /// logged).
    pub fn into_record(self, method: &http::Method, path: String) -> RequestRecord {
        RequestRecord {
            seq: 0,
            time: String::new(),
            verb: self.verb.to_string(),
            group: self.group,
            resource: self.resource,
            subresource: self.subresource,
            namespace: self.namespace,
            name: self.name,
            code: 0,
            method: method.to_string(),
            path,
        }
    }
}
