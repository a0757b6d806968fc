//! Resolution: a [`Policy`] and a [`Context`] in, a [`ResolvedPolicy`] and diagnostics out.
//!
//! Every path is anchored (`~` at home, relative at the project dir), canonicalized through
//! the [`Host`] component by component (a missing tail is kept as written), and checked:
//! a grant spelled inside the project must stay inside it (items 1003, SYM-01), a relative
//! entry may not climb out of the project (POL-04), glob hits that leave their base through
//! a link are dropped (1006), and a write glob that matches nothing is reported once with
//! the directory to grant instead (496).

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

pub use crate::canonical::canonicalize;
use crate::canonical::host_error;
use crate::config::check_path_text;
use crate::defaults::builtin_secret_entries;
use crate::env::build_env;
use crate::error::{Error, Result};
use crate::expand::ExpandError;
use crate::glob::{self, GlobError};
use crate::grants;
use crate::host::{FileKind, Host};
use crate::missing;
use crate::model::{Entry, NetworkRule, PathSpec, Policy, UnixSocketsRule};
use crate::odd_paths;
use crate::origin::Origin;
use crate::path::{AbsPathBuf, DisplayBytes, os_from_bytes};
use crate::protected::{PROTECTED_NAMES, Scope};
use crate::resolved::{
    DenyAnchor, Exception, GlobKind, GlobRule, IgnoreRules, NetworkPolicy, ProtectedPath,
    ProtectedState, ReportScope, ResolvedPolicy, SocketPath, UnixSockets, WriteGrant,
};
use crate::spelling::{self, Anchored};

/// What resolution needs to know about the run besides the policy.
#[derive(Clone, Debug)]
pub struct Context {
    /// The project directory (absolute; canonicalized by resolution).
    pub project_dir: PathBuf,
    /// The home directory (absolute).
    pub home: PathBuf,
    /// The runner's environment, from which the task's is built.
    pub env: Vec<(OsString, OsString)>,
    /// The config files paddock read (absolute): read-only inside the sandbox wherever a
    /// write grant covers them.
    pub config_files: Vec<PathBuf>,
}

impl Context {
    /// A context with an empty environment.
    pub fn new(project_dir: impl Into<PathBuf>, home: impl Into<PathBuf>) -> Context {
        Context {
            project_dir: project_dir.into(),
            home: home.into(),
            env: Vec::new(),
            config_files: Vec::new(),
        }
    }

    /// The same context with the runner's environment.
    pub fn with_env(mut self, env: Vec<(OsString, OsString)>) -> Context {
        self.env = env;
        self
    }

    /// The same context with the config files paddock read.
    pub fn with_config_files(mut self, files: Vec<PathBuf>) -> Context {
        self.config_files = files;
        self
    }
}

/// How an entry was spelled, which decides the checks it gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Spelling {
    Relative,
    Home,
    Absolute,
}

/// Resolves a policy. Diagnostics are notes for the user (dropped glob hits, a write glob
/// that matched nothing); errors reject the whole policy.
pub fn resolve(
    policy: &Policy,
    ctx: &Context,
    host: &dyn Host,
) -> Result<(ResolvedPolicy, Vec<String>)> {
    Resolver::new(ctx, host)?.run(policy)
}

struct Resolver<'a> {
    host: &'a dyn Host,
    ctx: &'a Context,
    project: AbsPathBuf,
    home: AbsPathBuf,
    diagnostics: Vec<String>,
    globs: Vec<GlobRule>,
}

/// One resolved path entry.
struct Resolved {
    path: AbsPathBuf,
    kind: Option<FileKind>,
    origin: Origin,
    spelled_inside_project: bool,
    spelling: Spelling,
    text: String,
    /// A glob's hit, not a path the entry named.
    glob_hit: bool,
}

