//! bubblewrap setup as a typed list of ops, and the one function that orders them.
//!
//! Like bubblewrap's own `SetupOp` list, every mount is first a value ([`BwrapOp`]) and only
//! then a string in argv ([`to_args`]). [`mount_ops`] is the single place that decides the
//! order; bubblewrap performs mounts in argv order and a later mount covers an earlier one at
//! the same or a deeper path, so the order *is* the policy:
//!
//! 1. `--ro-bind / /`: the whole host, read-only.
//! 2. The path mounts, sorted so that an ancestor's mount always comes before a descendant's
//!    (by path components; at one path: replacement, then read-only, then writable, then pin):
//!    - a tmpfs over each read-deny directory anchor (the one empty, mode-0000 file of the
//!      task's runtime dir over a file
//!      anchor), with each allowed exception bound back under it; with `--itemize observe`
//!      the directory anchor is instead a bind of the observer filesystem's `a{i}`
//!      ([`crate::observe_fs`]), which serves exactly the mount points made in it
//!      ([`MountOps::observed`]);
//!    - each write grant `--bind` onto itself (or, for the supervisor to attach the
//!      runner's clone of it, its directory alone: [`clonable_grants`]);
//!    - each pinned directory `--bind` onto itself, so that it is a mount point and renaming
//!      it fails with EBUSY (FSW-05, FSW-10);
//!    - a fresh `/dev`, a fresh `/proc` (or an empty tmpfs in the documented weaker mode,
//!      never the host's), and a private `/tmp` tmpfs unless `/tmp` is granted;
//!    - with `--itemize observe`, an empty tmpfs over the observer's mount directory, so the
//!      task cannot reach the observer's root (bind sources are read from the old root, so
//!      the anchor binds still find it).
//!
//!    Sorting is what makes nesting work: a write grant inside a deny anchor is bound after
//!    the anchor's tmpfs; an anchor inside a write grant is a tmpfs over the grant's bind; a
//!    project under `/tmp` is bound after the private `/tmp`.
//! 3. The protected paths, read-only onto themselves, after everything writable, so that
//!    they stay read-only inside any grant (DESIGN decision 8). A missing one is bound from
//!    the placeholder the runner creates at its outermost missing component.
//! 4. `--remount-ro` of each deny tmpfs, now that bubblewrap has made every mount point in it:
//!    writes under a hidden path fail with EROFS instead of vanishing into a tmpfs. An
//!    observed anchor is not remounted: the observer refuses changes itself (`EROFS`), and a
//!    read-only mount would answer them before the observer could record them.
//! 5. Last, after the socket directories of the bridges too ([`supervisor_op`]), the
//!    supervisor binary, read-only at [`SUPERVISOR_PATH`](crate::SUPERVISOR_PATH) (or a copy
//!    there of the one without a C library: `crate::nolibc`):
//!    bwrap's command is the supervisor at that path, so arguments that end early (a runner
//!    killed while it writes them to bwrap, which was started before: see
//!    [`crate::bwrap_argv`]) leave nothing to run, never a sandbox with some walls missing.
//!
//! Protected paths and pins that lie under a deny anchor are skipped: binding them from the
//! host would show what the anchor hides, and the read-only anchor keeps them unwritable.

use std::ffi::OsString;

use std::path::PathBuf;

use paddock_policy::{
    AbsPathBuf, FileKind, ObservedAnchor, ObservedNode, ProtectedState, ResolvedPolicy, UnixSockets,
};

mod grant_clones;
mod self_mounts;

pub use grant_clones::{clonable_grants, grant_clones_of, mark_in_grant_clones, take_grant_clones};
pub use self_mounts::{
    inner_hidden_dirs, inner_masks, inner_mountable, self_mountable, take_inner_mounts,
    take_self_mounts, verified_binds,
};

