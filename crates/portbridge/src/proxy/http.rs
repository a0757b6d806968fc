//! The HTTP side of the proxy: reading a request head, and turning it into a destination.
//!
//! Two kinds of request are served:
//! - `CONNECT host:port`: a tunnel. The authority is the destination that is checked; what
//!   flows inside is the task's business, except that a TLS ClientHello naming another server
//!   is refused (see `sni`).
//! - An absolute-URI request (`GET http://host/path HTTP/1.1`): the head is rewritten to
//!   origin form (`GET /path`), hop-by-hop headers are dropped, and `Connection: close` is set
//!   so that one connection carries one request to one destination. A `Host` header that
//!   names another destination than the URI is refused, so the header cannot widen access.
//!   The body's length is read from the head ([`Body`]; a head whose framing is ambiguous,
//!   both `Content-Length` and `Transfer-Encoding` or differing lengths, is refused), so
//!   that the proxy knows where the request ends and what follows is another request (see
//!   `pipeline`).
//!
//! The head is re-serialized from the parsed lines with CRLF endings, so the target sees only
//! what was checked; obsolete line folding and bare CRs are refused.

use std::io::Read;

use paddock_policy::HostName;

use crate::proxy::rules::RefusalReason;
use crate::stream::Stream;

/// The most a request head may take.
pub(crate) const MAX_HEAD: usize = 64 * 1024;

/// A parsed proxy request.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Request {
    /// `CONNECT`: open a tunnel.
    Connect { host: HostName, port: u16 },
    /// An absolute-URI request; `head` is what goes to the target, `body` how long the body
    /// that follows the head is, `upgrade` whether the client asked for another protocol.
    Forward { host: HostName, port: u16, head: Vec<u8>, body: Body, upgrade: bool },
}

/// How the body of a request is delimited (RFC 9112, section 6.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Body {
    /// Neither `Content-Length` nor `Transfer-Encoding`: no body.
    Empty,
    /// `Content-Length: N`.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// Why a head is not served.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum HttpError {
    /// Malformed or not a proxy request: `400`, not a policy matter.
    Bad(String),
    /// Well-formed, but refused by policy: `403` and a violation for `target`.
    Refused { target: String, reason: RefusalReason },
}

/// Reads until the end of the head. Returns the head (with its final empty line) and the
/// bytes that followed it.
pub(crate) fn read_head(stream: &Stream, mut buf: Vec<u8>) -> Result<(Vec<u8>, Vec<u8>), String> {
    let mut scanned = 0;
    loop {
        if let Some(end) = head_end(&buf, scanned) {
            let rest = buf.split_off(end);
            return Ok((buf, rest));
        }
        scanned = buf.len().saturating_sub(3);
        if buf.len() >= MAX_HEAD {
            return Err(format!("request head longer than {MAX_HEAD} bytes"));
        }
        let mut chunk = [0u8; 8192];
        let mut r = stream;
        match r.read(&mut chunk) {
            Ok(0) => return Err("connection closed before the end of the request head".into()),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) => return Err(format!("reading the request head: {e}")),
        }
    }
}

/// The index just past the empty line ending a head, searching from `from`.
pub(crate) fn head_end(buf: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while i < buf.len() {
        if buf[i] == b'\n' {
            if buf[..i].ends_with(b"\n") {
                return Some(i + 1);
            }
            if buf[..i].ends_with(b"\n\r") {
                return Some(i + 1);
            }
        }
        i += 1;
    }
    None
}

