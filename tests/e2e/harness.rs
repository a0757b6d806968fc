//! The harness: a scratch home and project, the binaries, and running `paddock`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub use paddock_test_support::{Fact, skip};
use serde_json::Value;

/// A throw-away `$HOME` with canaries and a git project `$HOME/proj`.
pub struct Scratch {
    pub root: PathBuf,
    pub home: PathBuf,
    pub project: PathBuf,
}

pub const CANARY: &str = "canary-7f3a9c1e";

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        // Not under /tmp: every task gets a private /tmp, which would hide the scratch dirs
        // (a checkout under /tmp gets them in /var/tmp).
        let tmp = std::env::var_os("PADDOCK_E2E_TMP")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")));
        let tmp = paddock_test_support::visible_dir(&tmp);
        let base = tmp.join(format!("e2e-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let home = base.join("home");
        let project = home.join("proj");
        for d in
            [home.join(".ssh"), home.join(".aws"), project.join(".git/hooks"), project.join("src")]
        {
            std::fs::create_dir_all(&d).unwrap();
        }
        std::fs::write(home.join(".ssh/id_canary"), CANARY).unwrap();
        std::fs::write(home.join(".aws/credentials"), CANARY).unwrap();
        std::fs::write(project.join(".git/config"), "[core]\n").unwrap();
        std::fs::write(project.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(project.join("src/main.rs"), "fn main() {}\n").unwrap();
        let root = base.canonicalize().unwrap();
        Scratch { home: root.join("home"), project: root.join("home/proj"), root }
    }

    /// `paddock run` in the project with HOME set to the scratch home.
    pub fn paddock(&self) -> Command {
        let mut c = Command::new(paddock_bin());
        c.current_dir(&self.project).env("HOME", &self.home).env_remove("PADDOCK_LOG");
        // The mechanism under test, unless a test passes `--itemize` (the flag wins).
        c.env("PADDOCK_ITEMIZE", itemize_mode());
        c.stdin(Stdio::null());
        c
    }

    /// Runs the probe with `ops` under `paddock run` with extra flags, returning the parsed
    /// observations and the whole output.
    pub fn probe(&self, flags: &[&str], ops: &[&str]) -> (Vec<Value>, Output) {
        let out = self
            .paddock()
            .arg("run")
            .args(flags)
            .arg("--")
            .arg(probe_bin())
            .args(ops)
            .output()
            .unwrap();
        let obs = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        (obs, out)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// The observation for operation `op`, panicking with the output if missing.
pub fn obs<'a>(all: &'a [Value], op: &str, arg: &str) -> &'a Value {
    all.iter()
        .find(|v| v["op"] == op && (arg.is_empty() || v["arg"] == arg))
        .unwrap_or_else(|| panic!("no observation for {op}:{arg} in {all:#?}"))
}

/// Asserts an observation failed with one of `errnos`.
#[track_caller]
pub fn assert_denied(all: &[Value], op: &str, arg: &str, errnos: &[i64]) {
    let o = obs(all, op, arg);
    assert_eq!(o["ok"], false, "{op}:{arg} should be denied: {o}");
    let e = o["errno"].as_i64().unwrap_or(-1);
    assert!(
        errnos.contains(&e),
        "{op}:{arg} failed with errno {e}, expected one of {errnos:?}: {o}"
    );
}

#[track_caller]
pub fn assert_allowed(all: &[Value], op: &str, arg: &str) -> String {
    let o = obs(all, op, arg);
    assert_eq!(o["ok"], true, "{op}:{arg} should be allowed: {o}");
    o["detail"].as_str().unwrap_or("").to_owned()
}

pub const EPERM: i64 = 1;
pub const ENOENT: i64 = 2;
pub const EACCES: i64 = 13;
pub const EBUSY: i64 = 16;
pub const EROFS: i64 = 30;
pub const ENETUNREACH: i64 = 101;
pub const ECONNREFUSED: i64 = 111;

fn target_dir_bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // target/debug/deps/e2e-HASH -> target/debug/NAME
    exe.parent().and_then(Path::parent).map(|d| d.join(name)).unwrap()
}

pub fn paddock_bin() -> PathBuf {
    std::env::var_os("PADDOCK_BIN").map(PathBuf::from).unwrap_or_else(|| target_dir_bin("paddock"))
}

/// The probe, which runs inside the sandbox: copied out of a checkout under `/tmp`, which
/// the task's private `/tmp` would hide.
pub fn probe_bin() -> PathBuf {
    let built = std::env::var_os("PADDOCK_PROBE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_paddock-probe")));
    paddock_test_support::visible_exe(&built)
}

