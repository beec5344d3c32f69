//! Kubernetes Events (events.k8s.io/v1, kube-runtime's [`Recorder`]) on a Kustomization when
//! its class changes: one Event per change, never one per watch event ([`Changes`]).
//!
//! - `reason`: the class in the Events API's CamelCase (`health-check-in-flight` ->
//!   `HealthCheckInFlight`, `healthy` -> `Healthy`);
//! - `note` (the message): unstick's summary, the root cause, a held check's deadline, and
//!   the lever with its command (at most 1 kB, the API's limit);
//! - `type`: Warning for a finding (unstick's `is_finding`: what `kubectl unstick` exits 1 on),
//!   else Normal; `action`: `Diagnose`; `reportingController`: `cluster-loop`;
//!   `reportingInstance`: the pod's name ($POD_NAME, else the host name).
//!
//! A Kustomization first seen healthy gets no Event (nothing changed); first seen in any other
//! class gets one (that is news to whoever reads Events). A return to healthy is one Event.
use std::collections::HashMap;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use unstick::diagnose::{Class, is_finding};
use unstick::report::FleetItem;

/// `reportingController` of every Event.
pub const REPORTING_CONTROLLER: &str = "cluster-loop";

/// The Event `reason` of a class: its kebab-case name in CamelCase.
pub fn reason(class: Class) -> String {
    class
        .as_str()
        .split('-')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// The command that pulls or shows the lever of `item` (`namespace/name`): a stopped
/// controller's own command; for a lever that writes, the `kubectl unstick` run that pulls it
/// and proves it; else none.
pub fn lever_command(item: &FleetItem) -> Option<String> {
    let d = &item.diagnosis;
    if !d.stopped_controllers.is_empty() {
        return Some(
            d.stopped_controllers
                .iter()
                .map(|s| s.command.clone())
                .collect::<Vec<_>>()
                .join("; "),
        );
    }
    let (ns, name) = item.kustomization.split_once('/')?;
    item.lever
        .mutates()
        .then(|| format!("kubectl unstick ks/{name} -n {ns}"))
}

/// The Event's message for `item`: summary; root cause; deadline; lever and command. At most
/// 1024 bytes (cut at a character boundary).
pub fn message(item: &FleetItem) -> String {
    let d = &item.diagnosis;
    let mut parts = vec![item.summary.clone()];
    if let Some(rc) = &item.root_cause {
        parts.push(format!("root cause: {rc}"));
    }
    if let Some(t) = d
        .health_check
        .as_ref()
        .and_then(|h| h.ends_at.or(h.deadline))
    {
        parts.push(format!("deadline: {t}"));
    }
    if item.class != Class::Healthy {
        let lever = match lever_command(item) {
            Some(c) => format!("lever {}: {c}", item.lever),
            None => format!("lever {}: {}", item.lever, item.lever_effect),
        };
        parts.push(lever);
    }
    let mut s = parts.join("; ");
    if s.len() > 1024 {
        let mut end = 1021;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push_str("...");
    }
    s
}

/// The classes last published (or, on a replica that does not lead, last seen), by
/// `namespace/name`: decides which diagnoses are changes.
#[derive(Debug, Default)]
pub struct Changes {
    last: HashMap<String, Class>,
}

impl Changes {
    /// The items of `items` whose class changed since the last call (a Kustomization first
    /// seen healthy is not a change); forgets the Kustomizations no longer listed.
    pub fn changed<'a>(&mut self, items: &'a [FleetItem]) -> Vec<&'a FleetItem> {
        let mut out = Vec::new();
        let mut next = HashMap::with_capacity(items.len());
        for i in items {
            // A run in progress (every interval run, every applied commit) is the normal way
            // between two states, not a state: healthy -> reconciling -> healthy is no change.
            if i.class == Class::Reconciling {
                if let Some(c) = self.last.get(&i.kustomization) {
                    next.insert(i.kustomization.clone(), *c);
                }
                continue;
            }
            match self.last.get(&i.kustomization) {
                Some(c) if *c == i.class => {}
                None if i.class == Class::Healthy => {}
                _ => out.push(i),
            }
            next.insert(i.kustomization.clone(), i.class);
        }
        self.last = next;
        out
    }
}

/// Publishes the Event of `item`'s class on its Kustomization (uid from the object).
/// A fresh [`Recorder`] per Event: its series cache would turn a second change to the same
/// class within six minutes into a count on the first Event, keeping the first message.
pub async fn publish(
    client: &Client,
    reporter: &Reporter,
    item: &FleetItem,
    uid: Option<String>,
) -> Result<(), kube::Error> {
    let (ns, name) = item.kustomization.split_once('/').unwrap_or(("", ""));
    let r = ObjectReference {
        api_version: Some("kustomize.toolkit.fluxcd.io/v1".into()),
        kind: Some("Kustomization".into()),
        namespace: Some(ns.into()),
        name: Some(name.into()),
        uid,
        ..Default::default()
    };
    let ev = Event {
        type_: if is_finding(&item.diagnosis) {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: reason(item.class),
        note: Some(message(item)),
        action: "Diagnose".into(),
        secondary: None,
    };
    Recorder::new(client.clone(), reporter.clone())
        .publish(&ev, &r)
        .await
}

/// Publishes an Event about a lever on `kustomization` (`namespace/name`): `reason`
/// (`LeverPulled`, `LeverProof`), `note`.
pub async fn publish_lever(
    client: &Client,
    reporter: &Reporter,
    kustomization: &str,
    uid: Option<String>,
    warning: bool,
    reason: &str,
    note: String,
) -> Result<(), kube::Error> {
    let (ns, name) = kustomization.split_once('/').unwrap_or(("", ""));
    let r = ObjectReference {
        api_version: Some("kustomize.toolkit.fluxcd.io/v1".into()),
        kind: Some("Kustomization".into()),
        namespace: Some(ns.into()),
        name: Some(name.into()),
        uid,
        ..Default::default()
    };
    let ev = Event {
        type_: if warning {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: reason.into(),
        note: Some(note.chars().take(1000).collect()),
        action: "Lever".into(),
        secondary: None,
    };
    Recorder::new(client.clone(), reporter.clone())
        .publish(&ev, &r)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_the_classes_in_camel_case() {
        assert_eq!(reason(Class::HealthCheckInFlight), "HealthCheckInFlight");
        assert_eq!(reason(Class::Healthy), "Healthy");
        assert_eq!(reason(Class::SourceEventDropped), "SourceEventDropped");
        assert_eq!(reason(Class::NotWatched), "NotWatched");
    }
}
