//! The host probe: collects the [`HostFacts`] plans are made from, and a [`CheckReport`] that
//! explains every missing piece in the user's terms (`paddock check`).
//!
//! Helpers are only ever taken from fixed absolute paths, owned by root and not writable by
//! anyone else: a `PATH` lookup could be hijacked by a directory an earlier task wrote
//! (POL-11). The probe runs a real sandboxed `true` (two short bwrap runs) and is memoized
//! per process ([`probe`]), so it costs nothing on the second call.

// The probe is the one place in this crate that starts helper programs: `bwrap --version`,
// a sandboxed `true`, `strace -V`, always by absolute path and with an empty environment.
#![allow(clippy::disallowed_methods)]

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use paddock_policy::HostFacts;
pub use paddock_policy::{Check, CheckReport, Status};

use bounded::output;

mod bounded;

/// Where bubblewrap may be, in order. Never looked up in `PATH` (POL-11).
pub const BWRAP_PATHS: &[&str] = &["/usr/bin/bwrap", "/usr/local/bin/bwrap", "/bin/bwrap"];
/// Where strace may be, in order.
pub const STRACE_PATHS: &[&str] = &["/usr/bin/strace", "/usr/local/bin/strace", "/bin/strace"];
/// Unix socket paths must fit in `sun_path` (108 bytes with the NUL).
pub const SOCKET_PATH_MAX: usize = 107;
/// Room a task needs below its runtime base for its own dir and socket names.
pub const RUNTIME_SUFFIX_ROOM: usize = 48;

/// What the probe found.
#[derive(Clone, Debug)]
pub struct Probe {
    /// Facts for planning.
    pub facts: HostFacts,
    /// The report for `paddock check`.
    pub report: CheckReport,
}

/// The probe of this host, collected now (a caller that needs it twice keeps it: nothing
/// is memoized in the process).
pub fn probe() -> Probe {
    collect()
}

/// The first bwrap of the probe's list that can be trusted (what [`facts`] finds when its
/// cache is valid), found without the rest of the probe. A run asks
/// for it before its command line is parsed.
pub fn trusted_bwrap() -> Option<paddock_policy::AbsPathBuf> {
    first_trusted_quietly(BWRAP_PATHS).and_then(paddock_policy::AbsPathBuf::new_lexical)
}

/// The first of `paths` that exists and can be trusted ([`trusted_helper`]), without saying
/// why the others cannot (the probe's [`first_trusted`] says).
fn first_trusted_quietly(paths: &'static [&'static str]) -> Option<&'static Path> {
    paths.iter().map(Path::new).find(|p| p.exists() && trusted_helper(p).is_ok())
}

/// The facts for planning a run, cheaply: from a cache of an earlier full probe when it is
/// still valid, else from [`probe`] (which refreshes the cache).
///
/// Only a fully positive probe (user namespaces and a fresh `/proc` work) is cached, and the
/// cache is keyed by the boot, the uid and the identity (inode, size, mtime) of the bwrap and
/// strace binaries. A cache a task forged (it lives in the runner's private runtime base)
/// can therefore only claim the strongest walls: if they are not really available, bwrap
/// fails and the run exits 125 without running the task; it can never switch on a weaker
/// mode (POL-13). `paddock check` always probes for real.
pub fn facts() -> HostFacts {
    read_cache().unwrap_or_else(|| probe().facts)
}

const CACHE_FILE: &str = "probe-v2";

fn file_id(path: &Path) -> String {
    std::fs::metadata(path).map_or_else(
        |_| "-".to_owned(),
        |m| format!("{}:{}:{}:{}", m.dev(), m.ino(), m.size(), m.mtime()),
    )
}

fn cache_key(bwrap: Option<&Path>, strace: Option<&Path>) -> String {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    // /dev/fuse's mode decides whether an unprivileged runner can observe.
    let fuse = std::fs::metadata(FUSE_DEVICE).map_or(0, |m| m.mode());
    format!(
        "boot={} uid={} bwrap={}@{} strace={}@{} fuse={fuse:o}",
        boot.trim(),
        nix_uid(),
        bwrap.map_or("-".into(), |p| p.display().to_string()),
        bwrap.map_or("-".into(), file_id),
        strace.map_or("-".into(), |p| p.display().to_string()),
        strace.map_or("-".into(), file_id),
    )
}

