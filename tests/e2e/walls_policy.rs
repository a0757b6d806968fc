//! Walls around policy entries, through `paddock run`: literal paths with glob characters
//! and odd spellings, grants of protected names and of the home directory, config files the
//! task cannot rewrite, deny targets that appear during the run, a hidden `/` with
//! carve-outs, and odd paths at protected names that degrade one path, not the run.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::harness::*;

fn s(p: &Path) -> String {
    p.display().to_string()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn run(cmd: &mut Command) -> Output {
    cmd.output().unwrap()
}

/// `paddock run FLAGS -- sh -c SCRIPT` in `dir`.
fn sh(sc: &Scratch, dir: &Path, flags: &[&str], script: &str) -> Output {
    run(sc.paddock().current_dir(dir).arg("run").args(flags).args(["--", "sh", "-c", script]))
}

#[test]
fn deny_entries_naming_bracket_paths_are_literal_in_every_spelling() {
    if !require_os_sandbox() {
        return;
    }
    let sc = Scratch::new("brackets");
    let wip = sc.home.join("[WIP] project");
    std::fs::create_dir_all(wip.join("open[bracket")).unwrap();
    std::fs::write(wip.join("secret.txt"), CANARY).unwrap();
    std::fs::write(wip.join("open[bracket/key"), CANARY).unwrap();
    let h = s(&sc.home);
    let spellings = [
        "secret.txt".to_owned(),
        "./secret.txt".to_owned(),
        "~/[WIP] project/secret.txt".to_owned(),
        "~//[WIP] project/./secret.txt".to_owned(),
        format!("/{h}//[WIP] project/./secret.txt"),
        format!("{h}/[WIP] project/secret.txt/"),
    ];
    for entry in &spellings {
        let out = sh(&sc, &wip, &["--deny-read", entry], "cat secret.txt; echo ran");
        assert!(stdout(&out).contains("ran"), "{entry}: {out:?}");
        assert!(!stdout(&out).contains(CANARY), "{entry}: the secret was read: {out:?}");
    }
    // `HOME` spelled with a trailing slash and a doubled one: `~` is the same directory.
    let out = run(sc.paddock().current_dir(&wip).env("HOME", format!("{h}//")).args([
        "run",
        "--deny-read",
        "~/[WIP] project/secret.txt",
        "--",
        "cat",
        "secret.txt",
    ]));
    assert!(!stdout(&out).contains(CANARY), "{out:?}");
    assert_ne!(out.status.code(), Some(125), "{out:?}");
    // A directory named `open[bracket` is no broken glob: the run starts and hides it.
    let out =
        sh(&sc, &wip, &["--deny-read", "open[bracket/key"], "cat 'open[bracket/key'; echo ran");
    assert!(stdout(&out).contains("ran"), "{out:?}");
    assert!(!stdout(&out).contains(CANARY), "{out:?}");
}

#[test]
fn an_entry_written_glob_is_a_pattern_even_where_its_text_names_a_file() {
    if !require_os_sandbox() {
        return;
    }
    let sc = Scratch::new("glob-prefix");
    let dir = sc.project.join("keys");
    std::fs::create_dir_all(&dir).unwrap();
    for name in ["key[12].pem", "key1.pem", "key2.pem", "key3.pem"] {
        std::fs::write(dir.join(name), format!("{CANARY} {name}")).unwrap();
    }
    let read_all = "cd keys; for f in 'key[12].pem' key1.pem key2.pem key3.pem; do cat \"$f\"; echo; done; echo ran";
    // As written, the entry names the file `key[12].pem`: that file alone is hidden.
    let out = sh(&sc, &sc.project, &["--deny-read", "keys/key[12].pem"], read_all);
    let text = stdout(&out);
    assert!(text.contains("ran"), "{out:?}");
    assert!(!text.contains("key[12].pem"), "the literal entry did not hide its file: {text}");
    for name in ["key1.pem", "key2.pem", "key3.pem"] {
        assert!(
            text.contains(&format!("{CANARY} {name}")),
            "{name} hidden by a literal entry: {text}"
        );
    }
    // Written `glob:`, the same text is a pattern: key1 and key2 are hidden, not the file
    // whose name the pattern spells, nor key3.
    let out = sh(&sc, &sc.project, &["--deny-read", "glob:keys/key[12].pem"], read_all);
    let text = stdout(&out);
    assert!(text.contains("ran"), "{out:?}");
    for hidden in ["key1.pem", "key2.pem"] {
        assert!(!text.contains(&format!("{CANARY} {hidden}")), "{hidden} was read: {text}");
    }
    for shown in ["key[12].pem", "key3.pem"] {
        assert!(text.contains(&format!("{CANARY} {shown}")), "{shown} hidden: {text}");
    }
}

#[test]
fn a_protected_name_cannot_be_granted_by_accident() {
    if !require_os_sandbox() {
        return;
    }
    let sc = Scratch::new("grant-protected");
    let hook = sc.project.join(".git/hooks/pre-commit");
    for entry in [".git/hooks", ".git/hooks/sub", ".git/config"] {
        let out =
            sh(&sc, &sc.project, &["--allow-write", entry], &format!("echo pwn > {}", s(&hook)));
        assert_eq!(out.status.code(), Some(125), "{entry}: {out:?}");
        let err = stderr(&out);
        assert!(err.contains("--allow-write") && err.contains("protected.writable"), "{err}");
        assert!(!hook.exists(), "{entry}: the hook was written");
    }
    // A config file: the key and its index are named.
    let cfg = sc.root.join("grant.toml");
    std::fs::write(&cfg, "[allow]\nwrite = [\".\", \".git/hooks\"]\n").unwrap();
    let out = run(sc.paddock().arg("run").arg("-c").arg(&cfg).args(["--", "true"]));
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    assert!(stderr(&out).contains("allow.write[1]"), "{out:?}");
    // Lifted by its own key, it is writable.
    std::fs::write(
        &cfg,
        "[allow]\nwrite = [\".git/hooks\"]\n[protected]\nwritable = [\".git/hooks\"]\n",
    )
    .unwrap();
    let out = run(sc.paddock().arg("run").arg("-c").arg(&cfg).args(["--", "touch"]).arg(&hook));
    assert!(out.status.success(), "{out:?}");
    assert!(hook.exists());
}

#[test]
fn a_home_grant_needs_write_home_and_warns() {
    if !require_os_sandbox() {
        return;
    }
    let sc = Scratch::new("grant-home");
    let marker = sc.home.join("notes.txt");
    for entry in ["~", "~/", &s(&sc.root)] {
        let out = sh(&sc, &sc.project, &["--allow-write", entry], &format!("touch {}", s(&marker)));
        assert_eq!(out.status.code(), Some(125), "{entry}: {out:?}");
        assert!(stderr(&out).contains("allow.write-home = true"), "{entry}: {out:?}");
        assert!(!marker.exists());
    }
    for _ in 0..2 {
        let out = sh(
            &sc,
            &sc.project,
            &["--allow-write", "~", "--allow-write-home"],
            &format!("touch {}", s(&marker)),
        );
        assert!(out.status.success(), "{out:?}");
        assert!(stderr(&out).contains("warning: the home directory is writable"), "{out:?}");
    }
    assert!(marker.exists());
}

#[test]
fn a_config_file_inside_the_project_is_read_only() {
    if !require_os_sandbox() {
        return;
    }
    let sc = Scratch::new("config-ro");
    std::fs::create_dir_all(sc.project.join("conf")).unwrap();
    let cfg = sc.project.join("conf/policy.toml");
    let text = "[allow]\nwrite = [\".\"]\n";
    std::fs::write(&cfg, text).unwrap();
    let script = "printf '[allow]\\nwrite = [\"/\"]\\n' > conf/policy.toml; echo rc=$?; \
                  mv conf/policy.toml conf/x; mv conf conf2; echo done";
    let out = run(sc.paddock().arg("run").arg("-c").arg(&cfg).args(["--", "sh", "-c", script]));
    assert!(stdout(&out).contains("done"), "{out:?}");
    assert!(!stdout(&out).contains("rc=0"), "the config was writable: {out:?}");
    assert_eq!(std::fs::read_to_string(&cfg).unwrap(), text);
}

/// Waits until `path` exists (the run made its placeholder).
fn wait_for(path: &Path) {
    let started = Instant::now();
    while std::fs::symlink_metadata(path).is_err() {
        assert!(started.elapsed() < Duration::from_secs(20), "{} never appeared", s(path));
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_deny_target_the_host_creates_mid_run_stays_hidden_and_is_reported() {
    if !require_os_sandbox() {
        return;
    }
    let sc = Scratch::new("deny-late");
    let later = sc.project.join("later");
    let go = sc.project.join("go");
    let report = sc.root.join("report.json");
    // The task waits for the host's signal, then reads what the host made meanwhile.
    let script = "while [ ! -e go ]; do sleep 0.05; done; cat later/key; ls -A later; echo done";
    let child = sc
        .paddock()
        .arg("run")
        .arg("--report")
        .arg(&report)
        .args(["--deny-read", "later", "--", "sh", "-c", script])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&later);
    std::fs::create_dir_all(&later).unwrap();
    std::fs::write(later.join("key"), CANARY).unwrap();
    std::fs::write(&go, "").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(stdout(&out).contains("done"), "{out:?}");
    assert!(!stdout(&out).contains(CANARY) && !stdout(&out).contains("key"), "{out:?}");
    // The host's file stays where the host put it, and the run says it appeared.
    assert_eq!(std::fs::read_to_string(later.join("key")).unwrap(), CANARY);
    assert!(stderr(&out).contains("appeared during the run"), "{out:?}");
    if itemizer_reports() {
        let text = std::fs::read_to_string(&report).unwrap();
        assert!(text.contains("later"), "the hidden read is not reported: {text}");
    }
}

/// Whether this run of the suite itemizes denials at all.
fn itemizer_reports() -> bool {
    matches!(itemize_mode(), "observe" | "strace" | "auto")
}

#[test]
fn a_dangling_deny_link_hides_what_appears_at_its_target() {
    if !require_os_sandbox() {
        return;
    }
    let sc = Scratch::new("deny-dangling");
    let target = sc.home.join("vault");
    std::os::unix::fs::symlink(&target, sc.project.join("vault-link")).unwrap();
    let child = sc
        .paddock()
        .args(["run", "--deny-read", "vault-link", "--", "sh", "-c"])
        .arg(
            "while [ ! -e go ]; do sleep 0.05; done; cat vault-link/key; cat \"$0\"/key; echo done",
        )
        .arg(s(&target))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&target);
    std::fs::write(target.join("key"), CANARY).unwrap();
    std::fs::write(sc.project.join("go"), "").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(stdout(&out).contains("done"), "{out:?}");
    assert!(!stdout(&out).contains(CANARY), "{out:?}");
}

/// The paths a hidden `/` must carve out for `sh` to run: the system's directories and the
/// links to them, as this host has them.
fn system_carve_outs() -> Vec<String> {
    let mut flags = Vec::new();
    for p in ["/usr", "/bin", "/lib", "/lib64", "/lib32", "/libx32", "/sbin"] {
        if Path::new(p).exists() {
            flags.push("--allow-read".to_owned());
            flags.push(p.to_owned());
        }
    }
    flags
}

#[test]
fn deny_read_of_root_with_carve_outs_runs() {
    if !require_os_sandbox() {
        return;
    }
    let sc = Scratch::new("deny-root");
    let mut flags = vec!["--deny-read".to_owned(), "/".to_owned()];
    flags.extend(system_carve_outs());
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let script = format!(
        "ls /; cat /etc/passwd {0}/.ssh/id_canary; echo built > out.txt; cat out.txt",
        s(&sc.home)
    );
    let out = sh(&sc, &sc.project, &flags, &script);
    assert!(out.status.code() != Some(125), "{out:?}");
    let text = stdout(&out);
    assert!(text.contains("built"), "the project is not writable: {out:?}");
    assert!(text.contains("usr") && !text.contains("etc"), "{out:?}");
    assert!(!text.contains("root:") && !text.contains(CANARY), "{out:?}");
}

#[test]
fn a_symlinked_protected_name_stays_a_read_only_link() {
    if !require_os_sandbox() {
        return;
    }
    let sc = Scratch::new("odd-link");
    std::fs::create_dir(sc.project.join("dotfiles")).unwrap();
    std::fs::write(sc.project.join("dotfiles/bashrc"), "original\n").unwrap();
    std::os::unix::fs::symlink("dotfiles/bashrc", sc.project.join(".bashrc")).unwrap();
    let out =
        sh(&sc, &sc.project, &[], "echo pwn >> .bashrc; echo pwn >> dotfiles/bashrc; echo done");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(stdout(&out).contains("done"));
    assert_eq!(std::fs::read_to_string(sc.project.join("dotfiles/bashrc")).unwrap(), "original\n");
    assert_eq!(stderr(&out).matches("is a symbolic link").count(), 1, "one note: {out:?}");
    assert!(sc.project.join(".bashrc").symlink_metadata().unwrap().file_type().is_symlink());
    // The link itself is mounted read-only on itself: it can be neither removed, renamed
    // nor replaced (by a rename over it or an exchange), and the target stays untouched.
    let script = "rm .bashrc; echo rm=$?; mv .bashrc moved; echo mv=$?; \
                  ln -s /etc/passwd planted; mv -T planted .bashrc; echo over=$?; \
                  echo pwn > .bashrc; echo write=$?; echo done";
    let out = sh(&sc, &sc.project, &[], script);
    let text = stdout(&out);
    assert!(text.contains("done"), "{out:?}");
    for step in ["rm", "mv", "over", "write"] {
        assert!(!text.contains(&format!("{step}=0")), "{step} succeeded: {out:?}");
    }
    assert_eq!(
        std::fs::read_link(sc.project.join(".bashrc")).unwrap(),
        Path::new("dotfiles/bashrc")
    );
    assert!(!sc.project.join("moved").exists(), "{out:?}");
    assert!(!stderr(&out).contains("was removed or replaced during the run"), "{out:?}");
    assert_eq!(std::fs::read_to_string(sc.project.join("dotfiles/bashrc")).unwrap(), "original\n");
}

#[test]
fn a_dangling_protected_link_cannot_create_its_target() {
    if !require_os_sandbox() {
        return;
    }
    let sc = Scratch::new("odd-dangling");
    std::fs::create_dir(sc.project.join("dotfiles")).unwrap();
    std::os::unix::fs::symlink("dotfiles/bashrc", sc.project.join(".bashrc")).unwrap();
    std::os::unix::fs::symlink("nowhere/hooks", sc.project.join(".vscode")).unwrap();
    let out = sh(
        &sc,
        &sc.project,
        &[],
        "echo pwn > .bashrc; mkdir -p .vscode; echo pwn > .vscode/tasks.json; echo done",
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(stdout(&out).contains("done"));
    assert!(!sc.project.join("dotfiles/bashrc").exists(), "the target was created");
    assert!(!sc.project.join("nowhere").exists(), "the target was created");
    assert_eq!(stderr(&out).matches("is a symbolic link").count(), 2, "a note each: {out:?}");
}

#[test]
fn a_git_file_pointing_nowhere_is_protected_as_a_file() {
    if !require_os_sandbox() {
        return;
    }
    let sc = Scratch::new("odd-gitfile");
    std::fs::remove_dir_all(sc.project.join(".git")).unwrap();
    std::fs::write(sc.project.join(".git"), "gitdir: /nowhere\n").unwrap();
    let out = sh(&sc, &sc.project, &[], "echo 'gitdir: /tmp/x' > .git; rm .git; echo done");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(stdout(&out).contains("done"));
    assert_eq!(std::fs::read_to_string(sc.project.join(".git")).unwrap(), "gitdir: /nowhere\n");
    assert_eq!(stderr(&out).matches("is a file where protected names").count(), 1, "{out:?}");
}

#[test]
fn links_an_earlier_run_planted_at_protected_names_neither_stop_nor_leak() {
    if !require_os_sandbox() {
        return;
    }
    let sc = Scratch::new("odd-planted");
    let h = s(&sc.home);
    let plant = format!(
        "ln -s {h}/.ssh .claude; ln -s {h}/.aws/credentials .mcp.json; ln -s {h}/.ssh/id_canary src/gen; echo planted"
    );
    let out = sh(&sc, &sc.project, &[], &plant);
    assert!(stdout(&out).contains("planted"), "{out:?}");
    let ssh_before: Vec<PathBuf> =
        std::fs::read_dir(sc.home.join(".ssh")).unwrap().map(|e| e.unwrap().path()).collect();
    let cfg = sc.root.join("deny-write.toml");
    std::fs::write(&cfg, "[deny]\nwrite = [\"src/gen\"]\n").unwrap();
    for flags in [&[][..], &["-c", &s(&cfg)][..]] {
        let out = sh(
            &sc,
            &sc.project,
            flags,
            "cat .mcp.json .claude/id_canary src/gen; echo x > .claude/authorized_keys; echo done",
        );
        assert_eq!(out.status.code(), Some(0), "{flags:?}: {out:?}");
        assert!(stdout(&out).contains("done"), "{out:?}");
        assert!(!stdout(&out).contains(CANARY), "a planted link leaked a secret: {out:?}");
    }
    let ssh_after: Vec<PathBuf> =
        std::fs::read_dir(sc.home.join(".ssh")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(ssh_before, ssh_after);
}

#[test]
fn a_missing_deny_entry_that_cannot_be_masked_stops_the_run() {
    if !require_os_sandbox() {
        return;
    }
    let sc = Scratch::new("deny-unmaskable");
    // Nobody can make a placeholder in /sys: the entry cannot be enforced, so nothing runs.
    let marker = sc.project.join("RAN");
    let out = run(sc
        .paddock()
        .args(["run", "--deny-read", "/sys/paddock-no-such/key", "--", "touch"])
        .arg(&marker));
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    assert!(stderr(&out).contains("/sys/paddock-no-such"), "{out:?}");
    assert!(!marker.exists(), "the task ran with a deny entry it could not have");
}
