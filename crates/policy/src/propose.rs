//! The policy `paddock learn` proposes from what a traced run did: the fewest grants that
//! cover it, collapsed to directories, spelled relative to the project and `~`, with
//! comments saying what was seen. Deterministic (sorted, no times), and it never grants a
//! read of a secret location or a write to a protected name: those become comments.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::{AbsPathBuf, DisplayBytes, FileKind, Host, ResolvedPolicy};

/// What a learning run saw. Paths are canonical.
#[derive(Clone, Debug, Default)]
pub struct Learned {
    /// Paths the task created, changed or removed.
    pub written: BTreeSet<PathBuf>,
    /// Paths whose write was refused.
    pub denied_writes: BTreeSet<PathBuf>,
    /// Hidden paths the task tried to read.
    pub denied_reads: BTreeSet<PathBuf>,
    /// Destinations the task connected to (`ip:port`).
    pub connects: BTreeSet<String>,
    /// Destinations it was refused.
    pub refused_connects: BTreeSet<String>,
    /// How many unix-domain sockets it created or was refused.
    pub unix_sockets: u64,
    /// The names in the project directory before the run: a directory the task created
    /// cannot be granted by name (a grant of a missing path grants nothing).
    pub preexisting: BTreeSet<std::ffi::OsString>,
}

/// How many example paths a comment lists per grant.
const EXAMPLES: usize = 3;

/// The proposed `paddock.toml` text.
pub fn propose(
    seen: &Learned,
    policy: &ResolvedPolicy,
    host: &dyn Host,
    command: &[std::ffi::OsString],
    exit_code: i32,
) -> String {
    let project = &policy.project_dir;
    let home = &policy.home;
    let mut out = String::new();
    let cmd: Vec<String> = command.iter().map(|a| DisplayBytes(a).to_string()).collect();
    let _ = writeln!(out, "# Proposed by `paddock learn` from one run of: {}", cmd.join(" "));
    let _ = writeln!(out, "# (the run exited {exit_code}). Review it before use.");
    let mut notes: Vec<String> = Vec::new();

    // Writes: each written path collapses to a grant; grants inside others are dropped.
    let mut grants: Vec<(String, Vec<String>)> = Vec::new();
    let all_writes = seen.written.iter().chain(&seen.denied_writes);
    let mut by_grant: std::collections::BTreeMap<String, BTreeSet<String>> = Default::default();
    for path in all_writes {
        let Some(abs) = AbsPathBuf::new_lexical(path) else { continue };
        if policy.protected.iter().any(|p| abs.starts_with(&p.path)) {
            notes.push(format!(
                "wrote to the protected path {} (not granted)",
                shown(path, project, home)
            ));
            continue;
        }
        if policy.anchor_hiding(&abs).is_some() {
            notes.push(format!(
                "wrote to the hidden location {} (not granted)",
                shown(path, project, home)
            ));
            continue;
        }
        match grant_for(&abs, project, home, host, &seen.preexisting) {
            Some(g) => {
                by_grant.entry(g).or_default().insert(shown(path, project, home));
            }
            None => notes.push(format!(
                "wrote {} (no directory narrow enough to grant)",
                shown(path, project, home)
            )),
        }
    }
    let keys: Vec<String> = by_grant.keys().cloned().collect();
    for (g, examples) in by_grant {
        let covered = keys.iter().any(|k| k != &g && covers(k, &g));
        if !covered {
            grants.push((g, examples.into_iter().collect()));
        }
    }
    out.push_str("\n[allow]\n");
    for (g, ex) in &grants {
        let more = if ex.len() > EXAMPLES {
            format!(" and {} more", ex.len() - EXAMPLES)
        } else {
            String::new()
        };
        let list: Vec<&str> = ex.iter().take(EXAMPLES).map(String::as_str).collect();
        let _ = writeln!(out, "# {g}: wrote {}{more}", list.join(", "));
    }
    let quoted: Vec<String> = grants.iter().map(|(g, _)| toml_string(g)).collect();
    let _ = writeln!(out, "write = [{}]", quoted.join(", "));

    let mut reads: Vec<String> = Vec::new();
    for path in &seen.denied_reads {
        let Some(abs) = AbsPathBuf::new_lexical(path) else { continue };
        let secret = policy
            .anchor_hiding(&abs)
            .is_some_and(|a| a.origin.to_string().contains("builtin-secrets"));
        if secret {
            notes.push(format!(
                "tried to read {}, a built-in secret location (not granted; grant it yourself \
                 with allow.read only if the task must have it)",
                shown(path, project, home)
            ));
        } else {
            reads.push(shown(path, project, home));
        }
    }
    if !reads.is_empty() {
        reads.sort();
        reads.dedup();
        let quoted: Vec<String> = reads.iter().map(|r| toml_string(r)).collect();
        let _ = writeln!(out, "read = [{}]", quoted.join(", "));
    }

    let dests: BTreeSet<&String> = seen.connects.iter().chain(&seen.refused_connects).collect();
    if dests.is_empty() {
        out.push_str("network = false\n");
    } else {
        let list: Vec<&str> = dests.iter().map(|s| s.as_str()).collect();
        let _ = writeln!(out, "# connected to: {}", list.join(", "));
        out.push_str("network = true\n");
    }
    if seen.unix_sockets > 0 {
        let _ = writeln!(out, "# created {} unix-domain socket(s)", seen.unix_sockets);
        out.push_str("unix-sockets = true\n");
    }
    if !notes.is_empty() {
        notes.sort();
        notes.dedup();
        out.push_str("\n# Seen and not proposed:\n");
        for n in notes {
            let _ = writeln!(out, "# - {n}");
        }
    }
    out
}

