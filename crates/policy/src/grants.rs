//! What a write grant may not cover by accident: a protected name (only
//! `protected.writable` lifts one), and the home directory (only `allow.write-home`).
//!
//! A grant of `.git/hooks` once lifted the protection silently, and `allow.write = ["~"]`
//! ran without a word while `"/"` was refused. Both are now errors naming the key and the
//! fix; a home grant with `allow.write-home = true` prints a warning on every run.

use crate::error::{Error, Result};
use crate::host::Host;
use crate::model::Policy;
use crate::origin::Origin;
use crate::path::AbsPathBuf;
use crate::protected::{PROTECTED_NAMES, Scope};

/// Where protected names apply above `path`: each ancestor (or `path` itself) that is the
/// project, the home directory, or a git work tree, with the scope that applies there.
pub fn repo_bases_above(
    host: &dyn Host,
    path: &AbsPathBuf,
    project: &AbsPathBuf,
    home: &AbsPathBuf,
) -> Vec<(AbsPathBuf, Scope)> {
    let mut out = Vec::new();
    let mut at = Some(path.clone());
    while let Some(dir) = at {
        if &dir == home {
            out.push((dir.clone(), Scope::Repo));
            out.push((dir.clone(), Scope::Home));
        } else if &dir == project || matches!(host.kind(dir.join(".git").as_path()), Ok(Some(_))) {
            out.push((dir.clone(), Scope::Repo));
        }
        at = dir.parent();
    }
    out
}

/// Whether a protected name of `scope` at `base` lies strictly inside `grant` (a grant of
/// `.git` holds `.git/hooks`): only then do that base's names need a look.
pub fn names_below(base: &AbsPathBuf, scope: Scope, grant: &AbsPathBuf) -> bool {
    PROTECTED_NAMES.iter().filter(|n| n.scope == scope).any(|n| {
        let path = base.join(n.name);
        path.starts_with(grant) && &path != grant
    })
}

/// Refuses a write grant that is a protected name or lies inside one, unless that name is
/// listed in `protected.writable`.
pub fn refuse_protected_grant(
    host: &dyn Host,
    policy: &Policy,
    grant: &AbsPathBuf,
    origin: &Origin,
    text: &str,
    project: &AbsPathBuf,
    home: &AbsPathBuf,
) -> Result<()> {
    let lifted = |name: &str| policy.protected.writable.iter().any(|w| w.value == name);
    if grant == project {
        // The project the user chose is granted wherever it lies (a dotfiles repo in
        // `~/.config/fish`); the names inside it stay protected.
        return Ok(());
    }
    for (base, scope) in repo_bases_above(host, grant, project, home) {
        let mut names: Vec<(AbsPathBuf, String)> = PROTECTED_NAMES
            .iter()
            .filter(|n| n.scope == scope && !lifted(n.name))
            .map(|n| (base.join(n.name), n.name.to_owned()))
            .collect();
        if scope == Scope::Repo {
            for extra in &policy.protected.extra {
                names.push((base.join(&extra.value.0), extra.origin.key().to_owned()));
            }
        }
        for (path, name) in names {
            if grant.starts_with(&path) {
                let fix = if PROTECTED_NAMES.iter().any(|n| n.name == name) {
                    format!(
                        "remove the entry, or add {name:?} to protected.writable if the task must write it"
                    )
                } else {
                    format!("remove the entry, or remove {name} from protected.extra")
                };
                return Err(Error::Invalid {
                    origin: origin.clone(),
                    value: format!("{text:?}"),
                    message: format!(
                        "{grant} is the protected name {name} or inside it, which stays read-only in every write grant"
                    ),
                    fix,
                });
            }
        }
    }
    Ok(())
}

/// Refuses a write grant of the home directory or anything holding it, unless
/// `allow.write-home = true`; with it, returns the warning to print.
pub fn check_home_grant(
    policy: &Policy,
    grant: &AbsPathBuf,
    origin: &Origin,
    text: &str,
    home: &AbsPathBuf,
) -> Result<Option<String>> {
    if !home.starts_with(grant) {
        return Ok(None);
    }
    let what = if grant == home {
        "the home directory".to_owned()
    } else {
        format!("{grant}, which holds the home directory")
    };
    if !policy.allow.write_home {
        return Err(Error::Invalid {
            origin: origin.clone(),
            value: format!("{text:?}"),
            message: format!(
                "grants {what} writable: every shell start-up file, key and tool config there"
            ),
            fix: "grant the directories the task writes, or set allow.write-home = true (or run from a project directory)".to_owned(),
        });
    }
    Ok(Some(format!(
        "warning: {what} is writable (allow.write-home = true); protected names stay read-only"
    )))
}
