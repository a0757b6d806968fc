//! Domain pattern parsing and matching, including the hostile spellings of security cases
//! NET-04, NET-06, NET-08 and POL-08.

use super::*;
use proptest::prelude::*;

fn host(s: &str) -> HostName {
    HostName::parse(s).unwrap()
}

#[test]
fn wildcard_matches_subdomains_only() {
    let p = DomainPattern::parse("*.wild.test").unwrap();
    for ok in ["a.wild.test", "a.b.wild.test", "A.WILD.TEST", "a.wild.test."] {
        assert!(p.allows(&host(ok), 443), "{ok}");
    }
    for bad in
        ["wild.test", "evilwild.test", "xwild.test", "wild.test.evil.net", "a.wild.test.evil.net"]
    {
        assert!(!p.allows(&host(bad), 443), "{bad}");
    }
}

#[test]
fn deny_covers_every_spelling_and_subdomains() {
    let d = DomainPattern::parse("blocked.wild.test").unwrap();
    for h in ["blocked.wild.test", "BLOCKED.WILD.TEST", "blocked.wild.test.", "x.blocked.wild.test"]
    {
        assert!(d.denies(&host(h), 443), "{h}");
    }
    assert!(!d.denies(&host("a.wild.test"), 443));
}

#[test]
fn odd_ipv4_spellings_are_ips() {
    for h in ["127.0.0.1", "127.1", "2130706433", "0x7f000001", "0177.0.0.1", "[::ffff:127.0.0.1]"]
    {
        assert_eq!(host(h), HostName::Ip(IpAddr::V4(Ipv4Addr::LOCALHOST)), "{h}");
    }
    for h in ["3323068426", "0xc612000a", "0306.022.0.012", "198.18.10"] {
        assert!(matches!(host(h), HostName::Ip(_)), "{h}");
    }
    assert_eq!(host("198.18.10"), HostName::Ip("198.18.0.10".parse().unwrap()));
}

#[test]
fn unicode_spellings_of_ips_are_ips() {
    // Fullwidth digits and ideographic full stops map to an IPv4 address under IDNA.
    for h in ["\u{ff11}\u{ff12}\u{ff17}.0.0.1", "127\u{3002}0\u{3002}0\u{3002}1"] {
        assert_eq!(host(h), HostName::Ip(IpAddr::V4(Ipv4Addr::LOCALHOST)), "{h}");
    }
    assert!(DomainPattern::parse("*.0.1").is_err());
    assert!(DomainPattern::parse("\u{ff11}\u{ff12}\u{ff17}.1").is_err());
    // Domains whose labels look like hex are still domains.
    assert_eq!(host("1.ba"), HostName::Domain("1.ba".to_owned()));
    assert_eq!(host("0.de"), HostName::Domain("0.de".to_owned()));
}

#[test]
fn ip_literals_match_only_listed_ips() {
    let domain = DomainPattern::parse("allowed.test").unwrap();
    let ip = DomainPattern::parse("198.18.0.10").unwrap();
    let lit = host("198.18.0.10");
    assert!(!domain.allows(&lit, 443));
    assert!(ip.allows(&lit, 443));
    assert!(ip.allows(&host("[::ffff:198.18.0.10]"), 443));
    assert!(!ip.allows(&host("[64:ff9b::c612:a]"), 443));
}

#[test]
fn ports_restrict() {
    let p = DomainPattern::parse("example.com:443").unwrap();
    assert!(p.allows(&host("example.com"), 443));
    assert!(!p.allows(&host("example.com"), 80));
    let v6 = DomainPattern::parse("[::1]:8080").unwrap();
    assert_eq!(v6.to_string(), "[::1]:8080");
}

