//! Hostile policy input through the CLI (security-cases group POL): malformed configs, argv
//! confusion, escaping entries, pathological globs, domain validation, a task rewriting the
//! next run's policy, hijacked helper binaries, a missing bwrap and fake nesting signals.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::harness::*;

/// `paddock run -c CONFIG -- touch MARKER`; returns the output and whether the marker exists.
fn run_with_config(s: &Scratch, name: &str, config: &[u8]) -> (Output, bool) {
    let cfg = s.root.join(format!("{name}.toml"));
    std::fs::write(&cfg, config).unwrap();
    let marker = s.project.join(format!("RAN-{name}"));
    let out = s
        .paddock()
        .arg("run")
        .arg("-c")
        .arg(&cfg)
        .arg("--")
        .arg("touch")
        .arg(&marker)
        .output()
        .unwrap();
    let ran = marker.exists();
    let _ = std::fs::remove_file(&marker);
    (out, ran)
}

/// `paddock plan --json` with `flags`, parsed; panics with the output when it fails.
fn plan_json(s: &Scratch, flags: &[&str]) -> Value {
    let out = s.paddock().arg("plan").arg("--json").args(flags).args(["--", "true"]).output();
    let out = out.unwrap();
    assert!(out.status.success(), "plan failed: {out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The bwrap argv of a plan: the `bwrap-args` payload split at its NUL separators.
fn bwrap_args(plan: &Value) -> Vec<String> {
    let payload = plan["plan"]["payloads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "bwrap-args")
        .unwrap_or_else(|| panic!("no bwrap-args payload in {plan}"));
    let bytes = payload["bytes"].as_str().unwrap();
    bytes.split('\u{2400}').map(str::to_owned).collect()
}

#[test]
fn malformed_configs_fail_closed_and_name_the_problem_pol01() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("pol01v");
    let mut big = b"# ".to_vec();
    big.resize(1100 * 1024, b'x');
    big.push(b'\n');
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("invalid", b"[allow\nwrite = 1\n".to_vec(), "line 1"),
        ("trailing", b"[allow]\nnetwork = false\ngarbage garbage\n".to_vec(), "line 3"),
        ("type-network", b"[allow]\nnetwork = \"yes\"\n".to_vec(), "allow.network"),
        ("type-write", b"[allow]\nwrite = \".\"\n".to_vec(), "allow.write"),
        ("unknown", b"netwrok = false\n".to_vec(), "netwrok"),
        ("duplicate", b"[allow]\nnetwork = false\nnetwork = true\n".to_vec(), "network"),
        ("utf16", b"\xff\xfe[\x00a\x00l\x00l\x00o\x00w\x00]\x00\n\x00".to_vec(), "UTF-8"),
        ("utf8-bom", b"\xef\xbb\xbf[allow]\nnetwork = false\n".to_vec(), "byte-order mark"),
        ("nul", b"[allow]\nwrite = [\"a\\u0000b\"]\n".to_vec(), "allow.write[0]"),
        ("huge", big, "larger"),
    ];
    for (name, text, needle) in cases {
        let (out, ran) = run_with_config(&s, name, &text);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(125), "{name}: {out:?}");
        assert!(!ran, "{name}: the task ran despite a bad config");
        assert!(err.contains(&format!("{name}.toml")) && err.contains(needle), "{name}: {err}");
        assert!(err.lines().count() <= 3, "{name}: one clear message expected: {err}");
    }
}

#[test]
fn an_empty_config_is_the_default_policy_pol01() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("pol01e");
    let (out, ran) = run_with_config(&s, "empty", b"");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(ran, "an empty config runs with the default policy");
    let cfg = s.root.join("empty.toml");
    let mut with_empty = plan_json(&s, &["-c", cfg.to_str().unwrap()]);
    let mut default = plan_json(&s, &[]);
    assert_eq!(with_empty["config"].as_str(), Some(cfg.to_str().unwrap()));
    with_empty["config"] = Value::Null;
    default["config"] = Value::Null;
    assert_eq!(with_empty, default, "an empty config must plan exactly the default policy");
}