/// Parses a head into a request.
pub(crate) fn parse(head: &[u8]) -> Result<Request, HttpError> {
    let text = std::str::from_utf8(head).map_err(|_| bad("the request head is not UTF-8"))?;
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let request_line = lines.next().unwrap_or("");
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad("malformed request line"));
    };
    if !method.bytes().all(is_token) || method.is_empty() {
        return Err(bad("malformed method"));
    }
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err(bad("only HTTP/1.0 and HTTP/1.1 are proxied"));
    }
    // The target is forwarded (its path): no control character may reach the target.
    if target.is_empty() || target.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return Err(bad("malformed request target"));
    }
    let mut headers: Vec<(&str, &str)> = Vec::new();
    for line in lines {
        if line.is_empty() {
            break;
        }
        if line.starts_with([' ', '\t']) {
            return Err(bad("folded header lines are not accepted"));
        }
        let (name, value) = line.split_once(':').ok_or_else(|| bad("malformed header line"))?;
        if name.is_empty() || !name.bytes().all(is_token) {
            return Err(bad("malformed header name"));
        }
        if value.bytes().any(|b| b == b'\r' || b == 0) {
            return Err(bad("control character in a header value"));
        }
        headers.push((name, value.trim_matches([' ', '\t'])));
    }
    if method == "CONNECT" {
        let (host, port) =
            parse_authority(target, None).map_err(|detail| refused(target, detail))?;
        return Ok(Request::Connect { host, port });
    }
    let Some(after_scheme) = strip_prefix_ignore_case(target, "http://") else {
        return Err(bad(if target.starts_with('/') {
            "this is a proxy: send an absolute URI (http://host/path) or CONNECT"
        } else {
            "only http:// URIs are forwarded; use CONNECT for anything else"
        }));
    };
    let split = after_scheme.find(['/', '?', '#']).unwrap_or(after_scheme.len());
    let (authority, rest) = after_scheme.split_at(split);
    if authority.contains('@') {
        return Err(bad("credentials in the URI are not forwarded"));
    }
    let (host, port) =
        parse_authority(authority, Some(80)).map_err(|detail| refused(authority, detail))?;
    let rest = rest.split('#').next().unwrap_or("");
    let path = if rest.starts_with('/') { rest.to_owned() } else { format!("/{rest}") };

    let mut host_headers = headers.iter().filter(|(n, _)| n.eq_ignore_ascii_case("host"));
    let host_header = host_headers.next().map(|(_, v)| *v);
    if host_headers.next().is_some() {
        return Err(bad("more than one Host header"));
    }
    if let Some(value) = host_header {
        let agrees = parse_authority(value, Some(80)).is_ok_and(|hp| hp == (host.clone(), port));
        if !agrees {
            return Err(HttpError::Refused {
                target: target_text(&host, port),
                reason: RefusalReason::HostMismatch { host: value.escape_debug().to_string() },
            });
        }
    }
    let body = body_framing(&headers, version)?;
    let upgrade = headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("upgrade"))
        && headers.iter().any(|(n, v)| {
            n.eq_ignore_ascii_case("connection")
                && v.split(',').any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
        });
    let mut out = format!("{method} {path} {version}\r\n");
    if host_header.is_none() {
        out.push_str(&format!("Host: {authority}\r\n"));
    }
    for (name, value) in &headers {
        if HOP_BY_HOP.iter().any(|h| name.eq_ignore_ascii_case(h)) {
            continue;
        }
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str(if upgrade { "Connection: Upgrade\r\n\r\n" } else { "Connection: close\r\n\r\n" });
    Ok(Request::Forward { host, port, head: out.into_bytes(), body, upgrade })
}

/// The framing of the body of a well-formed absolute-URI head that [`parse`] refused by
/// policy (its `Host` or its destination), so that what follows it can still be read as the
/// next request; `None` for anything else.
pub(crate) fn refused_body(head: &[u8]) -> Option<Body> {
    let text = std::str::from_utf8(head).ok()?;
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let request_line = lines.next()?;
    if request_line.starts_with("CONNECT ") {
        return None;
    }
    let version = request_line.rsplit(' ').next()?;
    let headers = lines
        .take_while(|l| !l.is_empty())
        .map(|l| l.split_once(':').map(|(n, v)| (n, v.trim_matches([' ', '\t']))))
        .collect::<Option<Vec<_>>>()?;
    body_framing(&headers, version).ok()
}

