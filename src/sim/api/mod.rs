//! The simulated API server's HTTP surface (axum): authentication, authorization (audit and
//! optional RBAC), discovery, OpenAPI, and the resource routes, all answering errors as
//! `metav1.Status`.

pub mod accept;
pub mod authz;
pub mod discovery;
pub mod openapi;
pub mod patch;
pub mod path;
pub mod protobuf;
pub mod query;
pub mod resource;
pub mod stream;
pub mod table;
pub mod watch;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Request, State as AxState};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::Value;

use crate::sim::error::ApiError;
use crate::sim::store::Store;

/// Shared state of the API server.
#[derive(Clone)]
pub struct State {
    pub store: Arc<Store>,
    /// The bearer token every request (but `/version` and health checks) must carry.
    pub token: Arc<str>,
    /// Flips to `true` when the server shuts down; open watches end.
    pub shutdown: tokio::sync::watch::Receiver<bool>,
    /// How often a watch that allows bookmarks gets one.
    pub bookmark_interval: Duration,
    /// Ground truth of the simulated platform (empty for an API-only simulator).
    pub truth: Arc<crate::sim::truth::Truth>,
    /// The simulated snapshot bucket (`None` for an API-only simulator).
    pub bucket: Option<Arc<crate::sim::bucket::Bucket>>,
    /// API-level faults (`api-errors`, `watch-drops`).
    pub faults: ApiFaults,
    /// Every resource request, in RBAC terms.
    pub audit: Arc<authz::Audit>,
    /// The rules enforced on resource requests (`None`: everything is allowed).
    pub rbac: Option<&'static crate::platform::rbac::DeployRbac>,
    /// What those faults did, and how clients listed and watched.
    pub counters: Arc<FaultCounters>,
    /// The pod processes and volumes, for exec (`None` for an API-only simulator).
    pub pods: Option<Arc<crate::sim::pods::PodProcesses>>,
}

/// Counts of what the API faults did and of list and watch requests, so that tests can
/// check that a client met the faults and resumed watches instead of listing again.
#[derive(Debug, Default)]
pub struct FaultCounters {
    requests: AtomicU64,
    throttled: AtomicU64,
    failed: AtomicU64,
    failed_after_apply: AtomicU64,
    lists: AtomicU64,
    watches: AtomicU64,
    watches_dropped: AtomicU64,
}

/// A snapshot of [`FaultCounters`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultCounts {
    /// Resource requests (`/api/...`, `/apis/...`) received, discovery included.
    pub requests: u64,
    /// Requests answered 429 (with `Retry-After: 1`).
    pub throttled: u64,
    /// Requests answered 500, those in `failed_after_apply` included.
    pub failed: u64,
    /// Mutating requests that were applied and then answered 500 anyway.
    pub failed_after_apply: u64,
    /// List requests that reached the store.
    pub lists: u64,
    /// Watch requests that reached the store.
    pub watches: u64,
    /// Watch streams ended early by `watch-drops`.
    pub watches_dropped: u64,
}

impl FaultCounters {
    pub fn snapshot(&self) -> FaultCounts {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        FaultCounts {
            requests: get(&self.requests),
            throttled: get(&self.throttled),
            failed: get(&self.failed),
            failed_after_apply: get(&self.failed_after_apply),
            lists: get(&self.lists),
            watches: get(&self.watches),
            watches_dropped: get(&self.watches_dropped),
        }
    }

