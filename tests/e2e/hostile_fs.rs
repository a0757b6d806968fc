//! Hostile filesystem cases (security-cases groups FSR, FSW, SYM): odd spellings, /proc magic
//! links, inherited directory fds, persistence files under a home grant, ancestors of
//! read-only paths, shared scratch, device files and planted symlinks. Each asserts on the
//! probe's JSON and on the host afterwards.

use std::path::Path;

use crate::harness::*;

const EXDEV: i64 = 18;

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// A sorted listing of `dir` (empty when it does not exist).
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn odd_spellings_do_not_reach_secrets_fsr02() {
    if !require_os_sandbox() {
        return;
    }
    let sc = Scratch::new("fsr02");
    std::fs::create_dir(sc.project.join("sub")).unwrap();
    let h = s(&sc.home);
    let p = s(&sc.project);
    let reads = [
        format!("{p}/sub/../../.ssh/id_canary"),
        format!("/{h}///.ssh/./id_canary"),
        format!("{p}/./../.aws/../.ssh/id_canary"),
        format!("{p}/../../home/.ssh/id_canary"),
    ];
    let mut ops: Vec<String> = reads.iter().map(|r| format!("file:{r}")).collect();
    ops.push(format!("ls:{p}/.."));
    let ops: Vec<&str> = ops.iter().map(String::as_str).collect();
    let (o, out) = sc.probe(&["--deny-read", "~"], &ops);
    for r in &reads {
        assert_denied(&o, "file", r, &[ENOENT, EACCES]);
    }
    assert_eq!(
        assert_allowed(&o, "ls", &format!("{p}/..")),
        "proj",
        "the home shows only the way in"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains(CANARY));
}

