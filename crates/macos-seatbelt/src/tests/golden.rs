//! Golden profiles: one file per policy feature and combination, under
//! `test_data/profiles/`, holding the parameters and the full profile text.

use expect_test::{expect, expect_file};
use paddock_policy::{
    Backend, DomainPattern, FileKind, GlobKind, GlobRule, HostFacts, NetworkPolicy, ResolvedPolicy,
    SocketPath, Task, UnixSockets,
};

use super::*;
use crate::{MacosSeatbelt, log_tag, proxy_port};

#[track_caller]
fn check(name: &str, policy: &ResolvedPolicy) {
    check_task(name, policy, &task());
}

#[track_caller]
fn check_task(name: &str, policy: &ResolvedPolicy, task: &Task) {
    let filtered = matches!(policy.network, NetworkPolicy::Filtered { .. });
    let profile = Profile::build(policy, task, &log_tag(task), filtered.then(|| proxy_port(task)))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    // Every golden is also a well-formed profile whose parameters are all used.
    super::eval::Sbpl::parse(&profile).unwrap_or_else(|e| panic!("{name}: {e}"));
    expect_file![format!("../../test_data/profiles/{name}.txt")].assert_eq(&render(&profile));
}

fn glob(kind: GlobKind, base: &str, pattern: &str, key: &str) -> GlobRule {
    GlobRule { kind, base: abs(base), pattern: pattern.into(), origin: origin(key) }
}

#[test]
fn minimal() {
    check("01_minimal", &empty_policy());
}

#[test]
fn p0_project_home_hidden_protected_names() {
    check("02_p0", &p0());
}

#[test]
fn nested_anchors_and_file_exceptions() {
    let mut p = p0();
    p.read_deny.push(anchor(
        "/Users/u/proj/secrets",
        &[("/Users/u/proj/secrets/public.pem", FileKind::File, false)],
        "deny.read[1]",
    ));
    p.read_deny[0].exceptions.push(paddock_policy::Exception {
        path: abs("/Users/u/.cache/tool/data"),
        kind: FileKind::Dir,
        writable: false,
    });
    p.read_deny.push(anchor("/Users/u/missing", &[], "deny.read[2]"));
    p.read_deny[2].kind = None;
    check("03_nested_anchors", &p);
}

#[test]
fn globs_pol03_metacharacters_and_aliases() {
    let mut p = empty_policy();
    p.project_dir = abs("/private/tmp/p.q+(x)[1]");
    p.write = vec![grant("/private/tmp/p.q+(x)[1]/out", FileKind::Dir, "allow.write[0]")];
    p.globs = vec![
        glob(GlobKind::Write, "/tmp/p.q+(x)[1]", "*.txt", "allow.write[1]"),
        glob(GlobKind::Read, "/Users/u/.config", "**/*.toml", "allow.read[0]"),
        glob(GlobKind::DenyRead, "/private/tmp/p.q+(x)[1]", "**/*.pem", "deny.read[1]"),
        glob(GlobKind::DenyRead, "/Users/u/proj", "{.env,.env.*}", "deny.read[2]"),
    ];
    p.read_deny = vec![anchor("/Users/u", &[], "deny.read[0]")];
    check("04_globs", &p);
}

#[test]
fn mac05_tmp_and_var_aliases() {
    let mut p = empty_policy();
    p.read_deny = vec![anchor("/tmp/sec", &[], "deny.read[0]")];
    p.write = vec![
        grant("/tmp/w", FileKind::Dir, "allow.write[0]"),
        grant("/var/tmp/f", FileKind::File, "allow.write[1]"),
    ];
    let mut t = task();
    t.runtime_dir = abs("/var/folders/xy/abc/T/pdk-1");
    check_task("05_mac05_aliases", &p, &t);
}

#[test]
fn network_on() {
    let mut p = p0();
    p.network = NetworkPolicy::On;
    check("06_network_on", &p);
}

#[test]
fn network_filtered_uses_the_proxy_port_only() {
    let mut p = p0();
    p.network = NetworkPolicy::Filtered {
        allow: vec![DomainPattern::parse("example.com").unwrap()],
        deny: vec![],
    };
    check("07_network_filtered", &p);
}

#[test]
fn mac04_local_and_host_ports() {
    let mut p = p0();
    p.network = NetworkPolicy::Filtered {
        allow: vec![DomainPattern::parse("*.example.com").unwrap()],
        deny: vec![],
    };
    p.local_ports = vec![8080, 3000];
    p.host_ports = vec![5432];
    check("08_ports", &p);
}

#[test]
fn unix_sockets_all() {
    let mut p = p0();
    p.unix_sockets = UnixSockets::All;
    check("09_unix_all", &p);
}

