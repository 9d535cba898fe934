//! Request bodies in the Kubernetes protobuf encoding, which kubectl's typed clients send
//! (`create deployment|service|secret|configmap|namespace|serviceaccount|role|rolebinding|
//! clusterrole|clusterrolebinding`, `create token`, `auth can-i`, `auth whoami`). A body is a
//! `k8s\0`-prefixed `runtime.Unknown` envelope naming the apiVersion and kind around the
//! object's bytes; the object is read with the message tables of `kinds` into the JSON the
//! rest of the emulator works with, as the API server's Go types would encode it. Responses are
//! always JSON, which kubectl accepts.

mod kinds;

use base64::Engine;
use serde_json::{Map, Value, json};

use crate::status::{ApiError, ApiResult, StatusReason};

const MAGIC: &[u8] = b"k8s\0";

/// How a field's payload becomes JSON.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Kind {
    String,
    /// int32 or int64.
    Int,
    Bool,
    Message(&'static Message),
    /// `metav1.Time`: seconds and nanos, written as RFC 3339 in whole seconds.
    Time,
    /// `intstr.IntOrString`: a number or a string.
    IntOrString,
    /// `metav1.FieldsV1`: raw JSON.
    FieldsV1,
    StringMap,
    /// `map<string, bytes>`, base64 in JSON.
    BytesMap,
    /// `map<string, resource.Quantity>`, the quantities' string forms.
    QuantityMap,
    /// A field the emulator does not decode: refused when it carries a value.
    Unsupported,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Field {
    number: u64,
    name: &'static str,
    kind: Kind,
    repeated: bool,
    /// Held by pointer in Go: sent only when set, so a zero is a value.
    pointer: bool,
}

#[derive(Debug)]
pub(crate) struct Message {
    name: &'static str,
    fields: &'static [Field],
}

/// One field on the wire.
enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

impl Wire<'_> {
    /// Whether a field of unknown type carries nothing: a zero, an empty string, or a message
    /// of such fields (Go sends every struct it holds by value, set or not).
    fn is_empty(&self) -> bool {
        self.is_empty_within(8)
    }

    fn is_empty_within(&self, depth: usize) -> bool {
        match self {
            Wire::Varint(v) => *v == 0,
            Wire::Bytes([]) => true,
            Wire::Bytes(b) => {
                depth > 0
                    && fields(b).all(|f| f.is_ok_and(|(_, inner)| inner.is_empty_within(depth - 1)))
            }
            Wire::Fixed => false,
        }
    }
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

/// The fields of a message in wire order.
fn fields(mut input: &[u8]) -> impl Iterator<Item = ApiResult<(u64, Wire<'_>)>> {
    std::iter::from_fn(move || {
        if input.is_empty() {
            return None;
        }
        let mut next = || -> ApiResult<(u64, Wire<'_>)> {
            let key = varint(&mut input)?;
            let (number, wire) = (key >> 3, key & 7);
            let field = match wire {
                0 => Wire::Varint(varint(&mut input)?),
                2 => {
                    let length = usize::try_from(varint(&mut input)?).map_err(|_| malformed())?;
                    if length > input.len() {
                        return Err(malformed());
                    }
                    let (payload, rest) = input.split_at(length);
                    input = rest;
                    Wire::Bytes(payload)
                }
                1 | 5 => {
                    let width = if wire == 1 { 8 } else { 4 };
                    if width > input.len() {
                        return Err(malformed());
                    }
                    input = &input[width..];
                    Wire::Fixed
                }
                _ => return Err(malformed()),
            };
            Ok((number, field))
        };
        let field = next();
        if field.is_err() {
            input = &[];
        }
        Some(field)
    })
}

fn text(bytes: &[u8]) -> ApiResult<String> {
    String::from_utf8(bytes.to_vec()).map_err(|_| malformed())
}

fn unsupported(message: &Message, number: u64, name: Option<&str>) -> ApiError {
    let field = match name {
        Some(name) => format!("{name} ({}.{number})", message.name),
        None => format!("{}.{number}", message.name),
    };
    ApiError::new(
        StatusReason::UnsupportedMediaType,
        format!(
            "the emulator does not decode the protobuf field {field}; send the object as JSON (kubectl apply -f or create -f)"
        ),
    )
}

/// A map entry: key (1) and value (2).
fn entry(bytes: &[u8]) -> ApiResult<(String, &[u8])> {
    let mut key = String::new();
    let mut value: &[u8] = &[];
    for field in fields(bytes) {
        match field? {
            (1, Wire::Bytes(b)) => key = text(b)?,
            (2, Wire::Bytes(b)) => value = b,
            _ => {}
        }
    }
    Ok((key, value))
}

fn bytes_of<'a>(wire: &Wire<'a>) -> ApiResult<&'a [u8]> {
    match wire {
        Wire::Bytes(b) => Ok(b),
        _ => Err(malformed()),
    }
}

