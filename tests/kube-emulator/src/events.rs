//! `events.k8s.io/v1` Events are core Events seen through another API, as in the API server:
//! both are stored as core `v1` Events and converted on the way in and out, so an event a
//! controller records with the new API shows up in `kubectl describe`.

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
    if !core.contains_key("source")
        && let Some(controller) = core.get("reportingComponent").cloned()
    {
        core.insert("source".into(), json!({"component": controller}));
    }
    Value::Object(core)
}

/// A core Event as an `events.k8s.io/v1` Event.
pub fn from_core(event: Value) -> Value {
    let mut new = rename(event, false);
    new.insert("apiVersion".into(), json!("events.k8s.io/v1"));
    new.insert("kind".into(), json!("Event"));
    if !new.contains_key("reportingController")
        && let Some(component) = new
            .get("deprecatedSource")
            .and_then(|s| s.get("component"))
            .cloned()
    {
        new.insert("reportingController".into(), component);
    }
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
        assert_eq!(core["source"]["component"], "ctrl");
        let back = from_core(core);
        assert_eq!(back["regarding"], new["regarding"]);
        assert_eq!(back["note"], "hello");
        assert_eq!(back["apiVersion"], "events.k8s.io/v1");
    }
}
