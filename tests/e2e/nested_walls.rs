//! What the start-up walk of the project protects: git's code-execution surface of every
//! repository in it (worktrees, gitignored nested repositories), repositories the task
//! creates (reported, hooks disarmed), and protected names below the root. Each test checks
//! from the host afterwards: `git` run there runs nothing the task planted.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use crate::harness::{Scratch, require_itemizer, require_os_sandbox};
use crate::violations::run;

fn have_git() -> bool {
    let ok = Command::new("git").arg("--version").output().is_ok_and(|o| o.status.success());
    if !ok {
        if std::env::var_os("CI").is_some_and(|v| v == "true" || v == "1") {
            panic!("git is needed by these tests (apt-get install git)");
        }
        eprintln!("SKIPPED: git is not installed (apt-get install git)");
    }
    ok
}

fn git(dir: &Path, args: &[&str]) -> Output {
    Command::new("git")
        .current_dir(dir)
        .env("HOME", dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.com",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .output()
        .unwrap()
}

fn find<'a>(report: &'a Value, kind: &str, path: &Path) -> Option<&'a Value> {
    report["violations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["kind"] == kind && v["path"] == path.to_str().unwrap())
}

/// An executable that appends a line to `marker` when anything runs it.
fn evil(s: &Scratch, marker: &Path) -> String {
    let evil = s.root.join("evil.sh");
    std::fs::write(&evil, format!("#!/bin/sh\necho \"$0 $*\" >> '{}'\n", marker.display()))
        .unwrap();
    std::fs::set_permissions(&evil, std::fs::Permissions::from_mode(0o755)).unwrap();
    evil.to_str().unwrap().to_owned()
}

#[test]
fn host_git_runs_nothing_the_task_planted_in_any_repository_of_the_project() {
    let s = Scratch::new("git-surface");
    if !require_os_sandbox() || !have_git() {
        return;
    }
    let p = &s.project;
    std::fs::remove_dir_all(p.join(".git")).unwrap();
    std::fs::write(p.join(".gitignore"), "vendor/\n").unwrap();
    for args in [
        &["init", "-q"][..],
        &["config", "extensions.worktreeConfig", "true"],
        &["commit", "-q", "--allow-empty", "-m", "init"],
        &["worktree", "add", "-q", "wt"],
        &["init", "-q", "vendor/x"],
        &["-C", "vendor/x", "commit", "-q", "--allow-empty", "-m", "init"],
    ] {
        let out = git(p, args);
        assert!(out.status.success(), "git {args:?}: {out:?}");
    }
    // A nested repository emptied to bare directories: no config, no hooks, no HEAD.
    for d in ["vendor/e/.git/refs/heads", "vendor/e/.git/objects"] {
        std::fs::create_dir_all(p.join(d)).unwrap();
    }
    let marker = s.root.join("ran");
    let e = evil(&s, &marker);
    let script = format!(
        r#"
        printf '[core]\n\tfsmonitor = {e}\n' >> .git/config.worktree
        printf '[core]\n\tfsmonitor = {e}\n' >> .git/worktrees/wt/config.worktree
        echo "$PWD/planted" > .git/worktrees/wt/commondir
        echo "gitdir: $PWD/planted" > wt/.git
        printf '[core]\n\tfsmonitor = {e}\n' >> vendor/x/.git/config
        printf '#!/bin/sh\n{e} x-hook\n' > vendor/x/.git/hooks/post-checkout
        chmod +x vendor/x/.git/hooks/post-checkout
        echo 'ref: refs/heads/main' > vendor/e/.git/HEAD
        printf '[core]\n\tfsmonitor = {e}\n' > vendor/e/.git/config
        git init -q vendor/y
        printf '#!/bin/sh\n{e} y-hook\n' > vendor/y/.git/hooks/post-checkout
        chmod +x vendor/y/.git/hooks/post-checkout
        git -C vendor/y -c user.name=t -c user.email=t@example.com commit -q --allow-empty -m x
        echo done
        "#
    );
    let (report, out) = run(&s, &[], &script);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("done"), "{out:?}");
    for (dir, args) in [
        (p.clone(), &["status"][..]),
        (p.join("wt"), &["status"]),
        (p.join("vendor/x"), &["status"]),
        (p.join("vendor/x"), &["checkout", "-q", "-b", "b2"]),
        (p.join("vendor/e"), &["status"]),
        (p.join("vendor/y"), &["checkout", "-q", "-b", "b2"]),
    ] {
        let out = git(&dir, args);
        assert!(out.status.success(), "host git {args:?} in {}: {out:?}", dir.display());
    }
    let ran = std::fs::read_to_string(&marker).unwrap_or_default();
    assert!(ran.is_empty(), "host git ran what the task planted: {ran}\n{out:?}");
    // The new repository is reported with its hook, and the hook is disarmed.
    let v = find(&report, "new-repository", &p.join("vendor/y"))
        .unwrap_or_else(|| panic!("no new-repository violation: {report:#}"));
    assert!(v["target"].as_str().unwrap_or("").contains("post-checkout"), "{v}");
    let mode = std::fs::metadata(p.join("vendor/y/.git/hooks/post-checkout"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o111, 0, "the new repository's hook is still executable");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("non-executable: post-checkout"), "{stderr}");
    assert!(find(&report, "new-repository", &p.join("vendor/x")).is_none(), "{report:#}");
}

