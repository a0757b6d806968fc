//! Fixtures for the end-to-end suite.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use paddock_macos_seatbelt::MacosSeatbelt;
use paddock_policy::{
    AbsPathBuf, Backend, DenyAnchor, Exception, FileKind, IgnoreRules, ItemizeMode, NetworkPolicy,
    Origin, ProtectedPath, ProtectedState, ReportScope, ResolvedPolicy, SpawnPlan, Task,
    UnixSockets, WriteGrant,
};

/// Whether the OS sandbox can be used; skips loudly, or panics under CI.
pub fn require_os_sandbox() -> bool {
    match paddock_macos_seatbelt::macos::probe() {
        Ok(()) => true,
        Err(e) => {
            paddock_test_support::skip(format!("no usable macOS sandbox here: {e}"), None);
            false
        }
    }
}

pub fn abs(p: &Path) -> AbsPathBuf {
    AbsPathBuf::new_lexical(p).expect("absolute")
}

fn origin(key: &str) -> Origin {
    Origin::flag(format!("--{key}"))
}

/// A throw-away tree: `home` (with `.ssh/id_canary`), `home/proj` (a git-like project),
/// `outside`, and a runtime dir. Canonical paths (`/private/var/folders/...`).
pub struct Fixture {
    pub root: PathBuf,
    pub home: PathBuf,
    pub proj: PathBuf,
    pub outside: PathBuf,
    pub runtime: PathBuf,
}

impl Fixture {
    pub fn new(name: &str) -> Fixture {
        Fixture::under(&std::env::temp_dir(), name)
    }

    pub fn under(base: &Path, name: &str) -> Fixture {
        let base = fs::canonicalize(base).expect("temp dir");
        let root = base.join(format!("paddock-e2e-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let home = root.join("h");
        let proj = home.join("proj");
        let outside = root.join("outside");
        let runtime = root.join("rt");
        for d in [&proj.join(".git/hooks"), &home.join(".ssh"), &outside, &runtime] {
            fs::create_dir_all(d).expect("mkdir");
        }
        fs::write(home.join(".ssh/id_canary"), "CANARY").expect("write");
        fs::write(proj.join("readme"), "hello").expect("write");
        fs::write(proj.join(".git/config"), "[core]\n").expect("write");
        Fixture { root, home, proj, outside, runtime }
    }

    /// P0: the project readable and writable, the rest of the home hidden, the protected
    /// names of a git checkout.
    pub fn p0(&self) -> ResolvedPolicy {
        let proj = abs(&self.proj);
        ResolvedPolicy {
            project_dir: proj.clone(),
            home: abs(&self.home),
            read_deny: vec![DenyAnchor {
                path: abs(&self.home),
                kind: Some(FileKind::Dir),
                exceptions: vec![Exception {
                    path: proj.clone(),
                    kind: FileKind::Dir,
                    writable: true,
                }],
                origin: origin("deny-read"),
            }],
            write: vec![WriteGrant {
                path: proj.clone(),
                kind: FileKind::Dir,
                origin: origin("allow-write"),
            }],
            protected: vec![
                ProtectedPath {
                    path: proj.join(".git/hooks"),
                    rule: ".git/hooks".into(),
                    state: ProtectedState::Exists { kind: FileKind::Dir },
                },
                ProtectedPath {
                    path: proj.join(".git/config"),
                    rule: ".git/config".into(),
                    state: ProtectedState::Exists { kind: FileKind::File },
                },
                ProtectedPath {
                    path: proj.join(".bashrc"),
                    rule: ".bashrc".into(),
                    state: ProtectedState::Missing { first_missing: proj.join(".bashrc") },
                },
            ],
            pinned: vec![proj.join(".git")],
            globs: vec![],
            network: NetworkPolicy::Off,
            unix_sockets: UnixSockets::None,
            local_ports: vec![],
            host_ports: vec![],
            pty: false,
            git_config: false,
            system_info: false,
            mach_lookup: vec![],
            weaker_when_nested: false,
            private_tmp: true,
            env: vec![(OsString::from("PATH"), OsString::from("/usr/bin:/bin:/usr/sbin:/sbin"))],
            report: ReportScope { within: vec![proj], linked: vec![], itemize: ItemizeMode::Auto },
            ignore: IgnoreRules::default(),
        }
    }

    pub fn task(&self, script: &str) -> Task {
        Task {
            program: OsString::from("/bin/sh"),
            args: vec![OsString::from("-c"), OsString::from(script)],
            cwd: abs(&self.proj),
            runtime_dir: abs(&self.runtime),
            observe: false,
        }
    }

    pub fn plan(&self, policy: &ResolvedPolicy, script: &str) -> SpawnPlan {
        let facts = paddock_macos_seatbelt::macos::host_facts();
        MacosSeatbelt::new().plan(policy, &self.task(script), &facts).expect("plan")
    }

    /// Plans and runs `sh -c script` under `policy`.
    pub fn run(&self, policy: &ResolvedPolicy, script: &str) -> Output {
        perform(&self.plan(policy, script))
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
    }
}

/// Performs a plan the way the CLI does, minus supervision: placeholders, then the program.
pub fn perform(plan: &SpawnPlan) -> Output {
    for p in &plan.placeholders {
        if p.dir {
            fs::create_dir_all(p.path.as_path()).expect("placeholder");
        }
    }
    #[allow(clippy::disallowed_methods)] // Tests perform plans themselves.
    let mut cmd = Command::new(plan.program.as_path());
    cmd.args(&plan.argv[1..])
        .env_clear()
        .envs(plan.env.iter().map(|(k, v)| (k, v)))
        .current_dir(plan.cwd.as_path());
    cmd.output().expect("run sandbox-exec")
}

/// Single-quotes a path for `sh -c`.
pub fn q(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', "'\\''"))
}

#[track_caller]
pub fn assert_ok(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: expected success, got {}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[track_caller]
pub fn assert_denied(out: &Output, what: &str) {
    assert!(
        !out.status.success(),
        "{what}: expected a denial, but it succeeded\nstdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}
