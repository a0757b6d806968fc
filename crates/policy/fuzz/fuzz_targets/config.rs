//! Fuzzes the config readers (`paddock.toml` and sandbox-runtime JSON) and resolution on a
//! small fake host: no input may panic, and a policy that loads must resolve or fail with an
//! error, never crash.

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use paddock_policy::{Context, FakeHost, Format, load_str, resolve};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let host = FakeHost::new()
        .dir("/home/u/proj/src")
        .file("/home/u/.ssh/id", "x")
        .symlink("/home/u/proj/out", "/home/u/.ssh");
    let ctx = Context::new("/home/u/proj", "/home/u");
    for format in [Format::Toml, Format::SrtJson] {
        if let Ok(policy) = load_str(text, Path::new("fuzz.toml"), format) {
            let _ = resolve(&policy, &ctx, &host);
        }
    }
});
