//! `LinuxBwrap`: the `Backend` that turns a resolved policy into a bubblewrap spawn plan.
//!
//! The plan keeps secrets out of everything visible inside the sandbox (ENV-02): bwrap is
//! spawned with an empty environment and a short argv, its real arguments arrive on
//! [`ARGS_FD`] (`--args`), and the task's argv, environment and cwd arrive on
//! [`SUPERVISOR_FD`] as a [`SupervisorPayload`].
//!
//! The command bwrap runs is the supervisor: `paddock-supervisor` when it sits next to
//! paddock (`HostFacts::supervisor_exe`), else paddock itself, re-executed. Its host path
//! may lie under a read-deny anchor (`~/.cargo/bin` when `~` is
//! denied), so it is bound read-only at the fixed [`SUPERVISOR_PATH`] inside the sandbox's
//! private `/dev` tmpfs (`paddock-supervisor-nolibc`, small, is copied there instead:
//! `crate::nolibc`). That path always exists (bwrap makes `/dev`), is writable only
//! during setup, and needs no placeholder on the host; executing through an inherited fd
//! (`/proc/self/fd/N`) would instead depend on a fresh `/proc`, which the weaker mode lacks.
//!
//! Port grants and a domain list become bridges ([`crate::bridges`]): host ends in
//! `SpawnPlan::bridges`, sandbox ends in the supervisor payload, the task's environment gets
//! the proxy variables, and the network namespace stays the sandbox's own.

use std::ffi::OsString;

use paddock_policy::{
    AbsPathBuf, Backend, Error, FileKind, HostFacts, NetworkPolicy, ObserverPlan, Payload,
    Placeholder, ResolvedPolicy, SpawnPlan, Task, UnixSockets,
};

use crate::mount_ids::MOUNT_IDS_FD;
use crate::ops::{self, BwrapOp, MountInputs, ProcMode};
use crate::payload::{Bytes, SupervisorPayload, UnixSocketGrant};
use crate::seccomp;

/// The backend's name.
pub const BACKEND_NAME: &str = "linux-bwrap";
/// bwrap reads its NUL-separated arguments from this descriptor (`--args`).
pub const ARGS_FD: i32 = 3;
/// The supervisor reads its [`SupervisorPayload`] from this descriptor.
pub const SUPERVISOR_FD: i32 = 4;
/// The supervisor reads the BPF program from this descriptor.
pub const SECCOMP_FD: i32 = 5;
/// The supervisor reads polite signals from this descriptor.
pub const SIGNAL_FD: i32 = 6;
/// `--itemize observe`: the supervisor writes its records on this descriptor.
pub const RECORD_FD: i32 = 7;
/// `allow.local-ports`: the supervisor receives the host's connections on this descriptor.
pub const INBOUND_FD: i32 = 8;
/// Where an observed run started by `paddock-supervisor-nolibc` has the notification
/// filter's BPF program (`crate::nolibc::with_notifier`).
pub const NOTIFY_BPF_FD: i32 = 10;
/// Where an observed run started by `paddock-supervisor-nolibc` has the executable that
/// serves the notification listener once the task makes its first notified call or has run
/// for a millisecond (an `O_PATH` descriptor of `paddock-supervisor`'s copy nobody may read:
/// `crate::runtime::exec_only`).
pub const NOTIFIER_EXE_FD: i32 = 11;
/// Where the child has the first clone of the host's device nodes, when the supervisor makes
/// the sandbox's `/dev` (`crate::devices`); the other five follow.
pub const DEVICES_FD: i32 = 12;
/// Where the child has the supervisor without a C library open, read-only, for bwrap to copy
/// to [`SUPERVISOR_PATH`] (`crate::nolibc`): after the devices and the console.
pub const SUPERVISOR_EXE_FD: i32 = DEVICES_FD + 7;
/// The name, in the task's runtime dir, of the empty mode-0000 file bound over file anchors.
pub const MASKED_FILE: &str = "masked";
/// `--itemize observe`: the name, in the task's runtime dir, of the observer filesystem's
/// mount point.
pub(crate) const OBSERVER_DIR: &str = "observe";
/// Where the supervisor binary is bound inside the sandbox.
pub const SUPERVISOR_PATH: &str = "/dev/.paddock-supervisor";
/// Where the supervisor makes the empty mode-0000 file of its inner masks
/// ([`crate::payload::InnerMount::mask`]), in bwrap's fresh `/dev`, and removes it again
/// once they are mounted: the same empty mode-0000 file every hidden path shows, which no
/// process of the sandbox can reach but through those read-only mounts.
pub const INNER_MASK_PATH: &str = "/dev/.paddock-masked";
/// The dedicated supervisor's executable name, next to `paddock`.
pub const SUPERVISOR_EXE: &str = "paddock-supervisor";
/// The hidden subcommand that runs the supervisor.
pub const SUPERVISE_SUBCOMMAND: &str = "__supervise";
/// The hidden subcommand that serves an observed run's notifications once
/// `paddock-supervisor-nolibc` hands them over (`supervisor::serve_notify`).
pub const SERVE_NOTIFY_SUBCOMMAND: &str = "__serve-notify";
/// Without user namespaces (root), how many binds of paths onto themselves the runner's
/// child makes itself ([`SpawnPlan::self_mounts`]) even when nothing else needs its private
/// namespace: below this the namespace and the fork cost more than bwrap's binds (measured
/// with `cargo xtask bench spawn`). With user namespaces the supervisor makes them (inner
/// mounts), whatever their number.
pub const SELF_MOUNTS_WORTH_A_NAMESPACE: usize = 24;

