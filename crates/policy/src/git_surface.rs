//! git's code-execution surface of one repository: every file through which git, run later
//! on the host, finds a program to run or more config to read.
//!
//! For a work tree that is `config`, `config.worktree`, `hooks/` and `info/attributes` of its
//! git dir; `commondir` and `gitdir` of a linked worktree's git dir, and the same of every
//! `worktrees/*`; the git dirs of submodules under `modules/` (at any depth, since a
//! submodule's name may hold slashes and submodules nest); and the `.git` *file* of a linked
//! worktree or submodule, which names the git dir. Asked through the [`Host`], like
//! everything resolution knows about files.

use std::path::Path;

use crate::gitconfig::worktree_config;
use crate::host::{FileKind, Host};
use crate::path::{AbsPathBuf, os_from_bytes};
use crate::resolve::canonicalize;

/// One path of a repository's surface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SurfaceItem {
    /// Where it is (the git dir canonical, the name appended).
    pub path: AbsPathBuf,
    /// Which part of the surface it is, for notes and reports (`.git/hooks`).
    pub rule: &'static str,
    /// Whether a placeholder for it would be a directory.
    pub dir: bool,
    /// Whether it is kept read-only even while missing (a placeholder is bound there):
    /// git reads it when it appears. The others are protected only where they exist.
    pub even_missing: bool,
}

/// The most git dirs looked at per repository (its own, its worktrees', its submodules').
const MAX_GIT_DIRS: usize = 256;
/// How deep `modules/` is searched for submodules' git dirs.
const MAX_MODULE_DEPTH: usize = 12;
/// How much of a `.git` file, `commondir` or config is read.
const READ_LIMIT: usize = 1 << 20;

/// The surface of the repository whose work tree is `work_tree` (a directory holding a
/// `.git`). Paths outside any write grant are the caller's to drop.
pub fn repo_surface(host: &dyn Host, work_tree: &AbsPathBuf) -> Vec<SurfaceItem> {
    let mut out = Vec::new();
    let dot_git = work_tree.join(".git");
    let mut git_dirs: Vec<AbsPathBuf> = Vec::new();
    match host.kind(dot_git.as_path()) {
        Ok(Some(FileKind::Dir)) => git_dirs.push(dot_git),
        Ok(Some(FileKind::File)) => {
            out.push(item(dot_git.clone(), ".git", false, false));
            if let Some(dir) = pointed_dir(host, work_tree.as_path(), &dot_git, "gitdir:") {
                git_dirs.push(dir);
            }
        }
        // A link cannot be kept read-only as a link (its target, the whole git dir, would
        // be): the git dir it leads to gets its surface protected instead.
        Ok(Some(FileKind::Symlink)) => {
            if let Ok((real, Some(FileKind::Dir))) = canonicalize(host, dot_git.as_path()) {
                git_dirs.push(real);
            }
        }
        _ => {}
    }
    let mut seen: Vec<AbsPathBuf> = Vec::new();
    while let Some(git_dir) = git_dirs.pop() {
        if seen.contains(&git_dir) || seen.len() >= MAX_GIT_DIRS {
            continue;
        }
        seen.push(git_dir.clone());
        git_dir_surface(host, &git_dir, &mut out, &mut git_dirs);
    }
    out
}

/// The surface of one git dir; the git dirs it leads to (its common dir, its worktrees'
/// are not: they share it) are pushed to `more`.
fn git_dir_surface(
    host: &dyn Host,
    git_dir: &AbsPathBuf,
    out: &mut Vec<SurfaceItem>,
    more: &mut Vec<AbsPathBuf>,
) {
    let exists = |p: &AbsPathBuf| matches!(host.kind(p.as_path()), Ok(Some(_)));
    let config = git_dir.join("config");
    let per_worktree =
        host.read_file(config.as_path(), READ_LIMIT).is_ok_and(|t| worktree_config(&t));
    out.push(item(config, ".git/config", false, true));
    out.push(item(git_dir.join("hooks"), ".git/hooks", true, true));
    let cw = git_dir.join("config.worktree");
    if per_worktree || exists(&cw) {
        out.push(item(cw, ".git/config.worktree", false, per_worktree));
    }
    let attributes = git_dir.join("info/attributes");
    if exists(&attributes) {
        out.push(item(attributes, ".git/info/attributes", false, false));
    }
    // A linked worktree's git dir: the common dir holds the config and hooks it uses.
    for name in ["commondir", "gitdir"] {
        let p = git_dir.join(name);
        if exists(&p) {
            out.push(item(
                p,
                if name == "commondir" { ".git/commondir" } else { ".git/gitdir" },
                false,
                false,
            ));
        }
    }
    if let Some(common) = pointed_dir(host, git_dir.as_path(), &git_dir.join("commondir"), "") {
        more.push(common);
    }
    let worktrees = git_dir.join("worktrees");
    if let Ok(names) = host.read_dir(worktrees.as_path()) {
        for name in names {
            let w = worktrees.join(&name);
            if !matches!(host.kind(w.as_path()), Ok(Some(FileKind::Dir))) {
                continue;
            }
            for (file, rule) in [
                ("commondir", ".git/worktrees/*/commondir"),
                ("gitdir", ".git/worktrees/*/gitdir"),
                ("config.worktree", ".git/worktrees/*/config.worktree"),
            ] {
                let p = w.join(file);
                let must = file == "config.worktree" && per_worktree;
                if must || exists(&p) {
                    out.push(item(p, rule, false, must));
                }
            }
        }
    }
    modules(host, &git_dir.join("modules"), 0, more);
}

