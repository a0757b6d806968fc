//! `paddock-supervisor`: the sandbox's pid 1 and the strace shim in a binary of their own.
//!
//! The same code as `paddock __supervise` and `paddock __shim`
//! (`paddock_linux_bwrap::run_hidden_subcommand`), without the CLI around it. Every run
//! starts it inside the sandbox, so its start-up is on every task's path: small, and built
//! statically (`cargo xtask build`), it starts without the dynamic loader's work (loading
//! libc and libgcc_s, relocating, resolving symbols), about 0.4 ms less per run than
//! re-executing the dynamically linked `paddock`. `paddock` uses it when it finds it next to
//! itself, and re-executes itself otherwise.

use std::process::ExitCode;

fn main() -> ExitCode {
    #[cfg(target_os = "linux")]
    {
        let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
        if let Some(code) = paddock_linux_bwrap::run_hidden_subcommand(&args) {
            return ExitCode::from(u8::try_from(code.clamp(0, 255)).unwrap_or(125));
        }
    }
    eprintln!("paddock-supervisor runs inside paddock's sandboxes; run `paddock` instead");
    ExitCode::from(125)
}
