//! Tests of config reading and resolution on the fake host: the symlink rules, globs,
//! protected names, anchors, and data-driven cases under `test_data/config/` (each
//! `NAME.toml` with its expected `NAME.txt`, blessed with `UPDATE_EXPECT=1`).

use std::ffi::OsString;
use std::path::Path;

use expect_test::expect_file;
use proptest::prelude::*;

use crate::*;

/// The fixture: a home with secrets, a git project with a submodule-less repo, links.
fn fixture() -> FakeHost {
    FakeHost::new()
        .file("/home/u/.ssh/id_canary", "secret")
        .file("/home/u/.aws/credentials", "secret")
        .file("/home/u/.bashrc", "")
        .dir("/home/u/.cache/pip")
        .file("/home/u/proj/.git/config", "[core]")
        .dir("/home/u/proj/.git/hooks")
        .file("/home/u/proj/src/main.rs", "")
        .file("/home/u/proj/src/lib.rs", "")
        .file("/home/u/proj/notes.txt", "")
        .dir("/home/u/proj/target")
        .dir("/home/u/other/src")
        .symlink("/home/u/proj/out", "/home/u/.ssh")
        .symlink("/home/u/proj/dangling", "../other/new")
        .symlink("/home/u/proj/src/escape.rs", "/home/u/other/src")
        .symlink("/home/u/proj/homelink", "/home/u")
        .dir("/tmp")
}

fn ctx() -> Context {
    Context::new("/home/u/proj", "/home/u")
        .with_env(vec![(OsString::from("PATH"), OsString::from("/bin"))])
}

fn load(text: &str) -> Result<Policy> {
    load_str(text, Path::new("paddock.toml"), Format::Toml)
}

fn resolve_text(text: &str) -> Result<(ResolvedPolicy, Vec<String>)> {
    resolve(&load(text)?, &ctx(), &fixture())
}

fn abs(p: &str) -> AbsPathBuf {
    AbsPathBuf::new_lexical(p).unwrap()
}

fn err(text: &str) -> String {
    match resolve_text(text) {
        Ok(_) => panic!("expected an error for:\n{text}"),
        Err(e) => e.to_string(),
    }
}

/// Renders a resolution for the golden files: the resolved policy as JSON and the notes.
fn render(text: &str) -> String {
    match resolve_text(text) {
        Err(e) => format!("error: {e}\n"),
        Ok((r, notes)) => {
            let mut out = serde_json::to_string_pretty(&r).unwrap();
            out.push('\n');
            for n in notes {
                out.push_str(&format!("note: {n}\n"));
            }
            out
        }
    }
}

#[test]
fn data_driven_configs() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("test_data/config");
    let mut names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    names.sort();
    let mut count = 0;
    for path in names.iter().filter(|p| p.extension().is_some_and(|e| e == "toml")) {
        let text = std::fs::read_to_string(path).unwrap();
        let expected = path.with_extension("txt");
        expect_file![expected].assert_eq(&render(&text));
        count += 1;
    }
    assert!(count >= 5, "expected the data-driven cases in {}", dir.display());
}

#[test]
fn default_policy_hides_secrets_and_writes_only_the_project() {
    let (r, _) = resolve_text("").unwrap();
    assert!(!r.is_readable(&abs("/home/u/.ssh/id_canary")));
    assert!(!r.is_readable(&abs("/home/u/.aws/credentials")));
    assert!(r.is_readable(&abs("/home/u/.bashrc")));
    assert!(r.is_writable(&abs("/home/u/proj/src/main.rs")));
    assert!(!r.is_writable(&abs("/home/u/other/src")));
    assert!(!r.is_writable(&abs("/home/u/proj/.git/hooks/pre-commit")));
    assert!(!r.is_writable(&abs("/home/u/proj/.git/config")));
    assert!(r.private_tmp);
    assert!(matches!(r.network, NetworkPolicy::Off));
    assert!(matches!(r.unix_sockets, UnixSockets::None));
    assert_eq!(r.pinned, [abs("/home/u/proj/.git")]);
}

