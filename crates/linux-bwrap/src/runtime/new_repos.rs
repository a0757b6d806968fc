//! Repositories the task created, found by the walk after the run: what git would run
//! there, and disarming their hooks.
//!
//! A `.git` that was not there when the task started is reported as a `new-repository`
//! violation naming its executable hooks and every config key that makes git run a program
//! (`paddock_policy::program_keys`). With `protected.new-repositories = "disarm"` (the
//! default) each executable hook but `*.sample` is made non-executable (a hook that is a
//! symbolic link is renamed to `NAME.disarmed`, since a link has no mode of its own); the
//! config is never edited. Nothing is followed through a link: the `.git`, its `hooks`
//! directory and each hook are opened with `O_NOFOLLOW`, and a `.git` that is a link or a
//! file pointing out of the project is reported, not touched.

use std::ffi::OsString;
use std::io::Read as _;
use std::os::fd::AsRawFd as _;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use paddock_policy::{FileKind, NewRepositories, Violation, ViolationKind, program_keys};

/// How much of a config file is read.
const READ_LIMIT: u64 = 1 << 20;
/// The most hooks looked at in one repository.
const MAX_HOOKS: usize = 1024;

/// What was found in one new repository, and done to it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Inspected {
    /// Executable hooks (names, a link shown with its target).
    pub hooks: Vec<String>,
    /// Config keys that make git run a program (`config.worktree`'s too).
    pub keys: Vec<String>,
    /// Hooks made non-executable (or renamed, for links).
    pub disarmed: Vec<String>,
    /// Anything else to say (a `.git` link or file).
    pub notes: Vec<String>,
}

fn open_nofollow(path: &Path, dir: bool) -> std::io::Result<std::fs::File> {
    let mut flags = libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK;
    if dir {
        flags |= libc::O_DIRECTORY;
    }
    std::fs::OpenOptions::new().read(true).custom_flags(flags).open(path)
}

fn read_limited(path: &Path) -> Option<Vec<u8>> {
    let file = open_nofollow(path, false).ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut out = Vec::new();
    file.take(READ_LIMIT).read_to_end(&mut out).ok()?;
    Some(out)
}

/// Inspects the repository whose `.git` is `dot_git` (and disarms it if `mode` says so).
/// `project` bounds where a `.git` file may lead.
pub fn inspect(dot_git: &Path, project: &Path, mode: NewRepositories) -> Inspected {
    let mut out = Inspected::default();
    let Ok(meta) = std::fs::symlink_metadata(dot_git) else { return out };
    let git_dir = if meta.file_type().is_symlink() {
        let target = std::fs::read_link(dot_git).unwrap_or_default();
        out.notes.push(format!("its .git is a link to {}, not followed", target.display()));
        return out;
    } else if meta.is_file() {
        let Some(text) = read_limited(dot_git) else { return out };
        let Some(rest) = text.strip_prefix(b"gitdir:") else { return out };
        let target = PathBuf::from(std::ffi::OsStr::from_bytes(rest.trim_ascii()));
        let base = dot_git.parent().unwrap_or(project);
        match std::fs::canonicalize(base.join(&target)) {
            Ok(real) if real.starts_with(project) && real.is_dir() => real,
            _ => {
                out.notes.push(format!(
                    "its .git file names {}, outside the project: not inspected",
                    target.display()
                ));
                return out;
            }
        }
    } else if meta.is_dir() {
        dot_git.to_path_buf()
    } else {
        return out;
    };
    for name in ["config", "config.worktree"] {
        if let Some(text) = read_limited(&git_dir.join(name)) {
            for key in program_keys(&text) {
                if !out.keys.contains(&key) {
                    out.keys.push(key);
                }
            }
        }
    }
    hooks(&git_dir.join("hooks"), mode, &mut out);
    out
}

fn hooks(dir: &Path, mode: NewRepositories, out: &mut Inspected) {
    // The directory itself must be a directory, not a link to someone else's hooks.
    let Ok(handle) = open_nofollow(dir, true) else { return };
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut names: Vec<OsString> = entries.filter_map(|e| e.ok().map(|e| e.file_name())).collect();
    names.sort();
    names.truncate(MAX_HOOKS);
    let Ok(still) = handle.metadata() else { return };
    if !std::fs::symlink_metadata(dir)
        .is_ok_and(|m| m.ino() == still.ino() && m.dev() == still.dev())
    {
        return;
    }
    for name in names {
        let bytes = name.as_bytes();
        if bytes.ends_with(b".sample") || bytes.ends_with(b".disarmed") {
            continue;
        }
        let shown = name.to_string_lossy().into_owned();
        let path = dir.join(&name);
        let Ok(meta) = std::fs::symlink_metadata(&path) else { continue };
        let kind = if meta.file_type().is_symlink() {
            FileKind::Symlink
        } else if meta.is_file() {
            FileKind::File
        } else {
            continue;
        };
        if kind == FileKind::File && meta.permissions().mode() & 0o111 == 0 {
            continue;
        }
        if kind == FileKind::Symlink {
            let target = std::fs::read_link(&path).unwrap_or_default();
            out.hooks.push(format!("{shown} -> {}", target.display()));
            if mode == NewRepositories::Disarm {
                let mut renamed = name.clone();
                renamed.push(".disarmed");
                if crate::runtime::runtime_dir::spares::rename_noreplace(&path, &dir.join(&renamed))
                    .is_ok()
                {
                    out.disarmed
                        .push(format!("{shown} (renamed to {})", renamed.to_string_lossy()));
                }
            }
            continue;
        }
        out.hooks.push(shown.clone());
        if mode == NewRepositories::Disarm && disarm_file(&path, &meta) {
            out.disarmed.push(shown);
        }
    }
}