#[test]
fn proc_magic_links_do_not_reach_secrets_fsr04() {
    if !require_os_sandbox() {
        return;
    }
    let sc = Scratch::new("fsr04");
    let h = s(&sc.home);
    let reads = [
        format!("/proc/self/root{h}/.ssh/id_canary"),
        format!("/proc/1/root{h}/.ssh/id_canary"),
        format!("/proc/thread-self/root{h}/.ssh/id_canary"),
        "/proc/self/cwd/../.ssh/id_canary".to_owned(),
        format!("/proc/1/cwd/{h}/.aws/credentials"),
    ];
    let mut ops: Vec<String> = reads.iter().map(|r| format!("file:{r}")).collect();
    ops.push("ls:/proc".to_owned());
    // pid 1 of an observed run executes the notifications' server after the task's first
    // millisecond, and its command line reads empty while it does: read once that is over.
    ops.push("sleep:100".to_owned());
    ops.push("file:/proc/1/cmdline".to_owned());
    let ops: Vec<&str> = ops.iter().map(String::as_str).collect();
    let (o, out) = sc.probe(&["--deny-read", "~"], &ops);
    for r in &reads {
        assert_denied(&o, "file", r, &[ENOENT, EACCES]);
    }
    let pids: Vec<String> = assert_allowed(&o, "ls", "/proc")
        .split(',')
        .filter(|n| n.chars().all(|c| c.is_ascii_digit()))
        .map(str::to_owned)
        .collect();
    assert!(pids.len() <= 4, "host pids are visible: {pids:?}");
    let init = assert_allowed(&o, "file", "/proc/1/cmdline");
    assert!(init.contains("paddock"), "pid 1 is not the sandbox's supervisor: {init:?}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains(CANARY));
}

#[test]
fn weaker_when_nested_never_exposes_the_host_proc_fsr05() {
    if !require_os_sandbox() {
        return;
    }
    let sc = Scratch::new("fsr05");
    std::fs::write(sc.project.join("paddock.toml"), "weaker-when-nested = true\n").unwrap();
    let marker = format!("{}", 810_000 + std::process::id() % 1000);
    let mut host = std::process::Command::new("sleep").arg(&marker).spawn().unwrap();
    let h = s(&sc.home);
    let script = format!(
        "ls /proc | grep -c '^[0-9]'; for d in /proc/[0-9]*; do cat $d/cmdline; echo; \
         cat $d/cwd/../.ssh/id_canary $d/root{h}/.ssh/id_canary; done 2>/dev/null"
    );
    let out = sc.paddock().args(["run", "--", "sh", "-c", &script]).output().unwrap();
    host.kill().unwrap();
    host.wait().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    // pid 1: the supervisor, or the notifier it became at the task's first notified call.
    let supervised = text.contains("__supervise") || text.contains("__serve-notify");
    assert!(supervised, "the task did not run: {out:?}");
    assert!(!text.contains(CANARY), "a secret through /proc: {text}");
    assert!(!text.contains(&marker), "a host process is visible: {text}");
    let count: u32 = text.lines().next().unwrap_or("99").trim().parse().unwrap_or(99);
    assert!(count <= 5, "more pids than the sandbox's own: {text}");
}

/// FSR-05 in the mode it is about: a host where no fresh `/proc` can be mounted, as in a
/// container that masks part of `/proc` (a tmpfs over `/proc/acpi`: the kernel then refuses
/// a new procfs in a user namespace, as Docker's masked paths make it do). paddock must run
/// the task only with `weaker-when-nested = true`, with an empty `/proc`, never the host's.
#[test]
fn weaker_when_nested_on_a_host_without_a_fresh_proc_masks_proc_fsr05() {
    if !require_os_sandbox() || !require_masking_proc() {
        return;
    }
    let sc = Scratch::new("fsr05m");
    let marker = format!("{}", 820_000 + std::process::id() % 1000);
    let mut host = std::process::Command::new("sleep").arg(&marker).spawn().unwrap();
    let h = s(&sc.home);
    let script = format!(
        "ls /proc | grep -c '^[0-9]'; ls -A /proc | wc -l; for d in /proc/[0-9]*; do cat $d/cmdline; echo; \
         cat $d/cwd/../.ssh/id_canary $d/root{h}/.ssh/id_canary; done 2>/dev/null; echo ran"
    );
    let masked_run = |config: &str| {
        std::fs::write(sc.project.join("paddock.toml"), config).unwrap();
        without_fresh_proc(&sc, &["run", "--", "sh", "-c", &script])
    };
    // Without the opt-in: refused before anything runs, saying why and what to set.
    let out = masked_run("");
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("ran"), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("weaker-when-nested"), "{out:?}");
    // With it: the task runs with an empty /proc and says what is weakened.
    let out = masked_run("weaker-when-nested = true\n");
    host.kill().unwrap();
    host.wait().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("ran"), "the task did not run: {out:?}");
    assert!(stderr.contains("weaker"), "the weakened walls are not named: {stderr}");
    assert!(!text.contains(CANARY), "a secret through /proc: {text}");
    assert!(!text.contains(&marker), "a host process is visible: {text}");
    let mut counts = text.lines().take(2).map(|l| l.trim().parse::<u32>().unwrap_or(99));
    assert_eq!(counts.next(), Some(0), "pids listed in the masked /proc: {text}");
    assert_eq!(counts.next(), Some(0), "the masked /proc is not empty: {text}");
}

