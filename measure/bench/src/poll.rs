//! Waiting for a condition, never for a fixed time.

use std::{
    future::Future,
    time::{Duration, Instant},
};

/// Calls `check` every 100 ms until it returns `Some`, or `None` after `timeout`.
pub async fn poll<T, F, Fut>(timeout: Duration, mut check: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return Some(value);
        }
        if Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