    pub(crate) fn list(&self) {
        self.lists.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn watch(&self) {
        self.watches.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn watch_dropped(&self) {
        self.watches_dropped.fetch_add(1, Ordering::Relaxed);
    }
}

/// The API server's own faults.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiFaults {
    /// Fraction of requests answered 429 (with Retry-After) or 500 (fault `api-errors`).
    pub error_rate: f64,
    /// Whether watch streams end after a short random time (fault `watch-drops`).
    pub watch_drops: bool,
}

impl ApiFaults {
    /// From a simulator profile: `api-errors` with no rate set means 10 %.
    pub fn from_profile(p: &crate::sim::profile::SimProfile) -> Self {
        use crate::sim::faults::Fault;
        let rate = p.faults.api_error_rate;
        Self {
            error_rate: if rate == 0.0 && p.has_fault(Fault::ApiErrors) {
                0.1
            } else {
                rate
            },
            watch_drops: p.has_fault(Fault::WatchDrops),
        }
    }
}

/// A JSON reply with the given status.
pub fn json_response(code: StatusCode, body: &Value) -> Response {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let mut r = (code, bytes).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn typed_json(content_type: &'static str, body: &Value) -> Response {
    let mut r = json_response(StatusCode::OK, body);
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

/// The router for one simulator instance.
pub fn router(state: State) -> Router {
    Router::new()
        .route(
            "/version",
            get(|| async { json_response(StatusCode::OK, &discovery::version()) }),
        )
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(|| async { "ok" }))
        .route("/livez", get(|| async { "ok" }))
        .route("/api", get(api_root))
        .route("/apis", get(apis_root))
        .route(
            "/openapi/v3",
            get(|| async { json_response(StatusCode::OK, &openapi::root()) }),
        )
        .route("/openapi/v3/{*path}", get(openapi_group_version))
        .route("/sim/v1/truth", get(truth))
        .route("/sim/v1/audit", get(audit))
        .route("/storage/v1/b/{bucket}/o", get(bucket_objects))
        .route(
            "/api/v1/namespaces/{ns}/pods/{name}/exec",
            axum::routing::any(stream::exec),
        )
        .route(
            "/api/v1/namespaces/{ns}/pods/{name}/portforward",
            axum::routing::any(stream::portforward),
        )
        .fallback(resources)
        .layer(middleware::from_fn_with_state(state.clone(), inject_errors))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            authz::authorize,
        ))
        .layer(middleware::from_fn_with_state(state.clone(), authenticate))
        .with_state(state)
}

async fn authenticate(AxState(state): AxState<State>, req: Request, next: Next) -> Response {
    let public = matches!(
        req.uri().path(),
        "/version" | "/healthz" | "/readyz" | "/livez"
    );
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if public || presented == Some(&*state.token) {
        next.run(req).await
    } else {
        ApiError::unauthorized().into_response()
    }
}

/// Simulator-only: every real transition with its time, and the delays the simulator imposed
/// on purpose (by kind: count and sum), for tests and benchmarks that measure the harness.
async fn truth(AxState(state): AxState<State>) -> Response {
    let events = serde_json::to_value(state.truth.events()).unwrap_or_default();
    let imposed = serde_json::to_value(state.truth.imposed()).unwrap_or_default();
    json_response(
        StatusCode::OK,
        &serde_json::json!({"events": events, "imposed": imposed}),
    )
}

/// Simulator-only: every distinct client request so far in RBAC terms (verb, group,
/// resource, namespaced, allowed), sorted.
async fn audit(AxState(state): AxState<State>) -> Response {
    let entries = serde_json::to_value(state.audit.entries()).unwrap_or_default();
    json_response(StatusCode::OK, &serde_json::json!({"entries": entries}))
}

/// Simulator-only: the snapshot bucket's objects, as the GCS JSON API lists them
/// (`prefix`, `delimiter`, `maxResults`, `pageToken`).
async fn bucket_objects(
    AxState(state): AxState<State>,
    axum::extract::Path(bucket): axum::extract::Path<String>,
    uri: Uri,
) -> Response {
    use crate::sim::bucket::{BucketError, error_json, listing_json};
    let q: std::collections::HashMap<String, String> =
        form_urlencoded::parse(uri.query().unwrap_or("").as_bytes())
            .into_owned()
            .collect();
    let Some(store) = &state.bucket else {
        return json_response(
            StatusCode::NOT_FOUND,
            &error_json(404, "this simulator has no snapshot bucket"),
        );
    };
    let listing = store.list(
        &bucket,
        q.get("prefix").map_or("", String::as_str),
        q.get("delimiter").map(String::as_str),
        q.get("maxResults").and_then(|m| m.parse().ok()),
        q.get("pageToken").map(String::as_str),
    );
    match listing {
        Ok(l) => json_response(StatusCode::OK, &listing_json(&bucket, &l)),
        Err(e @ (BucketError::NoSuchBucket(_) | BucketError::InvalidName(_))) => {
            json_response(StatusCode::NOT_FOUND, &error_json(404, &e.to_string()))
        }
        Err(e) => json_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            &error_json(500, &e.to_string()),
        ),
    }
}

