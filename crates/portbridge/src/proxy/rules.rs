//! The decision for one destination of one task: `deny.network` first, then `allow.network`,
//! on the name as asked (before any DNS lookup), then on the addresses it resolved to.
//!
//! The order is what keeps the host safe:
//! 1. Names are matched before resolution, so a name the task may not reach is never looked
//!    up and cannot carry data out through DNS (NET-03).
//! 2. An IP literal is reached only if that IP is listed; a domain grant never covers an
//!    address, whatever its spelling (`HostName::parse` folds the spellings, NET-04, NET-08).
//! 3. A granted name whose answer holds an internal address (loopback, private, link-local,
//!    unique-local, metadata) is refused unless that IP itself is granted, so DNS cannot
//!    point an allowed name at the host or its network (NET-05, NET-15).

use std::fmt;
use std::net::IpAddr;

use paddock_policy::{DomainPattern, HostName, NetworkPolicy};

/// The destinations one task may reach through the proxy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskRules {
    /// `allow.network`: destinations granted.
    pub allow: Vec<DomainPattern>,
    /// `deny.network`: destinations refused even when granted (checked first).
    pub deny: Vec<DomainPattern>,
}

/// Why the proxy refused a destination.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum RefusalReason {
    /// A `deny.network` pattern matches the name or the address asked for.
    Denied {
        /// The pattern.
        pattern: String,
    },
    /// No `allow.network` pattern grants the name.
    NotAllowed,
    /// An IP address was asked for and `allow.network` does not list it.
    IpNotListed,
    /// The name resolved to an internal address that is not granted as an IP.
    InternalAddress {
        /// The address.
        ip: IpAddr,
    },
    /// A resolved address is refused by a `deny.network` pattern.
    DeniedAddress {
        /// The address.
        ip: IpAddr,
        /// The pattern.
        pattern: String,
    },
    /// The `Host` header of an absolute-URI request names another destination.
    HostMismatch {
        /// The `Host` header as sent (escaped).
        host: String,
    },
    /// The TLS server name of a tunnel differs from the destination it was opened to.
    SniMismatch {
        /// The server name (escaped).
        sni: String,
    },
    /// A tunnel to a name began with a TLS ClientHello that could not be read.
    UnreadableClientHello,
    /// The destination is not a valid host name or address.
    BadHost {
        /// What is wrong.
        detail: String,
    },
    /// A SOCKS5 command other than CONNECT.
    UnsupportedCommand {
        /// `bind` or `udp-associate`.
        command: &'static str,
    },
}

impl fmt::Display for RefusalReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RefusalReason::Denied { pattern } => write!(f, "refused by deny.network `{pattern}`"),
            RefusalReason::NotAllowed => f.write_str("not in allow.network"),
            RefusalReason::IpNotListed => {
                f.write_str("an IP address is reached only if allow.network lists that IP")
            }
            RefusalReason::InternalAddress { ip } => write!(
                f,
                "resolves to the internal address {ip}, which allow.network does not list"
            ),
            RefusalReason::DeniedAddress { ip, pattern } => {
                write!(f, "resolves to {ip}, refused by deny.network `{pattern}`")
            }
            RefusalReason::HostMismatch { host } => {
                write!(f, "the Host header `{host}` differs from the request's destination")
            }
            RefusalReason::SniMismatch { sni } => {
                write!(f, "the TLS server name `{sni}` differs from the tunnel's destination")
            }
            RefusalReason::UnreadableClientHello => {
                f.write_str("the TLS ClientHello could not be read to check its server name")
            }
            RefusalReason::BadHost { detail } => write!(f, "bad destination: {detail}"),
            RefusalReason::UnsupportedCommand { command } => {
                write!(f, "SOCKS5 {command} is not supported; only CONNECT is")
            }
        }
    }
}

impl TaskRules {
    /// Rules from a resolved network policy: `Some` only for a domain list, the one mode
    /// that gets a proxy.
    pub fn from_policy(network: &NetworkPolicy) -> Option<TaskRules> {
        match network {
            NetworkPolicy::Filtered { allow, deny } => {
                Some(TaskRules { allow: allow.clone(), deny: deny.clone() })
            }
            _ => None,
        }
    }

    /// The decision on the destination as asked, before any DNS lookup.
    pub fn check_name(&self, host: &HostName, port: u16) -> Result<(), RefusalReason> {
        if let Some(p) = self.deny.iter().find(|p| p.denies(host, port)) {
            return Err(RefusalReason::Denied { pattern: p.to_string() });
        }
        if self.allow.iter().any(|p| p.allows(host, port)) {
            return Ok(());
        }
        Err(match host {
            HostName::Ip(_) => RefusalReason::IpNotListed,
            HostName::Domain(_) => RefusalReason::NotAllowed,
        })
    }