/// The cache file, if its directory is our own private one.
fn cache_path() -> Option<PathBuf> {
    let base = runtime_base();
    let meta = std::fs::symlink_metadata(&base).ok()?;
    (meta.is_dir() && meta.uid() == nix_uid() && meta.mode() & 0o077 == 0)
        .then(|| base.join(CACHE_FILE))
}

fn read_cache() -> Option<HostFacts> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let bwrap = trusted_bwrap()?;
    let bwrap = bwrap.as_path();
    let strace = first_trusted_quietly(STRACE_PATHS);
    let mut text = String::new();
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(cache_path()?)
        .ok()?
        .take(4096)
        .read_to_string(&mut text)
        .ok()?;
    let mut lines = text.lines();
    if lines.next()? != cache_key(Some(bwrap), strace) {
        return None;
    }
    let version = |s: &str| parse_version(s);
    let bwrap_version = version(lines.next()?.strip_prefix("bwrap-version=")?);
    let strace_seccomp_bpf = lines.next()? == "strace-seccomp-bpf=true";
    let observe = lines.next()? == "observe=true";
    let self_exe = std::env::current_exe().ok()?;
    Some(HostFacts {
        bwrap: Some(bwrap.to_path_buf()),
        bwrap_version,
        strace: strace.map(Path::to_path_buf),
        strace_seccomp_bpf,
        supervisor_exe: supervisor_beside(&self_exe),
        supervisor_nolibc_exe: nolibc_supervisor_beside(&self_exe),
        self_exe: Some(self_exe),
        fresh_proc: true,
        user_namespaces: true,
        uid: nix_uid(),
        sandbox_exec: false,
        observe,
        clone_mounts: crate::devices::can_clone(),
    })
}

fn write_cache(facts: &HostFacts) {
    let Some(path) = cache_path() else { return };
    if !(facts.fresh_proc && facts.user_namespaces) {
        // A negative probe invalidates what an earlier one cached.
        let _ = std::fs::remove_file(&path);
        return;
    }
    let v = facts.bwrap_version.map_or("-".to_owned(), |(a, b, c)| format!("{a}.{b}.{c}"));
    let text = format!(
        "{}\nbwrap-version={v}\nstrace-seccomp-bpf={}\nobserve={}\n",
        cache_key(facts.bwrap.as_deref(), facts.strace.as_deref()),
        facts.strace_seccomp_bpf,
        facts.observe
    );
    let _ = replace_private_file(&path, text.as_bytes());
}

/// Writes `bytes` to a new mode-0600 file beside `path` (never through a link) and renames
/// it over `path`, so that a reader never sees half a file; the temporary file is removed
/// when either step fails. For the caches paddock keeps in directories of its own.
pub fn replace_private_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)
        .and_then(|mut f| f.write_all(bytes))
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Says how paddock and the executables that run as the sandbox's supervisor are linked.
fn report_supervisor(report: &mut CheckReport, facts: &HostFacts) {
    if let Some(exe) = &facts.self_exe {
        let shown = exe.display();
        push_linking(
            report,
            "paddock",
            exe,
            format!(
                "{shown} is statically linked: its egress proxy resolves names through /etc/hosts and DNS only"
            ),
            format!("{shown} is dynamically linked"),
            "`cargo xtask build` links it statically (glibc 2.34 or later): every run starts about 0.6 ms sooner",
        );
    }
    match &facts.supervisor_exe {
        Some(path) => push_linking(
            report,
            "supervisor",
            path,
            format!("{} (statically linked) runs as the sandbox's pid 1", path.display()),
            format!("{} (dynamically linked) runs as the sandbox's pid 1", path.display()),
            "`cargo xtask build` links it statically: every run starts about 0.4 ms sooner",
        ),
        None => report.push(
            "supervisor",
            Status::Ok,
            format!("paddock re-executes itself as the sandbox's pid 1 (no {SUPERVISOR_EXE} next to it)"),
            Some("`cargo xtask build` puts a static paddock-supervisor next to paddock: every run starts about 0.5 ms sooner"),
        ),
    }
    let nolibc = crate::nolibc::SUPERVISOR_NOLIBC_EXE;
    // With `paddock-supervisor` beside it, it starts the observers' runs too.
    let runs = if facts.supervisor_exe.is_some() {
        "untraced runs, and of observed ones until their server starts"
    } else {
        "untraced runs"
    };
    match &facts.supervisor_nolibc_exe {
        Some(path) => push_linking(
            report,
            "untraced supervisor",
            path,
            format!("{} (no C library) runs as the pid 1 of {runs}", path.display()),
            format!("{} (linked with the C library) runs as the pid 1 of {runs}", path.display()),
            "`cargo xtask build` builds it without a C library: untraced runs start about 0.3 ms sooner",
        ),
        None => report.push(
            "untraced supervisor",
            Status::Ok,
            format!("untraced runs start the same supervisor (no {nolibc} next to paddock)"),
            Some("`cargo xtask build` puts paddock-supervisor-nolibc next to paddock (x86-64): untraced runs start about 0.3 ms sooner"),
        ),
    }
}

