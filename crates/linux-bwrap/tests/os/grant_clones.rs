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
    let mut plan = s.plan_writing(runtime.path().as_path(), &target);
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
    plan.grant_clones =
        vec![paddock_policy::GrantClone { path: super::abs(&other), within: Vec::new() }];
    let outcome = run_piped(&supervised(plan));
    let stderr = String::from_utf8_lossy(&outcome.stderr);
    assert_eq!(outcome.exit_code, 125, "{stderr}");
    assert!(!target.exists(), "the task never ran");
    assert!(!other.join("RAN").exists(), "nor wrote into what was attached");
    assert!(stderr.contains(s.proj.to_str().unwrap()), "the grant is named: {stderr}");
}

/// The runner makes the protected paths below a grant in its clone where the kernel mounts
/// into a detached tree (Linux 6.15): read-only there, seen through the clone; a path
/// reached through a symlink is left to the supervisor (the runner would resolve it on the
/// host, where the link may point anywhere).
pub fn the_runner_makes_the_protected_paths_in_its_clone_never_through_a_link() {
    use paddock_linux_bwrap::grant_clones::{clone_grant, mount_within};
    use paddock_policy::{GrantClone, SelfMount};
    use std::os::fd::AsRawFd;
    let s = Scratch::new("within");
    let tree = match clone_grant(&s.proj) {
        Ok(tree) => tree,
        Err(e) => {
            assert!(!facts().clone_mounts, "the host says the runner may clone: {e}");
            paddock_test_support::skip_test(
                "the_runner_makes_the_protected_paths_in_its_clone_never_through_a_link",
                "the runner cannot clone mounts here",
                None,
            );
            return;
        }
    };
    let protected =
        |rel: &str| SelfMount { path: super::abs(s.proj.join(rel)), read_only: true, source: None };
    let grant = GrantClone { path: super::abs(&s.proj), within: vec![protected(".git/config")] };
    match mount_within(&tree, &grant) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            println!("this kernel mounts nothing into a detached tree: the supervisor does ({e})");
            return;
        }
        Err(e) => panic!("cannot make .git/config read-only in the clone: {e}"),
    }
    let open_in_tree = |rel: &std::ffi::CStr| {
        // SAFETY: a NUL-terminated path relative to the clone's root descriptor.
        let fd = unsafe { libc::openat(tree.as_raw_fd(), rel.as_ptr(), libc::O_WRONLY) };
        let err = std::io::Error::last_os_error().raw_os_error();
        if fd >= 0 {
            // SAFETY: the descriptor just opened.
            unsafe { libc::close(fd) };
        }
        if fd >= 0 { None } else { err }
    };
    assert_eq!(open_in_tree(c".git/config"), Some(libc::EROFS), "read-only in the clone");
    assert_eq!(open_in_tree(c"src/main.rs"), None, "the rest stays writable");
    assert_eq!(
        std::fs::read_to_string(s.proj.join(".git/config")).unwrap(),
        "[core]\n",
        "the host's file is untouched"
    );
    // Through a link inside the grant: refused, the clone as it was.
    std::os::unix::fs::symlink(".git", s.proj.join("link")).unwrap();
    let tree = clone_grant(&s.proj).unwrap();
    let through = GrantClone { path: super::abs(&s.proj), within: vec![protected("link/config")] };
    let err = mount_within(&tree, &through).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ELOOP), "{err}");
}