/// One bubblewrap setup step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BwrapOp {
    /// `--unshare-all`: new user (if possible), ipc, pid, net, uts and cgroup namespaces.
    UnshareAll,
    /// `--unshare-user`: insist on a user namespace (needed by `--disable-userns`).
    UnshareUser,
    /// `--share-net`: keep the host's network namespace.
    ShareNet,
    /// `--disable-userns`: the task cannot create user namespaces (PRC-05).
    DisableUserns,
    /// `--as-pid-1`: the supervisor is the sandbox's pid 1; no unfiltered bwrap reaper sits
    /// inside the sandbox where the task could ptrace it or read its environment.
    AsPid1,
    /// `--die-with-parent`: the sandbox dies with paddock, even on `kill -9`.
    DieWithParent,
    /// `--new-session`: `setsid()`, so TIOCSTI cannot reach the caller's terminal.
    NewSession,
    /// `--cap-drop ALL`: no capability survives, also when paddock runs as root (but those
    /// the following ops add back for the supervisor, which drops them before the task).
    CapDropAll,
    /// `--cap-add CAP_SETPCAP`, as root without a user namespace (bwrap then leaves the
    /// capability bounding set whole), and with [`BwrapOp::CapAddSysAdmin`] for the inner
    /// mounts (the bounding set then holds both): the supervisor needs this one to empty the
    /// bounding set before the task starts (`launch::drop_capabilities`).
    CapAddSetpcap,
    /// `--cap-add CAP_SYS_ADMIN`, with [`BwrapOp::CapAddSetpcap`], when the supervisor makes
    /// the plan's inner mounts (see [`inner_mountable`]): it mounts in a namespace of its own
    /// first, then empties every capability set (bounding set included) before anything else
    /// runs, and fails closed when it cannot.
    CapAddSysAdmin,
    /// `--ro-bind SRC DEST`.
    RoBind {
        /// Host path.
        src: AbsPathBuf,
        /// Sandbox path.
        dest: AbsPathBuf,
    },
    /// `--ro-bind-try SRC DEST`: nothing when the source is missing (a granted unix socket
    /// whose server is not running).
    RoBindTry {
        /// Host path.
        src: AbsPathBuf,
        /// Sandbox path.
        dest: AbsPathBuf,
    },
    /// `--bind SRC DEST`.
    Bind {
        /// Host path.
        src: AbsPathBuf,
        /// Sandbox path.
        dest: AbsPathBuf,
    },
    /// `--tmpfs DEST`.
    Tmpfs {
        /// Sandbox path.
        dest: AbsPathBuf,
    },
    /// `--dev DEST`: a minimal private `/dev`.
    Dev {
        /// Sandbox path.
        dest: AbsPathBuf,
    },
    /// `--proc DEST`: a fresh procfs of the sandbox's pid namespace.
    Proc {
        /// Sandbox path.
        dest: AbsPathBuf,
    },
    /// `--remount-ro DEST` (not recursive).
    RemountRo {
        /// Sandbox path.
        dest: AbsPathBuf,
    },
    /// `--dir DEST`: the directory, made with its parents where missing (in a tmpfs bwrap
    /// made), for the supervisor to attach a write grant's clone onto
    /// ([`clonable_grants`]). Not a mount.
    Dir {
        /// Sandbox path.
        dest: AbsPathBuf,
    },
}