#[test]
fn hostile_write_entries_stay_one_argv_element_pol02() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("pol02");
    std::fs::create_dir(s.project.join("benign")).unwrap();
    let baseline = bwrap_args(&plan_json(&s, &["--allow-write=benign"]));
    let names = [
        "x\") (allow file-write* (subpath \"",
        "a\"b",
        "a\\",
        "a\\\")",
        "a)(allow default)",
        "#|",
        "--bind",
        "-",
        "--",
        "p -- --bind x y",
        "--ro-bind x y",
        "$(touch PWN)",
    ];
    for name in names {
        let dir = s.project.join(name);
        std::fs::create_dir(&dir).unwrap();
        let flag = format!("--allow-write={name}");
        let args = bwrap_args(&plan_json(&s, &[&flag]));
        assert_eq!(args.len(), baseline.len(), "{name:?} changed the mount count: {args:?}");
        let abs = dir.to_str().unwrap();
        let at = args.iter().position(|a| a == abs);
        let at = at.unwrap_or_else(|| panic!("{name:?} is not one argv element: {args:?}"));
        // bwrap binds it, or makes its directory for the supervisor to attach the runner's
        // clone (where the runner may clone mounts).
        if args[at - 1] == "--dir" {
            assert_eq!(args.iter().filter(|a| *a == abs).count(), 1, "{name:?}: {args:?}");
        } else {
            assert_eq!(args[at - 1], "--bind", "{name:?}: {args:?}");
            assert_eq!(args[at + 1], abs, "{name:?}: {args:?}");
            assert_eq!(args.iter().filter(|a| *a == abs).count(), 2, "{name:?}: {args:?}");
        }
        // And a real run with it writes only inside the project.
        let out = s
            .paddock()
            .args(["run", &flag, "--", "touch"])
            .arg(s.home.join("PWN"))
            .output()
            .unwrap();
        assert_ne!(out.status.code(), Some(0), "{name:?}: {out:?}");
        assert!(!s.home.join("PWN").exists(), "{name:?} let a write out");
    }
    // Control characters and NUL bytes are refused outright.
    std::fs::create_dir(s.project.join("a\n(allow default)")).unwrap();
    let out = s
        .paddock()
        .args(["run", "--allow-write=a\n(allow default)", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("control characters"), "{out:?}");
}

#[test]
fn metacharacters_in_the_project_path_are_literal_pol03() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("pol03");
    let odd = s.home.join("p.q+(x)[1]");
    let lookalike = s.home.join("pXq+(x)[1]");
    std::fs::create_dir_all(odd.join("sub")).unwrap();
    std::fs::create_dir_all(&lookalike).unwrap();
    let out = s
        .paddock()
        .current_dir(&odd)
        .arg("run")
        .arg("--")
        .arg(probe_bin())
        .arg(format!("write:{}", odd.join("e.txt").display()))
        .arg(format!("write:{}", lookalike.join("e.txt").display()))
        .output()
        .unwrap();
    let o: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert_allowed(&o, "write", odd.join("e.txt").to_str().unwrap());
    assert_denied(&o, "write", lookalike.join("e.txt").to_str().unwrap(), &[EROFS, EACCES]);
    assert!(!lookalike.join("e.txt").exists());
}

#[test]
fn relative_entries_that_leave_the_project_are_refused_pol04() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("pol04");
    let escape = s.home.join("ESCAPE");
    for entry in ["../", "../..", "sub/../../", "~/..", "./../sibling", "/"] {
        let out = s
            .paddock()
            .args(["run", "--allow-write", entry, "--", "touch"])
            .arg(&escape)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(125), "{entry}: {out:?}");
        assert!(err.contains(entry), "the message must name {entry}: {err}");
        assert!(!escape.exists(), "{entry} granted the project's parent");
        // The same entry in a config file names its key.
        let cfg = format!("[allow]\nwrite = [{}]\n", serde_json::to_string(entry).unwrap());
        let (out, ran) = run_with_config(&s, "escape", cfg.as_bytes());
        assert_eq!(out.status.code(), Some(125), "{entry}: {out:?}");
        assert!(!ran);
        assert!(String::from_utf8_lossy(&out.stderr).contains("allow.write[0]"), "{out:?}");
    }
}

