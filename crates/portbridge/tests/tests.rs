//! The integration tests of paddock-portbridge. Everything runs on loopback (127.0.0.1, ::1)
//! and unix sockets in temporary directories, against servers the tests start themselves.

// Marks the whole binary as test code, so that clippy's unwrap-in-tests allowance covers the
// helpers too.
#![cfg(test)]

// Shared helpers: temporary dirs, echo servers, thread counting.
mod util;

// Port bridges: both directions, half-close, hang-ups, concurrency, shutdown, errors.
mod relay;

// Inbound grants by handing connections over a descriptor channel.
#[cfg(target_os = "linux")]
mod handoff;

// The egress proxy: NET cases, HTTP and SOCKS5, per-task rules, caps and cleanup.
mod proxy;
