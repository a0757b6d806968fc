//! The JSON report of a run (`paddock run --report FILE`). Its keys are a contract used by
//! tools outside this repo: add keys, never rename or remove one.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use paddock_policy::Violation;
use serde::Serialize;

/// What `--report FILE` contains.
#[derive(Debug, Serialize)]
pub struct RunReport {
    /// paddock's exit status (the task's, 128+N for a signal, 124 on timeout).
    pub exit_code: i32,
    /// The signal that killed the task, if one did.
    pub signal: Option<i32>,
    /// Whether the task ran past `--timeout`.
    pub timed_out: bool,
    /// Wall time of the task.
    pub duration_ms: u64,
    /// Whether denials could be itemized (a tracer or observer ran).
    pub itemized: bool,
    /// Which mechanism itemized them (`strace`, `observe`), if any.
    pub itemized_by: Option<&'static str>,
    /// CPU time of the sandbox (user + system).
    pub cpu_ms: u64,
    /// Largest resident set of any process in the sandbox.
    pub max_rss_kib: u64,
    /// The reported violations.
    pub violations: Vec<Violation>,
}

impl RunReport {
    /// Writes the report atomically (a temp file renamed into place), so a reader never sees
    /// half of it.
    pub fn write(&self, path: &Path) -> Result<()> {
        let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let tmp = dir.join(format!(".paddock-report-{}.tmp", std::process::id()));
        let mut file = std::fs::File::create(&tmp)
            .with_context(|| format!("cannot write the report {}", path.display()))?;
        serde_json::to_writer_pretty(&mut file, self)?;
        file.write_all(b"\n")?;
        file.sync_all().ok();
        std::fs::rename(&tmp, path)
            .with_context(|| format!("cannot write the report {}", path.display()))?;
        Ok(())
    }
}