/// Where paddock's probe looks for strace.
const STRACE_PATHS: [&str; 3] = ["/usr/bin/strace", "/usr/local/bin/strace", "/bin/strace"];

/// The itemizing mechanism this run of the suite tests, as reports name it (`observe` or
/// `strace`), from `PADDOCK_E2E_ITEMIZE`: `observe`, `strace` (the default), or
/// `auto-strace` (`--itemize auto` on a host without the observers: strace with
/// `--seccomp-bpf`). CI runs the suite once per mechanism.
pub fn itemizer() -> &'static str {
    match e2e_mode() {
        "observe" => "observe",
        _ => "strace",
    }
}

fn e2e_mode() -> &'static str {
    match std::env::var("PADDOCK_E2E_ITEMIZE").as_deref() {
        Ok("strace") | Err(_) => "strace",
        Ok("observe") => "observe",
        Ok("auto-strace") => "auto-strace",
        Ok(other) => panic!("PADDOCK_E2E_ITEMIZE={other}: use observe, strace or auto-strace"),
    }
}

/// The `--itemize` mode the suite runs paddock with (`PADDOCK_ITEMIZE`).
pub fn itemize_mode() -> &'static str {
    match e2e_mode() {
        "auto-strace" => "auto",
        other => other,
    }
}

/// Whether the suite runs strace with `--seccomp-bpf`: calls the seccomp filter refuses
/// (`socket(AF_UNIX)`) then never reach strace (the kernel ranks `SECCOMP_RET_ERRNO` above
/// `SECCOMP_RET_TRACE`).
pub fn seccomp_bpf() -> bool {
    e2e_mode() == "auto-strace"
}

/// Whether the suite's runs have strace inside the sandbox: `auto` without the observers,
/// on a kernel whose Landlock scopes signals (without it, strace runs around bwrap).
pub fn strace_inside() -> bool {
    seccomp_bpf() && landlock_scopes_signals()
}

/// Whether this kernel scopes signals with Landlock (ABI 6), which strace inside the
/// sandbox needs; without it `auto` traces bwrap.
pub fn landlock_scopes_signals() -> bool {
    // SAFETY: the Landlock version query: no attribute, size 0, flag 1; returns a number.
    let abi = unsafe {
        libc::syscall(libc::SYS_landlock_create_ruleset, std::ptr::null::<u8>(), 0usize, 1u32)
    };
    abi >= 6
}

/// Whether the suite's itemizer ([`itemizer`]) works here. Skips loudly, or panics when OS
/// tests are required (`paddock_test_support::required`) and the pass does not name what
/// stops it.
pub fn require_itemizer() -> bool {
    if !require_os_sandbox() {
        return false;
    }
    let fuse_usable = || std::fs::OpenOptions::new().read(true).write(true).open("/dev/fuse");
    let no_strace = || !STRACE_PATHS.iter().any(|p| Path::new(p).exists());
    let missing = match e2e_mode() {
        "strace" => no_strace().then_some("strace is not installed (apt-get install strace)"),
        "auto-strace" if no_strace() => Some("strace is not installed (apt-get install strace)"),
        // The observers would be picked instead.
        "auto-strace" => fuse_usable().is_ok().then_some("/dev/fuse is usable (hide it)"),
        _ => fuse_usable()
            .is_err()
            .then_some("/dev/fuse cannot be opened read-write (chmod 0666 /dev/fuse)"),
    };
    match missing {
        None => true,
        Some(why) => {
            skip(format!("itemizing with {} needs: {why}", e2e_mode()), None);
            false
        }
    }
}

/// Whether strace is here (for tests of strace itself: `paddock learn`, `--itemize strace`).
/// Skips loudly when not: CI runs the suite once with strace hidden, to prove the observers
/// itemize alone (a fact of that pass); anywhere else a missing strace is a failure under CI.
pub fn require_strace() -> bool {
    if !require_os_sandbox() {
        return false;
    }
    // Hidden by a bind of /dev/null (a character device) is as good as missing.
    let found = STRACE_PATHS.iter().any(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file()));
    if !found {
        skip("strace is not installed (or hidden for this pass)", Some(Fact::StraceHidden));
    }
    found
}

/// Whether `tool` (an absolute path) is installed; skips loudly when not, a failure where
/// tests are required. `what` says what the test needs it for.
pub fn require_tool(tool: &str, what: &str) -> bool {
    // A system without the merged /usr (Debian 11) has some tools in /bin only.
    let unmerged = tool.strip_prefix("/usr/bin/").map(|name| Path::new("/bin").join(name));
    let found = Path::new(tool).exists() || unmerged.is_some_and(|p| p.exists());
    if !found {
        skip(format!("{what} needs {tool}, which is not installed"), None);
    }
    found
}

