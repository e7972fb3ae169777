//! Kubernetes Events as netaware posts them (`events.k8s.io/v1`): the
//! extender's on the pods it places, the publisher's on the Nodes a
//! network fault is about. One shape, one limit on the note, one way to
//! post, so that `kubectl describe` and event exporters read them alike.

use std::time::SystemTime;

use serde_json::{Value, json};

/// Longest note the Events API takes.
pub const MAX_NOTE_BYTES: usize = 1024;

/// An Event's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Something people may want to know.
    Normal,
    /// Something that needs someone to look.
    Warning,
}

impl EventType {
    fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// What an Event says and who says it.
#[derive(Debug, Clone, Copy)]
pub struct EventFacts<'a> {
    /// The namespace it is posted in.
    pub namespace: &'a str,
    /// The name of the object it is about: its own name starts with it.
    pub object_name: &'a str,
    /// The object it is about, as an object reference.
    pub regarding: &'a Value,
    /// The reporting controller.
    pub controller: &'a str,
    /// The reporting instance (the pod's name).
    pub instance: &'a str,
    /// What was done.
    pub action: &'a str,
    /// Why, in CamelCase.
    pub reason: &'a str,
    /// Normal or Warning.
    pub kind: EventType,
}

/// The Event object with `note` (cut to [`MAX_NOTE_BYTES`]), at `at`.
pub fn event(facts: &EventFacts<'_>, note: &str, at: SystemTime) -> Value {
    let nanos = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    json!({
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": format!("{}.{nanos:x}", facts.object_name), "namespace": facts.namespace},
        "eventTime": humantime::format_rfc3339_micros(at).to_string(),
        "reportingController": facts.controller,
        "reportingInstance": facts.instance,
        "action": facts.action,
        "reason": facts.reason,
        "type": facts.kind.as_str(),
        "regarding": facts.regarding,
        "note": truncate(note, MAX_NOTE_BYTES),
    })
}

/// `text` cut to at most `max` bytes at a character boundary, with "..."
/// where it was cut.
pub fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max.saturating_sub(3);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

/// Posts the Event `body` (as [`event`] made it).
pub async fn post(client: kube::Client, body: Value) -> Result<(), PostError> {
    let namespace = body["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default")
        .to_owned();
    let object: kube::core::DynamicObject = serde_json::from_value(body)?;
    let resource = kube::discovery::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk("events.k8s.io", "v1", "Event"),
        "events",
    );
    let api: kube::Api<kube::core::DynamicObject> =
        kube::Api::namespaced_with(client, &namespace, &resource);
    api.create(&kube::api::PostParams::default(), &object)
        .await?;
    Ok(())
}

/// Why an Event could not be posted.
#[derive(Debug, thiserror::Error)]
pub enum PostError {
    /// It is not an object (a bug).
    #[error("an Event that does not serialise: {0}")]
    Shape(#[from] serde_json::Error),
    /// The API server refused it.
    #[error("the API server refused the Event: {0}")]
    Api(#[from] kube::Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_is_cut_at_a_character_within_the_limit() {
        let long = truncate(&"é".repeat(2000), MAX_NOTE_BYTES);
        assert!(long.len() <= MAX_NOTE_BYTES && long.ends_with("..."));
        assert_eq!(truncate("short", MAX_NOTE_BYTES), "short");
    }

    #[test]
    fn an_event_carries_what_it_is_about_and_who_says_it() {
        let regarding = json!({"apiVersion": "v1", "kind": "Node", "name": "a1"});
        let facts = EventFacts {
            namespace: "default",
            object_name: "a1",
            regarding: &regarding,
            controller: "c",
            instance: "i",
            action: "Act",
            reason: "Why",
            kind: EventType::Warning,
        };
        let at = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1);
        let event = event(&facts, "note", at);
        assert_eq!(event["metadata"]["name"], "a1.3b9aca00");
        assert_eq!(event["type"], "Warning");
        assert_eq!(event["regarding"], regarding);
        assert_eq!(event["eventTime"], "1970-01-01T00:00:01.000000Z");
    }
}
