//! Network destinations: the patterns a policy grants (`example.com`, `*.example.com`,
//! `example.com:443`, `example.com:*`, `10.1.2.3`) and the host names a task asks for.
//!
//! A granted destination without a port grants the web ports 80 and 443 only; any other port
//! is listed (`host:22`), or every port with `host:*`. A refused destination without a port
//! refuses every port.
//!
//! Both sides are normalized the same way before they meet: lowercase, one trailing dot
//! dropped, internationalized names turned into punycode, and IP addresses parsed in every
//! spelling the C library accepts (`127.1`, `0x7f000001`, `2130706433`, `[::ffff:127.0.0.1]`)
//! so that no spelling of an address slips past a rule about it (security cases NET-04,
//! NET-06, NET-08, POL-08).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::{Serialize, Serializer};

/// A destination a task asks for, normalized.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HostName {
    /// A DNS name: lowercase ASCII (punycode), no trailing dot.
    Domain(String),
    /// An IP address, IPv4-mapped IPv6 folded to IPv4.
    Ip(IpAddr),
}

impl HostName {
    /// Normalizes a host as a client sent it (`Host:` header, CONNECT authority, SOCKS5
    /// domain). Brackets around IPv6 are accepted. Refuses what is not a host name.
    pub fn parse(raw: &str) -> Result<HostName, String> {
        let text = raw.strip_prefix('[').and_then(|r| r.strip_suffix(']')).unwrap_or(raw);
        if text.is_empty() {
            return Err("empty host".to_owned());
        }
        if let Ok(v6) = text.split('%').next().unwrap_or(text).parse::<Ipv6Addr>() {
            return Ok(HostName::Ip(fold_mapped(v6)));
        }
        if let Some(v4) = parse_inet_aton(text) {
            return Ok(HostName::Ip(IpAddr::V4(v4)));
        }
        if looks_numeric(text) {
            return Err(format!("`{}` looks like an IP address but is not one", escape(text)));
        }
        let ascii = normalize_domain(text)?;
        // Unicode digits and dots (`１２７。0。0。1`) become an address only after IDNA
        // mapping: judge the mapped text again, so no spelling of an IP passes as a name.
        if !text.is_ascii() {
            if let Some(v4) = parse_inet_aton(&ascii) {
                return Ok(HostName::Ip(IpAddr::V4(v4)));
            }
            if looks_numeric(&ascii) {
                return Err(format!("`{}` looks like an IP address but is not one", escape(text)));
            }
        }
        Ok(HostName::Domain(ascii))
    }

    /// The IP address, if the host is one.
    pub fn ip(&self) -> Option<IpAddr> {
        match self {
            HostName::Ip(ip) => Some(*ip),
            HostName::Domain(_) => None,
        }
    }
}

impl fmt::Display for HostName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostName::Domain(d) => f.write_str(d),
            HostName::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]"),
            HostName::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

/// The host part of a [`DomainPattern`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum HostPattern {
    /// Exactly this name.
    Exact(String),
    /// Subdomains of this name, not the name itself (`*.example.com`).
    Subdomains(String),
    /// This IP address (only a listed IP grants an IP literal).
    Ip(IpAddr),
}

/// A destination pattern from `allow.network` / `deny.network`: a host pattern and its
/// ports.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DomainPattern {
    /// The host part.
    pub host: HostPattern,
    /// The ports, as written.
    pub port: PortSpec,
}

/// The port part of a [`DomainPattern`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PortSpec {
    /// No port written: a grant covers the web ports 80 and 443 only, a refusal every port.
    Web,
    /// `host:PORT`: this port.
    One(u16),
    /// `host:*`: every port.
    Any,
}

/// The ports a grant without a port covers.
pub const WEB_PORTS: [u16; 2] = [80, 443];

impl PortSpec {
    /// Whether a grant with these ports covers `port`.
    fn grants(self, port: u16) -> bool {
        match self {
            PortSpec::Web => WEB_PORTS.contains(&port),
            PortSpec::One(p) => p == port,
            PortSpec::Any => true,
        }
    }

