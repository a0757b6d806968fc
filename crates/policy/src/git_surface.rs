//! git's code-execution surface of one repository: every file through which git, run later
//! on the host, finds a program to run or more config to read.
//!
//! For a work tree that is `config`, `config.worktree`, `hooks/` and `info/attributes` of its
//! git dir; `commondir` and `gitdir` of a linked worktree's git dir, and the same of every
//! `worktrees/*`; the git dirs of submodules under `modules/` (at any depth, since a
//! submodule's name may hold slashes and submodules nest); and the `.git` *file* of a linked
//! worktree or submodule, which names the git dir. Beyond the git dir, what its config leads
//! git to: the files `include.path` and `includeIf.*.path` name (more config, followed in
//! turn) and the directory `core.hooksPath` names (husky's `.husky`). Asked through the
//! [`Host`], like everything resolution knows about files.
//!
//! Some of these git reads whenever they appear, yet no placeholder can stand in for them:
//! an empty `commondir` or an unreadable included file stops git altogether, on the host as
//! well as in the sandbox. Those are [`WhenMissing::Watched`]: the runner looks for them
//! after the run and reports (and by default disarms) any that appeared.

use std::path::Path;

use crate::gitconfig::{config_entries, worktree_config};
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
    /// What becomes of it while it does not exist.
    pub when_missing: WhenMissing,
}

/// What the walls do with a surface path that does not exist when the task starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WhenMissing {
    /// Nothing: git does not read it unless something protected says so (a linked
    /// worktree's `gitdir`, `config.worktree` without `extensions.worktreeConfig`).
    Ignored,
    /// Kept read-only even while missing (a placeholder is bound there): git reads it when
    /// it appears, and an empty one is harmless (`config`, `hooks/`).
    Placeholder,
    /// Git reads it when it appears, but a placeholder would stop git (`commondir`, an
    /// included config file): looked for after the run instead.
    Watched,
}

/// The most git dirs looked at per repository (its own, its worktrees', its submodules').
const MAX_GIT_DIRS: usize = 256;
/// How deep `modules/` is searched for submodules' git dirs.
const MAX_MODULE_DEPTH: usize = 12;
/// How much of a `.git` file, `commondir` or config is read.
const READ_LIMIT: usize = 1 << 20;
/// How deep includes are followed (git's own limit is 10).
const MAX_INCLUDE_DEPTH: usize = 10;

/// The surface of the repository whose work tree is `work_tree` (a directory holding a
/// `.git`). Paths outside any write grant are the caller's to drop.
pub fn repo_surface(host: &dyn Host, work_tree: &AbsPathBuf) -> Vec<SurfaceItem> {
    let mut out = Vec::new();
    let dot_git = work_tree.join(".git");
    // Each git dir with the work tree git runs its hooks in, where that is known: the
    // repository's own and its common dir's are `work_tree`; a submodule's is its config's
    // `core.worktree`.
    let mut git_dirs: Vec<(AbsPathBuf, Option<AbsPathBuf>)> = Vec::new();
    match host.kind(dot_git.as_path()) {
        Ok(Some(FileKind::Dir)) => git_dirs.push((dot_git, Some(work_tree.clone()))),
        Ok(Some(FileKind::File)) => {
            out.push(item(dot_git.clone(), ".git", false, WhenMissing::Ignored));
            if let Some(dir) = pointed_dir(host, work_tree.as_path(), &dot_git, "gitdir:") {
                git_dirs.push((dir, Some(work_tree.clone())));
            }
        }
        // A link cannot be kept read-only as a link (its target, the whole git dir, would
        // be): the git dir it leads to gets its surface protected instead.
        Ok(Some(FileKind::Symlink)) => {
            if let Ok((real, Some(FileKind::Dir))) = canonicalize(host, dot_git.as_path()) {
                git_dirs.push((real, Some(work_tree.clone())));
            }
        }
        _ => {}
    }
    let mut seen: Vec<AbsPathBuf> = Vec::new();
    while let Some((git_dir, tree)) = git_dirs.pop() {
        if seen.contains(&git_dir) || seen.len() >= MAX_GIT_DIRS {
            continue;
        }
        seen.push(git_dir.clone());
        git_dir_surface(host, &git_dir, tree.as_ref(), &mut out, &mut git_dirs);
    }
    out
}

