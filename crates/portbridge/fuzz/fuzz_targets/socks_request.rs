//! Fuzzes the egress proxy's SOCKS5 side: the greeting (methods) and the request (command,
//! address of each type, port) a task sends after the version byte. Run with `cargo fuzz
//! run socks_request` in `crates/portbridge`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    paddock_portbridge::fuzzing::socks_handshake(data);
});
