//! Handlers for collections and items of served kinds: list (with pagination), watch,
//! get, create, replace, patch, delete and deletecollection, on the main resource or `/status`.

use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde_json::{Value, json};

use super::patch::{self, PatchType};
use super::path::ResourcePath;
use super::query::{self, Query};
use super::watch::{self, Render};
use super::{State, json_response, table};
use crate::sim::error::ApiError;
use crate::sim::json::Lookup as _;
use crate::sim::store::{DeleteOptions, DeleteOutcome};

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Dispatches one resource request.
pub async fn handle(
    state: &State,
    method: Method,
    path: ResourcePath,
    raw_query: Option<&str>,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let kind = path.kind;
    let q = Query::parse(raw_query, kind)?;
    let accept = header_str(headers, header::ACCEPT);
    let as_table = table::wants_table(accept);
    let ns = path.namespace.clone();
    let status_write = path.subresource.as_deref() == Some("status");
    match (method, path.name.as_deref()) {
        (Method::GET, None) if q.watch => {
            state.counters.watch();
            watch::start(state, kind, ns, q, Render { table: as_table })
        }
        (Method::GET, None) => {
            state.counters.list();
            list(state, &path, &q, as_table)
        }
        (Method::GET, Some(name)) => {
            let obj = state.store.get(kind, ns.as_deref(), name)?;
            if as_table {
                let rv = obj
                    .lookup("/metadata/resourceVersion")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                Ok(json_response(
                    StatusCode::OK,
                    &table::table(kind, &[&obj], rv, chrono::Utc::now(), true),
                ))
            } else {
                Ok(json_response(StatusCode::OK, &obj))
            }
        }
        (Method::POST, None) => {
            if kind.namespaced && ns.is_none() {
                return Err(ApiError::method_not_allowed());
            }
            let obj = parse_body(headers, &body)?;
            let created = state.store.create(kind, ns.as_deref(), obj, q.dry_run)?;
            Ok(json_response(StatusCode::CREATED, &created))
        }
        (Method::PUT, Some(name)) => {
            let obj = parse_body(headers, &body)?;
            let name = name.to_string();
            let out = state.store.modify(
                kind,
                ns.as_deref(),
                &name,
                status_write,
                q.dry_run,
                |cur| {
                    // A uid in the body is a precondition of the update (apiserver
                    // rest.DefaultUpdatedObjectInfo.Preconditions, checked by the storage).
                    if let Some(uid) = other_uid(cur, &obj) {
                        return Err(ApiError::conflict(
                            kind,
                            &name,
                            &format!(
                                "Precondition failed: UID in precondition: {uid}, UID in object \
                                 meta: {}",
                                cur.lookup("/metadata/uid")
                                    .and_then(Value::as_str)
                                    .unwrap_or("")
                            ),
                        ));
                    }
                    Ok(obj)
                },
            )?;
            Ok(json_response(StatusCode::OK, &out))
        }
        (Method::PATCH, Some(name)) => {
            let ct = header_str(headers, header::CONTENT_TYPE).unwrap_or("");
            let ptype = PatchType::from_content_type(ct, kind)?;
            let result =
                state
                    .store
                    .modify(kind, ns.as_deref(), name, status_write, q.dry_run, |cur| {
                        let next = patch::apply(kind, name, cur, ptype, &body)?;
                        // A patch has no preconditions; the uid it sets fails the metadata
                        // validation, uid being immutable (apiserver rest.BeforeUpdate ->
                        // ValidateObjectMetaUpdate). Clients bind a patch to one object so.
                        if let Some(uid) = other_uid(cur, &next) {
                            return Err(ApiError::invalid(
                                kind,
                                name,
                                "metadata.uid",
                                format!("Invalid value: \"{uid}\": field is immutable"),
                            ));
                        }
                        Ok(next)
                    });
            match result {
                Ok(out) => Ok(json_response(StatusCode::OK, &out)),
                Err(e) if e.code == 404 && ptype == PatchType::Apply && !status_write => {
                    // Server-side apply creates what does not exist yet.
                    let mut obj = patch::parse_apply_body(&body)?;
                    if obj.lookup("/metadata/name").is_none() {
                        obj["metadata"]["name"] = json!(name);
                    }
                    let created = state.store.create(kind, ns.as_deref(), obj, q.dry_run)?;
                    Ok(json_response(StatusCode::CREATED, &created))
                }
                Err(e) => Err(e),
            }
        }
        (Method::DELETE, Some(name)) => {
            let opts = delete_options(&q, &body)?;
            match state.store.delete(kind, ns.as_deref(), name, &opts)? {
                DeleteOutcome::Deleted(obj) | DeleteOutcome::Marked(obj) => {
                    Ok(json_response(StatusCode::OK, &obj))
                }
            }
        }
        (Method::DELETE, None) => {
            let opts = delete_options(&q, &body)?;
            let (items, _) =
                state
                    .store
                    .list(kind, ns.as_deref(), &q.label_selector, &q.field_selector);
            let mut deleted = Vec::new();
            for item in items {
                let name = item
                    .lookup("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let item_ns = item.lookup("/metadata/namespace").and_then(Value::as_str);
                match state.store.delete(kind, item_ns, name, &opts) {
                    Ok(DeleteOutcome::Deleted(o) | DeleteOutcome::Marked(o)) => {
                        deleted.push((*o).clone())
                    }
                    Err(e) if e.code == 404 => {}
                    Err(e) => return Err(e),
                }
            }
            let rv = state.store.resource_version().to_string();
            Ok(json_response(
                StatusCode::OK,
                &list_body(kind, deleted, &rv, None),
            ))
        }
        _ => Err(ApiError::method_not_allowed()),
    }
}

fn parse_body(headers: &HeaderMap, body: &[u8]) -> Result<Value, ApiError> {
    let ct = header_str(headers, header::CONTENT_TYPE).unwrap_or("application/json");
    let media = ct.split(';').next().unwrap_or("").trim();
    let value = match media {
        "application/json" | "" | "*/*" => serde_json::from_slice::<Value>(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding JSON body: {e}")))?,
        "application/yaml" | "application/x-yaml" => patch::parse_apply_body(body)?,
        super::protobuf::MEDIA_TYPE => super::protobuf::decode(body)?,
        other => return Err(ApiError::unsupported_media_type(other, None)),
    };
    if !value.is_object() {
        return Err(ApiError::bad_request("the body must be a JSON object"));
    }
    Ok(value)
}

fn delete_options(q: &Query, body: &[u8]) -> Result<DeleteOptions, ApiError> {
    let mut opts = DeleteOptions {
        propagation: q.propagation.unwrap_or_default(),
        dry_run: q.dry_run,
        grace_period_seconds: q.grace_period_seconds,
        ..Default::default()
    };
    if body.iter().any(|b| !b.is_ascii_whitespace()) {
        let v: Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding DeleteOptions: {e}")))?;
        if let Some(p) = v.get("propagationPolicy").and_then(Value::as_str) {
            opts.propagation = query::parse_propagation(p)?;
        }
        if let Some(uid) = v.lookup("/preconditions/uid").and_then(Value::as_str) {
            opts.precondition_uid = Some(uid.to_string());
        }
        if let Some(rv) = v
            .lookup("/preconditions/resourceVersion")
            .and_then(Value::as_str)
        {
            opts.precondition_rv = Some(rv.to_string());
        }
        if v.get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|x| x == "All"))
        {
            opts.dry_run = true;
        }
    }
    Ok(opts)
}