#[test]
fn host_git_follows_nothing_the_task_planted_through_commondir_includes_or_hooks_path() {
    let s = Scratch::new("git-refs");
    if !require_os_sandbox() || !have_git() {
        return;
    }
    let p = &s.project;
    std::fs::remove_dir_all(p.join(".git")).unwrap();
    std::fs::write(p.join("shared.gitconfig"), "[user]\n\tname = t\n").unwrap();
    std::fs::create_dir(p.join(".husky")).unwrap();
    for args in [
        &["init", "-q"][..],
        &["commit", "-q", "--allow-empty", "-m", "init"],
        &["config", "core.hooksPath", ".husky"],
        // Relative to the config's own directory: the project's shared.gitconfig, and a
        // local one that does not exist (yet).
        &["config", "--add", "include.path", "../shared.gitconfig"],
        &["config", "--add", "include.path", "../local.gitconfig"],
        &["init", "-q", "vendor/z"],
        &["-C", "vendor/z", "commit", "-q", "--allow-empty", "-m", "init"],
    ] {
        let out = git(p, args);
        assert!(out.status.success(), "git {args:?}: {out:?}");
    }
    let marker = s.root.join("ran");
    let e = evil(&s, &marker);
    // Each write that git would follow: a hook in the hooks path, config in an included
    // file that exists and in one that does not, and a commondir leading a nested
    // repository to a common dir whose config the task wrote.
    let script = format!(
        r#"
        printf '#!/bin/sh
{e} husky-hook
' > .husky/post-checkout && chmod +x .husky/post-checkout && echo husky=planted
        printf '[core]
	fsmonitor = {e}
' >> shared.gitconfig && echo shared=planted
        printf '[core]
	fsmonitor = {e}
' > local.gitconfig
        git init -q --bare common
        printf '[core]
	repositoryformatversion = 0
	fsmonitor = {e}
' > common/config
        echo "$PWD/common" > vendor/z/.git/commondir
        echo done
        "#
    );
    let (report, out) = run(&s, &[], &script);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("done"), "{out:?}");
    assert!(!stdout.contains("husky=planted"), "a hook was written into core.hooksPath: {out:?}");
    assert!(!stdout.contains("shared=planted"), "an included config was written: {out:?}");
    for (dir, args) in [
        (p.clone(), &["status"][..]),
        (p.clone(), &["checkout", "-q", "-b", "b2"]),
        (p.join("vendor/z"), &["status"]),
    ] {
        let out = git(&dir, args);
        assert!(out.status.success(), "host git {args:?} in {}: {out:?}", dir.display());
    }
    let ran = std::fs::read_to_string(&marker).unwrap_or_default();
    assert!(ran.is_empty(), "host git ran what the task planted: {ran}\n{out:?}");
    // What appeared is reported as a write and renamed aside, with a line saying so.
    let stderr = String::from_utf8_lossy(&out.stderr);
    for planted in [p.join("local.gitconfig"), p.join("vendor/z/.git/commondir")] {
        let v = find(&report, "write", &planted)
            .unwrap_or_else(|| panic!("{} not reported: {report:#}", planted.display()));
        assert_eq!(v["syscall"], "create", "{v}");
        assert!(!planted.exists(), "{} is still there", planted.display());
        let mut aside = planted.clone().into_os_string();
        aside.push(".disarmed");
        assert!(Path::new(&aside).exists(), "{} was not renamed aside", planted.display());
    }
    assert!(stderr.contains("renamed local.gitconfig (include.path)"), "{stderr}");
    assert!(stderr.contains("renamed vendor/z/.git/commondir (.git/commondir)"), "{stderr}");
    // No placeholder was left where git looks.
    assert!(!p.join(".git/commondir").exists(), "a placeholder commondir was left");
}