/// Submodules' git dirs under `dir` (a `modules` directory or a level of a submodule's
/// name): a directory holding `HEAD` is one, anything else is searched deeper.
fn modules(host: &dyn Host, dir: &AbsPathBuf, depth: usize, more: &mut Vec<AbsPathBuf>) {
    if depth >= MAX_MODULE_DEPTH || more.len() >= MAX_GIT_DIRS {
        return;
    }
    let Ok(names) = host.read_dir(dir.as_path()) else { return };
    for name in names {
        let sub = dir.join(&name);
        if !matches!(host.kind(sub.as_path()), Ok(Some(FileKind::Dir))) {
            continue;
        }
        if matches!(host.kind(sub.join("HEAD").as_path()), Ok(Some(_))) {
            more.push(sub);
        } else {
            modules(host, &sub, depth + 1, more);
        }
    }
}

/// The directory a pointer file names (`gitdir: X` in a `.git` file, a bare path in
/// `commondir`), relative to `base`, canonical; `None` if it is not a directory.
fn pointed_dir(
    host: &dyn Host,
    base: &Path,
    file: &AbsPathBuf,
    prefix: &str,
) -> Option<AbsPathBuf> {
    let bytes = host.read_file(file.as_path(), READ_LIMIT).ok()?;
    let rest = bytes.strip_prefix(prefix.as_bytes())?;
    let target = os_from_bytes(rest.trim_ascii().to_vec());
    if target.is_empty() {
        return None;
    }
    match canonicalize(host, &base.join(target)) {
        Ok((real, Some(FileKind::Dir))) => Some(real),
        _ => None,
    }
}

fn item(path: AbsPathBuf, rule: &'static str, dir: bool, even_missing: bool) -> SurfaceItem {
    SurfaceItem { path, rule, dir, even_missing }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::FakeHost;

    fn abs(p: &str) -> AbsPathBuf {
        AbsPathBuf::new_lexical(p).unwrap_or_else(AbsPathBuf::root)
    }

    fn rules(items: &[SurfaceItem]) -> Vec<(String, &'static str, bool)> {
        items.iter().map(|i| (i.path.to_string(), i.rule, i.even_missing)).collect()
    }

    #[test]
    fn a_repository_with_worktrees_and_nested_submodules_has_all_of_its_surface() {
        let h = FakeHost::new()
            .dir("/p/.git/hooks")
            .file("/p/.git/config", "[extensions]\n\tworktreeConfig = true\n")
            .file("/p/.git/info/attributes", "* filter=x\n")
            .dir("/p/.git/worktrees/w1")
            .file("/p/.git/worktrees/w1/commondir", "../..\n")
            .file("/p/.git/worktrees/w1/gitdir", "/p/w1/.git\n")
            .file("/p/.git/modules/lib/a/HEAD", "ref: x\n")
            .file("/p/.git/modules/lib/a/config", "")
            .file("/p/.git/modules/lib/a/modules/b/HEAD", "ref: x\n");
        let got = rules(&repo_surface(&h, &abs("/p")));
        for want in [
            ("/p/.git/config", ".git/config", true),
            ("/p/.git/hooks", ".git/hooks", true),
            ("/p/.git/config.worktree", ".git/config.worktree", true),
            ("/p/.git/info/attributes", ".git/info/attributes", false),
            ("/p/.git/worktrees/w1/commondir", ".git/worktrees/*/commondir", false),
            ("/p/.git/worktrees/w1/gitdir", ".git/worktrees/*/gitdir", false),
            ("/p/.git/worktrees/w1/config.worktree", ".git/worktrees/*/config.worktree", true),
            ("/p/.git/modules/lib/a/config", ".git/config", true),
            ("/p/.git/modules/lib/a/hooks", ".git/hooks", true),
            ("/p/.git/modules/lib/a/modules/b/config", ".git/config", true),
        ] {
            assert!(
                got.contains(&(want.0.to_owned(), want.1, want.2)),
                "{want:?} missing from {got:#?}"
            );
        }
    }

    #[test]
    fn a_git_file_is_protected_with_the_git_dir_it_names_and_its_common_dir() {
        let h = FakeHost::new()
            .file("/p/sub/.git", "gitdir: ../.git/worktrees/sub\n")
            .file("/p/.git/worktrees/sub/commondir", "../..\n")
            .file("/p/.git/config", "[core]\n");
        let got = rules(&repo_surface(&h, &abs("/p/sub")));
        for want in [
            ("/p/sub/.git", ".git", false),
            ("/p/.git/worktrees/sub/commondir", ".git/commondir", false),
            ("/p/.git/config", ".git/config", true),
            ("/p/.git/hooks", ".git/hooks", true),
        ] {
            assert!(got.contains(&(want.0.to_owned(), want.1, want.2)), "{want:?} in {got:#?}");
        }
        // Without worktreeConfig, a missing config.worktree is never read.
        assert!(!got.iter().any(|g| g.0.ends_with("config.worktree")));
    }
}
