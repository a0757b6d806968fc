//! The SBPL profile for one task: base text plus the policy's rules, in the one order that
//! makes them mean what the policy says.
//!
//! SBPL is **last-match-wins**: a rule that narrows another must come after it. The
//! sections are written in this order, and [`Profile::build`] is the only place that
//! knows it:
//!
//! 1. `(version 1)` and `(deny default)`, tagged with the task's log tag;
//! 2. the base profile (`base.sbpl`): processes, signals, minimal mach services and
//!    sysctls, device files;
//! 3. capabilities: `system-info`, `mach-lookup`, network, `local-ports`, `host-ports`,
//!    unix sockets, `pty`;
//! 4. reads everywhere: `(allow file-read*)`;
//! 5. write grants (`allow.write` paths);
//! 6. read-deny anchors, each **one** rule that denies reading, writing and executing
//!    under the anchor *except* under its exceptions and the write grants inside it
//!    (`require-all` / `require-not`), so nesting and order among anchors cannot matter;
//!    then metadata reads on the directories leading to each exception (`realpath`);
//! 7. re-opened paths: `allow.read` globs, `allow.write` globs, the task's TMPDIR,
//!    `git-config`;
//! 8. `deny.read` globs;
//! 9. protected paths (read-only even when missing: `literal` and `subpath`), pinned
//!    directories and the ancestors of deny anchors inside write grants (not renamable);
//! 10. refusals that must hold whatever came before: LaunchServices, Apple Events and
//!     `file-ioctl` on `/dev/tty`, unless granted.
//!
//! Every path is a parameter (`-D NAME=VALUE`); the text only names parameters.
//!
//! Every *deny* rule about a path also matches it case-insensitively (a `_CI` regex
//! parameter): APFS volumes are case-insensitive by default, so `.GIT/HOOKS/pre-commit` is
//! `.git/hooks/pre-commit` (security case SYM-07). Allow rules stay exact, so a different
//! case can only lose access, never gain it. Unicode normalization aliases (`Café` in NFC
//! and NFD) are not folded yet.

use std::ffi::OsString;
use std::fmt::Write as _;

use paddock_policy::{
    AbsPathBuf, DisplayBytes, Error, FileKind, GlobKind, NetworkPolicy, Origin, ResolvedPolicy,
    Task, UnixSockets,
};

use crate::BACKEND_NAME;
use crate::glob;
use crate::inline;
use crate::params::{self, BadValue, Param, Params};

/// The static part of every profile, reviewed like code.
pub const BASE_PROFILE: &str = include_str!("base.sbpl");

/// The mach services behind LaunchServices: `open`, `lsopen`, starting an app. Refused
/// unless granted, because the program they start runs outside the sandbox (MAC-01).
pub const LAUNCH_SERVICES: &str = "com.apple.coreservices.launchservicesd";
/// The prefix of LaunchServices' database services.
pub const LAUNCH_SERVICES_DB_PREFIX: &str = "com.apple.lsd.";
/// The mach service Apple Events are delivered through. Granting it in `allow.mach-lookup`
/// also grants `appleevent-send` (MAC-02).
pub const APPLE_EVENTS: &str = "com.apple.coreservices.appleevents";
/// Certificate verification for TLS clients; looked up only when the task has a network.
pub const TRUSTD: &str = "com.apple.trustd.agent";
/// macOS's resolver socket; reachable only with `allow.network = true` (a domain list
/// resolves names in the proxy).
pub const MDNS_RESPONDER: &str = "/private/var/run/mDNSResponder";

/// A profile and its parameters.
#[derive(Clone, Debug)]
pub struct Profile {
    /// The SBPL text, passed with `-p`.
    pub text: String,
    /// The parameters, passed as `-D NAME=VALUE`, in order.
    pub params: Vec<Param>,
}

