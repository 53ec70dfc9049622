//! oz's API: the four `crds.wizardofoz.co/v1alpha1` kinds, wire-compatible with Oz, and the pure
//! logic around them (durations, the duration decision, access-command rendering).
#![forbid(unsafe_code)]