#[test]
fn inherited_directory_fds_do_not_reach_the_task_fsr06() {
    if !require_os_sandbox() {
        return;
    }
    use std::os::fd::AsRawFd;
    let sc = Scratch::new("fsr06d");
    let dir = std::fs::File::open(sc.home.join(".ssh")).unwrap();
    let file = std::fs::File::open(sc.home.join(".aws/credentials")).unwrap();
    let (d, f) = (dir.as_raw_fd(), file.as_raw_fd());
    for fd in [d, f] {
        // SAFETY: clearing FD_CLOEXEC on descriptors we own: a careless parent.
        unsafe { libc::fcntl(fd, libc::F_SETFD, 0) };
    }
    let (o, out) = sc.probe(
        &[],
        &[
            &format!("file:/proc/self/fd/{d}/id_canary"),
            &format!("file:/proc/self/fd/{f}"),
            "fdlinks",
        ],
    );
    drop((dir, file));
    assert_denied(&o, "file", &format!("/proc/self/fd/{d}/id_canary"), &[ENOENT]);
    assert_denied(&o, "file", &format!("/proc/self/fd/{f}"), &[ENOENT]);
    let links = assert_allowed(&o, "fdlinks", "");
    assert!(!links.contains(".ssh") && !links.contains(".aws"), "{links}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains(CANARY));
}

#[test]
fn writes_outside_the_project_fail_everywhere_fsw01() {
    if !require_os_sandbox() {
        return;
    }
    let sc = Scratch::new("fsw01h");
    let pid = std::process::id();
    let targets = [
        format!("/var/tmp/paddock-pwn-{pid}"),
        format!("{}/../pwn", s(&sc.project)),
        format!("{}/pwn", s(&sc.root)),
        "/root/paddock-pwn".to_owned(),
        "/home/paddock-pwn".to_owned(),
    ];
    let ops: Vec<String> = targets.iter().map(|t| format!("write:{t}")).collect();
    let mut ops: Vec<&str> = ops.iter().map(String::as_str).collect();
    let shm = format!("/dev/shm/paddock-pwn-{pid}");
    let tmp = format!("/tmp/paddock-pwn-{pid}");
    let shm_op = format!("write:{shm}");
    let tmp_op = format!("write:{tmp}");
    ops.push(&shm_op);
    ops.push(&tmp_op);
    let (o, _) = sc.probe(&[], &ops);
    for t in &targets {
        assert_denied(&o, "write", t, &[EROFS, EACCES, ENOENT]);
        assert!(!Path::new(t).exists(), "{t} was created on the host");
    }
    // /tmp and /dev/shm are private to the task: allowed inside, absent on the host.
    for t in [&shm, &tmp] {
        let ob = obs(&o, "write", t);
        assert!(
            ob["ok"] == true || [EROFS, EACCES, ENOENT].contains(&ob["errno"].as_i64().unwrap()),
            "{ob}"
        );
        assert!(!Path::new(t).exists(), "{t} reached the host");
    }
}

/// Shell start-up and persistence files under `~` (FSW-02, FSW-08).
const PERSISTENCE: &[&str] = &[
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".inputrc",
    ".config/fish/config.fish",
    ".gitconfig",
    ".config/git/config",
    ".ssh/authorized_keys",
    ".ssh/config",
    ".config/autostart/x.desktop",
    ".config/systemd/user/x.service",
    ".local/bin/git",
    ".npmrc",
    ".pypirc",
    ".config/pip/pip.conf",
    ".cargo/config.toml",
    ".cargo/config",
    ".mcp.json",
    ".claude/settings.json",
    ".codex/config.toml",
    ".vscode/tasks.json",
    ".idea/workspace.xml",
];

#[test]
fn a_home_grant_keeps_rc_and_persistence_files_read_only_fsw02_fsw08() {
    if !require_os_sandbox() {
        return;
    }
    let sc = Scratch::new("fsw08");
    // Half of them exist beforehand.
    for (i, rel) in PERSISTENCE.iter().enumerate() {
        if i % 2 == 0 {
            let f = sc.home.join(rel);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(&f, "original\n").unwrap();
        }
    }
    let before: Vec<bool> = PERSISTENCE.iter().map(|r| sc.home.join(r).exists()).collect();
    let mut script = String::new();
    for rel in PERSISTENCE {
        let dir = Path::new(rel).parent().unwrap().display().to_string();
        script.push_str(&format!(
            "mkdir -p \"$HOME/{dir}\" 2>/dev/null; echo 'touch /tmp/RC_PWN' >> \"$HOME/{rel}\" \
             2>/dev/null; echo \"{rel} rc=$?\"\n"
        ));
    }
    let out = sc
        .paddock()
        .args(["run", "--allow-write", "~", "--allow-write-home", "--", "sh", "-c", &script])
        .output();
    let out = out.unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for (rel, existed) in PERSISTENCE.iter().zip(before) {
        assert!(
            text.contains(&format!("{rel} rc=1")) || text.contains(&format!("{rel} rc=2")),
            "{rel} was writable: {text}"
        );
        let f = sc.home.join(rel);
        if existed {
            assert_eq!(std::fs::read_to_string(&f).unwrap(), "original\n", "{rel} changed");
        } else {
            assert!(!f.exists(), "{rel} was created on the host");
        }
    }
    // The grant itself works.
    let ok = sc.home.join("notes.txt");
    let (o, _) =
        sc.probe(&["--allow-write", "~", "--allow-write-home"], &[&format!("write:{}", s(&ok))]);
    assert_allowed(&o, "write", &s(&ok));
}

#[test]
fn git_hooks_dir_cannot_be_replaced_fsw05() {
    if !require_os_sandbox() {
        return;
    }
    let sc = Scratch::new("fsw05h");
    std::fs::write(sc.project.join(".git/hooks/pre-commit.sample"), "sample").unwrap();
    let hooks = sc.project.join(".git/hooks");
    let moved = sc.project.join(".git/hooks.o");
    let gitfile = sc.project.join(".git");
    let (o, _) = sc.probe(
        &[],
        &[
            &format!("rename:{}={}", s(&hooks), s(&moved)),
            &format!("rename:{}={}", s(&sc.project.join(".git/config")), s(&moved)),
            &format!("write:{}", s(&gitfile)),
        ],
    );
    assert_denied(&o, "rename", &format!("{}={}", s(&hooks), s(&moved)), &[EBUSY, EACCES, EROFS]);
    assert_denied(
        &o,
        "rename",
        &format!("{}={}", s(&sc.project.join(".git/config")), s(&moved)),
        &[EBUSY, EACCES, EROFS],
    );
    assert_denied(&o, "write", &s(&gitfile), &[21, EBUSY, EACCES, EROFS]);
    assert!(hooks.is_dir() && !moved.exists() && gitfile.is_dir());
    assert_eq!(names(&hooks), ["pre-commit.sample"]);
}

#[test]
fn an_ancestor_of_a_read_only_path_cannot_be_renamed_fsw10() {
    if !require_os_sandbox() {
        return;
    }
    let sc = Scratch::new("fsw10");
    let c = sc.project.join("a/b/c");
    std::fs::create_dir_all(&c).unwrap();
    std::fs::write(c.join("f"), "original").unwrap();
    std::fs::write(sc.project.join("paddock.toml"), "[deny]\nwrite = [\"a/b/c\"]\n").unwrap();
    let a = sc.project.join("a");
    let a2 = sc.project.join("a2");
    let b = sc.project.join("a/b");
    let (o, out) = sc.probe(
        &[],
        &[
            &format!("rename:{}={}", s(&a), s(&a2)),
            &format!("rename:{}={}", s(&b), s(&sc.project.join("b2"))),
            &format!("write:{}", s(&c.join("f"))),
            &format!("write:{}", s(&c.join("new"))),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_denied(&o, "rename", &format!("{}={}", s(&a), s(&a2)), &[EBUSY, EACCES, EROFS]);
    assert_denied(
        &o,
        "rename",
        &format!("{}={}", s(&b), s(&sc.project.join("b2"))),
        &[EBUSY, EACCES, EROFS, EXDEV],
    );
    assert_denied(&o, "write", &s(&c.join("f")), &[EROFS, EACCES]);
    assert_denied(&o, "write", &s(&c.join("new")), &[EROFS, EACCES]);
    assert!(!a2.exists());
    assert_eq!(std::fs::read_to_string(c.join("f")).unwrap(), "original");
    assert_eq!(names(&c), ["f"]);
}

#[test]
fn scratch_space_is_private_per_task_fsw11() {
    if !require_os_sandbox() {
        return;
    }
    let sc = Scratch::new("fsw11h");
    let pid = std::process::id();
    let host_shm = format!("/dev/shm/paddock-host-canary-{pid}");
    std::fs::write(&host_shm, CANARY).unwrap();
    let a = format!(
        "echo x > /tmp/persist-{pid} && echo x > /dev/shm/persist-{pid} && mkfifo /tmp/ff-{pid} && echo made"
    );
    let out = sc.paddock().args(["run", "--", "sh", "-c", &a]).output().unwrap();
    let made = String::from_utf8_lossy(&out.stdout).contains("made");
    let (o, out2) = sc.probe(
        &[],
        &[
            &format!("read:/tmp/persist-{pid}"),
            &format!("read:/dev/shm/persist-{pid}"),
            &format!("open:/tmp/ff-{pid}"),
            "ls:/dev/shm",
            &format!("file:{host_shm}"),
        ],
    );
    let _ = std::fs::remove_file(&host_shm);
    assert!(made, "task A could not use its scratch space: {out:?}");
    assert_denied(&o, "read", &format!("/tmp/persist-{pid}"), &[ENOENT]);
    assert_denied(&o, "read", &format!("/dev/shm/persist-{pid}"), &[ENOENT]);
    assert_denied(&o, "open", &format!("/tmp/ff-{pid}"), &[ENOENT]);
    assert_eq!(assert_allowed(&o, "ls", "/dev/shm"), "", "the host's /dev/shm is visible");
    assert_denied(&o, "file", &host_shm, &[ENOENT]);
    assert!(!String::from_utf8_lossy(&out2.stdout).contains(CANARY));
    for p in
        [format!("/tmp/persist-{pid}"), format!("/dev/shm/persist-{pid}"), format!("/tmp/ff-{pid}")]
    {
        assert!(!Path::new(&p).exists(), "{p} reached the host");
    }
}

#[test]
fn editor_dirs_are_read_only_and_plain_project_files_are_not_fsw12() {
    if !require_os_sandbox() {
        return;
    }
    let sc = Scratch::new("fsw12");
    let p = &sc.project;
    // husky: the repository's hooks live in the project, named by core.hooksPath.
    std::fs::write(p.join(".git/config"), "[core]\n\thooksPath = .husky\n").unwrap();
    std::fs::create_dir(p.join(".husky")).unwrap();
    let (o, _) = sc.probe(
        &[],
        &[
            &format!("mkdir:{}", s(&p.join(".idea"))),
            &format!("mkdir:{}", s(&p.join(".vscode"))),
            &format!("write:{}", s(&p.join(".vscode/tasks.json"))),
            &format!("write:{}", s(&p.join(".envrc"))),
            &format!("write:{}", s(&p.join("Makefile"))),
            &format!("write:{}", s(&p.join(".husky/pre-commit"))),
        ],
    );
    assert_denied(&o, "write", &s(&p.join(".husky/pre-commit")), &[EROFS, EACCES]);
    assert!(!p.join(".husky/pre-commit").exists(), "a husky hook was planted");
    assert_denied(&o, "mkdir", &s(&p.join(".idea")), &[EROFS, EACCES, 17]);
    assert_denied(&o, "mkdir", &s(&p.join(".vscode")), &[EROFS, EACCES, 17]);
    assert_denied(&o, "write", &s(&p.join(".vscode/tasks.json")), &[EROFS, EACCES, ENOENT, 20]);
    assert_allowed(&o, "write", &s(&p.join(".envrc")));
    assert_allowed(&o, "write", &s(&p.join("Makefile")));
    assert!(!p.join(".idea").exists() && !p.join(".vscode").exists());
}

#[test]
fn a_task_on_the_runners_terminal_has_it_as_dev_console() {
    // bwrap's `--dev` binds the terminal its stdout is at `/dev/console`; the supervisor's
    // `/dev` (from the runner's clones) does the same, so that `tty` and `ttyname` work.
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("console");
    let inner = format!("{} run -- sh -c 'tty; ls -1 /dev'", paddock_bin().display());
    let out = match std::process::Command::new("script")
        .args(["-qec", &inner, "/dev/null"])
        .current_dir(&s.project)
        .env("HOME", &s.home)
        .env("PADDOCK_ITEMIZE", itemize_mode())
        .stdin(std::process::Stdio::null())
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            skip(format!("no `script` (util-linux) here: {e}"), None);
            return;
        }
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    // The terminal shows paddock's own notes too (root without user namespaces says so).
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    assert!(lines.contains(&"/dev/console"), "`tty` names another terminal, or none: {text}");
    assert!(lines.contains(&"console"), "{text}");
}

#[test]
fn dev_is_minimal_and_device_nodes_cannot_be_made_fsw13() {
    if !require_os_sandbox() {
        return;
    }
    let sc = Scratch::new("fsw13");
    let node = sc.project.join("x");
    let (o, _) = sc.probe(
        &[],
        &[
            "ls:/dev",
            &format!("mknod:{}", s(&node)),
            "mknod:/tmp/x",
            "open:/dev/kmsg",
            "read:/dev/sda",
            "read:/dev/vda",
            "open:/dev/console",
            "read:/dev/mem",
            "ls:/dev/shm",
        ],
    );
    let allowed = [
        ".paddock-supervisor",
        // strace, bound read-only when it runs inside the sandbox (`auto` without observers).
        ".paddock-strace",
        "core",
        "fd",
        "full",
        "null",
        "ptmx",
        "pts",
        "random",
        "shm",
        "stderr",
        "stdin",
        "stdout",
        "tty",
        "urandom",
        "zero",
    ];
    let listing = assert_allowed(&o, "ls", "/dev");
    for name in listing.split(',') {
        assert!(allowed.contains(&name), "unexpected /dev/{name} in {listing}");
    }
    assert_denied(&o, "mknod", &s(&node), &[EPERM]);
    assert_denied(&o, "mknod", "/tmp/x", &[EPERM]);
    for dev in ["/dev/kmsg", "/dev/console"] {
        assert_denied(&o, "open", dev, &[ENOENT, EACCES, EPERM]);
    }
    // Creating a plain file named like a device in the private /dev: see known_gaps FSW-13.
    for dev in ["/dev/sda", "/dev/vda", "/dev/mem"] {
        assert_denied(&o, "read", dev, &[ENOENT, EACCES, EPERM]);
    }
    assert_eq!(assert_allowed(&o, "ls", "/dev/shm"), "");
    assert!(!node.exists(), "a device node reached the project");
}

#[test]
fn symlinks_planted_by_a_task_grant_nothing_later_sym01() {
    if !require_os_sandbox() {
        return;
    }
    let sc = Scratch::new("sym01h");
    let script = format!("ln -sfn / rootlink && ln -sfn {} homelink && echo planted", s(&sc.home));
    let out = sc.paddock().args(["run", "--", "sh", "-c", &script]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("planted"), "{out:?}");
    let marker = s(&sc.home.join(".aws/credentials"));
    let cases: [&[&str]; 3] = [
        &["--allow-write", "rootlink/tmp"],
        &["--deny-read", "~", "--allow-read", "homelink"],
        &["--allow-write", "homelink"],
    ];
    for flags in cases {
        let out = sc
            .paddock()
            .arg("run")
            .args(flags)
            .args(["--", "sh", "-c"])
            .arg(format!(
                "touch rootlink/tmp/x homelink/pwn; cat homelink/.aws/credentials {marker}"
            ))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(125), "{flags:?}: {out:?}");
        let entry = flags[flags.len() - 1];
        assert!(String::from_utf8_lossy(&out.stderr).contains(entry), "{flags:?}: {out:?}");
        assert!(!String::from_utf8_lossy(&out.stdout).contains(CANARY));
    }
    assert!(!sc.home.join("pwn").exists() && !Path::new("/tmp/x").exists());
}

#[test]
fn symlinks_to_hidden_targets_do_not_resolve_sym02() {
    if !require_os_sandbox() {
        return;
    }
    let sc = Scratch::new("sym02");
    let h = s(&sc.home);
    let l1 = sc.project.join("l1");
    let l2 = sc.project.join("l2");
    let script = format!(
        "ln -s {h}/.ssh/id_canary l1; ln -s /proc/1/root{h}/.ssh l2; cat l1; ls l2; cat l2/id_canary; echo done"
    );
    let report = sc.root.join("report.json");
    let out = sc
        .paddock()
        .arg("run")
        .arg("--report")
        .arg(&report)
        .args(["--deny-read", "~", "--", "sh", "-c", &script])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("done"), "{out:?}");
    assert!(!text.contains(CANARY) && !text.contains("id_canary"), "{text}");
    // The links stay on the host, and nothing paddock did afterwards followed them.
    assert!(l1.symlink_metadata().unwrap().file_type().is_symlink());
    assert!(l2.symlink_metadata().unwrap().file_type().is_symlink());
    assert_eq!(std::fs::read_to_string(sc.home.join(".ssh/id_canary")).unwrap(), CANARY);
    assert_eq!(names(&sc.home.join(".ssh")), ["id_canary"]);
    assert!(!std::fs::read_to_string(&report).unwrap().contains(CANARY));
}

