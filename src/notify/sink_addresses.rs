//! Which addresses a notification sink may have. A sink's URL is written by whoever may write
//! a Secret in a namespace, and oz POSTs to it from inside the cluster: without a check, a
//! namespace editor could have oz call the cloud's metadata endpoint, oz's own loopback ports,
//! or services no user of that namespace can reach. So a sink's address must be public, unless
//! the operator allows private networks or loopback (`--notifications-allow-sinks-in`);
//! link-local addresses (where clouds serve instance metadata) and the unspecified, multicast
//! and broadcast ones never are. Literal addresses are checked before each POST, and names as
//! they resolve ([`CheckedResolver`]), so a name cannot be pointed elsewhere after a check.

use std::{
    future::Future,
    io,
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr},
    pin::Pin,
    task::{Context, Poll},
};

use hyper_util::client::legacy::connect::dns::{GaiResolver, Name};

/// The networks sinks may be in besides public addresses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SinkNetworks {
    /// RFC 1918, shared (100.64.0.0/10) and IPv6 unique local addresses: in-cluster sinks.
    pub private: bool,
    /// 127.0.0.0/8 and ::1: oz's own pod (and tests).
    pub loopback: bool,
}

/// What `--notifications-allow-sinks-in` takes.
pub const SINK_NETWORK_NAMES: [&str; 2] = ["private", "loopback"];

impl SinkNetworks {
    /// The networks `names` allow (each `private` or `loopback`).
    pub fn allowing(names: &[String]) -> Result<Self, String> {
        let mut networks = Self::default();
        for name in names.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
            match name {
                "private" => networks.private = true,
                "loopback" => networks.loopback = true,
                other => {
                    return Err(format!(
                        "{other:?}: want one of {}",
                        SINK_NETWORK_NAMES.join(", ")
                    ));
                }
            }
        }
        Ok(networks)
    }

    /// Why a sink may not be at `ip`, if it may not: the kind of address it is.
    pub fn refuses(&self, ip: IpAddr) -> Option<&'static str> {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
            v4 => v4,
        };
        let kind = match ip {
            IpAddr::V4(v4) => v4_kind(v4),
            IpAddr::V6(v6) => v6_kind(v6),
        }?;
        let allowed = match kind {
            Kind::Private => self.private,
            Kind::Loopback => self.loopback,
            Kind::Never(_) => false,
        };
        (!allowed).then_some(kind.describe())
    }
}

enum Kind {
    Private,
    Loopback,
    Never(&'static str),
}

impl Kind {
    fn describe(&self) -> &'static str {
        match self {
            Kind::Private => "a private address",
            Kind::Loopback => "a loopback address",
            Kind::Never(what) => what,
        }
    }
}

fn v4_kind(ip: Ipv4Addr) -> Option<Kind> {
    let [a, b, ..] = ip.octets();
    if ip.is_link_local() {
        Some(Kind::Never(
            "a link-local address (cloud metadata lives there)",
        ))
    } else if ip.is_unspecified() || ip.is_broadcast() || ip.is_multicast() {
        Some(Kind::Never("not a host's address"))
    } else if ip.is_loopback() {
        Some(Kind::Loopback)
    } else if ip.is_private() || (a == 100 && (64..128).contains(&b)) {
        Some(Kind::Private)
    } else {
        None
    }
}

fn v6_kind(ip: Ipv6Addr) -> Option<Kind> {
    let first = ip.segments()[0];
    if (first & 0xffc0) == 0xfe80 {
        Some(Kind::Never(
            "a link-local address (cloud metadata lives there)",
        ))
    } else if ip.is_unspecified() || ip.is_multicast() {
        Some(Kind::Never("not a host's address"))
    } else if ip.is_loopback() {
        Some(Kind::Loopback)
    } else if (first & 0xfe00) == 0xfc00 {
        Some(Kind::Private)
    } else {
        None
    }
}

/// A sink's address refused, and the kind of address it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RefusedAddress(pub &'static str);

impl std::fmt::Display for RefusedAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the sink's address is {}; oz posts only to public addresses unless \
             --notifications-allow-sinks-in allows private networks or loopback",
            self.0
        )
    }
}

impl std::error::Error for RefusedAddress {}

impl RefusedAddress {
    /// The refusal behind `error` (the resolver's, through hyper's connect errors), if any.
    pub fn behind(error: &(dyn std::error::Error + 'static)) -> Option<Self> {
        let mut source = Some(error);
        while let Some(e) = source {
            if let Some(refused) = e.downcast_ref::<RefusedAddress>() {
                return Some(*refused);
            }
            let inner = e.downcast_ref::<io::Error>().and_then(|io| io.get_ref());
            if let Some(refused) = inner.and_then(|i| i.downcast_ref::<RefusedAddress>()) {
                return Some(*refused);
            }
            source = e.source();
        }
        None
    }
}

/// The system resolver, keeping only the addresses a sink may have; an error if none is left.
#[derive(Clone)]
pub struct CheckedResolver {
    inner: GaiResolver,
    networks: SinkNetworks,
}

impl CheckedResolver {
    pub fn new(networks: SinkNetworks) -> Self {
        Self {
            inner: GaiResolver::new(),
            networks,
        }
    }
}

impl tower_service::Service<Name> for CheckedResolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<Self::Response>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let resolving = self.inner.call(name);
        let networks = self.networks;
        Box::pin(async move {
            let mut refused = None;
            let allowed: Vec<SocketAddr> = resolving
                .await?
                .filter(|addr| match networks.refuses(addr.ip()) {
                    Some(kind) => {
                        refused = Some(kind);
                        false
                    }
                    None => true,
                })
                .collect();
            match (allowed.is_empty(), refused) {
                (true, Some(kind)) => Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    RefusedAddress(kind),
                )),
                _ => Ok(allowed.into_iter()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_public_addresses_by_default_and_never_link_local() {
        let none = SinkNetworks::default();
        let all = SinkNetworks::allowing(&["private".into(), "loopback".into()]).unwrap();
        let table: [(&str, bool, bool); 14] = [
            // (address, refused by default, refused with both allowed)
            ("203.0.113.7", false, false),
            ("2001:db8::1", false, false),
            ("10.96.0.10", true, false),
            ("172.20.1.1", true, false),
            ("192.168.1.1", true, false),
            ("100.64.0.1", true, false),
            ("fd00::1", true, false),
            ("127.0.0.1", true, false),
            ("::1", true, false),
            ("::ffff:127.0.0.1", true, false),
            ("169.254.169.254", true, true),
            ("fe80::1", true, true),
            ("::ffff:169.254.169.254", true, true),
            ("0.0.0.0", true, true),
        ];
        for (address, by_default, with_both) in table {
            let ip: IpAddr = address.parse().unwrap();
            assert_eq!(none.refuses(ip).is_some(), by_default, "{address}");
            assert_eq!(all.refuses(ip).is_some(), with_both, "{address}");
        }
        assert!(SinkNetworks::allowing(&["everything".into()]).is_err());
    }
}