/// The bubblewrap backend. Planning is pure; see the crate doc.
#[derive(Clone, Copy, Debug, Default)]
pub struct LinuxBwrap;

fn unsupported(feature: &str, fix: &str) -> Error {
    Error::Unsupported { feature: feature.to_owned(), backend: BACKEND_NAME, fix: fix.to_owned() }
}

fn plan_error(message: String) -> Error {
    Error::Plan { backend: BACKEND_NAME, message }
}

/// bwrap's command line in every plan: its setup comes from [`ARGS_FD`], then the
/// supervisor. The same for every policy, so that a runner may start bwrap before it has
/// planned (bwrap blocks reading its arguments until they are written and the descriptor
/// closed). The supervisor's bind is the last setup op ([`crate::ops`]): arguments cut short
/// leave no supervisor to run, whatever else they did.
pub fn bwrap_argv() -> Vec<OsString> {
    vec![
        "bwrap".into(),
        "--args".into(),
        ARGS_FD.to_string().into(),
        SUPERVISOR_PATH.into(),
        SUPERVISE_SUBCOMMAND.into(),
        "--payload-fd".into(),
        SUPERVISOR_FD.to_string().into(),
    ]
}

impl Backend for LinuxBwrap {
    fn name(&self) -> &'static str {
        BACKEND_NAME
    }

    fn plan(
        &self,
        policy: &ResolvedPolicy,
        task: &Task,
        facts: &HostFacts,
    ) -> Result<SpawnPlan, Error> {
        let mut diagnostics = Vec::new();
        refuse_unenforceable(policy)?;
        let bwrap = facts.bwrap.as_ref().and_then(AbsPathBuf::new_lexical).ok_or_else(|| {
            plan_error(
                "bubblewrap was not found at /usr/bin/bwrap, /usr/local/bin/bwrap or /bin/bwrap; install it \
                 (Debian/Ubuntu: apt install bubblewrap; Fedora: dnf install bubblewrap) and run `paddock check`"
                    .to_owned(),
            )
        })?;
        let supervisor_src = facts
            .supervisor_exe
            .as_ref()
            .or(facts.self_exe.as_ref())
            .and_then(AbsPathBuf::new_lexical)
            .ok_or_else(|| {
                plan_error(
                    "cannot locate the paddock executable to run as the sandbox supervisor"
                        .to_owned(),
                )
            })?;
        // Without user namespaces an unprivileged bwrap can create no namespace at all, so
        // its fresh /proc fails too: the cause to name is the user namespaces.
        if !facts.user_namespaces {
            let old_bwrap = facts.bwrap_version.filter(|v| *v < (0, 8, 0));
            if let (true, Some((a, b, c))) = (facts.uid != 0, old_bwrap) {
                // The probe asks for a user namespace with --disable-userns, which older
                // bubblewraps do not know: the cause is the version, not the kernel.
                return Err(plan_error(format!(
                    "bubblewrap {a}.{b}.{c} is too old: paddock needs 0.8.0 or newer \
                     (--disable-userns) to run without root; upgrade bubblewrap and run \
                     `paddock check`"
                )));
            }
            if facts.uid != 0 {
                return Err(plan_error(
                    "user namespaces are not available, and bubblewrap needs them when not run as root; \
                     enable them (sysctl kernel.unprivileged_userns_clone=1, or \
                     kernel.apparmor_restrict_unprivileged_userns=0) and run `paddock check`"
                        .to_owned(),
                ));
            }
            diagnostics.push(
                "no user namespace: bwrap runs as root without one; nested namespaces are refused by the \
                 seccomp filter instead of --disable-userns"
                    .to_owned(),
            );
        }

        let proc_mode = if facts.fresh_proc {
            ProcMode::Fresh
        } else if policy.weaker_when_nested {
            diagnostics.push(
                "weaker: no fresh /proc can be mounted here (nested in a container?); /proc is an empty tmpfs, \
                 so tools that read /proc fail; the host's /proc is never exposed"
                    .to_owned(),
            );
            if let UnixSockets::Paths { .. } = policy.unix_sockets {
                // The supervisor reaches a granted socket through `/proc/self/fd` and a
                // relative address through `/proc/PID/cwd`: without them it cannot decide.
                return Err(unsupported(
                    "allow.unix-sockets (a list of paths) without a fresh /proc",
                    "this nested host gives no fresh /proc, which path grants need; use                      `unix-sockets = true` or `false` here",
                ));
            }
            ProcMode::Masked
        } else {
            return Err(plan_error(
                "this host cannot mount a fresh /proc in a new pid namespace (typical inside a container); \
                 paddock refuses to run with the host's /proc. Run `paddock check` for the fix, or set \
                 `weaker-when-nested = true` to run with an empty /proc"
                    .to_owned(),
            ));
        };

        let tmp_dir = task.runtime_dir.join("tmp");
        let inputs = MountInputs {
            tmp_dir: tmp_dir.clone(),
            proc_mode,
            supervisor_src,
            supervisor_dest: ops::abs(SUPERVISOR_PATH),
            masked_file: task.runtime_dir.join(MASKED_FILE),
            observer_dir: task.observe.then(|| task.runtime_dir.join(OBSERVER_DIR)),
            runtime_base: task.runtime_dir.parent(),
        };
        let ops::MountOps { ops: mounts, uses_masked, observed, observed_files } =
            ops::mount_ops(policy, &inputs);
        refuse_socket_binds_of_old_bwrap(policy, facts, &mounts)?;
        // Present whenever the task observes, even without anchors: the supervisor's record
        // descriptor rides on it.
        let observer = inputs.observer_dir.clone().map(|mount_dir| ObserverPlan {
            mount_dir,
            anchors: observed,
            files: observed_files,
            record_fd: RECORD_FD,
        });
        let net = crate::bridges::plan(policy, &task.runtime_dir)?;
        diagnostics.extend(net.diagnostics);

        let mut all = vec![BwrapOp::UnshareAll];
        if facts.user_namespaces {
            all.extend([BwrapOp::UnshareUser, BwrapOp::DisableUserns]);
        }
        if matches!(policy.network, NetworkPolicy::On) {
            all.push(BwrapOp::ShareNet);
        }
        all.extend([
            BwrapOp::AsPid1,
            BwrapOp::DieWithParent,
            BwrapOp::NewSession,
            BwrapOp::CapDropAll,
        ]);
        if !facts.user_namespaces {
            all.push(BwrapOp::CapAddSetpcap);
        }
        all.extend(mounts);
        // The socket directories: on the fresh /dev, after every other mount.
        all.extend(net.mounts);
        // And the supervisor last of all (see `bwrap_argv`).
        all.push(ops::supervisor_op(&inputs));
        let placeholders = {
            let mut p = ops::placeholders(policy);
            for extra in ops::missing_deny_placeholders(policy) {
                if !p.iter().any(|o| o.path == extra.path) {
                    p.push(extra);
                }
            }
            p.sort_by(|a, b| a.path.cmp(&b.path));
            if uses_masked {
                // Created empty with mode 0000 by the runner (every file placeholder is),
                // so a task without capabilities gets EACCES reading a hidden file.
                p.push(Placeholder { path: inputs.masked_file.clone(), dir: false });
            }
            p
        };
        // Not verified: the placeholders the runner makes, and the paths that were links
        // when planned (bwrap binds their targets: `/bin -> usr/bin` of a carve-out).
        let mut unverified: Vec<AbsPathBuf> = placeholders.iter().map(|p| p.path.clone()).collect();
        let links = policy
            .read_deny
            .iter()
            .flat_map(|a| &a.exceptions)
            .filter(|e| e.kind == FileKind::Symlink)
            .map(|e| &e.path);
        let link_grants =
            policy.write.iter().filter(|g| g.kind == FileKind::Symlink).map(|g| &g.path);
        unverified.extend(links.chain(link_grants).cloned());
        let verified = ops::verified_binds(&all, &unverified);
        // bwrap reads the whole mount table again for every bind (about 65 us each for the
        // twenty of an empty project here, and more as the table grows); the supervisor
        // (inner mounts) or the runner's child (self mounts) mounts a path onto itself with
        // three system calls and reads none. See below for which.
        let link_mounts = ops::link_mounts(policy);
        // The masks of hidden regular files too: the masked file, or the observer's file
        // for each (served by the runner's observer thread from the moment the child has
        // mounted the observer, before it makes these).
        let served: std::collections::HashMap<&AbsPathBuf, usize> = observer
            .as_ref()
            .map(|o| o.files.iter().enumerate().map(|(i, f)| (f, i)).collect())
            .unwrap_or_default();
        let masks: Vec<(AbsPathBuf, AbsPathBuf)> = policy
            .read_deny
            .iter()
            .filter(|a| a.kind == Some(FileKind::File))
            .map(|a| {
                let source = match (served.get(&a.path), &observer) {
                    (Some(i), Some(o)) => o.mount_dir.join(format!("f{i}")),
                    _ => inputs.masked_file.clone(),
                };
                (source, a.path.clone())
            })
            .collect();
        let grants: Vec<AbsPathBuf> = policy.write.iter().map(|g| g.path.clone()).collect();
        let mountable = ops::self_mountable(&all, &grants, &masks);
        let in_child_anyway = task.observe || !link_mounts.is_empty();
        let mut inner_mounts = Vec::new();
        let mut device_fds = None;
        let mut grant_clones = Vec::new();
        let self_mounts = if facts.user_namespaces {
            // The supervisor makes them once bwrap is done: the spawn stays the plain one
            // (a bwrap started before the plan) where nothing else needs the runner's child
            // in a namespace of its own, and bwrap's mount table stays short where it does
            // (every mount there is one more line bwrap reads for each bind, and one more
            // submount its recursive binds remount). The masks of hidden files the observer
            // serves are the child's: their source is its mount.
            let outer = if in_child_anyway {
                let masks_only: Vec<usize> = mountable
                    .iter()
                    .copied()
                    .filter(|&i| matches!(&all[i], BwrapOp::RoBind { src, dest } if src != dest))
                    .collect();
                ops::take_self_mounts(&mut all, &masks_only)
            } else {
                Vec::new()
            };
            // What is left once the child's masks are taken out (their indices moved), else
            // what was found above.
            let candidates =
                if in_child_anyway { ops::self_mountable(&all, &grants, &[]) } else { mountable };
            let inner = ops::inner_mountable(&all, &candidates);
            // And the masks of hidden files outside the grants, with the supervisor's own
            // masked file: each one bwrap bind fewer.
            let inner = ops::inner_masks(&all, inner, &inputs.masked_file);
            // And the hidden directories there: an empty read-only tmpfs of the
            // supervisor's for bwrap's tmpfs and its remount (which reads the mount table).
            let hidden = ops::inner_hidden_dirs(&all, &inner);
            inner_mounts = ops::take_inner_mounts(&mut all, &inner, &hidden);
            // The devices of `/dev`: the supervisor's, from the runner's clones, in bwrap's
            // bare tmpfs (six binds bwrap makes one by one, each reading the mount table).
            if facts.clone_mounts
                && let Some(dev) = all.iter_mut().find(|op| matches!(op, BwrapOp::Dev { .. }))
                && let BwrapOp::Dev { dest } = dev.clone()
            {
                *dev = BwrapOp::Tmpfs { dest: dest.clone() };
                inner_mounts.insert(
                    0,
                    crate::payload::InnerMount {
                        devices: true,
                        ..crate::payload::InnerMount::on_itself(dest.as_os_str(), false)
                    },
                );
                device_fds = Some(DEVICES_FD);
            }
            // The write grants: the runner's clones, attached first (after the devices),
            // but where something the runner's child mounts rides on bwrap's recursive bind.
            if facts.clone_mounts {
                let carried: Vec<&AbsPathBuf> =
                    outer.iter().map(|m| &m.path).chain(&link_mounts).collect();
                let dirs: Vec<AbsPathBuf> = policy
                    .write
                    .iter()
                    .filter(|g| g.kind == FileKind::Dir)
                    .filter(|g| !carried.iter().any(|c| c.as_path().starts_with(&g.path)))
                    .map(|g| g.path.clone())
                    .collect();
                let clonable = ops::clonable_grants(&all, &dirs, &inner_mounts);
                let clones = ops::take_grant_clones(&mut all, &clonable);
                grant_clones = ops::grant_clones_of(&clones, &inner_mounts);
                ops::mark_in_grant_clones(&mut inner_mounts, &grant_clones);
                let at = usize::from(device_fds.is_some());
                inner_mounts.splice(at..at, clones);
            }
            if !inner_mounts.is_empty() {
                let at = all.iter().position(|op| *op == BwrapOp::CapDropAll).map_or(0, |i| i + 1);
                all.splice(at..at, [BwrapOp::CapAddSysAdmin, BwrapOp::CapAddSetpcap]);
            }
            outer
        } else if in_child_anyway
            || (facts.observe && mountable.len() >= SELF_MOUNTS_WORTH_A_NAMESPACE)
        {
            // Root without user namespaces: the runner's child makes them.
            ops::take_self_mounts(&mut all, &mountable)
        } else {
            Vec::new()
        };
        let mut args_bytes = Vec::new();
        for arg in ops::to_args(&all) {
            args_bytes.extend_from_slice(arg.as_encoded_bytes());
            args_bytes.push(0);
        }

        let filter_rules = seccomp::rules(crate::seccomp_query::options_for(policy, task.observe));
        let bpf = compile_filter(&filter_rules, &mut diagnostics)?;

        let tmpdir_value = if policy.private_tmp { ops::abs("/tmp") } else { tmp_dir };
        // The proxy variables are composed with the task's own environment (the policy's),
        // never with paddock's.
        let task_env = match net.proxy_port {
            Some(port) => paddock_portbridge::proxy_env(port, &policy.env),
            None => policy.env.clone(),
        };
        let mut env: Vec<(Bytes, Bytes)> = task_env
            .iter()
            .filter(|(k, _)| k != "TMPDIR")
            .map(|(k, v)| (Bytes(k.clone()), Bytes(v.clone())))
            .collect();
        env.push((Bytes("TMPDIR".into()), Bytes(tmpdir_value.as_os_str().to_os_string())));
        let mut task_argv = vec![Bytes(task.program.clone())];
        task_argv.extend(task.args.iter().cloned().map(Bytes));
        let payload = SupervisorPayload {
            version: crate::payload::PAYLOAD_VERSION.to_owned(),
            program: Bytes(task.program.clone()),
            args: task_argv,
            env,
            cwd: Bytes(task.cwd.as_os_str().to_os_string()),
            seccomp_fd: SECCOMP_FD,
            signal_fd: Some(SIGNAL_FD),
            relays: net.relays,
            record_fd: task.observe.then_some(RECORD_FD),
            record_connects: task.observe && !matches!(policy.network, NetworkPolicy::On),
            refuse_unix_sockets: task.observe && matches!(policy.unix_sockets, UnixSockets::None),
            unix_socket_grants: match &policy.unix_sockets {
                UnixSockets::Paths { sockets } => sockets
                    .iter()
                    .map(|s| UnixSocketGrant {
                        declared: Bytes(s.declared.as_os_str().to_os_string()),
                        resolved: Bytes(s.resolved.as_os_str().to_os_string()),
                    })
                    .collect(),
                _ => Vec::new(),
            },
            unix_abstract_shared: matches!(policy.network, NetworkPolicy::On),
            wait_for_tracer: false,
            strace_inside: None,
            mount_ids_fd: (!verified.is_empty()).then_some(MOUNT_IDS_FD),
            inner_mounts,
            task_fd: None,
        };

        let mut payloads = vec![
            Payload { name: "bwrap-args".to_owned(), fd: ARGS_FD, bytes: args_bytes },
            Payload { name: "supervisor".to_owned(), fd: SUPERVISOR_FD, bytes: payload.to_bytes() },
            Payload { name: "seccomp-bpf".to_owned(), fd: SECCOMP_FD, bytes: bpf },
        ];
        if !verified.is_empty() {
            payloads.push(Payload {
                name: crate::mount_ids::PAYLOAD_NAME.to_owned(),
                fd: MOUNT_IDS_FD,
                bytes: crate::mount_ids::request(&verified),
            });
        }

        // The runtime dir's masked file is made only for a mask still bound from it (by bwrap
        // or the runner's child): the supervisor's inner masks have an empty file of their own.
        let masked = &inputs.masked_file;
        let masked_bound =
            all.iter().any(|op| matches!(op, BwrapOp::RoBind { src, .. } if src == masked))
                || self_mounts.iter().any(|m| m.source.as_ref() == Some(masked));
        let mut placeholders = placeholders;
        if !masked_bound {
            placeholders.retain(|p| p.path != *masked);
        }

        Ok(SpawnPlan {
            backend: BACKEND_NAME,
            program: bwrap,
            argv: bwrap_argv(),
            // bwrap's environment is readable inside the sandbox (/proc/1/environ while it
            // sets up): it gets none. The task's environment is in the supervisor payload.
            env: Vec::new(),
            cwd: AbsPathBuf::root(),
            payloads,
            signal_fd: Some(SIGNAL_FD),
            bridges: net.bridges,
            placeholders,
            diagnostics,
            observer,
            link_mounts,
            self_mounts,
            device_fds,
            file_fds: Vec::new(),
            grant_clones,
        })
    }
}

