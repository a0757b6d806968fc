//! Properties of generated profiles, over random policies:
//!
//! - **semantics**: on a small tree, the profile allows a read exactly where
//!   [`ResolvedPolicy::is_readable`] says and a write exactly where the path is writable and
//!   visible, judged by the evaluator in [`super::eval`] (last match wins);
//! - **order**: every narrowing rule comes after the broader allow it narrows;
//! - **no user byte in the text**: the profile text of a policy with hostile paths equals the
//!   text of the same policy with plain paths, and no path byte appears in it;
//! - **hostile inlined values** (POL-02) are refused or, for paths, parameterized.

use std::ffi::OsString;

use paddock_policy::{
    AbsPathBuf, Exception, FileKind, GlobKind, GlobRule, NetworkPolicy, ResolvedPolicy, SocketPath,
    UnixSockets,
};
use proptest::prelude::*;

use super::eval::Sbpl;
use super::*;
use crate::{log_tag, proxy_port};

const NAMES: [&str; 3] = ["a", "b", "c"];

/// A path in the test tree: `/r` and up to three components from [`NAMES`].
fn tree_path(idx: &[usize]) -> AbsPathBuf {
    let mut p = abs("/r");
    for i in idx {
        p = p.join(NAMES[*i]);
    }
    p
}

fn universe() -> Vec<Vec<usize>> {
    let mut out = vec![vec![]];
    for a in 0..3 {
        out.push(vec![a]);
        for b in 0..3 {
            out.push(vec![a, b]);
            for c in 0..3 {
                out.push(vec![a, b, c]);
            }
        }
    }
    out
}

fn arb_idx() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(0usize..3, 0..=3)
}

/// A leaf (depth 3) may be a file; anything above is a directory.
fn kind_for(idx: &[usize], file: bool) -> FileKind {
    if file && idx.len() == 3 { FileKind::File } else { FileKind::Dir }
}

/// A tree path (component indices) and whether a leaf there is a file.
type Node = (Vec<usize>, bool);

#[derive(Clone, Debug)]
struct Shape {
    anchors: Vec<(Vec<usize>, Vec<Node>)>,
    grants: Vec<Node>,
    protected: Vec<Node>,
}

fn arb_shape() -> impl Strategy<Value = Shape> {
    (
        prop::collection::vec(
            (arb_idx(), prop::collection::vec((arb_idx(), any::<bool>()), 0..3)),
            0..3,
        ),
        prop::collection::vec((arb_idx(), any::<bool>()), 0..3),
        prop::collection::vec((arb_idx(), any::<bool>()), 0..3),
    )
        .prop_map(|(anchors, grants, protected)| Shape { anchors, grants, protected })
}

/// The resolved policy a shape stands for, with resolution's invariants: exceptions lie under
/// their anchor, a write grant under an anchor is one of its exceptions, protected paths lie
/// in a grant, anchors are listed outermost first.
fn policy_of(shape: &Shape) -> ResolvedPolicy {
    let mut p = empty_policy();
    for (g, file) in &shape.grants {
        let path = tree_path(g);
        if !p.write.iter().any(|w| w.path == path) {
            p.write.push(grant(&path.to_string(), kind_for(g, *file), "allow.write[0]"));
        }
    }
    let mut anchors = shape.anchors.clone();
    anchors.sort_by_key(|(a, _)| a.len());
    for (a, exceptions) in &anchors {
        let path = tree_path(a);
        if p.read_deny.iter().any(|d| d.path == path) {
            continue;
        }
        let mut d = anchor(&path.to_string(), &[], "deny.read[0]");
        for (e, file) in exceptions {
            let e_path = tree_path(e);
            if e_path.starts_with(&path)
                && e_path != path
                && !d.exceptions.iter().any(|x| x.path == e_path)
            {
                d.exceptions.push(Exception {
                    path: e_path,
                    kind: kind_for(e, *file),
                    writable: false,
                });
            }
        }
        for w in &p.write {
            if w.path.starts_with(&path) && !d.exceptions.iter().any(|x| x.path == w.path) {
                d.exceptions.push(Exception { path: w.path.clone(), kind: w.kind, writable: true });
            }
        }
        p.read_deny.push(d);
    }
    for (q, exists) in &shape.protected {
        let path = tree_path(q);
        if p.write
            .iter()
            .any(|w| w.kind == FileKind::Dir && path.starts_with(&w.path) && path != w.path)
            && !p.protected.iter().any(|x| x.path == path)
        {
            p.protected.push(protected(&path.to_string(), "rule", exists.then_some(FileKind::Dir)));
        }
    }
    p
}