/// Fault `api-errors`: a fraction of resource requests get 429 (Retry-After: 1) or 500,
/// as an overloaded API server answers. A 429 is refused before anything happens, as
/// priority and fairness does; half of the 500s to mutating requests come after the change
/// was applied, as "etcdserver: request timed out" does when the write did commit, so a
/// client that retries meets its own earlier attempt.
async fn inject_errors(AxState(state): AxState<State>, req: Request, next: Next) -> Response {
    let rate = state.faults.error_rate;
    let eligible = req.uri().path().starts_with("/api");
    if eligible {
        state.counters.requests.fetch_add(1, Ordering::Relaxed);
    }
    if rate > 0.0 && eligible {
        use rand::RngExt;
        let roll: f64 = rand::rng().random();
        if roll < rate {
            let counters = &state.counters;
            if roll < rate / 2.0 {
                counters.throttled.fetch_add(1, Ordering::Relaxed);
                let mut r = ApiError::too_many_requests().into_response();
                r.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                return r;
            }
            counters.failed.fetch_add(1, Ordering::Relaxed);
            let mutating = !matches!(*req.method(), Method::GET | Method::HEAD);
            if mutating && roll >= rate * 0.75 {
                counters.failed_after_apply.fetch_add(1, Ordering::Relaxed);
                drop(next.run(req).await);
            }
            return ApiError::internal("etcdserver: request timed out (fault api-errors)")
                .into_response();
        }
    }
    next.run(req).await
}

fn accept(headers: &HeaderMap) -> Option<&str> {
    headers.get(header::ACCEPT).and_then(|v| v.to_str().ok())
}

async fn api_root(headers: HeaderMap) -> Response {
    let (ct, body) = discovery::api_root(discovery::wants_aggregated(accept(&headers)));
    typed_json(ct, &body)
}

async fn apis_root(headers: HeaderMap) -> Response {
    let (ct, body) = discovery::apis_root(discovery::wants_aggregated(accept(&headers)));
    typed_json(ct, &body)
}

async fn openapi_group_version(axum::extract::Path(p): axum::extract::Path<String>) -> Response {
    match openapi::group_version(&p) {
        Some(doc) => json_response(StatusCode::OK, &doc),
        None => ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .into_response(),
    }
}

async fn resources(
    AxState(state): AxState<State>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let result = match path::parse(uri.path()) {
        Ok(path::Target::GroupVersion { group, version }) if method == Method::GET => {
            discovery::resource_list(&group, &version)
                .map(|doc| json_response(StatusCode::OK, &doc))
                .ok_or_else(|| {
                    ApiError::new(
                        404,
                        "NotFound",
                        "the server could not find the requested resource",
                    )
                })
        }
        Ok(path::Target::GroupVersion { .. }) => Err(ApiError::method_not_allowed()),
        Ok(path::Target::Resource(p)) if !p.kind.stored() => {
            authz::review(&state, method, &p, &body)
        }
        Ok(path::Target::Resource(p))
            if matches!(p.subresource.as_deref(), Some("exec" | "portforward")) =>
        {
            // Served only at their exact paths ([`stream`]); a stray slash is not the pod.
            Err(ApiError::new(
                404,
                "NotFound",
                "the server could not find the requested resource",
            ))
        }
        Ok(path::Target::Resource(p)) => {
            resource::handle(&state, method, p, uri.query(), &headers, body).await
        }
        Err(e) => Err(e),
    };
    result.unwrap_or_else(IntoResponse::into_response)
}