impl BwrapOp {
    /// Appends this op's bwrap arguments.
    pub fn push_args(&self, out: &mut Vec<OsString>) {
        fn s(text: &str) -> OsString {
            OsString::from(text)
        }
        fn p(path: &AbsPathBuf) -> OsString {
            path.as_os_str().to_os_string()
        }
        match self {
            BwrapOp::UnshareAll => out.push(s("--unshare-all")),
            BwrapOp::UnshareUser => out.push(s("--unshare-user")),
            BwrapOp::ShareNet => out.push(s("--share-net")),
            BwrapOp::DisableUserns => out.push(s("--disable-userns")),
            BwrapOp::AsPid1 => out.push(s("--as-pid-1")),
            BwrapOp::DieWithParent => out.push(s("--die-with-parent")),
            BwrapOp::NewSession => out.push(s("--new-session")),
            BwrapOp::CapDropAll => out.extend([s("--cap-drop"), s("ALL")]),
            BwrapOp::CapAddSetpcap => out.extend([s("--cap-add"), s("CAP_SETPCAP")]),
            BwrapOp::CapAddSysAdmin => out.extend([s("--cap-add"), s("CAP_SYS_ADMIN")]),
            BwrapOp::RoBind { src, dest } => out.extend([s("--ro-bind"), p(src), p(dest)]),
            BwrapOp::RoBindTry { src, dest } => {
                out.extend([s("--ro-bind-try"), p(src), p(dest)]);
            }
            BwrapOp::Bind { src, dest } => out.extend([s("--bind"), p(src), p(dest)]),
            BwrapOp::Tmpfs { dest } => out.extend([s("--tmpfs"), p(dest)]),
            BwrapOp::Dev { dest } => out.extend([s("--dev"), p(dest)]),
            BwrapOp::Proc { dest } => out.extend([s("--proc"), p(dest)]),
            BwrapOp::RemountRo { dest } => out.extend([s("--remount-ro"), p(dest)]),
            BwrapOp::Dir { dest } => out.extend([s("--dir"), p(dest)]),
        }
    }

    /// The sandbox path a mount op mounts on, if it is a mount.
    pub fn dest(&self) -> Option<&AbsPathBuf> {
        match self {
            BwrapOp::RoBind { dest, .. }
            | BwrapOp::RoBindTry { dest, .. }
            | BwrapOp::Bind { dest, .. }
            | BwrapOp::Tmpfs { dest }
            | BwrapOp::Dev { dest }
            | BwrapOp::Proc { dest }
            | BwrapOp::RemountRo { dest } => Some(dest),
            _ => None,
        }
    }
}

/// The bwrap arguments of a list of ops, in order.
pub fn to_args(ops: &[BwrapOp]) -> Vec<OsString> {
    let mut out = Vec::new();
    for op in ops {
        op.push_args(&mut out);
    }
    out
}

/// How `/proc` is provided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProcMode {
    /// A fresh procfs in the sandbox's pid namespace.
    Fresh,
    /// An empty tmpfs: the documented weaker mode when no fresh procfs can be mounted. The
    /// host's `/proc` is never bound (FSR-05).
    Masked,
}

/// Inputs of [`mount_ops`] that do not come from the policy.
#[derive(Clone, Debug)]
pub struct MountInputs {
    /// Where the private tmp lives when `/tmp` is granted (a tmpfs at this path).
    pub tmp_dir: AbsPathBuf,
    /// How `/proc` is provided.
    pub proc_mode: ProcMode,
    /// The host path of the supervisor binary.
    pub supervisor_src: AbsPathBuf,
    /// The sandbox path of the supervisor binary.
    pub supervisor_dest: AbsPathBuf,
    /// The empty, mode-0000 file (in the task's runtime dir) bound over every file anchor.
    /// One file for all of them: a descriptor each would run out of descriptors in a
    /// project with many matches of a deny glob (POL-06).
    pub masked_file: AbsPathBuf,
    /// `--itemize observe`: where the runner mounts the observer filesystem. Each
    /// directory anchor is then bound from `observer_dir/a{i}` instead of a tmpfs.
    pub observer_dir: Option<AbsPathBuf>,
    /// The directory every task's runtime dir is made in (this task's sockets, masked file
    /// and observer mount, and other tasks' too). The recursive bind of `/` would show it
    /// read-only; an empty tmpfs covers it unless a replaced ancestor (a private `/tmp`, a
    /// deny anchor) already does.
    pub runtime_base: Option<AbsPathBuf>,
}

