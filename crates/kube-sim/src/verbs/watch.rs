//! Watch streams: newline-delimited events, resumption from a resourceVersion, bookmarks,
//! selector-aware transitions, 410 ERROR events, timeouts, and cutting by fault.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::catalog::Served;
use crate::http::{self as h, BodyError, Output, Query, Resp, WatchCut};
use crate::render;
use crate::shared::{ResourceRequest, Shared};
use crate::status::ApiError;
use crate::store::EventType;
use crate::verbs::list::{Filter, wait_for_rv};

type Tx = mpsc::Sender<Result<Frame<Bytes>, BodyError>>;

/// Starts a watch; the HTTP status is always 200 once parameters are valid.
pub async fn serve(shared: Arc<Shared>, r: ResourceRequest, query: Query, out: Output) -> Resp {
    match start(shared, r, query, out).await {
        Ok(resp) => resp,
        Err(e) => h::error(&e),
    }
}

fn invalid(field: &str, message: &str) -> ApiError {
    ApiError::invalid_kind(
        "ListOptions.meta.k8s.io",
        "meta.k8s.io",
        "ListOptions",
        "",
        vec![crate::status::Cause {
            reason: "FieldValueForbidden",
            message: message.to_string(),
            field: field.to_string(),
        }],
    )
}

async fn start(
    shared: Arc<Shared>,
    r: ResourceRequest,
    query: Query,
    out: Output,
) -> Result<Resp, ApiError> {
    let filter = Filter::from_query(&r.served, &query)?;
    let bookmarks = query.flag("allowWatchBookmarks");
    let send_initial = query.get("sendInitialEvents").map(|v| v == "true");
    let rvm = query.value("resourceVersionMatch");
    if send_initial.is_some() && rvm != Some("NotOlderThan") {
        return Err(invalid(
            "resourceVersionMatch",
            "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ));
    }
    if send_initial.is_none() && rvm.is_some() {
        return Err(invalid(
            "resourceVersionMatch",
            "Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
        ));
    }
    let rv = query.value("resourceVersion");
    let requested = match rv {
        Some(v) => Some(v.parse::<u64>().map_err(|_| {
            invalid(
                "resourceVersion",
                &format!("Invalid value: \"{v}\": invalid resource version"),
            )
        })?),
        None => None,
    };
    let timeout = match query.value("timeoutSeconds") {
        Some(t) => Duration::from_secs(
            t.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid timeoutSeconds: {t}")))?,
        ),
        None => default_watch_timeout(),
    };
    let initial_state = match (send_initial, requested) {
        (Some(true), _) => true,
        (Some(false), _) => false,
        (None, None | Some(0)) => true,
        (None, Some(_)) => false,
    };

    let (tx, rx) = mpsc::channel::<Result<Frame<Bytes>, BodyError>>(256);
    let body = StreamBody::new(futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    }))
    .boxed();
    let mut resp = http::Response::new(body);
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );

    let w = Watcher {
        shared: shared.clone(),
        served: r.served.clone(),
        namespace: r.namespace.clone(),
        filter,
        out,
        bookmarks,
        tx,
    };
    let deadline = Instant::now() + timeout;
    tokio::spawn(async move {
        w.run(
            requested,
            initial_state,
            send_initial == Some(true),
            deadline,
        )
        .await;
    });
    Ok(resp)
}

struct Watcher {
    shared: Arc<Shared>,
    served: Arc<Served>,
    namespace: Option<String>,
    filter: Filter,
    out: Output,
    bookmarks: bool,
    tx: Tx,
}

enum Step {
    Continue,
    Stop,
}

impl Watcher {
    async fn send(&self, line: Vec<u8>) -> Step {
        match self.tx.send(Ok(Frame::data(Bytes::from(line)))).await {
            Ok(()) => Step::Continue,
            Err(_) => Step::Stop,
        }
    }

    fn in_scope(&self, ns: &str) -> bool {
        self.namespace.as_deref().is_none_or(|n| n == ns)
    }

