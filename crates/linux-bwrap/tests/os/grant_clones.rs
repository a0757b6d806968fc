//! Write grants the supervisor attaches from the runner's clones
//! (`paddock_linux_bwrap::grant_clones`), where the runner may clone mounts: the same walls
//! as bwrap's bind, and nothing but the grant itself gets attached.

use super::{EROFS, Scratch, facts, run_piped, supervised, value};

/// A read-only tmpfs mounted at `path` on the host for the guard's life (root alone may).
struct ReadOnlyMount(std::path::PathBuf);

impl ReadOnlyMount {
    fn at(path: std::path::PathBuf) -> Option<ReadOnlyMount> {
        use nix::mount::{MsFlags, mount};
        std::fs::create_dir_all(&path).unwrap();
        let flags = MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
        mount(Some("paddock-test"), &path, Some("tmpfs"), flags, Some("size=64k")).ok()?;
        Some(ReadOnlyMount(path))
    }
}

impl Drop for ReadOnlyMount {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(&self.0, nix::mount::MntFlags::MNT_DETACH);
    }
}

/// The project, attached from the runner's clone (or bound by bwrap where the runner cannot
/// clone): writable, `nosuid` and `nodev` as bwrap's bind makes it; a read-only mount below
/// it on the host stays read-only, and the protected paths inside stay read-only.
pub fn the_project_from_the_runners_clone_is_writable_and_keeps_its_read_only_mounts() {
    let s = Scratch::new("grant");
    let p = s.policy();
    let runtime = paddock_linux_bwrap::runtime::runtime_dir::RuntimeDir::create().unwrap();
    let plan = s.plan(&p, runtime.path().as_path(), &["write", "x"]);
    let cloned = !plan.grant_clones.is_empty();
    println!("the project attached from {}", if cloned { "the runner's clone" } else { "bwrap" });
    let f = facts();
    assert_eq!(cloned, f.clone_mounts && f.user_namespaces, "the plan follows the host's facts");
    drop(runtime);
    let sub = s.proj.join("ro-sub");
    let mounted = ReadOnlyMount::at(sub.clone());
    let new = s.proj.join("new.txt");
    let out = s.run(&p, &["write", new.to_str().unwrap()]);
    assert_eq!(value(&out, "write"), "ok", "{out}");
    assert_eq!(std::fs::read_to_string(&new).unwrap(), "pwn", "written on the host");
    let out = s.run(&p, &["write", s.proj.join(".git/config").to_str().unwrap()]);
    assert_eq!(value(&out, "write"), EROFS, "protected inside the grant: {out}");
    let out = s.run(&p, &["mount", s.proj.to_str().unwrap()]);
    let options = value(&out, "mount");
    assert!(options.starts_with("ok:rw,"), "{out}");
    assert!(options.contains("nosuid") && options.contains("nodev"), "{out}");
    match mounted {
        Some(_guard) => {
            let out = s.run(&p, &["write", sub.join("x").to_str().unwrap()]);
            assert_eq!(value(&out, "write"), EROFS, "read-only below the grant: {out}");
        }
        None => println!("no read-only mount below the project: mounting needs root"),
    }
}

/// A clone of anything but the grant (here another directory, as if the grant were swapped
/// between the runner's record of it and its clone) fails the mount identities: the task
/// never runs.
pub fn a_clone_of_another_directory_is_refused_before_the_task_runs() {
    let s = Scratch::new("swapped");
    let runtime = paddock_linux_bwrap::runtime::runtime_dir::RuntimeDir::create().unwrap();
    let target = s.proj.join("RAN");
    let probe = std::env::current_exe().unwrap();
    let args = ["__probe", "write", target.to_str().unwrap()];
    let mut plan = s.plan_unsupervised(
        &s.policy(),
        runtime.path().as_path(),
        probe.as_os_str(),
        args.into_iter(),
    );
    if plan.grant_clones.is_empty() {
        paddock_test_support::skip_test(
            "a_clone_of_another_directory_is_refused_before_the_task_runs",
            "the runner cannot clone mounts here: bwrap binds the grants",
            None,
        );
        return;
    }
    let other = s.root.join("other");
    std::fs::create_dir_all(&other).unwrap();
    plan.grant_clones = vec![super::abs(&other)];
    let outcome = run_piped(&supervised(plan));
    let stderr = String::from_utf8_lossy(&outcome.stderr);
    assert_eq!(outcome.exit_code, 125, "{stderr}");
    assert!(!target.exists(), "the task never ran");
    assert!(!other.join("RAN").exists(), "nor wrote into what was attached");
    assert!(stderr.contains(s.proj.to_str().unwrap()), "the grant is named: {stderr}");
}