#[test]
fn unix_socket_paths_declared_and_resolved() {
    let mut p = p0();
    p.unix_sockets = UnixSockets::Paths {
        sockets: vec![
            SocketPath { declared: abs("/tmp/app.sock"), resolved: abs("/private/tmp/app.sock") },
            SocketPath {
                declared: abs("/Users/u/.docker/run/docker.sock"),
                resolved: abs("/Users/u/Library/Containers/com.docker.docker/Data/docker.raw.sock"),
            },
        ],
    };
    check("10_unix_paths", &p);
}

#[test]
fn system_info_and_mach_lookup() {
    let mut p = p0();
    p.system_info = true;
    p.mach_lookup = vec!["com.apple.SecurityServer".into(), "com.example.helper.*".into()];
    check("11_system_info_mach", &p);
}

#[test]
fn launch_services_and_apple_events_only_when_granted() {
    let mut p = p0();
    p.mach_lookup = vec![
        "com.apple.coreservices.launchservicesd".into(),
        "com.apple.lsd.*".into(),
        "com.apple.coreservices.appleevents".into(),
    ];
    check("12_launchservices_appleevents_granted", &p);
}

#[test]
fn pty_and_git_config() {
    let mut p = p0();
    p.pty = true;
    p.git_config = true;
    check("13_pty_git_config", &p);
}

#[test]
fn everything_at_once() {
    let mut p = p0();
    p.read_deny.push(anchor("/Users/u/proj/secrets", &[], "deny.read[1]"));
    p.write.push(grant("/Users/u/.cache/tool", FileKind::Dir, "allow.write[1]"));
    p.read_deny[0].exceptions.push(paddock_policy::Exception {
        path: abs("/Users/u/.cache/tool"),
        kind: FileKind::Dir,
        writable: true,
    });
    p.protected.push(protected("/Users/u/proj/a/b/c", "deny.write[0]", None));
    p.pinned.extend([abs("/Users/u/proj/a"), abs("/Users/u/proj/a/b")]);
    p.globs = vec![
        glob(GlobKind::Write, "/Users/u/proj", "dist/**", "allow.write[2]"),
        glob(GlobKind::DenyRead, "/Users/u/proj", "**/*.key", "deny.read[2]"),
    ];
    p.network = NetworkPolicy::Filtered {
        allow: vec![DomainPattern::parse("crates.io").unwrap()],
        deny: vec![],
    };
    p.unix_sockets = UnixSockets::Paths {
        sockets: vec![SocketPath {
            declared: abs("/Users/u/proj/run.sock"),
            resolved: abs("/Users/u/proj/run.sock"),
        }],
    };
    p.local_ports = vec![8080];
    p.host_ports = vec![5432];
    p.pty = true;
    p.git_config = true;
    p.system_info = true;
    p.mach_lookup = vec!["com.apple.FontObjectsServer".into()];
    check("14_everything", &p);
}

#[test]
fn plan_json() {
    let mut p = p0();
    p.network = NetworkPolicy::Filtered {
        allow: vec![DomainPattern::parse("example.com").unwrap()],
        deny: vec![],
    };
    p.env.push(("NO_PROXY".into(), "corp.internal".into()));
    let plan = MacosSeatbelt::new().plan(&p, &task(), &HostFacts::default()).unwrap();
    let mut json = serde_json::to_value(&plan).unwrap();
    // The profile text is the golden of `07_network_filtered`; keep this file about the rest.
    json["argv"][2] = serde_json::Value::String("<profile: see 07_network_filtered.txt>".into());
    expect_file!["../../test_data/plan/filtered.json"]
        .assert_eq(&serde_json::to_string_pretty(&json).unwrap());
}