    /// Whether a refusal with these ports covers `port`: without a port, every one.
    fn refuses(self, port: u16) -> bool {
        match self {
            PortSpec::Web | PortSpec::Any => true,
            PortSpec::One(p) => p == port,
        }
    }
}

/// Multi-label public suffixes a wildcard must not cover (a wildcard directly over any
/// single label, such as `*.com`, is refused as well). Not the whole public-suffix list: the
/// common registries, so that an obvious mistake is caught.
const PUBLIC_SUFFIXES: &[&str] = &[
    "co.uk",
    "org.uk",
    "ac.uk",
    "gov.uk",
    "com.au",
    "net.au",
    "org.au",
    "co.nz",
    "co.jp",
    "ne.jp",
    "or.jp",
    "com.br",
    "com.cn",
    "com.tw",
    "co.in",
    "co.kr",
    "co.za",
    "com.mx",
    "github.io",
    "gitlab.io",
    "herokuapp.com",
    "vercel.app",
    "netlify.app",
    "pages.dev",
    "workers.dev",
    "appspot.com",
    "cloudfront.net",
    "amazonaws.com",
    "azurewebsites.net",
    "blogspot.com",
    "firebaseapp.com",
    "web.app",
];

impl DomainPattern {
    /// Parses a pattern as written in a policy. Ambiguous spellings are refused (fail
    /// closed) with a message saying what to write instead.
    pub fn parse(raw: &str) -> Result<DomainPattern, String> {
        if raw.is_empty() {
            return Err("an empty destination grants nothing; remove it".to_owned());
        }
        if raw.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err("a destination has no spaces or control characters".to_owned());
        }
        if raw.contains("://") || raw.contains('/') {
            return Err("write the host name alone, like `example.com` or `example.com:443`; \
                        schemes, paths and CIDR ranges are not destinations"
                .to_owned());
        }
        // `[v6]` or `[v6]:port`.
        if let Some(rest) = raw.strip_prefix('[') {
            let (inside, after) =
                rest.split_once(']').ok_or_else(|| "unclosed `[` in an IPv6 address".to_owned())?;
            let ip: Ipv6Addr =
                inside.parse().map_err(|_| format!("`{inside}` is not an IPv6 address"))?;
            let port = match after {
                "" => PortSpec::Web,
                p => parse_port(p.strip_prefix(':').ok_or("expected `:PORT` after `]`")?)?,
            };
            return Ok(DomainPattern { host: HostPattern::Ip(fold_mapped(ip)), port });
        }
        if raw.matches(':').count() >= 2 {
            let ip: Ipv6Addr = raw.parse().map_err(|_| {
                format!(
                    "`{raw}` is not an IPv6 address; write an address with a port as [ADDR]:PORT"
                )
            })?;
            return Ok(DomainPattern {
                host: HostPattern::Ip(fold_mapped(ip)),
                port: PortSpec::Web,
            });
        }
        let (host, port) = match raw.rsplit_once(':') {
            Some((h, p)) => (h, parse_port(p)?),
            None => (raw, PortSpec::Web),
        };
        if let Some(base) = host.strip_prefix("*.") {
            if base.contains('*') {
                return Err(
                    "a wildcard is only allowed as the whole first label, like `*.example.com`"
                        .to_owned(),
                );
            }
            let base = normalize_domain(base)?;
            if looks_numeric(&base)
                || base.rsplit('.').next().is_some_and(|l| l.bytes().all(|b| b.is_ascii_digit()))
            {
                return Err(format!(
                    "`*.{base}` is a wildcard over numbers; name a domain, or list the IP address itself"
                ));
            }
            if !base.contains('.') || PUBLIC_SUFFIXES.contains(&base.as_str()) {
                return Err(format!(
                    "`*.{base}` would match every site under a public suffix; name the domain, like `*.example.{base}`"
                ));
            }
            return Ok(DomainPattern { host: HostPattern::Subdomains(base), port });
        }
        if host.contains('*') {
            return Err(
                "a wildcard is only allowed as the whole first label, like `*.example.com`"
                    .to_owned(),
            );
        }
        if host.bytes().all(|b| b.is_ascii_digit() || b == b'.') && host.split('.').count() == 4 {
            let ip: Ipv4Addr =
                host.parse().map_err(|_| format!("`{host}` is not an IPv4 address"))?;
            return Ok(DomainPattern { host: HostPattern::Ip(IpAddr::V4(ip)), port });
        }
        if looks_numeric(host) {
            return Err(format!(
                "`{host}` is an ambiguous spelling of an IP address; write it as four decimal parts like 127.0.0.1"
            ));
        }
        let name = normalize_domain(host)?;
        if looks_numeric(&name) {
            return Err(format!(
                "`{host}` is an ambiguous spelling of an IP address; write it as four decimal parts like 127.0.0.1"
            ));
        }
        Ok(DomainPattern { host: HostPattern::Exact(name), port })
    }

    /// Whether an allow pattern grants `host:port`. `*.x` matches subdomains of `x` only; a
    /// pattern without a port grants ports 80 and 443 only.
    pub fn allows(&self, host: &HostName, port: u16) -> bool {
        self.port.grants(port)
            && match (&self.host, host) {
                (HostPattern::Exact(d), HostName::Domain(h)) => d == h,
                (HostPattern::Subdomains(d), HostName::Domain(h)) => is_strict_subdomain(h, d),
                (HostPattern::Ip(ip), HostName::Ip(h)) => ip == h,
                _ => false,
            }
    }

    /// Whether a deny pattern refuses `host:port`. A deny entry covers its subdomains too,
    /// so `deny.network = ["blocked.example"]` also refuses `x.blocked.example`; one without a
    /// port refuses every port.
    pub fn denies(&self, host: &HostName, port: u16) -> bool {
        self.port.refuses(port)
            && match (&self.host, host) {
                (HostPattern::Exact(d), HostName::Domain(h)) => d == h || is_strict_subdomain(h, d),
                (HostPattern::Subdomains(d), HostName::Domain(h)) => is_strict_subdomain(h, d),
                (HostPattern::Ip(ip), HostName::Ip(h)) => ip == h,
                _ => false,
            }
    }
}

