//! `Violation`: one kind of thing the task was denied, with how often.
//!
//! Backends and tracers produce violations; [`ViolationSet`] deduplicates them with a count;
//! [`ReportFilter`](crate::ReportFilter) decides which are shown. The JSON shape is a contract
//! used outside this repo (`paddock run --report FILE`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Serialize, Serializer};

use crate::path::serialize_os_str;

/// What kind of access was denied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ViolationKind {
    /// Reading, listing or executing a hidden path.
    Read,
    /// Creating, changing or removing a read-only path.
    Write,
    /// A connection to a destination the policy does not grant.
    Network,
    /// Creating or connecting a unix-domain socket.
    UnixSocket,
    /// macOS: a mach service lookup.
    MachLookup,
    /// macOS: a system-information read.
    SystemInfo,
    /// A git repository the task created in the project (it was not refused: git there
    /// would run what the task put in it). `path` is its work tree, `target` names its
    /// executable hooks and the config keys that make git run a program.
    NewRepository,
}

impl ViolationKind {
    /// The config key that would allow this kind of access.
    pub fn allow_key(self) -> &'static str {
        match self {
            ViolationKind::Read => "allow.read",
            ViolationKind::Write => "allow.write",
            ViolationKind::Network => "allow.network",
            ViolationKind::UnixSocket => "allow.unix-sockets",
            ViolationKind::MachLookup => "allow.mach-lookup",
            ViolationKind::SystemInfo => "allow.system-info",
            ViolationKind::NewRepository => "protected.new-repositories",
        }
    }
}

/// One denied access. `count` says how many times the same access was denied.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Violation {
    /// What kind of access.
    pub kind: ViolationKind,
    /// The path, canonicalized where it could be, for file and socket denials.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "serialize_opt_path")]
    pub path: Option<PathBuf>,
    /// The destination (`host:port`) or service name, for network and mach denials.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// The system call that was refused, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub syscall: Option<String>,
    /// The errno name (`EACCES`), when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errno: Option<String>,
    /// How many times.
    pub count: u64,
}

fn serialize_opt_path<S: Serializer>(path: &Option<PathBuf>, s: S) -> Result<S::Ok, S::Error> {
    match path {
        Some(p) => serialize_os_str(p.as_os_str(), s),
        None => s.serialize_none(),
    }
}

/// Violations deduplicated by everything but the count, in a stable order.
#[derive(Clone, Debug, Default)]
pub struct ViolationSet {
    seen: BTreeMap<ViolationKey, u64>,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct ViolationKey {
    kind: ViolationKind,
    path: Option<PathBuf>,
    target: Option<String>,
    syscall: Option<String>,
    errno: Option<String>,
}

impl ViolationKey {
    /// The key of `v` and how many times it counts (at least once).
    fn of(v: Violation) -> (ViolationKey, u64) {
        let count = v.count.max(1);
        let key = ViolationKey {
            kind: v.kind,
            path: v.path,
            target: v.target,
            syscall: v.syscall,
            errno: v.errno,
        };
        (key, count)
    }
}

impl ViolationSet {
    /// An empty set.
    pub fn new() -> ViolationSet {
        ViolationSet::default()
    }

    /// Adds a violation, merging it with an equal one.
    pub fn add(&mut self, v: Violation) {
        let (key, count) = ViolationKey::of(v);
        let seen = self.seen.entry(key).or_insert(0);
        *seen = seen.saturating_add(count);
    }

    /// Adds a violation if it merges with one already here or the set holds fewer than `max`
    /// distinct ones; returns whether it was added. Keeps memory bounded when a task floods
    /// the report with distinct denials.
    pub fn add_bounded(&mut self, v: Violation, max: usize) -> bool {
        let (key, count) = ViolationKey::of(v);
        if self.seen.len() >= max && !self.seen.contains_key(&key) {
            return false;
        }
        let seen = self.seen.entry(key).or_insert(0);
        *seen = seen.saturating_add(count);
        true
    }

    /// How many distinct violations.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// Whether nothing was added.
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }

    /// The violations, sorted by kind, then path or target.
    pub fn into_vec(self) -> Vec<Violation> {
        self.seen
            .into_iter()
            .map(|(k, count)| Violation {
                kind: k.kind,
                path: k.path,
                target: k.target,
                syscall: k.syscall,
                errno: k.errno,
                count,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(path: &str) -> Violation {
        Violation {
            kind: ViolationKind::Read,
            path: Some(PathBuf::from(path)),
            target: None,
            syscall: Some("lookup".into()),
            errno: Some("ENOENT".into()),
            count: 1,
        }
    }

    #[test]
    fn a_bounded_set_keeps_counting_what_it_has_and_drops_new_ones() {
        let mut set = ViolationSet::new();
        assert!(set.add_bounded(read("/a"), 2));
        assert!(set.add_bounded(read("/b"), 2));
        assert!(!set.add_bounded(read("/c"), 2), "a third distinct one is over the bound");
        assert!(set.add_bounded(read("/a"), 2), "a repeat merges");
        assert_eq!(set.len(), 2);
        let v = set.into_vec();
        assert_eq!(v[0].count, 2);
        assert_eq!(v[1].count, 1);
    }
}
