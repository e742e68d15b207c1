//! Bounded retries for every request the harness sends to the API server: a tower layer
//! stacked on the kube client that retries 429, 500, 502, 503, 504 and dropped connections
//! with exponential backoff and jitter, waits at least as long as a `Retry-After` header
//! asks, and gives up after `api.retry_attempts` attempts with an error naming the status.
//!
//! kube's own retry (`Config::default_retry`: 429/503/504 only, up to 15 retries and waits
//! of up to 1000 s, silent) is switched off on clients built here, so that a request is
//! retried by exactly one policy, with the limits the configuration names.
//!
//! A retried POST or DELETE may meet its own earlier attempt (a 500 can come after the
//! change was applied): the callers' create and delete helpers in
//! [`super::idempotent`] treat AlreadyExists for an object of this run, and NotFound on
//! delete, as success. Watches are retried only until the server accepts them; a stream
//! that drops later is resumed by kube-runtime's watcher from its last resourceVersion.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{HeaderMap, Method, Request, Response, StatusCode, header::RETRY_AFTER};
use kube::client::Body;
use rand::RngExt;
use tower::buffer::Buffer;
use tower::{BoxError, Layer, Service, ServiceExt};

/// How often and how patiently a request is retried (`[api]` in the configuration).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Attempts per request, the first included; 1 turns retries off.
    pub max_attempts: u32,
    /// The wait before the first retry; each further retry doubles it.
    pub initial_backoff: Duration,
    /// The longest single wait. A `Retry-After` above it ends the retries.
    pub max_backoff: Duration,
    /// How long one attempt may wait for the server's answer (connection and response
    /// head), and how long the body of an answer may then pause between two pieces (a
    /// watch's stream, once its head arrived, is not cut by it). A server that accepts
    /// connections and never answers ends the request, unretried, with
    /// [`RetryError::NoAnswer`]; one that stops sending a body midway, with
    /// [`RetryError::Stalled`].
    pub response_timeout: Duration,
}

impl Default for RetryPolicy {
    /// The values of `[api]` in `defaults.toml`.
    fn default() -> Self {
        Self {
            max_attempts: 5,
            initial_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(5),
            response_timeout: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    /// The policy of a resolved configuration.
    pub fn from_config(api: &crate::config::ApiConfig) -> Self {
        Self {
            max_attempts: api.retry_attempts,
            initial_backoff: api.retry_backoff.duration(),
            max_backoff: api.retry_max_backoff.duration(),
            response_timeout: api.response_timeout.duration(),
        }
    }

    /// The wait before retry number `retry` (1 for the first): the exponential step
    /// `initial * 2^(retry-1)`, capped at `max_backoff`, of which the upper half is random
    /// (`jitter` in `0..1`), so that many clients that failed together do not retry together.
    pub fn backoff(&self, retry: u32, jitter: f64) -> Duration {
        let step = self
            .initial_backoff
            .saturating_mul(1u32 << retry.saturating_sub(1).min(20))
            .min(self.max_backoff);
        step.mul_f64(0.5 + 0.5 * jitter.clamp(0.0, 1.0))
    }

    /// The wait before retry number `retry`, never shorter than the server's `Retry-After`;
    /// `None` when the server asks for a wait longer than `max_backoff`.
    pub fn wait(&self, retry: u32, retry_after: Option<Duration>, jitter: f64) -> Option<Duration> {
        let backoff = self.backoff(retry, jitter);
        match retry_after {
            Some(asked) if asked > self.max_backoff => None,
            Some(asked) => Some(backoff.max(asked)),
            None => Some(backoff),
        }
    }
}

/// A request that still failed when the retries ran out.
#[derive(Debug, thiserror::Error)]
pub enum RetryError {
    #[error(
        "{method} {path}: the API server still answered {status} after {attempts} attempts \
         (api.retry_attempts)"
    )]
    Exhausted {
        method: Method,
        path: String,
        status: StatusCode,
        attempts: u32,
    },
    #[error(
        "{method} {path}: the API server answered {status} and asked to retry after {asked:?}, \
         longer than api.retry_max_backoff ({max:?})"
    )]
    RetryAfterTooLong {
        method: Method,
        path: String,
        status: StatusCode,
        asked: Duration,
        max: Duration,
    },
    #[error(
        "{method} {path}: the API server did not answer within {after:?} (api.response_timeout): \
         it accepts connections but does not respond; check that the URL is the API server's"
    )]
    NoAnswer {
        method: Method,
        path: String,
        after: Duration,
    },
    #[error(
        "{method} {path}: the API server started its answer and then sent nothing for \
         {after:?} (api.response_timeout); the connection or the server is stuck"
    )]
    Stalled {
        method: Method,
        path: String,
        after: Duration,
    },
    #[error("{method} {path}: the connection to the API server failed {attempts} times")]
    Connection {
        method: Method,
        path: String,
        attempts: u32,
        #[source]
        source: BoxError,
    },
}

