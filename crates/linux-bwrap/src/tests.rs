//! Plan snapshots: argv and filter rules for representative policies. Pure, so they run on
//! every OS. Update with `UPDATE_EXPECT=1`.

use std::ffi::OsString;

use expect_test::{Expect, expect};
use paddock_policy::{
    AbsPathBuf, Backend, DenyAnchor, Exception, FileKind, HostFacts, IgnoreRules, ItemizeMode,
    NetworkPolicy, Origin, ProtectedPath, ProtectedState, ReportScope, ResolvedPolicy, Task,
    UnixSockets, WriteGrant,
};

use crate::LinuxBwrap;
use crate::payload::SupervisorPayload;
use crate::seccomp::{self, FilterOptions};

fn abs(p: &str) -> AbsPathBuf {
    AbsPathBuf::new_lexical(p).unwrap()
}

/// The default-like policy: `~` denied except the project, the project writable, `.git`
/// pinned with its hooks and config protected, `.bashrc` missing in the project.
pub(crate) fn policy() -> ResolvedPolicy {
    ResolvedPolicy {
        project_dir: abs("/home/u/proj"),
        home: abs("/home/u"),
        read_deny: vec![DenyAnchor {
            path: abs("/home/u"),
            kind: Some(FileKind::Dir),
            exceptions: vec![Exception {
                path: abs("/home/u/proj"),
                kind: FileKind::Dir,
                writable: true,
            }],
            origin: Origin::default_key("deny.read[0]"),
        }],
        write: vec![WriteGrant {
            path: abs("/home/u/proj"),
            kind: FileKind::Dir,
            origin: Origin::default_key("allow.write[0]"),
        }],
        protected: vec![
            ProtectedPath {
                path: abs("/home/u/proj/.git/hooks"),
                rule: ".git/hooks".into(),
                state: ProtectedState::Exists { kind: FileKind::Dir },
            },
            ProtectedPath {
                path: abs("/home/u/proj/.git/config"),
                rule: ".git/config".into(),
                state: ProtectedState::Exists { kind: FileKind::File },
            },
            ProtectedPath {
                path: abs("/home/u/proj/.bashrc"),
                rule: ".bashrc".into(),
                state: ProtectedState::Missing { first_missing: abs("/home/u/proj/.bashrc") },
            },
            ProtectedPath {
                path: abs("/home/u/proj/.vscode/settings.json"),
                rule: ".vscode".into(),
                state: ProtectedState::Missing { first_missing: abs("/home/u/proj/.vscode") },
            },
        ],
        pinned: vec![abs("/home/u/proj/.git")],
        globs: Vec::new(),
        network: NetworkPolicy::Off,
        unix_sockets: UnixSockets::None,
        local_ports: Vec::new(),
        host_ports: Vec::new(),
        pty: false,
        git_config: false,
        system_info: false,
        mach_lookup: Vec::new(),
        weaker_when_nested: false,
        private_tmp: true,
        env: vec![("PATH".into(), "/usr/bin:/bin".into()), ("TMPDIR".into(), "/host/tmp".into())],
        report: ReportScope {
            within: vec![abs("/home/u/proj")],
            linked: Vec::new(),
            itemize: ItemizeMode::Auto,
        },
        ignore: IgnoreRules::default(),
    }
}

pub(crate) fn task() -> Task {
    Task {
        program: "sh".into(),
        args: vec!["-c".into(), "echo hi > out.txt".into()],
        cwd: abs("/home/u/proj"),
        runtime_dir: abs("/run/user/1000/paddock/t1"),
        observe: false,
    }
}

pub(crate) fn facts() -> HostFacts {
    HostFacts {
        bwrap: Some("/usr/bin/bwrap".into()),
        bwrap_version: Some((0, 8, 0)),
        self_exe: Some("/home/u/.cargo/bin/paddock".into()),
        fresh_proc: true,
        user_namespaces: true,
        uid: 1000,
        ..HostFacts::default()
    }
}

/// The bwrap arguments of a plan, one op per line.
fn bwrap_args(policy: &ResolvedPolicy, facts: &HostFacts) -> String {
    args_text(&LinuxBwrap.plan(policy, &task(), facts).unwrap())
}

