//! Watch fan-out by topic: a watcher hears only its resource's events, and — when its selector
//! requires one value of an attribute (a field such as a pod's `spec.nodeName`, a label such as
//! a KuryrPort's `kuryr.openstack.org/nodeName`) — only the events of objects that have or had
//! that value. So a pod event wakes the watchers of pods in general plus the two of its node
//! (the kubelet's and the daemon's), not every watcher of the cluster: O(1) per event per node
//! instead of O(nodes). Each watcher still applies its whole selector (transitions included);
//! a topic only narrows what it is woken for.

use std::{collections::HashMap, sync::Arc};

use serde_json::Value;
use tokio::sync::broadcast;

use crate::{registry::ResKey, store::WatchEvent};

/// Capacity of a resource's channel; a watcher further behind than this is closed.
pub const RESOURCE_CAPACITY: usize = 16 * 1024;
/// Capacity of one attribute value's channel (a node's own pods: far fewer events).
pub const SHARD_CAPACITY: usize = 1024;

/// An attribute events are sharded by.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Attr {
    /// A dotted field path (`spec.nodeName`), read as field selectors read it.
    Field(String),
    /// A label key.
    Label(String),
}

impl Attr {
    /// The attribute's value on `obj` (empty when absent, as field selectors see it).
    fn value_of(&self, obj: &Value) -> String {
        match self {
            Attr::Field(path) => kube_sandbox_machinery::selectors::field_value(obj, path),
            Attr::Label(k) => obj
                .get("metadata")
                .and_then(|m| m.get("labels"))
                .and_then(|l| l.get(k))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        }
    }
}

/// What a watcher listens to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Topic {
    /// The resource.
    pub key: ResKey,
    /// One value of one attribute, or every object of the resource.
    pub shard: Option<(Attr, String)>,
}

/// The channels of the topics someone listens to.
#[derive(Debug, Default)]
pub struct Topics {
    senders: HashMap<Topic, broadcast::Sender<Arc<WatchEvent>>>,
    /// The attributes each resource is sharded by (those some watcher asked for).
    attrs: HashMap<ResKey, Vec<Attr>>,
}

impl Topics {
    /// A receiver of `topic`'s events from now on.
    pub fn subscribe(&mut self, topic: Topic) -> broadcast::Receiver<Arc<WatchEvent>> {
        if let Some((attr, _)) = &topic.shard {
            let attrs = self.attrs.entry(topic.key.clone()).or_default();
            if !attrs.contains(attr) {
                attrs.push(attr.clone());
            }
        }
        let cap = if topic.shard.is_some() {
            SHARD_CAPACITY
        } else {
            RESOURCE_CAPACITY
        };
        self.senders
            .entry(topic)
            .or_insert_with(|| broadcast::channel(cap).0)
            .subscribe()
    }

    /// Sends `ev` to its resource's topic and to the topics of the attribute values its object
    /// has or had. Cost: one lookup per sharding attribute of the resource (one or two).
    pub fn dispatch(&mut self, ev: &Arc<WatchEvent>) {
        let mut gone = Vec::new();
        let mut send = |senders: &HashMap<Topic, broadcast::Sender<Arc<WatchEvent>>>, t: Topic| {
            if let Some(tx) = senders.get(&t) {
                // No receiver left: the topic goes.
                if tx.send(ev.clone()).is_err() {
                    gone.push(t);
                }
            }
        };
        send(
            &self.senders,
            Topic {
                key: ev.key.clone(),
                shard: None,
            },
        );
        for attr in self.attrs.get(&ev.key).into_iter().flatten() {
            let now = attr.value_of(&ev.object);
            let before = ev.prev.as_ref().map(|p| attr.value_of(p));
            let values = std::iter::once(now.clone()).chain(before.filter(|b| *b != now));
            for v in values {
                send(
                    &self.senders,
                    Topic {
                        key: ev.key.clone(),
                        shard: Some((attr.clone(), v)),
                    },
                );
            }
        }
        for t in gone {
            if self.senders.get(&t).is_some_and(|tx| tx.receiver_count() == 0) {
                self.senders.remove(&t);
            }
        }
    }

    /// Topics with a channel (for tests and stats).
    pub fn len(&self) -> usize {
        self.senders.len()
    }

    /// No topic has a channel.
    pub fn is_empty(&self) -> bool {
        self.senders.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::store::{EventType, event_line};

    fn pods() -> ResKey {
        (String::new(), "pods".into())
    }

    fn ev(rv: u64, etype: EventType, node: &str, prev_node: Option<&str>) -> Arc<WatchEvent> {
        let pod =
            |n: &str| Arc::new(json!({"metadata": {"name": "p", "namespace": "d"}, "spec": {"nodeName": n}}));
        let object = pod(node);
        Arc::new(WatchEvent {
            rv,
            key: pods(),
            etype,
            line: event_line(etype.as_str(), &object),
            object,
            prev: prev_node.map(pod),
        })
    }

    #[test]
    fn a_node_hears_its_pods_only_and_every_pod_watcher_hears_all() {
        let mut t = Topics::default();
        let node = |n: &str| Topic {
            key: pods(),
            shard: Some((Attr::Field("spec.nodeName".into()), n.into())),
        };
        let mut n1 = t.subscribe(node("n1"));
        let mut n2 = t.subscribe(node("n2"));
        let mut all = t.subscribe(Topic {
            key: pods(),
            shard: None,
        });
        t.dispatch(&ev(1, EventType::Added, "", None)); // unscheduled
        t.dispatch(&ev(2, EventType::Modified, "n1", Some(""))); // bound to n1
        t.dispatch(&ev(3, EventType::Modified, "n2", Some("n1"))); // moved (both hear it)
        t.dispatch(&ev(4, EventType::Deleted, "n2", None));
        let drain = |rx: &mut broadcast::Receiver<Arc<WatchEvent>>| {
            std::iter::from_fn(|| rx.try_recv().ok())
                .map(|e| e.rv)
                .collect::<Vec<_>>()
        };
        assert_eq!(drain(&mut n1), [2, 3]);
        assert_eq!(drain(&mut n2), [3, 4]);
        assert_eq!(drain(&mut all), [1, 2, 3, 4]);
        // A topic nobody listens to any more goes at its next event.
        drop(n1);
        assert_eq!(t.len(), 3);
        t.dispatch(&ev(5, EventType::Added, "n1", None));
        assert_eq!(t.len(), 2);
    }
}
