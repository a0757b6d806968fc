//! Walls for what the start-up walk of the project found: the git surface of every
//! repository in it (the project's own, nested ones, gitignored ones) and the protected
//! names below its root.
//!
//! Resolution protects names at the root of each write grant; the walk (in the CLI, which
//! may touch the filesystem) finds the rest and hands the paths here as a [`ProjectScan`].
//! Every path is canonicalized through the [`Host`] and kept read-only only inside a write
//! grant: files as files, directories as directories. A symbolic link is kept as a link: it
//! is a protected path of kind `Symlink` (Linux mounts it read-only on itself, so it can be
//! neither removed nor replaced), its target is kept read-only where that is writable (a
//! stow-style `.bashrc -> ../bash/bashrc` is not written through), and its directory is
//! pinned. Names that do not exist below the root get no placeholder (that would
//! litter the tree); the runner reports their creation after the run. The surface of a
//! repository that exists gets placeholders for its `config` and `hooks` when they are
//! missing (a `.git` emptied to bare directories), as the project's own does. What git
//! would follow if it appeared but no placeholder can hold (a `commondir`, an included
//! config file) is handed back as [`FoundWalls::watched`], for the runner to look for after
//! the run.

use crate::error::{Error, Result};
use crate::git_surface::{WhenMissing, repo_surface};
use crate::host::{FileKind, Host};
use crate::path::AbsPathBuf;
use crate::resolve::canonicalize;
use crate::resolved::{ProtectedPath, ProtectedState, ResolvedPolicy};

/// What the walk of the project found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProjectScan {
    /// Work trees: directories holding a `.git` (a directory, file or link), the project's
    /// own included.
    pub repos: Vec<AbsPathBuf>,
    /// Protected names below the project root: each path with the protected name it is.
    pub names: Vec<(AbsPathBuf, String)>,
}

/// What [`protect_found`] found beyond the walls it added.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FoundWalls {
    /// Notes for the user (links kept as links).
    pub notes: Vec<String>,
    /// Paths inside write grants that git would follow if they appeared, which no
    /// placeholder can hold (a `commondir`, an included config file): canonical, each with
    /// its rule. The runner looks for them after the run.
    pub watched: Vec<(AbsPathBuf, String)>,
}

/// Adds the walls for `scan` to `resolved`: protected paths and pinned directories.
pub fn protect_found(
    resolved: &mut ResolvedPolicy,
    scan: &ProjectScan,
    host: &dyn Host,
) -> Result<FoundWalls> {
    let listed = resolved.protected.iter().map(|p| p.path.clone()).collect();
    let mut adder = Adder { resolved, host, notes: Vec::new(), watched: Vec::new(), listed };
    let mut repos = scan.repos.clone();
    // Write grants outside the project that are work trees have a surface too.
    for g in adder.resolved.write.iter().filter(|g| g.kind == FileKind::Dir) {
        if matches!(host.kind(g.path.join(".git").as_path()), Ok(Some(_))) {
            repos.push(g.path.clone());
        }
    }
    repos.sort();
    repos.dedup();
    for repo in &repos {
        for item in repo_surface(host, repo) {
            adder.add(&item.path, item.rule, item.when_missing)?;
        }
    }
    for (path, name) in &scan.names {
        adder.add(path, name, WhenMissing::Ignored)?;
    }
    adder.finish();
    // `allow.git-config` lifts the project's own repository config here too: the walk
    // finds that repository like any other.
    if adder.resolved.git_config {
        let project = adder.resolved.project_dir.clone();
        crate::git_config::lift(host, &project, &mut adder.resolved.protected);
    }
    adder.watched.sort();
    adder.watched.dedup();
    Ok(FoundWalls { notes: adder.notes, watched: adder.watched })
}

struct Adder<'a> {
    resolved: &'a mut ResolvedPolicy,
    host: &'a dyn Host,
    notes: Vec<String>,
    watched: Vec<(AbsPathBuf, String)>,
    /// The paths of `resolved.protected`, for a look-up rather than a scan per name found
    /// (a large repository finds hundreds).
    listed: std::collections::HashSet<AbsPathBuf>,
}

fn host_error(e: crate::host::HostError) -> Error {
    Error::Host {
        path: crate::path::DisplayBytes(e.path.as_os_str()).to_string(),
        message: e.message,
    }
}