/// Whether a response status is worth retrying: throttled, or a transient server failure.
pub fn retryable_status(status: StatusCode) -> bool {
    matches!(
        status,
        StatusCode::TOO_MANY_REQUESTS
            | StatusCode::INTERNAL_SERVER_ERROR
            | StatusCode::BAD_GATEWAY
            | StatusCode::SERVICE_UNAVAILABLE
            | StatusCode::GATEWAY_TIMEOUT
    )
}

/// Whether a transport error is a dropped, reset or refused connection (worth retrying),
/// anywhere in its source chain.
pub fn retryable_error(err: &(dyn std::error::Error + 'static)) -> bool {
    use std::io::ErrorKind::*;
    let mut cur = Some(err);
    while let Some(e) = cur {
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && matches!(
                io.kind(),
                ConnectionReset
                    | ConnectionAborted
                    | ConnectionRefused
                    | BrokenPipe
                    | UnexpectedEof
                    | TimedOut
            )
        {
            return true;
        }
        if let Some(h) = e.downcast_ref::<hyper::Error>()
            && (h.is_incomplete_message() || h.is_closed() || h.is_canceled())
        {
            return true;
        }
        cur = e.source();
    }
    false
}

/// The server's `Retry-After`: delay-seconds or an HTTP date.
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    Some(
        (at.with_timezone(&chrono::Utc) - chrono::Utc::now())
            .to_std()
            .unwrap_or(Duration::ZERO),
    )
}

/// Builds a kube client for `config` whose every request is retried under `policy`.
pub fn client(mut config: kube::Config, policy: RetryPolicy) -> Result<kube::Client, kube::Error> {
    config.default_retry = false;
    let builder = kube::client::ClientBuilder::try_from(config)?;
    Ok(builder.with_layer(&RetryLayer::new(policy)).build())
}

/// The tower layer: `ClientBuilder::with_layer(&RetryLayer::new(policy))`.
#[derive(Debug, Clone, Copy)]
pub struct RetryLayer {
    policy: RetryPolicy,
}

impl RetryLayer {
    pub fn new(policy: RetryPolicy) -> Self {
        Self { policy }
    }
}

impl<S> Layer<S> for RetryLayer
where
    S: Service<Request<Body>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError> + Send + Sync,
{
    type Service = Retry<S>;

    fn layer(&self, inner: S) -> Retry<S> {
        Retry {
            // A buffer makes the (boxed, non-Clone) kube stack shareable between attempts.
            inner: Buffer::new(inner, 1024),
            policy: self.policy,
        }
    }
}

/// The service [`RetryLayer`] makes.
pub struct Retry<S: Service<Request<Body>>> {
    inner: Buffer<Request<Body>, S::Future>,
    policy: RetryPolicy,
}

impl<S> Clone for Retry<S>
where
    S: Service<Request<Body>>,
    S::Future: Send + 'static,
{
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            policy: self.policy,
        }
    }
}