/// Runs `paddock run` with `flags` and the probe reading `reads`, within `limit`.
fn bounded_run(s: &Scratch, flags: &[&str], reads: &[String], limit: Duration) -> Output {
    let started = Instant::now();
    let out =
        s.paddock().arg("run").args(flags).arg("--").arg(probe_bin()).args(reads).output().unwrap();
    let took = started.elapsed();
    assert!(took < limit, "took {took:?} (> {limit:?}) with {} flags", flags.len());
    let code = out.status.code();
    assert!(
        code == Some(0) || code == Some(125),
        "neither success nor a clean error (crash?): {out:?}"
    );
    if code == Some(125) {
        assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"), "{out:?}");
    }
    out
}

#[test]
fn huge_glob_expansion_is_bounded_and_fails_closed_pol06() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("pol06");
    let tree = s.project.join("tree");
    for d in 0..100 {
        let dir = tree.join(format!("d{d}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..150 {
            let name = if f % 5 == 0 { format!("k{f}.pem") } else { format!("f{f}.txt") };
            std::fs::write(dir.join(name), CANARY).unwrap();
        }
    }
    let pem = tree.join("d7/k10.pem");
    let txt = tree.join("d7/f11.txt");
    let out = bounded_run(
        &s,
        &["--allow-read", "**/*", "--deny-read", "**/*.pem"],
        &[format!("file:{}", pem.display()), format!("read:{}", txt.display())],
        // 3,000 file anchors take bwrap 15 s here when the machine is quiet, 22 s while a
        // build shares its two cores, over 100 s under a load of 14: a bound against runaway
        // expansion, not a speed test.
        Duration::from_secs(240),
    );
    // 3,000 file anchors: bwrap refuses that many arguments (9,000), and the run fails
    // closed, before the task. (This passed on any 125 before, without checking that the
    // task never ran, nor that a policy that fits keeps both of its halves.)
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.code() == Some(125) {
        assert!(text.is_empty(), "the task ran: {out:?}");
        assert!(!out.stderr.is_empty(), "no reason given: {out:?}");
    }
    assert!(!text.contains(CANARY), "a denied .pem was readable: {text}");
    // A tree a fifth that size fits: the run happens, the .pem is hidden, the .txt read.
    for d in 20..100 {
        std::fs::remove_dir_all(tree.join(format!("d{d}"))).unwrap();
    }
    let out = bounded_run(
        &s,
        &["--allow-read", "**/*", "--deny-read", "**/*.pem"],
        &[format!("file:{}", pem.display()), format!("read:{}", txt.display())],
        Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let obs: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert_denied(&obs, "file", &pem.display().to_string(), &[ENOENT, EACCES, EPERM]);
    let read = assert_allowed(&obs, "read", &txt.display().to_string());
    assert_eq!(read, format!("{} bytes", CANARY.len()), "the allowed .txt");
}

#[test]
fn pathological_patterns_are_bounded_pol07() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("pol07");
    for d in 0..20 {
        std::fs::create_dir_all(s.project.join(format!("a{d}/aaaaaaaa"))).unwrap();
    }
    // A bound against runaway matching (minutes, or forever), not a speed test.
    let limit = Duration::from_secs(30);
    bounded_run(&s, &["--deny-read", "**/**/**/**/**/**/**/**/*a*a*a*a*a*a*a*a*b"], &[], limit);
    let long = "a".repeat(64 * 1024);
    bounded_run(&s, &["--deny-read", &long], &[], limit);
    let deep = vec!["d"; 5000].join("/");
    bounded_run(&s, &["--deny-read", &deep], &[], limit);
    let many: Vec<String> = (0..10_000).map(|i| format!("\"x{i}/**/*.key\"")).collect();
    let cfg = s.root.join("many.toml");
    std::fs::write(&cfg, format!("[deny]\nread = [{}]\n", many.join(", "))).unwrap();
    bounded_run(&s, &["-c", cfg.to_str().unwrap()], &[], limit);
}

