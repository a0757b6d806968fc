//! The pipeline: exactly the first request's body goes on, every later head is parsed, fed
//! whole or byte by byte alike.

use super::*;

/// Feeds `input` in pieces of `step` bytes; returns what went on and the later requests'
/// targets (`host:port`, or the error).
fn run(body: Body, upgrade: bool, input: &[u8], step: usize) -> (Vec<u8>, Vec<String>, bool) {
    let mut p = Pipeline::new(body, upgrade);
    let mut out = Vec::new();
    let mut later = Vec::new();
    for piece in input.chunks(step) {
        for r in p.feed(piece, &mut out) {
            later.push(match r {
                Ok(Request::Forward { host, port, .. }) => format!("{host}:{port}"),
                Ok(Request::Connect { host, port }) => format!("CONNECT {host}:{port}"),
                Err(e) => format!("{e:?}"),
            });
        }
    }
    (out, later, p.first_done())
}

/// The same result whatever the pieces.
fn same_in_pieces(body: Body, upgrade: bool, input: &[u8]) -> (Vec<u8>, Vec<String>, bool) {
    let whole = run(body, upgrade, input, input.len().max(1));
    for step in [1, 2, 3, 7] {
        assert_eq!(run(body, upgrade, input, step), whole, "in pieces of {step}");
    }
    whole
}

const SECOND: &str = "GET http://evil.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n";

#[test]
fn nothing_after_a_request_without_body_goes_on() {
    let (out, later, done) = same_in_pieces(Body::Empty, false, SECOND.as_bytes());
    assert!(out.is_empty());
    assert_eq!(later, ["evil.test:80"]);
    assert!(done);
}

#[test]
fn a_fixed_body_goes_on_and_the_next_request_does_not() {
    let input = format!("hello{SECOND}GET http://b.test:81/ HTTP/1.1\r\n\r\n");
    let (out, later, done) = same_in_pieces(Body::Length(5), false, input.as_bytes());
    assert_eq!(out, b"hello");
    assert_eq!(later, ["evil.test:80", "b.test:81"]);
    assert!(done);
    // A later request's own body is skipped, not taken for a head.
    let input = format!(
        "POST http://c.test/ HTTP/1.1\r\nContent-Length: {}\r\n\r\n{SECOND}{SECOND}",
        SECOND.len()
    );
    let (out, later, _) = same_in_pieces(Body::Empty, false, input.as_bytes());
    assert!(out.is_empty());
    assert_eq!(later, ["c.test:80", "evil.test:80"]);
}

#[test]
fn a_chunked_body_goes_on_through_its_trailers() {
    let body = "5;ext=1\r\nhello\r\n0\r\nX-Sum: 1\r\n\r\n";
    let (out, later, done) =
        same_in_pieces(Body::Chunked, false, format!("{body}{SECOND}").as_bytes());
    assert_eq!(String::from_utf8(out).unwrap(), body);
    assert_eq!(later, ["evil.test:80"]);
    assert!(done);
    // A chunk that carries what looks like a request is data.
    let inner = format!("{:x}\r\n{SECOND}\r\n0\r\n\r\n", SECOND.len());
    let (out, later, _) = same_in_pieces(Body::Chunked, false, inner.as_bytes());
    assert_eq!(String::from_utf8(out).unwrap(), inner);
    assert!(later.is_empty());
}

#[test]
fn a_malformed_chunked_body_stops_at_the_last_good_line() {
    for (body, went_on) in [
        ("5\r\nhelloX\r\n0\r\n\r\n", "5\r\nhello"),
        ("5\nhello\r\n0\r\n\r\n", ""),
        ("+5\r\nhello\r\n", ""),
        ("0x5\r\nhello\r\n", ""),
        ("11111111111111111\r\n", ""),
        ("5;a\u{1}b\r\nhello\r\n", ""),
        ("0\r\nbad trailer\r\n\r\n", "0\r\n"),
    ] {
        let input = format!("{body}{SECOND}");
        let (out, later, done) = same_in_pieces(Body::Chunked, false, input.as_bytes());
        assert_eq!(String::from_utf8(out).unwrap(), went_on, "{body:?}");
        assert!(later.is_empty(), "{body:?}: {later:?}");
        assert!(done, "{body:?}");
    }
    let long = format!("{}\r\n", "1;".repeat(MAX_LINE));
    let (out, _, _) = same_in_pieces(Body::Chunked, false, long.as_bytes());
    assert!(out.is_empty());
}

#[test]
fn after_a_connect_or_a_bad_head_nothing_is_read_as_http() {
    let input = format!("CONNECT evil.test:22 HTTP/1.1\r\n\r\n{SECOND}");
    let (_, later, _) = same_in_pieces(Body::Empty, false, input.as_bytes());
    assert_eq!(later, ["CONNECT evil.test:22"]);
    let input = format!("GET / HTTP/1.1\r\n\r\n{SECOND}");
    let (_, later, _) = same_in_pieces(Body::Empty, false, input.as_bytes());
    assert_eq!(later.len(), 1);
    assert!(later[0].starts_with("Bad"), "{later:?}");
}

#[test]
fn a_host_header_for_another_destination_is_reported_as_refused() {
    // Its body is skipped, and the request after it read.
    let input = format!(
        "POST http://allowed.test/ HTTP/1.1\r\nHost: evil.test\r\nContent-Length: {}\r\n\r\n{SECOND}{SECOND}",
        SECOND.len()
    );
    let (_, later, _) = same_in_pieces(Body::Empty, false, input.as_bytes());
    assert_eq!(later.len(), 2);
    assert!(later[0].contains("HostMismatch"), "{later:?}");
    assert_eq!(later[1], "evil.test:80");
}

#[test]
fn after_an_upgrade_the_bytes_go_on_unread() {
    let input = format!("frames{SECOND}");
    let (out, later, done) = same_in_pieces(Body::Empty, true, input.as_bytes());
    assert_eq!(out, input.as_bytes());
    assert!(later.is_empty());
    assert!(!done);
}

#[test]
fn an_endless_head_is_bounded() {
    let mut p = Pipeline::new(Body::Empty, false);
    let mut out = Vec::new();
    let line = [b'a'; 4096];
    for _ in 0..(2 * MAX_HEAD / line.len()) {
        assert!(p.feed(&line, &mut out).is_empty());
    }
    assert!(p.pending.len() <= MAX_HEAD + line.len());
    assert!(out.is_empty());
}