/// The body's framing, from `Content-Length` and `Transfer-Encoding`. Anything two parsers
/// could read differently (both headers, lengths that differ, a coding other than a final
/// `chunked`, a transfer coding in HTTP/1.0) is refused: the proxy and the target must agree
/// on where the request ends.
fn body_framing(headers: &[(&str, &str)], version: &str) -> Result<Body, HttpError> {
    let mut length: Option<u64> = None;
    let mut codings = Vec::new();
    for (name, value) in headers {
        if name.eq_ignore_ascii_case("content-length") {
            for v in value.split(',').map(|v| v.trim_matches([' ', '\t'])) {
                let n = (!v.is_empty() && v.len() <= 19 && v.bytes().all(|b| b.is_ascii_digit()))
                    .then(|| v.parse::<u64>().ok())
                    .flatten()
                    .ok_or_else(|| bad("malformed Content-Length"))?;
                if length.is_some_and(|l| l != n) {
                    return Err(bad("differing Content-Length values"));
                }
                length = Some(n);
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            codings.extend(value.split(',').map(|v| v.trim_matches([' ', '\t'])));
        }
    }
    if codings.is_empty() {
        return Ok(length.map_or(Body::Empty, Body::Length));
    }
    if length.is_some() {
        return Err(bad("both Content-Length and Transfer-Encoding"));
    }
    if version == "HTTP/1.0" {
        return Err(bad("Transfer-Encoding in an HTTP/1.0 request"));
    }
    let chunked = |c: &str| c.eq_ignore_ascii_case("chunked");
    if codings.last().is_some_and(|c| chunked(c))
        && codings.iter().filter(|c| chunked(c)).count() == 1
    {
        Ok(Body::Chunked)
    } else {
        Err(bad("a request body's transfer coding must end with `chunked`, once"))
    }
}

/// Headers that concern the hop to the proxy, not the target.
const HOP_BY_HOP: &[&str] =
    &["connection", "proxy-connection", "keep-alive", "proxy-authorization", "proxy-authenticate"];

/// `host:port`, `[v6]:port`, or `host` with `default_port`.
pub(crate) fn parse_authority(
    text: &str,
    default_port: Option<u16>,
) -> Result<(HostName, u16), String> {
    let (host, port) = if text.starts_with('[') {
        let close = text.find(']').ok_or("unclosed `[`")?;
        let (h, after) = text.split_at(close + 1);
        match after {
            "" => (h, None),
            p => (h, Some(p.strip_prefix(':').ok_or("expected `:PORT` after `]`")?)),
        }
    } else {
        match text.rsplit_once(':') {
            Some((h, _)) if h.contains(':') => return Err("an IPv6 address needs brackets".into()),
            Some((h, p)) => (h, Some(p)),
            None => (text, None),
        }
    };
    let port = match port {
        Some(p) if !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()) => {
            match p.parse::<u16>() {
                Ok(n) if n != 0 => n,
                _ => return Err(format!("`{}` is not a port", p.escape_debug())),
            }
        }
        Some(p) => return Err(format!("`{}` is not a port", p.escape_debug())),
        None => default_port.ok_or("the destination needs a port")?,
    };
    Ok((crate::proxy::rules::canonical(HostName::parse(host)?), port))
}

/// `host:port` for reports, IPv6 in brackets.
pub(crate) fn target_text(host: &HostName, port: u16) -> String {
    format!("{host}:{port}")
}

fn refused(raw: &str, detail: String) -> HttpError {
    HttpError::Refused {
        target: raw.escape_debug().to_string(),
        reason: RefusalReason::BadHost { detail },
    }
}

fn bad(msg: &str) -> HttpError {
    HttpError::Bad(msg.to_owned())
}

fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix).then(|| &text[prefix.len()..])
}

