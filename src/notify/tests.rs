use oz_api::AccessKind;

use super::*;

fn notice(uid: &str, kind: NoticeKind) -> Notice {
    Notice {
        kind,
        access: AccessKind::Exec,
        namespace: "payments".into(),
        name: format!("req-{uid}"),
        uid: uid.into(),
        sinks: None,
        requester: "alice".into(),
        template: "t".into(),
        reason: None,
        ticket: None,
        pod: None,
        expires_at: None,
        approvers: vec![],
        message: String::new(),
    }
}

#[test]
fn a_repeat_of_the_same_request_and_kind_is_dropped() {
    let (notifier, mut queue) = Notifier::with_queue(16, NotifyMetrics::default());
    notifier.send(notice("a", NoticeKind::Ready));
    notifier.clone().send(notice("a", NoticeKind::Ready));
    notifier.send(notice("a", NoticeKind::ExpiringSoon));
    notifier.send(notice("b", NoticeKind::Ready));
    notifier.send(notice("a", NoticeKind::Ready));
    let mut got = Vec::new();
    while let Ok(q) = queue.try_recv() {
        got.push((q.notice.uid, q.notice.kind));
    }
    assert_eq!(
        got,
        [
            ("a".to_string(), NoticeKind::Ready),
            ("a".to_string(), NoticeKind::ExpiringSoon),
            ("b".to_string(), NoticeKind::Ready),
        ]
    );
}

#[test]
fn a_full_queue_dead_letters_at_once_and_the_notice_may_be_sent_again() {
    let metrics = NotifyMetrics::default();
    let (notifier, mut queue) = Notifier::with_queue(1, metrics.clone());
    // Nothing drains the queue: send must still return (this test would hang otherwise).
    notifier.send(notice("a", NoticeKind::Ready));
    notifier.send(notice("b", NoticeKind::Ready));
    notifier.send(notice("c", NoticeKind::Ready));
    assert_eq!(metrics.dead_lettered_count("queue_full"), 2);
    assert_eq!(queue.try_recv().unwrap().notice.uid, "a");
    // A dead-lettered notice is not remembered as sent: a later reconcile sends it again.
    notifier.send(notice("b", NoticeKind::Ready));
    assert_eq!(queue.try_recv().unwrap().notice.uid, "b");
    assert_eq!(metrics.dead_lettered_count("queue_full"), 2);
}

/// Delivery through real lanes to sinks served on 127.0.0.1.
mod lanes {
    use std::{
        io::Write,
        sync::{Arc, Mutex},
    };

    use axum::{Router, http::StatusCode, routing::post};
    use oz_api::SinkFormat;

    use super::*;
    use crate::notify::{delivery::Delivery, sinks::Sink};

    /// Captures every log line of oz's, at every level.
    #[derive(Clone, Default)]
    struct Capture(Arc<Mutex<Vec<u8>>>);

    impl Write for Capture {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn fast() -> DeliveryConfig {
        DeliveryConfig {
            post_timeout: Duration::from_secs(5),
            retry_for: Duration::from_millis(300),
            backoff: Backoff {
                initial: Duration::from_millis(20),
                max: Duration::from_millis(50),
            },
            lane_capacity: 8,
            lane_idle: Duration::from_secs(5),
            // The test sinks listen on 127.0.0.1.
            sink_networks: SinkNetworks {
                private: false,
                loopback: true,
            },
        }
    }

    fn delivery(kind: NoticeKind) -> Delivery {
        let n = notice("u1", kind);
        Delivery {
            kind,
            request: "payments/req-u1".into(),
            uid: "u1".into(),
            secret: "payments/sink".into(),
            payload: payload::payload(&n, SinkFormat::CloudEvents, Timestamp::UNIX_EPOCH),
        }
    }

    async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
        for _ in 0..600 {
            if done() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("timed out waiting for {what}");
    }

