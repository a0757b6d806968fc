//! Tests of `allow.unix-sockets = [paths]` (environment references, `SSH_AUTH_SOCK`) and of
//! `report.ignore.unix-sockets`, on the fake host.

use std::ffi::OsString;
use std::path::Path;

use crate::*;

fn host() -> FakeHost {
    FakeHost::new()
        .dir("/home/u/proj")
        .dir("/tmp/ssh-x")
        .file("/tmp/ssh-x/agent.1", "")
        .file("/run/docker.sock", "")
        .symlink("/var/run", "/run")
}

fn ctx(env: &[(&str, &str)]) -> Context {
    Context::new("/home/u/proj", "/home/u")
        .with_env(env.iter().map(|(k, v)| (OsString::from(k), OsString::from(v))).collect())
}

fn resolve_with(text: &str, env: &[(&str, &str)]) -> Result<(ResolvedPolicy, Vec<String>)> {
    resolve(&load_str(text, Path::new("paddock.toml"), Format::Toml)?, &ctx(env), &host())
}

fn sockets(r: &ResolvedPolicy) -> Vec<(String, String)> {
    match &r.unix_sockets {
        UnixSockets::Paths { sockets } => {
            sockets.iter().map(|s| (s.declared.to_string(), s.resolved.to_string())).collect()
        }
        other => panic!("not paths: {other:?}"),
    }
}

fn env_value<'a>(r: &'a ResolvedPolicy, name: &str) -> Option<&'a OsString> {
    r.env.iter().find(|(k, _)| k == name).map(|(_, v)| v)
}

const AGENT: (&str, &str) = ("SSH_AUTH_SOCK", "/tmp/ssh-x/agent.1");

#[test]
fn environment_references_are_expanded_and_the_agent_variable_travels_with_its_grant() {
    let text = "[allow]\nunix-sockets = [\"$SSH_AUTH_SOCK\", \"/var/run/docker.sock\"]\n";
    let (r, notes) = resolve_with(text, &[AGENT]).unwrap();
    assert_eq!(
        sockets(&r),
        [
            ("/tmp/ssh-x/agent.1".to_owned(), "/tmp/ssh-x/agent.1".to_owned()),
            ("/var/run/docker.sock".to_owned(), "/run/docker.sock".to_owned()),
        ]
    );
    assert!(notes.is_empty(), "{notes:?}");
    assert_eq!(env_value(&r, "SSH_AUTH_SOCK"), Some(&OsString::from(AGENT.1)));

    // Not granted: the agent variable stays out (it is on the secret list).
    let (r, _) =
        resolve_with("[allow]\nunix-sockets = [\"/run/docker.sock\"]\n", &[AGENT]).unwrap();
    assert_eq!(env_value(&r, "SSH_AUTH_SOCK"), None);
    // Granted but unset by the policy: out.
    let text = "[allow]\nunix-sockets = [\"$SSH_AUTH_SOCK\"]\n[env]\nunset = [\"SSH_AUTH_SOCK\"]\n";
    let (r, _) = resolve_with(text, &[AGENT]).unwrap();
    assert_eq!(env_value(&r, "SSH_AUTH_SOCK"), None);
}

#[test]
fn an_unset_reference_grants_nothing_and_says_so_and_a_stray_dollar_is_an_error() {
    let (r, notes) = resolve_with("[allow]\nunix-sockets = [\"$SSH_AUTH_SOCK\"]\n", &[]).unwrap();
    assert!(sockets(&r).is_empty());
    assert!(
        notes.len() == 1
            && notes[0].contains("allow.unix-sockets[0]")
            && notes[0].contains("$SSH_AUTH_SOCK is not set"),
        "{notes:?}"
    );
    let e = resolve_with("[allow]\nunix-sockets = [\"/run/$\"]\n", &[]).unwrap_err().to_string();
    assert!(e.contains("allow.unix-sockets[0]") && e.contains("${NAME}"), "{e}");
}

#[test]
fn library_probes_are_not_reported_by_default_and_other_sockets_are() {
    let (r, _) = resolve_with("[allow]\nunix-sockets = [\"/run/docker.sock\"]\n", &[]).unwrap();
    let f = ReportFilter::new(&r);
    let connect = |p: Option<&str>| Violation {
        kind: ViolationKind::UnixSocket,
        path: p.map(Into::into),
        target: p.is_none().then(|| "AF_UNIX".to_owned()),
        syscall: Some(if p.is_some() { "connect" } else { "socket" }.to_owned()),
        errno: Some("EACCES".to_owned()),
        count: 1,
    };
    for probe in [
        "/var/run/nscd/socket",
        "/run/systemd/userdb/io.systemd.DynamicUser",
        "/run/dbus/system_bus_socket",
    ] {
        assert!(!f.keep(&connect(Some(probe)), None), "{probe}");
    }
    assert!(f.keep(&connect(Some("/home/u/.docker/run/docker.sock")), None));
    assert!(f.keep(&connect(Some("/run/user/1000/bus")), None));
    // A refused socket() names no socket: a probe, while the default list stands.
    assert!(!f.keep(&connect(None), None));

    // An emptied list reports everything; a list of one's own replaces the default.
    let text = "[report.ignore]\nunix-sockets = []\n";
    let (r, _) = resolve_with(text, &[]).unwrap();
    let f = ReportFilter::new(&r);
    assert!(f.keep(&connect(Some("/var/run/nscd/socket")), None));
    assert!(f.keep(&connect(None), None));
    let text = "[report.ignore]\nunix-sockets = [\"/run/user/*/bus\"]\n";
    let (r, _) = resolve_with(text, &[]).unwrap();
    let f = ReportFilter::new(&r);
    assert!(!f.keep(&connect(Some("/run/user/1000/bus")), None));
    assert!(f.keep(&connect(Some("/var/run/nscd/socket")), None));
}

#[test]
fn a_relative_ignore_entry_is_refused_naming_the_key() {
    let e = resolve_with("[report.ignore]\nunix-sockets = [\"x.sock\"]\n", &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("report.ignore.unix-sockets[0]") && e.contains("absolute"), "{e}");
    let e = resolve_with("[report.ignore]\nunix-socket = []\n", &[]).unwrap_err().to_string();
    assert!(e.contains("unix-sockets"), "{e}");
}
