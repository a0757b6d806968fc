//! The walk of the project in a run: before the plan, what it finds gets its walls
//! (`paddock_policy::protect_found`); after the run, what is new is reported (a repository
//! the task created, disarmed by default; a protected name created below the root; a file
//! git would follow that no placeholder could hold, such as a `commondir` planted in a git
//! dir, renamed aside by default).
//!
//! The project is walked only when it is writable (inside a directory write grant): else
//! the task can change nothing there. `protected.depth = "root"` looks for `.git` alone.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use paddock_policy::{
    AbsPathBuf, FileKind, Host, NewRepositories, PROTECTED_NAMES, Policy, ProjectScan,
    ProtectedDepth, ProtectedState, ResolvedPolicy, Scope, Violation, ViolationKind, protect_found,
};

use crate::runtime::walk::{Hit, Names, walk};

/// The walk before the run, kept for the one after it.
#[derive(Debug)]
pub struct Scanned {
    root: PathBuf,
    names: Names,
    cache: Option<PathBuf>,
    /// What the walk found before the task, with its kind.
    before: HashMap<PathBuf, FileKind>,
    depth: ProtectedDepth,
    new_repositories: NewRepositories,
    /// The project's own `.git` was missing: its placeholder is no new repository.
    root_git_placeholder: bool,
    /// Paths git would follow if they appeared (`FoundWalls::watched`), with their rules.
    watched: Vec<(AbsPathBuf, String)>,
    /// Figures for `--verbose`-like inspection and the benchmark.
    pub dirs: usize,
    /// Directories listed by the walk.
    pub listed: usize,
}

/// The names looked for below the root: the last component of each repository-scope
/// protected name of one component, and of `protected.extra`, but those made writable.
pub fn depth_names(policy: &Policy) -> Vec<OsString> {
    if policy.protected.depth == ProtectedDepth::Root {
        return Vec::new();
    }
    let writable = |name: &str| policy.protected.writable.iter().any(|w| w.value == name);
    let mut out: Vec<OsString> = PROTECTED_NAMES
        .iter()
        .filter(|n| n.scope == Scope::Repo && !n.name.contains('/') && !writable(n.name))
        .map(|n| OsString::from(n.name))
        .collect();
    for extra in &policy.protected.extra {
        let p = Path::new(&extra.value.0);
        if p.components().count() == 1
            && let Some(name) = p.file_name()
        {
            out.push(name.to_os_string());
        }
    }
    out
}

/// Where the walk's records are kept between runs.
fn cache_file(root: &Path) -> Option<PathBuf> {
    Some(crate::runtime::walk::cache::file_for(
        &crate::runtime::runtime_dir::base().join(crate::runtime::walk::cache::WALKS_DIR),
        root,
    ))
}

/// Walks the project and adds the walls for what it finds to `resolved`. `None` when the
/// project is not writable.
pub fn scan(
    policy: &Policy,
    resolved: &mut ResolvedPolicy,
    host: &dyn Host,
    notes: &mut Vec<String>,
) -> paddock_policy::Result<Option<Scanned>> {
    let project = resolved.project_dir.clone();
    let writable =
        resolved.write.iter().any(|g| g.kind == FileKind::Dir && project.starts_with(&g.path));
    if !writable {
        return Ok(None);
    }
    let root = project.as_path().to_path_buf();
    let names = Names::new(depth_names(policy));
    let cache = cache_file(&root);
    let w = walk(&root, &names, cache.as_deref());
    if w.truncated {
        notes.push(format!(
            "the project {project} has more than {} entries: nested repositories and protected names were looked for that far only",
            crate::runtime::walk::MAX_ENTRIES
        ));
    }
    let mut found = ProjectScan::default();
    for hit in &w.hits {
        let Some(abs) = AbsPathBuf::new_lexical(&hit.path) else { continue };
        let (Some(parent), Some(name)) = (abs.parent(), abs.file_name()) else { continue };
        if name == ".git" {
            found.repos.push(parent);
        } else if parent != project {
            found.names.push((abs.clone(), name.to_string_lossy().into_owned()));
        }
    }
    let walls = protect_found(resolved, &found, host)?;
    notes.extend(walls.notes);
    let root_git = project.join(".git");
    let root_git_placeholder = resolved.protected.iter().any(|p| {
        matches!(&p.state, ProtectedState::Missing { first_missing } if *first_missing == root_git)
    });
    Ok(Some(Scanned {
        before: w.hits.iter().map(|h: &Hit| (h.path.clone(), h.kind)).collect(),
        dirs: w.dirs,
        listed: w.listed,
        root,
        names,
        cache,
        depth: policy.protected.depth,
        new_repositories: policy.protected.new_repositories,
        root_git_placeholder,
        watched: walls.watched,
    }))
}

