//! Just enough of the Kubernetes protobuf encoding to read the request bodies kubectl sends as
//! protobuf (its typed clients do: `create secret|configmap|namespace|serviceaccount|role|
//! rolebinding|clusterrole|clusterrolebinding`, `auth can-i`, `auth whoami`). Bodies become the
//! JSON the rest of the emulator works with; responses are always JSON, which kubectl accepts.

use base64::Engine;
use serde_json::{Map, Value, json};

use crate::status::{ApiError, ApiResult, StatusReason};

const MAGIC: &[u8] = b"k8s\0";

/// One decoded field: its number and its raw payload.
enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

fn malformed() -> ApiError {
    ApiError::bad_request("the protobuf body is malformed")
}

fn varint(input: &mut &[u8]) -> ApiResult<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = input.split_first().ok_or_else(malformed)?;
        *input = rest;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(malformed())
}

fn fields(mut input: &[u8]) -> ApiResult<Vec<(u64, Field<'_>)>> {
    let mut out = Vec::new();
    while !input.is_empty() {
        let key = varint(&mut input)?;
        let (number, wire) = (key >> 3, key & 7);
        let field = match wire {
            0 => Field::Varint(varint(&mut input)?),
            2 => {
                let length = usize::try_from(varint(&mut input)?).map_err(|_| malformed())?;
                if length > input.len() {
                    return Err(malformed());
                }
                let (payload, rest) = input.split_at(length);
                input = rest;
                Field::Bytes(payload)
            }
            1 | 5 => {
                let width = if wire == 1 { 8 } else { 4 };
                if width > input.len() {
                    return Err(malformed());
                }
                input = &input[width..];
                continue;
            }
            _ => return Err(malformed()),
        };
        out.push((number, field));
    }
    Ok(out)
}

fn text(bytes: &[u8]) -> ApiResult<String> {
    String::from_utf8(bytes.to_vec()).map_err(|_| malformed())
}

/// A protobuf map entry (key = 1, value = 2).
fn map_entry(bytes: &[u8]) -> ApiResult<(String, &[u8])> {
    let mut key = String::new();
    let mut value: &[u8] = &[];
    for (number, field) in fields(bytes)? {
        match (number, field) {
            (1, Field::Bytes(b)) => key = text(b)?,
            (2, Field::Bytes(b)) => value = b,
            _ => {}
        }
    }
    Ok((key, value))
}

fn object_meta(bytes: &[u8]) -> ApiResult<Value> {
    let mut meta = Map::new();
    let mut labels = Map::new();
    let mut annotations = Map::new();
    let mut finalizers = Vec::new();
    for (number, field) in fields(bytes)? {
        let Field::Bytes(b) = field else { continue };
        match number {
            1 => {
                meta.insert("name".into(), json!(text(b)?));
            }
            2 => {
                meta.insert("generateName".into(), json!(text(b)?));
            }
            3 => {
                meta.insert("namespace".into(), json!(text(b)?));
            }
            6 => {
                meta.insert("resourceVersion".into(), json!(text(b)?));
            }
            11 => {
                let (k, v) = map_entry(b)?;
                labels.insert(k, json!(text(v)?));
            }
            12 => {
                let (k, v) = map_entry(b)?;
                annotations.insert(k, json!(text(v)?));
            }
            14 => finalizers.push(json!(text(b)?)),
            _ => {}
        }
    }
    if !labels.is_empty() {
        meta.insert("labels".into(), Value::Object(labels));
    }
    if !annotations.is_empty() {
        meta.insert("annotations".into(), Value::Object(annotations));
    }
    if !finalizers.is_empty() {
        meta.insert("finalizers".into(), Value::Array(finalizers));
    }
    Ok(Value::Object(meta))
}

fn string_map_insert(target: &mut Value, key: &str, bytes: &[u8], base64: bool) -> ApiResult<()> {
    let (k, v) = map_entry(bytes)?;
    let value = if base64 {
        base64::engine::general_purpose::STANDARD.encode(v)
    } else {
        text(v)?
    };
    if !target[key].is_object() {
        target[key] = json!({});
    }
    target[key][k] = json!(value);
    Ok(())
}

