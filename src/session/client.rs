//! `JupyterClient`: the Jupyter Server REST API (status, kernels, sessions, contents) with
//! token, bearer or cookie auth sent as headers, over reqwest with TLS verification on
//! unless the caller turns it off.
//!
//! Every POST, PUT, PATCH and DELETE carries the `_xsrf` cookie and `X-XSRFToken` header
//! that a tokenless jupyter_server (Kubeflow's images) insists on; see [`super::xsrf`].
//!
//! The base URL is kept without its query string: a `?token=` in a pasted URL becomes the
//! credential and never reaches a message, a log line or the state file.

use std::time::Duration;

use base64::Engine as _;
use reqwest::header::HeaderMap;
use reqwest::{Method, Response, StatusCode, Url};
use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};

use super::auth::{Auth, Secret};
use super::error::SessionError;
use super::models::{FileContents, KernelModel, ServerStatus, SessionModel};
use super::xsrf::{self, XsrfCookie};
use crate::verdict::FileState;

/// Client options.
#[derive(Debug, Clone, Default)]
pub struct ClientOptions {
    /// Accept any TLS certificate (self-signed test clusters only; the caller logs it).
    pub insecure_skip_tls_verify: bool,
    /// The longest one REST request may take, connection and body included (a server that
    /// takes connections and never answers ends there); `None`: only the 10 s connect limit.
    pub request_timeout: Option<Duration>,
}

/// A Jupyter Server REST client. Cheap to clone.
#[derive(Clone)]
pub struct JupyterClient {
    http: reqwest::Client,
    base: Url,
    auth: HeaderMap,
    xsrf: XsrfCookie,
    insecure: bool,
    request_timeout: Option<Duration>,
}

impl std::fmt::Debug for JupyterClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JupyterClient")
            .field("base", &self.base.as_str())
            .field("insecure", &self.insecure)
            .finish_non_exhaustive()
    }
}

/// The most one TCP and TLS connect may take (the request's own budget, when shorter,
/// bounds it first); a connect that takes longer is retried within the caller's budget.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a request got no answer, in words: a timeout names the budget it ran out of (a
/// server that takes the connection and never answers), anything else its innermost cause
/// (refused, DNS, TLS), which reqwest's own message leaves out.
fn unreachable_cause(source: &reqwest::Error, request_timeout: Option<Duration>) -> String {
    if source.is_timeout() {
        return match request_timeout {
            Some(limit) => format!(
                "timed out: no answer within {} (the server took the connection and never \
                 answered)",
                super::error::human(limit)
            ),
            None => format!(
                "timed out connecting ({})",
                super::error::human(CONNECT_TIMEOUT)
            ),
        };
    }
    let mut cause = source.to_string();
    let mut inner: Option<&dyn std::error::Error> = std::error::Error::source(source);
    while let Some(e) = inner {
        cause = format!("{cause}: {e}");
        inner = e.source();
    }
    cause
}

impl JupyterClient {
    /// A client for the server whose base URL is `url` (e.g.
    /// `https://host/workspace/connect/ns/ws/jupyterlab/`). A `token` query parameter in
    /// the URL is used as `Auth::Token` when `auth` is `Auth::None`, and dropped from the URL.
    pub fn new(url: &str, auth: Auth, options: ClientOptions) -> Result<Self, SessionError> {
        let (base, url_token) = parse_base_url(url)?;
        let auth = match (auth, url_token) {
            (Auth::None, Some(token)) => Auth::Token(Secret::new(token)),
            (auth, _) => auth,
        };
        let headers = auth.headers()?;
        // The connect is bounded by the request's budget too, when that is shorter.
        let connect = options
            .request_timeout
            .map_or(CONNECT_TIMEOUT, |t| t.min(CONNECT_TIMEOUT));
        let mut http = reqwest::Client::builder()
            .tls_danger_accept_invalid_certs(options.insecure_skip_tls_verify)
            .connect_timeout(connect);
        if let Some(limit) = options.request_timeout {
            http = http.timeout(limit);
        }
        let http = http
            .build()
            .map_err(|source| SessionError::HttpClient { source })?;
        Ok(JupyterClient {
            http,
            base,
            auth: headers,
            xsrf: XsrfCookie::default(),
            insecure: options.insecure_skip_tls_verify,
            request_timeout: options.request_timeout,
        })
    }

    /// The base URL (never with a token).
    pub fn base_url(&self) -> &Url {
        &self.base
    }

    /// Whether TLS verification is off.
    pub fn insecure(&self) -> bool {
        self.insecure
    }

