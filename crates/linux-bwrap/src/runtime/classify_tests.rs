//! The classifier on strace lines, through the strace-parse events (no OS).

use super::*;
use paddock_policy::{Context, FakeHost, Format, load_str, resolve};
use paddock_strace_parse::{Record, parse_slice};

fn host() -> FakeHost {
    FakeHost::new()
        .dir("/home/u/proj/src")
        .dir("/home/u/proj/secrets")
        .file("/home/u/proj/config/secrets.json", "s")
        .dir("/home/u/.ssh")
        .file("/home/u/.ssh/id_ed25519", "k")
        .dir("/etc")
        .dir("/tmp")
        .symlink("/home/u/proj/link", "/home/u/.ssh")
}

fn classify(config: &str, log: &str) -> Vec<Found> {
    let ctx = Context::new("/home/u/proj", "/home/u").with_env(vec![]);
    let policy = load_str(config, "paddock.toml".as_ref(), Format::Toml).unwrap();
    let (resolved, _) = resolve(&policy, &ctx, &host()).unwrap();
    let mut c = Classifier::new(resolved, host(), Path::new("/home/u/proj"));
    let mut out = Vec::new();
    for r in parse_slice(log.as_bytes()) {
        if let Record::Event(e) = r {
            out.extend(c.observe(&e));
        }
    }
    out
}

fn one(f: &Found) -> (ViolationKind, String, String, String) {
    let v = &f.violation;
    let what = match (&v.path, &v.target) {
        (Some(p), _) => p.display().to_string(),
        (_, Some(t)) => t.clone(),
        _ => String::new(),
    };
    (v.kind, what, v.syscall.clone().unwrap(), v.errno.clone().unwrap())
}

const DENY_SECRETS: &str = "[deny]\nread = [\"secrets\"]\n";

#[test]
fn hidden_reads_are_violations_missing_files_elsewhere_are_not() {
    let log = r#"10 openat(AT_FDCWD</home/u/proj>, "/home/u/.ssh/id_ed25519", O_RDONLY) = -1 ENOENT (No such file or directory)
10 openat(AT_FDCWD</home/u/proj>, "secrets/key", O_RDONLY|O_CLOEXEC) = -1 ENOENT (No such file or directory)
10 openat(AT_FDCWD</home/u/proj>, "/usr/lib/python3/missing.py", O_RDONLY) = -1 ENOENT (No such file or directory)
10 openat(AT_FDCWD</home/u/proj>, "src/optional.toml", O_RDONLY) = -1 ENOENT (No such file or directory)
"#;
    let found: Vec<_> = classify(DENY_SECRETS, log).iter().map(one).collect();
    assert_eq!(
        found,
        vec![
            (
                ViolationKind::Read,
                "/home/u/.ssh/id_ed25519".into(),
                "openat".into(),
                "ENOENT".into()
            ),
            (
                ViolationKind::Read,
                "/home/u/proj/secrets/key".into(),
                "openat".into(),
                "ENOENT".into()
            ),
        ]
    );
}

#[test]
fn writes_need_write_intent_and_an_unwritable_path() {
    let log = r#"10 openat(AT_FDCWD</home/u/proj>, "/etc/hosts", O_WRONLY|O_CREAT|O_TRUNC, 0666) = -1 EROFS (Read-only file system)
10 openat(AT_FDCWD</home/u/proj>, "/etc/shadow", O_RDONLY) = -1 EACCES (Permission denied)
10 mkdir("/etc/newdir", 0777) = -1 EROFS (Read-only file system)
10 openat(AT_FDCWD</home/u/proj>, "src/ro.txt", O_WRONLY) = -1 EACCES (Permission denied)
10 openat(AT_FDCWD</home/u/proj>, "/tmp/x", O_WRONLY|O_CREAT, 0666) = -1 EACCES (Permission denied)
10 rename("src/a", "/etc/a") = -1 EROFS (Read-only file system)
10 symlink("/etc/passwd", "/etc/l") = -1 EROFS (Read-only file system)
10 openat(AT_FDCWD</home/u/proj>, "/proc/sys/kernel/x", O_WRONLY) = -1 EROFS (Read-only file system)
"#;
    let found: Vec<_> = classify("", log).iter().map(one).collect();
    let w = |p: &str, s: &str, e: &str| (ViolationKind::Write, p.into(), s.into(), e.into());
    assert_eq!(
        found,
        vec![
            w("/etc/hosts", "openat", "EROFS"),
            w("/etc/newdir", "mkdir", "EROFS"),
            w("/etc/a", "rename", "EROFS"),
            w("/etc/l", "symlink", "EROFS"),
        ]
    );
}