/// A plan's bwrap arguments, one option (with its values) per line.
fn args_text(plan: &paddock_policy::SpawnPlan) -> String {
    let args = &plan.payloads.iter().find(|p| p.name == "bwrap-args").unwrap().bytes;
    let mut out = String::new();
    for arg in args.split(|b| *b == 0).filter(|a| !a.is_empty()) {
        let arg = String::from_utf8_lossy(arg);
        if arg.starts_with("--") && !out.is_empty() {
            out.push('\n');
        } else if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&arg);
    }
    out.push('\n');
    // What the runner's child mounts before bwrap starts, in its order.
    for m in &plan.self_mounts {
        out.push_str(&format!(
            "(self-mount {} {})\n",
            if m.read_only { "ro" } else { "rw" },
            m.path
        ));
    }
    // What the supervisor mounts once bwrap is done, in its order.
    let sup = plan.payloads.iter().find(|p| p.name == "supervisor").unwrap();
    let sup = crate::payload::SupervisorPayload::from_bytes(&sup.bytes, sup.fd).unwrap();
    for m in &sup.inner_mounts {
        out.push_str(&format!(
            "(inner-mount {} {})\n",
            if m.mask {
                "mask"
            } else if m.empty_dir {
                "empty-dir"
            } else if m.read_only {
                "ro"
            } else {
                "rw"
            },
            m.path.0.display()
        ));
    }
    out
}

#[track_caller]
fn check(policy: &ResolvedPolicy, facts: &HostFacts, expect: Expect) {
    expect.assert_eq(&bwrap_args(policy, facts));
}

#[test]
fn a_dedicated_supervisor_is_bound_in_place_of_paddock() {
    let facts = HostFacts {
        supervisor_exe: Some("/home/u/.cargo/bin/paddock-supervisor".into()),
        ..facts()
    };
    let args = bwrap_args(&policy(), &facts);
    assert!(
        args.contains("--ro-bind /home/u/.cargo/bin/paddock-supervisor /dev/.paddock-supervisor\n"),
        "{args}"
    );
    assert!(!args.contains("bin/paddock /dev"), "{args}");
}

/// bwrap is started before its plan exists (the runner overlaps its own start-up with
/// bwrap's), so arguments cut short must leave no supervisor to run: its bind is the last
/// op of every plan, and bwrap's command line is the same for every policy.
#[test]
fn every_plan_ends_with_the_supervisor_and_has_the_same_command_line() {
    let mut network = policy();
    network.network = NetworkPolicy::Filtered {
        allow: vec![paddock_policy::DomainPattern::parse("example.test").unwrap()],
        deny: Vec::new(),
    };
    network.local_ports = vec![3000];
    let plans = [
        LinuxBwrap.plan(&policy(), &task(), &facts()).unwrap(),
        LinuxBwrap.plan(&network, &task(), &facts()).unwrap(),
        observe_plan(),
    ];
    for plan in plans {
        let text = args_text(&plan);
        let last = text.lines().rfind(|l| l.starts_with("--")).unwrap();
        assert_eq!(last, "--ro-bind /home/u/.cargo/bin/paddock /dev/.paddock-supervisor", "{text}");
        assert_eq!(text.matches("/dev/.paddock-supervisor").count(), 1, "{text}");
        assert_eq!(plan.argv, crate::bwrap_argv());
    }
}