impl fmt::Display for DomainPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            HostPattern::Exact(d) => f.write_str(d)?,
            HostPattern::Subdomains(d) => write!(f, "*.{d}")?,
            HostPattern::Ip(IpAddr::V6(ip)) if self.port != PortSpec::Web => {
                write!(f, "[{ip}]")?;
            }
            HostPattern::Ip(ip) => write!(f, "{ip}")?,
        }
        match self.port {
            PortSpec::Web => Ok(()),
            PortSpec::One(p) => write!(f, ":{p}"),
            PortSpec::Any => f.write_str(":*"),
        }
    }
}

impl DomainPattern {
    /// The pattern with the ports a grant of it covers spelled out, for `paddock plan`:
    /// `crates.io (ports 80 and 443)`, `github.com:22`, `example.com:* (every port)`.
    pub fn describe_grant(&self) -> String {
        match self.port {
            PortSpec::Web => format!("{self} (ports 80 and 443)"),
            PortSpec::One(_) => self.to_string(),
            PortSpec::Any => format!("{self} (every port)"),
        }
    }
}

impl Serialize for DomainPattern {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

fn is_strict_subdomain(host: &str, base: &str) -> bool {
    host.len() > base.len() + 1
        && host.ends_with(base)
        && host.as_bytes()[host.len() - base.len() - 1] == b'.'
}

fn parse_port(text: &str) -> Result<PortSpec, String> {
    if text == "*" {
        return Ok(PortSpec::Any);
    }
    match text.parse::<u16>() {
        Ok(p) if p != 0 && !text.starts_with('+') => Ok(PortSpec::One(p)),
        _ => Err(format!("`{}` is not a port (1-65535, or `*` for every port)", escape(text))),
    }
}

/// Lowercases, drops one trailing dot, turns Unicode into punycode and checks the labels.
fn normalize_domain(raw: &str) -> Result<String, String> {
    let trimmed = raw.strip_suffix('.').unwrap_or(raw);
    if trimmed.is_empty() || trimmed.starts_with('.') || trimmed.contains("..") {
        return Err(format!("`{}` is not a host name", escape(raw)));
    }
    let ascii = if trimmed.is_ascii() {
        trimmed.to_ascii_lowercase()
    } else {
        idna::domain_to_ascii(trimmed)
            .map_err(|_| format!("`{}` is not a valid host name", escape(raw)))?
    };
    if ascii.len() > 253 {
        return Err("a host name is at most 253 characters".to_owned());
    }
    for label in ascii.split('.') {
        let ok = !label.is_empty()
            && label.len() <= 63
            && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            && !label.starts_with('-')
            && !label.ends_with('-');
        if !ok {
            return Err(format!("`{}` is not a valid host name", escape(raw)));
        }
    }
    Ok(ascii)
}

/// Whether a host looks like an attempt at a numeric address: every label decimal digits
/// or `0x` and hex digits. Such a name is never treated as a domain (`1.ba` is a domain).
fn looks_numeric(text: &str) -> bool {
    let t = text.strip_suffix('.').unwrap_or(text);
    !t.is_empty()
        && t.split('.').all(|part| {
            match part.strip_prefix("0x").or_else(|| part.strip_prefix("0X")) {
                Some(hex) => hex.bytes().all(|b| b.is_ascii_hexdigit()),
                None => !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()),
            }
        })
}