/// bubblewrap before 0.5.0 cannot bind a file onto an existing socket (it opens the mount
/// point with `creat()`: ENXIO). A socket granted by path is bound onto itself, so where the
/// sandbox shows the socket (no tmpfs of the plan covers it) the run would fail in bwrap
/// with its own message: refused here instead, naming the fix.
fn refuse_socket_binds_of_old_bwrap(
    policy: &ResolvedPolicy,
    facts: &HostFacts,
    mounts: &[BwrapOp],
) -> Result<(), Error> {
    let Some((a, b, c)) = facts.bwrap_version.filter(|v| *v < (0, 5, 0)) else { return Ok(()) };
    let UnixSockets::Paths { sockets } = &policy.unix_sockets else { return Ok(()) };
    let covered = |path: &AbsPathBuf| {
        mounts.iter().any(|op| matches!(op, BwrapOp::Tmpfs { dest } if path.starts_with(dest)))
    };
    match sockets.iter().find(|s| !covered(&s.resolved)) {
        Some(socket) => Err(unsupported(
            &format!("allow.unix-sockets ({}) with bubblewrap {a}.{b}.{c}", socket.declared),
            "bubblewrap before 0.5.0 cannot bind a unix socket where the sandbox shows one; \
             upgrade bubblewrap (0.5.0 or newer), or use `unix-sockets = true`",
        )),
        None => Ok(()),
    }
}

/// Refuses what this backend cannot enforce yet, with the fix, rather than run weaker.
fn refuse_unenforceable(policy: &ResolvedPolicy) -> Result<(), Error> {
    if policy.pty {
        return Err(unsupported(
            "allow.pty",
            "a task pseudo-terminal is not available yet; remove `pty = true`",
        ));
    }
    Ok(())
}

#[cfg(target_os = "linux")]
fn compile_filter(
    rules: &[seccomp::SyscallRule],
    _diagnostics: &mut Vec<String>,
) -> Result<Vec<u8>, Error> {
    seccomp::compile(rules).map_err(|e| plan_error(e.to_string()))
}

#[cfg(not(target_os = "linux"))]
fn compile_filter(
    _rules: &[seccomp::SyscallRule],
    diagnostics: &mut Vec<String>,
) -> Result<Vec<u8>, Error> {
    // The plan is printable here but not runnable; the supervisor refuses an empty program
    // (fail closed), so this can never run a task unfiltered.
    diagnostics.push(
        "the seccomp program is compiled on Linux only; this plan shows its rules, not its bytes"
            .to_owned(),
    );
    Ok(Vec::new())
}
