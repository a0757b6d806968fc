//! Tests of the walls around entries on the fake host: literal paths with glob characters,
//! spellings of one path, grants of protected names and of the home directory, config
//! files kept read-only, deny entries missing at start, and a hidden `/` with carve-outs.

use std::path::Path;

use crate::*;

fn host() -> FakeHost {
    FakeHost::new()
        .file("/home/u/.ssh/id_canary", "secret")
        .file("/home/u/[WIP] p/secret.txt", "secret")
        .file("/home/u/[WIP] p/a.pem", "secret")
        .file("/home/u/[WIP] p/.git/config", "[core]")
        .dir("/home/u/[WIP] p/.git/hooks")
        .file("/home/u/[WIP] p/open[bracket/key", "secret")
        .file("/home/u/[WIP] p/[ab]/x", "")
        .file("/home/u/[WIP] p/a/x", "")
        .file("/home/u/[WIP] p/vendor/x/.git/config", "")
        .dir("/home/u/[WIP] p/vendor/x/.git/hooks")
        .file("/home/u/[WIP] p/cfg/my.toml", "")
        .dir("/usr/lib64")
        .symlink("/lib64", "usr/lib64")
        .symlink("/home/u/[WIP] p/dangling", "../gone/secret")
}

fn run(text: &str) -> Result<(ResolvedPolicy, Vec<String>)> {
    let policy = load_str(text, Path::new("paddock.toml"), Format::Toml)?;
    resolve(&policy, &Context::new("/home/u/[WIP] p", "/home/u/"), &host())
}

fn anchors(text: &str) -> Vec<(String, Option<FileKind>)> {
    let (r, _) = run(text).unwrap();
    r.read_deny
        .iter()
        .filter(|a| !a.origin.key().starts_with("deny.builtin-secrets"))
        .map(|a| (a.path.to_string(), a.kind))
        .collect()
}