/// One line on how the executable at `path` is linked: `statically` when it names no dynamic
/// loader, else `dynamically` with the `fix`.
fn push_linking(
    report: &mut CheckReport,
    name: &'static str,
    path: &Path,
    statically: String,
    dynamically: String,
    fix: &str,
) {
    if dynamic_interpreter(path) == Some(false) {
        report.push(name, Status::Ok, statically, None);
    } else {
        report.push(name, Status::Ok, dynamically, Some(fix));
    }
}

/// Whether the ELF executable at `path` names a dynamic loader (has a `PT_INTERP` program
/// header); `None` when it cannot be read as a 64-bit little-endian ELF file.
pub fn dynamic_interpreter(path: &Path) -> Option<bool> {
    use std::io::Read;
    const PT_INTERP: u32 = 3;
    let mut head = vec![0u8; 4096];
    let n = std::fs::File::open(path).and_then(|mut f| f.read(&mut head)).ok()?;
    head.truncate(n);
    let u16_at = |at: usize| head.get(at..at + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let u32_at =
        |at: usize| head.get(at..at + 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    let u64_at =
        |at: usize| head.get(at..at + 8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes);
    // ELFCLASS64, little endian.
    if head.get(..6) != Some(b"\x7fELF\x02\x01".as_slice()) {
        return None;
    }
    let phoff = usize::try_from(u64_at(0x20)?).ok()?;
    let phentsize = usize::from(u16_at(0x36)?);
    let phnum = usize::from(u16_at(0x38)?);
    let mut interp = false;
    for i in 0..phnum {
        interp |= u32_at(phoff + i * phentsize)? == PT_INTERP;
    }
    Some(interp)
}

use crate::SUPERVISOR_EXE;

/// The dedicated supervisor next to `exe` ([`SUPERVISOR_EXE`]), when it can be trusted
/// (`helper_beside`).
pub fn supervisor_beside(exe: &Path) -> Option<PathBuf> {
    helper_beside(exe, SUPERVISOR_EXE)
}

/// The supervisor without a C library next to `exe`
/// ([`crate::nolibc::SUPERVISOR_NOLIBC_EXE`]), when it can be trusted (`helper_beside`).
/// It is built for x86-64 alone: elsewhere it is never used.
pub fn nolibc_supervisor_beside(exe: &Path) -> Option<PathBuf> {
    if cfg!(target_arch = "x86_64") {
        helper_beside(exe, crate::nolibc::SUPERVISOR_NOLIBC_EXE)
    } else {
        None
    }
}

/// `paddock-supervisor` next to `exe`, when `paddock-supervisor-nolibc` is there too: an
/// observed run may then be started by the second and served by the first's copy nobody
/// may read (`crate::nolibc::with_notifier`).
pub fn notifier_beside(exe: &Path) -> Option<PathBuf> {
    nolibc_supervisor_beside(exe)?;
    supervisor_beside(exe)
}

/// [`notifier_beside`] this process's executable.
pub fn notifier_beside_this_process() -> Option<PathBuf> {
    notifier_beside(&std::env::current_exe().ok()?)
}

/// [`notifier_beside`] as `facts` found it (or as an embedding program named its
/// supervisors): `paddock-supervisor`, when `paddock-supervisor-nolibc` is there too.
pub fn notifier_of(facts: &paddock_policy::HostFacts) -> Option<&Path> {
    facts.supervisor_nolibc_exe.as_ref().and(facts.supervisor_exe.as_deref())
}

/// A supervisor named by an embedding program: the canonical path of a regular executable
/// file owned by this process's user or root and writable by no one else (it runs
/// unfiltered as the sandbox's pid 1), or why it is not one.
pub fn trusted_supervisor(path: &Path) -> Result<PathBuf, String> {
    use std::os::unix::fs::MetadataExt;
    let real = std::fs::canonicalize(path).map_err(|e| e.to_string())?;
    let meta = std::fs::metadata(&real).map_err(|e| e.to_string())?;
    let euid = nix::unistd::geteuid().as_raw();
    if !meta.is_file() || meta.mode() & 0o111 == 0 {
        return Err("not an executable file".into());
    }
    if meta.uid() != euid && meta.uid() != 0 {
        return Err(format!("owned by uid {}, neither this user nor root", meta.uid()));
    }
    if meta.mode() & 0o022 != 0 {
        return Err("writable by others than its owner".into());
    }
    Ok(real)
}

/// The executable `name` next to `exe`, when it can be trusted as much as `exe` itself: a
/// regular executable file, owned by `exe`'s owner (or root), writable by nobody else. A
/// supervisor runs unfiltered as the sandbox's pid 1.
fn helper_beside(exe: &Path, name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let candidate = exe.parent()?.join(name);
    let meta = std::fs::metadata(&candidate).ok()?;
    let owner = std::fs::metadata(exe).ok()?.uid();
    let trusted = meta.is_file()
        && (meta.uid() == owner || meta.uid() == 0)
        && meta.mode() & 0o022 == 0
        && meta.mode() & 0o111 != 0;
    trusted.then_some(candidate)
}

pub fn trusted_helper(path: &Path) -> Result<PathBuf, String> {
    let real = std::fs::canonicalize(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let meta = std::fs::metadata(&real).map_err(|e| format!("{}: {e}", real.display()))?;
    if !meta.is_file() {
        return Err(format!("{} is not a regular file", real.display()));
    }
    if meta.uid() != 0 {
        return Err(match Unmapped::owner(meta.uid()) {
            Some(shown) => format!(
                "{} shows as owned by uid {shown}, the id of a user this user namespace does \
                 not map: paddock runs inside another sandbox or a container that does not map \
                 root, and cannot tell that root owns it",
                real.display()
            ),
            None => format!("{} is not owned by root", real.display()),
        });
    }
    if meta.mode() & 0o022 != 0 {
        return Err(format!("{} is writable by group or others", real.display()));
    }
    Ok(real)
}

/// A file owner this process cannot see: in a user namespace that does not map the owner,
/// `stat` shows the kernel's overflow uid (`/proc/sys/kernel/overflowuid`, 65534 by default).
#[derive(Debug)]
struct Unmapped;

impl Unmapped {
    /// `Some(uid)` when `uid` is the overflow uid and this process is in a user namespace
    /// that does not map every uid (`/proc/self/uid_map` is not the initial namespace's
    /// identity map).
    fn owner(uid: u32) -> Option<u32> {
        let overflow = std::fs::read_to_string("/proc/sys/kernel/overflowuid")
            .ok()
            .and_then(|t| t.trim().parse::<u32>().ok())
            .unwrap_or(65534);
        let map = std::fs::read_to_string("/proc/self/uid_map").ok()?;
        (uid == overflow && !is_identity_map(&map)).then_some(uid)
    }
}

/// Whether a `uid_map` is the initial user namespace's: `0 0 4294967295`.
fn is_identity_map(map: &str) -> bool {
    let fields: Vec<&str> = map.split_whitespace().collect();
    fields == ["0", "0", "4294967295"]
}

/// The advice for helpers found but refused: installing them again does not help when the
/// reason is a user namespace that hides their owner.
fn helper_fix(problems: &[String], install: &'static str) -> &'static str {
    if problems.iter().any(|p| p.contains("does not map")) {
        "run paddock outside the enclosing sandbox, or in a container whose user namespace maps \
         root (the owner of /usr/bin)"
    } else {
        install
    }
}

/// The first trusted helper among `paths`, and why the others present were refused (one
/// line per file: several paths may lead to the same one).
fn first_trusted(paths: &[&str]) -> (Option<PathBuf>, Vec<String>) {
    let mut problems: Vec<String> = Vec::new();
    for p in paths {
        let path = Path::new(p);
        if !path.exists() {
            continue;
        }
        match trusted_helper(path) {
            Ok(_) => return (Some(path.to_path_buf()), problems),
            Err(e) if !problems.contains(&e) => problems.push(e),
            Err(_) => {}
        }
    }
    (None, problems)
}

/// Parses the first `X.Y[.Z]` in a version line.
pub fn parse_version(text: &str) -> Option<(u32, u32, u32)> {
    let word =
        text.split_whitespace().find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()))?;
    let mut parts =
        word.split('.').map(|p| p.trim_matches(|c: char| !c.is_ascii_digit()).parse::<u32>().ok());
    let major = parts.next()??;
    let minor = parts.next().flatten().unwrap_or(0);
    let patch = parts.next().flatten().unwrap_or(0);
    Some((major, minor, patch))
}

const USERNS_FIX: &str = "enable unprivileged user namespaces: `sudo sysctl -w kernel.unprivileged_userns_clone=1` \
     (Debian), or on Ubuntu 23.10+ `sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`; inside a \
     container, run it with user namespaces allowed (e.g. podman, or docker --security-opt seccomp=unconfined)";

const USERNS_FIX_MAX: &str = "user namespaces are switched off here (user.max_user_namespaces = 0): \
     `sudo sysctl -w user.max_user_namespaces=15000` (and the same in /etc/sysctl.d/ to keep it)";

const USERNS_FIX_APPARMOR: &str = "AppArmor restricts unprivileged user namespaces here (Ubuntu 23.10+): \
     `sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`, or an AppArmor profile for bwrap \
     that allows `userns`";

const USERNS_FIX_DEBIAN: &str = "unprivileged user namespaces are switched off here \
     (kernel.unprivileged_userns_clone = 0): `sudo sysctl -w kernel.unprivileged_userns_clone=1`";

/// The fix for missing user namespaces: the sysctl that switches them off here, when one
/// does, else every usual cause.
fn userns_fix() -> &'static str {
    let reads = |path: &str, value: &str| {
        std::fs::read_to_string(path).is_ok_and(|text| text.trim() == value)
    };
    if reads("/proc/sys/user/max_user_namespaces", "0") {
        USERNS_FIX_MAX
    } else if reads("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "1") {
        USERNS_FIX_APPARMOR
    } else if reads("/proc/sys/kernel/unprivileged_userns_clone", "0") {
        USERNS_FIX_DEBIAN
    } else {
        USERNS_FIX
    }
}

fn collect() -> Probe {
    let self_exe = std::env::current_exe().ok();
    let mut facts = HostFacts {
        uid: nix_uid(),
        supervisor_exe: self_exe.as_deref().and_then(supervisor_beside),
        supervisor_nolibc_exe: self_exe.as_deref().and_then(nolibc_supervisor_beside),
        self_exe,
        clone_mounts: crate::devices::can_clone(),
        ..HostFacts::default()
    };
    let mut report = CheckReport::default();

    let (bwrap, problems) = first_trusted(BWRAP_PATHS);
    match &bwrap {
        Some(path) => {
            let version = output(path, &["--version"]).and_then(|(_, text)| parse_version(&text));
            facts.bwrap_version = version;
            let shown = version.map(|(a, b, c)| format!("{a}.{b}.{c}")).unwrap_or_else(|| "unknown version".to_owned());
            let old = version.is_some_and(|v| v < (0, 8, 0));
            report.push(
                "bwrap",
                if old { Status::Fail } else { Status::Ok },
                format!("bubblewrap {shown} at {}", path.display()),
                old.then_some("upgrade bubblewrap to 0.8.0 or newer (--disable-userns)"),
            );
        }
        None => report.push(
            "bwrap",
            Status::Fail,
            if problems.is_empty() {
                format!("bubblewrap not found at {}", BWRAP_PATHS.join(", "))
            } else {
                format!("no trusted bubblewrap: {}", problems.join("; "))
            },
            Some(helper_fix(
                &problems,
                "install bubblewrap: `sudo apt install bubblewrap` (Debian/Ubuntu) or `sudo dnf install bubblewrap` (Fedora)",
            )),
        ),
    }
    facts.bwrap = bwrap.clone();
    report_supervisor(&mut report, &facts);

    if let Some(bwrap) = &bwrap {
        let base = ["--ro-bind", "/", "/", "--dev", "/dev", "--die-with-parent", "--new-session"];
        let userns = run_sandboxed(
            bwrap,
            &["--unshare-user", "--disable-userns"],
            &base,
            &["--tmpfs", "/proc"],
        );
        facts.user_namespaces = userns.is_ok();
        match &userns {
            Ok(()) => {
                report.push("user-namespaces", Status::Ok, "user namespaces work".to_owned(), None)
            }
            Err(e) if facts.uid == 0 => report.push(
                "user-namespaces",
                Status::Warn,
                format!("no user namespace ({e}); running as root, bwrap works without one"),
                Some(userns_fix()),
            ),
            Err(e) => report.push(
                "user-namespaces",
                Status::Fail,
                format!("cannot create a user namespace: {e}"),
                Some(userns_fix()),
            ),
        }
        let userns_args: &[&str] =
            if facts.user_namespaces { &["--unshare-user", "--disable-userns"] } else { &[] };
        let proc = run_sandboxed(
            bwrap,
            userns_args,
            &base,
            &["--unshare-pid", "--as-pid-1", "--proc", "/proc"],
        );
        facts.fresh_proc = proc.is_ok();
        match proc {
            Ok(()) => report.push("sandbox", Status::Ok, "a sandboxed `true` ran with a fresh /proc".to_owned(), None),
            Err(e) => report.push(
                "sandbox",
                Status::Fail,
                format!("a sandboxed `true` with a fresh /proc failed: {e}"),
                Some("paddock needs to mount a fresh /proc in a new pid namespace; inside a container run it \
                      privileged or with user namespaces, or set `weaker-when-nested = true` to run with an empty /proc"),
            ),
        }
    }

    let (strace, strace_problems) = first_trusted(STRACE_PATHS);
    match &strace {
        Some(path) => {
            let version = output(path, &["-V"]).and_then(|(_, text)| parse_version(&text));
            facts.strace_seccomp_bpf = version.is_some_and(|v| v >= (5, 3, 0));
            let shown = version
                .map(|(a, b, c)| format!("{a}.{b}.{c}"))
                .unwrap_or_else(|| "unknown version".to_owned());
            report.push(
                "strace",
                Status::Ok,
                format!(
                    "strace {shown} at {}{}",
                    path.display(),
                    if facts.strace_seccomp_bpf {
                        " (--seccomp-bpf)"
                    } else {
                        " (no --seccomp-bpf: slower itemizing)"
                    }
                ),
                None,
            );
        }
        None => report.push(
            "strace",
            Status::Warn,
            if strace_problems.is_empty() {
                "strace not found: denials are enforced but not itemized".to_owned()
            } else {
                format!(
                    "no trusted strace: {}; denials are enforced but not itemized",
                    strace_problems.join("; ")
                )
            },
            Some(helper_fix(
                &strace_problems,
                "install strace (`sudo apt install strace`) to get itemized violation reports",
            )),
        ),
    }
    facts.strace = strace;

    let observe = observe_available(&facts);
    facts.observe = observe.is_ok();
    let (status, message, fix) = match (&observe, &facts.strace) {
        (Ok(()), _) => (
            Status::Ok,
            "--itemize auto observes denials (a FUSE mount on deny anchors, seccomp notifications on writes)"
                .to_owned(),
            None,
        ),
        (Err((why, fix)), Some(_)) => (
            Status::Warn,
            format!(
                "--itemize auto uses strace (slower){}: the observers are unavailable: {why}",
                if !facts.strace_seccomp_bpf {
                    ""
                } else if crate::shim::signal_scoping_available() {
                    ", inside the sandbox"
                } else {
                    ", around bubblewrap (slower still: Landlock cannot scope signals here, Linux 6.12)"
                }
            ),
            Some(*fix),
        ),
        (Err((why, fix)), None) => (
            Status::Warn,
            format!("--itemize auto cannot itemize: no strace, and the observers are unavailable: {why}"),
            Some(*fix),
        ),
    };
    report.push("itemize", status, message, fix);

    let base = runtime_base();
    let tmpdir_too_long = std::env::var_os("TMPDIR")
        .is_some_and(|d| d.len() + RUNTIME_SUFFIX_ROOM > SOCKET_PATH_MAX && !base.starts_with(&d));
    if tmpdir_too_long {
        report.push(
            "runtime-dir",
            Status::Warn,
            format!(
                "TMPDIR is too long for unix socket paths (over {} bytes with a task's names); using {}",
                SOCKET_PATH_MAX - RUNTIME_SUFFIX_ROOM,
                base.display()
            ),
            Some("set TMPDIR (or XDG_RUNTIME_DIR) to a short directory such as /tmp"),
        );
    } else if !writable_ancestor(&base) {
        report.push(
            "runtime-dir",
            Status::Fail,
            format!(
                "{} cannot be created: its nearest existing parent is not writable",
                base.display()
            ),
            Some(
                "set TMPDIR (or XDG_RUNTIME_DIR) to a short directory you can write, such as /tmp",
            ),
        );
    } else {
        report.push(
            "runtime-dir",
            Status::Ok,
            format!("task runtime dirs go under {}", base.display()),
            None,
        );
    }
    report.push(
        "user",
        Status::Ok,
        if facts.uid == 0 {
            "running as root".to_owned()
        } else {
            format!("running as uid {}", facts.uid)
        },
        None,
    );
    write_cache(&facts);
    Probe { facts, report }
}

/// The FUSE device the observer filesystem is served on.
pub const FUSE_DEVICE: &str = "/dev/fuse";

/// Whether `--itemize observe` can work here, or why not and the fix. Cheap checks only: the
/// FUSE device opens read-write, the kernel has seccomp user notifications, and the runner
/// can make the private mount namespace the observer is mounted in (root, or user
/// namespaces). A run whose observer still fails to start falls back to strace with a note.
fn observe_available(facts: &HostFacts) -> Result<(), (String, &'static str)> {
    if std::fs::OpenOptions::new().read(true).write(true).open(FUSE_DEVICE).is_err() {
        let why = match std::fs::metadata(FUSE_DEVICE) {
            Ok(_) => format!("{FUSE_DEVICE} cannot be opened read-write by uid {}", facts.uid),
            Err(_) => format!("{FUSE_DEVICE} does not exist"),
        };
        let fix = "make /dev/fuse usable: `sudo modprobe fuse` and `sudo chmod 0666 /dev/fuse` (what Debian's udev rule does); inside a container, pass --device /dev/fuse";
        return Err((why, fix));
    }
    let action = libc::SECCOMP_RET_USER_NOTIF;
    // SAFETY: SECCOMP_GET_ACTION_AVAIL only reads the u32 the pointer refers to, which lives
    // for the duration of the call.
    let rc = unsafe {
        libc::syscall(libc::SYS_seccomp, libc::SECCOMP_GET_ACTION_AVAIL, 0, &action as *const u32)
    };
    if rc != 0 {
        return Err((
            "the kernel has no seccomp user notifications (Linux 5.0 or newer)".to_owned(),
            "upgrade the kernel, or use --itemize strace",
        ));
    }
    if let Err(why) = crate::notify::kernel_supported() {
        return Err((why, "upgrade the kernel (Linux 5.5 or newer), or use --itemize strace"));
    }
    if facts.uid != 0 && !facts.user_namespaces {
        return Err((
            "the observer is mounted in a user namespace of paddock's own, and user namespaces are unavailable"
                .to_owned(),
            userns_fix(),
        ));
    }
    Ok(())
}

/// The directory task runtime dirs are made under: `$XDG_RUNTIME_DIR/paddock` when it is set,
/// absolute and short, else `$TMPDIR` or `/tmp`, as `paddock-<uid>`.
pub fn runtime_base() -> PathBuf {
    let uid = nix_uid();
    if let Some(dir) = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from)
        && dir.is_absolute()
        && dir.as_os_str().len() + RUNTIME_SUFFIX_ROOM <= SOCKET_PATH_MAX
        && dir.is_dir()
    {
        return dir.join("paddock");
    }
    let tmp = std::env::var_os("TMPDIR")
        .map(PathBuf::from)
        .filter(|d| d.is_absolute() && d.as_os_str().len() + RUNTIME_SUFFIX_ROOM <= SOCKET_PATH_MAX)
        .unwrap_or_else(|| "/tmp".into());
    tmp.join(format!("paddock-{uid}"))
}

