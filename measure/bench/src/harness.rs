//! What every part of the benchmark shares: the control plane, oz-manager, the clients and the
//! samplers ([`Bench`]).

use std::{
    path::PathBuf,
    time::{Duration, Instant},
};

use kube::Client;
use oz_testenv::ControlPlane;

use crate::{
    Result, cluster, http_client,
    operator::OzManager,
    poll,
    procstat::{Sampler, Window},
    prometheus::PromHistogram,
    sizes::Sizes,
};

/// Everything the parts share.
pub struct Bench {
    /// Declared first, so it is dropped (killed) before the control plane stops.
    pub oz: OzManager,
    pub admin: Client,
    /// alice, in group devs, who asks for access.
    pub alice: Client,
    /// Plain HTTP, for oz-manager's metrics.
    pub http: http_client::HttpClient,
    /// oz-manager's RSS and CPU.
    pub sampler: Sampler,
    /// The control plane's (kube-apiserver and etcd in one process).
    pub apiserver: Sampler,
    /// This process's, the load generator.
    pub own: Sampler,
    pub sizes: Sizes,
    /// The apiserver's audit log, when the calls part runs (only then is auditing on).
    pub audit_log: Option<PathBuf>,
    pub started: Instant,
    pub _plane: ControlPlane,
}

impl Bench {
    /// A progress line on stderr, stamped with the time since the start.
    pub fn progress(&self, message: &str) {
        eprintln!("[{:7.1}s] {message}", self.started.elapsed().as_secs_f64());
    }

    /// Marks the start of a window for all three samplers.
    pub fn mark(&self) -> Instant {
        let at = Instant::now();
        for sampler in [&self.sampler, &self.apiserver, &self.own] {
            sampler.sample();
        }
        at
    }

    /// oz's histogram `name` for ExecAccessRequests, as scraped now.
    pub async fn oz_histogram(&self, name: &str) -> Result<PromHistogram> {
        Ok(self
            .oz
            .scrape(&self.http)
            .await?
            .histogram(name, &[("kind", "ExecAccessRequest")]))
    }

    /// Waits until oz-manager and the control plane have been quiet for 2 s (below 10% and 25%
    /// of a core), so that one measurement's backlog does not spill into the next; gives up
    /// after `timeout`.
    pub async fn settle_down(&self, timeout: Duration) {
        let start = Instant::now();
        loop {
            let mark = self.mark();
            tokio::time::sleep(Duration::from_secs(2)).await;
            let (oz, apiserver) = (self.sampler.window(mark), self.apiserver.window(mark));
            if oz.cpu_percent < 10.0 && apiserver.cpu_percent < 25.0 {
                return;
            }
            if start.elapsed() > timeout {
                self.progress(&format!(
                    "still busy after {timeout:?} (oz {:.0}%, control plane {:.0}%); going on",
                    oz.cpu_percent, apiserver.cpu_percent
                ));
                return;
            }
        }
    }

    /// oz-manager's RSS and CPU over the next idle period.
    pub async fn idle_window(&self) -> Window {
        let mark = self.sampler.mark();
        tokio::time::sleep(self.sizes.idle).await;
        self.sampler.window(mark)
    }

    /// Waits until oz-manager serves metrics and the apiserver calls its mutating webhook
    /// ([`wait_until_admitting`]).
    pub async fn wait_until_admitting(&mut self) -> Result<()> {
        wait_until_admitting(&mut self.oz, &self.http, &self.admin, &self.alice).await
    }
}

/// Waits until `oz` serves metrics and its apiserver calls its mutating webhook: a dry-run
/// create by `alice` naming someone else comes back naming alice (in namespace `bench-ready`,
/// which this creates with a template).
pub async fn wait_until_admitting(
    oz: &mut OzManager,
    http: &http_client::HttpClient,
    admin: &Client,
    alice: &Client,
) -> Result<()> {
    oz.wait_for_metrics(http, Duration::from_secs(60)).await?;
    const NAMESPACE: &str = "bench-ready";
    cluster::create_namespace(admin, NAMESPACE).await?;
    cluster::template(admin, NAMESPACE, "web").await?;
    let admitted = poll(Duration::from_secs(60), || async {
        let requester = cluster::dry_run_requester(alice, NAMESPACE, "web").await?;
        (requester == cluster::REQUESTER).then_some(())
    })
    .await;
    oz.check_running()?;
    admitted.ok_or_else(|| {
        format!(
            "the apiserver did not call oz's webhooks within 60s; oz-manager log {}",
            oz.log.display()
        )
        .into()
    })
}

/// How a freshly started oz-manager caught up, as its request reconcile counter showed.
pub struct CatchUp {
    /// When the counter reached the number of requests.
    pub reconciled_all: Option<Instant>,
    /// When it last moved before standing still for [`CatchUp::QUIET`].
    pub quiet: Option<Instant>,
    pub reconciles: f64,
}

impl CatchUp {
    pub const QUIET: Duration = Duration::from_secs(3);
}

impl Bench {
    /// Follows a freshly started oz-manager's `oz_reconciles_total{controller="request"}` until
    /// it has reached `requests` and then stood still for [`CatchUp::QUIET`].
    pub async fn catch_up(&mut self, requests: usize) -> Result<CatchUp> {
        let give_up =
            Instant::now() + Duration::from_secs(300) + Duration::from_millis(20 * requests as u64);
        let mut caught_up = CatchUp {
            reconciled_all: None,
            quiet: None,
            reconciles: 0.0,
        };
        let mut moved = Instant::now();
        loop {
            let scrape = self.oz.scrape(&self.http).await?;
            let reconciles = scrape.sum("oz_reconciles_total", &[("controller", "request")]);
            let now = Instant::now();
            if reconciles > caught_up.reconciles {
                (caught_up.reconciles, moved) = (reconciles, now);
            }
            if caught_up.reconciled_all.is_none() && reconciles >= requests as f64 {
                caught_up.reconciled_all = Some(now);
            }
            if caught_up.reconciled_all.is_some() && now.duration_since(moved) >= CatchUp::QUIET {
                caught_up.quiet = Some(moved);
                return Ok(caught_up);
            }
            if now > give_up {
                eprintln!("oz-bench: oz-manager's reconcile counter was still moving; giving up");
                return Ok(caught_up);
            }
            self.oz.check_running()?;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}
