//! What every suite of paddock asks before it skips a test.
//!
//! One rule decides whether a test may skip at all ([`required`]): under `CI` (any value but
//! empty, `0`, `false` or `no`) or `PADDOCK_REQUIRE_OS_TESTS` (same rule), a test that cannot
//! run fails, unless what stops it is a [`Fact`] the pass names on purpose in
//! `PADDOCK_PASS_FACTS` (say, strace hidden to prove the observers need none). `cargo xtask
//! ci` sets `CI` itself and names each pass's facts.
//!
//! Every skip is printed (`SKIPPED: test: reason`) and, when `PADDOCK_SKIP_LOG` names a file,
//! appended to it as one line (`test`, reason, fact, tab-separated), from which `xtask`
//! prints one skip summary per pass ([`read_log`]).
//!
//! Every task gets a private `/tmp`, which hides a checkout cloned under `/tmp` from the
//! sandbox: the test binaries and scratch trees the tests hand to it then come from
//! [`visible_dir`] and [`visible_exe`], outside `/tmp`.

use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Set by CI systems; see [`required`].
pub const CI_ENV: &str = "CI";
/// Makes every OS test required outside CI too.
pub const REQUIRE_ENV: &str = "PADDOCK_REQUIRE_OS_TESTS";
/// The facts this pass names, comma-separated ([`Fact::name`]).
pub const FACTS_ENV: &str = "PADDOCK_PASS_FACTS";
/// A file each skip is appended to, for the pass's summary.
pub const SKIP_LOG_ENV: &str = "PADDOCK_SKIP_LOG";

/// Whether an environment value says yes: anything but unset, empty, `0`, `false`, `no`.
pub fn truthy(value: Option<&std::ffi::OsStr>) -> bool {
    value.and_then(|v| v.to_str()).is_some_and(|v| {
        let v = v.trim();
        !(v.is_empty()
            || v == "0"
            || v.eq_ignore_ascii_case("false")
            || v.eq_ignore_ascii_case("no"))
    })
}

/// Whether every test must run here: `CI` or `PADDOCK_REQUIRE_OS_TESTS` is set to a yes
/// ([`truthy`]). The one rule of every suite and of `xtask`.
pub fn required() -> bool {
    truthy(std::env::var_os(CI_ENV).as_deref()) || truthy(std::env::var_os(REQUIRE_ENV).as_deref())
}

/// A condition of a whole pass that its runner sets up on purpose, and names in
/// [`FACTS_ENV`]: a test it stops may skip even where tests are required.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fact {
    /// strace is hidden in this pass (a bind of `/dev/null`), to prove the observers need none.
    StraceHidden,
    /// `/dev/fuse` is hidden in this pass, so that `--itemize auto` falls back to strace.
    FuseHidden,
    /// The pass runs as a user without root (labs, mount namespaces of its own need root).
    Unprivileged,
    /// The strace corpus (beside the repository, not in it: `../shared/strace-corpus`) is
    /// not there, as in a clone of the repository alone.
    StraceCorpusAbsent,
    /// User namespaces cannot be created in this pass (the container matrix's `no-userns`).
    UsernsUnavailable,
    /// The kernel answers the Landlock calls with `ENOSYS` in this pass (`no-landlock`).
    LandlockUnavailable,
    /// No Rust toolchain where the pass runs (a container image of the matrix).
    ToolchainAbsent,
    /// The pass runs as root without `CAP_SYS_ADMIN` (the matrix's `root-no-caps`): tests
    /// whose own set-up needs root's capabilities (labs) cannot make it.
    NoSysAdmin,
    /// bubblewrap is older than 0.8 (the matrix's `old-bwrap`): tests that use it as a tool
    /// with `--disable-userns` cannot.
    OldBwrap,
}

impl Fact {
    /// Every fact, for parsing.
    pub const ALL: [Fact; 9] = [
        Fact::StraceHidden,
        Fact::FuseHidden,
        Fact::Unprivileged,
        Fact::StraceCorpusAbsent,
        Fact::UsernsUnavailable,
        Fact::LandlockUnavailable,
        Fact::ToolchainAbsent,
        Fact::NoSysAdmin,
        Fact::OldBwrap,
    ];

    /// The name a pass lists in [`FACTS_ENV`].
    pub fn name(self) -> &'static str {
        match self {
            Fact::StraceHidden => "strace-hidden",
            Fact::FuseHidden => "fuse-hidden",
            Fact::Unprivileged => "unprivileged",
            Fact::StraceCorpusAbsent => "strace-corpus-absent",
            Fact::UsernsUnavailable => "userns-unavailable",
            Fact::LandlockUnavailable => "landlock-unavailable",
            Fact::ToolchainAbsent => "toolchain-absent",
            Fact::NoSysAdmin => "no-sys-admin",
            Fact::OldBwrap => "old-bwrap",
        }
    }

    /// Whether this pass names the fact.
    pub fn of_this_pass(self) -> bool {
        std::env::var(FACTS_ENV).is_ok_and(|v| v.split(',').any(|f| f.trim() == self.name()))
    }
}

