//! Access scheduled ahead: a request's `spec.startAt` asks for its window to start later, for
//! planned work. It may be approved ahead, grants nothing before the start, and its window
//! counts from it. How far ahead is bounded by the template's `maxLeadTime` ([`check_start`]).

use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::{AccessConfig, duration::parse_positive_duration};

/// Checks a new request's `spec.startAt` (`start_at`) at `now` against its template's
/// `maxLeadTime`: a start in the past is taken as "at once"; one further ahead than allowed is
/// refused, naming the field and the bound.
pub fn check_start(
    start_at: Option<Timestamp>,
    now: Timestamp,
    config: &AccessConfig,
) -> Result<(), String> {
    let Some(start_at) = start_at else {
        return Ok(());
    };
    let bound = config.max_lead_time();
    let lead = parse_positive_duration(bound)
        .map_err(|e| format!("spec.accessConfig.maxLeadTime: {}", e.go_message()))?;
    let lead = SignedDuration::from_secs(lead.num_seconds());
    let latest = now.checked_add(lead).unwrap_or(Timestamp::MAX);
    if start_at > latest {
        return Err(format!(
            "spec.startAt: {start_at} is more than the template's maxLeadTime ({bound}) ahead; \
             ask for a start before {latest}, or closer to the time"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(lead: Option<&str>) -> AccessConfig {
        let mut config: AccessConfig =
            serde_json::from_value(serde_json::json!({"allowedGroups": ["devs"]})).unwrap();
        config.max_lead_time = lead.map(str::to_string);
        config
    }

    #[test]
    fn a_start_within_the_lead_time_is_taken_and_one_beyond_is_refused() {
        let now: Timestamp = "2026-11-28T12:00:00Z".parse().unwrap();
        let at = |t: &str| Some(t.parse::<Timestamp>().unwrap());
        assert_eq!(check_start(None, now, &config(None)), Ok(()));
        // The default bound is a day.
        assert_eq!(
            check_start(at("2026-11-29T12:00:00Z"), now, &config(None)),
            Ok(())
        );
        let e = check_start(at("2026-11-29T12:00:01Z"), now, &config(None)).unwrap_err();
        assert!(
            e.starts_with("spec.startAt: ") && e.contains("maxLeadTime (24h)"),
            "{e}"
        );
        // A template's own bound; a start in the past is at once.
        assert_eq!(
            check_start(at("2026-12-05T00:00:00Z"), now, &config(Some("168h"))),
            Ok(())
        );
        assert!(check_start(at("2026-11-28T13:00:01Z"), now, &config(Some("1h"))).is_err());
        assert_eq!(
            check_start(at("2026-11-01T00:00:00Z"), now, &config(Some("1h"))),
            Ok(())
        );
    }
}