/// After the run: the violations for what the task created, and lines for the user (hooks
/// disarmed).
pub fn after_run(s: &Scanned) -> (Vec<Violation>, Vec<String>) {
    let w = walk(&s.root, &s.names, s.cache.as_deref());
    let mut violations = Vec::new();
    let mut lines = Vec::new();
    // New, or of another kind than before: a link that was a protected name below the root,
    // removed and made again as a file, is not protected by its target's walls any more.
    for hit in w.hits.iter().filter(|h| s.before.get(&h.path) != Some(&h.kind)) {
        let (Some(parent), Some(name)) = (hit.path.parent(), hit.path.file_name()) else {
            continue;
        };
        if name == ".git" {
            if parent == s.root && s.root_git_placeholder {
                continue;
            }
            let found = crate::runtime::new_repos::inspect(&hit.path, &s.root, s.new_repositories);
            if !found.disarmed.is_empty() {
                lines.push(format!(
                    "made the hooks of the new repository {} non-executable: {} (its config is left as it is)",
                    shown(&s.root, parent),
                    found.disarmed.join(", ")
                ));
            }
            violations.push(crate::runtime::new_repos::violation(parent, &found));
        } else if parent != s.root && s.depth == ProtectedDepth::Any {
            violations.push(Violation {
                kind: ViolationKind::Write,
                path: Some(hit.path.clone()),
                target: None,
                syscall: Some(paddock_policy::CREATED.to_owned()),
                errno: None,
                count: 1,
            });
        }
    }
    for (path, rule) in &s.watched {
        if std::fs::symlink_metadata(path.as_path()).is_err() {
            continue;
        }
        violations.push(Violation {
            kind: ViolationKind::Write,
            path: Some(path.as_path().to_path_buf()),
            target: None,
            syscall: Some(paddock_policy::CREATED.to_owned()),
            errno: None,
            count: 1,
        });
        let shown_path = shown(&s.root, path.as_path());
        lines.push(match s.new_repositories {
            NewRepositories::Disarm => match disarm(path.as_path()) {
                Ok(aside) => format!(
                    "renamed {shown_path} ({rule}), which appeared during the run, to {}: git on the host would have followed it",
                    shown(&s.root, &aside)
                ),
                Err(e) => format!(
                    "warning: {shown_path} ({rule}) appeared during the run and could not be renamed aside ({e}): git on the host follows it; read it before running git there"
                ),
            },
            NewRepositories::Report => format!(
                "warning: {shown_path} ({rule}) appeared during the run: git on the host follows it; read it before running git there"
            ),
        });
    }
    (violations, lines)
}

/// Renames `path` (itself, never what a link names) to `NAME.disarmed`, or
/// `NAME.disarmed.N` where that is taken, never over anything; returns the new name.
fn disarm(path: &Path) -> std::io::Result<PathBuf> {
    let name = path.file_name().unwrap_or_default().to_os_string();
    for n in 0..100 {
        let mut aside = name.clone();
        aside.push(".disarmed");
        if n > 0 {
            aside.push(format!(".{n}"));
        }
        let aside = path.with_file_name(aside);
        match crate::runtime::runtime_dir::spares::rename_noreplace(path, &aside) {
            Ok(()) => return Ok(aside),
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::from_raw_os_error(libc::EEXIST))
}

fn shown(root: &Path, p: &Path) -> String {
    match p.strip_prefix(root) {
        Ok(rel) if !rel.as_os_str().is_empty() => rel.display().to_string(),
        _ => p.display().to_string(),
    }
}