#[test]
fn relative_paths_follow_chdir_fork_and_dirfd_decorations() {
    let log = r#"10 chdir("/etc") = 0
10 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|SIGCHLD, child_tidptr=0x7f) = 3 /* 11 in strace's PID NS */
11 mkdir("sub", 0777) = -1 EROFS (Read-only file system)
12 mkdir("sub", 0777) = -1 EROFS (Read-only file system)
11 chdir("..") = 0
11 unlink("etc/x") = -1 EROFS (Read-only file system)
13 openat(3</home/u/proj/secrets>, "k", O_RDONLY) = -1 ENOENT (No such file or directory)
14 mkdirat(AT_FDCWD</etc>, "d2", 0777) = -1 EROFS (Read-only file system)
14 mkdir("d3", 0777) = -1 EROFS (Read-only file system)
"#;
    let found: Vec<_> = classify(DENY_SECRETS, log).iter().map(|f| one(f).1).collect();
    // pid 12 was never seen: it is in the task's cwd (the project), which is writable.
    assert_eq!(found, vec!["/etc/sub", "/etc/x", "/home/u/proj/secrets/k", "/etc/d2", "/etc/d3"]);
}

#[test]
fn links_are_followed_to_the_anchor_and_the_spelling_is_kept() {
    let log = "10 openat(AT_FDCWD</home/u/proj>, \"link/id_ed25519\", O_RDONLY) = -1 ENOENT (No such file or directory)\n";
    let found = classify("", log);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].violation.path.as_deref(), Some(Path::new("/home/u/.ssh/id_ed25519")));
    assert_eq!(found[0].spelled.as_deref(), Some(Path::new("/home/u/proj/link/id_ed25519")));
}

/// The filter's own answer decides: a seqpacket pair is never refused by it (so an `EPERM`
/// there came from elsewhere), and granted unix sockets are refused by nothing.
#[test]
fn a_unix_socket_denial_is_one_the_filter_makes() {
    let log = r#"10 socket(AF_UNIX, SOCK_STREAM|SOCK_CLOEXEC, 0) = -1 EPERM (Operation not permitted)
10 socket(AF_LOCAL, SOCK_DGRAM, 0) = -1 EACCES (Permission denied)
10 socketpair(0x1, 0x2, 0, 0x7fda067fdd70) = -1 EPERM (Operation not permitted)
10 socketpair(AF_UNIX, SOCK_STREAM, 0, 0x7fda067fdd70) = -1 EPERM (Operation not permitted)
"#;
    let found: Vec<_> = classify("", log).iter().map(|f| one(f).2).collect();
    assert_eq!(found, ["socket", "socketpair"]);
    assert!(classify("[allow]\nunix-sockets = true\n", log).is_empty());
}

