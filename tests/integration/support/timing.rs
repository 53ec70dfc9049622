//! Tests that measure a strict time bound never run beside a burst that loads both cores.

/// The cores this binary's tests share. Bursts of requests load both cores for seconds; a test
/// that asserts a strict time bound (revocation within a second of expiry) must not measure
/// under one, or it measures this binary's load instead of oz.
static CORES: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// Held while a strict time bound is measured: measurements run alongside each other, never
/// alongside a burst.
pub async fn strict_timing() -> tokio::sync::RwLockReadGuard<'static, ()> {
    CORES.read().await
}

/// Held while a burst loads the machine: no strict time bound is measured meanwhile.
pub async fn heavy_load() -> tokio::sync::RwLockWriteGuard<'static, ()> {
    CORES.write().await
}