/// Clears the execute bits of the regular file at `path`, if it is still the file `seen`.
fn disarm_file(path: &Path, seen: &std::fs::Metadata) -> bool {
    let Ok(file) = open_nofollow(path, false) else { return false };
    let Ok(meta) = file.metadata() else { return false };
    if !meta.is_file() || meta.ino() != seen.ino() || meta.dev() != seen.dev() {
        return false;
    }
    let mode = meta.permissions().mode() & 0o7777 & !0o111;
    // SAFETY: fchmod on a descriptor we own, with a plain mode.
    unsafe { libc::fchmod(file.as_raw_fd(), mode) == 0 }
}

/// The violation for a new repository with work tree `work_tree`.
pub fn violation(work_tree: &Path, found: &Inspected) -> Violation {
    let mut parts = Vec::new();
    if !found.hooks.is_empty() {
        parts.push(format!("hooks: {}", found.hooks.join(", ")));
    }
    if !found.keys.is_empty() {
        parts.push(format!("config: {}", found.keys.join(", ")));
    }
    parts.extend(found.notes.iter().cloned());
    Violation {
        kind: ViolationKind::NewRepository,
        path: Some(work_tree.to_path_buf()),
        target: (!parts.is_empty()).then(|| parts.join("; ")),
        syscall: None,
        errno: None,
        count: 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(name: &str) -> PathBuf {
        let root =
            std::env::temp_dir().join(format!("paddock-newrepo-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("x/.git/hooks")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(
            root.join("x/.git/config"),
            "[core]\n\tfsmonitor = ./evil\n[alias]\n\tco = checkout\n\tx = !sh\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        for (hook, mode) in
            [("pre-commit", 0o755), ("post-checkout.sample", 0o755), ("notes", 0o644)]
        {
            let p = root.join("x/.git/hooks").join(hook);
            std::fs::write(&p, "#!/bin/sh\n").unwrap_or_else(|e| panic!("{e}"));
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode))
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let outside = root.join("outside-hook");
        std::fs::write(&outside, "#!/bin/sh\n").unwrap_or_else(|e| panic!("{e}"));
        std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o755))
            .unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink(&outside, root.join("x/.git/hooks/post-merge"))
            .unwrap_or_else(|e| panic!("{e}"));
        root
    }

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).map(|m| m.permissions().mode() & 0o777).unwrap_or(0)
    }

    #[test]
    fn disarm_clears_hooks_but_samples_and_never_follows_a_link() {
        let root = repo("disarm");
        let found = inspect(&root.join("x/.git"), &root, NewRepositories::Disarm);
        assert_eq!(found.keys, ["core.fsmonitor", "alias.x"]);
        assert_eq!(found.hooks.len(), 2, "{:?}", found.hooks);
        assert_eq!(mode(&root.join("x/.git/hooks/pre-commit")), 0o644);
        assert_eq!(mode(&root.join("x/.git/hooks/post-checkout.sample")), 0o755);
        assert_eq!(mode(&root.join("outside-hook")), 0o755, "the link's target is not touched");
        assert!(root.join("x/.git/hooks/post-merge.disarmed").is_symlink());
        let v = violation(&root.join("x"), &found);
        assert_eq!(v.kind, ViolationKind::NewRepository);
        assert!(
            v.target
                .as_deref()
                .is_some_and(|t| t.contains("pre-commit") && t.contains("core.fsmonitor"))
        );
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn report_only_changes_nothing() {
        let root = repo("report");
        let found = inspect(&root.join("x/.git"), &root, NewRepositories::Report);
        assert!(found.disarmed.is_empty());
        assert_eq!(mode(&root.join("x/.git/hooks/pre-commit")), 0o755);
        assert!(root.join("x/.git/hooks/post-merge").is_symlink());
        let _ = std::fs::remove_dir_all(&root);
    }
}
