//! `ozctl replay SESSION`: plays a brokered session's recording (asciicast v2, read through
//! oz's aggregated API, `sessions.wizardofoz.co`) on the terminal at the pace it was recorded,
//! or saves it for `asciinema play`. The recording is streamed, line by line, never read whole
//! (it may be as large as oz's cap). The player is pure over the parsed events ([`parse`],
//! [`Pacer`]); only [`run`] talks to the cluster and the terminal.

use std::{io::Write, path::PathBuf, time::Duration};

use clap::Args;
use futures::{AsyncBufRead, AsyncBufReadExt, StreamExt};
use oz_api::{SESSIONS_GROUP, SESSIONS_VERSION};
use serde_json::Value;

use super::{error::CliError, session::Session, terminal_text::printable_line};

/// Pauses longer than this are cut to it when playing, as asciinema's idle limit does.
pub const IDLE_LIMIT: Duration = Duration::from_secs(2);

/// `ozctl replay`.
#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// The session's id, as the request's status.sessions lists it (like 20261123-081500-k3x9qa7m)
    pub session: String,
    /// Play faster (2) or slower (0.5) than recorded
    #[arg(long, default_value_t = 1.0, value_parser = parse_speed)]
    pub speed: f64,
    /// Print all the output at once, without the recorded pauses
    #[arg(long)]
    pub no_wait: bool,
    /// Save the recording to FILE (asciicast v2, for `asciinema play FILE`) instead of playing it
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

fn parse_speed(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(speed) if speed.is_finite() && speed > 0.0 => Ok(speed),
        _ => Err(format!(
            "{text:?} is not a positive number (1 plays as recorded, 2 twice as fast)"
        )),
    }
}

/// A parsed recording: its header and its events.
#[derive(Debug, Clone, PartialEq)]
pub struct Cast {
    /// The header object (asciicast's keys, and oz's under `"oz"`).
    pub header: Value,
    /// The events, in order.
    pub events: Vec<Event>,
}

/// One event: `[time, code, data]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Seconds since the session started.
    pub time: f64,
    /// `o` output, `i` input, `r` resize, `m` marker.
    pub code: String,
    /// The text.
    pub data: String,
}

/// Parses an asciicast v2 file; a line that is not an event is an error naming its number.
pub fn parse(text: &str) -> Result<Cast, String> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let (_, first) = lines.next().ok_or("the recording is empty")?;
    let header = parse_header(first)?;
    let events = lines
        .map(|(n, line)| parse_event(line, n + 1))
        .collect::<Result<_, _>>()?;
    Ok(Cast { header, events })
}

/// The header line: an asciicast v2 header object.
pub fn parse_header(line: &str) -> Result<Value, String> {
    let header: Value =
        serde_json::from_str(line).map_err(|e| format!("line 1 is not a header: {e}"))?;
    if header.get("version").and_then(Value::as_u64) != Some(2) {
        return Err("it is not an asciicast v2 recording".into());
    }
    Ok(header)
}

/// Event line number `n`.
pub fn parse_event(line: &str, n: usize) -> Result<Event, String> {
    serde_json::from_str::<(f64, String, String)>(line)
        .map(|(time, code, data)| Event { time, code, data })
        .map_err(|e| format!("line {n} is not an event: {e}"))
}

/// Paces output events as they come: each after the recorded time since the one before (any
/// pause cut to [`IDLE_LIMIT`]) divided by `speed`; no waits with `no_wait`.
#[derive(Debug)]
pub struct Pacer {
    speed: f64,
    no_wait: bool,
    previous: f64,
    waited: f64,
}

impl Pacer {
    pub fn new(speed: f64, no_wait: bool) -> Self {
        Self {
            speed,
            no_wait,
            previous: 0.0,
            waited: 0.0,
        }
    }

    /// For an output event, how long to wait before printing it; `None` for other events
    /// (whose time still counts).
    pub fn next(&mut self, event: &Event) -> Option<Duration> {
        let gap = (event.time - self.previous).clamp(0.0, IDLE_LIMIT.as_secs_f64());
        self.previous = self.previous.max(event.time);
        self.waited += gap;
        if event.code != "o" {
            return None;
        }
        let wait = if self.no_wait {
            0.0
        } else {
            self.waited / self.speed
        };
        self.waited = 0.0;
        Some(Duration::from_secs_f64(wait))
    }
}

