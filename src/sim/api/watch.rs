//! Watch streams: newline-delimited WatchEvents, periodic BOOKMARKs when allowed, the
//! initial-events-end bookmark for streaming lists, in-stream 410 Expired, timeoutSeconds.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::Response;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};
use tokio_stream::wrappers::ReceiverStream;

use super::query::Query;
use super::{State, table};
use crate::sim::error::ApiError;
use crate::sim::kinds::KindInfo;
use crate::sim::store::WatchStart;
use crate::sim::store::watch::filter_event;

/// How a watch renders objects: plain, or as one-row Tables for `kubectl get -w`.
#[derive(Clone, Copy)]
pub struct Render {
    pub table: bool,
}

struct Feed {
    kind: &'static KindInfo,
    namespace: Option<String>,
    query: Query,
    render: Render,
    tx: mpsc::Sender<Result<Bytes, std::io::Error>>,
}

impl Feed {
    fn line(&self, etype: &str, object: &Value) -> Bytes {
        let object = if self.render.table && etype != "BOOKMARK" && etype != "ERROR" {
            table::table(self.kind, &[object], "", chrono::Utc::now(), true)
        } else {
            object.clone()
        };
        let mut line =
            serde_json::to_vec(&json!({"type": etype, "object": object})).unwrap_or_default();
        line.push(b'\n');
        Bytes::from(line)
    }

    /// A change event's line; plain watches reuse the event's shared serialisation.
    fn event_line(&self, etype: &str, ev: &crate::sim::store::Event) -> Bytes {
        if self.render.table {
            return self.line(etype, &ev.object);
        }
        let obj = ev.encoded_object();
        let mut line = Vec::with_capacity(obj.len() + 32);
        line.extend_from_slice(b"{\"type\":\"");
        line.extend_from_slice(etype.as_bytes());
        line.extend_from_slice(b"\",\"object\":");
        line.extend_from_slice(obj);
        line.extend_from_slice(b"}\n");
        Bytes::from(line)
    }

    /// Sends one line; `false` when the client went away.
    async fn send(&self, bytes: Bytes) -> bool {
        self.tx.send(Ok(bytes)).await.is_ok()
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Bytes {
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        self.line(
            "BOOKMARK",
            &json!({"kind": self.kind.kind, "apiVersion": self.kind.api_version(), "metadata": meta}),
        )
    }
}

/// Starts a watch and returns the streaming response. Errors before the stream starts are
/// plain Status replies; a too-old resourceVersion is an in-stream ERROR event (410).
pub fn start(
    state: &State,
    kind: &'static KindInfo,
    namespace: Option<String>,
    query: Query,
    render: Render,
) -> Result<Response, ApiError> {
    let start = match query.watch_from()? {
        Some(rv) if !query.send_initial_events => WatchStart::After(rv),
        _ => WatchStart::Current,
    };
    let (tx, rx) = mpsc::channel(256);
    let feed = Feed {
        kind,
        namespace,
        query,
        render,
        tx,
    };
    let sub = state.store.subscribe(
        kind,
        feed.namespace.as_deref(),
        &feed.query.label_selector,
        &feed.query.field_selector,
        start,
    );
    let shutdown = state.shutdown.clone();
    let counters = state.counters.clone();
    let bookmark_every = state.bookmark_interval;
    let drop_after = state.faults.watch_drops.then(|| {
        use rand::RngExt;
        Duration::from_millis(rand::rng().random_range(300..2000))
    });
    tokio::spawn(async move {
        let sub = match sub {
            Ok(sub) => sub,
            Err(e) => {
                let _ = feed.send(feed.line("ERROR", &e.to_status())).await;
                return;
            }
        };
        let dropped = run(feed, sub, shutdown, bookmark_every, drop_after).await;
        if dropped {
            counters.watch_dropped();
        }
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(ReceiverStream::new(rx)))
        .map_err(|e| ApiError::internal(e.to_string()))
}

/// Streams one watch until it ends; `true` when fault `watch-drops` ended it early.
async fn run(
    feed: Feed,
    mut sub: crate::sim::store::Subscription,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
    bookmark_every: Duration,
    drop_after: Option<Duration>,
) -> bool {
    let mut last_rv = sub.resource_version;
    for obj in &sub.initial {
        if !feed.send(feed.line("ADDED", obj)).await {
            return false;
        }
    }
    if feed.query.send_initial_events
        && feed.query.allow_bookmarks
        && !feed.send(feed.bookmark(last_rv, true)).await
    {
        return false;
    }
    let ns = feed.namespace.clone();
    for ev in &sub.replay {
        if let Some(t) = filter_event(
            ev,
            feed.kind,
            ns.as_deref(),
            &feed.query.label_selector,
            &feed.query.field_selector,
        ) && !feed.send(feed.line(t.as_str(), &ev.object)).await
        {
            return false;
        }
    }
    // A real server keeps a watch without timeoutSeconds open for 30-60 minutes.
    let timeout = Duration::from_secs(feed.query.timeout_seconds.unwrap_or(1800));
    // Fault `watch-drops`: the stream ends early, as when a connection to the API server drops.
    let dropping = drop_after.is_some_and(|d| d < timeout);
    let timeout = drop_after.map_or(timeout, |d| d.min(timeout));
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    let mut ticker = tokio::time::interval(bookmark_every);
    ticker.reset();
    loop {
        tokio::select! {
            _ = &mut deadline => return dropping,
            _ = shutdown.changed() => return false,
            _ = feed.tx.closed() => return false,
            _ = ticker.tick(), if feed.query.allow_bookmarks => {
                if !feed.send(feed.bookmark(last_rv, false)).await {
                    return false;
                }
            }
            ev = sub.live.recv() => match ev {
                Ok(ev) => {
                    if ev.rv <= last_rv {
                        continue;
                    }
                    last_rv = ev.rv;
                    if let Some(t) = filter_event(&ev, feed.kind, ns.as_deref(), &feed.query.label_selector, &feed.query.field_selector)
                        && !feed.send(feed.event_line(t.as_str(), &ev)).await
                    {
                        return false;
                    }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    // This watcher fell behind the fan-out buffer: tell it to relist.
                    let e = ApiError::expired(last_rv, last_rv + 1);
                    let _ = feed.send(feed.line("ERROR", &e.to_status())).await;
                    return false;
                }
                Err(broadcast::error::RecvError::Closed) => return false,
            }
        }
    }
}