impl fmt::Display for Fact {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The running test's name: libtest names each test's thread after it.
pub fn current_test() -> String {
    match std::thread::current().name() {
        Some(name) if name != "main" => name.to_owned(),
        _ => "(main)".to_owned(),
    }
}

/// Skips the running test (named by its thread, [`current_test`]) because of `reason`:
/// prints and records it. Where tests are required ([`required`]) this panics instead,
/// unless `fact` is given and named by the pass.
#[track_caller]
pub fn skip(reason: impl fmt::Display, fact: Option<Fact>) {
    skip_test(&current_test(), reason, fact);
}

/// [`skip`] for a harness of its own, which names the test.
#[track_caller]
pub fn skip_test(test: &str, reason: impl fmt::Display, fact: Option<Fact>) {
    let reason = reason.to_string().replace(['\t', '\n'], " ");
    let named = fact.filter(|f| f.of_this_pass());
    if named.is_none() && required() {
        let because = match fact {
            Some(f) => format!(" (a skip for `{f}` needs the pass to name it in {FACTS_ENV})"),
            None => String::new(),
        };
        panic!(
            "{test}: required here ({CI_ENV} or {REQUIRE_ENV}) but cannot run: {reason}{because}"
        );
    }
    let fact_name = named.or(fact).map_or("-", Fact::name);
    eprintln!("SKIPPED: {test}: {reason} [{fact_name}]");
    if let Some(log) = std::env::var_os(SKIP_LOG_ENV).filter(|l| !l.is_empty()) {
        let line = format!("{test}\t{reason}\t{fact_name}\n");
        // One write with O_APPEND: lines of parallel tests do not interleave.
        let written = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&log)
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if let Err(e) = written {
            eprintln!("cannot record the skip in {}: {e}", Path::new(&log).display());
        }
    }
}

/// Whether `what` is usable here; skips (see [`skip`]) when not. For the common shape
/// `if !available(cond, reason) { return; }`.
#[track_caller]
pub fn available(present: bool, reason: impl fmt::Display) -> bool {
    if !present {
        skip(reason, None);
    }
    present
}

/// Whether a sandboxed task's private `/tmp` hides `path`.
pub fn hidden_by_private_tmp(path: &Path) -> bool {
    path.starts_with("/tmp")
}

