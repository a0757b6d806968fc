//! What a client sends after the head of an absolute-URI request: the request's body, then
//! maybe more requests on the same connection (kept alive, or pipelined without waiting).
//!
//! The proxy serves one request per connection: the target gets the first request's head
//! (rewritten, with `Connection: close`) and exactly its body, delimited as the head says
//! ([`Body`]), and nothing after it. Every later request is still read and checked like the
//! first, so that a refused one is reported, but none is forwarded: the connection ends with
//! the first response, and an HTTP client sends the requests it got no answer for again on a
//! new connection (RFC 9112, section 9.3.2), where each is checked as a first request.
//!
//! Only what was read completely and checked is forwarded: a chunk-size line, a chunk's end
//! and the trailers go on once their line is whole and well-formed, so a malformed body stops
//! the forwarding at the last good line, and the proxy and the target never disagree on
//! where the request ends (request smuggling). After a request that asked to upgrade the
//! protocol, the bytes that follow its body go on unread, as through a tunnel to the same
//! destination (which the same rules grant as `CONNECT`).

use crate::proxy::http::{self, Body, HttpError, MAX_HEAD, Request};

/// The longest chunk-size or trailer line.
const MAX_LINE: usize = 8 * 1024;

/// Where the client's byte stream is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Inside a body of known length: this many bytes left.
    Fixed(u64),
    /// A chunk-size line.
    ChunkSize,
    /// Inside a chunk: this many bytes left.
    ChunkData(u64),
    /// The CRLF after a chunk.
    ChunkEnd,
    /// The trailer lines after the last chunk.
    Trailers,
    /// The head of another request.
    Head,
    /// After an upgrade: everything passes.
    Raw,
    /// Nothing more is read as HTTP: a malformed request, a tunnel, a head too long.
    Ignore,
}

/// The client-to-target direction of an absolute-URI request's connection.
#[derive(Debug)]
pub(crate) struct Pipeline {
    state: State,
    /// Still inside the first request, whose bytes go on to the target.
    first: bool,
    /// Whether the first request asked to upgrade the protocol.
    upgrade: bool,
    /// A line or head being collected.
    pending: Vec<u8>,
    /// Trailer bytes of the current body so far.
    trailers: usize,
}

impl Pipeline {
    /// The stream after the head of the first request, which announced `body`.
    pub(crate) fn new(body: Body, upgrade: bool) -> Pipeline {
        let mut p =
            Pipeline { state: State::Head, first: true, upgrade, pending: Vec::new(), trailers: 0 };
        p.start_body(body);
        p
    }

    /// Takes the next bytes the client sent: appends to `out` what goes on to the target,
    /// and returns the later requests whose heads ended in them, parsed (checked by the
    /// caller, never forwarded).
    pub(crate) fn feed(
        &mut self,
        mut input: &[u8],
        out: &mut Vec<u8>,
    ) -> Vec<Result<Request, HttpError>> {
        let mut later = Vec::new();
        while !input.is_empty() {
            let used = match self.state {
                State::Raw => {
                    out.extend_from_slice(input);
                    input.len()
                }
                State::Ignore => input.len(),
                State::Fixed(left) | State::ChunkData(left) => {
                    let n = usize::try_from(left).unwrap_or(usize::MAX).min(input.len());
                    self.pass(&input[..n], out);
                    let left = left - n as u64;
                    self.state = match (self.state, left) {
                        (State::Fixed(_), 0) => return_after_body(self),
                        (State::Fixed(_), _) => State::Fixed(left),
                        (_, 0) => State::ChunkEnd,
                        _ => State::ChunkData(left),
                    };
                    n
                }
                State::ChunkSize | State::ChunkEnd | State::Trailers => match memchr_nl(input) {
                    Some(nl) if self.pending.len() + nl + 1 > MAX_LINE => {
                        self.malformed();
                        input.len()
                    }
                    Some(nl) => {
                        self.pending.extend_from_slice(&input[..=nl]);
                        let line = std::mem::take(&mut self.pending);
                        self.line(&line, out);
                        nl + 1
                    }
                    None => {
                        self.pending.extend_from_slice(input);
                        if self.pending.len() > MAX_LINE {
                            self.malformed();
                        }
                        input.len()
                    }
                },
                State::Head => {
                    let from = self.pending.len().saturating_sub(3);
                    self.pending.extend_from_slice(input);
                    match http::head_end(&self.pending, from) {
                        Some(end) => {
                            let used = input.len() - (self.pending.len() - end);
                            let head = std::mem::take(&mut self.pending);
                            let parsed = http::parse(&head[..end]);
                            self.state = match &parsed {
                                Ok(Request::Forward { body, .. }) => {
                                    let body = *body;
                                    self.start_body(body);
                                    self.state
                                }
                                // Refused by policy: its body is skipped all the same.
                                Err(HttpError::Refused { .. }) => {
                                    match http::refused_body(&head[..end]) {
                                        Some(body) => {
                                            self.start_body(body);
                                            self.state
                                        }
                                        None => State::Ignore,
                                    }
                                }
                                // A tunnel's bytes, or a head that cannot be framed.
                                Ok(Request::Connect { .. }) | Err(HttpError::Bad(_)) => {
                                    State::Ignore
                                }
                            };
                            later.push(parsed);
                            used
                        }
                        None => {
                            if self.pending.len() > MAX_HEAD {
                                self.malformed();
                            }
                            input.len()
                        }
                    }
                }
            };
            input = &input[used..];
        }
        later
    }