#[test]
fn write_grant_through_a_link_out_of_the_project_is_refused() {
    // SYM-01 / item 1003: `out -> ~/.ssh` must never be mounted writable.
    let e = err("[allow]\nwrite = [\"out\"]\n");
    assert!(e.contains("allow.write[0]") && e.contains("/home/u/.ssh"), "{e}");
    // A dangling link is judged by where a write through it would land.
    let e = err("[allow]\nwrite = [\"dangling\"]\n");
    assert!(e.contains("/home/u/other/new"), "{e}");
    // The same path spelled absolutely inside the project is refused too.
    let e = err("[allow]\nwrite = [\"/home/u/proj/out\"]\n");
    assert!(e.contains("resolves to /home/u/.ssh"), "{e}");
}

#[test]
fn read_grant_through_a_link_into_a_deny_anchor_is_refused() {
    let e = err("[allow]\nread = [\"homelink/.aws\"]\n[deny]\nread = [\"~\"]\n");
    assert!(e.contains("allow.read[0]") && e.contains("/home/u/.aws"), "{e}");
}

#[test]
fn relative_entries_may_not_climb_out() {
    for entry in ["../", "../..", "src/../../", "./../sibling"] {
        let e = err(&format!("[allow]\nwrite = [{entry:?}]\n"));
        assert!(e.contains("may not leave the project"), "{entry}: {e}");
    }
    let e = err("[allow]\nwrite = [\"/\"]\n");
    assert!(e.contains("whole filesystem"), "{e}");
    let e = err("[allow]\nwrite = [\"~/..\"]\n");
    assert!(e.contains("allow.write[0]") && e.contains("may not leave the home directory"), "{e}");
}

#[test]
fn whole_directory_globs_collapse() {
    for g in ["src/**", "src/**/*"] {
        let (r, notes) = resolve_text(&format!("[allow]\nwrite = [{g:?}]\n")).unwrap();
        assert_eq!(
            r.write.iter().map(|w| w.path.clone()).collect::<Vec<_>>(),
            [abs("/home/u/proj/src")],
            "{g}"
        );
        assert!(notes.is_empty(), "{notes:?}");
    }
}

#[test]
fn glob_hits_leaving_their_base_are_dropped() {
    // item 1006: `src/*.rs` includes `escape.rs -> /home/u/other/src`, which is not granted.
    let (r, notes) = resolve_text("[allow]\nwrite = [\"src/*.rs\"]\n").unwrap();
    let paths: Vec<_> = r.write.iter().map(|w| w.path.to_string()).collect();
    assert_eq!(paths, ["/home/u/proj/src/lib.rs", "/home/u/proj/src/main.rs"]);
    assert!(
        notes.iter().any(|n| n.contains("leave /home/u/proj/src through a symlink")),
        "{notes:?}"
    );
    assert_eq!(r.globs.len(), 1);
}

#[test]
fn write_glob_matching_nothing_names_the_directory() {
    // item 496.
    let (r, notes) = resolve_text("[allow]\nwrite = [\"target/*.o\"]\n").unwrap();
    assert!(r.write.is_empty());
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].contains("allow.write[0]")
            && notes[0].contains("grant the directory instead: /home/u/proj/target"),
        "{notes:?}"
    );
}

#[test]
fn deny_anchor_with_exceptions() {
    let (r, _) =
        resolve_text("[allow]\nread = [\"~/.cache/pip\"]\n[deny]\nread = [\"~\"]\n").unwrap();
    let home = r.read_deny.iter().find(|a| a.path == abs("/home/u")).unwrap();
    let ex: Vec<_> = home.exceptions.iter().map(|e| (e.path.to_string(), e.writable)).collect();
    assert_eq!(ex, [("/home/u/.cache/pip".to_owned(), false), ("/home/u/proj".to_owned(), true)]);
    assert!(!r.is_readable(&abs("/home/u/.bashrc")));
    assert!(r.is_readable(&abs("/home/u/.cache/pip/x")));
    assert!(r.is_readable(&abs("/home/u/proj/src/main.rs")));
}

