//! A structural JSON Schema check, enough for `schemas/report-v1.schema.json`: type,
//! properties, required, additionalProperties, items, enum, const, oneOf, $ref into $defs,
//! minimum, minLength and the date-time format. In golden files a redaction placeholder
//! (`[TIMESTAMP]`, `[DURATION]`, `[UID]`, `[RUN_ID]`) stands for a value of any scalar type.

use serde_json::Value;

const PLACEHOLDERS: [&str; 4] = ["[TIMESTAMP]", "[DURATION]", "[UID]", "[RUN_ID]"];

/// Every violation of `schema` by `value`, as `path: what`.
pub fn validate(schema: &Value, value: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    check(schema, schema, value, "$", &mut errors);
    errors
}

fn resolve<'a>(root: &'a Value, reference: &str) -> &'a Value {
    let name = reference
        .strip_prefix("#/$defs/")
        .unwrap_or_else(|| panic!("only #/$defs/ references are supported: {reference}"));
    root.get("$defs")
        .and_then(|d| d.get(name))
        .unwrap_or_else(|| panic!("unknown $ref {reference}"))
}

fn type_matches(ty: &str, v: &Value) -> bool {
    match ty {
        "null" => v.is_null(),
        "boolean" => v.is_boolean(),
        "string" => v.is_string(),
        "number" => v.is_number(),
        "integer" => v.is_i64() || v.is_u64(),
        "array" => v.is_array(),
        "object" => v.is_object(),
        other => panic!("unknown type {other}"),
    }
}

fn is_placeholder(v: &Value) -> bool {
    v.as_str().is_some_and(|s| PLACEHOLDERS.contains(&s))
}

fn check(root: &Value, schema: &Value, v: &Value, path: &str, errors: &mut Vec<String>) {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        check(root, resolve(root, r), v, path, errors);
        return;
    }
    if let Some(options) = schema.get("oneOf").and_then(Value::as_array) {
        let matching = options
            .iter()
            .filter(|o| {
                let mut e = Vec::new();
                check(root, o, v, path, &mut e);
                e.is_empty()
            })
            .count();
        if matching != 1 {
            errors.push(format!(
                "{path}: matches {matching} of the oneOf alternatives: {v}"
            ));
        }
        return;
    }
    let scalar_placeholder = is_placeholder(v);
    if let Some(ty) = schema.get("type") {
        let types: Vec<&str> = match ty {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => panic!("bad type in schema at {path}"),
        };
        let scalar_allowed = types
            .iter()
            .any(|t| matches!(*t, "string" | "number" | "integer" | "boolean"));
        if !(types.iter().any(|t| type_matches(t, v)) || scalar_placeholder && scalar_allowed) {
            errors.push(format!("{path}: expected {types:?}, found {v}"));
            return;
        }
    }
    if let Some(c) = schema.get("const")
        && c != v
        && !scalar_placeholder
    {
        errors.push(format!("{path}: expected {c}, found {v}"));
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array)
        && !options.contains(v)
    {
        errors.push(format!("{path}: {v} is not one of {options:?}"));
    }
    if let (Some(min), Some(n)) = (schema.get("minimum").and_then(Value::as_f64), v.as_f64())
        && n < min
    {
        errors.push(format!("{path}: {n} < minimum {min}"));
    }
    if let (Some(min), Some(s)) = (schema.get("minLength").and_then(Value::as_u64), v.as_str())
        && (s.chars().count() as u64) < min
    {
        errors.push(format!("{path}: shorter than {min}"));
    }
    if schema.get("format").and_then(Value::as_str) == Some("date-time")
        && let Some(s) = v.as_str()
        && !scalar_placeholder
        && chrono::DateTime::parse_from_rfc3339(s).is_err()
    {
        errors.push(format!("{path}: {s:?} is not an RFC 3339 date-time"));
    }
    if let (Some(items), Some(array)) = (schema.get("items"), v.as_array()) {
        for (i, item) in array.iter().enumerate() {
            check(root, items, item, &format!("{path}[{i}]"), errors);
        }
    }
    if let Some(object) = v.as_object() {
        let props = schema.get("properties").and_then(Value::as_object);
        if let Some(required) = schema.get("required").and_then(Value::as_array) {
            for r in required.iter().filter_map(Value::as_str) {
                if !object.contains_key(r) {
                    errors.push(format!("{path}: missing required `{r}`"));
                }
            }
        }
        for (k, child) in object {
            let child_path = format!("{path}.{k}");
            match props.and_then(|p| p.get(k)) {
                Some(s) => check(root, s, child, &child_path, errors),
                None => match schema.get("additionalProperties") {
                    Some(Value::Bool(false)) => {
                        errors.push(format!("{path}: property `{k}` is not in the schema"))
                    }
                    Some(s @ Value::Object(_)) => check(root, s, child, &child_path, errors),
                    _ => {}
                },
            }
        }
    }
}