fn build(p: &ResolvedPolicy) -> Profile {
    let t = task();
    let filtered = matches!(p.network, NetworkPolicy::Filtered { .. });
    Profile::build(p, &t, &log_tag(&t), filtered.then(|| proxy_port(&t))).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn reads_and_writes_mean_what_the_policy_says(shape in arb_shape()) {
        let p = policy_of(&shape);
        let profile = build(&p);
        let sbpl = Sbpl::parse(&profile).unwrap();
        for idx in universe() {
            let path = tree_path(&idx);
            let s = path.to_string();
            let readable = p.is_readable(&path);
            let writable = p.is_writable(&path) && readable;
            prop_assert_eq!(sbpl.allows("file-read-data", &s), readable, "read {} in\n{}", s, profile.text);
            prop_assert_eq!(sbpl.allows("file-write-data", &s), writable, "write {} in\n{}", s, profile.text);
            prop_assert_eq!(sbpl.allows("process-exec", &s), readable, "exec {}", s);
        }
        let tmp = crate::task_tmpdir(&task()).join("x").to_string();
        prop_assert!(sbpl.allows("file-write-create", &tmp));
        prop_assert!(!sbpl.allows("file-write-create", "/r.sibling"));
    }

    #[test]
    fn every_narrowing_rule_follows_what_it_narrows(shape in arb_shape()) {
        let p = policy_of(&shape);
        let profile = build(&p);
        let sbpl = Sbpl::parse(&profile).unwrap();
        let find = |pred: &dyn Fn(&super::eval::Rule) -> bool| -> Vec<usize> {
            sbpl.rules.iter().filter(|r| pred(r)).map(|r| r.index).collect()
        };
        let read_all = find(&|r| r.allow && r.ops == ["file-read*"] && r.filters.is_empty());
        prop_assert_eq!(read_all.len(), 1);
        let write_allows = find(&|r| r.allow && r.ops.iter().any(|o| o == "file-write*") && r.text.contains("WRITE_"));
        for i in 0..p.read_deny.len() {
            let name = format!("\"READ_DENY_{i}\"");
            let rules = find(&|r| !r.allow && r.text.contains(&name));
            prop_assert_eq!(rules.len(), 1, "one rule per anchor");
            prop_assert!(rules[0] > read_all[0], "anchor {} before (allow file-read*)", i);
            prop_assert!(write_allows.iter().all(|w| *w < rules[0]), "anchor {} before a write grant", i);
        }
        for i in 0..p.protected.len() {
            let name = format!("\"PROTECTED_{i}\"");
            let rules = find(&|r| !r.allow && r.text.contains(&name));
            prop_assert_eq!(rules.len(), 1);
            let last_write_allow = find(&|r| r.allow && r.ops.iter().any(|o| o.starts_with("file-write")));
            prop_assert!(last_write_allow.iter().all(|w| *w < rules[0]), "protected {} before a write allow", i);
        }
    }
}

// ---- no user-supplied byte in the text ----