#[test]
fn symlinks_at_protected_names_are_not_followed_sym04() {
    if !require_os_sandbox() {
        return;
    }
    let sc = Scratch::new("sym04");
    let autostart = sc.home.join(".config/autostart");
    std::fs::create_dir_all(&autostart).unwrap();
    std::os::unix::fs::symlink(&autostart, sc.project.join(".vscode")).unwrap();
    std::os::unix::fs::symlink(sc.home.join(".ssh"), sc.project.join(".idea")).unwrap();
    let ssh_before = names(&sc.home.join(".ssh"));
    // A protected name that is a link degrades that one path: the run goes on with a note
    // naming each link, and nothing is written through them into their targets. (It failed
    // every run closed before: a task could plant such a link to deny every later run.)
    let out = sc
        .paddock()
        .args(["run", "--", "sh", "-c"])
        .arg(
            "mkdir .vscode/x; echo pwn > .vscode/tasks.json; echo key > .idea/authorized_keys; \
             echo ran",
        )
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("ran"), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(".vscode") && err.contains(".idea"), "the links are not named: {err}");
    assert!(names(&autostart).is_empty(), "something was created through .vscode");
    assert_eq!(names(&sc.home.join(".ssh")), ssh_before, "something was created through .idea");
}

/// Waits until `path` exists (a task says it runs), failing after 30 s.
fn await_file(path: &Path) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !path.exists() {
        assert!(std::time::Instant::now() < deadline, "{} never appeared", path.display());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Starts `paddock run -- TASK...` and returns once `placeholder` exists (the run made it).
fn run_until_it_exists(s: &Scratch, task: &[&str], placeholder: &Path) -> std::process::Child {
    let run = s
        .paddock()
        .args(["run", "--"])
        .args(task)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while !placeholder.exists() {
        assert!(started.elapsed().as_secs() < 30, "the run made no placeholder");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    run
}

#[test]
fn a_concurrent_run_keeps_the_placeholders_another_sandbox_has_bound() {
    // Run A makes a placeholder for the missing `.vscode`; run B, started meanwhile, takes it
    // for the user's directory and binds it read-only. Had A removed it when it ended, the
    // kernel would have detached B's bind, and B could have written editor settings (which
    // run code) on the host.
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("placeholder-race");
    let hooks = s.project.join(".vscode");
    assert!(!hooks.exists());
    // A lives until B's task runs (B has bound the placeholder); B writes once A is gone.
    // (Fixed sleeps of 1 s and 2 s let A end before B started on a loaded machine: then
    // nothing was shared and the race went untested.)
    let wait_for = |name: &str| format!("while [ ! -e {name} ]; do sleep 0.02; done");
    let mut a = run_until_it_exists(&s, &["sh", "-c", &wait_for("go-a")], &hooks);
    let b = s
        .paddock()
        .args(["run", "--", "sh", "-c"])
        .arg(format!(
            ": > b-runs; {}; mkdir -p .vscode; echo pwn > .vscode/tasks.json",
            wait_for("go-b")
        ))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    await_file(&s.project.join("b-runs"));
    std::fs::write(s.project.join("go-a"), "").unwrap();
    assert!(a.wait().unwrap().success());
    std::fs::write(s.project.join("go-b"), "").unwrap();
    let b = b.wait_with_output().unwrap();
    assert_ne!(b.status.code(), Some(0), "{b:?}");
    assert!(!hooks.join("tasks.json").exists(), "settings were written on the host: {b:?}");
    // The last run alive removed every placeholder.
    assert!(!hooks.exists(), "a placeholder was left behind");
}

#[test]
fn a_killed_run_that_borrowed_a_placeholder_does_not_take_it_from_its_maker() {
    // Run A makes `.vscode` and binds it read-only; run B finds it (A's: missing to B) and
    // binds it as it is. B is killed; run C's sweep of B's runtime dir must not remove
    // A's placeholder, or A's bind would be detached and A could write editor settings
    // (which run code) on the host.
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("placeholder-borrower-killed");
    let vscode = s.project.join(".vscode");
    // A writes once told to (after C); B is killed once its task runs (it has bound A's
    // placeholder by then). Fixed sleeps raced both on a loaded machine.
    let script =
        "while [ ! -e go-a ]; do sleep 0.02; done; mkdir -p .vscode; echo pwn > .vscode/tasks.json";
    let mut a = run_until_it_exists(&s, &["sh", "-c", script], &vscode);
    let mut b =
        s.paddock().args(["run", "--", "sh", "-c", ": > b-runs; exec sleep 120"]).spawn().unwrap();
    await_file(&s.project.join("b-runs"));
    b.kill().unwrap();
    b.wait().unwrap();
    // C sweeps B's runtime dir.
    let c = s.paddock().args(["run", "--", "true"]).output().unwrap();
    assert_eq!(c.status.code(), Some(0), "{c:?}");
    assert!(vscode.is_dir(), "A's placeholder was removed while A lives");
    std::fs::write(s.project.join("go-a"), "").unwrap();
    assert_ne!(a.wait().unwrap().code(), Some(0));
    assert!(!vscode.join("tasks.json").exists(), "settings were written on the host");
    assert!(!vscode.exists(), "a placeholder was left behind");
}

#[test]
fn concurrent_runs_in_one_project_all_run_and_leave_nothing_behind() {
    // A task runner starts tasks of one project at once. Each run makes placeholders for the
    // missing protected names; they race to make the same ones, find others' made since
    // they looked, and release them in any order. Before: a run that lost a race to make a
    // placeholder failed (125), and placeholders made inside another's (`.git/hooks` in
    // `.git`) or released at the same moment stayed on the host.
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("placeholder-crowd");
    std::fs::remove_dir_all(s.project.join(".git")).unwrap();
    let before = names(&s.project);
    for round in 0..3 {
        let runs: Vec<_> = (0..8)
            .map(|_| {
                s.paddock()
                    .args([
                        "run",
                        "--",
                        "sh",
                        "-c",
                        "echo x > .bashrc; mkdir -p .git/hooks; exit 3",
                    ])
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for run in runs {
            let out = run.wait_with_output().unwrap();
            assert_eq!(out.status.code(), Some(3), "round {round}: {out:?}");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(stderr.contains("Read-only file system"), "round {round}: {stderr}");
        }
        assert_eq!(names(&s.project), before, "round {round}: left behind in the project");
    }
}
