//! Deny targets that appeared during the run: said after it, once the placeholders are gone.
//!
//! A `deny.read` entry missing at start is masked on a placeholder for the task's lifetime
//! (`paddock_policy` resolution, `linux-bwrap`'s mounts). Whatever a host program wrote
//! there meanwhile went into the placeholder, which is then kept, not removed: a path that
//! is there after the run, and not empty, appeared during it, hidden from the task.

use paddock_policy::{DenyAnchor, ResolvedPolicy};

/// The deny anchors of a policy that were missing at start: what may appear during the run.
#[derive(Debug, Default)]
pub struct Missing(Vec<DenyAnchor>);

impl Missing {
    /// `policy`'s deny anchors missing at start.
    pub fn of(policy: &ResolvedPolicy) -> Missing {
        Missing(policy.read_deny.iter().filter(|a| a.kind.is_none()).cloned().collect())
    }

    /// One line per anchor missing at start that holds something now.
    pub fn appeared(&self) -> Vec<String> {
        let mut out = Vec::new();
        for anchor in &self.0 {
            let path = anchor.path.as_path();
            let Ok(meta) = std::fs::symlink_metadata(path) else { continue };
            let filled = if meta.is_dir() {
                std::fs::read_dir(path).is_ok_and(|mut d| d.next().is_some())
            } else {
                !meta.is_file() || meta.len() > 0
            };
            if filled {
                out.push(format!(
                    "{} appeared during the run ({}); it was hidden from the task",
                    anchor.path, anchor.origin
                ));
            }
        }
        out
    }
}
