//! jupyter_server's XSRF check, from the client's side.
//!
//! A server with no token (Kubeflow's notebook images start JupyterLab with
//! `--ServerApp.token="" --ServerApp.password=""`) refuses POST, PUT, PATCH and DELETE with
//! 403 "'_xsrf' argument missing" unless the request carries the `_xsrf` cookie the server
//! set and the same value in `X-XSRFToken` (tornado's `check_xsrf_cookie`). The client takes
//! the cookie from a page that sets it ([`XSRF_PAGES`]), keeps it for the client's lifetime
//! and sends it on every mutating request; a token server exempts token-authenticated
//! requests, and the extra cookie and header are harmless there. The value is a credential:
//! it is kept as a [`Secret`] and its header values are marked sensitive.

use std::sync::Arc;

use reqwest::header::{COOKIE, HeaderMap, HeaderName, HeaderValue, SET_COOKIE};
use reqwest::{Method, Url};

use super::auth::Secret;
use super::error::SessionError;

/// Pages (relative to the base URL) whose GET sets the `_xsrf` cookie, tried in order:
/// JupyterLab, the classic tree, the login page.
pub const XSRF_PAGES: &[&str] = &["lab", "tree", "login"];

/// The header tornado compares with the cookie.
pub const XSRF_HEADER: &str = "x-xsrftoken";

/// What a client knows of the cookie.
#[derive(Default)]
pub(crate) struct Slot {
    /// Whether the pages were asked (a server that sets no cookie is not asked again).
    pub fetched: bool,
    /// The value, if a page set one.
    pub value: Option<Secret>,
}

/// The `_xsrf` cookie, shared by a client and its clones (empty until first needed).
#[derive(Clone, Default)]
pub struct XsrfCookie(Arc<tokio::sync::Mutex<Slot>>);

impl std::fmt::Debug for XsrfCookie {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("XsrfCookie(<redacted>)")
    }
}

impl XsrfCookie {
    /// The value held now, if any (never fetches).
    pub async fn held(&self) -> Option<Secret> {
        self.0.lock().await.value.clone()
    }

    /// The value, fetched from [`XSRF_PAGES`] the first time or when `refresh`; `None` when
    /// no page sets one. Concurrent callers fetch once.
    pub async fn get_or_fetch(
        &self,
        http: &reqwest::Client,
        base: &Url,
        auth: &HeaderMap,
        refresh: bool,
    ) -> Result<Option<Secret>, reqwest::Error> {
        let mut slot = self.0.lock().await;
        if refresh || !slot.fetched {
            slot.value = fetch(http, base, auth).await?.map(Secret::new);
            slot.fetched = true;
        }
        Ok(slot.value.clone())
    }
}

/// GETs [`XSRF_PAGES`] in order until one sets `_xsrf`. Connection errors end it.
async fn fetch(
    http: &reqwest::Client,
    base: &Url,
    auth: &HeaderMap,
) -> Result<Option<String>, reqwest::Error> {
    for page in XSRF_PAGES {
        let Ok(url) = base.join(page) else { continue };
        let resp = http.get(url).headers(auth.clone()).send().await?;
        if let Some(value) = from_set_cookie(resp.headers()) {
            return Ok(Some(value));
        }
    }
    Ok(None)
}

/// Whether jupyter_server checks XSRF on this method.
pub fn is_mutating(method: &Method) -> bool {
    matches!(
        *method,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    )
}

/// Whether the caller's own credentials already carry an XSRF pair (cookie auth copied
/// from a browser).
pub fn auth_has_xsrf(auth: &HeaderMap) -> bool {
    auth.contains_key(XSRF_HEADER)
}

/// The `_xsrf` value from a response's `Set-Cookie` headers.
pub fn from_set_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(|v| v.split(';').next())
        .find_map(|kv| kv.trim().strip_prefix("_xsrf="))
        .filter(|v| !v.is_empty())
        .map(|v| v.trim_matches('"').to_owned())
}

/// Whether a 403 body is the XSRF check's ("'_xsrf' argument missing from POST",
/// "XSRF cookie does not match POST argument").
pub fn is_xsrf_refusal(body: &str) -> bool {
    body.contains("_xsrf") || body.contains("XSRF")
}

/// Adds `Cookie: _xsrf=<v>` (after the caller's cookies, if any) and `X-XSRFToken: <v>`.
pub fn apply(headers: &mut HeaderMap, value: &Secret) -> Result<(), SessionError> {
    let cookie = match headers.get(COOKIE).and_then(|c| c.to_str().ok()) {
        Some(existing) if !existing.trim().is_empty() => {
            format!("{existing}; _xsrf={}", value.expose())
        }
        _ => format!("_xsrf={}", value.expose()),
    };
    headers.insert(COOKIE, sensitive(&cookie)?);
    headers.insert(
        HeaderName::from_static(XSRF_HEADER),
        sensitive(value.expose())?,
    );
    Ok(())
}

fn sensitive(value: &str) -> Result<HeaderValue, SessionError> {
    let mut v = HeaderValue::from_str(value).map_err(|_| SessionError::InvalidCredential)?;
    v.set_sensitive(true);
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cookie_is_read_from_set_cookie() {
        let mut h = HeaderMap::new();
        h.append(SET_COOKIE, HeaderValue::from_static("other=1; Path=/"));
        h.append(
            SET_COOKIE,
            HeaderValue::from_static("_xsrf=2|ab|cd|17; expires=Sat; Path=/base/"),
        );
        assert_eq!(from_set_cookie(&h).as_deref(), Some("2|ab|cd|17"));
        assert_eq!(from_set_cookie(&HeaderMap::new()), None);
    }

    #[test]
    fn the_pair_is_added_after_the_callers_cookies() {
        let v = Secret::new("2|ab");
        let mut h = HeaderMap::new();
        apply(&mut h, &v).unwrap();
        assert_eq!(h[COOKIE].to_str().unwrap(), "_xsrf=2|ab");
        assert_eq!(h[XSRF_HEADER].to_str().unwrap(), "2|ab");
        assert!(!format!("{h:?}").contains("2|ab"), "{h:?}");
        let mut h = HeaderMap::new();
        h.insert(COOKIE, HeaderValue::from_static("session=s"));
        apply(&mut h, &v).unwrap();
        assert_eq!(h[COOKIE].to_str().unwrap(), "session=s; _xsrf=2|ab");
    }

    #[test]
    fn mutating_methods_and_refusals_are_recognised() {
        assert!(is_mutating(&Method::DELETE) && is_mutating(&Method::PATCH));
        assert!(!is_mutating(&Method::GET));
        assert!(is_xsrf_refusal("'_xsrf' argument missing from POST"));
        assert!(!is_xsrf_refusal("Forbidden"));
    }
}