#[test]
fn argv_layout() {
    let plan = MacosSeatbelt::new().plan(&p0(), &task(), &HostFacts::default()).unwrap();
    let shown: Vec<String> = plan
        .argv
        .iter()
        .enumerate()
        .map(
            |(i, a)| if i == 2 { "<profile>".to_owned() } else { a.to_string_lossy().into_owned() },
        )
        .collect();
    expect![[r#"sandbox-exec -p <profile> -D WRITE_0=/Users/u/proj -D READ_DENY_0=/Users/u -D READ_DENY_0_CI=^/[uU][sS][eE][rR][sS]/[uU](/.*)?$ -D READ_DENY_0_EXCEPT_0=/Users/u/proj -D TRAVERSE_0=/Users/u -D TMPDIR=/private/tmp/pdk-7f3a/tmp -D PROTECTED_0=/Users/u/proj/.git/hooks -D PROTECTED_0_CI=^/[uU][sS][eE][rR][sS]/[uU]/[pP][rR][oO][jJ]/\.[gG][iI][tT]/[hH][oO][oO][kK][sS](/.*)?$ -D PROTECTED_1=/Users/u/proj/.git/config -D PROTECTED_1_CI=^/[uU][sS][eE][rR][sS]/[uU]/[pP][rR][oO][jJ]/\.[gG][iI][tT]/[cC][oO][nN][fF][iI][gG](/.*)?$ -D PROTECTED_2=/Users/u/proj/.bashrc -D PROTECTED_2_CI=^/[uU][sS][eE][rR][sS]/[uU]/[pP][rR][oO][jJ]/\.[bB][aA][sS][hH][rR][cC](/.*)?$ -D PROTECTED_3=/Users/u/proj/paddock.toml -D PROTECTED_3_CI=^/[uU][sS][eE][rR][sS]/[uU]/[pP][rR][oO][jJ]/[pP][aA][dD][dD][oO][cC][kK]\.[tT][oO][mM][lL](/.*)?$ -D PINNED_0=/Users/u/proj/.git -D PINNED_0_CI=^/[uU][sS][eE][rR][sS]/[uU]/[pP][rR][oO][jJ]/\.[gG][iI][tT]$ -- make test"#]]
        .assert_eq(&shown.join(" "));
    assert_eq!(plan.program.as_path(), std::path::Path::new("/usr/bin/sandbox-exec"));
    assert_eq!(
        plan.diagnostics.len(),
        1,
        "sandbox-exec missing on a default HostFacts: {:?}",
        plan.diagnostics
    );
}

#[test]
fn refusals_name_the_key_and_the_value() {
    use std::os::unix::ffi::OsStrExt;
    let t = task();
    let tag = log_tag(&t);
    let err =
        |p: &ResolvedPolicy| Profile::build(p, &t, &tag, Some(30000)).unwrap_err().to_string();

    let mut p = p0();
    p.mach_lookup = vec!["com.apple.x\") (allow default".into()];
    let mut got = vec![err(&p)];
    p.mach_lookup = vec!["a\n(allow default)".into()];
    got.push(err(&p));
    p.mach_lookup = vec!["ok.name".into(), "#|".into()];
    got.push(err(&p));

    let mut p = p0();
    p.globs = vec![glob(GlobKind::Write, "/Users/u/proj", "a\u{1b}[2J*.txt", "allow.write[3]")];
    got.push(err(&p));
    p.globs = vec![glob(GlobKind::Write, "/Users/u/proj", "\\*.txt", "allow.write[3]")];
    got.push(err(&p));

    let mut p = p0();
    let nul = std::ffi::OsStr::from_bytes(b"/Users/u/proj/a\0b");
    p.write.push(paddock_policy::WriteGrant {
        path: paddock_policy::AbsPathBuf::new_lexical(nul).unwrap(),
        kind: FileKind::Dir,
        origin: origin("allow.write[1]"),
    });
    got.push(err(&p));

    expect![[r#"
        macos-seatbelt: allow.mach-lookup[0]: `com.apple.x") (allow default` is refused: it carries a double quote, which cannot go into a seatbelt profile
        macos-seatbelt: allow.mach-lookup[0]: `a\n(allow default)` is refused: it carries a control character, which cannot go into a seatbelt profile
        macos-seatbelt: allow.mach-lookup[1]: `#|` is refused: it carries a block-comment marker, which cannot go into a seatbelt profile
        /Users/u/proj/paddock.toml: allow.write[3]: this glob is refused: a control character cannot go into a seatbelt rule (got /Users/u/proj/a\u{1b}[2J*.txt); write the pattern without it, or name the paths instead
        /Users/u/proj/paddock.toml: allow.write[3]: this glob is refused: a backslash in a glob is an escape whose meaning differs between tools (got /Users/u/proj/\\*.txt); write the pattern without it, or name the paths instead
        /Users/u/proj/paddock.toml: allow.write[1]: a write grant holds a NUL byte, which cannot be passed to sandbox-exec (got /Users/u/proj/a\u{0}b); remove the entry or rename the path"#]]
    .assert_eq(&got.join("\n"));
}

/// The whole pipeline on Linux: a config resolved by `paddock_policy::resolve` through a fake
/// macOS-shaped filesystem, then planned. Checks the backend against what resolution really
/// produces (exceptions, protected names, pins, globs, builtin secrets).
#[test]
fn from_config_through_resolve() {
    use paddock_policy::{Context, FakeHost, Format, load_str, resolve};
    let host = FakeHost::new()
        .dir("/Users/u/proj/src")
        .dir("/Users/u/proj/.git/hooks")
        .file("/Users/u/proj/.git/config", "[core]\n")
        .file("/Users/u/proj/secrets/key.pem", "k")
        .dir("/Users/u/.ssh")
        .dir("/Users/u/.cache/pip")
        .dir("/private/tmp")
        .symlink("/tmp", "private/tmp");
    let config = "\
[allow]
write = [\".\", \"dist/**\"]
read = [\"~/.cache/pip\"]
network = [\"crates.io\"]
unix-sockets = [\"/tmp/app.sock\"]
local-ports = [3000]

[deny]
read = [\"~\", \"**/*.pem\"]
";
    let policy = load_str(config, "/Users/u/proj/paddock.toml".as_ref(), Format::Toml).unwrap();
    let ctx = Context::new("/Users/u/proj", "/Users/u").with_env(vec![]);
    let (resolved, _diagnostics) = resolve(&policy, &ctx, &host).unwrap();
    check("15_from_config", &resolved);
}