/// Component names that would break a profile if they were written into it. (No `/`: that
/// would change the shape of the policy, not only its bytes.)
fn arb_hostile_name() -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(vec![
        "\"",
        "\\",
        "(",
        ")",
        "#|",
        "|#",
        ";",
        "\n",
        "\r",
        "\t",
        "\u{7f}",
        "\u{1b}[2J",
        " ",
        "x\") (allow default",
        "(allow file-write* (subpath \"x\"))",
        "$",
        "*",
        "[1]",
        "é",
        "\u{202e}",
        "--bind",
        "-",
        "=",
        "'",
    ]);
    prop::collection::vec(pieces, 1..4).prop_map(|v| format!("ZQ{}", v.concat()))
}

/// The same structure twice: once with hostile names, once with plain ones.
fn twin_policies(names: &[String]) -> (ResolvedPolicy, ResolvedPolicy) {
    let make = |n: &dyn Fn(usize) -> String| {
        let home = abs("/h").join(n(0));
        let proj = home.join(n(1));
        let mut p = empty_policy();
        p.home = home.clone();
        p.project_dir = proj.clone();
        p.read_deny = vec![{
            let mut a = anchor(&home.to_string(), &[], "deny.read[0]");
            a.path = home.clone();
            a.exceptions = vec![
                Exception { path: proj.clone(), kind: FileKind::Dir, writable: true },
                Exception { path: home.join(n(2)), kind: FileKind::File, writable: false },
            ];
            a
        }];
        let mut g = grant("/x", FileKind::Dir, "allow.write[0]");
        g.path = proj.clone();
        p.write = vec![g];
        let mut pr = protected("/x", "rule", None);
        pr.path = proj.join(n(3));
        p.protected = vec![pr];
        p.pinned = vec![proj.join(n(4))];
        p.globs = vec![
            GlobRule {
                kind: GlobKind::Write,
                base: proj.join(n(5)),
                pattern: "*.txt".into(),
                origin: origin("allow.write[1]"),
            },
            GlobRule {
                kind: GlobKind::DenyRead,
                base: proj.clone(),
                pattern: "**/*.pem".into(),
                origin: origin("deny.read[1]"),
            },
        ];
        p.unix_sockets = UnixSockets::Paths {
            sockets: vec![SocketPath { declared: proj.join(n(6)), resolved: home.join(n(7)) }],
        };
        p.git_config = true;
        p.network = NetworkPolicy::Filtered { allow: vec![], deny: vec![] };
        p
    };
    let hostile = make(&|i| names[i % names.len()].clone() + &i.to_string());
    let plain = make(&|i| format!("plain{i}"));
    (hostile, plain)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn no_path_byte_reaches_the_profile_text(names in prop::collection::vec(arb_hostile_name(), 1..8)) {
        let (hostile, plain) = twin_policies(&names);
        let t = task();
        let hp = Profile::build(&hostile, &t, &log_tag(&t), Some(30001));
        // A hostile glob base may be refused (a control character has no sure meaning in a
        // regex); then nothing was built at all, which is the other acceptable outcome.
        let hp = match hp {
            Ok(hp) => hp,
            Err(e) => {
                let shown = e.to_string();
                prop_assert!(shown.contains("allow.write[1]") || shown.contains("deny.read[1]"), "{}", shown);
                return Ok(());
            }
        };
        let pp = Profile::build(&plain, &t, &log_tag(&t), Some(30001)).unwrap();
        prop_assert!(!hp.text.contains("ZQ"), "a path reached the text:\n{}", hp.text);
        prop_assert_eq!(&hp.text, &pp.text);
        Sbpl::parse(&hp).unwrap();
        // Every hostile name is in some parameter, byte-exact (but for the glob base, index 5,
        // which is there regex-escaped).
        for (i, name) in names.iter().enumerate().filter(|(i, _)| *i != 5) {
            let needle = OsString::from(name.clone() + &i.to_string());
            prop_assert!(hp.params.iter().any(|p| p.value.as_encoded_bytes()
                .windows(needle.len()).any(|w| w == needle.as_encoded_bytes())));
        }
    }

    #[test]
    fn mach_names_are_refused_or_inert(name in "\\PC{0,12}|[a-z.\"()\\\\#|;*@ ]{0,12}") {
        let mut p = empty_policy();
        p.mach_lookup = vec![name.clone()];
        let t = task();
        match Profile::build(&p, &t, &log_tag(&t), None) {
            Err(e) => prop_assert!(e.to_string().contains("allow.mach-lookup[0]"), "{}", e),
            Ok(profile) => {
                prop_assert!(name.chars().all(|c| c.is_ascii_alphanumeric() || ".-_@+*".contains(c)), "{:?}", name);
                Sbpl::parse(&profile).unwrap();
            }
        }
    }
}