impl<'a> Resolver<'a> {
    fn new(ctx: &'a Context, host: &'a dyn Host) -> Result<Resolver<'a>> {
        if !ctx.project_dir.is_absolute() || !ctx.home.is_absolute() {
            return Err(Error::Plan {
                backend: "policy",
                message: "the project and home directories must be absolute paths".to_owned(),
            });
        }
        let (project, kind) = canonicalize(host, &ctx.project_dir)?;
        if kind != Some(FileKind::Dir) {
            return Err(Error::Host {
                path: DisplayBytes(ctx.project_dir.as_os_str()).to_string(),
                message: "the project directory does not exist or is not a directory; pass an existing one with -C DIR".to_owned(),
            });
        }
        let (home, _) = canonicalize(host, &ctx.home)?;
        Ok(Resolver { host, ctx, project, home, diagnostics: Vec::new(), globs: Vec::new() })
    }

    fn run(mut self, policy: &Policy) -> Result<(ResolvedPolicy, Vec<String>)> {
        // Writes first: they are exceptions to deny anchors and bases of protected names.
        let mut write = Vec::new();
        for entry in &policy.allow.write {
            for r in self.entry_paths(entry, GlobKind::Write)? {
                self.check_write(&r)?;
                if let Err(refused) = grants::refuse_protected_grant(
                    self.host,
                    policy,
                    &r.path,
                    &r.origin,
                    &r.text,
                    &self.project,
                    &self.home,
                ) {
                    // A glob's hit at a protected name is not granted; a named one is an error.
                    if !r.glob_hit {
                        return Err(refused);
                    }
                    self.note(
                        &r.origin,
                        &format!("{} is a protected name; the glob does not grant it", r.path),
                    );
                    continue;
                }
                if let Some(warning) =
                    grants::check_home_grant(policy, &r.path, &r.origin, &r.text, &self.home)?
                {
                    self.note(&r.origin, &warning);
                }
                match r.kind {
                    Some(kind @ (FileKind::Dir | FileKind::File)) => {
                        write.push(WriteGrant { path: r.path, kind, origin: r.origin })
                    }
                    Some(_) => self.note(&r.origin, &format!("{} is not a file or directory; nothing granted", r.path)),
                    None => self.note(
                        &r.origin,
                        &format!("{} does not exist, so nothing is granted there; create it first or grant its parent directory", r.path),
                    ),
                }
            }
        }
        write.sort_by(|a, b| a.path.cmp(&b.path));
        write.dedup_by(|a, b| a.path == b.path);

        let mut anchor_entries =
            if policy.deny.builtin_secrets { builtin_secret_entries() } else { Vec::new() };
        anchor_entries.extend(policy.deny.read.iter().cloned());
        let mut anchors: Vec<DenyAnchor> = Vec::new();
        for entry in &anchor_entries {
            for r in self.entry_paths(entry, GlobKind::DenyRead)? {
                let path = match r.kind {
                    Some(_) => r.path,
                    // Missing now: masked anyway (`crate::missing`).
                    None if missing::masks_when_missing(entry) => {
                        missing::outermost_missing(self.host, &r.path)?
                    }
                    None => continue,
                };
                anchors.push(DenyAnchor {
                    path,
                    kind: r.kind,
                    exceptions: Vec::new(),
                    origin: r.origin,
                });
            }
        }
        anchors.sort_by(|a, b| a.path.cmp(&b.path));
        anchors.dedup_by(|a, b| a.path == b.path);

        let mut reads = Vec::new();
        for entry in &policy.allow.read {
            for r in self.entry_paths(entry, GlobKind::Read)? {
                if r.spelled_inside_project
                    && !r.path.starts_with(&self.project)
                    && let Some(anchor) = anchors.iter().find(|a| r.path.starts_with(&a.path))
                {
                    return Err(Error::EscapesProject {
                        origin: r.origin.clone(),
                        entry: r.text.clone(),
                        resolved: format!("{} (hidden by {})", r.path, anchor.origin),
                    });
                }
                if let Some(kind) = r.kind {
                    if let Some(link) = self.spelled_link(entry, &r.path, &write) {
                        reads.push((link, kind));
                    }
                    reads.push((r.path, kind));
                }
            }
        }
        for anchor in &mut anchors {
            let mut exceptions: Vec<Exception> = Vec::new();
            for (path, kind) in &reads {
                if path.starts_with(&anchor.path) && path != &anchor.path {
                    exceptions.push(Exception { path: path.clone(), kind: *kind, writable: false });
                }
            }
            for g in &write {
                if g.path.starts_with(&anchor.path) && g.path != anchor.path {
                    exceptions.push(Exception {
                        path: g.path.clone(),
                        kind: g.kind,
                        writable: true,
                    });
                }
            }
            exceptions.sort_by(|a, b| a.path.cmp(&b.path).then(b.writable.cmp(&a.writable)));
            exceptions.dedup_by(|a, b| a.path == b.path);
            anchor.exceptions = exceptions;
        }
        // An anchor granted by its own path is lifted; a grant above an anchor does not lift
        // it (the anchor narrows the grant: `write = ["~"]` still hides `~/.ssh`).
        anchors.retain(|a| {
            !reads.iter().any(|(p, _)| *p == a.path) && !write.iter().any(|g| g.path == a.path)
        });
        // An anchor inside another anchor is hidden already unless an exception of the
        // outer one re-opens a path holding it; keeping it would only add a mount point that
        // shows its name (`ls ~` listing `.ssh` under a hidden home).
        let outer: Vec<DenyAnchor> = anchors.clone();
        anchors.retain(|b| {
            !outer.iter().any(|a| {
                a.path != b.path
                    && b.path.starts_with(&a.path)
                    && !a.exceptions.iter().any(|e| b.path.starts_with(&e.path))
            })
        });

        let (mut protected, mut pinned) = self.protected(policy, &write)?;
        if policy.allow.git_config {
            crate::git_config::lift(self.host, &self.project, &mut protected);
            self.diagnostics.push(crate::git_config::warning(&self.project));
        }
        pinned.extend(crate::pins::deny_anchor_pins(self.host, &anchors, &write));
        pinned.sort();
        pinned.dedup();
        let network = match &policy.allow.network.value {
            NetworkRule::Off => NetworkPolicy::Off,
            NetworkRule::On => NetworkPolicy::On,
            NetworkRule::Domains(list) => NetworkPolicy::Filtered {
                allow: list.iter().map(|e| e.value.clone()).collect(),
                deny: policy.deny.network.iter().map(|e| e.value.clone()).collect(),
            },
        };
        let unix_sockets = self.unix_sockets(&policy.allow.unix_sockets, &write)?;
        let env = self.task_env(policy, &unix_sockets);
        let report = ReportScope {
            within: if policy.report.within.is_empty() {
                vec![self.project.clone()]
            } else {
                self.plain_paths(&policy.report.within)?
            },
            linked: self.plain_paths(&policy.report.linked)?,
            itemize: policy.report.itemize,
        };
        let ignore = IgnoreRules {
            read: self.glob_texts(&policy.ignore.read)?,
            write: self.glob_texts(&policy.ignore.write)?,
            network: policy.ignore.network.iter().map(|e| e.value.clone()).collect(),
            system_info: policy.ignore.system_info.iter().map(|e| e.value.clone()).collect(),
            unix_sockets: policy
                .report
                .ignore_unix_sockets
                .iter()
                .map(|e| e.value.0.to_string_lossy().into_owned())
                .collect(),
        };
        let tmp = AbsPathBuf::new_lexical("/tmp").unwrap_or_else(AbsPathBuf::root);
        let private_tmp = !write.iter().any(|g| tmp.starts_with(&g.path));
        let ports = |list: &[Entry<u16>]| {
            let mut v: Vec<u16> = list.iter().map(|e| e.value).collect();
            v.sort_unstable();
            v.dedup();
            v
        };
        let resolved = ResolvedPolicy {
            project_dir: self.project.clone(),
            home: self.home.clone(),
            read_deny: anchors,
            write,
            protected,
            pinned,
            globs: std::mem::take(&mut self.globs),
            network,
            unix_sockets,
            local_ports: ports(&policy.allow.local_ports),
            host_ports: ports(&policy.allow.host_ports),
            pty: policy.allow.pty,
            git_config: policy.allow.git_config,
            system_info: policy.allow.system_info,
            mach_lookup: policy.allow.mach_lookup.iter().map(|e| e.value.clone()).collect(),
            weaker_when_nested: policy.weaker_when_nested,
            private_tmp,
            env,
            report,
            ignore,
        };
        Ok((resolved, self.diagnostics))
    }

    /// The task's environment; `SSH_AUTH_SOCK` passes when the socket it names is granted
    /// by path (never by a pattern, and not when `env.unset` names it).
    fn task_env(
        &mut self,
        policy: &Policy,
        unix_sockets: &UnixSockets,
    ) -> Vec<(OsString, OsString)> {
        let mut env = build_env(&policy.env, &self.ctx.env);
        const AGENT: &str = "SSH_AUTH_SOCK";
        let UnixSockets::Paths { sockets } = unix_sockets else { return env };
        let Some((_, value)) = self.ctx.env.iter().rev().find(|(k, _)| k == AGENT) else {
            return env;
        };
        let unset = policy.env.unset.iter().any(|e| e.value == AGENT);
        let (anchored, _) = self.anchor(value);
        let granted = AbsPathBuf::new_lexical(&anchored)
            .is_some_and(|p| sockets.iter().any(|s| s.declared == p || s.resolved == p));
        if granted && !unset && !env.iter().any(|(k, _)| k == AGENT) {
            env.push((OsString::from(AGENT), value.clone()));
        }
        env
    }

    /// The path an `allow.read` entry was spelled as, when a link outside every write grant
    /// led it to `real` (`/lib64` to `/usr/lib64`): under a hidden `/` the link is gone, so
    /// the spelled path is bound from it too. A link a task could plant or swap (inside a
    /// write grant) is never followed twice.
    fn spelled_link(
        &self,
        entry: &Entry<PathSpec>,
        real: &AbsPathBuf,
        write: &[WriteGrant],
    ) -> Option<AbsPathBuf> {
        let spelled = spelling::spell(&entry.value.0);
        if spelled.forced_glob || spelling::looks_like_glob(&spelled.text) {
            return None;
        }
        let lexical = AbsPathBuf::new_lexical(self.anchor(&spelled.text).0)?;
        let through_writable = |p: &AbsPathBuf| write.iter().any(|g| p.starts_with(&g.path));
        (lexical != *real && !through_writable(&lexical)).then_some(lexical)
    }

    fn note(&mut self, origin: &Origin, message: &str) {
        self.diagnostics.push(format!("{origin}: {message}"));
    }

    /// Anchors an entry's text: `~` at home, relative at the project; normalized first
    /// (`crate::spelling`), for every key.
    fn anchor(&self, text: &OsStr) -> (PathBuf, Spelling) {
        let (anchored, spelling) = self.anchor_parts(&spelling::spell(text).text);
        (anchored.path(), spelling)
    }

    /// Anchors normalized text, keeping the anchor apart from what was written below it.
    fn anchor_parts(&self, text: &OsStr) -> (Anchored, Spelling) {
        let bytes = text.as_encoded_bytes();
        let at = |base: &AbsPathBuf, rest: &[u8]| Anchored {
            base: base.as_path().to_path_buf(),
            rest: PathBuf::from(os_from_bytes(rest.to_vec())),
        };
        if bytes == b"~" {
            (at(&self.home, b""), Spelling::Home)
        } else if let Some(rest) = bytes.strip_prefix(b"~/") {
            (at(&self.home, rest), Spelling::Home)
        } else if let Some(rest) = bytes.strip_prefix(b"/") {
            (at(&AbsPathBuf::root(), rest), Spelling::Absolute)
        } else if bytes == b"." {
            (at(&self.project, b""), Spelling::Relative)
        } else {
            (at(&self.project, bytes), Spelling::Relative)
        }
    }

    /// The paths one entry names: itself, or a glob's hits (recording the glob rule).
    /// An entry that exists as written is literal; glob syntax applies only to one that does
    /// not, or to one marked `glob:` (`crate::spelling`). Text that is no valid glob is a
    /// literal path too (a deny entry must never fail to start over a bracket).
    fn entry_paths(&mut self, entry: &Entry<PathSpec>, kind: GlobKind) -> Result<Vec<Resolved>> {
        let raw = &entry.value.0;
        if let Some(text) = raw.to_str() {
            check_path_text(text, &entry.origin)?;
        }
        let spelled = spelling::spell(raw);
        let collapsed = glob::collapse_whole_dir(spelled.text.as_encoded_bytes())
            .filter(|_| spelled.forced_glob || spelling::looks_like_glob(&spelled.text))
            .map(os_from_bytes);
        let (parts, spelling) = self.anchor_parts(&spelled.text);
        let anchored = parts.path();
        let lexical = AbsPathBuf::new_lexical(&anchored).unwrap_or_else(AbsPathBuf::root);
        let spelled_inside_project =
            spelling == Spelling::Relative || lexical.starts_with(&self.project);
        if spelling == Spelling::Relative && !lexical.starts_with(&self.project) {
            return Err(Error::Invalid {
                origin: entry.origin.clone(),
                value: format!("{:?}", DisplayBytes(raw).to_string()),
                message: format!(
                    "a relative entry may not leave the project directory {}",
                    self.project
                ),
                fix: format!(
                    "write the absolute path ({lexical}) if you mean a place outside the project"
                ),
            });
        }
        if spelling == Spelling::Home && !lexical.starts_with(&self.home) {
            return Err(Error::Invalid {
                origin: entry.origin.clone(),
                value: format!("{:?}", DisplayBytes(raw).to_string()),
                message: format!("a `~` entry may not leave the home directory {}", self.home),
                fix: format!("write the absolute path ({lexical}) if you mean a place outside it"),
            });
        }
        let shown = DisplayBytes(raw).to_string();
        let literal = |path: AbsPathBuf, kind: Option<FileKind>| Resolved {
            path,
            kind,
            origin: entry.origin.clone(),
            spelled_inside_project,
            spelling,
            text: shown.clone(),
            glob_hit: false,
        };
        if !spelled.forced_glob && !spelling::looks_like_glob(&spelled.text) {
            let (path, found) = canonicalize(self.host, &anchored)?;
            return Ok(vec![literal(path, found)]);
        }
        let (base_text, pattern) = parts.split_glob();
        let (base, base_kind) = canonicalize(self.host, &base_text)?;
        if !spelled.forced_glob {
            // Below a base that is missing the literal path is missing too (ten thousand
            // such entries cost one lookup each, not two).
            if base_kind.is_some() {
                let (path, found) = canonicalize(self.host, &anchored)?;
                if found.is_some() {
                    return Ok(vec![literal(path, found)]);
                }
            }
            if collapsed.is_none() && !glob::brackets_close(pattern.as_os_str().as_encoded_bytes())
            {
                // Not a pattern at all: the literal path, which does not exist.
                let (path, found) = canonicalize(self.host, &anchored)?;
                return Ok(vec![literal(path, found)]);
            }
        }
        if let Some(whole) = &collapsed {
            // `dir/**`: the directory itself.
            let (whole_parts, _) = self.anchor_parts(whole);
            let (path, found) = canonicalize(self.host, &whole_parts.path())?;
            return Ok(vec![literal(path, found)]);
        }
        self.globs.push(GlobRule {
            kind,
            base: base.clone(),
            pattern: pattern.as_os_str().to_os_string(),
            origin: entry.origin.clone(),
        });
        if base_kind != Some(FileKind::Dir) {
            if kind == GlobKind::Write {
                self.note(
                    &entry.origin,
                    &format!("`{shown}` matches nothing: {base} does not exist"),
                );
            }
            return Ok(Vec::new());
        }
        let hits = glob::expand(self.host, &base, &pattern).map_err(|e| Error::Invalid {
            origin: entry.origin.clone(),
            value: format!("{shown:?}"),
            message: match e {
                GlobError::Invalid(m) => format!("not a valid glob: {m}"),
                GlobError::TooLarge => format!(
                    "the glob visits more than {} entries or matches more than {}",
                    glob::MAX_VISITS,
                    glob::MAX_HITS
                ),
            },
            fix: format!("grant the directory {base} instead"),
        })?;
        let mut out = Vec::new();
        let mut dropped = 0;
        for hit in hits {
            let (real, real_kind) = canonicalize(self.host, hit.as_path())?;
            if !real.starts_with(&base) {
                dropped += 1;
                continue;
            }
            out.push(Resolved { glob_hit: true, ..literal(real, real_kind) });
        }
        if dropped > 0 {
            self.note(&entry.origin, &format!("{dropped} match(es) of `{shown}` leave {base} through a symlink and are not granted"));
        }
        if out.is_empty() && kind == GlobKind::Write {
            self.note(
                &entry.origin,
                &format!(
                    "`{shown}` matches nothing now; on Linux a glob grants only what exists when the task starts, so grant the directory instead: {base}"
                ),
            );
        }
        Ok(out)
    }

    /// Write grants: no `/`, no escape from the project through a link.
    fn check_write(&self, r: &Resolved) -> Result<()> {
        if r.path == AbsPathBuf::root() {
            return Err(Error::Invalid {
                origin: r.origin.clone(),
                value: format!("{:?}", r.text),
                message: "granting the whole filesystem writable is refused".to_owned(),
                fix: "grant the directories the task writes".to_owned(),
            });
        }
        if r.spelled_inside_project && !r.path.starts_with(&self.project) {
            return Err(Error::EscapesProject {
                origin: r.origin.clone(),
                entry: r.text.clone(),
                resolved: r.path.to_string(),
            });
        }
        if r.spelling == Spelling::Home && !r.path.starts_with(&self.home) {
            return Err(Error::EscapesProject {
                origin: r.origin.clone(),
                entry: r.text.clone(),
                resolved: r.path.to_string(),
            });
        }
        Ok(())
    }

    /// Protected names and `deny.write`, inside the write grants; and the directories to pin.
    fn protected(
        &mut self,
        policy: &Policy,
        write: &[WriteGrant],
    ) -> Result<(Vec<ProtectedPath>, Vec<AbsPathBuf>)> {
        let writable = |p: &AbsPathBuf| {
            write.iter().any(|g| g.kind == FileKind::Dir && p.starts_with(&g.path))
        };
        let mut bases: Vec<(AbsPathBuf, Scope)> = Vec::new();
        if writable(&self.project) {
            bases.push((self.project.clone(), Scope::Repo));
        }
        if writable(&self.home) {
            bases.push((self.home.clone(), Scope::Repo));
            bases.push((self.home.clone(), Scope::Home));
        }
        for g in write.iter().filter(|g| g.kind == FileKind::Dir) {
            if matches!(self.host.kind(g.path.join(".git").as_path()), Ok(Some(_))) {
                bases.push((g.path.clone(), Scope::Repo));
            }
            // A grant below a work tree (`.git`, `.config`) holds its protected names too.
            bases.extend(
                grants::repo_bases_above(self.host, &g.path, &self.project, &self.home)
                    .into_iter()
                    .filter(|(base, scope)| grants::names_below(base, *scope, &g.path)),
            );
        }
        bases.sort();
        bases.dedup();
        let mut wanted: Vec<(AbsPathBuf, String, bool)> = Vec::new();
        for (base, scope) in &bases {
            for name in PROTECTED_NAMES.iter().filter(|n| n.scope == *scope) {
                if policy.protected.writable.iter().any(|w| w.value == name.name) {
                    continue;
                }
                wanted.push((base.join(name.name), name.name.to_owned(), name.dir));
            }
            if *scope == Scope::Repo {
                for extra in &policy.protected.extra {
                    wanted.push((base.join(&extra.value.0), extra.origin.key().to_owned(), false));
                }
                wanted.extend(self.git_dirs(base));
            }
        }
        // Every config file paddock read, so that a task cannot rewrite the next run's
        // policy (also one given with `-c FILE` inside the project).
        for file in &self.ctx.config_files {
            wanted.push((
                AbsPathBuf::new_lexical(file).unwrap_or_else(AbsPathBuf::root),
                "config file".to_owned(),
                false,
            ));
        }
        for entry in &policy.deny.write {
            let (anchored, _) = self.anchor(&entry.value.0);
            wanted.push((
                AbsPathBuf::new_lexical(&anchored).unwrap_or_else(AbsPathBuf::root),
                entry.origin.key().to_owned(),
                false,
            ));
        }
        let mut out: Vec<ProtectedPath> = Vec::new();
        let mut pinned: Vec<AbsPathBuf> = Vec::new();
        let mut degraded: Vec<odd_paths::Degraded> = Vec::new();
        // Most names share a parent (the project, its `.git`): each is canonicalized once.
        let mut parents: Vec<(AbsPathBuf, AbsPathBuf)> = Vec::new();
        for (path, rule, _dir) in wanted {
            // Canonicalize the parent: the name itself must not be a link (checked below).
            let Some(parent) = path.parent() else { continue };
            let Some(file_name) = path.file_name() else { continue };
            let parent_real = match parents.iter().find(|(p, _)| *p == parent) {
                Some((_, real)) => real.clone(),
                None => {
                    let (real, _) = canonicalize(self.host, parent.as_path())?;
                    parents.push((parent, real.clone()));
                    real
                }
            };
            let real = parent_real.join(file_name);
            let Some(grant) = write
                .iter()
                .filter(|g| g.kind == FileKind::Dir && real.starts_with(&g.path))
                .max_by_key(|g| g.path.as_os_str().len())
            else {
                continue;
            };
            if real == grant.path {
                continue;
            }
            if let Some(file) = odd_paths::file_ancestor(self.host, &real, &grant.path) {
                degraded.push(odd_paths::below_a_file(file, &rule));
                continue;
            }
            let state = match self.host.kind(real.as_path()).map_err(host_error)? {
                Some(FileKind::Symlink) => {
                    degraded.push(odd_paths::symlinked(self.host, &real, &rule, write)?);
                    continue;
                }
                Some(kind) => ProtectedState::Exists { kind },
                None => {
                    let first_missing = std::iter::once(real.clone())
                        .chain(real.ancestors_below(&grant.path).into_iter().rev())
                        .filter(|p| matches!(self.host.kind(p.as_path()), Ok(None)))
                        .min_by_key(|p| p.as_os_str().len())
                        .unwrap_or_else(|| real.clone());
                    ProtectedState::Missing { first_missing }
                }
            };
            for ancestor in real.ancestors_below(&grant.path) {
                if matches!(self.host.kind(ancestor.as_path()), Ok(Some(FileKind::Dir))) {
                    pinned.push(ancestor);
                }
            }
            out.push(ProtectedPath { path: real, rule, state });
        }
        // Odd paths: one note each (a `.git` file holds several names), then kept.
        let mut noted: Vec<String> = Vec::new();
        for d in degraded {
            if !noted.contains(&d.note) {
                self.diagnostics.push(d.note.clone());
                noted.push(d.note);
            }
            pinned.extend(d.pinned);
            out.extend(d.protected);
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        out.dedup_by(|a, b| a.path == b.path);
        // A missing path whose placeholder is already another's is covered by that one.
        let firsts: Vec<AbsPathBuf> = out
            .iter()
            .filter_map(|p| match &p.state {
                ProtectedState::Missing { first_missing } => Some(first_missing.clone()),
                ProtectedState::Exists { .. } => None,
            })
            .collect();
        out.retain(|p| match &p.state {
            ProtectedState::Missing { first_missing } => {
                !firsts.iter().any(|f| first_missing.starts_with(f) && f != first_missing)
            }
            ProtectedState::Exists { .. } => true,
        });
        pinned.sort();
        pinned.dedup();
        Ok((out, pinned))
    }

    /// The real git dirs of a work tree whose `.git` is a file (worktree, submodule), and
    /// submodules' git dirs under `.git/modules`: their hooks and config.
    fn git_dirs(&self, base: &AbsPathBuf) -> Vec<(AbsPathBuf, String, bool)> {
        let mut out = Vec::new();
        let dot_git = base.join(".git");
        let mut git_dirs = Vec::new();
        if let Ok(Some(FileKind::File)) = self.host.kind(dot_git.as_path()) {
            if let Ok(bytes) = self.host.read_file(dot_git.as_path(), 4096)
                && let Some(rest) = bytes.strip_prefix(b"gitdir:")
            {
                let target = os_from_bytes(rest.trim_ascii().to_vec());
                let dir = base.as_path().join(target);
                if let Ok((real, Some(FileKind::Dir))) = canonicalize(self.host, &dir) {
                    if let Ok(common) = self.host.read_file(real.join("commondir").as_path(), 4096)
                    {
                        let common = os_from_bytes(common.trim_ascii().to_vec());
                        if let Ok((c, Some(FileKind::Dir))) =
                            canonicalize(self.host, &real.as_path().join(common))
                        {
                            git_dirs.push(c);
                        }
                    }
                    git_dirs.push(real);
                }
            }
        } else if let Ok(names) = self.host.read_dir(dot_git.join("modules").as_path()) {
            for name in names {
                git_dirs.push(dot_git.join("modules").join(name));
            }
        }
        for dir in git_dirs {
            out.push((dir.join("hooks"), ".git/hooks".to_owned(), true));
            out.push((dir.join("config"), ".git/config".to_owned(), false));
        }
        out
    }

    fn unix_sockets(
        &mut self,
        rule: &Entry<UnixSocketsRule>,
        write: &[WriteGrant],
    ) -> Result<UnixSockets> {
        Ok(match &rule.value {
            UnixSocketsRule::None => UnixSockets::None,
            UnixSocketsRule::All => UnixSockets::All,
            UnixSocketsRule::Paths(list) => {
                let mut sockets = Vec::new();
                for entry in list {
                    let text = match crate::expand::expand(&entry.value.0, &self.ctx.env) {
                        Ok(text) => text,
                        Err(ExpandError::Unset(name)) => {
                            // `$SSH_AUTH_SOCK` without an agent: nothing to grant.
                            let message = format!("${name} is not set; this entry grants nothing");
                            self.note(&entry.origin, &message);
                            continue;
                        }
                        Err(ExpandError::Malformed) => {
                            return Err(Error::Invalid {
                                origin: entry.origin.clone(),
                                value: format!("{:?}", DisplayBytes(&entry.value.0).to_string()),
                                message: "a `$` that is not a variable reference".to_owned(),
                                fix: "write `$NAME` or `${NAME}` (letters, digits, `_`)".to_owned(),
                            });
                        }
                    };
                    if let Some(t) = text.to_str() {
                        check_path_text(t, &entry.origin)?;
                    }
                    let (anchored, _) = self.anchor(&text);
                    let declared =
                        AbsPathBuf::new_lexical(&anchored).unwrap_or_else(AbsPathBuf::root);
                    let (resolved, _) = canonicalize(self.host, &anchored)?;
                    if resolved != declared && write.iter().any(|g| declared.starts_with(&g.path)) {
                        return Err(Error::EscapesProject {
                            origin: entry.origin.clone(),
                            entry: declared.to_string(),
                            resolved: format!(
                                "{resolved} (a link in a writable directory, which a task could have planted)"
                            ),
                        });
                    }
                    sockets.push(SocketPath { declared, resolved });
                }
                UnixSockets::Paths { sockets }
            }
        })
    }

    fn plain_paths(&mut self, list: &[Entry<PathSpec>]) -> Result<Vec<AbsPathBuf>> {
        let mut out = Vec::new();
        for entry in list {
            let (anchored, _) = self.anchor(&entry.value.0);
            out.push(canonicalize(self.host, &anchored)?.0);
        }
        Ok(out)
    }

    fn glob_texts(&mut self, list: &[Entry<PathSpec>]) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for entry in list {
            let spelled = spelling::spell(&entry.value.0);
            let (parts, _) = self.anchor_parts(&spelled.text);
            let (whole, kind) = canonicalize(self.host, &parts.path())?;
            // An existing path (or no pattern) is literal: its brackets are escaped.
            if !spelled.forced_glob && (kind.is_some() || !spelling::looks_like_glob(&spelled.text))
            {
                out.push(spelling::escape_glob(whole.as_path()));
                continue;
            }
            let (base, pattern) = parts.split_glob();
            let (base_real, _) = canonicalize(self.host, &base)?;
            let mut text = spelling::escape_glob(base_real.as_path());
            if !pattern.as_os_str().is_empty() {
                if !text.ends_with('/') {
                    text.push('/');
                }
                text.push_str(&pattern.to_string_lossy());
            }
            out.push(text);
        }
        Ok(out)
    }
}
