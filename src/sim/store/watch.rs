//! Change events: the bounded history that watches replay from a resourceVersion, and the
//! broadcast that fans live changes out to every open watch.

use std::collections::VecDeque;
use std::sync::Arc;

use serde_json::Value;

use crate::sim::json::Lookup as _;
use crate::sim::kinds::KindInfo;
use crate::sim::selector::{FieldSelector, LabelSelector};

/// The watch event types a client sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One committed change.
#[derive(Debug)]
pub struct Event {
    pub rv: u64,
    pub kind: &'static KindInfo,
    pub namespace: Option<String>,
    pub etype: EventType,
    pub object: Arc<Value>,
    /// The object before this change (for MODIFIED), so selector watches can turn a change
    /// that leaves or enters the selection into DELETED or ADDED.
    pub previous: Option<Arc<Value>>,
    /// The object serialised once, shared by every watcher that sends it.
    pub encoded: std::sync::OnceLock<bytes::Bytes>,
    /// When the change was committed (controllers measure their reaction from here).
    pub at: std::time::Instant,
}

impl Event {
    /// The object as JSON bytes, serialised on first use.
    pub fn encoded_object(&self) -> &bytes::Bytes {
        self.encoded.get_or_init(|| {
            bytes::Bytes::from(serde_json::to_vec(&*self.object).unwrap_or_default())
        })
    }
}

/// What a watch with selectors should see of one event, if anything.
pub fn filter_event(
    event: &Event,
    kind: &KindInfo,
    namespace: Option<&str>,
    labels: &LabelSelector,
    fields: &FieldSelector,
) -> Option<EventType> {
    if event.kind != kind {
        return None;
    }
    if let Some(ns) = namespace
        && event.namespace.as_deref() != Some(ns)
    {
        return None;
    }
    let matches = |o: &Value| labels.matches(o.lookup("/metadata/labels")) && fields.matches(o);
    let now = matches(&event.object);
    match event.etype {
        EventType::Modified => {
            let before = event.previous.as_deref().is_some_and(matches);
            match (before, now) {
                (true, true) => Some(EventType::Modified),
                (false, true) => Some(EventType::Added),
                (true, false) => Some(EventType::Deleted),
                (false, false) => None,
            }
        }
        other => now.then_some(other),
    }
}

/// The bounded history of events, oldest first.
#[derive(Debug)]
pub struct History {
    events: VecDeque<Arc<Event>>,
    capacity: usize,
    /// Every event with rv > `compacted` is still in the history.
    compacted: u64,
}

impl History {
    pub fn new(capacity: usize) -> Self {
        Self {
            events: VecDeque::with_capacity(capacity.min(4096)),
            capacity,
            compacted: 0,
        }
    }

    pub fn push(&mut self, event: Arc<Event>) {
        if self.events.len() == self.capacity
            && let Some(old) = self.events.pop_front()
        {
            self.compacted = old.rv;
        }
        self.events.push_back(event);
    }

    /// Drops the history up to `rv`, as etcd compaction does: watches from older
    /// resourceVersions then get 410 Expired.
    pub fn compact(&mut self, rv: u64) {
        while self.events.front().is_some_and(|e| e.rv <= rv) {
            self.events.pop_front();
        }
        self.compacted = self.compacted.max(rv);
    }

    /// The events after `rv`, or `Err(oldest)` when `rv` is older than the history keeps.
    pub fn since(&self, rv: u64) -> Result<Vec<Arc<Event>>, u64> {
        if rv < self.compacted {
            return Err(self.compacted + 1);
        }
        Ok(self.events.iter().filter(|e| e.rv > rv).cloned().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::kinds;
    use serde_json::json;

    fn ev(rv: u64) -> Arc<Event> {
        Arc::new(Event {
            rv,
            kind: kinds::find("", "v1", "pods").unwrap(),
            namespace: Some("n".into()),
            etype: EventType::Added,
            object: Arc::new(json!({"metadata": {"name": "p"}})),
            previous: None,
            encoded: Default::default(),
            at: std::time::Instant::now(),
        })
    }

    #[test]
    fn history_replays_and_expires() {
        let mut h = History::new(3);
        for rv in 1..=5 {
            h.push(ev(rv));
        }
        assert_eq!(
            h.since(2).unwrap().iter().map(|e| e.rv).collect::<Vec<_>>(),
            vec![3, 4, 5]
        );
        assert!(h.since(1).is_err());
        assert!(h.since(5).unwrap().is_empty());
        h.compact(4);
        assert!(h.since(3).is_err());
        assert_eq!(h.since(4).unwrap().len(), 1);
    }

    #[test]
    fn selector_transitions_become_added_and_deleted() {
        let kind = kinds::find("", "v1", "pods").unwrap();
        let sel = LabelSelector::parse("app=x").unwrap();
        let none = FieldSelector::default();
        let make = |prev: Value, now: Value| Event {
            rv: 1,
            kind,
            namespace: Some("n".into()),
            etype: EventType::Modified,
            object: Arc::new(now),
            previous: Some(Arc::new(prev)),
            encoded: Default::default(),
            at: std::time::Instant::now(),
        };
        let with = json!({"metadata": {"labels": {"app": "x"}}});
        let without = json!({"metadata": {"labels": {"app": "y"}}});
        assert_eq!(
            filter_event(
                &make(without.clone(), with.clone()),
                kind,
                None,
                &sel,
                &none
            ),
            Some(EventType::Added)
        );
        assert_eq!(
            filter_event(
                &make(with.clone(), without.clone()),
                kind,
                None,
                &sel,
                &none
            ),
            Some(EventType::Deleted)
        );
        assert_eq!(
            filter_event(
                &make(with.clone(), with.clone()),
                kind,
                Some("n"),
                &sel,
                &none
            ),
            Some(EventType::Modified)
        );
        assert_eq!(
            filter_event(&make(without.clone(), without), kind, None, &sel, &none),
            None
        );
        assert_eq!(
            filter_event(&make(with.clone(), with), kind, Some("other"), &sel, &none),
            None
        );
    }
}