fn err(text: &str) -> String {
    match run(text) {
        Ok(_) => panic!("expected an error for:\n{text}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn an_existing_path_is_literal_brackets_and_all() {
    let want = vec![("/home/u/[WIP] p/secret.txt".to_owned(), Some(FileKind::File))];
    for spelled in [
        "secret.txt",
        "./secret.txt",
        "~/[WIP] p/secret.txt",
        "~//[WIP] p/./secret.txt",
        "//home/u//[WIP] p/./secret.txt",
    ] {
        assert_eq!(anchors(&format!("[deny]\nread = [{spelled:?}]\n")), want, "{spelled}");
    }
    assert_eq!(
        anchors("[deny]\nread = [\"open[bracket/key\"]\n"),
        [("/home/u/[WIP] p/open[bracket/key".to_owned(), Some(FileKind::File))]
    );
    // `[ab]` exists, so it is that directory; `glob:` makes it a pattern.
    assert_eq!(
        anchors("[deny]\nread = [\"[ab]\"]\n"),
        [("/home/u/[WIP] p/[ab]".to_owned(), Some(FileKind::Dir))]
    );
    assert_eq!(
        anchors("[deny]\nread = [\"glob:[ab]\"]\n"),
        [("/home/u/[WIP] p/a".to_owned(), Some(FileKind::Dir))]
    );
}

#[test]
fn a_glob_is_matched_below_its_anchor_only() {
    // The project's own brackets are a directory name, not a character class.
    assert_eq!(
        anchors("[deny]\nread = [\"*.pem\"]\n"),
        [("/home/u/[WIP] p/a.pem".to_owned(), Some(FileKind::File))]
    );
}

#[test]
fn text_that_is_no_glob_and_no_file_is_a_missing_literal() {
    assert_eq!(
        anchors("[deny]\nread = [\"nope[x\"]\n"),
        [("/home/u/[WIP] p/nope[x".to_owned(), None)]
    );
}

#[test]
fn a_missing_deny_entry_is_masked_at_its_outermost_missing_component() {
    assert_eq!(
        anchors("[deny]\nread = [\"~/later.txt\", \"~/a/b/c\"]\n"),
        [("/home/u/a".to_owned(), None), ("/home/u/later.txt".to_owned(), None)]
    );
    // A dangling link: its target's outermost missing component.
    assert_eq!(anchors("[deny]\nread = [\"dangling\"]\n"), [("/home/u/gone".to_owned(), None)]);
    // The built-in list is not masked where it is missing (`.kube` is not in the fixture).
    let (r, _) = run("").unwrap();
    assert!(r.read_deny.iter().all(|a| a.kind.is_some()), "{:?}", r.read_deny);
}

#[test]
fn a_grant_of_a_protected_name_is_an_error_naming_the_fix() {
    for entry in [".git/hooks", ".git/hooks/../hooks", "vendor/x/.git/hooks", ".git/config"] {
        let e = err(&format!("[allow]\nwrite = [\".\", {entry:?}]\n"));
        assert!(e.contains("allow.write[1]") && e.contains("protected.writable"), "{entry}: {e}");
    }
    let e = err("[allow]\nwrite = [\"~/.ssh\"]\n");
    assert!(e.contains("allow.write[0]") && e.contains(".ssh"), "{e}");
    let (r, _) =
        run("[allow]\nwrite = [\".git/hooks\"]\n[protected]\nwritable = [\".git/hooks\"]\n")
            .unwrap();
    assert!(r.write.iter().any(|g| g.path.to_string().ends_with(".git/hooks")));
}

#[test]
fn a_grant_holding_protected_names_keeps_them_read_only() {
    let (r, _) = run("[allow]\nwrite = [\".git\"]\n").unwrap();
    let names: Vec<String> = r.protected.iter().map(|p| p.path.to_string()).collect();
    assert!(names.contains(&"/home/u/[WIP] p/.git/hooks".to_owned()), "{names:?}");
}

#[test]
fn a_home_grant_needs_write_home_and_warns_every_run() {
    for entry in ["~", "~/", "/home", "/home/u/."] {
        let e = err(&format!("[allow]\nwrite = [{entry:?}]\n"));
        assert!(e.contains("allow.write[0]") && e.contains("allow.write-home = true"), "{e}");
    }
    let (r, notes) = run("[allow]\nwrite = [\"~\"]\nwrite-home = true\n").unwrap();
    assert!(r.write.iter().any(|g| g.path.to_string() == "/home/u"));
    assert!(notes.iter().any(|n| n.contains("warning") && n.contains("home")), "{notes:?}");
    // Home protected names stay read-only in it.
    assert!(r.protected.iter().any(|p| p.path.to_string() == "/home/u/.ssh"));
}

#[test]
fn every_config_file_read_is_protected() {
    let policy = load_str("", Path::new("my.toml"), Format::Toml).unwrap();
    let ctx = Context::new("/home/u/[WIP] p", "/home/u")
        .with_config_files(vec!["/home/u/[WIP] p/cfg/my.toml".into()]);
    let (r, _) = resolve(&policy, &ctx, &host()).unwrap();
    let p = r.protected.iter().find(|p| p.path.to_string() == "/home/u/[WIP] p/cfg/my.toml");
    assert_eq!(p.map(|p| p.state.clone()), Some(ProtectedState::Exists { kind: FileKind::File }));
}

#[test]
fn a_hidden_root_keeps_the_links_its_carve_outs_were_spelled_through() {
    let (r, _) = run("[deny]\nread = [\"/\"]\n[allow]\nread = [\"/lib64\"]\n").unwrap();
    let root = r.read_deny.iter().find(|a| a.path == AbsPathBuf::root()).unwrap();
    let exc: Vec<String> = root.exceptions.iter().map(|e| e.path.to_string()).collect();
    assert!(
        exc.contains(&"/lib64".to_owned()) && exc.contains(&"/usr/lib64".to_owned()),
        "{exc:?}"
    );
}

#[test]
fn a_glob_hit_at_a_protected_name_is_not_granted() {
    let (r, notes) = run("[allow]\nwrite = [\"glob:.git/*\"]\n").unwrap();
    assert!(!r.write.iter().any(|g| g.path.to_string().ends_with(".git/hooks")), "{:?}", r.write);
    assert!(notes.iter().any(|n| n.contains(".git/hooks") && n.contains("protected")), "{notes:?}");
}

#[test]
fn an_unclosed_bracket_is_no_glob() {
    use crate::glob::brackets_close;
    for ok in ["[ab]", "*.pem", "[]]x", "[!]]", "a\\[b", "x[a-z]/[0-9]*"] {
        assert!(brackets_close(ok.as_bytes()), "{ok}");
    }
    for bad in ["open[bracket", "a[", "[!", "[]", "x/[a-z"] {
        assert!(!brackets_close(bad.as_bytes()), "{bad}");
    }
}