/// What [`mount_ops`] decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountOps {
    /// The mount ops, in order.
    pub ops: Vec<BwrapOp>,
    /// Whether they use [`MountInputs::masked_file`] (which the runner must then create).
    pub uses_masked: bool,
    /// With [`MountInputs::observer_dir`]: the directory anchors the observer serves, in
    /// the order of their `a{i}` names, each with the mount points bwrap makes in it.
    pub observed: Vec<ObservedAnchor>,
    /// With [`MountInputs::observer_dir`]: the file anchors the observer serves, in the
    /// order of their `f{i}` names.
    pub observed_files: Vec<AbsPathBuf>,
}

/// The mount ops of a policy in the documented order (see the module doc), whether they use
/// the masked file, and the anchors an observer serves.
pub fn mount_ops(policy: &ResolvedPolicy, inputs: &MountInputs) -> MountOps {
    // Rank at one path: replacement (tmpfs, dev, proc, observer bind) < read-only bind <
    // writable bind < pin. The last field says whether the mount point is a directory.
    let mut path_ops: Vec<(AbsPathBuf, u8, BwrapOp, bool)> = Vec::new();
    let mut uses_masked = false;
    let mut remount = Vec::new();
    // The observed directory anchors, one `a{i}` per distinct path.
    let mut observed: Vec<AbsPathBuf> = Vec::new();
    let mut observed_files: Vec<AbsPathBuf> = Vec::new();

    for anchor in &policy.read_deny {
        // A missing anchor is masked on the placeholder the runner makes there
        // ([`missing_deny_placeholders`]), as a directory unless it looks like a file.
        let kind = anchor.kind.unwrap_or(if looks_like_file(&anchor.path) {
            FileKind::File
        } else {
            FileKind::Dir
        });
        match kind {
            FileKind::Dir => match &inputs.observer_dir {
                Some(dir) => {
                    let i = match observed.iter().position(|a| a == &anchor.path) {
                        Some(i) => i,
                        None => {
                            observed.push(anchor.path.clone());
                            observed.len() - 1
                        }
                    };
                    let src = dir.join(format!("a{i}"));
                    path_ops.push((
                        anchor.path.clone(),
                        0,
                        BwrapOp::Bind { src, dest: anchor.path.clone() },
                        true,
                    ));
                }
                None => {
                    path_ops.push((
                        anchor.path.clone(),
                        0,
                        BwrapOp::Tmpfs { dest: anchor.path.clone() },
                        true,
                    ));
                    remount.push(anchor.path.clone());
                }
            },
            FileKind::File | FileKind::Other | FileKind::Symlink => {
                let src = match &inputs.observer_dir {
                    // Observed: an empty file of the observer's that records every open.
                    Some(dir) => {
                        let i = match observed_files.iter().position(|a| a == &anchor.path) {
                            Some(i) => i,
                            None => {
                                observed_files.push(anchor.path.clone());
                                observed_files.len() - 1
                            }
                        };
                        dir.join(format!("f{i}"))
                    }
                    None => {
                        uses_masked = true;
                        inputs.masked_file.clone()
                    }
                };
                let op = BwrapOp::RoBind { src, dest: anchor.path.clone() };
                path_ops.push((anchor.path.clone(), 0, op, false));
            }
        }
        for exc in &anchor.exceptions {
            let (rank, op) = if exc.writable {
                (2, BwrapOp::Bind { src: exc.path.clone(), dest: exc.path.clone() })
            } else {
                (1, BwrapOp::RoBind { src: exc.path.clone(), dest: exc.path.clone() })
            };
            path_ops.push((exc.path.clone(), rank, op, exc.kind == FileKind::Dir));
        }
    }
    for grant in &policy.write {
        path_ops.push((
            grant.path.clone(),
            2,
            BwrapOp::Bind { src: grant.path.clone(), dest: grant.path.clone() },
            grant.kind == FileKind::Dir,
        ));
    }
    if let UnixSockets::Paths { sockets } = &policy.unix_sockets {
        // A granted socket is reachable at its path even where the sandbox hides its
        // directory (a private `/tmp`, `$XDG_RUNTIME_DIR`, a deny anchor); the mount also
        // keeps the task from renaming or replacing it. The supervisor connects to it.
        for socket in sockets {
            let op =
                BwrapOp::RoBindTry { src: socket.resolved.clone(), dest: socket.resolved.clone() };
            path_ops.push((socket.resolved.clone(), 1, op, false));
        }
    }
    let missing: Vec<&AbsPathBuf> = policy
        .protected
        .iter()
        .filter_map(|p| match &p.state {
            ProtectedState::Missing { first_missing } => Some(first_missing),
            ProtectedState::Exists { .. } => None,
        })
        .collect();
    for pin in &policy.pinned {
        // A pin that is (or is under) a missing protected path does not exist on the host:
        // its placeholder is bound instead. A pin under a deny anchor would show hidden files.
        if missing.iter().any(|m| pin.starts_with(m)) || policy.anchor_hiding(pin).is_some() {
            continue;
        }
        path_ops.push((
            pin.clone(),
            3,
            BwrapOp::Bind { src: pin.clone(), dest: pin.clone() },
            true,
        ));
    }
    let dev = abs("/dev");
    path_ops.push((dev.clone(), 0, BwrapOp::Dev { dest: dev }, true));
    let proc = abs("/proc");
    let proc_op = match inputs.proc_mode {
        ProcMode::Fresh => BwrapOp::Proc { dest: proc.clone() },
        ProcMode::Masked => BwrapOp::Tmpfs { dest: proc.clone() },
    };
    path_ops.push((proc, 0, proc_op, true));
    let tmp = if policy.private_tmp { abs("/tmp") } else { inputs.tmp_dir.clone() };
    path_ops.push((tmp.clone(), 0, BwrapOp::Tmpfs { dest: tmp }, true));
    if let Some(base) = &inputs.runtime_base {
        // Other tasks' sockets and this task's observer root (mounted there in the namespace
        // bwrap starts from) must not show through the recursive bind of `/`. Bind sources
        // are resolved in the old root (`/oldroot/...`), which this does not touch.
        let covered = path_ops.iter().any(|(p, rank, op, _)| {
            *rank == 0
                && base.starts_with(p)
                && base != p
                && !matches!(op, BwrapOp::Dev { .. } | BwrapOp::Proc { .. })
        });
        if !covered {
            path_ops.push((base.clone(), 0, BwrapOp::Tmpfs { dest: base.clone() }, true));
        }
    }

    // Stable sort by (path components, rank): ancestors first, and at one path the
    // replacement first and the most permissive bind last. `AbsPathBuf` orders by
    // components, so `/a` < `/a/b` < `/ab`.
    path_ops.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    // One op per (path, rank): a deny anchor listed twice, or an exception that is also a
    // write grant, mounts once.
    path_ops.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1);
    // A read-only exception is pointless under a writable bind of the same path.
    let writable: std::collections::HashSet<AbsPathBuf> =
        path_ops.iter().filter(|o| o.1 >= 2).map(|o| o.0.clone()).collect();
    path_ops.retain(|o| !(o.1 == 1 && writable.contains(&o.0)));

    let observed = observed
        .into_iter()
        .map(|anchor| {
            let nodes = observed_nodes(&anchor, &path_ops);
            ObservedAnchor { path: anchor, nodes }
        })
        .collect();

    let mut ops = vec![BwrapOp::RoBind { src: AbsPathBuf::root(), dest: AbsPathBuf::root() }];
    ops.extend(path_ops.into_iter().map(|o| o.2));

    // 3. Protected paths, read-only, after everything writable.
    let mut protected: Vec<AbsPathBuf> = Vec::with_capacity(policy.protected.len());
    for p in &policy.protected {
        if policy.anchor_hiding(&p.path).is_some() {
            continue;
        }
        let target = match &p.state {
            // A protected link: a bind would land on its target (kept read-only by a
            // protected path of its own), or create a dangling link's target.
            ProtectedState::Exists { kind: FileKind::Symlink } => continue,
            ProtectedState::Exists { .. } => p.path.clone(),
            ProtectedState::Missing { first_missing } => first_missing.clone(),
        };
        protected.push(target);
    }
    protected.sort();
    protected.dedup();
    // A protected path under another protected path is already read-only.
    let under_another: Vec<bool> = {
        let outer: std::collections::HashSet<&std::path::Path> =
            protected.iter().map(AbsPathBuf::as_path).collect();
        protected
            .iter()
            .map(|p| p.as_path().ancestors().skip(1).any(|a| outer.contains(a)))
            .collect()
    };
    let mut under = under_another.into_iter();
    protected.retain(|_| !under.next().unwrap_or(false));
    ops.extend(protected.into_iter().map(|p| BwrapOp::RoBind { src: p.clone(), dest: p }));

    // 4. Deny tmpfs read-only, unless a writable bind sits on the very same path (remounting
    // the top mount there would make the grant read-only).
    remount.sort();
    remount.dedup();
    for path in remount {
        if writable.contains(&path) {
            continue;
        }
        ops.push(BwrapOp::RemountRo { dest: path });
    }
    MountOps { ops, uses_masked, observed, observed_files }
}