impl Profile {
    /// Builds the profile for `policy` and `task`. `proxy_port` is the loopback port of the
    /// egress proxy when the network is filtered.
    pub fn build(
        policy: &ResolvedPolicy,
        task: &Task,
        tag: &str,
        proxy_port: Option<u16>,
    ) -> Result<Profile, Error> {
        let tag = inline::log_tag(tag)
            .map_err(|r| plan_error(format!("log tag `{tag}`: {}", r.message)))?;
        let mut w = Writer { text: String::new(), params: Params::new(), tag };
        let tmpdir = crate::plan::task_tmpdir(task);

        w.header();
        w.text.push_str(BASE_PROFILE);
        w.capabilities(policy, proxy_port)?;
        w.files(policy, &tmpdir)?;
        w.final_refusals(policy)?;
        Ok(Profile { text: w.text, params: w.params.into_vec() })
    }

    /// The `sandbox-exec` arguments after argv\[0\] and before `--`: `-p PROFILE` and one
    /// `-D NAME=VALUE` pair per parameter.
    pub fn args(&self) -> Vec<OsString> {
        let mut out = vec![OsString::from("-p"), OsString::from(&self.text)];
        for p in &self.params {
            let mut kv = OsString::from(&p.name);
            kv.push("=");
            kv.push(&p.value);
            out.push(OsString::from("-D"));
            out.push(kv);
        }
        out
    }
}

struct Writer<'t> {
    text: String,
    params: Params,
    tag: &'t str,
}

fn plan_error(message: String) -> Error {
    Error::Plan { backend: BACKEND_NAME, message }
}

/// A NUL byte in a path: argv cannot carry it. Named by the policy key it came from.
fn nul_error(origin: Option<&Origin>, what: &str, bad: BadValue) -> Error {
    let message = format!("{what} holds a NUL byte, which cannot be passed to sandbox-exec");
    match origin {
        Some(origin) => Error::Invalid {
            origin: origin.clone(),
            value: bad.value,
            message,
            fix: "remove the entry or rename the path".to_owned(),
        },
        None => plan_error(format!("{message} (parameter {}: {})", bad.name, bad.value)),
    }
}

/// Alternatives: one filter as is, several as `(require-any ...)`.
fn any(filters: &[String]) -> String {
    match filters {
        [one] => one.clone(),
        many => format!("(require-any {})", many.join(" ")),
    }
}

fn filter_for(kind: FileKind) -> &'static str {
    match kind {
        FileKind::Dir => "subpath",
        FileKind::File | FileKind::Symlink | FileKind::Other => "literal",
    }
}

/// A path under a deny anchor that stays visible, with its filter.
struct Opening {
    path: AbsPathBuf,
    filter: &'static str,
}

