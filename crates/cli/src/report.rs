//! What a finished task's report says: what `paddock run --report FILE` writes, as typed
//! fields. Its JSON keys are a contract used by tools outside this repo: add keys, never
//! rename or remove one.

use std::io::Write;
use std::path::Path;

use paddock_policy::Violation;
use serde::Serialize;

/// How a task ended and what it was denied.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Report {
    /// The task's exit status: its own, 128+N when signal N ended it, 124 when it ran past
    /// its timeout, 125 when the sandbox could not be set up.
    pub exit_code: i32,
    /// The signal that ended the task, if one did.
    pub signal: Option<i32>,
    /// Whether the task ran past its timeout and was killed.
    pub timed_out: bool,
    /// Wall time of the task.
    pub duration_ms: u64,
    /// Whether denials could be itemized (a tracer, an observer or the proxy ran).
    pub itemized: bool,
    /// Which mechanism itemized them (`observe`, `strace`, `proxy`), if any.
    pub itemized_by: Option<&'static str>,
    /// CPU time of the sandbox (user + system).
    pub cpu_ms: u64,
    /// Largest resident set of any process in the sandbox.
    pub max_rss_kib: u64,
    /// What the task was denied.
    pub violations: Vec<Violation>,
    /// Notes and warnings of the run (the config's, the plan's, the itemizer's), one
    /// sentence each, without a prefix; the CLI prints them as `paddock: ...`.
    #[serde(skip)]
    pub notes: Vec<String>,
    /// The summary of the denials with what to grant, and hints, for a person to read.
    #[serde(skip)]
    pub summary: Vec<String>,
}

impl Report {
    /// Whether the task exited 0.
    pub fn success(&self) -> bool {
        self.exit_code == 0
    }

    /// Writes the report as JSON, atomically (a temp file renamed into place), so that a
    /// reader never sees half of it.
    pub fn write_json(&self, path: &Path) -> std::io::Result<()> {
        let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let tmp = dir.join(format!(".{name}.paddock-{}.tmp", std::process::id()));
        let written = (|| {
            let mut file = std::fs::File::create(&tmp)?;
            serde_json::to_writer_pretty(&mut file, self)?;
            file.write_all(b"\n")?;
            file.sync_all()?;
            std::fs::rename(&tmp, path)
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written
    }
}

/// What [`Child::wait_with_output`](crate::Child::wait_with_output) returns: the report and
/// the captured output of the streams that were piped.
#[derive(Clone, Debug)]
pub struct Output {
    /// How the task ended and what it was denied.
    pub report: Report,
    /// Its stdout, when piped (cut at the capture limit, with a marker saying how much).
    pub stdout: Vec<u8>,
    /// Its stderr, when piped (cut likewise).
    pub stderr: Vec<u8>,
}