/// The protected names that are symbolic links inside a directory write grant (and not
/// hidden by a deny anchor): each is mounted read-only on itself before bwrap starts
/// (`private_ns::SelfMounts`), since a bind of bwrap's would land on the target.
/// Outside every grant a link cannot be removed anyway.
pub fn link_mounts(policy: &ResolvedPolicy) -> Vec<AbsPathBuf> {
    let mut links: Vec<AbsPathBuf> = policy
        .protected
        .iter()
        .filter(|p| p.state == ProtectedState::Exists { kind: FileKind::Symlink })
        .filter(|p| policy.anchor_hiding(&p.path).is_none())
        .filter(|p| {
            policy
                .write
                .iter()
                .any(|g| g.kind == FileKind::Dir && p.path.starts_with(&g.path) && p.path != g.path)
        })
        .map(|p| p.path.clone())
        .collect();
    links.sort();
    links.dedup();
    links
}

/// The last op of every plan, after the mounts and the socket directories: the supervisor
/// binary at its path (order step 5).
pub fn supervisor_op(inputs: &MountInputs) -> BwrapOp {
    BwrapOp::RoBind { src: inputs.supervisor_src.clone(), dest: inputs.supervisor_dest.clone() }
}

/// The mount points bwrap makes inside the observed `anchor`, relative to it, parents
/// first: every path mount strictly under the anchor whose nearest enclosing mount is the
/// anchor itself (a mount inside an exception's bind is made in the exception, not in the
/// observer), with each of its parents as a directory. The observer must serve them: it
/// refuses every creation, so bwrap could not make them.
///
/// A bind's mount point is a directory when its source is one (as bwrap decides); a
/// symlink or special file is a file node.
fn observed_nodes(
    anchor: &AbsPathBuf,
    path_ops: &[(AbsPathBuf, u8, BwrapOp, bool)],
) -> Vec<ObservedNode> {
    let mut nodes: Vec<(PathBuf, bool)> = Vec::new();
    let mounted: std::collections::HashSet<&std::path::Path> =
        path_ops.iter().map(|(m, ..)| m.as_path()).collect();
    for (dest, _, _, dir) in path_ops {
        if dest == anchor || !dest.starts_with(anchor) {
            continue;
        }
        // Another mount between the anchor and this one holds its mount point.
        let inner = dest
            .as_path()
            .ancestors()
            .skip(1)
            .take_while(|a| *a != anchor.as_path())
            .any(|a| mounted.contains(a));
        if inner {
            continue;
        }
        let Ok(rel) = dest.as_path().strip_prefix(anchor.as_path()) else { continue };
        let mut parent = rel.parent();
        while let Some(p) = parent.filter(|p| !p.as_os_str().is_empty()) {
            nodes.push((p.to_path_buf(), true));
            parent = p.parent();
        }
        nodes.push((rel.to_path_buf(), *dir));
    }
    // Parents before children (`Path` orders by components), one node per path; a path that
    // is both a parent and a file mount point stays a directory (bwrap would fail there too).
    nodes.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    nodes.dedup_by(|a, b| a.0 == b.0);
    nodes.into_iter().map(|(rel, dir)| ObservedNode { rel, dir }).collect()
}

