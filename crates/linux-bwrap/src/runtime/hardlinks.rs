//! `paddock check --project`: files hidden by `deny.read` that are hard-linked elsewhere in
//! the project.
//!
//! The walls hide paths, not inodes: a hard link to a hidden file under another name is a
//! second path to the same bytes, readable wherever that name is. So for every file that is
//! a deny anchor, or lies directly in a directory anchor, and has more than one link
//! (`st_nlink > 1`), the project is walked for the other names of its inode. The walk is
//! bounded (entries visited), does not follow symbolic links, skips what the policy hides
//! anyway, and stops once every other link of every such file is found.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use paddock_policy::{AbsPathBuf, FileKind, ResolvedPolicy};
use serde::Serialize;

/// The most directory entries the project walk visits.
pub const MAX_WALK: usize = 200_000;
/// The most entries read from one directory anchor.
pub const MAX_PER_ANCHOR: usize = 10_000;

/// One hidden file with other names.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Linked {
    /// The hidden file.
    pub hidden: PathBuf,
    /// The deny entry hiding it.
    pub hidden_by: String,
    /// Its link count.
    pub links: u64,
    /// Its other names in the project, readable inside the sandbox.
    pub also_at: Vec<PathBuf>,
}

/// What the check found.
#[derive(Clone, Debug, Serialize)]
pub struct Findings {
    /// The project walked.
    pub project: PathBuf,
    /// Hidden files with other names in the project.
    pub linked: Vec<Linked>,
    /// Hidden files with more links than were found in the project (elsewhere, or beyond
    /// the walk).
    pub unaccounted: Vec<PathBuf>,
    /// Directory entries visited.
    pub walked: usize,
    /// Whether the walk saw the whole project (false: it stopped at [`MAX_WALK`]).
    pub complete: bool,
}

struct Target {
    hidden: PathBuf,
    hidden_by: String,
    links: u64,
    also_at: Vec<PathBuf>,
}

/// Finds the other names in the project of the hidden files with more than one link.
pub fn find(policy: &ResolvedPolicy, max_walk: usize) -> Findings {
    let project = policy.project_dir.as_path().to_path_buf();
    let mut targets: HashMap<(u64, u64), Target> = HashMap::new();
    for anchor in &policy.read_deny {
        let mut consider = |path: PathBuf| {
            let Ok(meta) = std::fs::symlink_metadata(&path) else { return };
            if meta.is_file() && meta.nlink() > 1 {
                targets.entry((meta.dev(), meta.ino())).or_insert(Target {
                    hidden: path,
                    hidden_by: anchor.origin.to_string(),
                    links: meta.nlink(),
                    also_at: Vec::new(),
                });
            }
        };
        match anchor.kind {
            Some(FileKind::File) => consider(anchor.path.as_path().to_path_buf()),
            Some(FileKind::Dir) => {
                let Ok(dir) = std::fs::read_dir(anchor.path.as_path()) else { continue };
                for entry in dir.flatten().take(MAX_PER_ANCHOR) {
                    if entry.file_type().is_ok_and(|t| t.is_file()) {
                        consider(entry.path());
                    }
                }
            }
            _ => {}
        }
    }
    let mut walked = 0;
    let mut complete = true;
    if !targets.is_empty() {
        complete = walk(policy, &project, &mut targets, max_walk, &mut walked);
    }
    let mut linked = Vec::new();
    let mut unaccounted = Vec::new();
    for t in targets.into_values() {
        // The hidden name itself is one of the links.
        if (t.also_at.len() as u64) + 1 < t.links {
            unaccounted.push(t.hidden.clone());
        }
        if !t.also_at.is_empty() {
            let mut also_at = t.also_at;
            also_at.sort();
            linked.push(Linked {
                hidden: t.hidden,
                hidden_by: t.hidden_by,
                links: t.links,
                also_at,
            });
        }
    }
    linked.sort_by(|a, b| a.hidden.cmp(&b.hidden));
    unaccounted.sort();
    Findings { project, linked, unaccounted, walked, complete }
}

/// Walks `project` depth first without following links; returns whether it finished.
fn walk(
    policy: &ResolvedPolicy,
    project: &Path,
    targets: &mut HashMap<(u64, u64), Target>,
    max_walk: usize,
    walked: &mut usize,
) -> bool {
    let mut missing: u64 = targets.values().map(|t| t.links.saturating_sub(1)).sum();
    let mut stack = vec![project.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            if *walked >= max_walk {
                return false;
            }
            *walked += 1;
            let path = entry.path();
            // Hidden inside the sandbox anyway (the anchors themselves among them).
            if AbsPathBuf::new_lexical(&path).is_some_and(|p| policy.anchor_hiding(&p).is_some()) {
                continue;
            }
            let Ok(kind) = entry.file_type() else { continue };
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file() {
                let Ok(meta) = entry.metadata() else { continue };
                if meta.nlink() < 2 {
                    continue;
                }
                if let Some(t) = targets.get_mut(&(meta.dev(), meta.ino())) {
                    t.also_at.push(path);
                    missing = missing.saturating_sub(1);
                    if missing == 0 {
                        return true;
                    }
                }
            }
        }
    }
    true
}

/// The findings for people, one line each (as `paddock check` prints them).
pub fn lines(f: &Findings) -> Vec<String> {
    let mut out = Vec::new();
    let shown = |p: &Path| {
        p.strip_prefix(&f.project)
            .map_or_else(|_| p.display().to_string(), |r| r.display().to_string())
    };
    for l in &f.linked {
        let names: Vec<String> = l.also_at.iter().map(|p| shown(p)).collect();
        out.push(format!(
            "warn hard links         {} is hidden ({}) but hard-linked as {}: readable there inside the sandbox",
            shown(&l.hidden),
            l.hidden_by,
            names.join(", ")
        ));
        out.push("                        fix: remove the other name(s), or deny them too; paddock's walls hide paths, not inodes".into());
    }
    for p in &f.unaccounted {
        out.push(format!(
            "note hard links         {} has links outside the project{}; grant nothing that holds them",
            shown(p),
            if f.complete { "" } else { " (or beyond the walk's bound)" }
        ));
    }
    if f.linked.is_empty() {
        out.push(format!(
            "ok   hard links         no file hidden by deny.read is hard-linked elsewhere in {}",
            f.project.display()
        ));
    }
    if !f.complete {
        out.push(format!("note hard links         the walk stopped after {} entries", f.walked));
    }
    out
}
