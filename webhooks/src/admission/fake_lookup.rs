//! An in-memory [`AccessLookup`] for the unit tests of the handlers and of the cache: the
//! templates and requests of namespace [`NS`], how often each was read, and whether the
//! "apiserver" answers at all.

use std::{
    collections::BTreeMap,
    sync::{
        Mutex,
        atomic::{AtomicUsize, Ordering},
    },
};

use oz_api::{AccessApproval, AccessConfig, AccessKind};

use super::{
    AccessLookup, Answer, DenialFacts, GrantSummary, LookupError, RequestState, TemplateSummary,
};

/// The one namespace the fake holds anything in.
pub(crate) const NS: &str = "team-a";

/// Templates and requests in memory, and a count of reads.
#[derive(Default)]
pub(crate) struct FakeLookup {
    pub(crate) templates: BTreeMap<(AccessKind, String), TemplateSummary>,
    /// Behind a lock, so a test can change what is stored while the lookup is shared.
    pub(crate) requests: Mutex<Vec<GrantSummary>>,
    /// The requests the approval handlers read by name.
    pub(crate) request_states: Mutex<Vec<RequestState>>,
    /// The AccessApprovals stored.
    pub(crate) decisions: Mutex<Vec<AccessApproval>>,
    /// What a denial reads from memory ([`AccessLookup::denial_facts`]); nothing known by
    /// default.
    pub(crate) denial_facts: DenialFacts,
    /// Every read fails, as when the apiserver is away.
    pub(crate) broken: bool,
    pub(crate) request_reads: AtomicUsize,
    pub(crate) template_reads: AtomicUsize,
}

impl FakeLookup {
    pub(crate) fn with_template(
        mut self,
        kind: AccessKind,
        name: &str,
        config: AccessConfig,
    ) -> Self {
        self.templates.insert((kind, name.into()), config.into());
        self
    }

    /// A spoke's copy of fleet hub `hub`'s template.
    pub(crate) fn with_hub_template(
        mut self,
        kind: AccessKind,
        name: &str,
        config: AccessConfig,
        hub: &str,
    ) -> Self {
        let template = TemplateSummary {
            config,
            hub: Some(hub.into()),
        };
        self.templates.insert((kind, name.into()), template);
        self
    }

    pub(crate) fn with_request(mut self, request: GrantSummary) -> Self {
        self.requests.get_mut().unwrap().push(request);
        self
    }

    pub(crate) fn with_request_state(mut self, request: RequestState) -> Self {
        self.request_states.get_mut().unwrap().push(request);
        self
    }

    pub(crate) fn with_decision(mut self, decision: AccessApproval) -> Self {
        self.decisions.get_mut().unwrap().push(decision);
        self
    }

    /// How many times (requests, templates) were read.
    pub(crate) fn reads(&self) -> (usize, usize) {
        (
            self.request_reads.load(Ordering::SeqCst),
            self.template_reads.load(Ordering::SeqCst),
        )
    }

    fn answer<T: Send + 'static>(&self, found: T) -> Answer<'_, T> {
        let broken = self.broken;
        Box::pin(async move {
            if broken {
                return Err(LookupError("the apiserver is away".into()));
            }
            Ok(found)
        })
    }
}

impl AccessLookup for FakeLookup {
    fn template(
        &self,
        kind: AccessKind,
        namespace: &str,
        name: &str,
    ) -> Answer<'_, Option<TemplateSummary>> {
        self.template_reads.fetch_add(1, Ordering::SeqCst);
        let found = (namespace == NS)
            .then(|| self.templates.get(&(kind, name.to_string())).cloned())
            .flatten();
        self.answer(found)
    }

    fn requests_of(&self, user: &str) -> Answer<'_, Vec<(String, GrantSummary)>> {
        let found = (self.requests.lock().unwrap().iter())
            .filter(|r| r.requested_by.as_deref() == Some(user))
            .map(|r| (NS.to_string(), r.clone()))
            .collect();
        self.answer(found)
    }

    fn requests(&self, namespace: &str) -> Answer<'_, Vec<GrantSummary>> {
        self.request_reads.fetch_add(1, Ordering::SeqCst);
        let found = if namespace == NS {
            self.requests.lock().unwrap().clone()
        } else {
            Vec::new()
        };
        self.answer(found)
    }

    fn request(
        &self,
        kind: AccessKind,
        namespace: &str,
        name: &str,
    ) -> Answer<'_, Option<RequestState>> {
        let found = (namespace == NS)
            .then(|| {
                let states = self.request_states.lock().unwrap();
                states
                    .iter()
                    .find(|r| r.kind == kind && r.name == name)
                    .cloned()
            })
            .flatten();
        self.answer(found)
    }

    fn decisions(&self, namespace: &str) -> Answer<'_, Vec<AccessApproval>> {
        let found = if namespace == NS {
            self.decisions.lock().unwrap().clone()
        } else {
            Vec::new()
        };
        self.answer(found)
    }

    /// Counted as no read: it is answered from memory.
    fn denial_facts(&self, namespace: &str, _pod: &str) -> DenialFacts {
        match namespace == NS {
            true => self.denial_facts.clone(),
            false => DenialFacts::default(),
        }
    }
}
