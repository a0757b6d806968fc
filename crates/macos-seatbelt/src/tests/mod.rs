//! Tests of the pure side: golden profiles and plans, the deny-record parser, and property
//! tests checked against a small SBPL evaluator.
//!
//! Goldens live in `test_data/` and are blessed with `UPDATE_EXPECT=1`.

#[cfg(unix)]
mod command_line;
mod eval;
mod golden;
mod log;
mod props;

use std::ffi::OsString;

use paddock_policy::{
    AbsPathBuf, DenyAnchor, DisplayBytes, Exception, FileKind, IgnoreRules, ItemizeMode,
    NetworkPolicy, Origin, ProtectedPath, ProtectedState, ReportScope, ResolvedPolicy, Task,
    UnixSockets, WriteGrant,
};

use crate::Profile;

pub(crate) fn abs(p: &str) -> AbsPathBuf {
    AbsPathBuf::new_lexical(p).unwrap()
}

pub(crate) fn origin(key: &str) -> Origin {
    Origin::file("/Users/u/proj/paddock.toml", key)
}

/// A policy with nothing granted and nothing hidden: the starting point of every fixture.
pub(crate) fn empty_policy() -> ResolvedPolicy {
    ResolvedPolicy {
        project_dir: abs("/Users/u/proj"),
        home: abs("/Users/u"),
        read_deny: vec![],
        write: vec![],
        protected: vec![],
        pinned: vec![],
        globs: vec![],
        network: NetworkPolicy::Off,
        unix_sockets: UnixSockets::None,
        local_ports: vec![],
        host_ports: vec![],
        pty: false,
        git_config: false,
        system_info: false,
        mach_lookup: vec![],
        weaker_when_nested: false,
        private_tmp: true,
        env: vec![(OsString::from("PATH"), OsString::from("/usr/bin:/bin"))],
        report: ReportScope {
            within: vec![abs("/Users/u/proj")],
            linked: vec![],
            itemize: ItemizeMode::Auto,
        },
        ignore: IgnoreRules::default(),
    }
}

pub(crate) fn grant(path: &str, kind: FileKind, key: &str) -> WriteGrant {
    WriteGrant { path: abs(path), kind, origin: origin(key) }
}

pub(crate) fn anchor(path: &str, exceptions: &[(&str, FileKind, bool)], key: &str) -> DenyAnchor {
    DenyAnchor {
        path: abs(path),
        kind: Some(FileKind::Dir),
        exceptions: exceptions
            .iter()
            .map(|(p, kind, writable)| Exception { path: abs(p), kind: *kind, writable: *writable })
            .collect(),
        origin: origin(key),
    }
}

pub(crate) fn protected(path: &str, rule: &str, exists: Option<FileKind>) -> ProtectedPath {
    ProtectedPath {
        path: abs(path),
        rule: rule.to_owned(),
        state: match exists {
            Some(kind) => ProtectedState::Exists { kind },
            None => ProtectedState::Missing { first_missing: abs(path) },
        },
    }
}

/// The policy P0 of the security cases: the project readable and writable, the rest of the
/// home hidden, the protected names of a git checkout.
pub(crate) fn p0() -> ResolvedPolicy {
    let mut p = empty_policy();
    p.read_deny =
        vec![anchor("/Users/u", &[("/Users/u/proj", FileKind::Dir, true)], "deny.read[0]")];
    p.write = vec![grant("/Users/u/proj", FileKind::Dir, "allow.write[0]")];
    p.protected = vec![
        protected("/Users/u/proj/.git/hooks", ".git/hooks", Some(FileKind::Dir)),
        protected("/Users/u/proj/.git/config", ".git/config", Some(FileKind::File)),
        protected("/Users/u/proj/.bashrc", ".bashrc", None),
        protected("/Users/u/proj/paddock.toml", "paddock.toml", Some(FileKind::File)),
    ];
    p.pinned = vec![abs("/Users/u/proj/.git")];
    p
}

pub(crate) fn task() -> Task {
    Task {
        program: OsString::from("make"),
        args: vec![OsString::from("test")],
        cwd: abs("/Users/u/proj"),
        runtime_dir: abs("/private/tmp/pdk-7f3a"),
        observe: false,
    }
}

/// A profile as the goldens show it: parameters, then the text.
pub(crate) fn render(profile: &Profile) -> String {
    let mut out = String::from("== parameters\n");
    for p in &profile.params {
        out.push_str(&format!("{}={}\n", p.name, DisplayBytes(&p.value)));
    }
    out.push_str("== profile\n");
    out.push_str(&profile.text);
    out
}
