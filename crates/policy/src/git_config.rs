//! `allow.git-config = true`: the project's own repository config is writable.
//!
//! `git config`, `git remote add` and `git branch --set-upstream` write `.git/config` (and,
//! with `extensions.worktreeConfig`, `config.worktree`). Both are protected names because
//! git config can name programs git runs on the host (`core.fsmonitor`, `core.sshCommand`,
//! `core.pager`, aliases, filters), so lifting them is a choice the user makes knowingly:
//! every run says so. Only the project's own repository is lifted (its `.git`, or the git
//! dirs a `.git` file points to); nested repositories keep read-only config, and hooks stay
//! read-only everywhere.

use crate::host::{FileKind, Host};
use crate::path::{AbsPathBuf, os_from_bytes};
use crate::resolve::canonicalize;
use crate::resolved::ProtectedPath;

/// The files `allow.git-config` makes writable in each git dir of the project.
pub(crate) const LIFTED: &[&str] = &["config", "config.worktree"];

/// The note printed on every run with `allow.git-config = true`.
pub(crate) fn warning(project: &AbsPathBuf) -> String {
    format!(
        "allow.git-config = true: warning: the task may write the git config of {project} (.git/config, config.worktree), which can name programs that git runs on the host (core.fsmonitor, core.sshCommand, core.pager, aliases, filters); hooks and nested repositories' config stay read-only"
    )
}

/// Removes from `protected` the config files of the project's own repository, returning
/// the paths made writable.
pub(crate) fn lift(
    host: &dyn Host,
    project: &AbsPathBuf,
    protected: &mut Vec<ProtectedPath>,
) -> Vec<AbsPathBuf> {
    let dirs = project_git_dirs(host, project);
    let lifted: Vec<AbsPathBuf> =
        dirs.iter().flat_map(|d| LIFTED.iter().map(move |name| d.join(name))).collect();
    let mut out = Vec::new();
    protected.retain(|p| {
        let keep = !lifted.contains(&p.path);
        if !keep {
            out.push(p.path.clone());
        }
        keep
    });
    out
}

/// The project's git dirs: `.git` when it is a directory (or missing: the repository a task
/// would `git init`); the directory a `.git` file points to and its common dir otherwise.
fn project_git_dirs(host: &dyn Host, project: &AbsPathBuf) -> Vec<AbsPathBuf> {
    let dot_git = project.join(".git");
    match host.kind(dot_git.as_path()) {
        Ok(Some(FileKind::File)) => {}
        Ok(Some(FileKind::Dir) | None) => return vec![dot_git],
        _ => return Vec::new(),
    }
    let mut out = Vec::new();
    let Ok(bytes) = host.read_file(dot_git.as_path(), 4096) else { return out };
    let Some(rest) = bytes.strip_prefix(b"gitdir:") else { return out };
    let target = project.as_path().join(os_from_bytes(rest.trim_ascii().to_vec()));
    let Ok((dir, Some(FileKind::Dir))) = canonicalize(host, &target) else { return out };
    if let Ok(common) = host.read_file(dir.join("commondir").as_path(), 4096) {
        let common = dir.as_path().join(os_from_bytes(common.trim_ascii().to_vec()));
        if let Ok((c, Some(FileKind::Dir))) = canonicalize(host, &common) {
            out.push(c);
        }
    }
    out.push(dir);
    out
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::{AbsPathBuf, Context, FakeHost, Format, load_str, resolve};

    fn abs(p: &str) -> AbsPathBuf {
        AbsPathBuf::new_lexical(p).unwrap()
    }

    fn resolved(
        config: &str,
        host: &FakeHost,
        project: &str,
    ) -> (crate::ResolvedPolicy, Vec<String>) {
        let policy = load_str(config, Path::new("paddock.toml"), Format::Toml).unwrap();
        resolve(&policy, &Context::new(project, "/home/u"), host).unwrap()
    }

    #[test]
    fn the_projects_config_is_writable_its_hooks_and_nested_repositories_are_not() {
        let host = FakeHost::new()
            .file("/home/u/proj/.git/config", "[core]")
            .file("/home/u/proj/.git/config.worktree", "")
            .dir("/home/u/proj/.git/hooks")
            .file("/home/u/proj/vendor/x/.git/config", "")
            .dir("/home/u/proj/vendor/x/.git/hooks");
        let (off, notes) = resolved("", &host, "/home/u/proj");
        assert!(!off.is_writable(&abs("/home/u/proj/.git/config")));
        assert!(!notes.iter().any(|n| n.contains("git-config")), "{notes:?}");
        let (on, notes) = resolved(
            "[allow]\ngit-config = true\nwrite = [\".\", \"vendor/x\"]\n",
            &host,
            "/home/u/proj",
        );
        assert!(on.git_config);
        assert!(on.is_writable(&abs("/home/u/proj/.git/config")));
        assert!(on.is_writable(&abs("/home/u/proj/.git/config.worktree")));
        assert!(!on.is_writable(&abs("/home/u/proj/.git/hooks/pre-commit")));
        assert!(on.pinned.contains(&abs("/home/u/proj/.git")), "hooks keep .git pinned");
        assert!(!on.is_writable(&abs("/home/u/proj/vendor/x/.git/config")), "a nested repository");
        assert!(!on.is_writable(&abs("/home/u/proj/vendor/x/.git/hooks/post-checkout")));
        assert!(
            notes.iter().any(|n| n.contains("warning") && n.contains("programs that git runs")),
            "{notes:?}"
        );
    }

    #[test]
    fn a_worktree_lifts_its_own_and_its_common_config_only_where_granted() {
        let host = FakeHost::new()
            .file("/home/u/wt/.git", "gitdir: /home/u/main/.git/worktrees/wt\n")
            .file("/home/u/main/.git/worktrees/wt/commondir", "../..\n")
            .file("/home/u/main/.git/worktrees/wt/config.worktree", "")
            .dir("/home/u/main/.git/hooks")
            .file("/home/u/main/.git/config", "");
        let config = "[allow]\ngit-config = true\nwrite = [\".\", \"/home/u/main\"]\n";
        let (r, _) = resolved(config, &host, "/home/u/wt");
        assert!(r.is_writable(&abs("/home/u/main/.git/config")));
        assert!(!r.is_writable(&abs("/home/u/main/.git/hooks/pre-commit")));
        // Without the grant the main repository stays read-only: git-config grants nothing.
        let (r, _) = resolved("[allow]\ngit-config = true\n", &host, "/home/u/wt");
        assert!(!r.is_writable(&abs("/home/u/main/.git/config")));
    }

    #[test]
    fn srt_allow_git_config_converts_with_a_note() {
        let json = r#"{"filesystem": {"allowWrite": ["."], "allowGitConfig": true}}"#;
        let (policy, notes) = crate::srt::convert(json, Path::new("settings.json")).unwrap();
        assert!(policy.allow.git_config);
        assert!(
            notes.iter().any(|n| n.contains("allowGitConfig") && n.contains("allow.git-config")),
            "{notes:?}"
        );
        let json = r#"{"filesystem": {"allowGitConfig": false}}"#;
        let (policy, notes) = crate::srt::convert(json, Path::new("settings.json")).unwrap();
        assert!(!policy.allow.git_config && notes.is_empty(), "{notes:?}");
    }
}
