//! Filesystem, network, seccomp and environment walls (security-cases groups FSR, FSW, SYM,
//! NET off/on, UNX, SEC, TTY, ENV, POL), asserted from inside with the probe and on the host.

use crate::harness::*;

#[test]
fn project_is_writable_and_the_rest_is_read_only() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("fsw01");
    let out_txt = s.project.join("out.txt");
    let outside = s.home.join("pwn");
    let (o, out) = s.probe(
        &[],
        &[
            &format!("write:{}", out_txt.display()),
            &format!("write:{}", outside.display()),
            "write:/etc/paddock-pwn",
            "write:/usr/local/bin/paddock-pwn",
        ],
    );
    assert_allowed(&o, "write", &out_txt.display().to_string());
    assert_denied(&o, "write", &outside.display().to_string(), &[EROFS, EACCES]);
    assert_denied(&o, "write", "/etc/paddock-pwn", &[EROFS, EACCES]);
    assert_denied(&o, "write", "/usr/local/bin/paddock-pwn", &[EROFS, EACCES, ENOENT]);
    assert!(out_txt.exists(), "{out:?}");
    assert!(!outside.exists() && !std::path::Path::new("/etc/paddock-pwn").exists());
}

#[test]
fn secrets_are_hidden_fsr01() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("fsr01");
    let key = s.home.join(".ssh/id_canary");
    let aws = s.home.join(".aws/credentials");
    let dotdot = format!("{}/../.ssh/id_canary", s.project.display());
    let (o, out) = s.probe(
        &[],
        &[
            &format!("read:{}", key.display()),
            &format!("read:{}", aws.display()),
            &format!("read:{dotdot}"),
        ],
    );
    assert_denied(&o, "read", &key.display().to_string(), &[ENOENT, EACCES]);
    assert_denied(&o, "read", &aws.display().to_string(), &[ENOENT, EACCES]);
    assert_denied(&o, "read", &dotdot, &[ENOENT, EACCES]);
    assert!(!String::from_utf8_lossy(&out.stdout).contains(CANARY));
}

#[test]
fn deny_anchor_hides_home_but_the_project_stays() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("anchor");
    std::fs::write(s.home.join(".bashrc"), "rc").unwrap();
    let (o, _) = s.probe(
        &["--deny-read", "~"],
        &[
            &format!("ls:{}", s.home.display()),
            &format!("read:{}", s.home.join(".bashrc").display()),
            &format!("read:{}", s.project.join("src/main.rs").display()),
        ],
    );
    let listing = assert_allowed(&o, "ls", &s.home.display().to_string());
    assert_eq!(listing, "proj", "only the path to the project is visible in a hidden home");
    assert_denied(&o, "read", &s.home.join(".bashrc").display().to_string(), &[ENOENT, EACCES]);
    assert_allowed(&o, "read", &s.project.join("src/main.rs").display().to_string());
}

#[test]
fn git_hooks_are_read_only_and_git_cannot_be_renamed_fsw04_fsw05() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("fsw05");
    let hook = s.project.join(".git/hooks/pre-commit");
    let cfg = s.project.join(".git/config");
    let git = s.project.join(".git");
    let (o, _) = s.probe(
        &[],
        &[
            &format!("write:{}", hook.display()),
            &format!("write:{}", cfg.display()),
            &format!("rename:{}={}", git.display(), s.project.join(".git.o").display()),
        ],
    );
    assert_denied(&o, "write", &hook.display().to_string(), &[EROFS, EACCES]);
    assert_denied(&o, "write", &cfg.display().to_string(), &[EROFS, EACCES]);
    assert_denied(
        &o,
        "rename",
        &format!("{}={}", git.display(), s.project.join(".git.o").display()),
        &[EBUSY, EACCES, EROFS],
    );
    assert!(!hook.exists() && git.is_dir());
    assert_eq!(std::fs::read_to_string(&cfg).unwrap(), "[core]\n");
}

#[test]
fn missing_protected_names_cannot_be_created_and_leave_nothing_fsw02_fsw03() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("fsw03");
    let before = listing(&s.project);
    let rc = s.project.join(".bashrc");
    let vscode = s.project.join(".vscode");
    let (o, _) =
        s.probe(&[], &[&format!("write:{}", rc.display()), &format!("mkdir:{}", vscode.display())]);
    assert_denied(&o, "write", &rc.display().to_string(), &[EROFS, EACCES, EPERM]);
    assert_denied(&o, "mkdir", &vscode.display().to_string(), &[EROFS, EACCES, EEXIST_OR_ROFS]);
    assert!(!rc.exists(), "no .bashrc may be left on the host");
    assert_eq!(
        listing(&s.project),
        before,
        "no placeholder or ghost file may be left in the project"
    );
}

const EEXIST_OR_ROFS: i64 = 17;

fn listing(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn tmp_is_private_per_task_fsw11() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("fsw11");
    let marker = format!("/tmp/paddock-e2e-private-{}", std::process::id());
    let (o, _) = s.probe(&[], &[&format!("write:{marker}")]);
    assert_allowed(&o, "write", &marker);
    assert!(!std::path::Path::new(&marker).exists(), "a task's /tmp must not reach the host's");
    let (o, _) = s.probe(&[], &[&format!("read:{marker}")]);
    assert_denied(&o, "read", &marker, &[ENOENT]);
}

#[test]
fn network_off_refuses_host_loopback_net01_net04() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("net01");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (o, _) = s.probe(&[], &[&format!("connect:{addr}"), "connect:1.1.1.1:443"]);
    assert_denied(&o, "connect", &addr, &[ECONNREFUSED]);
    assert_denied(&o, "connect", "1.1.1.1:443", &[ENETUNREACH]);
}