impl Writer<'_> {
    fn line(&mut self, s: &str) {
        self.text.push_str(s);
        self.text.push('\n');
    }

    fn section(&mut self, title: &str) {
        self.text.push('\n');
        let _ = writeln!(self.text, ";; {title}");
    }

    fn with_message(&self) -> String {
        format!("(with message \"{}\")", self.tag)
    }

    fn path(
        &mut self,
        name: &str,
        path: &AbsPathBuf,
        filter: &str,
        origin: Option<&Origin>,
        what: &str,
    ) -> Result<Vec<String>, Error> {
        self.params.add_path(name, path, filter).map_err(|bad| nul_error(origin, what, bad))
    }

    /// The case-insensitive twin of a deny rule's path (SYM-07): `(regex (param "NAME_CI"))`.
    fn folded(&mut self, name: &str, path: &AbsPathBuf, subtree: bool) -> Result<String, Error> {
        let re = glob::path_regex(params::canonical(path).as_os_str().as_encoded_bytes(), subtree);
        let expr = self
            .params
            .add(format!("{name}_CI"), re.as_ref())
            .map_err(|bad| nul_error(None, "a denied path", bad))?;
        Ok(format!("(regex {expr})"))
    }

    fn header(&mut self) {
        self.line("(version 1)");
        let deny = format!("(deny default {})", self.with_message());
        self.line(&deny);
        self.text.push('\n');
    }

    fn capabilities(
        &mut self,
        policy: &ResolvedPolicy,
        proxy_port: Option<u16>,
    ) -> Result<(), Error> {
        if policy.system_info {
            self.section("allow.system-info: every sysctl and IOKit property");
            self.line("(allow sysctl-read)");
            self.line("(allow iokit-get-properties)");
        }

        let granted = self.mach_grants(policy)?;
        if !granted.is_empty() {
            self.section("allow.mach-lookup");
            let filters: Vec<String> = granted
                .iter()
                .map(|(name, prefix)| {
                    if *prefix {
                        format!("(global-name-prefix \"{name}\")")
                    } else {
                        format!("(global-name \"{name}\")")
                    }
                })
                .collect();
            self.line(&format!("(allow mach-lookup {})", filters.join(" ")));
            if mach_granted(&granted, LAUNCH_SERVICES) {
                self.line("(allow lsopen)");
            }
            if mach_granted(&granted, APPLE_EVENTS) {
                self.line("(allow appleevent-send)");
            }
        }

        match &policy.network {
            NetworkPolicy::Off => {
                self.section("allow.network = false: no network (deny default)");
            }
            NetworkPolicy::On => {
                self.section(
                    "allow.network = true: the host's network, names through mDNSResponder",
                );
                self.line("(allow network-outbound (remote ip \"*:*\"))");
                self.line("(allow network-bind network-inbound (local ip \"*:*\"))");
                self.line(&format!(
                    "(allow network-outbound (remote unix-socket (path-literal \"{MDNS_RESPONDER}\")))"
                ));
                self.line(&format!("(allow mach-lookup (global-name \"{TRUSTD}\"))"));
            }
            NetworkPolicy::Filtered { .. } => {
                let port = proxy_port.ok_or_else(|| {
                    plan_error("a domain list needs the egress proxy's port".to_owned())
                })?;
                self.section("allow.network = [domains]: only the egress proxy on loopback");
                self.line(&format!("(allow network-outbound (remote ip \"localhost:{port}\"))"));
                self.line(&format!("(allow mach-lookup (global-name \"{TRUSTD}\"))"));
            }
        }

        if !policy.local_ports.is_empty() {
            // `*:PORT`, not `localhost:PORT`: the dual-stack `::` socket that Node's and
            // Python's dev servers bind (and 127.0.0.1 on it, `::ffff:127.0.0.1` to the
            // kernel) is not `localhost` to seatbelt. Bind and inbound name no remote end,
            // so this grants no egress (MAC-04).
            self.section(
                "allow.local-ports: bind and accept on these ports, any local address (no outbound: MAC-04)",
            );
            for port in &policy.local_ports {
                self.line(&format!("(allow network-bind network-inbound (local ip \"*:{port}\"))"));
            }
        }
        if !policy.host_ports.is_empty() {
            self.section("allow.host-ports: these host loopback ports and no other");
            for port in &policy.host_ports {
                self.line(&format!("(allow network-outbound (remote ip \"localhost:{port}\"))"));
            }
        }

        match &policy.unix_sockets {
            UnixSockets::None => {}
            UnixSockets::All => {
                self.section("allow.unix-sockets = true");
                self.line("(allow system-socket (socket-domain AF_UNIX))");
                self.line("(allow network-bind (local unix-socket (path-regex #\"^/\")))");
                self.line("(allow network-outbound (remote unix-socket (path-regex #\"^/\")))");
            }
            UnixSockets::Paths { sockets } => {
                self.section("allow.unix-sockets = [paths]: the declared and the resolved path");
                self.line("(allow system-socket (socket-domain AF_UNIX))");
                for (i, socket) in sockets.iter().enumerate() {
                    let mut paths: Vec<AbsPathBuf> = Vec::new();
                    for p in [&socket.declared, &socket.resolved] {
                        for s in params::spellings(p) {
                            if !paths.contains(&s) {
                                paths.push(s);
                            }
                        }
                    }
                    for (j, p) in paths.iter().enumerate() {
                        let expr = self
                            .params
                            .add(format!("SOCKET_{i}_{j}"), p.as_os_str())
                            .map_err(|bad| nul_error(None, "an allow.unix-sockets path", bad))?;
                        self.line(&format!(
                            "(allow network-bind (local unix-socket (subpath {expr})))"
                        ));
                        self.line(&format!(
                            "(allow network-outbound (remote unix-socket (subpath {expr})))"
                        ));
                    }
                }
            }
        }

        if policy.pty {
            self.section(
                "allow.pty: terminals the sandbox creates (TIOCSTI there reaches only the task)",
            );
            self.line("(allow pseudo-tty)");
            self.line("(allow file-read* file-write* file-ioctl (literal \"/dev/ptmx\"))");
            self.line(
                "(allow file-read* file-write* file-ioctl \
                 (require-all (regex #\"^/dev/ttys[0-9]+$\") (extension \"com.apple.sandbox.pty\")))",
            );
        }
        Ok(())
    }

    /// The granted mach names, checked: `(name, is_prefix)`.
    fn mach_grants(&self, policy: &ResolvedPolicy) -> Result<Vec<(String, bool)>, Error> {
        let mut out = Vec::new();
        for (i, value) in policy.mach_lookup.iter().enumerate() {
            let (name, prefix) = inline::mach_name(value).map_err(|r| {
                plan_error(format!(
                    "allow.mach-lookup[{i}]: `{}` is refused: {}",
                    DisplayBytes(value.as_ref()),
                    r.message
                ))
            })?;
            out.push((name.to_owned(), prefix));
        }
        Ok(out)
    }

    fn files(&mut self, policy: &ResolvedPolicy, tmpdir: &AbsPathBuf) -> Result<(), Error> {
        // 4. Reads everywhere.
        self.section("files: reads everywhere, narrowed below");
        self.line("(allow file-read*)");

        // 5. Write grants.
        if !policy.write.is_empty() {
            self.section("allow.write");
            for (i, grant) in policy.write.iter().enumerate() {
                let f = self.path(
                    &format!("WRITE_{i}"),
                    &grant.path,
                    filter_for(grant.kind),
                    Some(&grant.origin),
                    "a write grant",
                )?;
                self.line(&format!("(allow file-write* {})", f.join(" ")));
            }
        }

        // 6. Read-deny anchors.
        if !policy.read_deny.is_empty() {
            self.section(
                "deny.read anchors: hidden and read-only, except what is allowed under each",
            );
            let mut traverse: Vec<AbsPathBuf> = Vec::new();
            for (i, anchor) in policy.read_deny.iter().enumerate() {
                let openings = openings(policy, anchor, tmpdir);
                let what = "a read-deny anchor";
                let mut a = self.path(
                    &format!("READ_DENY_{i}"),
                    &anchor.path,
                    "subpath",
                    Some(&anchor.origin),
                    what,
                )?;
                a.push(self.folded(&format!("READ_DENY_{i}"), &anchor.path, true)?);
                let mut except = Vec::new();
                for (j, o) in openings.iter().enumerate() {
                    let name = format!("READ_DENY_{i}_EXCEPT_{j}");
                    except.extend(self.path(
                        &name,
                        &o.path,
                        o.filter,
                        Some(&anchor.origin),
                        what,
                    )?);
                    for dir in std::iter::once(anchor.path.clone())
                        .chain(o.path.ancestors_below(&anchor.path))
                    {
                        if dir != o.path && !traverse.contains(&dir) {
                            traverse.push(dir);
                        }
                    }
                }
                let filter = if except.is_empty() {
                    a.join(" ")
                } else {
                    format!("(require-all {} (require-not {}))", any(&a), any(&except))
                };
                let rule = format!(
                    "(deny file-read* file-write* process-exec {filter} {})",
                    self.with_message()
                );
                self.line(&rule);
            }
            if !traverse.is_empty() {
                let mut f = Vec::new();
                for (k, dir) in traverse.iter().enumerate() {
                    f.extend(self.path(
                        &format!("TRAVERSE_{k}"),
                        dir,
                        "literal",
                        None,
                        "a directory above an allowed path",
                    )?);
                }
                self.line(&format!("(allow file-read-metadata {})", f.join(" ")));
            }
        }

        // 7. Re-opened paths.
        self.section("re-opened: allow.read and allow.write globs, the task's TMPDIR, git config");
        for (i, rule) in policy.globs.iter().enumerate() {
            let ops = match rule.kind {
                GlobKind::Read => "file-read*",
                GlobKind::Write => "file-read* file-write*",
                GlobKind::DenyRead => continue,
            };
            let f = self.glob(i, rule)?;
            self.line(&format!("(allow {ops} {})", f.join(" ")));
        }
        let t = self.path("TMPDIR", tmpdir, "subpath", None, "the task's TMPDIR")?;
        self.line(&format!("(allow file-read* file-write* {})", t.join(" ")));
        if policy.git_config {
            let mut f = self.path(
                "GIT_CONFIG_FILE",
                &policy.home.join(".gitconfig"),
                "literal",
                None,
                "~/.gitconfig",
            )?;
            f.extend(self.path(
                "GIT_CONFIG_DIR",
                &policy.home.join(".config/git"),
                "subpath",
                None,
                "~/.config/git",
            )?);
            self.line(&format!("(allow file-read* {})", f.join(" ")));
        }

        // 8. deny.read globs.
        if policy.globs.iter().any(|g| g.kind == GlobKind::DenyRead) {
            self.section("deny.read globs");
            for (i, rule) in policy.globs.iter().enumerate() {
                if rule.kind == GlobKind::DenyRead {
                    let f = self.glob(i, rule)?;
                    let m = self.with_message();
                    self.line(&format!(
                        "(deny file-read* file-write* process-exec {} {m})",
                        f.join(" ")
                    ));
                }
            }
        }

        // 9. Protected, pinned, anchors' ancestors.
        if !policy.protected.is_empty() {
            self.section("protected: read-only inside write grants, present or not");
            for (i, p) in policy.protected.iter().enumerate() {
                let what = format!("protected path `{}`", p.rule);
                let mut f =
                    self.path(&format!("PROTECTED_{i}"), &p.path, "literal", None, &what)?;
                let sub: Vec<String> =
                    f.iter().map(|l| l.replacen("(literal ", "(subpath ", 1)).collect();
                f.extend(sub);
                f.push(self.folded(&format!("PROTECTED_{i}"), &p.path, true)?);
                let m = self.with_message();
                self.line(&format!("(deny file-write* {} {m})", f.join(" ")));
            }
        }
        let guards = rename_guards(policy, tmpdir);
        if !policy.pinned.is_empty() || !guards.is_empty() {
            self.section(
                "not renamable: pinned directories and the directories above deny anchors",
            );
            let mut f = Vec::new();
            for (i, p) in policy.pinned.iter().enumerate() {
                f.extend(self.path(
                    &format!("PINNED_{i}"),
                    p,
                    "literal",
                    None,
                    "a pinned directory",
                )?);
                f.push(self.folded(&format!("PINNED_{i}"), p, false)?);
            }
            for (i, p) in guards.iter().enumerate() {
                f.extend(self.path(
                    &format!("GUARD_{i}"),
                    p,
                    "literal",
                    None,
                    "a directory above a deny anchor",
                )?);
                f.push(self.folded(&format!("GUARD_{i}"), p, false)?);
            }
            let m = self.with_message();
            self.line(&format!("(deny file-write-unlink {} {m})", f.join(" ")));
        }
        Ok(())
    }

    /// The `(regex (param ...))` filters of a glob, one per spelling of its base; a
    /// `deny.read` glob is case-folded (SYM-07), an allowing one is exact.
    fn glob(&mut self, i: usize, rule: &paddock_policy::GlobRule) -> Result<Vec<String>, Error> {
        let fold = rule.kind == GlobKind::DenyRead;
        let pattern = rule.pattern.to_str();
        let mut exprs = Vec::new();
        for (k, base) in params::spellings(&rule.base).into_iter().enumerate() {
            let (Some(base_text), Some(pattern)) = (base.as_os_str().to_str(), pattern) else {
                return Err(Error::Invalid {
                    origin: rule.origin.clone(),
                    value: format!("{}/{}", base, DisplayBytes(&rule.pattern)),
                    message: "a glob that is not UTF-8 cannot become a seatbelt regex".to_owned(),
                    fix: "name the files by a path instead of a pattern".to_owned(),
                });
            };
            let re = glob::to_regex(base_text, pattern, fold).map_err(|e| Error::Invalid {
                origin: rule.origin.clone(),
                value: format!(
                    "{}/{}",
                    DisplayBytes(base_text.as_ref()),
                    DisplayBytes(pattern.as_ref())
                ),
                message: format!("this glob is refused: {}", e.message),
                fix: "write the pattern without it, or name the paths instead".to_owned(),
            })?;
            let name = if k == 0 { format!("GLOB_{i}") } else { format!("GLOB_{i}_AS_GIVEN") };
            let expr = self
                .params
                .add(name, re.as_ref())
                .map_err(|bad| nul_error(Some(&rule.origin), "a glob", bad))?;
            exprs.push(format!("(regex {expr})"));
        }
        Ok(exprs)
    }

    fn final_refusals(&mut self, policy: &ResolvedPolicy) -> Result<(), Error> {
        let granted = self.mach_grants(policy)?;
        self.section("refused unless granted, whatever came before (MAC-01, MAC-02, MAC-06)");
        let m = self.with_message();
        let mut lookups = Vec::new();
        if !mach_granted(&granted, LAUNCH_SERVICES) {
            lookups.push(format!("(global-name \"{LAUNCH_SERVICES}\")"));
            self.line(&format!("(deny lsopen {m})"));
        }
        if !granted.iter().any(|(name, prefix)| {
            name.starts_with(LAUNCH_SERVICES_DB_PREFIX)
                || (*prefix && LAUNCH_SERVICES_DB_PREFIX.starts_with(name.as_str()))
        }) {
            lookups.push(format!("(global-name-prefix \"{LAUNCH_SERVICES_DB_PREFIX}\")"));
        }
        if !mach_granted(&granted, APPLE_EVENTS) {
            lookups.push(format!("(global-name \"{APPLE_EVENTS}\")"));
            self.line(&format!("(deny appleevent-send {m})"));
        }
        if !lookups.is_empty() {
            self.line(&format!("(deny mach-lookup {} {m})", lookups.join(" ")));
        }
        self.line(&format!("(deny file-ioctl (literal \"/dev/tty\") {m})"));
        Ok(())
    }
}