fn int_of(wire: &Wire<'_>) -> ApiResult<i64> {
    match wire {
        // int32 and int64 are sign-extended to 64 bits on the wire.
        Wire::Varint(v) => Ok(*v as i64),
        _ => Err(malformed()),
    }
}

/// A `metav1.Time`, or `None` for the zero time (which Go writes as `null`).
fn time(bytes: &[u8]) -> ApiResult<Option<String>> {
    let mut seconds = 0i64;
    for field in fields(bytes) {
        if let (1, wire) = field? {
            seconds = int_of(&wire)?;
        }
    }
    if seconds == 0 {
        return Ok(None);
    }
    let at = jiff::Timestamp::from_second(seconds).map_err(|_| malformed())?;
    Ok(Some(at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()))
}

fn quantity(bytes: &[u8]) -> ApiResult<Value> {
    let mut value = String::new();
    for field in fields(bytes) {
        if let (1, Wire::Bytes(b)) = field? {
            value = text(b)?;
        }
    }
    Ok(Value::String(value))
}

fn int_or_string(bytes: &[u8]) -> ApiResult<Value> {
    let (mut is_string, mut number, mut string) = (false, 0i64, String::new());
    for field in fields(bytes) {
        match field? {
            (1, wire) => is_string = int_of(&wire)? == 1,
            (2, wire) => number = int_of(&wire)?,
            (3, Wire::Bytes(b)) => string = text(b)?,
            _ => {}
        }
    }
    Ok(if is_string {
        Value::String(string)
    } else {
        json!(number)
    })
}

fn fields_v1(bytes: &[u8]) -> ApiResult<Value> {
    let mut value = json!({});
    for field in fields(bytes) {
        if let (1, Wire::Bytes(raw)) = field? {
            value = serde_json::from_slice(raw).map_err(|_| malformed())?;
        }
    }
    Ok(value)
}

/// A scalar or message value of a field, or `None` when Go would leave it out.
fn single(field: &Field, wire: &Wire<'_>) -> ApiResult<Option<Value>> {
    let keep = |empty: bool| field.pointer || field.repeated || !empty;
    Ok(match field.kind {
        Kind::String => {
            let b = bytes_of(wire)?;
            keep(b.is_empty())
                .then(|| text(b))
                .transpose()?
                .map(Value::String)
        }
        Kind::Int => {
            let v = int_of(wire)?;
            keep(v == 0).then(|| json!(v))
        }
        Kind::Bool => {
            let v = int_of(wire)? != 0;
            keep(!v).then(|| json!(v))
        }
        Kind::Message(message) => Some(Value::Object(decode_message(message, bytes_of(wire)?)?)),
        Kind::Time => time(bytes_of(wire)?)?.map(Value::String),
        Kind::IntOrString => Some(int_or_string(bytes_of(wire)?)?),
        Kind::FieldsV1 => Some(fields_v1(bytes_of(wire)?)?),
        Kind::StringMap | Kind::BytesMap | Kind::QuantityMap | Kind::Unsupported => None,
    })
}