#[test]
fn secrets_stay_hidden_inside_a_home_write_grant() {
    let (r, _) = resolve_text("[allow]\nwrite = [\".\", \"~\"]\nwrite-home = true\n").unwrap();
    assert!(!r.is_readable(&abs("/home/u/.ssh/id_canary")));
    // Shell start-up files are protected in a writable home, present or missing.
    assert!(!r.is_writable(&abs("/home/u/.bashrc")));
    let zshrc = r.protected.iter().find(|p| p.path == abs("/home/u/.zshrc")).unwrap();
    assert_eq!(zshrc.state, ProtectedState::Missing { first_missing: abs("/home/u/.zshrc") });
    let local_bin = r.protected.iter().find(|p| p.path == abs("/home/u/.local/bin")).unwrap();
    assert_eq!(local_bin.state, ProtectedState::Missing { first_missing: abs("/home/u/.local") });
}

#[test]
fn protected_names_can_be_lifted_one_by_one() {
    let (r, _) = resolve_text("[protected]\nwritable = [\".vscode\"]\n").unwrap();
    assert!(r.is_writable(&abs("/home/u/proj/.vscode/tasks.json")));
    assert!(!r.is_writable(&abs("/home/u/proj/.idea/x")));
    let e = err("[protected]\nwritable = [\".vscod\"]\n");
    assert!(e.contains("protected.writable[0]") && e.contains("did you mean \".vscode\""), "{e}");
}

#[test]
fn deny_write_pins_ancestors() {
    // FSW-10: renaming an ancestor of a deny-within-allow path must fail.
    let host = fixture().dir("/home/u/proj/a/b/c");
    let policy = load("[deny]\nwrite = [\"a/b/c\"]\n").unwrap();
    let (r, _) = resolve(&policy, &ctx(), &host).unwrap();
    assert!(!r.is_writable(&abs("/home/u/proj/a/b/c/f")));
    assert!(
        r.pinned.contains(&abs("/home/u/proj/a")) && r.pinned.contains(&abs("/home/u/proj/a/b"))
    );
}

#[test]
fn worktree_git_dir_is_protected() {
    let host = FakeHost::new()
        .file("/home/u/wt/.git", "gitdir: /home/u/main/.git/worktrees/wt\n")
        .file("/home/u/main/.git/worktrees/wt/commondir", "../..\n")
        .dir("/home/u/main/.git/hooks")
        .file("/home/u/main/.git/config", "");
    let policy = load("[allow]\nwrite = [\".\", \"/home/u/main\"]\n").unwrap();
    let (r, _) = resolve(&policy, &Context::new("/home/u/wt", "/home/u"), &host).unwrap();
    assert!(!r.is_writable(&abs("/home/u/main/.git/hooks/pre-commit")));
    assert!(!r.is_writable(&abs("/home/u/main/.git/config")));
}

#[test]
fn protected_symlink_in_a_write_grant_is_reported_and_never_followed() {
    // SYM-04: a planted `.vscode -> ~/.config/autostart` is reported, never followed: its
    // target lies outside every write grant, so nothing there is granted or bound.
    let host = fixture().symlink("/home/u/proj/.vscode", "/home/u/.config/autostart");
    let (r, notes) = resolve(&load("").unwrap(), &ctx(), &host).unwrap();
    assert!(
        notes.iter().any(|n| n.contains(".vscode") && n.contains("symbolic link")),
        "{notes:?}"
    );
    assert!(!r.protected.iter().any(|p| p.path.starts_with(&abs("/home/u/.config"))));
    assert!(!r.is_writable(&abs("/home/u/.config/autostart/x.desktop")));
    // A link whose target holds the grant itself cannot be kept: refused.
    let host = fixture().symlink("/home/u/proj/.vscode", ".");
    let e = resolve(&load("").unwrap(), &ctx(), &host).unwrap_err().to_string();
    assert!(e.contains(".vscode") && e.contains("protected.writable"), "{e}");
}