#[test]
fn pol02_hostile_write_entries_stay_parameters() {
    let entries = [
        "x\") (allow file-write* (subpath \"/",
        "a\"b",
        "a\\",
        "a\\\")",
        "a)(allow default)",
        "a\n(allow default)",
        "#|",
        "--bind",
        "-",
        "--",
        "p -- --bind / /",
    ];
    for entry in entries {
        let mut p = p0();
        let path = abs("/Users/u/proj").join(entry);
        p.write.push(paddock_policy::WriteGrant {
            path: path.clone(),
            kind: FileKind::Dir,
            origin: origin("allow.write[1]"),
        });
        let profile = build(&p);
        let sbpl = Sbpl::parse(&profile).unwrap();
        assert!(
            !profile.text.contains(entry.trim_start_matches('-')) || entry.starts_with('-'),
            "{entry:?} in text"
        );
        assert!(
            profile.params.iter().any(|q| q.value == path.as_os_str()),
            "{entry:?} not a parameter"
        );
        // Outside writes stay denied; the odd grant itself works.
        assert!(!sbpl.allows("file-write-create", "/Users/u/SBPL_PWN"));
        assert!(!sbpl.allows("file-write-create", "/private/tmp/host-only/SBPL_PWN"));
        assert!(sbpl.allows("file-write-create", &path.join("f").to_string()));
    }
}

#[test]
fn mac04_loopback_outbound_only_to_granted_ports() {
    let mut p = p0();
    p.network = NetworkPolicy::Filtered { allow: vec![], deny: vec![] };
    p.local_ports = vec![8080];
    p.host_ports = vec![5432];
    let profile = build(&p);
    let sbpl = Sbpl::parse(&profile).unwrap();
    let port = proxy_port(&task());
    for (op, addr, allowed) in [
        ("network-outbound", format!("localhost:{port}"), true),
        ("network-outbound", "localhost:5432".to_owned(), true),
        ("network-outbound", "localhost:9222".to_owned(), false),
        ("network-outbound", "localhost:8080".to_owned(), false),
        ("network-outbound", "1.1.1.1:443".to_owned(), false),
        ("network-bind", "localhost:8080".to_owned(), true),
        ("network-inbound", "localhost:8080".to_owned(), true),
        // A dual-stack `::` server on the granted port (Node, Python's http.server).
        ("network-bind", "*:8080".to_owned(), true),
        ("network-inbound", "*:8080".to_owned(), true),
        ("network-bind", "localhost:8081".to_owned(), false),
        ("network-bind", "*:8082".to_owned(), false),
    ] {
        assert_eq!(sbpl.allows(op, &addr), allowed, "{op} {addr}");
    }
    assert!(
        !sbpl.allows("network-outbound", "/private/var/run/mDNSResponder"),
        "no DNS outside the proxy"
    );
}