    /// The websocket upgrade's headers (sensitive values): the credentials, the `_xsrf`
    /// cookie once a REST request has fetched it, and an `Origin` equal to the server's own
    /// (jupyter_server's default origin check accepts it; `allow_origin='*'` accepts any).
    pub(crate) async fn ws_headers(&self) -> Result<HeaderMap, SessionError> {
        let mut headers = self.auth.clone();
        if !xsrf::auth_has_xsrf(&self.auth)
            && let Some(value) = self.xsrf.held().await
        {
            xsrf::apply(&mut headers, &value)?;
        }
        if let Ok(origin) =
            reqwest::header::HeaderValue::from_str(&self.base.origin().ascii_serialization())
        {
            headers.insert(reqwest::header::ORIGIN, origin);
        }
        Ok(headers)
    }

    /// `ws(s)://.../<base>/<path>` for the websocket.
    pub(crate) fn ws_url(&self, path_and_query: &str) -> String {
        let mut url = self.base.clone();
        let scheme = if url.scheme() == "https" { "wss" } else { "ws" };
        let _ = url.set_scheme(scheme);
        format!("{}{}", url.as_str(), path_and_query)
    }

    fn endpoint(&self, segments: &[&str]) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(segments);
        }
        url
    }

    async fn send(
        &self,
        method: Method,
        url: Url,
        body: Option<serde_json::Value>,
    ) -> Result<Response, SessionError> {
        let span = tracing::info_span!(crate::platform::wait::SPAN, on = "jupyter");
        tracing::Instrument::instrument(self.send_unspanned(method, url, body), span).await
    }

    async fn send_unspanned(
        &self,
        method: Method,
        url: Url,
        body: Option<serde_json::Value>,
    ) -> Result<Response, SessionError> {
        let with_xsrf = xsrf::is_mutating(&method) && !xsrf::auth_has_xsrf(&self.auth);
        let mut refreshed = false;
        loop {
            let mut headers = self.auth.clone();
            if with_xsrf
                && let Some(value) = self
                    .xsrf
                    .get_or_fetch(&self.http, &self.base, &self.auth, refreshed)
                    .await
                    .map_err(|source| self.unreachable(source))?
            {
                xsrf::apply(&mut headers, &value)?;
            }
            let mut req = self
                .http
                .request(method.clone(), url.clone())
                .headers(headers);
            if let Some(body) = &body {
                req = req.json(body);
            }
            let resp = req
                .send()
                .await
                .map_err(|source| self.unreachable(source))?;
            let status = resp.status();
            if status == StatusCode::FORBIDDEN && with_xsrf {
                let text = resp.text().await.unwrap_or_default();
                if !xsrf::is_xsrf_refusal(&text) {
                    return Err(self.unauthorized(status));
                }
                if !refreshed {
                    refreshed = true;
                    continue;
                }
                return Err(SessionError::XsrfRefused {
                    url: self.base.to_string(),
                    what: format!("{method} {}", url.path()),
                    pages: xsrf::XSRF_PAGES.join(", "),
                });
            }
            if matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
                return Err(self.unauthorized(status));
            }
            return Ok(resp);
        }
    }

    fn unreachable(&self, source: reqwest::Error) -> SessionError {
        SessionError::Unreachable {
            url: self.base.to_string(),
            cause: unreachable_cause(&source, self.request_timeout),
            source,
        }
    }

    fn unauthorized(&self, status: StatusCode) -> SessionError {
        SessionError::Unauthorized {
            url: self.base.to_string(),
            status: status.as_u16(),
        }
    }

    async fn expect_json<T: DeserializeOwned>(
        what: &str,
        resp: Response,
    ) -> Result<T, SessionError> {
        let status = resp.status();
        let text = resp.text().await.map_err(|e| SessionError::Decode {
            what: what.to_owned(),
            detail: e.to_string(),
        })?;
        if !status.is_success() {
            return Err(SessionError::UnexpectedStatus {
                what: what.to_owned(),
                status: status.as_u16(),
                body: excerpt(&text),
            });
        }
        serde_json::from_str(&text).map_err(|e| SessionError::Decode {
            what: what.to_owned(),
            detail: format!("{e} in {}", excerpt(&text)),
        })
    }

    async fn get_json<T: DeserializeOwned>(
        &self,
        what: &str,
        segments: &[&str],
    ) -> Result<T, SessionError> {
        let resp = self
            .send(Method::GET, self.endpoint(segments), None)
            .await?;
        Self::expect_json(what, resp).await
    }

    /// `GET /api`: the server version.
    pub async fn version(&self) -> Result<String, SessionError> {
        let v: serde_json::Value = self.get_json("GET /api", &["api"]).await?;
        Ok(v.get("version")
            .and_then(|v| v.as_str())
            .unwrap_or("unknown")
            .to_owned())
    }

    /// `GET /api/status`.
    pub async fn status(&self) -> Result<ServerStatus, SessionError> {
        self.get_json("GET /api/status", &["api", "status"]).await
    }

    /// `GET /api/kernels`.
    pub async fn kernels(&self) -> Result<Vec<KernelModel>, SessionError> {
        self.get_json("GET /api/kernels", &["api", "kernels"]).await
    }

    /// `GET /api/kernels/{id}`; a 404 is `SessionError::KernelNotFound`.
    pub async fn kernel(&self, kernel_id: &str) -> Result<KernelModel, SessionError> {
        let resp = self
            .send(
                Method::GET,
                self.endpoint(&["api", "kernels", kernel_id]),
                None,
            )
            .await?;
        if resp.status() == StatusCode::NOT_FOUND {
            return Err(self.not_found(kernel_id));
        }
        Self::expect_json("GET /api/kernels/{id}", resp).await
    }

    /// `POST /api/kernels`: starts a kernel (`name` = kernelspec, default the server's) whose
    /// working directory is the server root (`path: ""`). Without a path, jupyter_server
    /// starts it in the server process's own working directory instead.
    pub async fn start_kernel(&self, name: Option<&str>) -> Result<KernelModel, SessionError> {
        let mut body = serde_json::json!({ "path": "" });
        if let Some(name) = name {
            body["name"] = serde_json::Value::String(name.to_owned());
        }
        let resp = self
            .send(Method::POST, self.endpoint(&["api", "kernels"]), Some(body))
            .await?;
        Self::expect_json("POST /api/kernels", resp).await
    }

    /// `POST /api/kernels/{id}/restart`: same kernel id, new process, memory gone.
    pub async fn restart_kernel(&self, kernel_id: &str) -> Result<KernelModel, SessionError> {
        let url = self.endpoint(&["api", "kernels", kernel_id, "restart"]);
        let resp = self
            .send(Method::POST, url, Some(serde_json::json!({})))
            .await?;
        if resp.status() == StatusCode::NOT_FOUND {
            return Err(self.not_found(kernel_id));
        }
        Self::expect_json("POST /api/kernels/{id}/restart", resp).await
    }

    /// `POST /api/kernels/{id}/interrupt`.
    pub async fn interrupt_kernel(&self, kernel_id: &str) -> Result<(), SessionError> {
        let url = self.endpoint(&["api", "kernels", kernel_id, "interrupt"]);
        let resp = self
            .send(Method::POST, url, Some(serde_json::json!({})))
            .await?;
        self.expect_empty("POST /api/kernels/{id}/interrupt", kernel_id, resp)
            .await
    }

    /// `DELETE /api/kernels/{id}`.
    pub async fn delete_kernel(&self, kernel_id: &str) -> Result<(), SessionError> {
        let url = self.endpoint(&["api", "kernels", kernel_id]);
        let resp = self.send(Method::DELETE, url, None).await?;
        self.expect_empty("DELETE /api/kernels/{id}", kernel_id, resp)
            .await
    }

    /// `GET /api/sessions`.
    pub async fn sessions(&self) -> Result<Vec<SessionModel>, SessionError> {
        self.get_json("GET /api/sessions", &["api", "sessions"])
            .await
    }

    /// A file's checksum as the Contents API serves it (`path` relative to the server
    /// root, `/`-separated). 404 is `FileState::Missing`.
    pub async fn file_state(&self, path: &str) -> Result<FileState, SessionError> {
        let mut segments = vec!["api", "contents"];
        segments.extend(path.split('/').filter(|s| !s.is_empty()));
        let mut url = self.endpoint(&segments);
        url.query_pairs_mut()
            .append_pair("type", "file")
            .append_pair("format", "base64")
            .append_pair("content", "1");
        let resp = self.send(Method::GET, url, None).await?;
        if resp.status() == StatusCode::NOT_FOUND {
            return Ok(FileState::Missing);
        }
        let body: FileContents = Self::expect_json("GET /api/contents/{path}", resp).await?;
        let bytes = match (body.format.as_deref(), body.content) {
            (Some("base64"), Some(content)) => base64::engine::general_purpose::STANDARD
                .decode(content.replace('\n', ""))
                .map_err(|e| SessionError::Decode {
                    what: format!("GET /api/contents/{path}"),
                    detail: e.to_string(),
                })?,
            (Some("text"), Some(content)) => content.into_bytes(),
            (format, _) => {
                return Ok(FileState::Unreadable {
                    reason: format!("the Contents API served format {format:?}"),
                });
            }
        };
        Ok(FileState::Present {
            sha256: hex::encode(Sha256::digest(&bytes)),
            size: bytes.len() as u64,
        })
    }

    async fn expect_empty(
        &self,
        what: &str,
        kernel_id: &str,
        resp: Response,
    ) -> Result<(), SessionError> {
        let status = resp.status();
        if status == StatusCode::NOT_FOUND {
            return Err(self.not_found(kernel_id));
        }
        if !status.is_success() {
            return Err(SessionError::UnexpectedStatus {
                what: what.to_owned(),
                status: status.as_u16(),
                body: excerpt(&resp.text().await.unwrap_or_default()),
            });
        }
        Ok(())
    }

    fn not_found(&self, kernel_id: &str) -> SessionError {
        SessionError::KernelNotFound {
            url: self.base.to_string(),
            kernel_id: kernel_id.to_owned(),
        }
    }
}

