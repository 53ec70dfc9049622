//! oz: just-in-time `kubectl exec` and debug-pod access for Kubernetes, API-compatible with Oz.
//!
//! This crate holds the controllers, builders and binaries; the CRD types and pure logic live in
//! `oz-api`, the admission webhook server in `oz-webhooks`.
#![forbid(unsafe_code)]