impl Adder<'_> {
    /// The innermost directory write grant holding `path`, unless `path` is the grant.
    fn grant(&self, path: &AbsPathBuf) -> Option<AbsPathBuf> {
        self.resolved
            .write
            .iter()
            .filter(|g| g.kind == FileKind::Dir && path.starts_with(&g.path) && *path != g.path)
            .max_by_key(|g| g.path.as_os_str().len())
            .map(|g| g.path.clone())
    }

    fn pin_ancestors(&mut self, path: &AbsPathBuf, grant: &AbsPathBuf) {
        for ancestor in path.ancestors_below(grant) {
            if matches!(self.host.kind(ancestor.as_path()), Ok(Some(FileKind::Dir))) {
                self.resolved.pinned.push(ancestor);
            }
        }
    }

    fn push(&mut self, path: AbsPathBuf, rule: &str, state: ProtectedState) {
        if self.listed.insert(path.clone()) {
            self.resolved.protected.push(ProtectedPath { path, rule: rule.to_owned(), state });
        }
    }

    fn add(&mut self, path: &AbsPathBuf, rule: &str, when_missing: WhenMissing) -> Result<()> {
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Ok(());
        };
        let (parent_real, parent_kind) = canonicalize(self.host, parent.as_path())?;
        let even_missing = when_missing == WhenMissing::Placeholder;
        if parent_kind != Some(FileKind::Dir) && when_missing == WhenMissing::Ignored {
            return Ok(());
        }
        let real = parent_real.join(name);
        let Some(grant) = self.grant(&real) else { return Ok(()) };
        match self.host.kind(real.as_path()).map_err(host_error)? {
            Some(FileKind::Symlink) => {
                self.pin_ancestors(&real, &grant);
                // The link itself: a backend keeps it in place (Linux mounts it read-only on
                // itself before the sandbox starts), and the runner checks it after the run.
                self.push(real.clone(), rule, ProtectedState::Exists { kind: FileKind::Symlink });
                let (target, kind) = canonicalize(self.host, real.as_path())?;
                match (kind, self.grant(&target)) {
                    (Some(kind), Some(target_grant)) => {
                        self.pin_ancestors(&target, &target_grant);
                        self.push(target.clone(), rule, ProtectedState::Exists { kind });
                        self.notes.push(format!(
                            "{real} ({rule}) is a symbolic link: the link stays in place and its target {target} is kept read-only"
                        ));
                    }
                    _ => self.notes.push(format!(
                        "{real} ({rule}) is a symbolic link to {target}, which the task cannot write; the link stays in place"
                    )),
                }
            }
            Some(kind) => {
                self.pin_ancestors(&real, &grant);
                self.push(real, rule, ProtectedState::Exists { kind });
            }
            None if even_missing => {
                let first_missing = std::iter::once(real.clone())
                    .chain(real.ancestors_below(&grant))
                    .filter(|p| matches!(self.host.kind(p.as_path()), Ok(None)))
                    .min_by_key(|p| p.as_os_str().len())
                    .unwrap_or_else(|| real.clone());
                self.pin_ancestors(&first_missing, &grant);
                self.push(real, rule, ProtectedState::Missing { first_missing });
            }
            None if when_missing == WhenMissing::Watched => {
                // Its directory stays where git looks for it.
                self.pin_ancestors(&real, &grant);
                self.watched.push((real, rule.to_owned()));
            }
            None => {}
        }
        Ok(())
    }

    /// Sorted and deduplicated, as resolution leaves them; a missing path whose placeholder
    /// is already another's is covered by that one.
    fn finish(&mut self) {
        let r = &mut *self.resolved;
        r.protected.sort_by(|a, b| a.path.cmp(&b.path));
        r.protected.dedup_by(|a, b| a.path == b.path);
        let firsts: Vec<AbsPathBuf> = r
            .protected
            .iter()
            .filter_map(|p| match &p.state {
                ProtectedState::Missing { first_missing } => Some(first_missing.clone()),
                ProtectedState::Exists { .. } => None,
            })
            .collect();
        r.protected.retain(|p| match &p.state {
            ProtectedState::Missing { first_missing } => {
                !firsts.iter().any(|f| first_missing.starts_with(f) && f != first_missing)
            }
            ProtectedState::Exists { .. } => true,
        });
        r.pinned.sort();
        r.pinned.dedup();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::FakeHost;
    use crate::model::Policy;
    use crate::resolve::{Context, resolve};

    fn abs(p: &str) -> AbsPathBuf {
        AbsPathBuf::new_lexical(p).unwrap_or_else(AbsPathBuf::root)
    }

    fn state(r: &ResolvedPolicy, p: &str) -> Option<ProtectedState> {
        r.protected.iter().find(|x| x.path == abs(p)).map(|x| x.state.clone())
    }

    fn project() -> FakeHost {
        FakeHost::new()
            .dir("/home/u/proj/.git/hooks")
            .file("/home/u/proj/.git/config", "[core]\n")
            .file("/home/u/proj/.git/worktrees/w/commondir", "../..\n")
            .file("/home/u/proj/.git/worktrees/w/gitdir", "/elsewhere/.git\n")
            .dir("/home/u/proj/vendor/x/.git/hooks")
            .file("/home/u/proj/vendor/x/.git/config", "[core]\n")
            .dir("/home/u/proj/vendor/emptied/.git/refs")
            .file("/home/u/proj/sub/.bashrc", "echo hi\n")
            .file("/home/u/proj/dotfiles/bashrc", "echo hi\n")
            .symlink("/home/u/proj/stow/.bashrc", "../dotfiles/bashrc")
            .symlink("/home/u/proj/out/.profile", "/etc/profile")
            .file("/etc/profile", "")
    }

    fn scan() -> ProjectScan {
        ProjectScan {
            repos: vec![
                abs("/home/u/proj"),
                abs("/home/u/proj/vendor/x"),
                abs("/home/u/proj/vendor/emptied"),
            ],
            names: vec![
                (abs("/home/u/proj/sub/.bashrc"), ".bashrc".to_owned()),
                (abs("/home/u/proj/stow/.bashrc"), ".bashrc".to_owned()),
                (abs("/home/u/proj/out/.profile"), ".profile".to_owned()),
            ],
        }
    }

    #[test]
    fn nested_repositories_and_names_below_the_root_are_read_only() {
        let host = project();
        let ctx = Context::new("/home/u/proj", "/home/u");
        let (mut r, _) = resolve(&crate::defaults::default_policy(), &ctx, &host)
            .unwrap_or_else(|e| panic!("{e}"));
        let found = protect_found(&mut r, &scan(), &host).unwrap_or_else(|e| panic!("{e}"));
        let notes = found.notes;
        let file = Some(ProtectedState::Exists { kind: FileKind::File });
        let dir = Some(ProtectedState::Exists { kind: FileKind::Dir });
        assert_eq!(state(&r, "/home/u/proj/.git/worktrees/w/commondir"), file);
        assert_eq!(state(&r, "/home/u/proj/.git/worktrees/w/gitdir"), file);
        assert_eq!(state(&r, "/home/u/proj/vendor/x/.git/config"), file);
        assert_eq!(state(&r, "/home/u/proj/vendor/x/.git/hooks"), dir);
        // Emptied to bare directories: placeholders, as for the project's own.
        assert_eq!(
            state(&r, "/home/u/proj/vendor/emptied/.git/config"),
            Some(ProtectedState::Missing {
                first_missing: abs("/home/u/proj/vendor/emptied/.git/config")
            })
        );
        assert_eq!(state(&r, "/home/u/proj/sub/.bashrc"), file);
        // The link is kept as a link, and its target is read-only.
        let link = Some(ProtectedState::Exists { kind: FileKind::Symlink });
        assert_eq!(state(&r, "/home/u/proj/dotfiles/bashrc"), file);
        assert_eq!(state(&r, "/home/u/proj/stow/.bashrc"), link);
        assert_eq!(state(&r, "/home/u/proj/out/.profile"), link);
        assert_eq!(state(&r, "/etc/profile"), None);
        assert_eq!(notes.len(), 2, "{notes:?}");
        for pin in [
            "/home/u/proj/vendor",
            "/home/u/proj/vendor/x",
            "/home/u/proj/vendor/x/.git",
            "/home/u/proj/sub",
            "/home/u/proj/stow",
        ] {
            assert!(r.pinned.contains(&abs(pin)), "{pin} not pinned: {:?}", r.pinned);
        }
        // Nothing that does not exist below the root gets a placeholder.
        assert!(!r.protected.iter().any(|p| p.path.starts_with(&abs("/home/u/proj/sub"))
            && matches!(p.state, ProtectedState::Missing { .. })));
        // A missing commondir gets no placeholder (an empty one stops git): it is watched,
        // in every repository, and its directory is pinned.
        for watched in ["/home/u/proj/.git/commondir", "/home/u/proj/vendor/x/.git/commondir"] {
            assert!(
                found.watched.contains(&(abs(watched), ".git/commondir".to_owned())),
                "{watched} not watched: {:?}",
                found.watched
            );
            assert_eq!(state(&r, watched), None);
        }
        // A linked worktree's existing one is read-only, not watched.
        assert!(
            !found.watched.iter().any(|w| w.0 == abs("/home/u/proj/.git/worktrees/w/commondir"))
        );
    }

    #[test]
    fn outside_every_write_grant_nothing_is_added() {
        let host = project();
        let ctx = Context::new("/home/u/proj", "/home/u");
        let mut policy: Policy = crate::defaults::default_policy();
        policy.allow.write.clear();
        let (mut r, _) = resolve(&policy, &ctx, &host).unwrap_or_else(|e| panic!("{e}"));
        let before = r.protected.len();
        let found = protect_found(&mut r, &scan(), &host).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.protected.len(), before);
        assert!(found.watched.is_empty(), "{:?}", found.watched);
    }
}
