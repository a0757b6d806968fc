//! Fuzzes the egress proxy's HTTP side, where a task's bytes enter the host: the request
//! line and headers of the first request, its rewriting for the target, and the body and
//! later requests that follow on the connection (read whole and in pieces alike). The first
//! byte sets the piece size; the rest is the connection. Run with `cargo fuzz run
//! http_request` in `crates/portbridge`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&step, bytes)) = data.split_first() else { return };
    paddock_portbridge::fuzzing::http_connection(bytes, usize::from(step % 16) + 1);
});