fn decode_message(message: &Message, bytes: &[u8]) -> ApiResult<Map<String, Value>> {
    let mut out = Map::new();
    for item in fields(bytes) {
        let (number, wire) = item?;
        let Some(field) = message.fields.iter().find(|f| f.number == number) else {
            if wire.is_empty() {
                continue;
            }
            return Err(unsupported(message, number, None));
        };
        let map_value = |b: &[u8]| -> ApiResult<Value> {
            Ok(match field.kind {
                Kind::StringMap => Value::String(text(b)?),
                Kind::BytesMap => {
                    Value::String(base64::engine::general_purpose::STANDARD.encode(b))
                }
                _ => quantity(b)?,
            })
        };
        match field.kind {
            Kind::Unsupported if wire.is_empty() => {}
            Kind::Unsupported => return Err(unsupported(message, number, Some(field.name))),
            Kind::StringMap | Kind::BytesMap | Kind::QuantityMap => {
                let (key, value) = entry(bytes_of(&wire)?)?;
                let map = out
                    .entry(field.name)
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Some(map) = map.as_object_mut() {
                    map.insert(key, map_value(value)?);
                }
            }
            // A packed repeated number (proto2 bodies send them unpacked, but both are valid).
            Kind::Int if field.repeated && matches!(wire, Wire::Bytes(_)) => {
                let mut packed = bytes_of(&wire)?;
                while !packed.is_empty() {
                    let v = varint(&mut packed)? as i64;
                    push(&mut out, field.name, json!(v));
                }
            }
            _ if field.repeated => {
                if let Some(value) = single(field, &wire)? {
                    push(&mut out, field.name, value);
                }
            }
            _ => {
                if let Some(value) = single(field, &wire)? {
                    out.insert(field.name.to_owned(), value);
                }
            }
        }
    }
    Ok(out)
}

fn push(out: &mut Map<String, Value>, name: &str, value: Value) {
    let list = out.entry(name).or_insert_with(|| Value::Array(Vec::new()));
    if let Some(items) = list.as_array_mut() {
        items.push(value);
    }
}