/// What to print and how long to wait before it, for a whole recording (see [`Pacer`]).
pub fn schedule(events: &[Event], speed: f64, no_wait: bool) -> Vec<(Duration, &str)> {
    let mut pacer = Pacer::new(speed, no_wait);
    events
        .iter()
        .filter_map(|event| pacer.next(event).map(|wait| (wait, event.data.as_str())))
        .collect()
}

/// The reason of an `end: <reason>` marker.
fn end_reason(event: &Event) -> Option<&str> {
    (event.code == "m")
        .then_some(event.data.strip_prefix("end: "))
        .flatten()
}

/// One line about the recording for stderr: whose session it was and how it ended.
pub fn summary(cast: &Cast) -> String {
    let end = cast.events.iter().rev().find_map(end_reason);
    summary_of(&cast.header, end)
}

/// [`summary`] from the header and the end marker's reason, if there was one.
fn summary_of(header: &Value, end: Option<&str>) -> String {
    let oz = &header["oz"];
    let title = header["title"].as_str().unwrap_or("a session");
    let user = oz["user"].as_str().unwrap_or("someone");
    match end {
        Some(reason) => format!("{title} by {user}: ended ({reason})"),
        None => format!(
            "{title} by {user}: no end recorded (still open, or oz stopped before it ended)"
        ),
    }
}

/// Runs `ozctl replay`.
pub async fn run(session: &Session, args: ReplayArgs) -> Result<(), CliError> {
    let body = fetch(session, &args.session).await?;
    if let Some(path) = &args.output {
        let saved = |e: std::io::Error| CliError::Output(format!("{}: {e}", path.display()));
        let file = std::fs::File::create(path).map_err(saved)?;
        futures::io::copy_buf(body, &mut futures::io::AllowStdIo::new(file))
            .await
            .map_err(saved)?;
        eprintln!(
            "saved session {} to {}; play it with: asciinema play {}",
            args.session,
            path.display(),
            path.display()
        );
        return Ok(());
    }
    let unplayable = |e: String| {
        CliError::Api(format!(
            "the recording of session {} cannot be played: {e}; save it with --output FILE to look at it",
            args.session
        ))
    };
    let unreadable = |e: std::io::Error| {
        CliError::Api(format!(
            "the recording of session {} could not be read to its end: {e}",
            args.session
        ))
    };
    let mut lines = body
        .lines()
        .enumerate()
        .filter(|(_, line)| std::future::ready(!matches!(line, Ok(l) if l.trim().is_empty())));
    let header = match lines.next().await {
        None => return Err(unplayable("the recording is empty".into())),
        Some((_, line)) => parse_header(&line.map_err(unreadable)?).map_err(unplayable)?,
    };
    let mut pacer = Pacer::new(args.speed, args.no_wait);
    let mut end = None;
    let mut stdout = std::io::stdout();
    while let Some((n, line)) = lines.next().await {
        let event = parse_event(&line.map_err(unreadable)?, n + 1).map_err(unplayable)?;
        if let Some(reason) = end_reason(&event) {
            end = Some(reason.to_owned());
        }
        let Some(wait) = pacer.next(&event) else {
            continue;
        };
        if !wait.is_zero() {
            stdout.flush()?;
            tokio::time::sleep(wait).await;
        }
        stdout.write_all(event.data.as_bytes())?;
    }
    stdout.flush()?;
    // The recording itself is what the pod printed, as kubectl exec would show it; its title
    // (the command) and user are shown escaped.
    eprintln!(
        "\r\nreplayed {}",
        printable_line(&summary_of(&header, end.as_deref()))
    );
    Ok(())
}