    #[tokio::test]
    async fn a_dead_letter_names_the_secret_and_never_the_url() {
        let capture = Capture::default();
        let writer = capture.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter("oz=trace")
            .with_writer(move || writer.clone())
            .finish();
        let _guard = tracing::subscriber::set_default(subscriber);

        // A sink that refuses for good (404), and one where nothing listens.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let app = Router::new().fallback(post(|| async { StatusCode::NOT_FOUND }));
        tokio::spawn(async move { axum::serve(listener, app).await });
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let metrics = NotifyMetrics::default();
        let lanes = delivery::Lanes::new(fast(), metrics.clone());
        let refusing = Sink {
            secret: "payments/sink".into(),
            url: format!("http://127.0.0.1:{port}/services/T0/B0/SECRETTOKEN")
                .parse()
                .unwrap(),
            format: SinkFormat::CloudEvents,
        };
        let dead = Sink {
            url: format!("http://127.0.0.1:{closed}/hook/OTHERTOKEN")
                .parse()
                .unwrap(),
            ..refusing.clone()
        };
        lanes.push(&refusing, delivery(NoticeKind::Denied));
        lanes.push(&dead, delivery(NoticeKind::Expired));
        wait_for("both dead letters", || {
            metrics.dead_lettered_count("rejected") == 1
                && metrics.dead_lettered_count("gave_up") == 1
        })
        .await;

        let text = String::from_utf8(capture.0.lock().unwrap().clone()).unwrap();
        let dead_letters: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("notification dead-lettered"))
            .collect();
        assert_eq!(dead_letters.len(), 2, "{text}");
        for line in &dead_letters {
            assert!(line.contains("payments/sink"), "{line}");
            assert!(line.contains("payments/req-u1"), "{line}");
        }
        assert!(text.contains("HTTP 404"), "{text}");
        assert!(text.contains("retrying"), "{text}");
        for secret in ["SECRETTOKEN", "OTHERTOKEN", "/services/", "/hook/"] {
            assert!(!text.contains(secret), "{secret} logged:\n{text}");
        }
        for port in [port, closed] {
            assert!(
                !text.contains(&format!(":{port}")),
                "port {port} logged:\n{text}"
            );
        }
        for error in [
            delivery::PostError::Connect,
            delivery::PostError::Failed,
            delivery::PostError::Status(503),
            delivery::PostError::Timeout(Duration::from_secs(1)),
        ] {
            assert!(!error.to_string().contains("http"), "{error}");
        }
    }

    #[tokio::test]
    async fn a_sink_on_loopback_is_refused_by_address_and_by_name_unless_allowed() {
        // A sink that would take anything, on 127.0.0.1.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let posts = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = posts.clone();
        let app = Router::new().fallback(post(move || {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async { StatusCode::OK }
        }));
        tokio::spawn(async move { axum::serve(listener, app).await });
        let by_address = Sink {
            secret: "payments/sink".into(),
            url: format!("http://127.0.0.1:{port}/").parse().unwrap(),
            format: SinkFormat::CloudEvents,
        };
        // The resolver's check: a name that resolves to loopback.
        let by_name = Sink {
            url: format!("http://localhost:{port}/").parse().unwrap(),
            ..by_address.clone()
        };
        let public_only = DeliveryConfig {
            sink_networks: SinkNetworks::default(),
            ..fast()
        };
        let metrics = NotifyMetrics::default();
        let lanes = delivery::Lanes::new(public_only, metrics.clone());
        lanes.push(&by_address, delivery(NoticeKind::Ready));
        lanes.push(&by_name, delivery(NoticeKind::Ready));
        // Refused for good, at once, not retried until retry_for runs out.
        wait_for("both refusals", || {
            metrics.dead_lettered_count("rejected") == 2
        })
        .await;
        assert_eq!(metrics.dead_lettered_count("gave_up"), 0);
        assert_eq!(posts.load(std::sync::atomic::Ordering::SeqCst), 0);

        // Allowed: delivered.
        let metrics = NotifyMetrics::default();
        let lanes = delivery::Lanes::new(fast(), metrics.clone());
        lanes.push(&by_name, delivery(NoticeKind::Ready));
        wait_for("the delivery", || {
            posts.load(std::sync::atomic::Ordering::SeqCst) == 1
        })
        .await;
    }

    #[tokio::test]
    async fn a_lane_that_stopped_for_idleness_is_started_again_by_its_next_notice() {
        let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let counter = count.clone();
        let app = Router::new().fallback(post(move || async move {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            StatusCode::OK
        }));
        tokio::spawn(async move { axum::serve(listener, app).await });
        let metrics = NotifyMetrics::default();
        let lanes = delivery::Lanes::new(
            DeliveryConfig {
                lane_idle: Duration::from_millis(100),
                ..fast()
            },
            metrics.clone(),
        );
        let sink = Sink {
            secret: "payments/sink".into(),
            url: format!("http://127.0.0.1:{port}/").parse().unwrap(),
            format: SinkFormat::Slack,
        };
        lanes.push(&sink, delivery(NoticeKind::Ready));
        wait_for("the first delivery", || {
            metrics.sent_count(NoticeKind::Ready) == 1
        })
        .await;
        wait_for("the lane to stop", || lanes.running() == 0).await;
        lanes.push(&sink, delivery(NoticeKind::Expired));
        wait_for("the delivery after the restart", || {
            metrics.sent_count(NoticeKind::Expired) == 1
        })
        .await;
        assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 2);
    }
}