/// Decodes a `k8s\0`-prefixed protobuf body into the JSON object it stands for.
pub fn decode(body: &[u8]) -> ApiResult<Value> {
    let envelope = body.strip_prefix(MAGIC).ok_or_else(malformed)?;
    let mut api_version = String::new();
    let mut kind = String::new();
    let mut raw: &[u8] = &[];
    for field in fields(envelope) {
        match field? {
            (1, Wire::Bytes(type_meta)) => {
                for inner in fields(type_meta) {
                    match inner? {
                        (1, Wire::Bytes(b)) => api_version = text(b)?,
                        (2, Wire::Bytes(b)) => kind = text(b)?,
                        _ => {}
                    }
                }
            }
            (2, Wire::Bytes(b)) => raw = b,
            // contentEncoding (3): the API server refuses any but none.
            (3, Wire::Bytes(b)) if !b.is_empty() => {
                return Err(ApiError::new(
                    StatusReason::UnsupportedMediaType,
                    "protobuf bodies with a content encoding are not supported",
                ));
            }
            _ => {}
        }
    }
    let message = kinds::message_for(&api_version, &kind).ok_or_else(|| {
        ApiError::new(
            StatusReason::UnsupportedMediaType,
            format!(
                "the emulator does not decode protobuf bodies of {kind} ({api_version}); send the object as JSON (kubectl apply -f or create -f)"
            ),
        )
    })?;
    let mut object = decode_message(message, raw)?;
    object.insert("apiVersion".into(), json!(api_version));
    object.insert("kind".into(), json!(kind));
    Ok(Value::Object(object))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn length_delimited(number: u8, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![(number << 3) | 2, u8::try_from(payload.len()).unwrap()];
        out.extend_from_slice(payload);
        out
    }

    fn envelope(api_version: &[u8], kind: &[u8], object: &[u8]) -> Vec<u8> {
        let type_meta = [length_delimited(1, api_version), length_delimited(2, kind)].concat();
        [
            MAGIC.to_vec(),
            length_delimited(1, &type_meta),
            length_delimited(2, object),
        ]
        .concat()
    }

    /// A hex dump as kubectl `-v=8` prints request bodies.
    fn from_hex(dump: &str) -> Vec<u8> {
        dump.split_whitespace()
            .map(|b| u8::from_str_radix(b, 16).unwrap())
            .collect()
    }

    #[test]
    fn decodes_a_secret() {
        let meta = [length_delimited(1, b"s1"), length_delimited(3, b"team")].concat();
        let entry = [length_delimited(1, b"a"), length_delimited(2, b"b")].concat();
        let secret = [
            length_delimited(1, &meta),
            length_delimited(2, &entry),
            length_delimited(3, b"Opaque"),
        ]
        .concat();
        let object = decode(&envelope(b"v1", b"Secret", &secret)).unwrap();
        assert_eq!(
            object,
            json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": {"name": "s1", "namespace": "team"}, "data": {"a": "Yg=="}})
        );
    }

    /// What `kubectl create deployment web --image=nginx` (1.33) sends.
    const CREATE_DEPLOYMENT: &str = "
        6b 38 73 00 0a 15 0a 07 61 70 70 73 2f 76 31 12 0a 44 65 70 6c 6f 79 6d 65 6e 74 12 ab 01 0a 1f
        0a 03 77 65 62 12 00 1a 00 22 00 2a 00 32 00 38 00 42 00 5a 0a 0a 03 61 70 70 12 03 77 65 62 12
        7a 08 01 12 0c 0a 0a 0a 03 61 70 70 12 03 77 65 62 1a 60 0a 1c 0a 00 12 00 1a 00 22 00 2a 00 32
        00 38 00 42 00 5a 0a 0a 03 61 70 70 12 03 77 65 62 12 40 12 22 0a 05 6e 67 69 6e 78 12 05 6e 67
        69 6e 78 2a 00 42 00 6a 00 72 00 80 01 00 88 01 00 90 01 00 a2 01 00 1a 00 32 00 42 00 4a 00 52
        00 58 00 60 00 68 00 82 01 00 8a 01 00 9a 01 00 c2 01 00 22 02 0a 00 28 00 38 00 1a 0c 08 00 10
        00 18 00 20 00 28 00 38 00 1a 00 22 00";

    #[test]
    fn decodes_the_deployment_kubectl_creates() {
        let object = decode(&from_hex(CREATE_DEPLOYMENT)).unwrap();
        assert_eq!(
            object,
            json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "labels": {"app": "web"}},
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": {"app": "web"}},
                    "template": {
                        "metadata": {"labels": {"app": "web"}},
                        "spec": {"containers": [{"name": "nginx", "image": "nginx", "resources": {}}]}
                    },
                    "strategy": {}
                },
                "status": {}
            })
        );
    }

    /// What `kubectl create token bot` (1.33) sends.
    const CREATE_TOKEN: &str = "
        6b 38 73 00 0a 28 0a 18 61 75 74 68 65 6e 74 69 63 61 74 69 6f 6e 2e 6b 38 73 2e 69 6f 2f 76 31
        12 0c 54 6f 6b 65 6e 52 65 71 75 65 73 74 12 1a 0a 10 0a 00 12 00 1a 00 22 00 2a 00 32 00 38 00
        42 00 12 00 1a 04 0a 00 12 00 1a 00 22 00";

    #[test]
    fn decodes_the_token_request_kubectl_sends() {
        let object = decode(&from_hex(CREATE_TOKEN)).unwrap();
        assert_eq!(
            object,
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                "metadata": {}, "spec": {}, "status": {}})
        );
    }

    #[test]
    fn pointer_fields_keep_their_zeros_and_others_drop_them() {
        // DeploymentSpec: replicas (pointer) 0, minReadySeconds (plain) 0, paused false.
        let spec = [0x08, 0x00, 0x28, 0x00, 0x38, 0x00];
        let deployment = length_delimited(2, &spec);
        let object = decode(&envelope(b"apps/v1", b"Deployment", &deployment)).unwrap();
        assert_eq!(object["spec"], json!({"replicas": 0}));
        // A negative int32 is sign-extended to ten bytes.
        let negative = [
            0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
        ];
        let object = decode(&envelope(
            b"apps/v1",
            b"Deployment",
            &length_delimited(2, &negative),
        ))
        .unwrap();
        assert_eq!(object["spec"]["replicas"], -1);
    }

    #[test]
    fn fields_it_does_not_decode_are_refused_not_dropped() {
        // PodSpec.affinity (18) with a value, inside a Deployment's template.
        let pod_spec = [0x92, 0x01, 0x04, 0x0a, 0x02, 0x08, 0x01];
        let template = length_delimited(2, &pod_spec);
        let spec = length_delimited(3, &template);
        let error = decode(&envelope(
            b"apps/v1",
            b"Deployment",
            &length_delimited(2, &spec),
        ))
        .unwrap_err();
        assert_eq!(error.code(), 415);
        assert!(
            error.message.contains("affinity (PodSpec.18)"),
            "{}",
            error.message
        );
        // The same field empty, as Go sends unset structs, is nothing, also with empty
        // fields inside.
        let empty = [0x92, 0x01, 0x04, 0x0a, 0x02, 0x12, 0x00];
        let spec = length_delimited(3, &length_delimited(2, &empty));
        assert!(
            decode(&envelope(
                b"apps/v1",
                b"Deployment",
                &length_delimited(2, &spec)
            ))
            .is_ok()
        );
        let error = decode(&envelope(b"batch/v1", b"Job", &[])).unwrap_err();
        assert_eq!(error.code(), 415);
    }

    #[test]
    fn maps_times_quantities_and_int_or_strings_read_like_json() {
        // Container resources.limits {cpu: 500m}, a RollingUpdate maxSurge "25%", a Time.
        let quantity = length_delimited(1, b"500m");
        let limit = [length_delimited(1, b"cpu"), length_delimited(2, &quantity)].concat();
        let resources = length_delimited(1, &limit);
        let container = [length_delimited(1, b"app"), length_delimited(8, &resources)].concat();
        let pod_spec = length_delimited(2, &container);
        let template = length_delimited(2, &pod_spec);
        let surge = [0x08, 0x01, 0x1a, 0x03, b'2', b'5', b'%'];
        let rolling = length_delimited(2, &surge);
        let strategy = length_delimited(2, &rolling);
        let spec = [
            length_delimited(3, &template),
            length_delimited(4, &strategy),
        ]
        .concat();
        // creationTimestamp 2025-01-01T00:00:00Z = 1735689600 s.
        let seconds = [0x08, 0x80, 0x8b, 0xd2, 0xbb, 0x06];
        let meta = length_delimited(8, &seconds);
        let deployment = [length_delimited(1, &meta), length_delimited(2, &spec)].concat();
        let object = decode(&envelope(b"apps/v1", b"Deployment", &deployment)).unwrap();
        assert_eq!(
            object["spec"]["template"]["spec"]["containers"][0]["resources"],
            json!({"limits": {"cpu": "500m"}})
        );
        assert_eq!(
            object["spec"]["strategy"]["rollingUpdate"],
            json!({"maxSurge": "25%"})
        );
        assert_eq!(
            object["metadata"]["creationTimestamp"],
            "2025-01-01T00:00:00Z"
        );
    }

    #[test]
    fn truncated_bodies_are_bad_requests() {
        assert_eq!(decode(b"k8s\0\x0a\x10").unwrap_err().code(), 400);
        assert_eq!(decode(b"nope").unwrap_err().code(), 400);
    }
}