    /// The decision on the addresses a granted name resolved to: every one must pass.
    pub fn check_resolved(&self, port: u16, addrs: &[IpAddr]) -> Result<(), RefusalReason> {
        for &ip in addrs {
            let ip = fold(ip);
            let as_host = HostName::Ip(ip);
            if let Some(p) = self.deny.iter().find(|p| p.denies(&as_host, port)) {
                return Err(RefusalReason::DeniedAddress { ip, pattern: p.to_string() });
            }
            if is_internal(ip) && !self.allow.iter().any(|p| p.allows(&as_host, port)) {
                return Err(RefusalReason::InternalAddress { ip });
            }
        }
        Ok(())
    }
}

/// IPv4-mapped IPv6 as IPv4, the way `HostName` spells it.
pub(crate) fn fold(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// `paddock_policy::is_internal`, plus IPv4-compatible IPv6 (`::a.b.c.d`, deprecated but
/// still parsed) judged by the IPv4 address it embeds: fail closed on every spelling.
pub(crate) fn is_internal(ip: IpAddr) -> bool {
    if paddock_policy::is_internal(ip) {
        return true;
    }
    match ip {
        IpAddr::V6(v6) if v6.segments()[..6] == [0; 6] => {
            let o = v6.octets();
            paddock_policy::is_internal(IpAddr::V4(std::net::Ipv4Addr::new(
                o[12], o[13], o[14], o[15],
            )))
        }
        _ => false,
    }
}

/// A host as the rules see it. `HostName::parse` maps Unicode names through IDNA, which can
/// turn a non-ASCII spelling of an address (fullwidth digits, the ideographic full stop)
/// into the ASCII text of an IP while still calling it a domain; such a name is the IP.
pub(crate) fn canonical(host: HostName) -> HostName {
    match &host {
        HostName::Domain(d) => match HostName::parse(d) {
            Ok(ip @ HostName::Ip(_)) => ip,
            _ => host,
        },
        HostName::Ip(_) => host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unicode_spellings_of_an_address_are_the_address() {
        for raw in ["\u{ff11}\u{ff12}\u{ff17}.0.0.1", "127\u{3002}0\u{3002}0\u{3002}1"] {
            let host = canonical(HostName::parse(raw).unwrap());
            assert_eq!(host, HostName::Ip("127.0.0.1".parse().unwrap()), "{raw}");
        }
        let name = HostName::parse("allowed.test").unwrap();
        assert_eq!(canonical(name.clone()), name);
    }

    #[test]
    fn ipv4_compatible_ipv6_is_judged_by_its_ipv4() {
        assert!(is_internal("::127.0.0.1".parse().unwrap()));
        assert!(is_internal("::10.0.0.1".parse().unwrap()));
        assert!(!is_internal("::198.18.0.10".parse().unwrap()));
        assert!(!is_internal("2001:db8::1".parse().unwrap()));
    }
}

#[cfg(test)]
mod policy_tests {
    use super::*;

    #[test]
    fn only_a_domain_list_gets_rules() {
        assert_eq!(TaskRules::from_policy(&NetworkPolicy::Off), None);
        assert_eq!(TaskRules::from_policy(&NetworkPolicy::On), None);
        let allow = vec![DomainPattern::parse("allowed.test").unwrap()];
        let deny = vec![DomainPattern::parse("blocked.allowed.test").unwrap()];
        let rules = TaskRules::from_policy(&NetworkPolicy::Filtered {
            allow: allow.clone(),
            deny: deny.clone(),
        });
        assert_eq!(rules, Some(TaskRules { allow, deny }));
    }

    #[test]
    fn deny_wins_over_allow_for_names_and_ips() {
        let p = |s: &str| DomainPattern::parse(s).unwrap();
        let rules = TaskRules {
            allow: vec![p("*.allowed.test"), p("127.0.0.1:80")],
            deny: vec![p("x.allowed.test"), p("127.0.0.1")],
        };
        let host = |s: &str| HostName::parse(s).unwrap();
        assert_eq!(rules.check_name(&host("a.allowed.test"), 443), Ok(()));
        assert!(matches!(
            rules.check_name(&host("y.x.allowed.test"), 443),
            Err(RefusalReason::Denied { .. })
        ));
        assert!(matches!(
            rules.check_name(&host("0x7f000001"), 80),
            Err(RefusalReason::Denied { .. })
        ));
        assert_eq!(rules.check_name(&host("allowed.test"), 443), Err(RefusalReason::NotAllowed));
    }
}