#[test]
fn a_symlinked_protected_name_keeps_its_target_read_only() {
    let host = fixture()
        .file("/home/u/proj/dotfiles/bashrc", "")
        .symlink("/home/u/proj/.bashrc", "dotfiles/bashrc")
        .symlink("/home/u/proj/.zshrc", "dotfiles/missing/zshrc");
    let (r, notes) = resolve(&load("").unwrap(), &ctx(), &host).unwrap();
    assert!(!r.is_writable(&abs("/home/u/proj/dotfiles/bashrc")));
    let z = r.protected.iter().find(|p| p.path == abs("/home/u/proj/dotfiles/missing/zshrc"));
    assert_eq!(
        z.map(|p| p.state.clone()),
        Some(ProtectedState::Missing { first_missing: abs("/home/u/proj/dotfiles/missing") })
    );
    assert_eq!(notes.iter().filter(|n| n.contains("symbolic link")).count(), 2, "{notes:?}");
}

#[test]
fn a_git_file_pointing_nowhere_is_protected_as_a_file() {
    let host = FakeHost::new()
        .file("/home/u/proj/.git", "gitdir: /nowhere\n")
        .file("/home/u/proj/src/main.rs", "");
    let (r, notes) = resolve(&load("").unwrap(), &ctx(), &host).unwrap();
    let git = r.protected.iter().find(|p| p.path == abs("/home/u/proj/.git")).unwrap();
    assert_eq!(git.state, ProtectedState::Exists { kind: FileKind::File });
    assert!(
        !r.protected.iter().any(|p| p.path.starts_with(&abs("/home/u/proj/.git/"))
            && p.path != abs("/home/u/proj/.git"))
    );
    assert_eq!(notes.iter().filter(|n| n.contains("is a file where")).count(), 1, "{notes:?}");
}

#[test]
fn unix_socket_link_planted_in_the_project_is_refused() {
    let host = fixture().symlink("/home/u/proj/ok.sock", "/run/docker.sock");
    let e = resolve(&load("[allow]\nunix-sockets = [\"ok.sock\"]\n").unwrap(), &ctx(), &host)
        .unwrap_err()
        .to_string();
    assert!(e.contains("allow.unix-sockets[0]") && e.contains("/run/docker.sock"), "{e}");
}

#[test]
fn tmp_grant_turns_off_private_tmp() {
    let (r, _) = resolve_text("[allow]\nwrite = [\".\", \"/tmp\"]\n").unwrap();
    assert!(!r.private_tmp);
}

#[test]
fn unknown_keys_name_the_nearest() {
    let e = load("netwrok = false\n").unwrap_err().to_string();
    assert_eq!(e, "paddock.toml: unknown key `netwrok`; did you mean `allow.network`?");
    let e = load("[allow]\nwirte = []\n").unwrap_err().to_string();
    assert_eq!(e, "paddock.toml: allow: unknown key `wirte`; did you mean `allow.write`?");
}

