//! The real filesystem behind the policy crate's [`Host`] trait.

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};

use paddock_policy::{FileKind, Host, HostError};

/// Answers resolution's questions from the OS, one `lstat`/`readlink`/`readdir` at a time.
#[derive(Clone, Copy, Debug, Default)]
pub struct RealHost;

fn error(path: &Path, e: &std::io::Error) -> HostError {
    HostError { path: path.to_path_buf(), message: e.to_string() }
}

impl Host for RealHost {
    fn kind(&self, path: &Path) -> Result<Option<FileKind>, HostError> {
        match std::fs::symlink_metadata(path) {
            Ok(m) => {
                let t = m.file_type();
                Ok(Some(if t.is_symlink() {
                    FileKind::Symlink
                } else if t.is_dir() {
                    FileKind::Dir
                } else if t.is_file() {
                    FileKind::File
                } else {
                    FileKind::Other
                }))
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                ) =>
            {
                Ok(None)
            }
            // A path we may not look at is, for resolution, one that is not there: it can
            // be neither granted nor followed.
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => Ok(None),
            Err(e) => Err(error(path, &e)),
        }
    }

    fn read_link(&self, path: &Path) -> Result<PathBuf, HostError> {
        std::fs::read_link(path).map_err(|e| error(path, &e))
    }

    fn read_dir(&self, path: &Path) -> Result<Vec<OsString>, HostError> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(path).map_err(|e| error(path, &e))? {
            names.push(entry.map_err(|e| error(path, &e))?.file_name());
        }
        names.sort();
        Ok(names)
    }

    fn read_file(&self, path: &Path, limit: usize) -> Result<Vec<u8>, HostError> {
        let file = std::fs::File::open(path).map_err(|e| error(path, &e))?;
        let mut out = Vec::new();
        file.take(limit as u64).read_to_end(&mut out).map_err(|e| error(path, &e))?;
        Ok(out)
    }
}
