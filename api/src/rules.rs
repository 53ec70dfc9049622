//! The CEL rules and patterns in the CRD schemas, so `kubectl apply` rejects a bad object with a
//! message that names the field and says how to fix it. Oz had none of these; each only rejects
//! manifests that Oz would have accepted and then failed on at reconcile time.

/// RE2 for a positive Go duration without sign: one or more `<number><unit>` groups, such as
/// `90m`, `1h30m`, `1.5h` or `300ms`. `[.]` avoids escaping a backslash through CEL and YAML.
pub const GO_DURATION_RE: &str = "^(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|µs|μs|ms|s|m|h))+$";

/// How a duration field is described in error messages.
pub const GO_DURATION_HINT: &str =
    "a positive Go duration such as 90m, 1h30m or 2h (units: ns, us, ms, s, m, h)";

/// Oz's own pattern for `PodAccessRequest.spec.duration`, kept exactly so the same manifests
/// are accepted and rejected.
pub const OZ_POD_REQUEST_DURATION_PATTERN: &str = "^[0-9]+(s|m|h)$";

/// Longest duration string accepted; it bounds the cost the apiserver estimates for the rules.
pub const DURATION_MAX_LENGTH: u32 = 64;

/// A CEL rule on a duration string field: it must parse and be greater than zero.
pub fn positive_duration_rule() -> String {
    format!("self.matches('{GO_DURATION_RE}') && duration(self) > duration('0s')")
}

/// A CEL rule on a request's optional duration: empty, `0` and any zero duration (`0s`) mean
/// "the template's default", as in Oz; anything else must be a positive duration. Evaluating
/// `duration(self)` also rejects values too large for a Go duration.
pub fn request_duration_rule() -> String {
    format!(
        "self == '' || self == '0' || (self.matches('{GO_DURATION_RE}') && duration(self) >= duration('0s'))"
    )
}

/// A CEL rule on an AccessConfig: the default duration may not exceed the maximum. It only
/// compares values that parse; the fields' own rules report the others.
pub fn default_within_max_rule() -> String {
    format!(
        "!self.defaultDuration.matches('{GO_DURATION_RE}') || !self.maxDuration.matches('{GO_DURATION_RE}') \
         || duration(self.defaultDuration) <= duration(self.maxDuration)"
    )
}

/// apiVersion and kind of a controllerTargetRef must name a workload controller oz understands.
pub const TARGET_PAIR_RULE: &str = "(self.apiVersion == 'apps/v1' && self.kind in ['Deployment', 'DaemonSet', 'StatefulSet']) \
     || (self.apiVersion == 'argoproj.io/v1alpha1' && self.kind == 'Rollout')";

/// RFC 6901 JSON pointer, as RFC 6902 patch paths are: empty, or `/`-separated tokens where `~`
/// appears only as `~0` or `~1`.
pub const JSON_POINTER_RE: &str = "^(/([^/~]|~[01])*)*$";

/// RFC 1123 subdomain, as the names of pods, templates and workload controllers are: lowercase
/// letters, digits, `-` and `.`, starting and ending alphanumeric. A name outside it can never
/// name such an object, and would otherwise reach the API path unescaped (`a/b`, `../x`,
/// `?labelSelector=...`).
pub const DNS_SUBDOMAIN_RE: &str =
    "^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

/// A CEL rule on a field naming an object: it must be an RFC 1123 subdomain.
pub fn object_name_rule() -> String {
    format!("self.matches('{DNS_SUBDOMAIN_RE}')")
}

/// How an object-name field is described in error messages.
pub const OBJECT_NAME_HINT: &str = "the name of an object in this namespace: lowercase letters, digits, '-' and '.', \
     starting and ending with a letter or digit";