#[test]
fn mac01_mac02_mac06_refused_unless_granted() {
    let sbpl_of = |p: &ResolvedPolicy| Sbpl::parse(&build(p)).unwrap();
    let p = p0();
    let s = sbpl_of(&p);
    for name in [
        "com.apple.coreservices.launchservicesd",
        "com.apple.lsd.mapdb",
        "com.apple.coreservices.appleevents",
        "com.apple.SecurityServer",
        "com.apple.pasteboard.1",
    ] {
        assert!(!s.allows("mach-lookup", name), "{name}");
    }
    assert!(s.allows("mach-lookup", "com.apple.system.opendirectoryd.libinfo"));
    assert!(!s.allows("appleevent-send", "com.apple.Terminal"));
    assert!(!s.allows("lsopen", "/Users/u/proj/x.command"));
    assert!(!s.allows("file-ioctl", "/dev/tty"));
    assert!(!s.allows("file-ioctl", "/dev/ttys003"));
    assert!(s.allows("file-write-data", "/dev/ttys003"), "output to the inherited terminal");

    let mut granted = p0();
    granted.mach_lookup = vec![
        "com.apple.coreservices.launchservicesd".into(),
        "com.apple.coreservices.appleevents".into(),
    ];
    let s = sbpl_of(&granted);
    assert!(s.allows("mach-lookup", "com.apple.coreservices.launchservicesd"));
    assert!(s.allows("appleevent-send", "com.apple.Terminal"));
    assert!(
        !s.allows("mach-lookup", "com.apple.lsd.mapdb"),
        "the database stays refused unless granted"
    );
    assert!(!s.allows("file-ioctl", "/dev/tty"));
}

#[test]
fn mac05_both_spellings_of_tmp() {
    let mut p = empty_policy();
    p.read_deny = vec![anchor("/tmp/sec", &[], "deny.read[0]")];
    p.write = vec![grant("/tmp/w", FileKind::Dir, "allow.write[0]")];
    let s = Sbpl::parse(&build(&p)).unwrap();
    for path in ["/private/tmp/sec/x", "/tmp/sec/x"] {
        assert!(!s.allows("file-read-data", path), "{path}");
    }
    for path in ["/private/tmp/w/ok", "/tmp/w/ok2"] {
        assert!(s.allows("file-write-create", path), "{path}");
    }
}

#[test]
fn fsw10_anchors_and_pins_cannot_be_renamed_away() {
    let mut p = p0();
    p.read_deny.push(anchor("/Users/u/proj/a/secret", &[], "deny.read[1]"));
    let s = Sbpl::parse(&build(&p)).unwrap();
    for dir in ["/Users/u/proj/a", "/Users/u/proj/a/secret", "/Users/u/proj/.git"] {
        assert!(!s.allows("file-write-unlink", dir), "{dir}");
    }
    assert!(s.allows("file-write-unlink", "/Users/u/proj/b"));
    // Protected names, present or missing, as files or trees.
    for path in [
        "/Users/u/proj/.git/hooks/pre-commit",
        "/Users/u/proj/.bashrc",
        "/Users/u/proj/.git/config",
    ] {
        assert!(!s.allows("file-write-create", path), "{path}");
        assert!(!s.allows("file-write-data", path), "{path}");
    }
    assert!(s.allows("file-write-data", "/Users/u/proj/.git/index"));
}

#[test]
fn sym07_other_case_spellings_of_denied_paths_are_denied_too() {
    let mut p = p0();
    p.globs.push(GlobRule {
        kind: GlobKind::DenyRead,
        base: abs("/Users/u/proj"),
        pattern: "**/*.pem".into(),
        origin: origin("deny.read[1]"),
    });
    let s = Sbpl::parse(&build(&p)).unwrap();
    for path in [
        "/Users/u/proj/.GIT/HOOKS/pre-commit",
        "/Users/u/proj/.BASHRC",
        "/Users/u/proj/.Git/Config",
    ] {
        assert!(!s.allows("file-write-create", path), "{path}");
    }
    for path in ["/Users/u/.SSH/id_rsa", "/USERS/U/.aws/credentials", "/Users/u/proj/certs/KEY.PEM"]
    {
        assert!(!s.allows("file-read-data", path), "{path}");
    }
    assert!(!s.allows("file-write-unlink", "/Users/u/proj/.GIT"), "pinned .git in another case");
    // Allows stay exact: another case can lose access, never gain it.
    assert!(s.allows("file-write-create", "/Users/u/proj/src/Main.rs"));
    assert!(!s.allows("file-read-data", "/Users/u/PROJ/readme"));
}