/// Parses IPv4 the way `inet_aton` does: one to four parts, each decimal, octal (leading
/// `0`) or hex (`0x`), the last part filling the remaining bytes.
fn parse_inet_aton(text: &str) -> Option<Ipv4Addr> {
    let t = text.strip_suffix('.').unwrap_or(text);
    let parts: Vec<&str> = t.split('.').collect();
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let mut values = Vec::with_capacity(parts.len());
    for part in &parts {
        let (digits, radix) =
            if let Some(h) = part.strip_prefix("0x").or_else(|| part.strip_prefix("0X")) {
                (h, 16)
            } else if part.len() > 1 && part.starts_with('0') {
                (&part[1..], 8)
            } else {
                (*part, 10)
            };
        if digits.is_empty() && radix != 16 {
            return None;
        }
        let value = if digits.is_empty() { 0 } else { u64::from_str_radix(digits, radix).ok()? };
        values.push(value);
    }
    let last = values.len() - 1;
    let mut addr: u64 = 0;
    for (i, v) in values.iter().enumerate() {
        if i < last {
            if *v > 255 {
                return None;
            }
            addr |= v << (8 * (3 - i));
        } else {
            let room = 8 * (4 - i);
            if room < 64 && *v >= (1u64 << room) {
                return None;
            }
            addr |= v;
        }
    }
    u32::try_from(addr).ok().map(Ipv4Addr::from)
}

fn fold_mapped(ip: Ipv6Addr) -> IpAddr {
    match ip.to_ipv4_mapped() {
        Some(v4) => IpAddr::V4(v4),
        None => IpAddr::V6(ip),
    }
}

fn escape(text: &str) -> String {
    text.escape_debug().to_string()
}

/// Whether an address is loopback, private, link-local, unique-local, unspecified or
/// otherwise not a public destination. The egress proxy refuses such a resolved address
/// unless the policy lists that IP (no DNS rebinding into the host or its network).
pub fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.octets()[0] == 0
                || (v4.octets()[0] == 100 && (64..128).contains(&v4.octets()[1])) // CGNAT
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_internal(IpAddr::V4(v4));
            }
            // IPv4-compatible `::a.b.c.d` (deprecated) is judged by the address it embeds.
            if v6.segments()[..6].iter().all(|s| *s == 0)
                && !v6.is_loopback()
                && !v6.is_unspecified()
            {
                let [.., a, b] = v6.segments();
                let v4 = Ipv4Addr::new((a >> 8) as u8, a as u8, (b >> 8) as u8, b as u8);
                return is_internal(IpAddr::V4(v4));
            }
            let seg0 = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (seg0 & 0xfe00) == 0xfc00 // unique local
                || (seg0 & 0xffc0) == 0xfe80 // link local
                || seg0 == 0x0064 // NAT64 well-known prefix 64:ff9b::/96 embeds IPv4
        }
    }
}

#[cfg(test)]
mod tests;
