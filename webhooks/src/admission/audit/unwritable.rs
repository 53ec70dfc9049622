//! When the audit file cannot take a record: a Warning Event [`UNWRITABLE_REASON`] on the
//! ConfigMap that holds the audit keys, where security teams look for them. The record itself
//! is in the log already ([`oz_audit::AuditLog`] sees to that, and to how often this is told).

use k8s_openapi::api::core::v1::ObjectReference;
use kube::{
    Client,
    runtime::events::{Event, EventType, Recorder, Reporter},
};
use oz_audit::{LogCounters, UnwritableReport};
use std::sync::Arc;
use tracing::warn;

use crate::admission::events::EVENT_REPORTER;

/// The reason of the Warning Event published when the audit file cannot be written.
pub const UNWRITABLE_REASON: &str = "AuditFileUnwritable";

/// `counters`, which also publish an [`UNWRITABLE_REASON`] Event on `object` (the audit keys'
/// ConfigMap) when the file cannot be written.
pub fn report_unwritable_with_events(
    counters: LogCounters,
    client: Client,
    object: ObjectReference,
) -> LogCounters {
    let report: UnwritableReport = Arc::new(move |note: String| {
        let (client, object) = (client.clone(), object.clone());
        tokio::spawn(async move {
            let recorder = Recorder::new(client, Reporter::from(EVENT_REPORTER));
            let event = Event {
                type_: EventType::Warning,
                reason: UNWRITABLE_REASON.into(),
                note: Some(note),
                action: "WriteAuditRecord".into(),
                secondary: None,
            };
            if let Err(e) = recorder.publish(&event, &object).await {
                warn!(error = %e, "could not publish the {UNWRITABLE_REASON} Event");
            }
        });
    });
    LogCounters {
        on_unwritable: Some(report),
        ..counters
    }
}
