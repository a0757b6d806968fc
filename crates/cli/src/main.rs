//! The `paddock` command: see `paddock --help`. All logic is in the library; this file maps
//! errors to exit statuses (125 for paddock's own) and hands the hidden `__supervise` and
//! `__shim` subcommands to the Linux supervisor and shim.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    #[cfg(target_os = "linux")]
    {
        let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
        if let Some(code) = paddock_linux_bwrap::run_hidden_subcommand(&args) {
            return ExitCode::from(u8::try_from(code.clamp(0, 255)).unwrap_or(125));
        }
    }
    let cli = match paddock::args::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { paddock::commands::EXIT_PADDOCK_ERROR } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match paddock::commands::dispatch(&cli) {
        Ok(code) => ExitCode::from(code),
        // A reader that stopped reading (`paddock plan | head`) is not an error.
        Err(e)
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
                    || c.downcast_ref::<serde_json::Error>()
                        .is_some_and(|j| j.io_error_kind() == Some(std::io::ErrorKind::BrokenPipe))
            }) =>
        {
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("paddock: {e:#}");
            ExitCode::from(paddock::commands::EXIT_PADDOCK_ERROR)
        }
    }
}