#[test]
fn network_on_reaches_host_loopback() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("neton");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let server = std::thread::spawn(move || {
        use std::io::Write;
        if let Ok((mut c, _)) = listener.accept() {
            let _ = c.write_all(b"hello");
        }
    });
    let (o, _) = s.probe(&["--network", "on"], &[&format!("connect:{addr}")]);
    assert_eq!(assert_allowed(&o, "connect", &addr), "hello");
    server.join().unwrap();
}

#[test]
fn seccomp_walls_sec01_sec02_unx01_unx02_tty01_prc05_prc07() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("sec");
    let (o, out) = s.probe(
        &[],
        &[
            "io-uring",
            "unix-socket",
            "socketpair-dgram",
            "tiocsti",
            "tiocsti-hi",
            "keyctl",
            "unshare-user",
        ],
    );
    for op in ["io-uring", "unix-socket", "socketpair-dgram", "tiocsti", "tiocsti-hi", "keyctl"] {
        assert_denied(&o, op, "", &[EPERM]);
    }
    let unshare = obs(&o, "unshare-user", "");
    assert_eq!(unshare["ok"], false, "nested user namespaces must be refused: {out:?}");
    // With unix sockets granted, AF_UNIX stream sockets work.
    let (o, _) = s.probe(&["--allow-unix-sockets"], &["unix-socket"]);
    assert_allowed(&o, "unix-socket", "");
    // TTY-01 with a terminal: above, stdin is /dev/null; here the task's stdin is a pty
    // (`script`). The task is in a session of its own, so the caller's terminal is not its
    // controlling terminal (`/dev/tty` does not open), and TIOCSTI is refused by the filter.
    #[cfg(target_os = "linux")]
    if require_tool("/usr/bin/script", "a terminal for the task (util-linux)") {
        use crate::hostile_proc::{in_terminal, quote};
        let command = format!(
            "{} run -- sh -c 'test -t 0 && echo stdin-is-a-tty; \
             (exec 3</dev/tty) 2>/dev/null; echo ctty=$?; exec {} tiocsti tiocsti-hi'",
            quote(&paddock_bin()),
            probe_bin().display()
        );
        let text = in_terminal(&s, &command);
        assert!(text.contains("stdin-is-a-tty"), "the task had no terminal: {text}");
        let ctty = text.lines().find_map(|l| l.trim().strip_prefix("ctty="));
        let ctty = ctty.unwrap_or_else(|| panic!("the task did not try /dev/tty: {text}"));
        assert_ne!(ctty, "0", "the caller's terminal is the task's controlling terminal: {text}");
        let o: Vec<serde_json::Value> =
            text.lines().filter_map(|l| serde_json::from_str(l.trim()).ok()).collect();
        assert_denied(&o, "tiocsti", "", &[EPERM]);
        assert_denied(&o, "tiocsti-hi", "", &[EPERM]);
    }
}

#[test]
fn secrets_do_not_reach_the_task_env_env01_env02() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("env");
    let out = s
        .paddock()
        .env("GITHUB_TOKEN", CANARY)
        .env("AWS_SECRET_ACCESS_KEY", CANARY)
        .env("CANARY_TOKEN", CANARY)
        .env("SSH_AUTH_SOCK", "/tmp/agent.sock")
        .args([
            "run",
            "--",
            "sh",
            "-c",
            "env; for p in /proc/[0-9]*; do cat $p/environ $p/cmdline; done 2>/dev/null; exit 0",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(text.contains("PATH="), "the task sees a normal environment: {text}");
    assert!(!text.contains(CANARY), "a secret leaked into the sandbox: {text}");
    assert!(!text.contains("SSH_AUTH_SOCK"), "{text}");
}

#[test]
fn only_standard_fds_reach_the_task_fsr06_sec09() {
    if !require_os_sandbox() {
        return;
    }
    use std::os::fd::AsRawFd;
    let s = Scratch::new("fds");
    // An fd the runner has open without CLOEXEC must not reach the task.
    let f = std::fs::File::open(s.home.join(".ssh/id_canary")).unwrap();
    // SAFETY: clearing FD_CLOEXEC on a file we own, to simulate a careless parent.
    unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETFD, 0) };
    let (o, _) = s.probe(&[], &["fds"]);
    let fds = assert_allowed(&o, "fds", "");
    // 0-2 and the one `read_dir` itself opens.
    assert_eq!(fds.split(',').count(), 4, "unexpected fds in the task: {fds}");
    drop(f);
}

#[test]
fn bad_config_exits_125_and_runs_nothing_pol01() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("pol01");
    std::fs::write(s.project.join("paddock.toml"), "[allow]\nnetwrok = true\n").unwrap();
    let marker = s.project.join("RAN");
    let out = s.paddock().args(["run", "--", "touch"]).arg(&marker).output().unwrap();
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("paddock.toml") && err.contains("netwrok") && err.contains("allow.network"),
        "{err}"
    );
    assert!(!marker.exists());
}

#[test]
fn symlink_planted_by_an_earlier_run_is_refused_sym01() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("sym01");
    let out = s
        .paddock()
        .args(["run", "--", "ln", "-s"])
        .arg(s.home.join(".ssh"))
        .arg("out")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let out = s.paddock().args(["run", "--allow-write", "out", "--", "true"]).output().unwrap();
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains(".ssh"));
}