/// The surface of one git dir; the git dirs it leads to (its common dir, its worktrees'
/// are not: they share it) are pushed to `more`.
fn git_dir_surface(
    host: &dyn Host,
    git_dir: &AbsPathBuf,
    work_tree: Option<&AbsPathBuf>,
    out: &mut Vec<SurfaceItem>,
    more: &mut Vec<(AbsPathBuf, Option<AbsPathBuf>)>,
) {
    let exists = |p: &AbsPathBuf| matches!(host.kind(p.as_path()), Ok(Some(_)));
    let config = git_dir.join("config");
    let config_text = host.read_file(config.as_path(), READ_LIMIT).ok();
    let per_worktree = config_text.as_deref().is_some_and(worktree_config);
    // A submodule's git dir names its work tree; a relative `core.hooksPath` is relative
    // to it.
    let own_tree = config_text.as_deref().and_then(|text| {
        let entries = config_entries(text);
        let value = entries.iter().rev().find(|e| e.key == "core.worktree")?.value.clone()?;
        Some(git_dir.join(value))
    });
    let tree = work_tree.or(own_tree.as_ref());
    out.push(item(config.clone(), ".git/config", false, WhenMissing::Placeholder));
    out.push(item(git_dir.join("hooks"), ".git/hooks", true, WhenMissing::Placeholder));
    config_references(host, &config, tree, 0, out);
    let cw = git_dir.join("config.worktree");
    if per_worktree || exists(&cw) {
        let when = if per_worktree { WhenMissing::Placeholder } else { WhenMissing::Ignored };
        out.push(item(cw.clone(), ".git/config.worktree", false, when));
        config_references(host, &cw, tree, 0, out);
    }
    let attributes = git_dir.join("info/attributes");
    if exists(&attributes) {
        out.push(item(attributes, ".git/info/attributes", false, WhenMissing::Ignored));
    }
    // git reads `commondir` in every git dir: a linked worktree's names the common dir
    // that holds the config and hooks it uses; one planted in any other git dir would lead
    // git to a config of the task's.
    out.push(item(git_dir.join("commondir"), ".git/commondir", false, WhenMissing::Watched));
    let gitdir = git_dir.join("gitdir");
    if exists(&gitdir) {
        out.push(item(gitdir, ".git/gitdir", false, WhenMissing::Ignored));
    }
    if let Some(common) = pointed_dir(host, git_dir.as_path(), &git_dir.join("commondir"), "") {
        more.push((common, work_tree.cloned()));
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
                let when = match file {
                    "commondir" => WhenMissing::Watched,
                    "config.worktree" if per_worktree => WhenMissing::Placeholder,
                    _ => WhenMissing::Ignored,
                };
                if when != WhenMissing::Ignored || exists(&p) {
                    out.push(item(p.clone(), rule, false, when));
                }
                if file == "config.worktree" {
                    config_references(host, &p, None, 0, out);
                }
            }
        }
    }
    let mut modules_found = Vec::new();
    modules(host, &git_dir.join("modules"), 0, &mut modules_found);
    more.extend(modules_found.into_iter().map(|m| (m, None)));
}