    /// Whether the first request, its body included, has gone on completely.
    #[cfg(test)]
    fn first_done(&self) -> bool {
        !self.first
    }

    fn pass(&self, bytes: &[u8], out: &mut Vec<u8>) {
        if self.first {
            out.extend_from_slice(bytes);
        }
    }

    fn start_body(&mut self, body: Body) {
        self.trailers = 0;
        self.state = match body {
            Body::Empty | Body::Length(0) => return_after_body(self),
            Body::Length(n) => State::Fixed(n),
            Body::Chunked => State::ChunkSize,
        };
    }

    /// A whole line of a chunked body.
    fn line(&mut self, line: &[u8], out: &mut Vec<u8>) {
        let Some(text) = line.strip_suffix(b"\r\n") else { return self.malformed() };
        let next = match self.state {
            State::ChunkSize => match chunk_size(text) {
                Some(0) => State::Trailers,
                Some(n) => State::ChunkData(n),
                None => return self.malformed(),
            },
            State::ChunkEnd if text.is_empty() => State::ChunkSize,
            State::Trailers if text.is_empty() => {
                self.pass(line, out);
                self.state = return_after_body(self);
                return;
            }
            State::Trailers if is_field_line(text) && self.trailers + line.len() <= MAX_HEAD => {
                self.trailers += line.len();
                State::Trailers
            }
            _ => return self.malformed(),
        };
        self.pass(line, out);
        self.state = next;
    }

    /// Stops reading the stream as HTTP; nothing more goes on.
    fn malformed(&mut self) {
        self.first = false;
        self.state = State::Ignore;
        self.pending = Vec::new();
    }
}

/// The state after a body ends: raw after the first request if it asked to upgrade,
/// otherwise the head of the next request (never forwarded).
fn return_after_body(p: &mut Pipeline) -> State {
    if p.first && p.upgrade {
        return State::Raw;
    }
    p.first = false;
    State::Head
}

/// A chunk size: 1 to 16 hex digits, then nothing or `;` and extensions without control
/// characters (other than tab).
fn chunk_size(text: &[u8]) -> Option<u64> {
    let (digits, ext) = match text.iter().position(|&b| b == b';') {
        Some(i) => (&text[..i], Some(&text[i + 1..])),
        None => (text, None),
    };
    if digits.is_empty() || digits.len() > 16 || !digits.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    if ext.is_some_and(|e| e.iter().any(|&b| (b < 0x20 && b != b'\t') || b == 0x7f)) {
        return None;
    }
    u64::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
}

/// `name: value` with a token name and no control characters but tab in the value.
fn is_field_line(text: &[u8]) -> bool {
    let Some(colon) = text.iter().position(|&b| b == b':') else { return false };
    let (name, value) = (&text[..colon], &text[colon + 1..]);
    !name.is_empty()
        && name.iter().all(|&b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
        && !value.iter().any(|&b| (b < 0x20 && b != b'\t') || b == 0x7f)
}

fn memchr_nl(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == b'\n')
}

#[cfg(test)]
mod tests;
