//! Deny entries that do not exist when the task starts.
//!
//! A `deny.read` entry missing at start is masked anyway: its anchor is the outermost
//! missing component of its path (the path itself, or an ancestor), which a backend that
//! hides by mounting makes a placeholder for on the host and masks for the task's
//! lifetime, so that whatever appears there during the run is hidden (and its reads
//! reported). A dangling link's anchor is the outermost missing component of its target.
//!
//! The built-in secret list is not masked this way: most homes lack most of its forty
//! locations, and a placeholder for each in the home directory on every run would show
//! to every other program there (an empty `~/.netrc`, `~/.docker`, ...).

use crate::error::Result;
use crate::host::Host;
use crate::model::Entry;
use crate::path::AbsPathBuf;

/// The origin key prefix of the built-in secret entries.
const BUILTIN_KEY: &str = "deny.builtin-secrets";

/// Whether a missing deny entry is masked (a user's entry), not dropped (a built-in one).
pub fn masks_when_missing<T>(entry: &Entry<T>) -> bool {
    !entry.origin.key().starts_with(BUILTIN_KEY)
}

/// The outermost missing component of `path` (canonical, with a missing tail): the path
/// itself when its parent exists.
pub fn outermost_missing(host: &dyn Host, path: &AbsPathBuf) -> Result<AbsPathBuf> {
    let mut out = path.clone();
    let mut at = path.parent();
    while let Some(dir) = at {
        match host.kind(dir.as_path()) {
            Ok(None) => out = dir.clone(),
            Ok(Some(_)) => break,
            Err(e) => {
                return Err(crate::error::Error::Host {
                    path: crate::path::DisplayBytes(e.path.as_os_str()).to_string(),
                    message: e.message,
                });
            }
        }
        at = dir.parent();
    }
    Ok(out)
}
