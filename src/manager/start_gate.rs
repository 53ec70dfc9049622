//! The order of oz-manager's start-up LISTs. After a restart, a grant's expiry is exact again
//! once its request's page of the request controller's LIST has armed its timer; everything
//! else that lists every request or every grant waits for those LISTs rather than sharing the
//! apiserver and oz's cores with them: the grants' Roles and RoleBindings (in
//! the request controller's wiring) and the webhooks' request cache (here). A replica that does
//! not lead runs no controller, so its webhooks do not wait.

use std::sync::Arc;

use tokio::sync::watch;

use super::leader::Leading;

/// How many request controllers have listed their requests at least once, shared by all of
/// them through the shared `Context`.
#[derive(Clone, Debug)]
pub struct RequestLists {
    listed: Arc<watch::Sender<usize>>,
}

impl Default for RequestLists {
    fn default() -> Self {
        Self {
            listed: Arc::new(watch::channel(0).0),
        }
    }
}

impl RequestLists {
    /// A request controller's first LIST is in. Each calls this once per run.
    pub fn listed(&self) {
        self.listed.send_modify(|listed| *listed += 1);
    }

    fn count(&self) -> watch::Receiver<usize> {
        self.listed.subscribe()
    }
}

/// Returns once `expected` request controllers (one per kind and scope) have listed their
/// requests, or once this replica is found not to lead: the moment the webhooks' request cache
/// may list.
pub async fn request_lists_done(lists: &RequestLists, expected: usize, leading: Leading) {
    let mut count = lists.count();
    // A gone sender cannot happen while `lists` is borrowed; either way, nothing to wait for.
    let listed = async move {
        let _ = count.wait_for(|listed| *listed >= expected).await;
    };
    match leading {
        Leading::Always => listed.await,
        Leading::Elected {
            mut looked,
            mut leading,
        } => {
            let follower = async move {
                let _ = looked.wait_for(|looked| *looked).await;
                let _ = leading.wait_for(|leading| !*leading).await;
            };
            tokio::select! {
                () = listed => {}
                () = follower => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;

    use super::*;

    #[tokio::test]
    async fn the_webhooks_wait_for_every_request_controller_when_this_replica_runs_them() {
        let lists = RequestLists::default();
        let mut done = Box::pin(request_lists_done(&lists, 2, Leading::Always));
        assert!((&mut done).now_or_never().is_none());
        lists.listed();
        assert!(
            (&mut done).now_or_never().is_none(),
            "one kind of two listed"
        );
        lists.listed();
        done.await;
    }

    #[tokio::test]
    async fn a_leader_waits_and_a_follower_does_not() {
        let lists = RequestLists::default();
        let (looked_tx, looked) = watch::channel(false);
        let (leading_tx, leading) = watch::channel(false);
        let elected = || Leading::Elected {
            looked: looked.clone(),
            leading: leading.clone(),
        };
        // Not leading yet, but the Lease was not looked at: undecided, so wait.
        let mut undecided = Box::pin(request_lists_done(&lists, 1, elected()));
        assert!((&mut undecided).now_or_never().is_none());
        // Taken: a leader waits for its controllers' LIST.
        leading_tx.send_replace(true);
        looked_tx.send_replace(true);
        let mut leader = Box::pin(request_lists_done(&lists, 1, elected()));
        assert!((&mut leader).now_or_never().is_none());
        assert!((&mut undecided).now_or_never().is_none());
        // Lost before its controllers listed: its controllers stopped, so do not wait.
        leading_tx.send_replace(false);
        leader.await;
        undecided.await;
        // Found held by another replica: a follower lists at once.
        request_lists_done(&lists, 1, elected()).await;
    }

    #[tokio::test]
    async fn no_request_controller_means_no_wait() {
        request_lists_done(&RequestLists::default(), 0, Leading::Always).await;
    }
}
