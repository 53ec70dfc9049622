//! `ozctl lock`, `ozctl unlock` and `ozctl locks`: the kill switch. A lock is an AccessLock
//! (cluster-scoped): while it holds, oz revokes every grant it names, closes every matching open
//! brokered session, and refuses new requests (and decisions on them) with its reason. Only
//! the groups bound to the install's `oz-lock-admin` ClusterRole may write locks; RBAC refuses
//! anyone else before oz sees anything.

use std::time::Duration;

use clap::Args;
use k8s_openapi::{
    apimachinery::pkg::apis::meta::v1::Time,
    jiff::{SignedDuration, Timestamp},
};
use kube::{
    Api,
    api::{DeleteParams, ListParams, ObjectMeta, PostParams},
};
use oz_api::{AccessLock, AccessLockSpec, LockedTemplate};

use super::{
    error::CliError,
    names,
    output::{self, TableFormat},
    session::Session,
    table::Table,
    timefmt,
};

/// `ozctl lock`.
#[derive(Args, Debug)]
pub struct LockArgs {
    /// Lock this user's access: their grants, and grants they use through a group
    #[arg(long, value_name = "USER")]
    pub user: Option<String>,
    /// Lock the access of this group's members
    #[arg(long, value_name = "GROUP")]
    pub group: Option<String>,
    /// Lock all access in this namespace (with --user or --group: theirs there only)
    #[arg(long = "in-namespace", value_name = "NAMESPACE")]
    pub in_namespace: Option<String>,
    /// Lock the grants of this template, as NAMESPACE/NAME
    #[arg(long, value_name = "NAMESPACE/NAME", value_parser = template_parser)]
    pub template: Option<LockedTemplate>,
    /// Why: everyone refused because of the lock reads it
    #[arg(long, value_name = "TEXT")]
    pub reason: String,
    /// How long the lock holds, such as 2h [default: until `ozctl unlock`]
    #[arg(long = "for", value_name = "DURATION", value_parser = timefmt::parse_positive)]
    pub holds_for: Option<Duration>,
}

/// `ozctl unlock`.
#[derive(Args, Debug)]
pub struct UnlockArgs {
    /// The lock to remove (see `ozctl locks`)
    pub name: String,
}

/// `ozctl locks`.
#[derive(Args, Debug)]
pub struct LocksArgs {
    /// Output format
    #[arg(
        short = 'o',
        long,
        value_enum,
        default_value = "table",
        value_name = "FORMAT"
    )]
    pub output: TableFormat,
}

fn template_parser(text: &str) -> Result<LockedTemplate, String> {
    match text.split_once('/') {
        Some((namespace, name)) if !namespace.is_empty() && !name.is_empty() => {
            Ok(LockedTemplate {
                namespace: namespace.into(),
                name: name.into(),
                kind: None,
            })
        }
        _ => Err(format!("{text:?}: give the template as NAMESPACE/NAME")),
    }
}

/// The lock `args` ask for, at `now`; an error naming the flags when it would lock nothing.
pub fn lock_of(args: &LockArgs, now: Timestamp) -> Result<AccessLockSpec, String> {
    if args.user.is_none()
        && args.group.is_none()
        && args.in_namespace.is_none()
        && args.template.is_none()
    {
        return Err(
            "say what to lock: --user, --group, --in-namespace or --template (several: all must \
             match)"
                .into(),
        );
    }
    if args.reason.trim().is_empty() {
        return Err("--reason is empty: say why, for everyone it refuses".into());
    }
    let expires_at = match args.holds_for {
        Some(holds) => {
            let holds = SignedDuration::try_from(holds).map_err(|e| e.to_string())?;
            Some(Time(now.checked_add(holds).map_err(|e| e.to_string())?))
        }
        None => None,
    };
    Ok(AccessLockSpec {
        user: args.user.clone(),
        group: args.group.clone(),
        namespace: args.in_namespace.clone(),
        template: args.template.clone(),
        reason: args.reason.clone(),
        expires_at,
    })
}

/// What a lock holds over, in words: `user alice in namespace shop`.
pub fn target_words(spec: &AccessLockSpec) -> String {
    let mut words = Vec::new();
    if let Some(user) = &spec.user {
        words.push(format!("user {user}"));
    }
    if let Some(group) = &spec.group {
        words.push(format!("group {group}"));
    }
    if let Some(template) = &spec.template {
        words.push(format!("template {}/{}", template.namespace, template.name));
    }
    if let Some(namespace) = &spec.namespace {
        words.push(format!("namespace {namespace}"));
    }
    words.join(" in ")
}

