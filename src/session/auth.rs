//! Credentials for a Jupyter server, sent as headers on REST calls and on the websocket
//! upgrade. A credential's `Debug` never shows it, and header values are marked sensitive.

use std::fmt;

use reqwest::header::{AUTHORIZATION, COOKIE, HeaderMap, HeaderName, HeaderValue};

use super::error::SessionError;

/// A string that must not be printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The secret itself, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// How to authenticate to the server.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Auth {
    /// No credentials.
    #[default]
    None,
    /// `Authorization: token <T>` (Jupyter's own token).
    Token(Secret),
    /// `Authorization: Bearer <T>` (a gateway or an OAuth proxy in front of the server).
    Bearer(Secret),
    /// `Cookie: <cookies>`; an `_xsrf` cookie is echoed as `X-XSRFToken` for POST/DELETE.
    Cookie(Secret),
}

/// How `--token` is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum AuthScheme {
    /// `Authorization: token <T>`.
    #[default]
    Token,
    /// `Authorization: Bearer <T>`.
    Bearer,
    /// `Cookie: <T>` (the whole cookie header).
    Cookie,
}

impl Auth {
    /// A credential sent the way `scheme` says.
    pub fn from_scheme(scheme: AuthScheme, secret: Secret) -> Self {
        match scheme {
            AuthScheme::Token => Auth::Token(secret),
            AuthScheme::Bearer => Auth::Bearer(secret),
            AuthScheme::Cookie => Auth::Cookie(secret),
        }
    }

    /// The headers to send, with sensitive values.
    pub fn headers(&self) -> Result<HeaderMap, SessionError> {
        let mut headers = HeaderMap::new();
        match self {
            Auth::None => {}
            Auth::Token(t) => {
                headers.insert(AUTHORIZATION, sensitive(&format!("token {}", t.expose()))?);
            }
            Auth::Bearer(t) => {
                headers.insert(AUTHORIZATION, sensitive(&format!("Bearer {}", t.expose()))?);
            }
            Auth::Cookie(c) => {
                headers.insert(COOKIE, sensitive(c.expose())?);
                if let Some(xsrf) = xsrf_cookie(c.expose()) {
                    headers.insert(HeaderName::from_static("x-xsrftoken"), sensitive(xsrf)?);
                }
            }
        }
        Ok(headers)
    }
}

fn sensitive(value: &str) -> Result<HeaderValue, SessionError> {
    let mut v = HeaderValue::from_str(value).map_err(|_| SessionError::InvalidCredential)?;
    v.set_sensitive(true);
    Ok(v)
}

fn xsrf_cookie(cookies: &str) -> Option<&str> {
    cookies
        .split(';')
        .map(str::trim)
        .find_map(|kv| kv.strip_prefix("_xsrf="))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_secret() {
        let auth = Auth::Token(Secret::new("hunter2"));
        assert!(!format!("{auth:?}").contains("hunter2"));
        let h = auth.headers().unwrap();
        assert!(!format!("{h:?}").contains("hunter2"), "{h:?}");
        assert_eq!(h[AUTHORIZATION].to_str().unwrap(), "token hunter2");
    }

    #[test]
    fn cookie_auth_echoes_the_xsrf_cookie() {
        let h = Auth::Cookie(Secret::new("a=1; _xsrf=abc; b=2"))
            .headers()
            .unwrap();
        assert_eq!(h["x-xsrftoken"].to_str().unwrap(), "abc");
        assert_eq!(h[COOKIE].to_str().unwrap(), "a=1; _xsrf=abc; b=2");
        let h = Auth::Bearer(Secret::new("t")).headers().unwrap();
        assert_eq!(h[AUTHORIZATION].to_str().unwrap(), "Bearer t");
    }

    #[test]
    fn control_characters_are_refused() {
        let err = Auth::Token(Secret::new("a\nb")).headers().unwrap_err();
        assert!(matches!(err, SessionError::InvalidCredential));
    }
}
