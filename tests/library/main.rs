//! The library from one process, as a task runner drives it: many tasks at once under
//! different policies, a long-lived server killed through its handle, and sandboxes made
//! and dropped on threads while another run holds placeholders. Afterwards nothing may be
//! left: no process, no mount, no live runtime dir, no placeholder, no socket, and this
//! process's signal dispositions as they were.

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use paddock::{Command, Report, Sandbox, SharedProxy, Stdio, ViolationKind};
use paddock_test_support::skip;

mod warm;

/// One test at a time: each checks that the whole process is left clean.
static SERIAL: Mutex<()> = Mutex::new(());

const SECRET: &str = "secret-canary-51c2";

/// target/debug/NAME, from this test binary in target/debug/deps.
fn built(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().and_then(Path::parent).map(|d| d.join(name)).unwrap()
}

/// Whether sandboxes can run here; when they cannot, says why (a failure under CI).
fn sandbox_here() -> bool {
    if !paddock_test_support::require_bubblewrap() {
        return false;
    }
    let missing = if !built("paddock-supervisor").exists() {
        Some(format!(
            "{} is not built (cargo build -p paddock)",
            built("paddock-supervisor").display()
        ))
    } else {
        None
    };
    match missing {
        None => true,
        Some(why) => {
            skip(why, None);
            false
        }
    }
}

/// A scratch home with a project holding secrets, outside `/tmp` (every task gets a
/// private `/tmp`).
struct Scratch {
    root: PathBuf,
    home: PathBuf,
    project: PathBuf,
}

