//! Watches: start from a snapshot (synthetic ADDED), from a resourceVersion in the history ring
//! (410 Expired when too old), or from now; then per-watcher filtering of its topic's events
//! ([`crate::topics`]: its resource, or one value of an attribute its selector requires; selector
//! transitions become ADDED/DELETED), bookmarks, timeouts, and closing watchers that fall too far
//! behind.

use std::{borrow::Cow, convert::Infallible, sync::Arc, time::Duration};

use axum::{body::Body, response::Response};
use bytes::{Bytes, BytesMut};
use kube_sandbox_machinery::table;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tracing::{debug, warn};

use crate::{
    app::App,
    error::{ApiError, ApiResult},
    handlers::{Req, read::Filter},
    meta,
    registry::{ResKey, ResourceInfo},
    store::{EventType, WatchEvent, event_line},
};

enum Start {
    Snapshot(Vec<Arc<Value>>, u64),
    History(Vec<Arc<WatchEvent>>, u64),
    Now(u64),
    Expired(u64, u64),
}

struct Watcher {
    info: Arc<ResourceInfo>,
    key: ResKey,
    version: String,
    ns: Option<String>,
    filter: Filter,
    table: Option<Vec<table::Column>>,
    /// `as=PartialObjectMetadata`: each event's object reduced to its metadata.
    metadata_only: bool,
    rewrite_version: bool,
}

impl Watcher {
    fn plain(&self) -> bool {
        self.filter.is_empty() && self.table.is_none() && !self.metadata_only && !self.rewrite_version
    }

    fn line(&self, etype: &str, obj: &Value) -> Bytes {
        let obj = crate::handlers::read::versioned(&self.info, &self.version, obj);
        match &self.table {
            Some(cols) => {
                let rv = meta::meta_str(&obj, "resourceVersion").unwrap_or("").to_string();
                let t = table::to_table(cols, std::slice::from_ref(&*obj), &rv, None);
                if t.is_object() {
                    event_line(etype, &t)
                } else {
                    event_line(etype, &obj)
                }
            }
            None if self.metadata_only => event_line(etype, &table::partial_object_metadata(&obj)),
            None => event_line(etype, &obj),
        }
    }

    fn render(&self, e: &WatchEvent) -> Option<Bytes> {
        if e.key != self.key {
            return None;
        }
        if let Some(ns) = &self.ns {
            if meta::namespace(&e.object) != ns {
                return None;
            }
        }
        if self.plain() {
            return Some(e.line.clone());
        }
        let cur = self.filter.matches(&e.object);
        let prev = e.prev.as_ref().map(|p| self.filter.matches(p));
        let (etype, obj): (EventType, Cow<'_, Value>) = match (e.etype, cur, prev) {
            (EventType::Modified, true, Some(false)) => (EventType::Added, Cow::Borrowed(&*e.object)),
            (EventType::Modified, false, Some(true)) => {
                let mut p = e.prev.as_deref().cloned().unwrap_or(Value::Null);
                meta::metadata_mut(&mut p).insert("resourceVersion".into(), json!(e.rv.to_string()));
                (EventType::Deleted, Cow::Owned(p))
            }
            (t, true, _) => (t, Cow::Borrowed(&*e.object)),
            _ => return None,
        };
        if etype == e.etype && self.table.is_none() && !self.metadata_only && !self.rewrite_version {
            return Some(e.line.clone());
        }
        Some(self.line(etype.as_str(), &obj))
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Bytes {
        let mut md = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            md["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let obj = if self.metadata_only {
            table::partial_object_metadata(&json!({ "metadata": md }))
        } else {
            json!({
                "kind": self.info.kind,
                "apiVersion": self.info.api_version(&self.version),
                "metadata": md,
            })
        };
        event_line("BOOKMARK", &obj)
    }
}

fn parse_rv(s: &str) -> ApiResult<u64> {
    s.parse()
        .map_err(|_| ApiError::bad_request(format!("invalid resource version: {s:?}")))
}

/// Serves a watch request as a chunked stream of JSON lines.
pub fn serve(app: &Arc<App>, r: &Req) -> ApiResult<Response> {
    let filter = Filter::from_query(&r.info, &r.query)?;
    let rv = match r.query.get("resourceVersion") {
        None | Some("0") => None,
        Some(s) => Some(parse_rv(s)?),
    };
    let send_initial = r.query.get("sendInitialEvents").map(|v| v == "true");
    if send_initial.is_some() && r.query.get("resourceVersionMatch") != Some("NotOlderThan") {
        return Err(ApiError::invalid_options(
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ));
    }
    let initial = send_initial.unwrap_or(rv.is_none());
    let bookmarks = r.query.flag("allowWatchBookmarks");
    let timeout = r
        .query
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map(Duration::from_secs);
    let wants_table = table::wants_table(r.header(http::header::ACCEPT));
    let w = Watcher {
        info: r.info.clone(),
        key: r.info.key(),
        version: r.version.clone(),
        ns: r.namespace.clone(),
        table: wants_table.then(|| {
            let printer = r
                .info
                .crd_version(&r.version)
                .and_then(|v| v.printer_columns.as_ref());
            table::columns_for(&r.info.kind, printer)
        }),
        metadata_only: table::wants_metadata(r.header(http::header::ACCEPT)),
        rewrite_version: (r.info.crd.is_some() && r.version != r.info.storage_version)
            || crate::events::is_events_v1(&r.info),
        filter,
    };
    let key = w.key.clone();
    let topic = crate::topics::Topic {
        key: key.clone(),
        shard: w.filter.shard(),
    };
    let (rx, start) = app.store.subscribe_with(topic, |t| {
        if initial {
            let objs = t
                .list(&key, w.ns.as_deref())
                .filter(|o| w.filter.matches(o))
                .cloned()
                .collect();
            Start::Snapshot(objs, t.rv())
        } else if let Some(rv) = rv {
            match t.history_since(&key, rv) {
                Some(evs) => Start::History(evs, rv),
                None => Start::Expired(rv, t.history_start()),
            }
        } else {
            Start::Now(t.rv())
        }
    });
    let (tx, body_rx) = mpsc::channel::<Result<Bytes, Infallible>>(64);
    let interval = app.bookmark_interval;
    let initial_bookmark = send_initial == Some(true) && bookmarks;
    tokio::spawn(run(
        w,
        rx,
        start,
        tx,
        Bookmarks {
            on: bookmarks,
            initial: initial_bookmark,
            interval,
            latest: app.store.latest(),
        },
        timeout,
    ));
    let resp = Response::builder()
        .status(200)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(ReceiverStream::new(body_rx)))
        .map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(resp)
}