/// Parses and normalises a base URL: http(s) only, a trailing `/`, no query or fragment,
/// no user info. Returns the `token` query parameter separately.
pub(crate) fn parse_base_url(url: &str) -> Result<(Url, Option<String>), SessionError> {
    let invalid = |reason: &str| SessionError::InvalidUrl {
        url: redact_query(url),
        reason: reason.to_owned(),
    };
    let mut parsed = Url::parse(url).map_err(|e| invalid(&e.to_string()))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(invalid("the scheme must be http or https"));
    }
    if parsed.host_str().is_none() {
        return Err(invalid("no host"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(invalid(
            "credentials in the URL are not supported; use --token or WSGATE_JUPYTER_TOKEN",
        ));
    }
    let token = parsed
        .query_pairs()
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v.into_owned());
    parsed.set_query(None);
    parsed.set_fragment(None);
    if !parsed.path().ends_with('/') {
        let path = format!("{}/", parsed.path());
        parsed.set_path(&path);
    }
    Ok((parsed, token))
}

/// The URL without anything secret, for messages: the query becomes `?<redacted>` and
/// user info `<redacted>@`.
pub(crate) fn redact_query(url: &str) -> String {
    let no_query = match url.split_once('?') {
        Some((head, _)) => format!("{head}?<redacted>"),
        None => url.to_owned(),
    };
    if let Some((scheme, rest)) = no_query.split_once("://") {
        let authority_end = rest.find('/').unwrap_or(rest.len());
        if let Some(at) = rest[..authority_end].rfind('@') {
            return format!("{scheme}://<redacted>@{}", &rest[at + 1..]);
        }
    }
    no_query
}