#[test]
fn unix_sockets_and_refused_connections() {
    let log = r#"10 socket(AF_UNIX, SOCK_STREAM|SOCK_CLOEXEC, 0) = -1 EPERM (Operation not permitted)
10 socketpair(AF_UNIX, SOCK_DGRAM|SOCK_CLOEXEC, 0, 0x7fda067fdd70) = -1 EPERM (Operation not permitted)
10 socketpair(AF_UNIX, SOCK_SEQPACKET|SOCK_CLOEXEC, 0, 0x7fda067fdd70) = -1 EPERM (Operation not permitted)
10 socket(AF_INET, SOCK_STREAM, IPPROTO_TCP) = 3<TCP:[1]>
10 connect(3<TCP:[1]>, {sa_family=AF_INET, sin_port=htons(443), sin_addr=inet_addr("93.184.216.34")}, 16) = -1 ENETUNREACH (Network is unreachable)
10 connect(3<TCP:[2]>, {sa_family=AF_INET6, sin6_port=htons(80), sin6_flowinfo=htonl(0), inet_pton(AF_INET6, "2001:db8::1", &sin6_addr), sin6_scope_id=0}, 28) = -1 ENETUNREACH (Network is unreachable)
10 connect(3<TCP:[3]>, {sa_family=AF_INET, sin_port=htons(8080), sin_addr=inet_addr("127.0.0.1")}, 16) = -1 ECONNREFUSED (Connection refused)
"#;
    let found: Vec<_> = classify("", log).iter().map(one).collect();
    assert_eq!(
        found,
        vec![
            (ViolationKind::UnixSocket, "AF_UNIX".into(), "socket".into(), "EPERM".into()),
            (ViolationKind::UnixSocket, "AF_UNIX".into(), "socketpair".into(), "EPERM".into()),
            (
                ViolationKind::Network,
                "93.184.216.34:443".into(),
                "connect".into(),
                "ENETUNREACH".into()
            ),
            (
                ViolationKind::Network,
                "[2001:db8::1]:80".into(),
                "connect".into(),
                "ENETUNREACH".into()
            ),
        ]
    );
    // With the network on, a failed connect is the network's answer, not the sandbox's.
    let on = classify("[allow]\nnetwork = true\n", log);
    assert_eq!(on.len(), 2);
}

#[test]
fn control_characters_stay_bytes_and_write_intent_reads_flags() {
    let log = "10 openat(AT_FDCWD</x>, \"/etc/\\33[2J\\n\", O_WRONLY|O_CREAT|O_NOCTTY|O_NONBLOCK, 0666) = -1 EROFS (Read-only file system)\n";
    let found = classify("", log);
    assert_eq!(found[0].violation.path.as_deref(), Some(Path::new("/etc/\x1b[2J\n")));
    assert!(is_write_intent("openat2", Some("{flags=O_RDWR|O_CLOEXEC, resolve=0}")));
    assert!(!is_write_intent("openat", Some("O_RDONLY|O_CLOEXEC")));
    assert!(is_write_intent("creat", None));
}

#[test]
fn the_sandbox_setup_is_not_the_task() {
    let log = r#"5 mkdir("/newroot/etc", 0755) = -1 EROFS (Read-only file system)
5 clone(child_stack=NULL, flags=SIGCHLD) = 6
6 execve("/dev/.paddock-supervisor", ["/dev/.paddock-supervisor"], 0x1 /* 0 vars */) = 0
6 mkdir("/etc/sup", 0755) = -1 EROFS (Read-only file system)
7 mkdir("/etc/task", 0755) = -1 EROFS (Read-only file system)
"#;
    let found = gated_paths(|c| c.gated(b"/dev/.paddock-supervisor"), log);
    assert_eq!(found, vec![PathBuf::from("/etc/task")]);
}

/// The paths of the violations a gated classifier (default policy) finds in `log`.
fn gated_paths(
    gate: impl FnOnce(Classifier<FakeHost>) -> Classifier<FakeHost>,
    log: &str,
) -> Vec<PathBuf> {
    let ctx = Context::new("/home/u/proj", "/home/u").with_env(vec![]);
    let policy = load_str("", "paddock.toml".as_ref(), Format::Toml).unwrap();
    let (resolved, _) = resolve(&policy, &ctx, &host()).unwrap();
    let mut c = gate(Classifier::new(resolved, host(), Path::new("/home/u/proj")));
    parse_slice(log.as_bytes())
        .filter_map(|r| match r {
            Record::Event(e) => c.observe(&e),
            _ => None,
        })
        .map(|f| f.violation.path.unwrap())
        .collect()
}