/// The walk after the run (which disarms the hooks of new repositories) starts once nothing
/// of the sandbox runs, before bwrap is gone: a writer the task leaves behind, making a hook
/// executable again and again, must be dead by then, or its hook would stay armed.
#[test]
fn a_hook_a_left_behind_writer_keeps_arming_is_disarmed_for_good_after_the_run() {
    let s = Scratch::new("git-left-writer");
    if !require_os_sandbox() || !have_git() {
        return;
    }
    let hook = s.project.join("n/.git/hooks/pre-commit");
    // The task ends once the writer has armed the hook (not after a fixed time: under strace
    // on a loaded machine `git init` alone can outlast it), leaving the writer behind.
    let script = "git init -q n && { (while :; do printf '#!/bin/sh\\n' > n/.git/hooks/pre-commit; chmod 755 n/.git/hooks/pre-commit; done) 2>/dev/null & } && i=0 && while [ ! -x n/.git/hooks/pre-commit ] && [ $i -lt 3000 ]; do sleep 0.01; i=$((i+1)); done";
    for flags in [&[][..], &["--itemize", "off"]] {
        let _ = std::fs::remove_dir_all(s.project.join("n"));
        let (report, out) = run(&s, flags, script);
        assert!(out.status.success(), "{flags:?}: {out:?}");
        find(&report, "new-repository", &s.project.join("n"))
            .unwrap_or_else(|| panic!("{flags:?}: no new-repository violation: {report:#}"));
        for when in ["once the run was over", "after the run"] {
            let mode = std::fs::metadata(&hook).unwrap().permissions().mode();
            assert_eq!(mode & 0o111, 0, "{flags:?}: the hook is executable {when}");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

#[test]
fn a_repository_the_task_creates_is_only_reported_with_new_repositories_report() {
    let s = Scratch::new("git-new-report");
    if !require_os_sandbox() || !have_git() {
        return;
    }
    let cfg = s.root.join("cfg.toml");
    std::fs::write(&cfg, "[protected]\nnew-repositories = \"report\"\n").unwrap();
    let script = "git init -q n && printf '#!/bin/sh\\n' > n/.git/hooks/pre-commit && chmod +x n/.git/hooks/pre-commit && git -C n config core.hooksPath /x";
    let (report, out) = run(&s, &["-c", cfg.to_str().unwrap()], script);
    let v = find(&report, "new-repository", &s.project.join("n"))
        .unwrap_or_else(|| panic!("no new-repository violation: {report:#} {out:?}"));
    assert!(v["target"].as_str().unwrap_or("").contains("core.hookspath"), "{v}");
    let mode =
        std::fs::metadata(s.project.join("n/.git/hooks/pre-commit")).unwrap().permissions().mode();
    assert_eq!(mode & 0o111, 0o111, "report must not change the hook");
}

#[test]
fn protected_names_below_the_root_are_read_only_and_their_creation_is_reported() {
    let s = Scratch::new("depth-names");
    if !require_os_sandbox() {
        return;
    }
    let p = &s.project;
    for d in ["sub", "pkg/.vscode", "dotfiles/bash", "stow"] {
        std::fs::create_dir_all(p.join(d)).unwrap();
    }
    std::fs::write(p.join("sub/.bashrc"), "orig\n").unwrap();
    std::fs::write(p.join("pkg/.vscode/settings.json"), "{}\n").unwrap();
    std::fs::write(p.join("dotfiles/bash/bashrc"), "orig\n").unwrap();
    std::os::unix::fs::symlink("../dotfiles/bash/bashrc", p.join("stow/.bashrc")).unwrap();
    std::fs::create_dir_all(p.join("stow2")).unwrap();
    std::os::unix::fs::symlink("../dotfiles/bash/bashrc", p.join("stow2/.bashrc")).unwrap();
    let script = "echo x >> sub/.bashrc; echo x > pkg/.vscode/settings.json; echo x >> stow/.bashrc; mkdir -p new && echo x > new/.bashrc; rm stow2/.bashrc; echo rm=$?; mv stow/.bashrc stow/moved; echo mv=$?; echo done";
    let (report, out) = run(&s, &[], script);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("done"), "{out:?}");
    assert_eq!(std::fs::read_to_string(p.join("sub/.bashrc")).unwrap(), "orig\n");
    assert_eq!(std::fs::read_to_string(p.join("pkg/.vscode/settings.json")).unwrap(), "{}\n");
    assert_eq!(std::fs::read_to_string(p.join("dotfiles/bash/bashrc")).unwrap(), "orig\n");
    // A stow-style link below the root stays in place: neither removed nor moved away.
    assert!(text.contains("rm=1") && text.contains("mv=1"), "{out:?}");
    for link in ["stow/.bashrc", "stow2/.bashrc"] {
        let target = std::fs::read_link(p.join(link)).unwrap_or_else(|e| panic!("{link}: {e}"));
        assert_eq!(target, Path::new("../dotfiles/bash/bashrc"), "{link}");
    }
    let created = find(&report, "write", &p.join("new/.bashrc"))
        .unwrap_or_else(|| panic!("the creation of new/.bashrc is not reported: {report:#}"));
    assert_eq!(created["syscall"], "create");
    if require_itemizer() {
        for path in ["sub/.bashrc", "pkg/.vscode/settings.json", "stow2/.bashrc", "stow/.bashrc"] {
            assert!(find(&report, "write", &p.join(path)).is_some(), "{path}: {report:#}");
        }
    }
    // `protected.depth = "root"` leaves them to the task.
    let cfg = s.root.join("cfg.toml");
    std::fs::write(&cfg, "[protected]\ndepth = \"root\"\n").unwrap();
    let (_, out) = run(&s, &["-c", cfg.to_str().unwrap()], "echo x >> sub/.bashrc");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(std::fs::read_to_string(p.join("sub/.bashrc")).unwrap(), "orig\nx\n");
}