type Tx = mpsc::Sender<Result<Bytes, Infallible>>;

const CHUNK: usize = 64 * 1024;

async fn flush(tx: &Tx, buf: &mut BytesMut) -> bool {
    if buf.is_empty() {
        return true;
    }
    tx.send(Ok(buf.split().freeze())).await.is_ok()
}

/// A watch's bookmarks: asked for, the initial-events-end one, how often, and the store's
/// latest sent resourceVersion (a quiet topic's bookmarks advance with the whole store).
struct Bookmarks {
    on: bool,
    initial: bool,
    interval: Duration,
    latest: Arc<std::sync::atomic::AtomicU64>,
}

/// Renders `e` into `buf` when it is newer than `last_rv`.
fn take(w: &Watcher, e: &WatchEvent, last_rv: &mut u64, buf: &mut BytesMut) {
    if e.rv > *last_rv {
        *last_rv = e.rv;
        if let Some(l) = w.render(e) {
            buf.extend_from_slice(&l);
        }
    }
}

async fn run(
    w: Watcher,
    mut rx: broadcast::Receiver<Arc<WatchEvent>>,
    start: Start,
    tx: Tx,
    marks: Bookmarks,
    timeout: Option<Duration>,
) {
    let (bookmarks, initial_bookmark, interval) = (marks.on, marks.initial, marks.interval);
    let mut buf = BytesMut::new();
    let mut last_rv = match start {
        Start::Expired(rv, oldest) => {
            let err = ApiError::expired(format!("too old resource version: {rv} ({oldest})"));
            let _ = tx.send(Ok(event_line("ERROR", &err.to_status()))).await;
            return;
        }
        Start::Snapshot(objs, rv) => {
            for o in &objs {
                buf.extend_from_slice(&w.line("ADDED", o));
                if buf.len() > CHUNK && !flush(&tx, &mut buf).await {
                    return;
                }
            }
            if initial_bookmark {
                buf.extend_from_slice(&w.bookmark(rv, true));
            }
            rv
        }
        Start::History(evs, rv) => {
            let mut last = rv;
            for e in &evs {
                last = last.max(e.rv);
                if let Some(l) = w.render(e) {
                    buf.extend_from_slice(&l);
                }
                if buf.len() > CHUNK && !flush(&tx, &mut buf).await {
                    return;
                }
            }
            if initial_bookmark {
                buf.extend_from_slice(&w.bookmark(last, true));
            }
            last
        }
        Start::Now(rv) => {
            if initial_bookmark {
                buf.extend_from_slice(&w.bookmark(rv, true));
            }
            rv
        }
    };
    if !flush(&tx, &mut buf).await {
        return;
    }
    let deadline = tokio::time::sleep(timeout.unwrap_or(Duration::from_secs(365 * 24 * 3600)));
    tokio::pin!(deadline);
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    loop {
        tokio::select! {
            ev = rx.recv() => {
                let mut next = Some(ev);
                while let Some(ev) = next.take() {
                    match ev {
                        Ok(e) => take(&w, &e, &mut last_rv, &mut buf),
                        Err(broadcast::error::RecvError::Lagged(n)) => {
                            warn!(resource = %w.info.plural, skipped = n, "watcher too slow, closing");
                            let _ = flush(&tx, &mut buf).await;
                            return;
                        }
                        Err(broadcast::error::RecvError::Closed) => {
                            let _ = flush(&tx, &mut buf).await;
                            return;
                        }
                    }
                    if buf.len() < CHUNK {
                        match rx.try_recv() {
                            Ok(e) => next = Some(Ok(e)),
                            Err(broadcast::error::TryRecvError::Lagged(n)) => next = Some(Err(broadcast::error::RecvError::Lagged(n))),
                            Err(_) => {}
                        }
                    }
                }
                if !flush(&tx, &mut buf).await {
                    return;
                }
            }
            _ = tick.tick(), if bookmarks => {
                // Every event up to `latest` was in this watcher's channel before `latest` was
                // published: taken first, the bookmark may then say `latest`.
                let latest = marks.latest.load(std::sync::atomic::Ordering::Acquire);
                loop {
                    match rx.try_recv() {
                        Ok(e) => take(&w, &e, &mut last_rv, &mut buf),
                        Err(broadcast::error::TryRecvError::Lagged(n)) => {
                            warn!(resource = %w.info.plural, skipped = n, "watcher too slow, closing");
                            let _ = flush(&tx, &mut buf).await;
                            return;
                        }
                        Err(_) => break,
                    }
                }
                last_rv = last_rv.max(latest);
                buf.extend_from_slice(&w.bookmark(last_rv, false));
                if !flush(&tx, &mut buf).await {
                    return;
                }
            }
            _ = &mut deadline => {
                debug!(resource = %w.info.plural, "watch timeout");
                return;
            }
            _ = tx.closed() => return,
        }
    }
}