impl<S, B> Service<Request<Body>> for Retry<S>
where
    S: Service<Request<Body>, Response = Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError> + Send + Sync,
    B: Send + 'static,
{
    type Response = Response<Paced<B>>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Paced<B>>, BoxError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        // Each attempt waits for the buffer's readiness itself.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        let span = tracing::info_span!(super::wait::SPAN, on = "api");
        let pace = (!is_watch(&req)).then(|| Pace {
            method: req.method().clone(),
            path: req.uri().path().to_string(),
            within: self.policy.response_timeout,
        });
        let inner = self.inner.clone();
        let policy = self.policy;
        Box::pin(tracing::Instrument::instrument(
            async move {
                let resp = send(inner, policy, req).await?;
                Ok(resp.map(|body| Paced::new(body, pace)))
            },
            span,
        ))
    }
}

/// Whether `req` opens a watch (`?watch=true`), whose stream may rightly stay silent for
/// minutes: its pauses are bounded by kube's read timeout (295 s, past the server's own
/// 290 s watch timeout), not by [`RetryPolicy::response_timeout`].
fn is_watch(req: &Request<Body>) -> bool {
    req.uri().query().is_some_and(|q| {
        form_urlencoded::parse(q.as_bytes()).any(|(k, v)| k == "watch" && (v == "true" || v == "1"))
    })
}

/// How long a response body may pause between two pieces, and the request it answers.
struct Pace {
    method: Method,
    path: String,
    within: Duration,
}

/// A response body that fails with [`RetryError::Stalled`] when the server stops sending it
/// for longer than `api.response_timeout` (the head arrived, the rest never does). Without
/// it a stalled body would hold a command for kube's read timeout, 295 s. Hand-written
/// rather than tower-http's `TimeoutBody` so that the error names the request and the
/// setting that bounds it.
pub struct Paced<B> {
    body: Pin<Box<B>>,
    pace: Option<(Pace, Pin<Box<tokio::time::Sleep>>)>,
}

impl<B> Paced<B> {
    fn new(body: B, pace: Option<Pace>) -> Self {
        Paced {
            body: Box::pin(body),
            pace: pace.map(|p| {
                let sleep = Box::pin(tokio::time::sleep(p.within));
                (p, sleep)
            }),
        }
    }
}