/// Whether `path` exists as a writable directory, or its nearest existing ancestor is one.
fn writable_ancestor(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Some(existing) = path.ancestors().find(|p| p.exists()) else { return false };
    let Ok(c) = std::ffi::CString::new(existing.as_os_str().as_bytes()) else { return false };
    // SAFETY: access with a valid NUL-terminated path.
    existing.is_dir() && unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) } == 0
}

fn nix_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

fn run_sandboxed(
    bwrap: &Path,
    userns: &[&str],
    base: &[&str],
    extra: &[&str],
) -> Result<(), String> {
    let mut args: Vec<&str> = vec!["--unshare-all"];
    args.extend_from_slice(userns);
    args.extend_from_slice(base);
    args.extend_from_slice(extra);
    args.push("true");
    match output(bwrap, &args) {
        Some((true, _)) => Ok(()),
        Some((false, text)) => Err(text.lines().last().unwrap_or("failed").trim().to_owned()),
        None => Err("cannot start bubblewrap".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse() {
        assert_eq!(parse_version("bubblewrap 0.8.0\n"), Some((0, 8, 0)));
        assert_eq!(parse_version("strace -- version 6.1\nCopyright"), Some((6, 1, 0)));
        assert_eq!(parse_version("nothing"), None);
    }

    #[test]
    fn a_positive_probe_is_cached_and_a_forged_key_is_ignored() {
        use std::os::unix::fs::DirBuilderExt;
        let base = runtime_base();
        let _ = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&base);
        let full = probe();
        let cached = read_cache();
        if full.facts.fresh_proc && full.facts.user_namespaces && cache_path().is_some() {
            let cached = cached.expect("a positive probe is cached");
            assert_eq!(cached.bwrap, full.facts.bwrap);
            assert_eq!(cached.bwrap_version, full.facts.bwrap_version);
            assert_eq!(cached.strace_seccomp_bpf, full.facts.strace_seccomp_bpf);
            assert_eq!(facts().bwrap, full.facts.bwrap);
            // A cache for another boot or another bwrap is not used.
            let path = cache_path().unwrap();
            let text = std::fs::read_to_string(&path).unwrap();
            std::fs::write(&path, text.replacen("boot=", "boot=x", 1)).unwrap();
            assert!(read_cache().is_none());
            std::fs::write(&path, text).unwrap();
        } else {
            assert!(cached.is_none() || cache_path().is_none());
            paddock_test_support::skip(
                format!("cache check: this host cannot sandbox fully ({:?})", full.report.checks),
                None,
            );
        }
    }

    #[test]
    fn only_the_initial_namespace_has_the_identity_map() {
        assert!(is_identity_map("         0          0 4294967295\n"));
        assert!(!is_identity_map("         0       1000          1\n"));
        assert!(!is_identity_map(""));
    }

    #[test]
    fn a_hidden_owner_gets_its_own_advice() {
        let hidden = vec![
            "/usr/bin/bwrap shows as owned by uid 65534, the id of a user this user namespace \
             does not map: ..."
                .to_owned(),
        ];
        assert!(helper_fix(&hidden, "install it").starts_with("run paddock outside"));
        let plain = vec!["/usr/bin/bwrap is not owned by root".to_owned()];
        assert_eq!(helper_fix(&plain, "install it"), "install it");
    }

    #[test]
    fn untrusted_helpers_are_refused() {
        let dir = std::env::temp_dir().join(format!("paddock-probe-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("bwrap");
        std::fs::write(&f, "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(trusted_helper(&f).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn dynamic_executables_name_their_loader() {
        assert_eq!(dynamic_interpreter(Path::new("/bin/sh")), Some(true));
        let text = std::env::temp_dir().join(format!("paddock-elf-test-{}", std::process::id()));
        std::fs::write(&text, "not an executable").unwrap();
        assert_eq!(dynamic_interpreter(&text), None);
        std::fs::remove_file(&text).unwrap();
        assert_eq!(dynamic_interpreter(Path::new("/nonexistent")), None);
    }

    #[test]
    fn the_supervisors_beside_paddock_are_used_only_when_no_one_else_can_write_them() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("paddock-beside-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let exe = dir.join("paddock");
        std::fs::write(&exe, "").unwrap();
        type Finder = fn(&Path) -> Option<PathBuf>;
        let finders: [(&str, Finder); 2] = [
            (SUPERVISOR_EXE, supervisor_beside),
            (crate::nolibc::SUPERVISOR_NOLIBC_EXE, nolibc_supervisor_beside),
        ];
        for (name, beside) in finders {
            assert_eq!(beside(&exe), None, "none there");
            let sup = dir.join(name);
            std::fs::write(&sup, "").unwrap();
            let mode =
                |m| std::fs::set_permissions(&sup, std::fs::Permissions::from_mode(m)).unwrap();
            mode(0o755);
            assert_eq!(beside(&exe), Some(sup.clone()), "{name}");
            mode(0o775);
            assert_eq!(beside(&exe), None, "group-writable");
            mode(0o757);
            assert_eq!(beside(&exe), None, "world-writable");
            mode(0o644);
            assert_eq!(beside(&exe), None, "not executable");
            std::fs::remove_file(&sup).unwrap();
            std::fs::create_dir(&sup).unwrap();
            assert_eq!(beside(&exe), None, "a directory");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
