//! Which sinks hear about a request: the Secrets its template names, plus its namespace's
//! `oz-notifications`. The namespace's is read from a watch of that one name
//! ([`super::namespace_sinks`]); a template's are read with `get` (oz may read no Secret by
//! any other name unless its owner grants it that one name), and each answer, a missing Secret
//! included, is kept for a short time, so a Secret costs one GET per TTL, not one per notice.
//! The namespace's is looked up the same way while its watch has not listed.

use std::{
    collections::{HashMap, HashSet},
    fmt,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use http::Uri;
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client, ResourceExt};
use oz_api::{
    SinkFormat,
    notifications::{NAMESPACE_SINK_SECRET, SINK_FORMAT_KEY, SINK_LABEL, SINK_URL_KEY},
};

use super::{
    Notice, NotifyMetrics,
    namespace_sinks::{NamespaceSinks, Watched},
};

/// Past this many cached answers, expired ones are dropped.
const CACHE_PRUNE_AT: usize = 4096;

/// A sink: where to POST and in which format. Its URL is a credential: `Debug` names the
/// Secret it came from, never the URL.
#[derive(Clone, PartialEq, Eq)]
pub struct Sink {
    /// `namespace/name` of the Secret that defines it: how logs name the sink.
    pub secret: String,
    pub url: Uri,
    pub format: SinkFormat,
}

impl fmt::Debug for Sink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sink")
            .field("secret", &self.secret)
            .field("format", &self.format)
            .finish_non_exhaustive()
    }
}

/// A Secret oz will not use as a sink, and why (never its value).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// `namespace/name` of the Secret.
    pub secret: String,
    pub why: String,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Secret {} is not a notification sink: {}",
            self.secret, self.why
        )
    }
}

/// What a Secret says about a sink.
#[derive(Clone, Debug)]
enum Lookup {
    Sink(Arc<Sink>),
    /// Missing, or oz may not read it.
    Absent,
    Refused(Refusal),
}

/// Reads sink Secrets, with a per-Secret cache.
pub struct SinkResolver {
    client: Client,
    ttl: Duration,
    metrics: NotifyMetrics,
    namespace_sinks: NamespaceSinks,
    cache: Mutex<HashMap<(String, String), (Instant, Lookup)>>,
    /// Template-named Secrets already reported missing or unreadable: reported once, not per
    /// notice, until they are found again.
    reported: Mutex<HashSet<(String, String)>>,
}

impl SinkResolver {
    pub fn new(
        client: Client,
        ttl: Duration,
        metrics: NotifyMetrics,
        namespace_sinks: NamespaceSinks,
    ) -> Self {
        Self {
            client,
            ttl,
            metrics,
            namespace_sinks,
            cache: Mutex::default(),
            reported: Mutex::default(),
        }
    }

    /// The sinks `notice` goes to, in order (the template's, then the namespace's), each Secret
    /// once; and the Secrets named that oz refuses to use.
    pub async fn sinks_for(&self, notice: &Notice) -> (Vec<Arc<Sink>>, Vec<Refusal>) {
        let mut names: Vec<(&str, bool)> = notice
            .sinks
            .iter()
            .flat_map(|config| config.secret_refs.iter())
            .map(|r| (r.name.as_str(), true))
            .collect();
        names.push((NAMESPACE_SINK_SECRET, false));
        let mut seen = HashSet::new();
        let (mut sinks, mut refusals) = (Vec::new(), Vec::new());
        for (name, named_by_template) in names {
            if !seen.insert(name) {
                continue;
            }
            match self
                .lookup(&notice.namespace, name, named_by_template)
                .await
            {
                Lookup::Sink(sink) => sinks.push(sink),
                Lookup::Refused(refusal) => refusals.push(refusal),
                Lookup::Absent => {}
            }
        }
        (sinks, refusals)
    }

    async fn lookup(&self, namespace: &str, name: &str, named_by_template: bool) -> Lookup {
        let key = (namespace.to_string(), name.to_string());
        if name == NAMESPACE_SINK_SECRET {
            match self.namespace_sinks.get(namespace).await {
                Watched::Found(secret) => return self.read(&key, named_by_template, Some(&secret)),
                Watched::Missing => return self.read(&key, named_by_template, None),
                Watched::Unknown => {}
            }
        }
        if let Some((at, lookup)) = self.cache.lock().expect("not poisoned").get(&key)
            && at.elapsed() < self.ttl
        {
            return lookup.clone();
        }
        let api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        self.metrics.sink_lookups.inc();
        let lookup = match api.get_opt(name).await {
            Ok(secret) => self.read(&key, named_by_template, secret.as_ref()),
            Err(kube::Error::Api(status)) if status.code == 403 => {
                self.report_once(&key, named_by_template, "oz may not get it");
                Lookup::Absent
            }
            Err(error) => {
                // A blip of the apiserver: not cached, the next notice asks again.
                tracing::warn!(target: "oz::notify", namespace, secret = name, %error, "cannot read a notification sink Secret");
                return Lookup::Absent;
            }
        };
        let mut cache = self.cache.lock().expect("not poisoned");
        if cache.len() >= CACHE_PRUNE_AT {
            let ttl = self.ttl;
            cache.retain(|_, (at, _)| at.elapsed() < ttl);
        }
        cache.insert(key, (Instant::now(), lookup.clone()));
        lookup
    }