#[test]
fn network_destinations_are_validated_pol08() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("pol08");
    for bad in [
        "https://example.com",
        "example.com/path",
        "*",
        "*.com",
        "*.co.uk",
        "ex*ample.com",
        "*.*.example.com",
        "",
        ".",
        "10.0.0.0/8",
    ] {
        let out = s.paddock().args(["run", "--network", bad, "--", "true"]).output().unwrap();
        assert_eq!(out.status.code(), Some(125), "{bad:?} must be refused: {out:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("--network"), "{out:?}");
    }
    for (given, canonical) in [
        ("EXAMPLE.COM.", "example.com"),
        ("例え.jp", "xn--r8jz45g.jp"),
        ("example.com:443", "example.com:443"),
        ("[::1]", "::1"),
    ] {
        let plan = plan_json(&s, &["--network", given]);
        assert_eq!(plan["policy"]["network"]["allow"], serde_json::json!([canonical]), "{given}");
    }
}

#[test]
fn a_task_cannot_rewrite_the_next_runs_policy_pol10() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("pol10");
    let toml = s.project.join("paddock.toml");
    let state = s.project.join(".paddock");
    let (o, _) = s.probe(
        &[],
        &[
            &format!("write:{}", toml.display()),
            &format!("mkdir:{}", state.display()),
            &format!("write:{}", state.join("policy.toml").display()),
        ],
    );
    assert_denied(&o, "write", toml.to_str().unwrap(), &[EROFS, EACCES, EPERM]);
    assert_denied(&o, "mkdir", state.to_str().unwrap(), &[EROFS, EACCES, 17]);
    assert!(!toml.exists() && !state.exists(), "the task planted a policy");
    // An existing config stays the user's.
    std::fs::write(&toml, "[allow]\nnetwork = false\n").unwrap();
    let (o, _) = s.probe(&[], &[&format!("write:{}", toml.display())]);
    assert_denied(&o, "write", toml.to_str().unwrap(), &[EROFS, EACCES]);
    assert_eq!(std::fs::read_to_string(&toml).unwrap(), "[allow]\nnetwork = false\n");
    // The next run is still network-off and cannot write the home.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let pwn = s.home.join("POLICY_PWN");
    let (o, _) = s.probe(&[], &[&format!("connect:{addr}"), &format!("write:{}", pwn.display())]);
    assert_denied(&o, "connect", &addr, &[ECONNREFUSED]);
    assert_denied(&o, "write", pwn.to_str().unwrap(), &[EROFS, EACCES]);
    assert!(!pwn.exists());
}

/// Plants `bwrap`, `strace`, `socat` and `sh` in `dirs`, each touching `marker` when run.
fn plant_helpers(dirs: &[PathBuf], marker: &Path) {
    use std::os::unix::fs::PermissionsExt;
    for dir in dirs {
        std::fs::create_dir_all(dir).unwrap();
        for name in ["bwrap", "strace", "socat", "sh"] {
            let f = dir.join(name);
            std::fs::write(&f, format!("#!/bin/sh\ntouch '{}'\nexit 0\n", marker.display()))
                .unwrap();
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }
}

fn hijack_path(s: &Scratch) -> (Vec<PathBuf>, std::ffi::OsString) {
    let dirs = vec![s.project.join("node_modules/.bin"), s.home.join(".local/bin")];
    let mut path = std::env::join_paths(&dirs).unwrap();
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    (dirs, path)
}

#[test]
fn helpers_planted_in_path_are_never_run_pol11() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("pol11");
    let marker = s.root.join("HIJACK");
    let (dirs, path) = hijack_path(&s);
    plant_helpers(&dirs, &marker);
    let ran = s.project.join("RAN");
    let out = s
        .paddock()
        .env("PATH", &path)
        .args(["run", "--", "/usr/bin/touch"])
        .arg(&ran)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(ran.exists(), "the real sandbox ran the task");
    assert!(!marker.exists(), "paddock ran a helper found in PATH");
    let out = s.paddock().env("PATH", &path).args(["check"]).output().unwrap();
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!marker.exists(), "paddock check ran a helper found in PATH: {text}");
    assert!(!text.contains("node_modules"), "check trusts a planted helper: {text}");
}

