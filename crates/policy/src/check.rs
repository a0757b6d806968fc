//! What a host probe found, check by check, for `paddock check` on every platform: each
//! check names what was looked at, what was found and, when it is not fine, the fix in the
//! user's terms. The probes themselves live in the platform crates.

use serde::Serialize;

/// The outcome of one check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Fine.
    Ok,
    /// Works, with less (itemizing, for example).
    Warn,
    /// paddock cannot sandbox until this is fixed.
    Fail,
}

/// One check: what was looked at, what was found, and the fix.
#[derive(Clone, Debug, Serialize)]
pub struct Check {
    /// Short name (`bwrap`, `user-namespaces`, ...).
    pub name: &'static str,
    /// Outcome.
    pub status: Status,
    /// What was found.
    pub message: String,
    /// What to do, in the user's terms, when not ok.
    pub fix: Option<String>,
}

/// Every check, in order.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CheckReport {
    /// The checks.
    pub checks: Vec<Check>,
}

impl CheckReport {
    /// Whether no check failed.
    pub fn ok(&self) -> bool {
        self.checks.iter().all(|c| c.status != Status::Fail)
    }

    /// Adds a check.
    pub fn push(&mut self, name: &'static str, status: Status, message: String, fix: Option<&str>) {
        self.checks.push(Check { name, status, message, fix: fix.map(str::to_owned) });
    }
}