fn secret(bytes: &[u8]) -> ApiResult<Value> {
    let mut out = json!({});
    for (number, field) in fields(bytes)? {
        match (number, field) {
            (1, Field::Bytes(b)) => out["metadata"] = object_meta(b)?,
            (2, Field::Bytes(b)) => string_map_insert(&mut out, "data", b, true)?,
            (3, Field::Bytes(b)) => out["type"] = json!(text(b)?),
            (4, Field::Bytes(b)) => string_map_insert(&mut out, "stringData", b, false)?,
            (5, Field::Varint(v)) => out["immutable"] = json!(v != 0),
            _ => {}
        }
    }
    Ok(out)
}

fn config_map(bytes: &[u8]) -> ApiResult<Value> {
    let mut out = json!({});
    for (number, field) in fields(bytes)? {
        match (number, field) {
            (1, Field::Bytes(b)) => out["metadata"] = object_meta(b)?,
            (2, Field::Bytes(b)) => string_map_insert(&mut out, "data", b, false)?,
            (3, Field::Bytes(b)) => string_map_insert(&mut out, "binaryData", b, true)?,
            (4, Field::Varint(v)) => out["immutable"] = json!(v != 0),
            _ => {}
        }
    }
    Ok(out)
}

fn metadata_only(bytes: &[u8]) -> ApiResult<Value> {
    let mut out = json!({});
    for (number, field) in fields(bytes)? {
        if let (1, Field::Bytes(b)) = (number, field) {
            out["metadata"] = object_meta(b)?;
        }
    }
    Ok(out)
}

