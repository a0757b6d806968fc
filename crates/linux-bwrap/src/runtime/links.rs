//! Protected names that are symbolic links: kept as links, checked after the run.
//!
//! A bind of bubblewrap's cannot cover a link (`mount(2)` follows it to the target), so each
//! protected link inside a write grant is mounted read-only on itself before bwrap starts
//! ([`crate::private_ns::SelfMounts`]): the task can neither remove nor replace it. The run
//! still records each protected link before the task starts and says after it ends which
//! one is gone or points elsewhere: on a kernel without the new mount API (before Linux
//! 5.12) the link is only checked, so that nothing the task left there runs unnoticed.

use std::path::PathBuf;

use paddock_policy::{FileKind, ProtectedState, ResolvedPolicy};

/// The protected links of a run, with what each pointed to at the start.
#[derive(Debug, Default)]
pub struct ProtectedLinks(Vec<(PathBuf, PathBuf)>);

impl ProtectedLinks {
    /// Reads each protected link of `policy` now.
    pub fn record(policy: &ResolvedPolicy) -> ProtectedLinks {
        let links = policy
            .protected
            .iter()
            .filter(|p| p.state == ProtectedState::Exists { kind: FileKind::Symlink })
            .filter_map(|p| {
                let path = p.path.as_path().to_path_buf();
                std::fs::read_link(&path).ok().map(|target| (path, target))
            })
            .collect();
        ProtectedLinks(links)
    }

    /// One line per protected link that is gone or points elsewhere now.
    pub fn changed(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (path, target) in &self.0 {
            let now = std::fs::symlink_metadata(path);
            let same = now.is_ok_and(|m| m.file_type().is_symlink())
                && std::fs::read_link(path).is_ok_and(|t| &t == target);
            if !same {
                out.push(format!(
                    "the protected link {} (to {}) was removed or replaced during the run; check what is there before anything runs it",
                    path.display(),
                    target.display()
                ));
            }
        }
        out
    }
}