impl Scratch {
    fn new(name: &str) -> Scratch {
        let tmp = paddock_test_support::visible_dir(Path::new(env!("CARGO_TARGET_TMPDIR")));
        let root = tmp.join(format!("lib-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let home = root.join("home");
        let project = home.join("proj");
        std::fs::create_dir_all(project.join("secrets")).unwrap();
        std::fs::create_dir_all(project.join("out")).unwrap();
        for i in 0..64 {
            std::fs::write(project.join(format!("secrets/secret-{i}")), SECRET).unwrap();
        }
        let root = root.canonicalize().unwrap();
        Scratch { home: root.join("home"), project: root.join("home/proj"), root }
    }

    fn sandbox(&self, toml: &str) -> Sandbox {
        self.sandbox_sharing(toml, &SharedProxy::new())
    }

    fn sandbox_sharing(&self, toml: &str, proxy: &SharedProxy) -> Sandbox {
        self.builder(toml).egress_proxy(proxy).build().unwrap()
    }

    /// A builder of a sandbox of this project under `toml`, with this home and the built
    /// supervisor.
    fn builder(&self, toml: &str) -> paddock::SandboxBuilder {
        Sandbox::builder(&self.project)
            .policy_toml(toml)
            .unwrap()
            .home(&self.home)
            .supervisor(built("paddock-supervisor"))
    }

    /// The project's entries, recursively, as relative paths.
    fn listing(&self) -> BTreeSet<PathBuf> {
        fn walk(dir: &Path, base: &Path, out: &mut BTreeSet<PathBuf>) {
            for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let p = e.path();
                out.insert(p.strip_prefix(base).unwrap().to_path_buf());
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    walk(&p, base, out);
                }
            }
        }
        let mut out = BTreeSet::new();
        walk(&self.project, &self.project, &mut out);
        out
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// This process's disposition of every signal but the real-time ones.
fn dispositions() -> Vec<(usize, libc::c_int)> {
    (1..32)
        .filter(|s| *s != libc::SIGKILL && *s != libc::SIGSTOP)
        .map(|sig| {
            // SAFETY: an all-zero sigaction is a valid value to be overwritten.
            let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
            // SAFETY: a query only (no new action) into a valid struct.
            unsafe { libc::sigaction(sig, std::ptr::null(), &mut old) };
            (old.sa_sigaction, old.sa_flags)
        })
        .collect()
}

/// The children of this process, of every thread.
fn children() -> Vec<u32> {
    paddock_test_support::children_of(std::process::id())
}

fn mounts() -> usize {
    std::fs::read_to_string("/proc/self/mountinfo").unwrap().lines().count()
}

/// Runtime dirs whose run is alive (their lock is held), and the sockets under the base.
fn live_runs_and_sockets() -> (Vec<PathBuf>, Vec<PathBuf>) {
    use std::os::unix::fs::FileTypeExt;
    let base = paddock_linux_bwrap::runtime::runtime_dir::base();
    let (mut live, mut sockets) = (Vec::new(), Vec::new());
    for e in std::fs::read_dir(&base).into_iter().flatten().flatten() {
        let lock = e.path().join("lock");
        if let Ok(f) = std::fs::File::open(&lock) {
            use std::os::fd::AsRawFd;
            // SAFETY: flock on a descriptor we own.
            let held = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0;
            if held {
                live.push(e.path());
            }
        }
        for f in std::fs::read_dir(e.path()).into_iter().flatten().flatten() {
            if f.file_type().is_ok_and(|t| t.is_socket()) {
                sockets.push(f.path());
            }
        }
    }
    (live, sockets)
}

fn free_port() -> u16 {
    paddock_test_support::free_port()
}

/// GET / from 127.0.0.1:`port` on the host, retrying until `within`.
fn host_get(port: u16, within: Duration) -> Result<String, String> {
    let deadline = Instant::now() + within;
    loop {
        let tried = TcpStream::connect(("127.0.0.1", port)).and_then(|mut c| {
            c.set_read_timeout(Some(Duration::from_secs(5)))?;
            c.write_all(b"GET / HTTP/1.0\r\n\r\n")?;
            let mut got = String::new();
            c.read_to_string(&mut got)?;
            Ok(got)
        });
        match tried {
            Ok(got) if !got.is_empty() => return Ok(got),
            Ok(_) | Err(_) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Ok(_) => return Err("empty answer".into()),
            Err(e) => return Err(e.to_string()),
        }
    }
}

fn probe() -> PathBuf {
    paddock_test_support::visible_exe(Path::new(env!("CARGO_BIN_EXE_paddock-probe")))
}

/// The secrets a report says were read, by number.
fn secrets_denied(report: &Report) -> BTreeSet<usize> {
    report
        .violations
        .iter()
        .filter_map(|v| v.path.as_ref())
        .filter_map(|p| p.file_name()?.to_str()?.strip_prefix("secret-")?.parse().ok())
        .collect()
}

/// The network destinations a report says were refused.
fn refused(report: &Report) -> Vec<String> {
    report
        .violations
        .iter()
        .filter(|v| v.kind == ViolationKind::Network)
        .filter_map(|v| v.target.clone())
        .collect()
}

#[test]
fn thirty_two_tasks_and_a_server_in_one_process_each_get_their_own() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !sandbox_here() {
        return;
    }
    let before = (dispositions(), mounts());
    let s = Scratch::new("many");
    let listing = s.listing();
    // Four policies: each grants `out/` and hides `secrets/`; two with domain lists, whose
    // tasks share one egress proxy, each with its own rules and its own refusals.
    let policies = [
        "[allow]\nwrite = [\"out\"]\n[deny]\nread = [\"secrets\"]\n",
        "[allow]\nwrite = [\"out\", \"src\"]\nnetwork = false\n[deny]\nread = [\"secrets\", \"~/.aws\"]\n",
        "[allow]\nwrite = [\"out\"]\nnetwork = [\"granted.example\"]\n[deny]\nread = [\"secrets\"]\n",
        "[allow]\nwrite = [\"out\"]\nnetwork = [\"other.example\"]\n[deny]\nread = [\"secrets\"]\nwrite = [\"out/locked\"]\n",
    ];
    let proxy = SharedProxy::new();
    let sandboxes: Vec<Sandbox> = policies.iter().map(|p| s.sandbox_sharing(p, &proxy)).collect();

    // The server: it serves a local port until it is killed.
    let port = free_port();
    let server_box = s.sandbox(&format!("[allow]\nlocal-ports = [{port}]\n"));
    let mut server = server_box
        .spawn(
            Command::new(probe())
                .arg(format!("serve:{port}:600"))
                .stdout(Stdio::piped())
                .stderr(Stdio::piped()),
        )
        .unwrap();
    let got = host_get(port, Duration::from_secs(20)).expect("the server answers on its port");
    assert!(got.starts_with("HTTP/1.0 200"), "{got}");

    let probe = probe();
    let mut tasks = Vec::new();
    for i in 0..32 {
        let policy = i % 4;
        let mut script = format!(
            "echo task-{i}; echo {i} > out/task-{i}; cat secrets/secret-{i} 2>/dev/null; true"
        );
        if policy >= 2 {
            script = format!(
                "{script}; {} http:http://refused-{i}.example/ >/dev/null",
                probe.display()
            );
        }
        // All 32 at once: each waits for the others to have started.
        script = format!("{script}; while [ ! -e go ]; do sleep 0.01; done");
        let child = sandboxes[policy]
            .spawn(
                Command::new("sh")
                    .args(["-c", &script])
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .timeout(Duration::from_secs(120)),
            )
            .unwrap();
        assert!(child.id() > 0);
        tasks.push((i, policy, child));
    }
    assert!(proxy.running(), "the tasks with domain lists share a running proxy");
    // Killed through its handle while the others run.
    assert!(host_get(port, Duration::from_secs(5)).is_ok(), "the server serves meanwhile");
    server.kill().unwrap();
    std::fs::write(s.project.join("go"), "").unwrap();

    for (i, policy, child) in tasks {
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(stdout.lines().next(), Some(format!("task-{i}").as_str()), "{out:?}");
        assert!(!stdout.contains(SECRET), "task {i} read a hidden secret: {stdout}");
        for j in (0..32).filter(|j| *j != i) {
            assert!(!stdout.contains(&format!("task-{j}\n")), "task {i} got {j}'s output");
        }
        assert_eq!(out.report.exit_code, 0, "task {i}: {out:?}");
        assert_eq!(
            std::fs::read_to_string(s.project.join(format!("out/task-{i}"))).unwrap(),
            format!("{i}\n")
        );
        assert_eq!(secrets_denied(&out.report), BTreeSet::from([i]), "task {i}: {:?}", out.report);
        let refused = refused(&out.report);
        if policy >= 2 {
            assert_eq!(refused, [format!("refused-{i}.example:80")], "task {i}: {:?}", out.report);
        } else {
            assert!(refused.is_empty(), "task {i}: {refused:?}");
        }
    }
    assert!(!proxy.running(), "the proxy stops with the last task that used it");
    let report = server.wait().unwrap();
    assert_eq!(report.signal, Some(libc::SIGKILL), "{report:?}");
    // Its port is free at once.
    TcpListener::bind(("127.0.0.1", port)).expect("the killed server's port is free");
    drop(server);
    drop(sandboxes);
    drop(server_box);

    let deadline = Instant::now() + Duration::from_secs(10);
    while !children().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(children().is_empty(), "processes left: {:?}", children());
    assert_eq!((dispositions(), mounts()), before, "signal dispositions or mounts changed");
    let (live, sockets) = live_runs_and_sockets();
    assert!(live.is_empty(), "runtime dirs of live runs left: {live:?}");
    assert!(sockets.is_empty(), "sockets left: {sockets:?}");
    let mut outs: BTreeSet<PathBuf> =
        (0..32).map(|i| PathBuf::from(format!("out/task-{i}"))).collect();
    outs.insert("go".into());
    let after: BTreeSet<PathBuf> = s.listing().difference(&outs).cloned().collect();
    assert_eq!(after, listing, "placeholders or other files left in the project");
}

#[test]
fn sandboxes_made_and_dropped_on_threads_never_take_a_live_runs_placeholder() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !sandbox_here() {
        return;
    }
    let before = dispositions();
    let s = Scratch::new("rounds");
    let listing = s.listing();
    // `.bashrc` is a protected name the project lacks: each run binds a placeholder there.
    let envrc = s.project.join(".bashrc");
    let toml = "[allow]\nwrite = [\".\"]\n[deny]\nread = [\"secrets\"]\n";
    // The holder keeps trying to write the protected name: a placeholder of its removed on
    // the host would detach its bind, and the write would then reach the project.
    let holder_box = s.sandbox(toml);
    let mut holder = holder_box
        .spawn(
            Command::new("sh")
                .args([
                    "-c",
                    "echo up; for i in $(seq 3000); do \
                       if (echo BREACH > .bashrc) 2>/dev/null; then echo BREACH; fi; \
                       [ -e stop ] && break; sleep 0.01; done",
                ])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .timeout(Duration::from_secs(300)),
        )
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let rounds: Vec<_> = (0..2)
        .map(|t| {
            let s_project = s.project.clone();
            let home = s.home.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                for round in 0..100 {
                    let sandbox = Sandbox::builder(&s_project)
                        .policy_toml(toml)
                        .unwrap()
                        .home(&home)
                        .supervisor(built("paddock-supervisor"))
                        .build()
                        .unwrap();
                    let out = sandbox
                        .spawn(
                            Command::new("sh")
                                .args([
                                    "-c",
                                    &format!("echo {t}-{round}; cat secrets/secret-{t}; true"),
                                ])
                                .stdout(Stdio::piped())
                                .stderr(Stdio::null()),
                        )
                        .unwrap()
                        .wait_with_output()
                        .unwrap();
                    assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{t}-{round}\n"));
                    assert_eq!(secrets_denied(&out.report), BTreeSet::from([t]));
                    drop(sandbox);
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                }
            })
        })
        .collect();
    for r in rounds {
        r.join().unwrap();
    }
    // The holder ran throughout; the protected name never took a write.
    assert!(holder.try_wait().unwrap().is_none(), "the holder ended early");
    std::fs::write(s.project.join("stop"), "").unwrap();
    let out = holder.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("up"), "{out:?}");
    assert!(!stdout.contains("BREACH"), "a live run's placeholder was removed: {stdout}");
    assert!(
        std::fs::read(&envrc).map_or(true, |b| !b.starts_with(b"BREACH")),
        "the protected name was written through"
    );
    stop.store(true, Ordering::SeqCst);
    drop(holder_box);
    let (live, sockets) = live_runs_and_sockets();
    assert!(live.is_empty() && sockets.is_empty(), "{live:?} {sockets:?}");
    let mut after = s.listing();
    after.remove(Path::new("stop"));
    assert_eq!(after, listing, "placeholders left in the project");
    assert_eq!(dispositions(), before);
}

