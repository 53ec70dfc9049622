//! Security: escalation attempts, hostile input, squatted pod names, and templates where access
//! is enforced.

pub mod enforced_templates;
pub mod escalation;
pub mod hostile_input;
pub mod pod_squatting;
