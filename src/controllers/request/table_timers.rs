//! The expiry timers armed at start-up from the apiserver's Table of requests (their printer
//! columns, [`oz_api::expiry_table`]), before the LIST of whole requests fills the caches.
//!
//! Until a grant's timer is armed, a grant expiring is revoked late, by as long as the LIST
//! takes, which at tens of thousands of grants is seconds. The Table of the same requests is a
//! fraction of their size and lists several times faster (docs/benchmarks.md), so the timers
//! are armed from it first. The
//! request watch's LIST starts once it is read: both at once would share the apiserver's CPU
//! and delay the Table. If the Table cannot be read (an older CRD without its columns, an
//! error), the LIST arms the timers as it comes in, as it always does.

use std::{sync::Arc, time::Instant};

use futures::{Stream, StreamExt};
use http::{HeaderValue, header::ACCEPT};
use kube::{Client, Resource, api::ListParams};
use oz_api::expiry_table::{
    ListedExpiry, MissingColumn, RequestTablePage, TABLE_ACCEPT, WITHOUT_OBJECTS,
};

use super::{RequestReconciler, timers::ExpiryTimers};
use crate::{builders::AccessBuilder, scope::Scope};

/// Rows per page: small without their objects, so a page stays under 1 MB; smaller pages
/// listed no faster.
const PAGE: u32 = 5_000;

/// `stream` (the request watch), started once the timers have been armed from the Table.
pub fn after_arming_from_table<B, S>(
    client: Client,
    scope: Scope,
    reconciler: Arc<RequestReconciler<B>>,
    stream: S,
) -> impl Stream<Item = S::Item> + Send
where
    B: AccessBuilder,
    S: Stream + Send,
    S::Item: Send,
{
    let arming = async move { arm_from_table(&client, &scope, &reconciler.timers).await };
    futures::stream::once(arming)
        .filter_map(|()| std::future::ready(None))
        .chain(stream)
}

/// Arms a timer for every grant in the Table that may be in force, and logs how it went.
async fn arm_from_table<B: AccessBuilder>(
    client: &Client,
    scope: &Scope,
    timers: &ExpiryTimers<B>,
) {
    let kind = B::Request::kind(&());
    let started = Instant::now();
    let read = read_expiries::<B::Request>(client, scope, PAGE, |expiry| {
        timers.arm_from_row(&expiry);
    });
    match read.await {
        Ok(rows) => tracing::info!(
            %kind,
            rows,
            timers = timers.armed(),
            seconds = started.elapsed().as_secs_f64(),
            "expiry timers armed from the table of requests"
        ),
        Err(error) => tracing::warn!(
            %kind,
            %error,
            "could not read the table of requests; the expiry timers are armed from the full list"
        ),
    }
}

/// Why the Table of requests could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    #[error(transparent)]
    Request(#[from] kube::core::request::Error),
    #[error(transparent)]
    Uri(#[from] http::uri::InvalidUri),
    #[error(transparent)]
    Api(#[from] kube::Error),
    #[error(transparent)]
    Columns(#[from] MissingColumn),
}

/// Reads the Table of requests of kind `R` in `scope`, `page_size` rows at a time, and hands
/// each grant that may be in force to `each` as its page comes in; the number of rows read.
pub async fn read_expiries<R>(
    client: &Client,
    scope: &Scope,
    page_size: u32,
    mut each: impl FnMut(ListedExpiry),
) -> Result<usize, TableError>
where
    R: Resource<DynamicType = ()>,
{
    let url = R::url_path(&(), scope.namespace());
    let (mut rows, mut token) = (0, None::<String>);
    loop {
        let mut params = ListParams::default().limit(page_size);
        if let Some(token) = token.take() {
            params = params.continue_token(&token);
        }
        let mut request = kube::core::Request::new(&url).list(&params)?;
        let (key, value) = WITHOUT_OBJECTS;
        *request.uri_mut() = format!("{}&{key}={value}", request.uri()).parse()?;
        request
            .headers_mut()
            .insert(ACCEPT, HeaderValue::from_static(TABLE_ACCEPT));
        let page: RequestTablePage = client.request(request).await?;
        rows += page.len();
        page.expiries()?.into_iter().for_each(&mut each);
        match page.continue_token() {
            Some(next) => token = Some(next.to_owned()),
            None => return Ok(rows),
        }
    }
}
