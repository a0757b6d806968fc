//! Entry points for the fuzz targets (`fuzz/`, feature `fuzzing`): the parsers where a
//! task's bytes enter the host, without sockets. Not a stable API.

use std::io::Cursor;

use crate::proxy::http::{self, MAX_HEAD, Request};
use crate::proxy::pipeline::Pipeline;
use crate::proxy::socks;

/// Reads `bytes` as the HTTP side of a proxy connection: the first head, then the rest
/// through the pipeline in pieces of `step` bytes. Panics if an invariant breaks: a
/// forwarded head must be a well-formed head of its own, and nothing after the first
/// request may go on (unless it asked to upgrade).
pub fn http_connection(bytes: &[u8], step: usize) {
    let Some(end) = http::head_end(bytes, 0) else { return };
    if end > MAX_HEAD {
        return;
    }
    let (head, rest) = bytes.split_at(end);
    let Ok(Request::Forward { head: out_head, body, upgrade, .. }) = http::parse(head) else {
        return;
    };
    assert_eq!(http::head_end(&out_head, 0), Some(out_head.len()), "forwarded head ends once");
    assert!(out_head.ends_with(b"\r\n\r\n"));
    assert!(!out_head.contains(&0), "NUL in a forwarded head");
    let mut whole = Pipeline::new(body, upgrade);
    let mut whole_out = Vec::new();
    let whole_later = whole.feed(rest, &mut whole_out).len();
    let mut pieces = Pipeline::new(body, upgrade);
    let mut pieces_out = Vec::new();
    let mut pieces_later = 0;
    for piece in rest.chunks(step.max(1)) {
        pieces_later += pieces.feed(piece, &mut pieces_out).len();
    }
    assert_eq!(whole_out, pieces_out, "what goes on depends on how the bytes were read");
    assert_eq!(whole_later, pieces_later);
    assert!(rest.starts_with(&whole_out), "only a prefix of what the client sent goes on");
    if !upgrade {
        assert!(whole_out.len() <= rest.len());
    }
}

/// Reads `bytes` as a SOCKS5 connection after its version byte; the answer goes nowhere.
pub fn socks_handshake(bytes: &[u8]) {
    let mut answer = Vec::new();
    if let Ok(req) = socks::handshake(&mut Cursor::new(bytes), &mut answer)
        && let Ok(host) = &req.host
    {
        let _ = http::target_text(host, req.port);
    }
    assert!(answer.len() <= 2 + 22, "one method choice and at most one reply");
}