#[test]
fn config_errors_name_file_key_value_and_fix() {
    let e = load("[allow]\nnetwork = \"yes\"\n").unwrap_err().to_string();
    assert_eq!(
        e,
        "paddock.toml: allow.network: expected false, true or a list of destinations (got \"yes\"); write `false`, `true` or [\"example.com\", \"*.example.org:443\"]"
    );
    let e = load("[allow]\nwrite = \".\"\n").unwrap_err().to_string();
    assert!(e.starts_with("paddock.toml: allow.write: expected a list of paths"), "{e}");
    let e = load("[allow]\nnetwork = [\"*.com\"]\n").unwrap_err().to_string();
    assert!(e.starts_with("paddock.toml: allow.network[0]: not a valid destination"), "{e}");
    let e = load("[allow]\nwrite = [\"a\"]\n[allow]\nread = []\n").unwrap_err().to_string();
    assert!(e.starts_with("paddock.toml: line 3"), "{e}");
    let e = load("\u{feff}[allow]\n").unwrap_err().to_string();
    assert!(e.contains("byte-order mark"), "{e}");
    let big = "#".repeat(MAX_CONFIG_BYTES + 1);
    assert!(load(&big).unwrap_err().to_string().contains("larger than paddock reads"));
    let e = load("[allow]\nwrite = [\"a\\u0000b\"]\n").unwrap_err().to_string();
    assert!(e.contains("NUL"), "{e}");
}