    /// What `secret`, read from the watch or the apiserver, says; `None`: it does not exist.
    fn read(
        &self,
        key: &(String, String),
        named_by_template: bool,
        secret: Option<&Secret>,
    ) -> Lookup {
        match secret {
            Some(secret) => {
                self.reported.lock().expect("not poisoned").remove(key);
                sink_of(secret)
            }
            None => {
                self.report_once(key, named_by_template, "does not exist");
                Lookup::Absent
            }
        }
    }

    /// The namespace's own `oz-notifications` is optional, so its absence is only debug news;
    /// a Secret a template names and oz cannot read is a misconfiguration, warned about once.
    fn report_once(&self, key: &(String, String), named_by_template: bool, what: &str) {
        if !named_by_template {
            tracing::debug!(target: "oz::notify", namespace = key.0, secret = key.1, "no namespace notification sink: the Secret {what}");
            return;
        }
        if self
            .reported
            .lock()
            .expect("not poisoned")
            .insert(key.clone())
        {
            tracing::warn!(target: "oz::notify", namespace = key.0, secret = key.1, "a template's notification sink Secret {what}: its notices go nowhere");
        }
    }
}

/// The sink a Secret defines, or why it defines none. Only a Secret labelled as a sink is
/// used: otherwise anyone who may write a template could have oz POST any Secret's value.
fn sink_of(secret: &Secret) -> Lookup {
    let refuse = |why: String| {
        Lookup::Refused(Refusal {
            secret: format!(
                "{}/{}",
                secret.namespace().unwrap_or_default(),
                secret.name_any()
            ),
            why,
        })
    };
    if secret.labels().get(SINK_LABEL).map(String::as_str) != Some("true") {
        return refuse(format!("it lacks the label {SINK_LABEL}: \"true\""));
    }
    let data = secret.data.as_ref();
    let value = |key: &str| {
        data.and_then(|d| d.get(key))
            .map(|v| String::from_utf8_lossy(&v.0).trim().to_string())
    };
    let Some(url) = value(SINK_URL_KEY) else {
        return refuse(format!("it has no key {SINK_URL_KEY:?}"));
    };
    let url = match url.parse::<Uri>() {
        Ok(url)
            if matches!(url.scheme_str(), Some("http" | "https")) && url.authority().is_some() =>
        {
            url
        }
        _ => return refuse(format!("its {SINK_URL_KEY:?} is not an http(s) URL")),
    };
    let format = match value(SINK_FORMAT_KEY).as_deref() {
        None | Some("") => SinkFormat::CloudEvents,
        Some(f) if f.eq_ignore_ascii_case("cloudevents") => SinkFormat::CloudEvents,
        Some(f) if f.eq_ignore_ascii_case("slack") => SinkFormat::Slack,
        Some(_) => {
            return refuse(format!(
                "its {SINK_FORMAT_KEY:?} must be CloudEvents or Slack"
            ));
        }
    };
    Lookup::Sink(Arc::new(Sink {
        secret: format!(
            "{}/{}",
            secret.namespace().unwrap_or_default(),
            secret.name_any()
        ),
        url,
        format,
    }))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;
    use kube::api::ObjectMeta;

    use super::*;

    const URL: &str = "https://hooks.slack.com/services/T000/B000/SECRETTOKEN";

    fn secret(labelled: bool, data: &[(&str, &str)]) -> Secret {
        Secret {
            metadata: ObjectMeta {
                name: Some("sink".into()),
                namespace: Some("payments".into()),
                labels: labelled.then(|| BTreeMap::from([(SINK_LABEL.into(), "true".into())])),
                ..Default::default()
            },
            data: Some(
                data.iter()
                    .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                    .collect(),
            ),
            ..Default::default()
        }
    }

    #[test]
    fn a_labelled_secret_with_a_url_is_a_sink_in_its_format() {
        let Lookup::Sink(sink) = sink_of(&secret(true, &[("url", URL), ("format", "Slack")]))
        else {
            panic!("not a sink")
        };
        assert_eq!(sink.url.to_string(), URL);
        assert_eq!(sink.format, SinkFormat::Slack);
        assert_eq!(sink.secret, "payments/sink");
        let Lookup::Sink(sink) = sink_of(&secret(true, &[("url", "http://sink.ops:8080/")])) else {
            panic!("not a sink")
        };
        assert_eq!(sink.format, SinkFormat::CloudEvents);
    }

    #[test]
    fn an_unlabelled_or_malformed_secret_is_refused_without_its_value() {
        for (s, why) in [
            (secret(false, &[("url", URL)]), "lacks the label"),
            (secret(true, &[]), "no key"),
            (
                secret(true, &[("url", "ftp://x/SECRETTOKEN")]),
                "not an http(s) URL",
            ),
            (
                secret(true, &[("url", URL), ("format", "Teams")]),
                "CloudEvents or Slack",
            ),
        ] {
            let Lookup::Refused(refusal) = sink_of(&s) else {
                panic!("{why}: used")
            };
            let text = refusal.to_string();
            assert!(text.contains(why), "{text}");
            assert!(text.contains("payments/sink"), "{text}");
            assert!(!text.contains("SECRETTOKEN"), "{text}");
        }
    }

    #[test]
    fn a_sink_debug_names_its_secret_never_its_url() {
        let Lookup::Sink(sink) = sink_of(&secret(true, &[("url", URL)])) else {
            panic!("not a sink")
        };
        let text = format!("{sink:?}");
        assert!(text.contains("payments/sink"), "{text}");
        assert!(
            !text.contains("SECRETTOKEN") && !text.contains("hooks.slack"),
            "{text}"
        );
    }
}
