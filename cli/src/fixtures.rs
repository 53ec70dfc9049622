//! Objects the unit tests of several commands start from.

use oz_api::{ExecAccessRequest, ExecAccessRequestSpec, Requester};

/// ExecAccessRequest `alice-x7k2p` through template `web`, with no status yet.
pub(crate) fn exec_request(requester: Option<Requester>) -> ExecAccessRequest {
    ExecAccessRequest::new(
        "alice-x7k2p",
        ExecAccessRequestSpec {
            template_name: "web".into(),
            target_pod: None,
            duration: None,
            requester,
        },
    )
}