#[test]
fn a_grant_without_a_port_is_the_web_ports_only() {
    for raw in ["allowed.test", "*.allowed.test", "198.18.0.10", "::1", "[2001:db8::1]"] {
        let p = DomainPattern::parse(raw).unwrap();
        assert_eq!(p.port, PortSpec::Web, "{raw}");
        let h = match &p.host {
            HostPattern::Exact(d) => host(d),
            HostPattern::Subdomains(d) => host(&format!("x.{d}")),
            HostPattern::Ip(ip) => HostName::Ip(*ip),
        };
        assert!(p.allows(&h, 80) && p.allows(&h, 443), "{raw}");
        for port in [1, 22, 25, 79, 81, 442, 444, 3128, 6379, 8080, 65535] {
            assert!(!p.allows(&h, port), "{raw} must not grant port {port}");
        }
        assert_eq!(p.describe_grant(), format!("{p} (ports 80 and 443)"));
    }
    let ssh = DomainPattern::parse("allowed.test:22").unwrap();
    assert!(ssh.allows(&host("allowed.test"), 22));
    assert!(!ssh.allows(&host("allowed.test"), 443));
    let any = DomainPattern::parse("allowed.test:*").unwrap();
    assert_eq!(any.port, PortSpec::Any);
    for port in [1, 22, 80, 443, 6379, 65535] {
        assert!(any.allows(&host("allowed.test"), port), "{port}");
    }
    assert!(!any.allows(&host("other.test"), 443));
    assert_eq!(any.to_string(), "allowed.test:*");
    assert_eq!(any.describe_grant(), "allowed.test:* (every port)");
    assert_eq!(DomainPattern::parse("[::1]:*").unwrap().to_string(), "[::1]:*");
    assert_eq!(DomainPattern::parse("*.allowed.test:*").unwrap().port, PortSpec::Any);
    for bad in ["allowed.test:**", "allowed.test:*1", "*:*", "allowed.test:", "[::1]*"] {
        assert!(DomainPattern::parse(bad).is_err(), "{bad:?} should be refused");
    }
}

#[test]
fn a_refusal_without_a_port_refuses_every_port() {
    let d = DomainPattern::parse("blocked.test").unwrap();
    for port in [1, 22, 80, 443, 6379, 65535] {
        assert!(d.denies(&host("blocked.test"), port), "{port}");
    }
    let one = DomainPattern::parse("blocked.test:25").unwrap();
    assert!(one.denies(&host("blocked.test"), 25));
    assert!(!one.denies(&host("blocked.test"), 443));
    assert!(DomainPattern::parse("blocked.test:*").unwrap().denies(&host("blocked.test"), 7));
}

#[test]
fn ambiguous_patterns_are_refused() {
    for bad in [
        "",
        ".",
        "*",
        "*.com",
        "*.co.uk",
        "ex*ample.com",
        "*.*.example.com",
        "https://example.com",
        "example.com/path",
        "10.0.0.0/8",
        "127.1",
        "example.com:0",
        "example.com:99999",
        "a b",
    ] {
        assert!(DomainPattern::parse(bad).is_err(), "{bad:?} should be refused");
    }
}

#[test]
fn canonical_forms_are_normalized() {
    assert_eq!(DomainPattern::parse("EXAMPLE.COM.").unwrap().to_string(), "example.com");
    assert_eq!(DomainPattern::parse("例え.jp").unwrap().to_string(), "xn--r8jz45g.jp");
    assert_eq!(DomainPattern::parse("::1").unwrap().to_string(), "::1");
    assert_eq!(DomainPattern::parse("[::1]").unwrap().to_string(), "::1");
}

#[test]
fn internal_addresses() {
    for ip in [
        "127.0.0.1",
        "10.0.0.1",
        "192.168.0.1",
        "172.16.0.1",
        "169.254.169.254",
        "0.0.0.0",
        "::1",
        "fd00:ec2::254",
        "fe80::1",
        "::ffff:127.0.0.1",
    ] {
        assert!(is_internal(ip.parse().unwrap()), "{ip}");
    }
    for ip in ["198.18.0.10", "93.184.216.34", "2606:2800:220:1::1"] {
        assert!(!is_internal(ip.parse().unwrap()), "{ip}");
    }
}

proptest! {
    /// `*.a.com` never matches a name that is not a strict subdomain of `a.com`.
    #[test]
    fn wildcard_never_matches_outside(label in "[a-z0-9]{1,10}", tail in "[a-z]{0,5}") {
        let p = DomainPattern::parse("*.a.com").unwrap();
        let evil = format!("{tail}a.com");
        if !tail.is_empty() {
            prop_assert!(!p.allows(&host(&evil), 443));
        }
        prop_assert!(!p.allows(&host("a.com"), 443));
        let sub = format!("{label}.a.com");
        prop_assert!(p.allows(&host(&sub), 443));
        let upper = format!("{label}.A.COM.");
        prop_assert!(p.allows(&host(&upper), 443));
    }

    /// Any 32-bit number written in decimal parses to that IPv4 address.
    #[test]
    fn decimal_ipv4(n in any::<u32>()) {
        prop_assert_eq!(host(&n.to_string()), HostName::Ip(IpAddr::V4(Ipv4Addr::from(n))));
    }
}
