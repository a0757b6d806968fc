//! How long a task runner waits for a sandboxed task: `Sandbox::spawn` + `Child::wait` of
//! `true`, timed inside one process, for `cargo xtask bench spawn`.
//!
//! ```sh
//! cargo run --release -p paddock --example spawn_timing -- PROJECT COUNT [SUPERVISOR] [off] [prewarm]
//! ```
//!
//! Builds one [`Sandbox`] for PROJECT (its `paddock.toml`, or the default policy), then
//! spawns and waits for `true` COUNT times, printing each one's microseconds on a line of
//! its own: the first is the cold spawn (the first of this process), the rest are warm (the
//! process and the host's caches already used). SUPERVISOR is the `paddock-supervisor` to
//! run (default: this program, re-executed); `off` turns itemizing off; `prewarm` keeps two
//! sandboxes set up ahead (`SandboxBuilder::prewarm`) and pauses 50 ms, untimed, before each
//! spawn: the time a task runner spends between tasks, in which the one used is replaced.

use std::process::ExitCode;
use std::time::Instant;

use paddock::{Command, ItemizeMode, Sandbox, Stdio};

fn main() -> ExitCode {
    if let Some(code) = paddock::run_supervisor_if_asked() {
        return ExitCode::from(u8::try_from(code).unwrap_or(125));
    }
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("spawn_timing: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [project, count, rest @ ..] = args.as_slice() else {
        return Err("usage: spawn_timing PROJECT COUNT [SUPERVISOR] [off]".into());
    };
    let count: usize = count.parse()?;
    let mut builder = Sandbox::builder(project);
    builder = match rest.first().filter(|s| *s != "off" && *s != "prewarm") {
        Some(supervisor) => builder.supervisor(supervisor),
        None => builder.supervise_with_current_exe(),
    };
    if rest.iter().any(|s| s == "off") {
        builder = builder.itemize(ItemizeMode::Off);
    }
    let prewarm = rest.iter().any(|s| s == "prewarm");
    if prewarm {
        builder = builder.prewarm(2);
    }
    let sandbox = builder.build()?;
    for _ in 0..count {
        if prewarm {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let started = Instant::now();
        let mut child = sandbox.spawn(
            Command::new("true").stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()),
        )?;
        let report = child.wait()?;
        let micros = started.elapsed().as_micros();
        if report.exit_code != 0 {
            return Err(format!("true exited {} in the sandbox", report.exit_code).into());
        }
        println!("{micros}");
    }
    Ok(())
}