/// Inside a user namespace that maps nobody, root-owned helpers show as owned by the
/// overflow uid. paddock refuses them (it cannot tell who owns them), and says so: not
/// "install bubblewrap", which would not help.
#[test]
fn helpers_whose_owner_is_hidden_are_refused_with_the_reason() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("hidden-owner");
    let out = std::process::Command::new("unshare")
        .args(["--user", "--"])
        .arg(paddock_bin())
        .arg("check")
        .current_dir(&s.project)
        .env("HOME", &s.home)
        .output()
        .unwrap();
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if text.contains("unshare failed") || text.contains("unshare: ") {
        skip(
            format!("`unshare --user` is not allowed here: {text}"),
            Some(Fact::UsernsUnavailable),
        );
        return;
    }
    assert_ne!(out.status.code(), Some(0), "check passed with unmapped helpers: {text}");
    assert!(text.contains("does not map"), "the reason is missing: {text}");
    assert!(text.contains("run paddock outside the enclosing sandbox"), "{text}");
    assert!(!text.contains("install bubblewrap"), "misleading advice: {text}");
    // `run` refuses too (125), pointing at `check`.
    let out = std::process::Command::new("unshare")
        .args(["--user", "--"])
        .arg(paddock_bin())
        .args(["run", "--", "true"])
        .current_dir(&s.project)
        .env("HOME", &s.home)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("paddock check"), "{out:?}");
}

/// The outer bwrap the tests use to take `/usr/bin` (and so bwrap) away from paddock.
fn host_bwrap() -> &'static str {
    ["/usr/bin/bwrap", "/usr/local/bin/bwrap"].into_iter().find(|p| Path::new(p).exists()).unwrap()
}

/// The host's bwrap as a tool of the test (a mount namespace to hide something in): root
/// without `CAP_SYS_ADMIN` (a container that drops it) needs a user namespace for that, as
/// a user does, and bwrap run by uid 0 does not make one unless told.
fn host_bwrap_tool() -> std::process::Command {
    let mut cmd = std::process::Command::new(host_bwrap());
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } == 0 && !has_sys_admin() {
        cmd.arg("--unshare-user");
    }
    cmd
}

#[test]
fn no_bwrap_exits_125_and_runs_nothing_pol12a() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("pol12a");
    let marker = s.root.join("HIJACK");
    let (dirs, path) = hijack_path(&s);
    plant_helpers(&dirs, &marker);
    let ran = s.project.join("RAN");
    // A private mount namespace in which /usr/bin, /usr/local/bin and /bin/bwrap are gone.
    let out = host_bwrap_tool()
        .args(["--dev-bind", "/", "/", "--tmpfs", "/usr/bin", "--tmpfs", "/usr/local/bin"])
        .args(["--tmpfs", "/usr/sbin", "--"])
        .arg(paddock_bin())
        .args(["run", "--", "touch"])
        .arg(&ran)
        .current_dir(&s.project)
        .env("HOME", &s.home)
        .env("PATH", &path)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    assert!(err.contains("bwrap") || err.contains("bubblewrap"), "{err}");
    assert!(!ran.exists(), "the task ran without a sandbox");
    assert!(!marker.exists(), "paddock fell back to a bwrap found in PATH");
}