/// `preferred` (a scratch base: the target directory's tmp), unless a task's private `/tmp`
/// would hide it (a checkout under `/tmp`): then `/var/tmp/paddock-tests-PID`, created, and
/// those of processes that are gone removed.
pub fn visible_dir(preferred: &Path) -> PathBuf {
    if !hidden_by_private_tmp(preferred) {
        return preferred.to_path_buf();
    }
    let base = Path::new("/var/tmp");
    if let Ok(entries) = std::fs::read_dir(base) {
        for e in entries.flatten() {
            let name = e.file_name();
            let pid = name.to_str().and_then(|n| n.strip_prefix("paddock-tests-"));
            if pid.is_some_and(|p| !Path::new("/proc").join(p).exists()) {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    let dir = base.join(format!("paddock-tests-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    dir
}

/// `exe`, or, when a task's private `/tmp` would hide it, a copy in [`visible_dir`] (made
/// once per process and name), so that a sandbox can run it.
pub fn visible_exe(exe: &Path) -> PathBuf {
    if !hidden_by_private_tmp(exe) {
        return exe.to_path_buf();
    }
    let Some(name) = exe.file_name() else { return exe.to_path_buf() };
    let copy = visible_dir(exe).join(name);
    // Copied under a temporary name and renamed: parallel tests never see half a binary.
    if !copy.exists() {
        let part = copy.with_extension(format!("part-{:?}", std::thread::current().id()));
        let copied = std::fs::copy(exe, &part).and_then(|_| std::fs::rename(&part, &copy));
        if let Err(e) = copied {
            let _ = std::fs::remove_file(&part);
            eprintln!("cannot copy {} out of /tmp: {e}", exe.display());
            return exe.to_path_buf();
        }
    }
    copy
}

/// One recorded skip.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skip {
    /// The test's name.
    pub test: String,
    /// Why it skipped.
    pub reason: String,
    /// The fact it named, if any.
    pub fact: Option<Fact>,
}

/// The skips recorded in a log written by [`skip`] (none when it does not exist).
pub fn read_log(path: &Path) -> Vec<Skip> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let mut parts = l.splitn(3, '\t');
            let test = parts.next().unwrap_or_default().to_owned();
            let reason = parts.next().unwrap_or_default().to_owned();
            let fact = parts.next().and_then(|n| Fact::ALL.into_iter().find(|f| f.name() == n));
            Skip { test, reason, fact }
        })
        .collect()
}

/// Where paddock looks for bubblewrap.
pub const BWRAP_PATHS: [&str; 2] = ["/usr/bin/bwrap", "/usr/local/bin/bwrap"];

/// Whether bubblewrap is installed; when it is not, skips (a failure where tests are
/// required).
pub fn require_bubblewrap() -> bool {
    let found = BWRAP_PATHS.iter().any(|p| Path::new(p).exists());
    if !found {
        skip("bubblewrap is not installed (apt-get install bubblewrap)", None);
    }
    found
}

/// The children of process `pid`, of every thread (`/proc/PID/task/TID/children`: a
/// process that supervises tasks from threads has children of several).
pub fn children_of(pid: u32) -> Vec<u32> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten();
    tasks
        .flat_map(|t| {
            std::fs::read_to_string(t.path().join("children"))
                .unwrap_or_default()
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// A loopback TCP port that was free a moment ago and that no other call in this process
/// has returned: the kernel may hand the same ephemeral port to two `bind(:0)`s in a row
/// (about once in 16,000 pairs here), and a test that serves one port and proves another
/// unreachable must never get the same port twice, nor one a concurrent test serves.
///
/// # Panics
/// When no loopback port can be bound (a test helper: the test fails with the reason).
pub fn free_port() -> u16 {
    use std::collections::BTreeSet;
    use std::sync::Mutex;
    static GIVEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    // Listeners held until a fresh port is found, so that the kernel offers another one.
    let mut held = Vec::new();
    for _ in 0..1000 {
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0))
            .unwrap_or_else(|e| panic!("no free loopback port: {e}"));
        let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
        if port != 0 && given.insert(port) {
            return port;
        }
        held.push(listener);
    }
    panic!("no loopback port left that this process has not handed out");
}

/// Whether this process ignores `signal` (it inherited it ignored: a job started with
/// `nohup`, or in the background of a non-interactive shell, which ignores SIGINT and
/// SIGQUIT). A child's shell cannot trap a signal ignored on entry, so signal tests pick one
/// that is not.
#[cfg(unix)]
pub fn signal_ignored(signal: i32) -> bool {
    // SAFETY: a zeroed sigaction is a valid out-parameter; a null new action only queries.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(signal, std::ptr::null(), &mut old) == 0
            && old.sa_sigaction == libc::SIG_IGN
    }
}

/// SIGINT, or SIGTERM when this process inherited SIGINT ignored: a polite signal a task
/// started from here can trap, with its name for `trap`.
///
/// # Panics
/// When both are ignored: there is no polite signal to test with.
#[cfg(unix)]
pub fn polite_signal_not_ignored() -> (i32, &'static str) {
    [(libc::SIGINT, "INT"), (libc::SIGTERM, "TERM")]
        .into_iter()
        .find(|(sig, _)| !signal_ignored(*sig))
        .unwrap_or_else(|| panic!("SIGINT and SIGTERM both ignored: no polite signal to test with"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn yes_is_anything_but_empty_zero_false_or_no() {
        for yes in ["true", "1", "yes", "TRUE", "on"] {
            assert!(truthy(Some(OsStr::new(yes))), "{yes}");
        }
        for no in ["", " ", "0", "false", "False", "no"] {
            assert!(!truthy(Some(OsStr::new(no))), "{no:?}");
        }
        assert!(!truthy(None));
    }

    #[test]
    fn a_log_line_reads_back_with_its_fact() {
        let dir = std::env::temp_dir().join(format!("paddock-skiplog-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_default();
        let log = dir.join("log");
        std::fs::write(&log, "a\tno strace\tstrace-hidden\nb\tno curl\t-\n").unwrap_or_default();
        let skips = read_log(&log);
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(skips.len(), 2);
        assert_eq!(skips[0].fact, Some(Fact::StraceHidden));
        assert_eq!(skips[1], Skip { test: "b".into(), reason: "no curl".into(), fact: None });
    }

    #[test]
    fn free_ports_are_never_handed_out_twice() {
        let ports: Vec<u16> = (0..2000).map(|_| free_port()).collect();
        let distinct: std::collections::HashSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), ports.len());
    }

    #[test]
    fn every_fact_parses_back_from_its_name() {
        for f in Fact::ALL {
            assert_eq!(Fact::ALL.into_iter().find(|g| g.name() == f.name()), Some(f));
        }
    }
}