/// An absolute path from a literal known to be absolute.
pub(crate) fn abs(path: &str) -> AbsPathBuf {
    AbsPathBuf::new_lexical(path).unwrap_or_else(AbsPathBuf::root)
}

/// The missing protected paths' placeholders, outermost first, one per path: the runner
/// creates each (empty dir or empty file) before the spawn and removes it after.
///
/// A protected name that does not exist must not be creatable in the sandbox, and bwrap
/// cannot make a mount point inside the read-only root, so the runner creates an empty
/// placeholder on the host that is bound read-only onto itself. Residual risks, accepted and
/// documented: while the task runs the placeholder exists on the host (a concurrent host
/// `git status` or login shell sees an empty `.bashrc`); after a `kill -9` of paddock it stays
/// until the next run's sweep removes it (its runtime dir's manifest lists it); a host process
/// that writes into it meanwhile keeps it (paddock only removes a placeholder that is still
/// the empty file or directory it created); and placeholders are created without following a
/// final symlink, but a parent directory swapped for a symlink by a concurrent host process
/// between resolution and creation is followed (bwrap 0.8 has no `--bind-fd`).
pub fn placeholders(policy: &ResolvedPolicy) -> Vec<paddock_policy::Placeholder> {
    let mut out: Vec<paddock_policy::Placeholder> = Vec::new();
    for p in &policy.protected {
        let ProtectedState::Missing { first_missing } = &p.state else { continue };
        if policy.anchor_hiding(&p.path).is_some() || out.iter().any(|o| &o.path == first_missing) {
            continue;
        }
        // An ancestor of the protected name is a directory; the name itself is a file when
        // it looks like one (`.bashrc`, `config`, `paddock.toml`). An empty directory is
        // preferred otherwise: git does not list it, so it shows as no ghost file (G6).
        let dir = first_missing != &p.path || !looks_like_file(first_missing);
        out.push(paddock_policy::Placeholder { path: first_missing.clone(), dir });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// The placeholders of the read-deny anchors that are missing on the host (a `deny.read`
/// entry that does not exist yet, `paddock_policy` resolution's outermost missing
/// component): the runner makes each, so that the anchor's mask has a mount point and
/// whatever appears there during the run is hidden. One hidden by another anchor needs none.
pub fn missing_deny_placeholders(policy: &ResolvedPolicy) -> Vec<paddock_policy::Placeholder> {
    let mut out: Vec<paddock_policy::Placeholder> = Vec::new();
    for anchor in policy.read_deny.iter().filter(|a| a.kind.is_none()) {
        let hidden = policy.read_deny.iter().any(|o| {
            o.path != anchor.path
                && anchor.path.starts_with(&o.path)
                && !o.exceptions.iter().any(|e| anchor.path.starts_with(&e.path))
        });
        if hidden || out.iter().any(|o| o.path == anchor.path) {
            continue;
        }
        let dir = !looks_like_file(&anchor.path);
        out.push(paddock_policy::Placeholder { path: anchor.path.clone(), dir });
    }
    out
}

fn looks_like_file(path: &AbsPathBuf) -> bool {
    const FILES: &[&str] = &[
        ".bashrc",
        ".bash_profile",
        ".bash_login",
        ".bash_logout",
        ".profile",
        ".zshrc",
        ".zshenv",
        ".zprofile",
        ".zlogin",
        ".gitconfig",
        ".gitmodules",
        "config",
        ".mcp.json",
        ".envrc",
    ];
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else { return false };
    FILES.contains(&name) || name.trim_start_matches('.').contains('.')
}