#[test]
fn with_strace_inside_the_shim_is_not_the_task_until_it_executes_it() {
    // strace's command is the shim: its own calls (the loader's, the PATH candidates that
    // fail) are setup; the task starts at the second successful execve, in the same pid.
    let log = r#"3 execve("/dev/.paddock-supervisor", ["/dev/.paddock-supervisor", "__shim"], 0x1 /* 2 vars */) = 0
3 mkdir("/etc/shim", 0755) = -1 EROFS (Read-only file system)
3 execve("/usr/local/bin/sh", ["sh"], 0x1 /* 2 vars */) = -1 ENOENT (No such file or directory)
3 execve("/usr/bin/sh", ["sh", "-c", "mkdir /etc/task"], 0x1 /* 2 vars */) = 0
3 mkdir("/etc/task", 0755) = -1 EROFS (Read-only file system)
4 mkdir("/etc/child", 0755) = -1 EROFS (Read-only file system)
"#;
    let found = gated_paths(Classifier::gated_on_shim, log);
    assert_eq!(found, vec![PathBuf::from("/etc/task"), PathBuf::from("/etc/child")]);
}

#[test]
fn opening_a_hidden_file_that_reads_empty_is_a_violation() {
    let host = || host().file("/home/u/.netrc", "machine x password y");
    let ctx = Context::new("/home/u/proj", "/home/u").with_env(vec![]);
    let policy = load_str("", "paddock.toml".as_ref(), Format::Toml).unwrap();
    let (resolved, _) = resolve(&policy, &ctx, &host()).unwrap();
    let mut c = Classifier::new(resolved, host(), Path::new("/home/u/proj"));
    let log = r#"10 openat(AT_FDCWD</home/u/proj>, "/home/u/.netrc", O_RDONLY) = 3</home/u/.netrc>
10 openat(AT_FDCWD</home/u/proj>, "../.netrc", O_RDONLY|O_CLOEXEC) = 3</home/u/.netrc>
10 openat(AT_FDCWD</home/u/proj>, "src/.netrc", O_RDONLY) = 3</home/u/proj/src/.netrc>
10 openat(AT_FDCWD</home/u/proj>, "/home/u/.netrc", O_WRONLY|O_TRUNC) = -1 EROFS (Read-only file system)
"#;
    let found: Vec<_> = parse_slice(log.as_bytes())
        .filter_map(|r| match r {
            Record::Event(e) => c.observe(&e),
            _ => None,
        })
        .map(|f| (f.violation.kind, f.violation.path.unwrap(), f.violation.errno))
        .collect();
    let netrc = PathBuf::from("/home/u/.netrc");
    assert_eq!(
        found,
        vec![
            (ViolationKind::Read, netrc.clone(), None),
            (ViolationKind::Read, netrc.clone(), None),
            (ViolationKind::Write, netrc, Some("EROFS".to_owned())),
        ]
    );
}

#[test]
fn renames_removals_and_links_of_what_the_walls_hold_in_place_are_writes() {
    let log = r#"10 rename("config", "config-moved") = -1 EBUSY (Device or resource busy)
10 renameat2(AT_FDCWD</home/u/proj>, "src", AT_FDCWD</home/u/proj>, "config", RENAME_EXCHANGE) = -1 EBUSY (Device or resource busy)
10 link("config/secrets.json", "leak") = -1 EXDEV (Invalid cross-device link)
10 unlink("config/secrets.json") = -1 EBUSY (Device or resource busy)
10 rename("secrets", "s2") = -1 EBUSY (Device or resource busy)
10 rename("src/a", "src/b") = -1 EBUSY (Device or resource busy)
10 link("src/a", "config/secrets.json") = -1 EXDEV (Invalid cross-device link)
10 rmdir("src") = -1 EBUSY (Device or resource busy)
"#;
    let got: Vec<_> = classify("[deny]\nread = [\"config/secrets.json\", \"secrets\"]\n", log)
        .iter()
        .map(one)
        .collect();
    let w = |p: &str, call: &str, e: &str| {
        (ViolationKind::Write, format!("/home/u/proj/{p}"), call.to_owned(), e.to_owned())
    };
    assert_eq!(
        got,
        [
            w("config", "rename", "EBUSY"),
            w("config", "renameat2", "EBUSY"),
            w("config/secrets.json", "link", "EXDEV"),
            w("config/secrets.json", "unlink", "EBUSY"),
            w("secrets", "rename", "EBUSY"),
        ]
    );
}