/// Whether grant `outer` covers grant `inner` (both as spelled in the proposal).
fn covers(outer: &str, inner: &str) -> bool {
    outer == "." && !inner.starts_with('/') && !inner.starts_with('~')
        || inner.strip_prefix(outer).is_some_and(|rest| rest.starts_with('/'))
}

/// The grant for a written path: in the project, its first component below the project if
/// that is a directory that existed before the run, else the project itself; under home, the nearest existing directory
/// at least two levels below home; elsewhere, the nearest existing directory at least two
/// levels below `/`. `None` when that would be too broad.
fn grant_for(
    path: &AbsPathBuf,
    project: &AbsPathBuf,
    home: &AbsPathBuf,
    host: &dyn Host,
    preexisting: &BTreeSet<std::ffi::OsString>,
) -> Option<String> {
    if let Some(rel) = path.strip_prefix(project) {
        let first = rel.components().next()?;
        let top = project.join(first);
        let is_dir = matches!(host.kind(top.as_path()), Ok(Some(FileKind::Dir)));
        let existed = preexisting.contains(first.as_os_str());
        return Some(if is_dir && existed {
            format!("{}", Path::new(first.as_os_str()).display())
        } else {
            ".".to_owned()
        });
    }
    let existing = nearest_dir(path, host)?;
    if let Some(rel) = existing.strip_prefix(home) {
        if rel.components().count() < 2 {
            return None;
        }
        return Some(format!("~/{}", rel.display()));
    }
    if existing.as_path().components().count() < 3 {
        return None;
    }
    Some(existing.as_path().display().to_string())
}

fn nearest_dir(path: &AbsPathBuf, host: &dyn Host) -> Option<AbsPathBuf> {
    let mut p = Some(path.clone());
    while let Some(cur) = p {
        if matches!(host.kind(cur.as_path()), Ok(Some(FileKind::Dir))) {
            return Some(cur);
        }
        p = cur.parent();
    }
    None
}

/// A path for a comment: relative to the project, or `~/...`, control characters escaped.
fn shown(path: &Path, project: &AbsPathBuf, home: &AbsPathBuf) -> String {
    if let Ok(rel) = path.strip_prefix(project.as_path()) {
        return DisplayBytes(rel.as_os_str()).to_string();
    }
    if let Ok(rel) = path.strip_prefix(home.as_path()) {
        return format!("~/{}", DisplayBytes(rel.as_os_str()));
    }
    DisplayBytes(path.as_os_str()).to_string()
}

/// A TOML basic string.
fn toml_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Context, FakeHost, default_policy, resolve};

    fn host() -> FakeHost {
        FakeHost::new()
            .dir("/home/u/proj/out/sub")
            .dir("/home/u/proj/.git/hooks")
            .file("/home/u/proj/Cargo.lock", "")
            .dir("/home/u/.cache/pip")
            .dir("/home/u/.ssh")
            .dir("/var/lib/thing")
    }

    #[test]
    fn grants_collapse_to_directories_and_secrets_stay_comments() {
        let ctx = Context::new("/home/u/proj", "/home/u").with_env(vec![]);
        let (policy, _) = resolve(&default_policy(), &ctx, &host()).unwrap();
        let p = |s: &str| PathBuf::from(s);
        let seen = Learned {
            written: [p("/home/u/proj/out/sub/a.txt"), p("/home/u/proj/out/b.txt")].into(),
            denied_writes: [p("/home/u/.cache/pip/x/y"), p("/var/lib/thing/db"), p("/etc/hosts")]
                .into(),
            denied_reads: [p("/home/u/.ssh/id_rsa")].into(),
            connects: BTreeSet::new(),
            refused_connects: ["192.0.2.1:443".to_owned()].into(),
            unix_sockets: 0,
            preexisting: ["out".into(), "Cargo.lock".into()].into(),
        };
        let text = propose(&seen, &policy, &host(), &["make".into()], 2);
        expect_test::expect![[r#"
            # Proposed by `paddock learn` from one run of: make
            # (the run exited 2). Review it before use.

            [allow]
            # /var/lib/thing: wrote /var/lib/thing/db
            # out: wrote out/b.txt, out/sub/a.txt
            # ~/.cache/pip: wrote ~/.cache/pip/x/y
            write = ["/var/lib/thing", "out", "~/.cache/pip"]
            # connected to: 192.0.2.1:443
            network = true

            # Seen and not proposed:
            # - tried to read ~/.ssh/id_rsa, a built-in secret location (not granted; grant it yourself with allow.read only if the task must have it)
            # - wrote /etc/hosts (no directory narrow enough to grant)
        "#]]
        .assert_eq(&text);
        // Deterministic, and a file in the project root grants the project.
        assert_eq!(text, propose(&seen, &policy, &host(), &["make".into()], 2));
        let root = Learned {
            written: [p("/home/u/proj/Cargo.lock"), p("/home/u/proj/out/x")].into(),
            preexisting: ["out".into()].into(),
            ..Learned::default()
        };
        let text = propose(&root, &policy, &host(), &["cargo".into()], 0);
        assert!(text.contains("write = [\".\"]"), "{text}");
        // A directory the task created is granted through its parent.
        let created = Learned { written: [p("/home/u/proj/out/x")].into(), ..Learned::default() };
        let text = propose(&created, &policy, &host(), &["make".into()], 0);
        assert!(text.contains("write = [\".\"]"), "{text}");
        assert_eq!(toml_string("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000A\"");
    }
}