/// A short response with a text body, closing the connection.
pub(crate) fn response(status: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn forward(head: &str) -> Result<(String, u16, String), HttpError> {
        match parse(head.as_bytes())? {
            Request::Forward { host, port, head, .. } => {
                Ok((host.to_string(), port, String::from_utf8(head).unwrap()))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn absolute_uri_is_rewritten_to_origin_form() {
        let (host, port, head) = forward(
            "GET http://Example.TEST./a/b?q=1#frag HTTP/1.1\r\nHost: example.test\r\nProxy-Authorization: x\r\nConnection: keep-alive\r\nAccept: */*\r\n\r\n",
        )
        .unwrap();
        assert_eq!((host.as_str(), port), ("example.test", 80));
        assert_eq!(
            head,
            "GET /a/b?q=1 HTTP/1.1\r\nHost: example.test\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
    }

    #[test]
    fn missing_host_header_is_added_and_query_only_gets_a_slash() {
        let (_, port, head) = forward("GET http://example.test:8080?x HTTP/1.0\n\n").unwrap();
        assert_eq!(port, 8080);
        assert_eq!(
            head,
            "GET /?x HTTP/1.0\r\nHost: example.test:8080\r\nConnection: close\r\n\r\n"
        );
    }

    #[test]
    fn host_header_must_agree_with_the_uri() {
        for (uri, host) in [
            ("http://allowed.test/", "evil.test"),
            ("http://allowed.test/", "allowed.test:81"),
            ("http://allowed.test:8080/", "allowed.test"),
            ("http://allowed.test/", "allowed.test.evil.test"),
        ] {
            let err = forward(&format!("GET {uri} HTTP/1.1\r\nHost: {host}\r\n\r\n")).unwrap_err();
            assert!(
                matches!(
                    &err,
                    HttpError::Refused { reason: RefusalReason::HostMismatch { .. }, .. }
                ),
                "{uri} {host}: {err:?}"
            );
        }
        for (uri, host) in [
            ("http://allowed.test/", "ALLOWED.test."),
            ("http://allowed.test/", "allowed.test:80"),
            ("http://127.1:80/", "127.0.0.1"),
        ] {
            forward(&format!("GET {uri} HTTP/1.1\r\nHost: {host}\r\n\r\n")).unwrap();
        }
    }

    #[test]
    fn malformed_heads_are_bad_requests() {
        for head in [
            "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
            "GET https://allowed.test/ HTTP/1.1\r\n\r\n",
            "GET http://u:p@allowed.test/ HTTP/1.1\r\n\r\n",
            "GET http://allowed.test/ HTTP/2\r\n\r\n",
            "GET  http://allowed.test/ HTTP/1.1\r\n\r\n",
            "GET http://allowed.test/ HTTP/1.1\r\nX: a\r\n b\r\n\r\n",
            "GET http://allowed.test/ HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
            "GET http://allowed.test/ HTTP/1.1\r\nX: a\rb\r\n\r\n",
            // Found by the http_request fuzz target: a NUL in the path was forwarded.
            "GET http://allowed.test/\u{f}\0\0 HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
            "GET http://allowed.test/a\u{7f}b HTTP/1.1\r\n\r\n",
            "GET http://allowed.test/a\tb HTTP/1.1\r\n\r\n",
        ] {
            assert!(matches!(parse(head.as_bytes()), Err(HttpError::Bad(_))), "{head:?}");
        }
    }

    #[test]
    fn body_framing_is_read_and_ambiguity_refused() {
        let framing = |headers: &str| match parse(
            format!("POST http://allowed.test/ HTTP/1.1\r\n{headers}\r\n").as_bytes(),
        ) {
            Ok(Request::Forward { body, .. }) => Ok(body),
            Ok(other) => panic!("{other:?}"),
            Err(e) => Err(e),
        };
        assert_eq!(framing(""), Ok(Body::Empty));
        assert_eq!(framing("Content-Length: 12\r\n"), Ok(Body::Length(12)));
        assert_eq!(framing("Content-Length: 5, 5\r\nContent-Length: 5\r\n"), Ok(Body::Length(5)));
        assert_eq!(framing("Transfer-Encoding: gzip, Chunked\r\n"), Ok(Body::Chunked));
        for bad in [
            "Content-Length: 5\r\nContent-Length: 6\r\n",
            "Content-Length: 5, 6\r\n",
            "Content-Length: +5\r\n",
            "Content-Length: 0x5\r\n",
            "Content-Length: 99999999999999999999\r\n",
            "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
            "Transfer-Encoding: chunked, gzip\r\n",
            "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
            "Transfer-Encoding: identity\r\n",
        ] {
            assert!(matches!(framing(bad), Err(HttpError::Bad(_))), "{bad:?}");
        }
        let old = parse(b"POST http://a.test/ HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n");
        assert!(matches!(old, Err(HttpError::Bad(_))));
    }

    #[test]
    fn connect_authorities() {
        let ok = |a: &str| match parse(format!("CONNECT {a} HTTP/1.1\r\n\r\n").as_bytes()) {
            Ok(Request::Connect { host, port }) => format!("{host} {port}"),
            other => format!("{other:?}"),
        };
        assert_eq!(ok("Allowed.Test.:443"), "allowed.test 443");
        assert_eq!(ok("[::ffff:127.0.0.1]:1"), "127.0.0.1 1");
        assert_eq!(ok("0x7f000001:80"), "127.0.0.1 80");
        assert_eq!(ok("[::1]:8080"), "[::1] 8080");
        for a in
            ["allowed.test", "allowed.test:0", "allowed.test:+1", "::1:80", "a..b:1", "x:99999"]
        {
            assert!(ok(a).contains("Refused"), "{a}: {}", ok(a));
        }
    }

    #[test]
    fn head_end_finds_crlf_and_lf_forms() {
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n\r\nbody", 0), Some(18));
        assert_eq!(head_end(b"GET / HTTP/1.1\n\nbody", 0), Some(16));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nA: b\r\n", 0), None);
    }
}