fn excerpt(text: &str) -> String {
    let t = text.trim();
    if t.chars().count() > 300 {
        format!("{}...", t.chars().take(300).collect::<String>())
    } else {
        t.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_are_normalised_and_tokens_taken_out() {
        let (u, t) =
            parse_base_url("http://h:8888/workspace/connect/ns/ws/lab?token=abc#x").unwrap();
        assert_eq!(u.as_str(), "http://h:8888/workspace/connect/ns/ws/lab/");
        assert_eq!(t.as_deref(), Some("abc"));
        let (u, t) = parse_base_url("https://h/").unwrap();
        assert_eq!(u.as_str(), "https://h/");
        assert_eq!(t, None);
    }

    #[test]
    fn bad_urls_are_refused_without_echoing_the_query() {
        let err = parse_base_url("ftp://h/?token=sekrit").unwrap_err();
        assert!(err.to_string().contains("http or https"), "{err}");
        assert!(!err.to_string().contains("sekrit"), "{err}");
        assert!(parse_base_url("not a url").is_err());
        let err = parse_base_url("http://user:pw@h/").unwrap_err();
        assert!(!err.to_string().contains("pw"), "{err}");
        assert_eq!(
            redact_query("http://u:p@h/x?token=t"),
            "http://<redacted>@h/x?<redacted>"
        );
    }

    #[test]
    fn endpoints_keep_the_prefix_and_encode_segments() {
        crate::install_crypto_provider();
        let c = JupyterClient::new("http://h/a/b/", Auth::None, ClientOptions::default()).unwrap();
        assert_eq!(
            c.endpoint(&["api", "kernels", "k1"]).as_str(),
            "http://h/a/b/api/kernels/k1"
        );
        assert_eq!(
            c.endpoint(&["api", "contents", "my dir", "x?.npy"])
                .as_str(),
            "http://h/a/b/api/contents/my%20dir/x%3F.npy"
        );
        assert_eq!(
            c.ws_url("api/kernels/k/channels"),
            "ws://h/a/b/api/kernels/k/channels"
        );
    }
}