/// Runs `ozctl lock`.
pub async fn lock(session: &Session, args: LockArgs) -> Result<(), CliError> {
    let spec = lock_of(&args, Timestamp::now()).map_err(CliError::Usage)?;
    let prefix = match (&spec.user, &spec.group) {
        (Some(user), _) => names::prefix_for(user),
        (None, Some(group)) => names::prefix_for(group),
        _ => "lock".to_string(),
    };
    let lock = AccessLock {
        metadata: ObjectMeta {
            generate_name: Some(names::generate_name(&prefix)),
            ..Default::default()
        },
        spec,
    };
    let api: Api<AccessLock> = Api::all(session.client.clone());
    let created = api
        .create(&PostParams::default(), &lock)
        .await
        .map_err(|e| session.error(e))?;
    let until = match &created.spec.expires_at {
        Some(end) => format!("until {}", timefmt::local(end.0)),
        None => "until it is removed".to_string(),
    };
    output::print(&format!(
        "Locked {} ({until}): AccessLock {}. oz revokes their grants and closes their sessions now, \
         and refuses new requests with: {}\nRemove it with: ozctl unlock {}\n",
        target_words(&created.spec),
        created.name(),
        created.spec.reason,
        created.name()
    ))
}

/// Runs `ozctl unlock`.
pub async fn unlock(session: &Session, args: UnlockArgs) -> Result<(), CliError> {
    let api: Api<AccessLock> = Api::all(session.client.clone());
    api.delete(&args.name, &DeleteParams::default())
        .await
        .map_err(|e| session.error(e))?;
    output::print(&format!(
        "Unlocked: AccessLock {} removed. New requests are taken again; the grants it ended stay \
         ended.\n",
        args.name
    ))
}

/// Runs `ozctl locks`.
pub async fn locks(session: &Session, args: LocksArgs) -> Result<(), CliError> {
    let api: Api<AccessLock> = Api::all(session.client.clone());
    let mut locks = api
        .list(&ListParams::default())
        .await
        .map_err(|e| session.error(e))?
        .items;
    locks.sort_by(|a, b| a.name().cmp(b.name()));
    let now = Timestamp::now();
    match args.output {
        TableFormat::Json => output::print(&output::render(&locks, output::ObjectFormat::Json)?),
        TableFormat::Table if locks.is_empty() => {
            eprintln!("No AccessLocks: nothing is locked.");
            Ok(())
        }
        TableFormat::Table => output::print(&locks_table(&locks, now).render()),
    }
}

/// The table of `locks` at `now`: NAME, LOCKS, REASON, UNTIL, HOLDS.
pub fn locks_table(locks: &[AccessLock], now: Timestamp) -> Table {
    let mut table = Table::new(["NAME", "LOCKS", "REASON", "UNTIL", "HOLDS"]);
    for lock in locks {
        table.row([
            lock.name().to_string(),
            target_words(&lock.spec),
            lock.spec.reason.clone(),
            lock.spec
                .expires_at
                .as_ref()
                .map_or_else(|| "-".to_string(), |t| timefmt::relative(now, t.0)),
            if lock.spec.holds(now) { "yes" } else { "no" }.to_string(),
        ]);
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> LockArgs {
        use clap::Parser;
        #[derive(Parser)]
        struct Wrap {
            #[command(flatten)]
            lock: LockArgs,
        }
        let mut argv = vec!["lock"];
        argv.extend_from_slice(extra);
        Wrap::try_parse_from(argv).unwrap().lock
    }

    #[test]
    fn a_lock_names_what_it_locks_and_why() {
        let now: Timestamp = "2026-11-28T12:00:00Z".parse().unwrap();
        let spec = lock_of(
            &args(&["--user", "alice", "--reason", "INC-7", "--for", "2h"]),
            now,
        )
        .unwrap();
        assert_eq!(spec.user.as_deref(), Some("alice"));
        assert_eq!(
            spec.expires_at.unwrap().0,
            "2026-11-28T14:00:00Z".parse().unwrap()
        );
        let both = lock_of(
            &args(&[
                "--group",
                "devs",
                "--in-namespace",
                "shop",
                "--reason",
                "freeze",
            ]),
            now,
        )
        .unwrap();
        assert_eq!(target_words(&both), "group devs in namespace shop");
        assert!(
            lock_of(&args(&["--reason", "x"]), now)
                .unwrap_err()
                .contains("--user")
        );
        assert!(lock_of(&args(&["--user", "a", "--reason", " "]), now).is_err());
        let template = lock_of(&args(&["--template", "shop/web", "--reason", "x"]), now).unwrap();
        assert_eq!(target_words(&template), "template shop/web");
        assert!(template_parser("web").is_err());
    }
}