/// What the config file `config` leads git to: the files `include.path` and
/// `includeIf.*.path` name (relative to `config`'s directory; followed in turn, whatever
/// their condition) and the directory `core.hooksPath` names (relative to `work_tree`, where
/// git runs hooks; skipped when that is unknown; with its parent when it is husky's `_`). A
/// value starting with `~` or `%(prefix)`
/// names a place in the home or git's installation, whose walls are the home's and the
/// system's, not the repository's. An included file that exists is kept read-only; a
/// missing one is [`WhenMissing::Watched`] (git would stop on an unreadable placeholder);
/// a missing hooks directory gets an empty one, as `.git/hooks` does.
fn config_references(
    host: &dyn Host,
    config: &AbsPathBuf,
    work_tree: Option<&AbsPathBuf>,
    depth: usize,
    out: &mut Vec<SurfaceItem>,
) {
    if depth > MAX_INCLUDE_DEPTH {
        return;
    }
    let (Ok(text), Some(dir)) = (host.read_file(config.as_path(), READ_LIMIT), config.parent())
    else {
        return;
    };
    for entry in config_entries(&text) {
        let Some(value) = entry.value.as_deref().map(str::trim).filter(|v| !v.is_empty()) else {
            continue;
        };
        if value.starts_with('~') || value.starts_with("%(") {
            continue;
        }
        let include = entry.key == "include.path"
            || (entry.key.starts_with("includeif.") && entry.key.ends_with(".path"));
        if include {
            let path = dir.join(value);
            if out.iter().any(|i| i.path == path) {
                continue;
            }
            let exists = matches!(host.kind(path.as_path()), Ok(Some(_)));
            let when = if exists { WhenMissing::Ignored } else { WhenMissing::Watched };
            out.push(item(path.clone(), "include.path", false, when));
            config_references(host, &path, work_tree, depth + 1, out);
        } else if entry.key == "core.hookspath" {
            let path = match (Path::new(value).is_absolute(), work_tree) {
                (true, _) => AbsPathBuf::new_lexical(value),
                (false, Some(tree)) => Some(tree.join(value)),
                (false, None) => None,
            };
            if let Some(path) = path {
                // husky 9 points git at `.husky/_`, whose hooks run the scripts one level up
                // (`.husky/pre-commit`): those are hooks too.
                if path.file_name().is_some_and(|n| n == "_")
                    && let Some(parent) = path.parent()
                {
                    out.push(item(parent, "core.hooksPath", true, WhenMissing::Ignored));
                }
                out.push(item(path, "core.hooksPath", true, WhenMissing::Placeholder));
            }
        }
    }
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

fn item(path: AbsPathBuf, rule: &'static str, dir: bool, when_missing: WhenMissing) -> SurfaceItem {
    SurfaceItem { path, rule, dir, when_missing }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::FakeHost;

    fn abs(p: &str) -> AbsPathBuf {
        AbsPathBuf::new_lexical(p).unwrap_or_else(AbsPathBuf::root)
    }

    fn rules(items: &[SurfaceItem]) -> Vec<(String, &'static str, bool)> {
        items
            .iter()
            .map(|i| (i.path.to_string(), i.rule, i.when_missing == WhenMissing::Placeholder))
            .collect()
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

    fn when(items: &[SurfaceItem], path: &str) -> Option<(&'static str, WhenMissing)> {
        items.iter().find(|i| i.path.to_string() == path).map(|i| (i.rule, i.when_missing))
    }

    #[test]
    fn a_commondir_is_watched_in_every_git_dir_where_it_is_missing() {
        let h = FakeHost::new()
            .file("/p/.git/config", "")
            .dir("/p/.git/worktrees/w1")
            .file("/p/.git/worktrees/w1/gitdir", "/p/w1/.git\n")
            .file("/p/.git/modules/a/HEAD", "ref: x\n");
        let got = repo_surface(&h, &abs("/p"));
        for path in
            ["/p/.git/commondir", "/p/.git/worktrees/w1/commondir", "/p/.git/modules/a/commondir"]
        {
            assert_eq!(when(&got, path).map(|w| w.1), Some(WhenMissing::Watched), "{path}");
        }
    }

    #[test]
    fn includes_and_a_hooks_path_are_part_of_the_surface() {
        let h = FakeHost::new()
            .file(
                "/p/.git/config",
                "[core]\n\thooksPath = .husky\n[include]\n\tpath = ../shared.gitconfig\n\
                 [includeIf \"onbranch:main\"]\n\tpath = /p/missing.inc\n\
                 [include]\n\tpath = ~/.gitconfig.local\n",
            )
            .file("/p/shared.gitconfig", "[include]\n\tpath = more/deeper.inc\n")
            .file("/p/more/deeper.inc", "[core]\n\thooksPath = /p/tools/hooks\n")
            .file("/p/.git/modules/s/HEAD", "ref: x\n")
            .file("/p/.git/modules/s/config", "[core]\n\tworktree = ../../../s\n\thooksPath = h\n")
            .file("/p/.git/modules/t/HEAD", "ref: x\n")
            .file(
                "/p/.git/modules/t/config",
                "[core]\n\tworktree = ../../../t\n\thooksPath = .husky/_\n",
            );
        let got = repo_surface(&h, &abs("/p"));
        assert_eq!(when(&got, "/p/.husky"), Some(("core.hooksPath", WhenMissing::Placeholder)));
        assert_eq!(when(&got, "/p/shared.gitconfig"), Some(("include.path", WhenMissing::Ignored)));
        // Followed through the include, relative to the including file.
        assert_eq!(when(&got, "/p/more/deeper.inc"), Some(("include.path", WhenMissing::Ignored)));
        assert_eq!(
            when(&got, "/p/tools/hooks"),
            Some(("core.hooksPath", WhenMissing::Placeholder))
        );
        // Whatever its condition; missing, so watched rather than given a placeholder.
        assert_eq!(when(&got, "/p/missing.inc"), Some(("include.path", WhenMissing::Watched)));
        // A submodule's hooks run in its own work tree.
        assert_eq!(when(&got, "/p/s/h"), Some(("core.hooksPath", WhenMissing::Placeholder)));
        // husky 9's `_` runs the scripts beside it.
        assert_eq!(when(&got, "/p/t/.husky/_"), Some(("core.hooksPath", WhenMissing::Placeholder)));
        assert_eq!(when(&got, "/p/t/.husky"), Some(("core.hooksPath", WhenMissing::Ignored)));
        assert!(!got.iter().any(|i| i.path.to_string().contains(".gitconfig.local")), "{got:#?}");
    }

    #[test]
    fn includes_that_include_each_other_end() {
        let h = FakeHost::new()
            .file("/p/.git/config", "[include]\n\tpath = ../a.inc\n")
            .file("/p/a.inc", "[include]\n\tpath = b.inc\n")
            .file("/p/b.inc", "[include]\n\tpath = a.inc\n");
        let got = repo_surface(&h, &abs("/p"));
        assert_eq!(got.iter().filter(|i| i.rule == "include.path").count(), 2, "{got:#?}");
    }
}
