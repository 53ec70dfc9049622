//! The signal every part of oz-manager stops on.

use futures::future::Shared;

/// A future every task can wait on for shutdown; it resolves once for all of them.
pub type Shutdown = Shared<futures::future::BoxFuture<'static, ()>>;