#[test]
fn srt_settings_convert_with_notes() {
    let json = r#"{"network":{"allowedDomains":["github.com","*.npmjs.org"],"deniedDomains":["evil.github.com"],"allowLocalBinding":true},
        "filesystem":{"denyRead":["~/.ssh"],"allowWrite":[".","/tmp/out"],"denyWrite":[".env"]},"enableWeakerNestedSandbox":false}"#;
    let (policy, notes) = srt::convert(json, Path::new("settings.json")).unwrap();
    assert!(matches!(&policy.allow.network.value, NetworkRule::Domains(d) if d.len() == 2));
    assert_eq!(policy.deny.network.len(), 1);
    assert_eq!(policy.allow.write.len(), 2);
    assert_eq!(policy.deny.write.len(), 1);
    assert_eq!(notes.len(), 1);
    assert!(
        notes[0].contains("network.allowLocalBinding") && notes[0].contains("allow.local-ports"),
        "{notes:?}"
    );
    let e = srt::convert(r#"{"netwrok":{}}"#, Path::new("s.json")).unwrap_err().to_string();
    assert_eq!(e, "s.json: unknown key `netwrok`; did you mean `network`?");
    let e = srt::convert(r#"{"network":{"allowedDomains":"x"}}"#, Path::new("s.json"))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("s.json: network.allowedDomains: expected a list"), "{e}");
}

#[test]
fn report_filter_scopes_and_ignores() {
    let (r, _) = resolve_text("[ignore]\nread = [\"src/gen\"]\n").unwrap();
    let f = ReportFilter::new(&r);
    let v = |kind, p: &str| Violation {
        kind,
        path: Some(p.into()),
        target: None,
        syscall: None,
        errno: None,
        count: 1,
    };
    assert!(f.keep(&v(ViolationKind::Read, "/home/u/proj/secret.pem"), None));
    assert!(!f.keep(&v(ViolationKind::Read, "/home/u/proj/src/gen/x"), None));
    assert!(!f.keep(&v(ViolationKind::Read, "/etc/shadow"), None));
    let summary = summarize(&[v(ViolationKind::Write, "/home/u/proj/a\n\u{1b}b")], &r);
    assert_eq!(summary, ["denied 1 write to a\\n\\u{1b}b (allow with allow.write)"]);
    let hooks = summarize(&[v(ViolationKind::Write, "/home/u/proj/.git/hooks/pre-commit")], &r);
    assert_eq!(hooks, ["denied 1 write to .git/hooks/pre-commit (allow with protected.writable)"]);
    assert!(cwd_hint(&r, &abs("/home/u/.ssh"), 1, 0).is_some());
    assert!(cwd_hint(&r, &abs("/home/u/proj"), 1, 0).is_none());
}

proptest! {
    /// Resolution is idempotent: resolving the resolved write grants (as absolute entries)
    /// yields the same grants.
    #[test]
    fn resolution_is_idempotent(picks in proptest::collection::vec(0usize..6, 1..4)) {
        let candidates = [".", "src", "src/**", "target", "notes.txt", "src/*.rs"];
        let entries: Vec<String> = picks.iter().map(|i| format!("{:?}", candidates[*i])).collect();
        let text = format!("[allow]\nwrite = [{}]\n", entries.join(", "));
        let (first, _) = resolve_text(&text).unwrap();
        let again: Vec<String> = first.write.iter().map(|w| format!("{:?}", w.path.to_string())).collect();
        let (second, _) = resolve_text(&format!("[allow]\nwrite = [{}]\n", again.join(", "))).unwrap();
        let a: Vec<_> = first.write.iter().map(|w| w.path.clone()).collect();
        let b: Vec<_> = second.write.iter().map(|w| w.path.clone()).collect();
        prop_assert_eq!(a, b);
    }

}

/// Nothing resolves writable outside the project from a relative entry: every relative
/// entry of up to three components taken from the fixture's own names (its links out of the
/// project, `..`, globs) either resolves to grants inside the project or, when it escapes
/// (climbs above the project, or passes through a link that leaves it, and is no glob, whose
/// escaping hits are dropped), fails. Exhaustive over the fixture, so that both outcomes
/// are exercised for real (it was a property over random names, of which 242 in 256 named
/// nothing and the escaping ones were never asserted).
#[test]
fn relative_grants_stay_inside() {
    const NAMES: [&str; 15] = [
        "src",
        "main.rs",
        "lib.rs",
        "notes.txt",
        "target",
        ".git",
        "out",
        "dangling",
        "escape.rs",
        "homelink",
        "new",
        "..",
        ".",
        "*",
        "**",
    ];
    // Links of the fixture that lead out of the project, by their path inside it.
    const OUT_LINKS: [&str; 4] = ["out", "dangling", "src/escape.rs", "homelink"];
    let project = abs("/home/u/proj");
    let mut entries: Vec<Vec<&str>> = NAMES.iter().map(|n| vec![*n]).collect();
    for depth in 1..3 {
        let longer: Vec<Vec<&str>> = entries
            .iter()
            .filter(|e| e.len() == depth)
            .flat_map(|e| NAMES.iter().map(move |n| [e.clone(), vec![*n]].concat()))
            .collect();
        entries.extend(longer);
    }
    let (mut granted, mut refused) = (0, 0);
    for parts in &entries {
        let entry = parts.join("/");
        // The entry's lexical walk: climbing above the project, or through a link out of it.
        let mut at: Vec<&str> = Vec::new();
        let mut escapes = false;
        for p in parts {
            match *p {
                "." => {}
                ".." if at.is_empty() => escapes = true,
                ".." => {
                    at.pop();
                }
                name => {
                    at.push(name);
                    escapes |= OUT_LINKS.contains(&at.join("/").as_str());
                }
            }
        }
        let glob = parts.iter().any(|p| p.contains('*'));
        let text = format!("[allow]\nwrite = [{entry:?}]\n");
        match resolve_text(&text) {
            Ok((r, notes)) => {
                // An escaping entry resolves only when it names a missing path (one under a
                // name that does not exist, climbing back out with `..`): then it grants
                // nothing, and says so.
                assert!(
                    !escapes || glob || r.write.is_empty(),
                    "{entry:?} escapes the project but resolved: {:?}",
                    r.write
                );
                if r.write.is_empty() {
                    assert!(
                        notes.iter().any(|n| n.contains("does not exist")
                            || n.contains("matches nothing")
                            || n.contains("is a protected name")),
                        "{entry:?} granted nothing without a note: {notes:?}"
                    );
                }
                for w in &r.write {
                    assert!(w.path.starts_with(&project), "{entry:?} granted {}", w.path);
                }
                granted += usize::from(!r.write.is_empty());
            }
            Err(_) => refused += 1,
        }
    }
    // The exhaustive walk exercises both sides for real.
    // (Most of the 3615 combinations name paths that do not exist, and grant nothing.)
    assert!(granted > 150, "only {granted} of {} entries granted anything", entries.len());
    assert!(refused > 500, "only {refused} of {} entries were refused", entries.len());
}
