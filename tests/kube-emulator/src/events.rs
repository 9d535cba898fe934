//! `events.k8s.io/v1` Events are core Events seen through another API, as in the API server:
//! both are stored as core `v1` Events and converted on the way in and out (fields renamed,
//! none made up), so an event a controller records with the new API shows up in `kubectl
//! describe`. Both are validated as the API server validates them: see `event_validation`.

use serde_json::{Map, Value, json};

/// Field renames between the two APIs: (events.k8s.io/v1, core v1).
const RENAMES: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
    ("deprecatedSource", "source"),
    ("reportingController", "reportingComponent"),
];

fn rename(value: Value, from_new: bool) -> Map<String, Value> {
    let Value::Object(map) = value else {
        return Map::new();
    };
    map.into_iter()
        .map(|(key, field)| {
            let renamed = RENAMES.iter().find_map(|(new, core)| {
                if from_new {
                    (key == *new).then_some(*core)
                } else {
                    (key == *core).then_some(*new)
                }
            });
            (renamed.map_or(key, str::to_owned), field)
        })
        .collect()
}

/// An `events.k8s.io/v1` Event as a core Event.
pub fn to_core(event: Value) -> Value {
    let mut core = rename(event, true);
    core.insert("apiVersion".into(), json!("v1"));
    core.insert("kind".into(), json!("Event"));
    Value::Object(core)
}

/// A core Event as stored: with the fields the API server always writes, since its Go type
/// holds them as values (`null` times, an empty source and reporting strings, an empty
/// `involvedObject`), whichever API wrote it.
pub fn canonical(core: &mut Value) {
    let Some(map) = core.as_object_mut() else {
        return;
    };
    for (field, empty) in [
        ("eventTime", Value::Null),
        ("firstTimestamp", Value::Null),
        ("lastTimestamp", Value::Null),
        ("reportingComponent", json!("")),
        ("reportingInstance", json!("")),
        ("source", json!({})),
        ("involvedObject", json!({})),
    ] {
        map.entry(field).or_insert(empty);
    }
}

/// A core Event as an `events.k8s.io/v1` Event (whose reporting strings are left out when
/// empty).
pub fn from_core(event: Value) -> Value {
    let mut new = rename(event, false);
    for field in ["reportingController", "reportingInstance"] {
        if new.get(field).and_then(Value::as_str) == Some("") {
            new.remove(field);
        }
    }
    new.insert("apiVersion".into(), json!("events.k8s.io/v1"));
    new.insert("kind".into(), json!("Event"));
    Value::Object(new)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversion_round_trips_and_names_core_fields() {
        let new = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"},
            "regarding": {"kind": "Widget", "name": "w"}, "note": "hello", "reason": "Tested",
            "reportingController": "ctrl", "type": "Normal"});
        let core = to_core(new.clone());
        assert_eq!(core["involvedObject"]["name"], "w");
        assert_eq!(core["message"], "hello");
        assert_eq!(core["reportingComponent"], "ctrl");
        // Nothing is made up: the API server fills no deprecated field in.
        assert!(core.get("source").is_none());
        let back = from_core(core);
        assert_eq!(back["regarding"], new["regarding"]);
        assert_eq!(back["note"], "hello");
        assert_eq!(back["apiVersion"], "events.k8s.io/v1");
    }
}