/// Whether `name` is granted, exactly or by a prefix.
fn mach_granted(granted: &[(String, bool)], name: &str) -> bool {
    granted.iter().any(|(g, prefix)| if *prefix { name.starts_with(g.as_str()) } else { g == name })
}

/// What stays visible under `anchor`: its exceptions, the write grants inside it and the
/// task's TMPDIR if it lies inside it (a write grant is always visible, as on Linux, where
/// it is bound after the anchor's tmpfs).
fn openings(
    policy: &ResolvedPolicy,
    anchor: &paddock_policy::DenyAnchor,
    tmpdir: &AbsPathBuf,
) -> Vec<Opening> {
    let mut out: Vec<Opening> = Vec::new();
    let mut push = |path: &AbsPathBuf, kind: FileKind| {
        if path.starts_with(&anchor.path) && !out.iter().any(|o| &o.path == path) {
            out.push(Opening { path: path.clone(), filter: filter_for(kind) });
        }
    };
    for e in &anchor.exceptions {
        push(&e.path, e.kind);
    }
    for g in &policy.write {
        push(&g.path, g.kind);
    }
    push(tmpdir, FileKind::Dir);
    out
}

/// The directories above each deny anchor (and each `deny.read` glob's base) that lie in a
/// write grant: renaming one would carry the hidden tree to a visible name (the bypass SRT
/// fixed in its issue 8), so each is refused `file-write-unlink`.
fn rename_guards(policy: &ResolvedPolicy, tmpdir: &AbsPathBuf) -> Vec<AbsPathBuf> {
    let writable = |p: &AbsPathBuf| {
        p.starts_with(tmpdir)
            || policy.write.iter().any(|g| g.kind == FileKind::Dir && p.starts_with(&g.path))
    };
    let mut out: Vec<AbsPathBuf> = Vec::new();
    // Where each walk up starts: an anchor's parent, a glob's base itself.
    let starts = policy.read_deny.iter().filter_map(|a| a.path.parent()).chain(
        policy.globs.iter().filter(|g| g.kind == GlobKind::DenyRead).map(|g| g.base.clone()),
    );
    for start in starts {
        let mut cur = Some(start);
        while let Some(dir) = cur {
            if writable(&dir) && !out.contains(&dir) && !policy.pinned.contains(&dir) {
                out.push(dir.clone());
            }
            cur = dir.parent();
        }
    }
    out.sort();
    out
}
