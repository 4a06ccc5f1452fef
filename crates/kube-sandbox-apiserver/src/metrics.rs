//! Request counts by verb and resource, served at `/metrics` in Prometheus' text format as the
//! real API server names them (`apiserver_request_total{verb, resource}`), so that scale runs
//! can say how many API requests each object cost.

use std::{collections::BTreeMap, fmt::Write as _};

use parking_lot::Mutex;

/// Counts of resource requests. One short lock per request (a map of a few dozen entries).
#[derive(Debug, Default)]
pub struct RequestCounts {
    by: Mutex<BTreeMap<(&'static str, String), u64>>,
}

impl RequestCounts {
    /// Counts one request.
    pub fn count(&self, verb: &'static str, resource: &str) {
        let mut m = self.by.lock();
        match m.get_mut(&(verb, resource.to_string())) {
            Some(n) => *n += 1,
            None => {
                m.insert((verb, resource.to_string()), 1);
            }
        }
    }

    /// Every count, by (verb, resource).
    pub fn snapshot(&self) -> BTreeMap<(&'static str, String), u64> {
        self.by.lock().clone()
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::from(
            "# HELP apiserver_request_total Resource requests served, by verb and resource.\n\
             # TYPE apiserver_request_total counter\n",
        );
        for ((verb, resource), n) in self.snapshot() {
            let _ = writeln!(
                out,
                "apiserver_request_total{{verb=\"{verb}\",resource=\"{resource}\"}} {n}"
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_render_as_prometheus_text() {
        let c = RequestCounts::default();
        c.count("list", "pods");
        c.count("list", "pods");
        c.count("watch", "kuryrports");
        let t = c.render();
        assert!(
            t.contains("apiserver_request_total{verb=\"list\",resource=\"pods\"} 2\n"),
            "{t}"
        );
        assert!(t.contains("verb=\"watch\",resource=\"kuryrports\"} 1"), "{t}");
    }
}
