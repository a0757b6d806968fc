//! Canonical paths through the [`Host`]: every symlink followed component by component, as
//! the kernel would, with a missing tail kept as written.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

use crate::error::{Error, Result};
use crate::host::{FileKind, Host};
use crate::path::{AbsPathBuf, DisplayBytes};

/// The most symlinks one path may pass through (as the kernel's `MAXSYMLINKS`).
const MAX_LINK_HOPS: usize = 40;

/// Canonicalizes `path` through the host, tolerating a missing tail. Returns the canonical
/// path and the kind of what is there (`None` if some component is missing).
pub fn canonicalize(host: &dyn Host, path: &Path) -> Result<(AbsPathBuf, Option<FileKind>)> {
    let mut resolved = PathBuf::from("/");
    let mut queue: VecDeque<OsString> = VecDeque::new();
    push_components(&mut queue, path, 0);
    let mut missing = false;
    let mut hops = 0;
    while let Some(name) = queue.pop_front() {
        match name.as_encoded_bytes() {
            b"/" => resolved = PathBuf::from("/"),
            b"." => {}
            b".." => {
                resolved.pop();
            }
            _ => {
                let candidate = resolved.join(&name);
                if missing {
                    resolved = candidate;
                    continue;
                }
                match host.kind(&candidate).map_err(host_error)? {
                    None => {
                        missing = true;
                        resolved = candidate;
                    }
                    Some(FileKind::Symlink) => {
                        hops += 1;
                        if hops > MAX_LINK_HOPS {
                            return Err(Error::Host {
                                path: DisplayBytes(path.as_os_str()).to_string(),
                                message: "too many levels of symbolic links".to_owned(),
                            });
                        }
                        let target = host.read_link(&candidate).map_err(host_error)?;
                        push_components(&mut queue, &target, 0);
                        if target.is_absolute() {
                            // The target's root resets; the queue now starts with "/".
                        }
                    }
                    Some(_) => resolved = candidate,
                }
            }
        }
    }
    let abs = AbsPathBuf::new_lexical(&resolved).unwrap_or_else(AbsPathBuf::root);
    let kind = if missing { None } else { host.kind(abs.as_path()).map_err(host_error)? };
    Ok((abs, kind))
}

/// Pushes the components of `path` to the front of the queue, in order.
fn push_components(queue: &mut VecDeque<OsString>, path: &Path, _depth: usize) {
    let items: Vec<OsString> = path
        .components()
        .map(|c| match c {
            Component::RootDir | Component::Prefix(_) => OsString::from("/"),
            Component::CurDir => OsString::from("."),
            Component::ParentDir => OsString::from(".."),
            Component::Normal(n) => n.to_os_string(),
        })
        .collect();
    for item in items.into_iter().rev() {
        queue.push_front(item);
    }
}

pub(crate) fn host_error(e: crate::host::HostError) -> Error {
    Error::Host { path: DisplayBytes(e.path.as_os_str()).to_string(), message: e.message }
}