#[test]
fn output_nobody_reads_is_capped_and_a_dropped_child_takes_its_sandbox() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !sandbox_here() {
        return;
    }
    let s = Scratch::new("cap");
    let listing = s.listing();
    let sandbox = s.builder("").capture_limit(1000).build().unwrap();
    // 4 MiB on each stream, far past a pipe's buffer: the task must not block on it.
    let out = sandbox
        .spawn(
            Command::new("sh")
                .args([
                    "-c",
                    "head -c 4194304 /dev/zero; head -c 4194304 /dev/zero >&2; echo done > out/ok",
                ])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .timeout(Duration::from_secs(60)),
        )
        .unwrap()
        .wait_with_output()
        .unwrap();
    assert_eq!(out.report.exit_code, 0, "{:?}", out.report);
    assert!(!out.report.timed_out);
    for stream in [&out.stdout, &out.stderr] {
        assert!(stream.starts_with(&[0u8; 1000]), "the first 1000 bytes are kept");
        let marker = String::from_utf8_lossy(&stream[1000..]);
        assert!(marker.contains("4193304 more bytes cut"), "{marker}");
    }
    assert!(s.project.join("out/ok").exists());

    // A task still running when its `Child` is dropped goes with it, sandbox and all.
    let child = sandbox.spawn(Command::new("sleep").arg("600").stdout(Stdio::null())).unwrap();
    let pid = child.id();
    assert!(Path::new(&format!("/proc/{pid}")).exists());
    let dropped = Instant::now();
    drop(child);
    assert!(dropped.elapsed() < Duration::from_secs(30), "the drop waited for the task");
    assert!(children().is_empty(), "processes left: {:?}", children());
    let (live, sockets) = live_runs_and_sockets();
    assert!(live.is_empty() && sockets.is_empty(), "{live:?} {sockets:?}");
    let mut after = s.listing();
    after.remove(Path::new("out/ok"));
    assert_eq!(after, listing, "placeholders left in the project");
}

