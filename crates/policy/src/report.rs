//! Which violations are reported, and how they read.
//!
//! Only denials under `report.within` (default: the project dir), or reached through a
//! link under `report.linked`, are reported; the rest are enforced silently. `ignore.*`
//! lists silence matching reports, never enforcement.

use std::collections::BTreeMap;
use std::path::Path;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use crate::domain::HostName;
use crate::path::{AbsPathBuf, DisplayBytes};
use crate::resolved::ResolvedPolicy;
use crate::violation::{Violation, ViolationKind};

/// Decides which violations are reported.
#[derive(Debug)]
pub struct ReportFilter<'a> {
    policy: &'a ResolvedPolicy,
    globs: std::borrow::Cow<'a, IgnoreGlobs>,
}

/// The policy's `ignore.*` patterns, compiled: what a [`ReportFilter`] costs to make. A
/// reader that filters violations one at a time as they come compiles them once and keeps
/// them ([`ReportFilter::with`]).
#[derive(Clone, Debug)]
pub struct IgnoreGlobs {
    read: GlobSet,
    write: GlobSet,
    unix_sockets: GlobSet,
}

impl IgnoreGlobs {
    /// Compiles the `ignore.*` patterns of `policy`.
    pub fn new(policy: &ResolvedPolicy) -> IgnoreGlobs {
        IgnoreGlobs {
            read: globs(&policy.ignore.read),
            write: globs(&policy.ignore.write),
            unix_sockets: globs(&policy.ignore.unix_sockets),
        }
    }
}

impl<'a> ReportFilter<'a> {
    /// A filter for a resolved policy.
    pub fn new(policy: &'a ResolvedPolicy) -> ReportFilter<'a> {
        ReportFilter { policy, globs: std::borrow::Cow::Owned(IgnoreGlobs::new(policy)) }
    }

    /// A filter for `policy` with its patterns compiled before (`IgnoreGlobs::new(policy)`).
    pub fn with(policy: &'a ResolvedPolicy, globs: &'a IgnoreGlobs) -> ReportFilter<'a> {
        ReportFilter { policy, globs: std::borrow::Cow::Borrowed(globs) }
    }

    /// Whether `v` is reported. `spelled` is the path as the task spelled it (before
    /// following links), when the tracer knows it, for `report.linked`.
    pub fn keep(&self, v: &Violation, spelled: Option<&Path>) -> bool {
        match v.kind {
            ViolationKind::Read | ViolationKind::Write => {
                let Some(path) = &v.path else { return true };
                let within = |p: &Path| {
                    AbsPathBuf::new_lexical(p)
                        .is_some_and(|p| self.policy.report.within.iter().any(|w| p.starts_with(w)))
                };
                let linked = spelled.is_some_and(|s| {
                    AbsPathBuf::new_lexical(s)
                        .is_some_and(|s| self.policy.report.linked.iter().any(|l| s.starts_with(l)))
                });
                let ignored = match v.kind {
                    ViolationKind::Read => self.globs.read.is_match(path),
                    _ => self.globs.write.is_match(path),
                };
                (within(path) || linked) && !ignored
            }
            ViolationKind::Network => {
                let Some(target) = &v.target else { return true };
                let (host, port) = split_target(target);
                match HostName::parse(host) {
                    Ok(h) => !self
                        .policy
                        .ignore
                        .network
                        .iter()
                        .any(|p| p.allows(&h, port) || p.denies(&h, port)),
                    Err(_) => true,
                }
            }
            ViolationKind::SystemInfo => !v
                .target
                .as_ref()
                .is_some_and(|t| self.policy.ignore.system_info.iter().any(|i| i == t)),
            // A refused connect names its socket. A refused `socket(AF_UNIX)` (unix sockets
            // denied altogether) names none, and is mostly a library's probe (the name
            // service cache for every user name): reported only once the ignore list is
            // emptied.
            ViolationKind::UnixSocket => match &v.path {
                Some(p) => !self.globs.unix_sockets.is_match(p),
                None => self.policy.ignore.unix_sockets.is_empty(),
            },
            ViolationKind::MachLookup | ViolationKind::NewRepository => true,
        }
    }
}

fn split_target(target: &str) -> (&str, u16) {
    match target.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(':') => (h, p.parse().unwrap_or(0)),
        _ => (target, 0),
    }
}