impl<B> http_body::Body for Paced<B>
where
    B: http_body::Body,
    B::Error: Into<BoxError>,
{
    type Data = B::Data;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<B::Data>, BoxError>>> {
        let this = &mut *self;
        match this.body.as_mut().poll_frame(cx) {
            Poll::Ready(frame) => {
                if let Some((pace, sleep)) = &mut this.pace {
                    sleep
                        .as_mut()
                        .reset(tokio::time::Instant::now() + pace.within);
                }
                Poll::Ready(frame.map(|f| f.map_err(Into::into)))
            }
            Poll::Pending => {
                let Some((_, sleep)) = &mut this.pace else {
                    return Poll::Pending;
                };
                if sleep.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                // Once: a body that failed is not polled on.
                let Some((pace, _)) = this.pace.take() else {
                    return Poll::Pending;
                };
                let err = RetryError::Stalled {
                    method: pace.method,
                    path: pace.path,
                    after: pace.within,
                };
                Poll::Ready(Some(Err(err.into())))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// A copy of `req` for one more attempt; `None` for a streaming body that cannot be resent.
fn copy(req: &Request<Body>) -> Option<Request<Body>> {
    let mut out = Request::new(req.body().try_clone()?);
    *out.method_mut() = req.method().clone();
    *out.uri_mut() = req.uri().clone();
    *out.version_mut() = req.version();
    *out.headers_mut() = req.headers().clone();
    *out.extensions_mut() = req.extensions().clone();
    Some(out)
}

async fn send<F, B, E>(
    mut svc: Buffer<Request<Body>, F>,
    policy: RetryPolicy,
    req: Request<Body>,
) -> Result<Response<B>, BoxError>
where
    F: Future<Output = Result<Response<B>, E>> + Send + 'static,
    E: Into<BoxError>,
{
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let no_answer = |method: &Method, path: &str| -> BoxError {
        RetryError::NoAnswer {
            method: method.clone(),
            path: path.to_string(),
            after: policy.response_timeout,
        }
        .into()
    };
    let mut attempt = 1;
    loop {
        let last = attempt >= policy.max_attempts;
        let this = if last { None } else { copy(&req) };
        let Some(this) = this else {
            // The last attempt (or one that cannot be repeated) goes out as it is.
            let call = svc.ready().await?.call(req);
            let Ok(result) = tokio::time::timeout(policy.response_timeout, call).await else {
                return Err(no_answer(&method, &path));
            };
            return match result {
                Ok(resp) if retryable_status(resp.status()) && attempt > 1 => {
                    Err(RetryError::Exhausted {
                        method,
                        path,
                        status: resp.status(),
                        attempts: attempt,
                    }
                    .into())
                }
                Err(e) if retryable_error(&*e) && attempt > 1 => Err(RetryError::Connection {
                    method,
                    path,
                    attempts: attempt,
                    source: e,
                }
                .into()),
                other => other,
            };
        };
        let call = svc.ready().await?.call(this);
        let Ok(answer) = tokio::time::timeout(policy.response_timeout, call).await else {
            return Err(no_answer(&method, &path));
        };
        let (code, failure, asked) = match answer {
            Ok(resp) if retryable_status(resp.status()) => (
                Some(resp.status()),
                resp.status().to_string(),
                retry_after(resp.headers()),
            ),
            Err(e) if retryable_error(&*e) => (None, format!("connection error: {e}"), None),
            other => return other,
        };
        let Some(wait) = policy.wait(attempt, asked, rand::rng().random::<f64>()) else {
            return Err(RetryError::RetryAfterTooLong {
                method,
                path,
                status: code.unwrap_or(StatusCode::TOO_MANY_REQUESTS),
                asked: asked.unwrap_or_default(),
                max: policy.max_backoff,
            }
            .into());
        };
        tracing::debug!(
            %method,
            %path,
            status = %failure,
            attempt,
            retry_after_ms = asked.map(|d| d.as_millis() as u64),
            wait_ms = wait.as_millis() as u64,
            "API request failed; retrying"
        );
        tokio::time::sleep(wait).await;
        attempt += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 5,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(1),
            response_timeout: Duration::from_secs(30),
        }
    }

    #[test]
    fn backoff_doubles_is_capped_and_keeps_half_of_its_step() {
        let p = policy();
        assert_eq!(p.backoff(1, 1.0), Duration::from_millis(100));
        assert_eq!(p.backoff(1, 0.0), Duration::from_millis(50));
        assert_eq!(p.backoff(3, 1.0), Duration::from_millis(400));
        assert_eq!(p.backoff(9, 1.0), Duration::from_secs(1));
        assert_eq!(p.backoff(200, 0.0), Duration::from_millis(500));
    }

    #[test]
    fn retry_after_is_a_floor_and_too_long_a_wait_ends_retries() {
        let p = policy();
        let asked = Some(Duration::from_millis(800));
        assert_eq!(p.wait(1, asked, 0.0), Some(Duration::from_millis(800)));
        assert_eq!(p.wait(9, asked, 1.0), Some(Duration::from_secs(1)));
        assert_eq!(p.wait(1, Some(Duration::from_secs(2)), 0.0), None);
    }

    #[test]
    fn retry_after_reads_seconds_and_dates() {
        let mut h = HeaderMap::new();
        h.insert(RETRY_AFTER, "1".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(1)));
        h.insert(
            RETRY_AFTER,
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&h), Some(Duration::ZERO));
        h.insert(RETRY_AFTER, "soon".parse().unwrap());
        assert_eq!(retry_after(&h), None);
    }

    #[test]
    fn statuses_and_transport_errors_are_classified() {
        for s in [429, 500, 502, 503, 504] {
            assert!(retryable_status(StatusCode::from_u16(s).unwrap()), "{s}");
        }
        for s in [200, 400, 401, 403, 404, 409, 410, 422] {
            assert!(!retryable_status(StatusCode::from_u16(s).unwrap()), "{s}");
        }
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        assert!(retryable_error(&reset));
        let wrapped: BoxError = Box::new(RetryError::Connection {
            method: Method::GET,
            path: "/api".into(),
            attempts: 1,
            source: Box::new(reset),
        });
        assert!(retryable_error(&*wrapped));
        let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        assert!(!retryable_error(&denied));
    }
}