fn list_body(
    kind: &crate::sim::kinds::KindInfo,
    items: Vec<Value>,
    rv: &str,
    cont: Option<(String, usize)>,
) -> Value {
    let mut meta = json!({"resourceVersion": rv});
    if let Some((token, remaining)) = cont {
        meta["continue"] = json!(token);
        meta["remainingItemCount"] = json!(remaining);
    }
    json!({"apiVersion": kind.api_version(), "kind": kind.list_kind(), "metadata": meta, "items": items})
}

/// A continue token: the list's resourceVersion and the last key returned.
fn encode_continue(rv: &str, ns: &str, name: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(json!({"rv": rv, "ns": ns, "name": name}).to_string())
}

fn decode_continue(token: &str) -> Result<(String, String, String), ApiError> {
    let bad =
        || ApiError::bad_request("continue key is not valid: encoded continue token is malformed");
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&raw).map_err(|_| bad())?;
    let s = |k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(bad)
    };
    Ok((s("rv")?, s("ns")?, s("name")?))
}

fn list(
    state: &State,
    path: &ResourcePath,
    q: &Query,
    as_table: bool,
) -> Result<Response, ApiError> {
    let kind = path.kind;
    let (items, rv) = state.store.list(
        kind,
        path.namespace.as_deref(),
        &q.label_selector,
        &q.field_selector,
    );
    let mut rv = rv.to_string();
    let key_of = |o: &Value| {
        (
            o.lookup("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            o.lookup("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
        )
    };
    let mut start = 0;
    if let Some(token) = &q.continue_token {
        let (token_rv, ns, name) = decode_continue(token)?;
        rv = token_rv;
        start = items
            .iter()
            .position(|o| key_of(o) > (ns.clone(), name.clone()))
            .unwrap_or(items.len());
    }
    let rest = &items[start..];
    let (page, cont) = match q.limit {
        Some(limit) if rest.len() > limit => {
            let last = key_of(&rest[limit - 1]);
            (
                &rest[..limit],
                Some((encode_continue(&rv, &last.0, &last.1), rest.len() - limit)),
            )
        }
        _ => (rest, None),
    };
    if as_table {
        let refs: Vec<&Value> = page.iter().map(|a| a.as_ref()).collect();
        let mut t = table::table(kind, &refs, &rv, chrono::Utc::now(), true);
        if let Some((token, _)) = cont {
            t["metadata"]["continue"] = json!(token);
        }
        return Ok(json_response(StatusCode::OK, &t));
    }
    let items: Vec<Value> = page.iter().map(|a| (**a).clone()).collect();
    Ok(json_response(
        StatusCode::OK,
        &list_body(kind, items, &rv, cont),
    ))
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        json_response(code, &self.to_status())
    }
}

/// The uid a write names when it is not the stored object's (an empty or absent uid names
/// none: the server keeps the stored one).
fn other_uid(current: &Value, desired: &Value) -> Option<String> {
    let want = desired.lookup("/metadata/uid").and_then(Value::as_str)?;
    let have = current.lookup("/metadata/uid").and_then(Value::as_str);
    (!want.is_empty() && Some(want) != have).then(|| want.to_owned())
}