    async fn run(
        self,
        requested: Option<u64>,
        initial: bool,
        initial_end_bookmark: bool,
        deadline: Instant,
    ) {
        let mut changes = self.shared.store.subscribe();
        let mut cut = self.shared.faults.cut_signal();
        cut.borrow_and_update();
        let mut stall = self.shared.faults.stall_signal();
        if let Some(n) = requested
            && n > 0
            && !initial
            && let Err(e) = wait_for_rv(&self.shared, n).await
        {
            // A resourceVersion ahead of the server: 504 as an ERROR event after ~3 s.
            let _ = self.send(render::error_line(&e.to_status())).await;
            return;
        }
        // Initial state or resumption point.
        let mut lines: Vec<Vec<u8>> = Vec::new();
        let start: Result<u64, Vec<u8>> = {
            let st = self.shared.store.read();
            changes.borrow_and_update();
            if initial {
                for (_, obj) in st.range(&self.served.storage, self.namespace.as_deref(), None) {
                    if self.filter.matches(obj) {
                        lines.push(render::event_line(&self.out, &self.served, "ADDED", obj));
                    }
                }
                Ok(st.rv())
            } else {
                let n = requested.unwrap_or(0);
                if n < st.oldest_rv() {
                    let e = ApiError::expired(format!(
                        "too old resource version: {n} ({})",
                        st.oldest_rv() + 1
                    ));
                    Err(render::error_line(&e.to_status()))
                } else {
                    Ok(n)
                }
            }
        };
        let mut cursor = match start {
            Ok(c) => c,
            Err(line) => {
                let _ = self.send(line).await;
                return;
            }
        };
        if *stall.borrow_and_update()
            && let Step::Stop = self.stalled(&mut stall, &mut cut).await
        {
            return;
        }
        // Changes after the start point that happened before we subscribed.
        match self.drain(&mut cursor) {
            Ok(more) => lines.extend(more),
            Err(line) => lines.push(line),
        }
        for l in lines {
            let is_error = l.starts_with(b"{\"type\":\"ERROR\"");
            if let Step::Stop = self.send(l).await {
                return;
            }
            if is_error {
                return;
            }
        }
        if initial_end_bookmark
            && self.bookmarks
            && let Step::Stop = self
                .send(render::bookmark_line(&self.out, &self.served, cursor, true))
                .await
        {
            return;
        }
        let interval = self
            .shared
            .config
            .bookmark_interval
            .max(Duration::from_millis(10));
        let mut next_bookmark = Instant::now() + interval;
        // One bookmark shortly before the timeout, as the real server does.
        let margin =
            Duration::from_secs(1).min(deadline.saturating_duration_since(Instant::now()) / 2);
        let mut final_bookmark_sent = false;
        loop {
            if *stall.borrow_and_update() {
                if let Step::Stop = self.stalled(&mut stall, &mut cut).await {
                    return;
                }
                continue;
            }
            if Instant::now() >= deadline {
                // Past the timeout (e.g. after a stall): deliver what is pending, then end.
                match self.drain(&mut cursor) {
                    Ok(lines) => {
                        for l in lines {
                            if let Step::Stop = self.send(l).await {
                                return;
                            }
                        }
                    }
                    Err(line) => {
                        let _ = self.send(line).await;
                    }
                }
                return;
            }
            let final_bookmark_at = deadline - margin;
            let wake_bookmark = if self.bookmarks {
                if final_bookmark_sent {
                    next_bookmark
                } else {
                    next_bookmark.min(final_bookmark_at)
                }
            } else {
                deadline + Duration::from_secs(3600)
            };
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => {
                    return;
                }
                _ = tokio::time::sleep_until(wake_bookmark), if self.bookmarks => {
                    let now = Instant::now();
                    if now >= final_bookmark_at {
                        final_bookmark_sent = true;
                    }
                    if now >= next_bookmark {
                        next_bookmark = now + interval;
                    }
                    let line = render::bookmark_line(&self.out, &self.served, cursor, false);
                    if let Step::Stop = self.send(line).await {
                        return;
                    }
                }
                res = changes.changed() => {
                    if res.is_err() {
                        return;
                    }
                    match self.drain(&mut cursor) {
                        Ok(lines) => {
                            for l in lines {
                                if let Step::Stop = self.send(l).await {
                                    return;
                                }
                            }
                        }
                        Err(line) => {
                            let _ = self.send(line).await;
                            return;
                        }
                    }
                }
                _ = cut.changed() => {
                    let _ = self.tx.send(Err(Box::new(WatchCut))).await;
                    return;
                }
                _ = self.tx.closed() => {
                    return;
                }
                _ = stall.changed() => {}
            }
        }
    }

    /// Hung: no bytes and no close (not even at the timeout) until the stall ends.
    async fn stalled(
        &self,
        stall: &mut tokio::sync::watch::Receiver<bool>,
        cut: &mut tokio::sync::watch::Receiver<u64>,
    ) -> Step {
        while *stall.borrow_and_update() {
            tokio::select! {
                _ = stall.changed() => {}
                _ = cut.changed() => {
                    let _ = self.tx.send(Err(Box::new(WatchCut))).await;
                    return Step::Stop;
                }
                _ = self.tx.closed() => return Step::Stop,
            }
        }
        Step::Continue
    }

    /// Event lines after the cursor; `Err` = the 410 ERROR line (history compacted meanwhile).
    fn drain(&self, cursor: &mut u64) -> Result<Vec<Vec<u8>>, Vec<u8>> {
        let st = self.shared.store.read();
        let Some(events) = st.events_after(*cursor) else {
            let e = ApiError::expired(format!(
                "too old resource version: {} ({})",
                cursor,
                st.oldest_rv() + 1
            ));
            return Err(render::error_line(&e.to_status()));
        };
        drop(st);
        let mut lines = Vec::new();
        for e in events {
            *cursor = e.rv;
            if *e.storage != *self.served.storage || !self.in_scope(&e.namespace) {
                continue;
            }
            let new_match = e.etype != EventType::Deleted && self.filter.matches(&e.object);
            let old_match = e.prev.as_ref().is_some_and(|p| self.filter.matches(p));
            let etype = match e.etype {
                EventType::Added if new_match => "ADDED",
                EventType::Modified if new_match && old_match => "MODIFIED",
                EventType::Modified if new_match => "ADDED",
                EventType::Modified if old_match => "DELETED",
                EventType::Deleted if old_match => "DELETED",
                _ => continue,
            };
            lines.push(render::event_line(
                &self.out,
                &self.served,
                etype,
                &e.object,
            ));
        }
        Ok(lines)
    }
}

/// How long bookmark-less watches may run when the client gives no timeout.
fn default_watch_timeout() -> Duration {
    Duration::from_secs(1800)
}