/// GETs the recording through the aggregated API, as a stream of its bytes.
async fn fetch(session: &Session, id: &str) -> Result<impl AsyncBufRead + Unpin + use<>, CliError> {
    let path = format!(
        "/apis/{SESSIONS_GROUP}/{SESSIONS_VERSION}/namespaces/{}/recordings/{id}",
        session.namespace
    );
    let request = http::Request::get(path)
        .header(
            http::header::ACCEPT,
            "application/x-asciicast, application/json",
        )
        .body(Vec::new())
        .map_err(|e| CliError::Api(e.to_string()))?;
    session
        .client
        .request_stream(request)
        .await
        .map(Box::pin)
        .map_err(|error| match &error {
            kube::Error::Api(status) if status.code == 403 => CliError::Forbidden {
                message: format!(
                    "you may not read the recording of session {id} in namespace {} ({}): ask for get on recordings in {SESSIONS_GROUP}",
                    session.namespace, status.message
                ),
            },
            kube::Error::Api(status) if status.code == 404 => CliError::Api(format!(
                "no recording of session {id} in namespace {}: check the id in the request's status.sessions and the namespace (-n), or oz's sessions API is not installed",
                session.namespace
            )),
            kube::Error::Api(status) if status.code == 400 => CliError::Usage(format!(
                "{id:?} is not a session id: they look like 20261123-081500-k3x9qa7m (the request's status.sessions lists them)"
            )),
            kube::Error::Api(status) if status.code == 503 => CliError::Api(format!(
                "oz's sessions API is unavailable ({}); is oz-manager running with the sessions controller?",
                status.message
            )),
            _ => CliError::from_kube(error, &session.server),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAST: &str = concat!(
        r#"{"version":2,"width":80,"height":24,"timestamp":1795421700,"title":"team/web-0 sh","oz":{"user":"alice"}}"#,
        "\n",
        "[0.500000, \"o\", \"$ \"]\n",
        "[1.000000, \"i\", \"ls\\r\"]\n",
        "[1.250000, \"o\", \"ls\\r\\n\"]\n",
        "[1.250000, \"r\", \"100x30\"]\n",
        "[31.250000, \"o\", \"caf\\u00e9 \\u001b[0m\"]\n",
        "[31.500000, \"m\", \"end: expired\"]\n",
    );

    #[test]
    fn parses_a_recording_and_refuses_what_is_not_one() {
        let cast = parse(CAST).unwrap();
        assert_eq!(cast.events.len(), 6);
        assert_eq!(cast.events[4].data, "café \u{1b}[0m");
        assert_eq!(cast.events[3].code, "r");
        assert!(parse("").unwrap_err().contains("empty"));
        assert!(parse("{\"version\":1}").unwrap_err().contains("v2"));
        assert!(
            parse(&format!("{CAST}[1, \"o\"]\n"))
                .unwrap_err()
                .contains("line 8")
        );
    }

    #[test]
    fn plays_output_at_its_pace_with_idle_gaps_cut_to_two_seconds() {
        let cast = parse(CAST).unwrap();
        let ms = |plan: Vec<(Duration, &str)>| -> Vec<(u128, String)> {
            plan.into_iter()
                .map(|(d, s)| (d.as_millis(), s.to_owned()))
                .collect()
        };
        assert_eq!(
            ms(schedule(&cast.events, 1.0, false)),
            vec![
                (500, "$ ".into()),
                // Input and resize events are not printed; their time still counts.
                (750, "ls\r\n".into()),
                // 30 s idle, cut to 2 s.
                (2000, "café \u{1b}[0m".into()),
            ]
        );
        assert_eq!(
            ms(schedule(&cast.events, 2.0, false))
                .iter()
                .map(|(d, _)| *d)
                .collect::<Vec<_>>(),
            vec![250, 375, 1000]
        );
        assert!(
            schedule(&cast.events, 1.0, true)
                .iter()
                .all(|(d, _)| d.is_zero())
        );
    }

    #[test]
    fn the_summary_says_how_the_session_ended() {
        let cast = parse(CAST).unwrap();
        assert_eq!(summary(&cast), "team/web-0 sh by alice: ended (expired)");
        let open = parse(CAST.rsplit_once("[31.5").unwrap().0).unwrap();
        assert!(
            summary(&open).contains("no end recorded"),
            "{}",
            summary(&open)
        );
        assert!(parse_speed("0").is_err());
        assert!(parse_speed("NaN").is_err());
        assert_eq!(parse_speed("1.5"), Ok(1.5));
    }
}