fn access_review(bytes: &[u8]) -> ApiResult<Value> {
    let mut out = json!({"spec": {}});
    for (number, field) in fields(bytes)? {
        match (number, field) {
            (1, Field::Bytes(b)) => out["metadata"] = object_meta(b)?,
            (2, Field::Bytes(spec)) => {
                for (n, f) in fields(spec)? {
                    let Field::Bytes(b) = f else { continue };
                    match n {
                        1 => {
                            out["spec"]["resourceAttributes"] = attributes(
                                b,
                                &[
                                    "namespace",
                                    "verb",
                                    "group",
                                    "version",
                                    "resource",
                                    "subresource",
                                    "name",
                                ],
                            )?
                        }
                        2 => {
                            out["spec"]["nonResourceAttributes"] = attributes(b, &["path", "verb"])?
                        }
                        // SubjectAccessReview: user (3), groups (4), uid (6).
                        3 => out["spec"]["user"] = json!(text(b)?),
                        4 => {
                            if !out["spec"]["groups"].is_array() {
                                out["spec"]["groups"] = json!([]);
                            }
                            if let Some(groups) = out["spec"]["groups"].as_array_mut() {
                                groups.push(json!(text(b)?));
                            }
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

/// String fields numbered 1.. in order of `names`.
fn attributes(bytes: &[u8], names: &[&str]) -> ApiResult<Value> {
    let mut out = json!({});
    for (number, field) in fields(bytes)? {
        let Field::Bytes(b) = field else { continue };
        if let Some(name) = usize::try_from(number)
            .ok()
            .and_then(|n| n.checked_sub(1))
            .and_then(|i| names.get(i))
        {
            out[*name] = json!(text(b)?);
        }
    }
    Ok(out)
}

/// A message whose fields are all strings or repeated strings, numbered 1.. in `names`
/// order; `repeated` names the list-valued ones.
fn strings_message(bytes: &[u8], names: &[&str], repeated: &[&str]) -> ApiResult<Value> {
    let mut out = json!({});
    for (number, field) in fields(bytes)? {
        let Field::Bytes(b) = field else { continue };
        let index = usize::try_from(number).ok().and_then(|n| n.checked_sub(1));
        let Some(name) = index.and_then(|i| names.get(i)) else {
            continue;
        };
        if repeated.contains(name) {
            if !out[*name].is_array() {
                out[*name] = json!([]);
            }
            if let Some(items) = out[*name].as_array_mut() {
                items.push(json!(text(b)?));
            }
        } else if !b.is_empty() {
            out[*name] = json!(text(b)?);
        }
    }
    Ok(out)
}

/// Role and ClusterRole: metadata (1), rules (2).
fn role(bytes: &[u8]) -> ApiResult<Value> {
    let mut out = json!({"rules": []});
    let names = [
        "verbs",
        "apiGroups",
        "resources",
        "resourceNames",
        "nonResourceURLs",
    ];
    for (number, field) in fields(bytes)? {
        match (number, field) {
            (1, Field::Bytes(b)) => out["metadata"] = object_meta(b)?,
            (2, Field::Bytes(b)) => {
                if let Some(rules) = out["rules"].as_array_mut() {
                    rules.push(strings_message(b, &names, &names)?);
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

/// RoleBinding and ClusterRoleBinding: metadata (1), subjects (2), roleRef (3).
fn binding(bytes: &[u8]) -> ApiResult<Value> {
    let mut out = json!({"subjects": []});
    for (number, field) in fields(bytes)? {
        match (number, field) {
            (1, Field::Bytes(b)) => out["metadata"] = object_meta(b)?,
            (2, Field::Bytes(b)) => {
                let subject = strings_message(b, &["kind", "apiGroup", "name", "namespace"], &[])?;
                if let Some(subjects) = out["subjects"].as_array_mut() {
                    subjects.push(subject);
                }
            }
            (3, Field::Bytes(b)) => {
                out["roleRef"] = strings_message(b, &["apiGroup", "kind", "name"], &[])?
            }
            _ => {}
        }
    }
    Ok(out)
}

/// Decodes a `k8s\0`-prefixed protobuf body of one of the kinds kubectl sends that way.
pub fn decode(body: &[u8]) -> ApiResult<Value> {
    let envelope = body.strip_prefix(MAGIC).ok_or_else(malformed)?;
    let mut api_version = String::new();
    let mut kind = String::new();
    let mut raw: &[u8] = &[];
    for (number, field) in fields(envelope)? {
        match (number, field) {
            (1, Field::Bytes(type_meta)) => {
                for (n, f) in fields(type_meta)? {
                    match (n, f) {
                        (1, Field::Bytes(b)) => api_version = text(b)?,
                        (2, Field::Bytes(b)) => kind = text(b)?,
                        _ => {}
                    }
                }
            }
            (2, Field::Bytes(b)) => raw = b,
            _ => {}
        }
    }
    let mut object = match (api_version.as_str(), kind.as_str()) {
        ("v1", "Secret") => secret(raw)?,
        ("v1", "ConfigMap") => config_map(raw)?,
        ("v1", "Namespace" | "ServiceAccount")
        | ("authentication.k8s.io/v1", "SelfSubjectReview") => metadata_only(raw)?,
        ("rbac.authorization.k8s.io/v1", "Role" | "ClusterRole") => role(raw)?,
        ("rbac.authorization.k8s.io/v1", "RoleBinding" | "ClusterRoleBinding") => binding(raw)?,
        (
            "authorization.k8s.io/v1",
            "SelfSubjectAccessReview" | "SubjectAccessReview" | "LocalSubjectAccessReview",
        ) => access_review(raw)?,
        _ => {
            return Err(ApiError::new(
                StatusReason::UnsupportedMediaType,
                format!("protobuf bodies of {kind} ({api_version}) are not supported; send JSON"),
            ));
        }
    };
    object["apiVersion"] = json!(api_version);
    object["kind"] = json!(kind);
    Ok(object)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn length_delimited(number: u8, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![(number << 3) | 2, u8::try_from(payload.len()).unwrap()];
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn decodes_a_secret_from_kubectl() {
        let meta = [length_delimited(1, b"s1"), length_delimited(3, b"team")].concat();
        let entry = [length_delimited(1, b"a"), length_delimited(2, b"b")].concat();
        let secret = [
            length_delimited(1, &meta),
            length_delimited(2, &entry),
            length_delimited(3, b"Opaque"),
        ]
        .concat();
        let type_meta = [length_delimited(1, b"v1"), length_delimited(2, b"Secret")].concat();
        let body = [
            MAGIC.to_vec(),
            length_delimited(1, &type_meta),
            length_delimited(2, &secret),
        ]
        .concat();
        let object = decode(&body).unwrap();
        assert_eq!(object["metadata"]["name"], "s1");
        assert_eq!(object["metadata"]["namespace"], "team");
        assert_eq!(object["data"]["a"], "Yg==");
        assert_eq!(object["kind"], "Secret");
    }

    #[test]
    fn truncated_bodies_are_bad_requests() {
        assert_eq!(decode(b"k8s\0\x0a\x10").unwrap_err().code(), 400);
        assert_eq!(decode(b"nope").unwrap_err().code(), 400);
    }
}