#[test]
fn default_policy_argv() {
    check(
        &policy(),
        &facts(),
        expect![[r#"
            --unshare-all
            --unshare-user
            --disable-userns
            --as-pid-1
            --die-with-parent
            --new-session
            --cap-drop ALL
            --cap-add CAP_SYS_ADMIN
            --cap-add CAP_SETPCAP
            --ro-bind / /
            --dev /dev
            --tmpfs /home/u
            --bind /home/u/proj /home/u/proj
            --proc /proc
            --tmpfs /run/user/1000/paddock
            --tmpfs /tmp
            --remount-ro /home/u
            --ro-bind /home/u/.cargo/bin/paddock /dev/.paddock-supervisor
            (inner-mount rw /home/u/proj/.git)
            (inner-mount ro /home/u/proj/.bashrc)
            (inner-mount ro /home/u/proj/.git/config)
            (inner-mount ro /home/u/proj/.git/hooks)
            (inner-mount ro /home/u/proj/.vscode)
        "#]],
    );
}

#[test]
fn plan_keeps_secrets_out_of_argv_and_env() {
    let mut p = policy();
    p.env.push(("API_KEY".into(), "s3cret".into()));
    let plan = LinuxBwrap.plan(&p, &task(), &facts()).unwrap();
    assert!(plan.env.is_empty(), "bwrap gets an empty environment");
    let argv: Vec<&str> = plan.argv.iter().map(|a| a.to_str().unwrap()).collect();
    assert_eq!(
        argv,
        ["bwrap", "--args", "3", "/dev/.paddock-supervisor", "__supervise", "--payload-fd", "4"]
    );
    let sup = plan.payloads.iter().find(|p| p.name == "supervisor").unwrap();
    let payload = SupervisorPayload::from_bytes(&sup.bytes, 4).unwrap();
    let env: Vec<(String, String)> = payload
        .env
        .iter()
        .map(|(k, v)| (k.0.to_str().unwrap().into(), v.0.to_str().unwrap().into()))
        .collect();
    assert!(env.contains(&("API_KEY".into(), "s3cret".into())));
    assert!(env.contains(&("TMPDIR".into(), "/tmp".into())), "TMPDIR is the private tmp: {env:?}");
    assert!(!env.iter().any(|(_, v)| v == "/host/tmp"), "the host TMPDIR is replaced");
    let args = &plan.payloads.iter().find(|p| p.name == "bwrap-args").unwrap().bytes;
    assert!(!String::from_utf8_lossy(args).contains("s3cret"));
    assert_eq!(
        payload.args.iter().map(|a| a.0.clone()).collect::<Vec<OsString>>(),
        ["sh", "-c", "echo hi > out.txt"]
    );
    assert_eq!(plan.signal_fd, Some(6));
    let holders: Vec<(String, bool)> =
        plan.placeholders.iter().map(|p| (p.path.to_string(), p.dir)).collect();
    assert_eq!(
        holders,
        [("/home/u/proj/.bashrc".to_owned(), false), ("/home/u/proj/.vscode".to_owned(), true)]
    );
}

#[test]
fn nesting_anchor_in_grant_project_in_tmp_and_file_anchor() {
    let mut p = policy();
    // The project lives under /tmp (private tmp on), holds a denied `secrets` dir with one
    // readable exception, and a denied file in the home directory.
    p.project_dir = abs("/tmp/proj");
    p.write = vec![WriteGrant {
        path: abs("/tmp/proj"),
        kind: FileKind::Dir,
        origin: Origin::flag("--allow-write"),
    }];
    p.read_deny = vec![
        DenyAnchor {
            path: abs("/tmp/proj/secrets"),
            kind: Some(FileKind::Dir),
            exceptions: vec![Exception {
                path: abs("/tmp/proj/secrets/public"),
                kind: FileKind::Dir,
                writable: false,
            }],
            origin: Origin::flag("--deny-read"),
        },
        DenyAnchor {
            path: abs("/home/u/.git-credentials"),
            kind: Some(FileKind::File),
            exceptions: vec![],
            origin: Origin::default_key("deny.read[1]"),
        },
        DenyAnchor {
            path: abs("/home/u/.nothing"),
            kind: None,
            exceptions: vec![],
            origin: Origin::flag("--deny-read"),
        },
    ];
    p.protected = vec![ProtectedPath {
        path: abs("/tmp/proj/secrets/.git/hooks"),
        rule: ".git/hooks".into(),
        state: ProtectedState::Exists { kind: FileKind::Dir },
    }];
    p.pinned = vec![];
    check(
        &p,
        &facts(),
        expect![[r#"
            --unshare-all
            --unshare-user
            --disable-userns
            --as-pid-1
            --die-with-parent
            --new-session
            --cap-drop ALL
            --cap-add CAP_SYS_ADMIN
            --cap-add CAP_SETPCAP
            --ro-bind / /
            --dev /dev
            --proc /proc
            --tmpfs /run/user/1000/paddock
            --tmpfs /tmp
            --bind /tmp/proj /tmp/proj
            --tmpfs /tmp/proj/secrets
            --ro-bind /tmp/proj/secrets/public /tmp/proj/secrets/public
            --remount-ro /tmp/proj/secrets
            --ro-bind /home/u/.cargo/bin/paddock /dev/.paddock-supervisor
            (inner-mount mask /home/u/.git-credentials)
            (inner-mount empty-dir /home/u/.nothing)
        "#]],
    );
}

#[test]
fn tmp_granted_network_on_unix_sockets_and_root_without_userns() {
    let mut p = policy();
    p.private_tmp = false;
    p.write.push(WriteGrant {
        path: abs("/tmp"),
        kind: FileKind::Dir,
        origin: Origin::flag("--allow-write"),
    });
    p.network = NetworkPolicy::On;
    p.unix_sockets = UnixSockets::All;
    p.protected.clear();
    p.pinned.clear();
    let mut f = facts();
    f.user_namespaces = false;
    f.uid = 0;
    let plan = LinuxBwrap.plan(&p, &task(), &f).unwrap();
    assert!(plan.diagnostics.iter().any(|d| d.contains("no user namespace")));
    let sup = plan.payloads.iter().find(|p| p.name == "supervisor").unwrap();
    assert!(String::from_utf8_lossy(&sup.bytes).contains("/run/user/1000/paddock/t1/tmp"));
    check(
        &p,
        &f,
        expect![[r#"
            --unshare-all
            --share-net
            --as-pid-1
            --die-with-parent
            --new-session
            --cap-drop ALL
            --cap-add CAP_SETPCAP
            --ro-bind / /
            --dev /dev
            --tmpfs /home/u
            --bind /home/u/proj /home/u/proj
            --proc /proc
            --tmpfs /run/user/1000/paddock
            --tmpfs /run/user/1000/paddock/t1/tmp
            --bind /tmp /tmp
            --remount-ro /home/u
            --ro-bind /home/u/.cargo/bin/paddock /dev/.paddock-supervisor
        "#]],
    );
}

#[test]
fn refuses_what_it_cannot_enforce() {
    let refused =
        |p: ResolvedPolicy, f: HostFacts| LinuxBwrap.plan(&p, &task(), &f).unwrap_err().to_string();
    let mut p = policy();
    p.local_ports = vec![8080];
    p.host_ports = vec![8080];
    assert!(refused(p, facts()).contains("port 8080 is in both"));
    let mut f = facts();
    f.bwrap = None;
    assert!(refused(policy(), f).contains("apt install bubblewrap"));
    let mut f = facts();
    f.fresh_proc = false;
    assert!(refused(policy(), f).contains("weaker-when-nested"));
    let mut f = facts();
    f.user_namespaces = false;
    assert!(refused(policy(), f).contains("unprivileged_userns_clone"));
    // Without user namespaces an unprivileged bwrap cannot mount a fresh /proc either: the
    // refusal names the cause, not the symptom (found by the container matrix, no-userns).
    let mut f = facts();
    f.user_namespaces = false;
    f.fresh_proc = false;
    let why = refused(policy(), f);
    assert!(why.contains("user namespaces are not available"), "{why}");
    // With a bubblewrap older than 0.8 the probe's --disable-userns is what failed: the
    // refusal names the version and the upgrade (found by the matrix, old-bwrap).
    let mut f = facts();
    f.user_namespaces = false;
    f.bwrap_version = Some((0, 4, 1));
    let why = refused(policy(), f);
    assert!(why.contains("bubblewrap 0.4.1 is too old") && why.contains("0.8.0"), "{why}");
}

#[test]
fn weaker_when_nested_masks_proc_and_says_so() {
    let mut p = policy();
    p.weaker_when_nested = true;
    let mut f = facts();
    f.fresh_proc = false;
    let plan = LinuxBwrap.plan(&p, &task(), &f).unwrap();
    assert!(plan.diagnostics.iter().any(|d| d.starts_with("weaker: no fresh /proc")));
    let args = bwrap_args(&p, &f);
    assert!(args.contains("--tmpfs /proc\n"), "{args}");
    assert!(
        !args.contains("--proc")
            && !args.contains("--bind /proc")
            && !args.contains("--ro-bind /proc")
    );
}

#[test]
fn filter_rules_without_unix_sockets() {
    expect![[r#"
        prelude: foreign arch -> kill; nr >= 0x40000000 (x32) -> EPERM
        prelude: nr > 466 -> ENOSYS
        socket: EPERM when (arg0 != 0x2 && arg0 != 0xa && arg0 != 0x10) || (arg0 == 0x10 && arg2 != 0x0)
        socketpair: EPERM when (arg0 == 0x1 && arg1 & 0xf == 0x2)
        ioctl: EPERM when (arg1 == 0x5412) || (arg1 == 0x541c)
        clone: EPERM when (arg0 & 0x20000 == 0x20000) || (arg0 & 0x2000000 == 0x2000000) || (arg0 & 0x4000000 == 0x4000000) || (arg0 & 0x8000000 == 0x8000000) || (arg0 & 0x10000000 == 0x10000000) || (arg0 & 0x20000000 == 0x20000000) || (arg0 & 0x40000000 == 0x40000000)
        clone3: ENOSYS
        io_uring_setup: EPERM
        io_uring_enter: EPERM
        io_uring_register: EPERM
        keyctl: EPERM
        add_key: EPERM
        request_key: EPERM
        bpf: EPERM
        perf_event_open: EPERM
        userfaultfd: EPERM
        mount: EPERM
        umount2: EPERM
        pivot_root: EPERM
        chroot: EPERM
        fsopen: EPERM
        fsconfig: EPERM
        fsmount: EPERM
        fspick: EPERM
        move_mount: EPERM
        open_tree: EPERM
        mount_setattr: EPERM
        unshare: EPERM
        setns: EPERM
        kexec_load: EPERM
        kexec_file_load: EPERM
        init_module: EPERM
        finit_module: EPERM
        delete_module: EPERM
        default: allow
    "#]]
    .assert_eq(&seccomp::render(&seccomp::rules(FilterOptions { unix_sockets: false, unix_sockets_notified: false, unix_socket_paths: false })));
}

#[test]
fn filter_rules_with_unix_sockets() {
    let text = seccomp::render(&seccomp::rules(FilterOptions {
        unix_sockets: true,
        unix_sockets_notified: false,
        unix_socket_paths: false,
    }));
    let head: Vec<&str> = text.lines().take(4).collect();
    expect![[r#"
        [
            "prelude: foreign arch -> kill; nr >= 0x40000000 (x32) -> EPERM",
            "prelude: nr > 466 -> ENOSYS",
            "socket: EPERM when (arg0 != 0x2 && arg0 != 0xa && arg0 != 0x10 && arg0 != 0x1) || (arg0 == 0x10 && arg2 != 0x0)",
            "ioctl: EPERM when (arg1 == 0x5412) || (arg1 == 0x541c)",
        ]
    "#]]
    .assert_debug_eq(&head);
}

#[cfg(target_os = "linux")]
#[test]
fn every_rule_has_a_syscall_number_here() {
    for rule in seccomp::rules(FilterOptions {
        unix_sockets: false,
        unix_sockets_notified: false,
        unix_socket_paths: false,
    }) {
        assert!(seccomp::syscall_nr(rule.name).is_some(), "{} has no number", rule.name);
    }
    let bpf = seccomp::compile(&seccomp::rules(FilterOptions {
        unix_sockets: false,
        unix_sockets_notified: false,
        unix_socket_paths: false,
    }))
    .unwrap();
    assert_eq!(bpf.len() % 8, 0);
}

/// An observe-mode plan: the default policy plus a nested anchor (`~/.ssh`, its own `a1`
/// node in `~`), a read-only file exception deep under `~`, a write grant under `~` outside
/// any exception, and a file anchor (still the masked file).
fn observe_plan() -> paddock_policy::SpawnPlan {
    let mut p = policy();
    p.read_deny[0].exceptions.push(Exception {
        path: abs("/home/u/.config/git/config"),
        kind: FileKind::File,
        writable: false,
    });
    p.read_deny.push(DenyAnchor {
        path: abs("/home/u/.ssh"),
        kind: Some(FileKind::Dir),
        exceptions: vec![Exception {
            path: abs("/home/u/.ssh/known_hosts"),
            kind: FileKind::File,
            writable: false,
        }],
        origin: Origin::flag("--deny-read"),
    });
    p.read_deny.push(DenyAnchor {
        path: abs("/home/u/.netrc"),
        kind: Some(FileKind::File),
        exceptions: vec![],
        origin: Origin::flag("--deny-read"),
    });
    // Listed twice: one `a{i}` for it.
    p.read_deny.push(p.read_deny[0].clone());
    p.write.push(WriteGrant {
        path: abs("/home/u/.cache/tool"),
        kind: FileKind::Dir,
        origin: Origin::flag("--allow-write"),
    });
    let mut t = task();
    t.observe = true;
    LinuxBwrap.plan(&p, &t, &facts()).unwrap()
}

#[test]
fn observe_mode_binds_the_observer_over_directory_anchors() {
    let plan = observe_plan();
    let out = args_text(&plan);
    expect![[r#"
        --unshare-all
        --unshare-user
        --disable-userns
        --as-pid-1
        --die-with-parent
        --new-session
        --cap-drop ALL
        --cap-add CAP_SYS_ADMIN
        --cap-add CAP_SETPCAP
        --ro-bind / /
        --dev /dev
        --bind /run/user/1000/paddock/t1/observe/a0 /home/u
        --bind /home/u/.cache/tool /home/u/.cache/tool
        --ro-bind /home/u/.config/git/config /home/u/.config/git/config
        --ro-bind /run/user/1000/paddock/t1/observe/f0 /home/u/.netrc
        --bind /run/user/1000/paddock/t1/observe/a1 /home/u/.ssh
        --ro-bind /home/u/.ssh/known_hosts /home/u/.ssh/known_hosts
        --bind /home/u/proj /home/u/proj
        --proc /proc
        --tmpfs /run/user/1000/paddock
        --tmpfs /tmp
        --ro-bind /home/u/.cargo/bin/paddock /dev/.paddock-supervisor
        (inner-mount rw /home/u/proj/.git)
        (inner-mount ro /home/u/proj/.bashrc)
        (inner-mount ro /home/u/proj/.git/config)
        (inner-mount ro /home/u/proj/.git/hooks)
        (inner-mount ro /home/u/proj/.vscode)
    "#]]
    .assert_eq(&out);
    let observer = serde_json::to_string_pretty(&plan.observer).unwrap();
    expect![[r#"
        {
          "mount-dir": "/run/user/1000/paddock/t1/observe",
          "anchors": [
            {
              "path": "/home/u",
              "nodes": [
                {
                  "rel": ".cache",
                  "dir": true
                },
                {
                  "rel": ".cache/tool",
                  "dir": true
                },
                {
                  "rel": ".config",
                  "dir": true
                },
                {
                  "rel": ".config/git",
                  "dir": true
                },
                {
                  "rel": ".config/git/config",
                  "dir": false
                },
                {
                  "rel": ".netrc",
                  "dir": false
                },
                {
                  "rel": ".ssh",
                  "dir": true
                },
                {
                  "rel": "proj",
                  "dir": true
                }
              ]
            },
            {
              "path": "/home/u/.ssh",
              "nodes": [
                {
                  "rel": "known_hosts",
                  "dir": false
                }
              ]
            }
          ],
          "files": [
            "/home/u/.netrc"
          ],
          "record-fd": 7
        }"#]]
    .assert_eq(&observer);
}

#[test]
fn observe_mode_without_anchors_still_has_the_record_fd() {
    let mut p = policy();
    p.read_deny.clear();
    let mut t = task();
    t.observe = true;
    let plan = LinuxBwrap.plan(&p, &t, &facts()).unwrap();
    let observer = plan.observer.expect("an observer plan whenever the task observes");
    assert!(observer.anchors.is_empty());
    assert_eq!(observer.record_fd, crate::RECORD_FD);
    assert_eq!(observer.mount_dir, abs("/run/user/1000/paddock/t1/observe"));
    assert!(LinuxBwrap.plan(&p, &task(), &facts()).unwrap().observer.is_none());
}

#[test]
fn a_path_grant_binds_its_socket_passes_it_to_the_supervisor_and_keeps_datagrams_out() {
    let mut p = policy();
    p.unix_sockets = UnixSockets::Paths {
        sockets: vec![paddock_policy::SocketPath {
            declared: abs("/var/run/docker.sock"),
            resolved: abs("/run/docker.sock"),
        }],
    };
    for observe in [false, true] {
        let plan = LinuxBwrap.plan(&p, &Task { observe, ..task() }, &facts()).unwrap();
        let args = args_text(&plan);
        assert!(args.contains("--ro-bind-try /run/docker.sock /run/docker.sock\n"), "{args}");
        let sup = plan.payloads.iter().find(|p| p.name == "supervisor").unwrap();
        let payload = SupervisorPayload::from_bytes(&sup.bytes, 4).unwrap();
        assert_eq!(payload.unix_socket_grants.len(), 1);
        assert_eq!(payload.unix_socket_grants[0].resolved.0, "/run/docker.sock");
        assert_eq!(payload.unix_socket_grants[0].declared.0, "/var/run/docker.sock");
        // socket(AF_UNIX) is the main filter's (streams only), never refused by the notifier.
        assert!(!payload.refuse_unix_sockets && !payload.unix_abstract_shared);
        for observed in [false, true] {
            assert!(
                crate::nolibc::encode(&payload, observed).is_none(),
                "unix sockets granted by path stay with paddock-supervisor"
            );
        }
    }
    let opts = crate::seccomp_query::options_for(&p, false);
    assert!(opts.unix_socket_paths && !opts.unix_sockets && !opts.unix_sockets_notified);
    p.network = NetworkPolicy::On;
    let plan = LinuxBwrap.plan(&p, &task(), &facts()).unwrap();
    let sup = plan.payloads.iter().find(|p| p.name == "supervisor").unwrap();
    assert!(SupervisorPayload::from_bytes(&sup.bytes, 4).unwrap().unix_abstract_shared);
    // Nested without a fresh /proc (weaker mode): refused, never run without the decisions.
    p.weaker_when_nested = true;
    let e = LinuxBwrap
        .plan(&p, &task(), &HostFacts { fresh_proc: false, ..facts() })
        .unwrap_err()
        .to_string();
    assert!(e.contains("allow.unix-sockets") && e.contains("fresh /proc"), "{e}");
}

/// SYM-03: the paths bound onto themselves are re-verified by the supervisor; placeholders
/// the runner makes, `/` and what a later mount covers are not.
#[test]
fn the_paths_bound_onto_themselves_are_listed_for_the_supervisor_to_verify() {
    let plan = LinuxBwrap.plan(&policy(), &task(), &facts()).unwrap();
    let request = plan.payloads.iter().find(|p| p.fd == crate::mount_ids::MOUNT_IDS_FD).unwrap();
    assert_eq!(request.name, crate::mount_ids::PAYLOAD_NAME);
    let paths = crate::mount_ids::parse_request(&request.bytes).unwrap();
    assert_eq!(
        paths,
        [
            "/home/u/proj",
            "/home/u/proj/.git",
            "/home/u/proj/.git/config",
            "/home/u/proj/.git/hooks"
        ]
        .map(std::ffi::OsString::from)
    );
    let sup = plan.payloads.iter().find(|p| p.fd == crate::SUPERVISOR_FD).unwrap();
    let sup = crate::payload::SupervisorPayload::from_bytes(&sup.bytes, sup.fd).unwrap();
    assert_eq!(sup.mount_ids_fd, Some(crate::mount_ids::MOUNT_IDS_FD));

    // A grant a later mount of something else covers (a deny anchor on it) is not listed.
    use crate::ops::BwrapOp;
    let p = |s: &str| abs(s);
    let ops = [
        BwrapOp::RoBind { src: p("/"), dest: p("/") },
        BwrapOp::Bind { src: p("/w/a"), dest: p("/w/a") },
        BwrapOp::Bind { src: p("/w/b"), dest: p("/w/b") },
        BwrapOp::Bind { src: p("/w/c"), dest: p("/w/c") },
        BwrapOp::Tmpfs { dest: p("/w/b") },
        BwrapOp::RoBind { src: p("/w/c"), dest: p("/w/c") },
        BwrapOp::RemountRo { dest: p("/w/c") },
        BwrapOp::RoBind { src: p("/w/a/made"), dest: p("/w/a/made") },
        BwrapOp::RoBind { src: p("/run/masked"), dest: p("/w/a/secret") },
        // Read-only and under nothing writable: no task can swap it.
        BwrapOp::RoBind { src: p("/usr"), dest: p("/usr") },
    ];
    assert_eq!(crate::ops::verified_binds(&ops, &[p("/w/a/made")]), [p("/w/a"), p("/w/c")]);
}

/// bubblewrap 0.4 cannot bind a socket onto a socket the sandbox shows: refused with the
/// upgrade, unless a tmpfs of the plan (the private `/tmp`) covers it.
#[test]
fn an_old_bwrap_refuses_a_visible_socket_grant_with_the_upgrade() {
    let grant = |path: &str| {
        let mut p = policy();
        p.unix_sockets = UnixSockets::Paths {
            sockets: vec![paddock_policy::SocketPath { declared: abs(path), resolved: abs(path) }],
        };
        p
    };
    let old = HostFacts { bwrap_version: Some((0, 4, 0)), ..facts() };
    let err = LinuxBwrap.plan(&grant("/run/user/1000/agent.sock"), &task(), &old).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("0.5.0") && text.contains("/run/user/1000/agent.sock"), "{text}");
    // Under the private /tmp, bwrap makes a new mount point: it works.
    assert!(LinuxBwrap.plan(&grant("/tmp/agent.sock"), &task(), &old).is_ok());
    assert!(LinuxBwrap.plan(&grant("/run/user/1000/agent.sock"), &task(), &facts()).is_ok());
}

/// A plan of bwrap with these payloads and nothing else: the fixture of tests that rewrite
/// or read a plan's payloads.
pub(crate) fn bare_plan(payloads: Vec<paddock_policy::Payload>) -> paddock_policy::SpawnPlan {
    paddock_policy::SpawnPlan {
        backend: crate::BACKEND_NAME,
        program: abs("/usr/bin/bwrap"),
        argv: Vec::new(),
        env: Vec::new(),
        cwd: AbsPathBuf::root(),
        payloads,
        signal_fd: None,
        bridges: Vec::new(),
        placeholders: Vec::new(),
        diagnostics: Vec::new(),
        observer: None,
        link_mounts: Vec::new(),
        self_mounts: Vec::new(),
        device_fds: None,
        file_fds: Vec::new(),
        grant_clones: Vec::new(),
    }
}

#[test]
fn the_supervisor_makes_dev_from_clones_only_where_the_runner_clones_and_it_mounts() {
    let p = policy();
    let mut f = facts();
    f.clone_mounts = true;
    let plan = LinuxBwrap.plan(&p, &task(), &f).unwrap();
    let args = args_text(&plan);
    assert!(args.contains("--tmpfs /dev\n") && !args.contains("--dev "), "{args}");
    assert!(args.contains("--cap-add CAP_SYS_ADMIN"), "{args}");
    assert_eq!(plan.device_fds, Some(crate::DEVICES_FD));
    let payload = plan.payloads.iter().find(|p| p.name == "supervisor").unwrap();
    let payload = crate::payload::SupervisorPayload::from_bytes(&payload.bytes, 4).unwrap();
    let first = &payload.inner_mounts[0];
    assert!(first.devices && first.path.0 == "/dev", "made before any other inner mount");
    assert_eq!(payload.inner_mounts.iter().filter(|m| m.devices).count(), 1);
    // Without user namespaces the supervisor mounts nothing: bwrap's `--dev`, no clones.
    f.user_namespaces = false;
    f.uid = 0;
    let plan = LinuxBwrap.plan(&p, &task(), &f).unwrap();
    assert!(args_text(&plan).contains("--dev /dev\n"));
    assert_eq!(plan.device_fds, None);
    // Nor where the runner cannot clone.
    let plan = LinuxBwrap.plan(&p, &task(), &facts()).unwrap();
    assert!(args_text(&plan).contains("--dev /dev\n"));
    assert_eq!(plan.device_fds, None);
}

#[test]
fn the_supervisor_attaches_the_project_from_the_runners_clone_where_it_makes_dev() {
    let p = policy();
    let mut f = facts();
    f.clone_mounts = true;
    let plan = LinuxBwrap.plan(&p, &task(), &f).unwrap();
    let args = args_text(&plan);
    // bwrap makes the directory in its tmpfs over the hidden home, and binds nothing there.
    assert!(args.contains("--dir /home/u/proj\n"), "{args}");
    assert!(!args.contains("--bind /home/u/proj"), "{args}");
    let paths: Vec<&AbsPathBuf> = plan.grant_clones.iter().map(|g| &g.path).collect();
    assert_eq!(paths, [&abs("/home/u/proj")]);
    // The protected paths below it, which the runner may make in its clone.
    let within: Vec<String> =
        plan.grant_clones[0].within.iter().map(|m| m.path.to_string()).collect();
    assert!(!within.is_empty() && within.iter().all(|p| p.starts_with("/home/u/proj/")));
    let payload = plan.payloads.iter().find(|p| p.name == "supervisor").unwrap();
    let payload = crate::payload::SupervisorPayload::from_bytes(&payload.bytes, 4).unwrap();
    // Attached right after the devices, before the protected paths inside it.
    let second = &payload.inner_mounts[1];
    assert!(second.grant_clone && second.path.0 == "/home/u/proj", "{:?}", payload.inner_mounts);
    assert_eq!(payload.inner_mounts.iter().filter(|m| m.grant_clone).count(), 1);
    // Each one below it the runner may make in its clone, and the supervisor then skips.
    assert!(payload.inner_mounts[2..].iter().all(|m| m.in_grant_clone));
    assert!(!payload.inner_mounts[..2].iter().any(|m| m.in_grant_clone));
    assert!(
        payload.inner_mounts[2..].iter().all(|m| m
            .path
            .0
            .as_encoded_bytes()
            .starts_with(b"/home/u/proj/"))
    );
    // And checked once attached, as bwrap's bind was (SYM-03).
    let ids = plan.payloads.iter().find(|p| p.name == crate::mount_ids::PAYLOAD_NAME).unwrap();
    assert!(ids.bytes.windows(13).any(|w| w == b"/home/u/proj\0"));
    // Where the runner cannot clone, bwrap binds it.
    let plan = LinuxBwrap.plan(&p, &task(), &facts()).unwrap();
    assert!(args_text(&plan).contains("--bind /home/u/proj /home/u/proj\n"));
    assert!(plan.grant_clones.is_empty());
    // Nor where the runner's child mounts a protected link inside it, which bwrap's
    // recursive bind carries from the child's namespace and the runner's clone would not.
    let mut linked = policy();
    linked.protected.push(ProtectedPath {
        path: abs("/home/u/proj/.envrc"),
        rule: ".envrc".into(),
        state: ProtectedState::Exists { kind: FileKind::Symlink },
    });
    let plan = LinuxBwrap.plan(&linked, &task(), &f).unwrap();
    assert_eq!(plan.link_mounts, [abs("/home/u/proj/.envrc")]);
    assert!(plan.grant_clones.is_empty(), "{:?}", plan.grant_clones);
    assert!(args_text(&plan).contains("--bind /home/u/proj /home/u/proj\n"));
}