fn globs(patterns: &[String]) -> GlobSet {
    let mut builder = GlobSetBuilder::new();
    for p in patterns {
        if let Ok(g) = GlobBuilder::new(p).literal_separator(true).build() {
            builder.add(g);
        }
        // A pattern also covers everything under what it names.
        if let Ok(g) = GlobBuilder::new(&format!("{}/**", p.trim_end_matches('/')))
            .literal_separator(true)
            .build()
        {
            builder.add(g);
        }
    }
    builder.build().unwrap_or_else(|_| GlobSet::empty())
}

/// The hint for a failed task with no reported violations whose working directory is not
/// readable under the policy.
pub fn cwd_hint(
    policy: &ResolvedPolicy,
    cwd: &AbsPathBuf,
    exit_code: i32,
    reported: usize,
) -> Option<String> {
    if exit_code == 0 || reported > 0 || policy.is_readable(cwd) {
        return None;
    }
    Some(format!(
        "the task's working directory {cwd} is hidden by this policy; grant it with `allow.read = [\".\"]` (or --allow-read .)"
    ))
}

/// A short, grouped summary for people: "denied 3 reads under src/secrets, 1 write to
/// /etc/hosts, 1 connection to example.com:443", each group with the key that would allow
/// it (`protected.writable` for a protected name, `deny.write` for the user's own). Control
/// characters in paths are escaped.
pub fn summarize(violations: &[Violation], policy: &ResolvedPolicy) -> Vec<String> {
    let project = &policy.project_dir;
    let mut groups: BTreeMap<(ViolationKind, String, &'static str), u64> = BTreeMap::new();
    let mut created = Vec::new();
    let shown = |p: &Path| {
        let rel = match p.strip_prefix(project.as_path()) {
            Ok(rel) if !rel.as_os_str().is_empty() => rel,
            _ => p,
        };
        DisplayBytes(rel.as_os_str()).to_string()
    };
    for v in violations {
        // Not refused, so not "denied": what the task made that git or a shell would run.
        match (v.kind, &v.path) {
            (ViolationKind::NewRepository, Some(p)) => {
                let what = v.target.as_deref().map_or(String::new(), |t| format!(" ({t})"));
                created.push(format!(
                    "the task created a git repository in {}{what}; look at it before running git there (protected.new-repositories)",
                    shown(p)
                ));
                continue;
            }
            (ViolationKind::Write, Some(p))
                if v.errno.is_none() && v.syscall.as_deref() == Some(CREATED) =>
            {
                created.push(format!(
                    "the task created {}, a protected name below the project root; look at it before it runs (protected.depth)",
                    shown(p)
                ));
                continue;
            }
            _ => {}
        }
        let key = match (&v.path, v.kind) {
            (Some(p), ViolationKind::Write)
                if let Some(key) =
                    AbsPathBuf::new_lexical(p).and_then(|p| crate::pins::held_key(policy, &p)) =>
            {
                key
            }
            (Some(p), ViolationKind::Write) => AbsPathBuf::new_lexical(p)
                .and_then(|p| policy.protected.iter().find(|pr| p.starts_with(&pr.path)))
                .map_or(v.kind.allow_key(), |pr| {
                    if pr.rule.starts_with("deny.write") {
                        "deny.write"
                    } else {
                        "protected.writable"
                    }
                }),
            _ => v.kind.allow_key(),
        };
        let what = match (&v.path, &v.target) {
            (Some(p), _) => {
                let shown = match p.strip_prefix(project.as_path()) {
                    Ok(rel) if !rel.as_os_str().is_empty() => rel.to_path_buf(),
                    _ => p.clone(),
                };
                DisplayBytes(shown.as_os_str()).to_string()
            }
            (None, Some(t)) => DisplayBytes(t.as_ref()).to_string(),
            (None, None) => String::from("(unknown)"),
        };
        *groups.entry((v.kind, what, key)).or_insert(0) += v.count;
    }
    groups
        .into_iter()
        .map(|((kind, what, key), n)| {
            let noun = match kind {
                ViolationKind::Read => "read",
                ViolationKind::Write => "write",
                ViolationKind::Network => "connection",
                ViolationKind::UnixSocket => "unix socket",
                ViolationKind::MachLookup => "mach lookup",
                ViolationKind::SystemInfo => "system-info read",
                ViolationKind::NewRepository => "new repository",
            };
            let plural = if n == 1 { "" } else { "s" };
            let prep = match kind {
                ViolationKind::Network | ViolationKind::Write => "to",
                _ => "of",
            };
            format!("denied {n} {noun}{plural} {prep} {what} (allow with {key})")
        })
        .chain(created)
        .collect()
}

/// The `syscall` of a write violation that was not refused: a protected name below the
/// project root that did not exist when the task started, found after the run.
pub const CREATED: &str = "create";
