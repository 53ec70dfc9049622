//! Waiting for something to happen: polls with a timeout that says what was awaited.

use std::{future::Future, time::Duration};

use kube::{Api, Client};

/// Polls `check` every 100 ms until it returns `Some`, or panics after `timeout` with `what`.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    eventually_then_show(timeout, what, String::new, check).await
}

/// [`eventually`], whose timeout's panic ends with what `shown` returns then (the operator
/// module's `eventually_or_show` shows oz's last log lines this way).
pub async fn eventually_then_show<T, F, Fut>(
    timeout: Duration,
    what: &str,
    shown: impl FnOnce() -> String,
    mut check: F,
) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        if tokio::time::Instant::now() > deadline {
            let shown = shown();
            panic!("timed out after {timeout:?} waiting for {what}{shown}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until `name` is gone from `api`, or panics after `timeout` with `what`.
pub async fn wait_until_gone<K>(api: &Api<K>, name: &str, timeout: Duration, what: &str)
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    eventually(timeout, what, || async {
        api.get_opt(name).await.unwrap().is_none().then_some(())
    })
    .await;
}

/// The reasons of the Events about object `name` in `ns`, once one with `reason` is among
/// them (waiting up to `timeout`).
pub async fn event_reasons_once(
    admin: &Client,
    ns: &str,
    name: &str,
    reason: &str,
    timeout: Duration,
) -> Vec<String> {
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(admin.clone(), ns);
    let selector = format!("regarding.name={name}");
    eventually(timeout, &format!("a {reason} event about {name}"), || {
        let (events, selector) = (events.clone(), selector.clone());
        async move {
            let list = events
                .list(&kube::api::ListParams::default().fields(&selector))
                .await
                .ok()?;
            let reasons: Vec<String> = list.items.into_iter().filter_map(|e| e.reason).collect();
            reasons.iter().any(|r| r == reason).then_some(reasons)
        }
    })
    .await
}

/// How long "eventually" waits in these tests: generous, since a loaded 2-core machine may be
/// slow to settle. The properties that matter (revocation lag, no extra access) are asserted
/// strictly and separately.
pub const SETTLE: Duration = Duration::from_secs(90);

/// Returns once the clock has passed `at`: for a test that checks what still holds after a
/// deadline oz moved (an extended grant past its first end), not a wait for something to
/// happen (that is [`eventually`]).
pub async fn sleep_past(at: k8s_openapi::jiff::Timestamp) {
    let left = at.duration_since(k8s_openapi::jiff::Timestamp::now());
    if let Ok(left) = Duration::try_from(left) {
        tokio::time::sleep(left).await;
    }
}