#[test]
fn fake_container_signals_do_not_weaken_the_walls_pol13() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("pol13");
    std::fs::write(s.project.join(".dockerenv"), "").unwrap();
    let plan = {
        let out = s
            .paddock()
            .env("container", "docker")
            .args(["plan", "--json", "--", "true"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    assert_eq!(plan["policy"]["weaker-when-nested"], false, "{plan}");
    let args = bwrap_args(&plan);
    assert!(args.windows(2).any(|w| w == ["--proc", "/proc"]), "no fresh /proc: {args:?}");
    let diags = plan["plan"]["diagnostics"].to_string();
    assert!(!diags.contains("weaker"), "{diags}");
    // And a run: the task sees its own processes only, and cannot plant /.dockerenv.
    let host_marker = format!("{}", 800_000 + std::process::id() % 1000);
    let mut host = std::process::Command::new("sleep").arg(&host_marker).spawn().unwrap();
    let out = s
        .paddock()
        .env("container", "docker")
        .args(["run", "--", "sh", "-c"])
        .arg("cat /proc/[0-9]*/cmdline | tr '\\0' ' '; echo; touch /.dockerenv; echo rc=$?")
        .output()
        .unwrap();
    host.kill().unwrap();
    host.wait().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains(&host_marker), "a host process is visible: {text}");
    assert!(text.contains("rc=1"), "{out:?}");
}

#[test]
fn no_user_namespaces_exits_125_and_runs_nothing_pol12b() {
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("pol12b");
    let ran = s.project.join("RAN");
    let userns = std::process::Command::new(host_bwrap())
        .args(["--unshare-user", "--disable-userns", "--dev-bind", "/", "/", "--", "true"])
        .output()
        .unwrap();
    if String::from_utf8_lossy(&userns.stderr).contains("Unknown option --disable-userns") {
        skip("this test's own bwrap needs --disable-userns (0.8.0 or newer)", Some(Fact::OldBwrap));
        return;
    }
    if !userns.status.success() {
        skip(
            format!(
                "this test makes its own user namespace, and none can be made here: {}",
                String::from_utf8_lossy(&userns.stderr).trim()
            ),
            Some(Fact::UsernsUnavailable),
        );
        return;
    }
    // A user namespace in which no further user namespace may be made.
    let out = std::process::Command::new(host_bwrap())
        .args(["--unshare-user", "--disable-userns", "--dev-bind", "/", "/", "--"])
        .arg(paddock_bin())
        .args(["run", "--", "touch"])
        .arg(&ran)
        .current_dir(&s.project)
        .env("HOME", &s.home)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    assert!(err.contains("paddock"), "no explanation: {err}");
    assert!(!ran.exists(), "the task ran without a sandbox");
}

#[test]
fn no_strace_keeps_the_walls_and_says_so_pol12d() {
    if !require_os_sandbox() {
        return;
    }
    // Hiding strace takes a mount namespace; unprivileged, that means a user namespace in
    // which bwrap is owned by nobody, so paddock (rightly) refuses it as untrusted. The root
    // runs cover this.
    if !require_root("hiding strace from paddock (a mount namespace)") {
        return;
    }
    let s = Scratch::new("pol12d");
    let report = s.root.join("report.json");
    let key = s.home.join(".ssh/id_canary");
    let run = |extra: &[&str]| {
        host_bwrap_tool()
            .args(["--dev-bind", "/", "/", "--ro-bind", "/dev/null", "/usr/bin/strace", "--"])
            .arg(paddock_bin())
            .arg("run")
            .args(extra)
            .arg("--report")
            .arg(&report)
            .arg("--")
            .arg(probe_bin())
            .arg(format!("file:{}", key.display()))
            .arg("write:/etc/paddock-pwn")
            .current_dir(&s.project)
            .env("HOME", &s.home)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    let out = run(&[]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let o: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert_denied(&o, "file", key.to_str().unwrap(), &[ENOENT, EACCES]);
    assert_denied(&o, "write", "/etc/paddock-pwn", &[EROFS, EACCES]);
    let r: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    // Itemized by the observers, which need no strace, or not at all; never claimed by strace.
    assert_ne!(r["itemized_by"], "strace", "the report claims strace ran: {r}");
    if r["itemized"] == true {
        assert_eq!(r["itemized_by"], "observe", "{r}");
    }
    // Asking for itemized denials says out loud that they are not.
    let out = run(&["--itemize", "strace"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("strace was not found") && err.contains("not itemized"), "{err}");
    assert!(!Path::new("/etc/paddock-pwn").exists());
}

#[test]
fn a_deny_glob_with_many_matches_hides_them_all_pol06() {
    // Every masked file shares one empty mode-0000 file: no descriptor per match.
    if !require_os_sandbox() {
        return;
    }
    let s = Scratch::new("pol06many");
    for i in 0..300 {
        std::fs::write(s.project.join(format!("k{i}.pem")), CANARY).unwrap();
    }
    let marker = s.project.join("RAN");
    let out = s
        .paddock()
        .args(["run", "--deny-read", "**/*.pem", "--", "sh", "-c"])
        .arg(format!("cat k0.pem k299.pem; touch {}", marker.display()))
        .output()
        .unwrap();
    assert!(marker.exists(), "the task must run: {out:?}");
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains(CANARY),
        "a hidden file was read: {out:?}"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("Permission denied"), "{out:?}");
}
