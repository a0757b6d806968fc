//! Filesystem walls, from the outside.

use std::fs;
use std::path::Path;

use paddock_policy::{DenyAnchor, FileKind, GlobKind, GlobRule, Origin, WriteGrant};

use crate::util::*;

#[test]
fn reads_under_the_home_anchor_are_hidden_except_the_project() {
    if !require_os_sandbox() {
        return;
    }
    let f = Fixture::new("read");
    let p = f.p0();
    assert_denied(&f.run(&p, &format!("cat {}", q(&f.home.join(".ssh/id_canary")))), "read ~/.ssh");
    assert_denied(&f.run(&p, &format!("ls {}", q(&f.home.join(".ssh")))), "list ~/.ssh");
    let out = f.run(&p, "cat readme");
    assert_ok(&out, "read the project");
    assert_eq!(out.stdout, b"hello");
    assert_ok(&f.run(&p, "pwd -P && /bin/realpath ."), "realpath of the project under the anchor");
}

#[test]
fn fsw01_writes_only_in_grants_and_the_task_tmpdir() {
    if !require_os_sandbox() {
        return;
    }
    let f = Fixture::new("write");
    let p = f.p0();
    assert_ok(&f.run(&p, "echo x > new && echo y > \"$TMPDIR/t\""), "write the project and TMPDIR");
    for target in [
        f.home.join("pwn"),
        f.outside.join("pwn"),
        Path::new("/private/tmp").join(format!("paddock-pwn-{}", std::process::id())),
    ] {
        assert_denied(
            &f.run(&p, &format!("echo x > {}", q(&target))),
            &target.display().to_string(),
        );
        assert!(!target.exists(), "{} was created", target.display());
    }
}

#[test]
fn fsw02_fsw04_protected_names_stay_read_only_and_missing_ones_stay_missing() {
    if !require_os_sandbox() {
        return;
    }
    let f = Fixture::new("protected");
    let p = f.p0();
    assert_denied(&f.run(&p, "echo 'touch /tmp/RC_PWN' >> .bashrc"), ".bashrc");
    assert!(!f.proj.join(".bashrc").exists(), "FSW-03: no stub left behind");
    assert_denied(&f.run(&p, "printf '#!/bin/sh\\n' > .git/hooks/pre-commit"), "hook");
    assert!(!f.proj.join(".git/hooks/pre-commit").exists());
    assert_denied(&f.run(&p, "echo '[x]' >> .git/config"), ".git/config");
    assert_eq!(fs::read_to_string(f.proj.join(".git/config")).unwrap(), "[core]\n");
    assert_ok(&f.run(&p, "echo ok > .git/index"), "the rest of .git stays writable");
}

#[test]
fn fsw05_fsw10_git_dir_and_anchors_cannot_be_renamed_away() {
    if !require_os_sandbox() {
        return;
    }
    let f = Fixture::new("rename");
    let mut p = f.p0();
    fs::create_dir_all(f.proj.join("secret")).unwrap();
    fs::write(f.proj.join("secret/x"), "S").unwrap();
    p.read_deny.push(DenyAnchor {
        path: abs(&f.proj.join("secret")),
        kind: Some(FileKind::Dir),
        exceptions: vec![],
        origin: Origin::flag("--deny-read"),
    });
    assert_denied(&f.run(&p, "mv .git .git.o"), "rename .git");
    assert!(f.proj.join(".git/hooks").is_dir());
    assert_denied(&f.run(&p, "mv secret visible && cat visible/x"), "rename a read-deny anchor");
    assert!(f.proj.join("secret/x").is_file());
    assert_denied(&f.run(&p, "cat secret/x"), "read under the inner anchor");
}

#[test]
fn pol02_a_hostile_grant_name_is_only_a_path() {
    if !require_os_sandbox() {
        return;
    }
    let f = Fixture::new("pol02");
    let mut p = f.p0();
    let odd = f.proj.join("x\") (allow file-write* (subpath \"");
    fs::create_dir_all(&odd).unwrap();
    p.write.push(WriteGrant {
        path: abs(&odd),
        kind: FileKind::Dir,
        origin: Origin::flag("--allow-write"),
    });
    assert_ok(&f.run(&p, &format!("touch {}", q(&odd.join("ok")))), "write inside the odd grant");
    let pwn = f.outside.join("SBPL_PWN");
    assert_denied(&f.run(&p, &format!("touch {}", q(&pwn))), "write outside");
    assert!(!pwn.exists());
}

#[test]
fn pol03_glob_metacharacters_in_the_base_are_literal() {
    if !require_os_sandbox() {
        return;
    }
    let f = Fixture::new("pol03");
    let base = f.outside.join("p.q+(x)[1]");
    let twin = f.outside.join("pXq+(x)[1]");
    for d in [base.join("sub"), twin.clone()] {
        fs::create_dir_all(d).unwrap();
    }
    let mut p = f.p0();
    p.globs.push(GlobRule {
        kind: GlobKind::Write,
        base: abs(&base),
        pattern: "*.txt".into(),
        origin: Origin::flag("--allow-write"),
    });
    assert_denied(&f.run(&p, &format!("touch {}", q(&twin.join("e.txt")))), "the twin directory");
    assert_denied(&f.run(&p, &format!("touch {}", q(&base.join("sub/e.txt")))), "`*` crossing `/`");
    assert_ok(&f.run(&p, &format!("touch {}", q(&base.join("e.txt")))), "the glob's own match");
}

#[test]
fn mac05_tmp_spellings_mean_the_same_walls() {
    if !require_os_sandbox() {
        return;
    }
    // Under /tmp (a symlink to /private/tmp) on purpose.
    let f = Fixture::under(Path::new("/tmp"), "mac05");
    let spelled =
        Path::new("/tmp").join(f.root.strip_prefix("/private/tmp").expect("under /private/tmp"));
    fs::create_dir_all(f.root.join("sec")).unwrap();
    fs::write(f.root.join("sec/x"), "S").unwrap();
    fs::create_dir_all(f.root.join("w")).unwrap();
    let mut p = f.p0();
    p.read_deny.push(DenyAnchor {
        path: abs(&spelled.join("sec")),
        kind: Some(FileKind::Dir),
        exceptions: vec![],
        origin: Origin::flag("--deny-read"),
    });
    p.write.push(WriteGrant {
        path: abs(&spelled.join("w")),
        kind: FileKind::Dir,
        origin: Origin::flag("--allow-write"),
    });
    for dir in [&f.root, &spelled] {
        assert_denied(&f.run(&p, &format!("cat {}", q(&dir.join("sec/x")))), "read the denied dir");
        assert_ok(&f.run(&p, &format!("touch {}", q(&dir.join("w/ok")))), "write the granted dir");
    }
}

#[test]
fn sym07_other_case_spellings_of_protected_names_are_refused() {
    if !require_os_sandbox() {
        return;
    }
    let f = Fixture::new("sym07");
    let p = f.p0();
    assert_denied(&f.run(&p, "echo x > .GIT/HOOKS/pre-commit"), ".GIT/HOOKS");
    assert!(!f.proj.join(".git/hooks/pre-commit").exists());
    assert_denied(&f.run(&p, "echo x >> .BASHRC"), ".BASHRC");
    assert!(!f.proj.join(".bashrc").exists() && !f.proj.join(".BASHRC").exists());
    assert_denied(&f.run(&p, &format!("cat {}", q(&f.home.join(".SSH/id_canary")))), "~/.SSH");
}