/// A task runner that reaps orphans (a child subreaper, as many are) gets no process of a
/// sandbox to reap: the run reaps its bwrap on the thread that started it, before that
/// thread ends, so bwrap's `--die-with-parent` never kills it while the kernel still tears
/// the sandbox down and the sandbox's pid 1 is never orphaned to the runner.
#[test]
fn a_subreaper_running_tasks_is_left_no_orphan_of_theirs() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !sandbox_here() {
        return;
    }
    let s = Scratch::new("orphans");
    let sandbox = s.builder("").build().unwrap();
    // SAFETY: prctl with integers; undone below.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    let mut codes = Vec::new();
    for _ in 0..20 {
        let mut child =
            sandbox.spawn(Command::new("true").stdin(Stdio::null()).stdout(Stdio::null())).unwrap();
        codes.push(child.wait().unwrap().exit_code);
    }
    // An orphan would come a moment after its run ended.
    std::thread::sleep(Duration::from_millis(200));
    let left = children();
    // SAFETY: prctl with integers; then reaping whatever came, so that the other tests find
    // this process clean.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0);
        while libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) > 0 {}
    }
    assert!(codes.iter().all(|&c| c == 0), "{codes:?}");
    assert!(left.is_empty(), "orphans of the sandboxes reached this subreaper: {left:?}");
}