/// Whether the suite runs as root; skips when not, which only a pass run as another user on
/// purpose may do where tests are required. `what` says what needs root.
pub fn require_root(what: &str) -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        skip(format!("{what} needs root"), Some(Fact::Unprivileged));
        return false;
    }
    if !has_sys_admin() {
        skip(format!("{what} needs root's CAP_SYS_ADMIN"), Some(Fact::NoSysAdmin));
        return false;
    }
    true
}

/// Whether this process holds `CAP_SYS_ADMIN` in its effective set (`/proc/self/status`).
pub fn has_sys_admin() -> bool {
    const CAP_SYS_ADMIN: u32 = 21;
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << CAP_SYS_ADMIN) != 0)
}

/// Whether the OS sandbox is here. Skips loudly, or panics when OS tests are required.
pub fn require_os_sandbox() -> bool {
    if !paddock_test_support::require_bubblewrap() {
        return false;
    }
    let missing = if !paddock_bin().exists() {
        Some(format!(
            "the paddock binary is not built at {} (cargo build -p paddock)",
            paddock_bin().display()
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

/// Serves `CANARY` on the abstract unix socket `@name` until the process ends.
#[cfg(target_os = "linux")]
pub fn abstract_canary(name: &str) {
    use std::io::Write;
    use std::os::linux::net::SocketAddrExt;
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let listener = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
    std::thread::spawn(move || {
        for c in listener.incoming().flatten() {
            let mut c = c;
            let _ = c.write_all(CANARY.as_bytes());
        }
    });
}

/// Whether [`without_fresh_proc`] can make a host without a fresh `/proc` here: it needs
/// root, and bubblewrap using a user namespace (root without one mounts a procfs whatever
/// is masked). Skips when not.
pub fn require_masking_proc() -> bool {
    if !require_root("masking part of /proc in a mount namespace") {
        return false;
    }
    for fact in [Fact::UsernsUnavailable, Fact::OldBwrap] {
        if fact.of_this_pass() {
            skip(
                "root without a user namespace mounts a fresh /proc whatever is masked",
                Some(fact),
            );
            return false;
        }
    }
    true
}

/// `paddock ARGS` in the project of `sc` on a host where no fresh `/proc` can be mounted, as
/// in a container that masks part of `/proc` (a tmpfs over one of its directories: the kernel
/// then refuses a new procfs in a user namespace, as Docker's masked paths make it do), in
/// a mount namespace of its own, made by the child itself (no `unshare` or `mount` needed).
/// Needs root ([`require_masking_proc`]). The runtime base is one of its own (short enough
/// for sockets): the probe's cache of this machine says a fresh `/proc` works, and paddock
/// must look again.
pub fn without_fresh_proc(sc: &Scratch, args: &[&str]) -> Output {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::process::CommandExt;
    let name = sc.root.file_name().unwrap_or_default().to_string_lossy().into_owned();
    let runtime = PathBuf::from(format!("/var/tmp/pdk-{name}"));
    let _ = std::fs::remove_dir_all(&runtime);
    std::fs::create_dir_all(&runtime).unwrap();
    let masked = ["acpi", "bus", "driver", "fs", "irq", "sysvipc", "tty"]
        .iter()
        .map(|d| Path::new("/proc").join(d))
        .find(|d| d.is_dir())
        .expect("a directory of /proc to mask");
    let masked = std::ffi::CString::new(masked.as_os_str().as_bytes()).unwrap();
    let mut cmd = Command::new(paddock_bin());
    cmd.args(args)
        .current_dir(&sc.project)
        .env("HOME", &sc.home)
        .env("PADDOCK_ITEMIZE", itemize_mode())
        .env("TMPDIR", &runtime)
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("PADDOCK_LOG")
        .stdin(Stdio::null());
    // SAFETY: between fork and exec only system calls on data made before the fork.
    unsafe {
        cmd.pre_exec(move || {
            let check = |rc: libc::c_int| {
                if rc == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
            };
            check(libc::unshare(libc::CLONE_NEWNS))?;
            let none = std::ptr::null();
            check(libc::mount(
                none,
                c"/".as_ptr(),
                none,
                libc::MS_REC | libc::MS_PRIVATE,
                none.cast(),
            ))?;
            check(libc::mount(c"none".as_ptr(), masked.as_ptr(), c"tmpfs".as_ptr(), 0, none.cast()))
        });
    }
    let out = cmd.output().unwrap();
    let _ = std::fs::remove_dir_all(&runtime);
    out
}