/// A descriptor the task runner holds for its own children (a make jobserver's, say: open
/// and inheritable) stays inheritable after it runs sandboxes, and reaches none of them:
/// the sandbox's side closes or marks what it must in its own descriptor table, never in
/// the runner's.
#[test]
fn the_runners_inheritable_descriptors_stay_its_own() {
    use std::os::unix::ffi::OsStrExt;
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !sandbox_here() {
        return;
    }
    let s = Scratch::new("inherit");
    let canary = s.root.join("jobserver-canary");
    std::fs::write(&canary, "x").unwrap();
    let path = std::ffi::CString::new(canary.as_os_str().as_bytes()).unwrap();
    // SAFETY: open without O_CLOEXEC, as an inherited jobserver descriptor is, moved above
    // the numbers a sandbox's descriptors are placed at (F_DUPFD leaves the flag clear).
    let fd = unsafe {
        let low = libc::open(path.as_ptr(), libc::O_RDONLY);
        let high = libc::fcntl(low, libc::F_DUPFD, 100);
        libc::close(low);
        high
    };
    assert!(fd >= 100);
    let reaches = |pid: u32| {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| std::fs::read_link(e.path()).is_ok_and(|l| l == canary))
    };
    // Each way a sandbox starts: bwrap started before the plan (untraced, observed), or
    // after it (a task whose streams the prespawned bwrap did not get).
    let mut codes = Vec::new();
    let mut seen = Vec::new();
    for mode in [paddock::ItemizeMode::Off, paddock::ItemizeMode::Auto] {
        let sandbox = s.builder("").itemize(mode).build().unwrap();
        let mut child =
            sandbox.spawn(Command::new("sleep").arg("2").stdout(Stdio::null())).unwrap();
        let bwrap = child.id();
        if reaches(bwrap) || paddock_test_support::children_of(bwrap).into_iter().any(reaches) {
            seen.push(format!("{mode:?}"));
        }
        codes.push(child.wait().unwrap().exit_code);
        codes.push(
            sandbox.run(Command::new("true").stdout(Stdio::piped())).unwrap().report.exit_code,
        );
    }
    // SAFETY: fcntl with integers.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    // SAFETY: closing our own descriptor.
    unsafe { libc::close(fd) };
    assert!(codes.iter().all(|&c| c == 0), "{codes:?}");
    assert!(seen.is_empty(), "bwrap or the supervisor held the runner's descriptor: {seen:?}");
    assert_eq!(flags, 0, "the runner's inheritable descriptor was marked close-on-exec");
}
