//! What one run does cannot weaken the next: a `deny.read` entry inside the project is held
//! in place. Its parent directories cannot be renamed, exchanged or removed, nor the entry
//! itself renamed, removed or hard-linked to a visible name; each refusal is reported as a
//! write, and a second run under the same policy reads the secret from neither place.

use std::path::Path;

use serde_json::Value;

use crate::harness::*;

const EXDEV: i64 = 18;
const ENOTEMPTY: i64 = 39;

fn s(p: &Path) -> String {
    p.to_str().unwrap().to_owned()
}

/// Runs the probe with a report; returns the observations, the report and the output.
fn probe_reported(sc: &Scratch, ops: &[String]) -> (Vec<Value>, Value, std::process::Output) {
    let report = sc.root.join("report.json");
    let _ = std::fs::remove_file(&report);
    let report_flag = s(&report);
    let mut args: Vec<&str> = vec!["--report", &report_flag];
    args.push("--timeout");
    args.push("60");
    let ops: Vec<&str> = ops.iter().map(String::as_str).collect();
    let (obs, out) = sc.probe(&args, &ops);
    let text = std::fs::read(&report).unwrap_or_else(|_| panic!("no report: {out:?}"));
    (obs, serde_json::from_slice(&text).unwrap(), out)
}

/// Whether the report lists a write denial of `path`.
fn reported_write(report: &Value, path: &Path) -> bool {
    report["violations"]
        .as_array()
        .is_some_and(|v| v.iter().any(|v| v["kind"] == "write" && v["path"] == s(path)))
}

#[test]
fn a_denied_file_moved_aside_in_one_run_is_not_readable_in_the_next() {
    if !require_itemizer() {
        return;
    }
    let sc = Scratch::new("denypin");
    let p = |rel: &str| sc.project.join(rel);
    std::fs::create_dir_all(p("config")).unwrap();
    std::fs::create_dir_all(p("other/secrets")).unwrap();
    std::fs::create_dir_all(p("spare/secrets")).unwrap();
    std::fs::write(p("config/secrets.json"), CANARY).unwrap();
    std::fs::write(p("other/secrets/key.pem"), CANARY).unwrap();
    std::fs::write(p("decoy.json"), "decoy").unwrap();
    std::fs::write(
        p("paddock.toml"),
        "[deny]\nread = [\"config/secrets.json\", \"other/secrets\"]\n",
    )
    .unwrap();
    let two = |op: &str, a: &str, b: &str| format!("{op}:{}={}", s(&p(a)), s(&p(b)));
    let one = |op: &str, a: &str| format!("{op}:{}", s(&p(a)));

    // Run 1: every way of moving the entries or their parents aside.
    let run1 = [
        two("rename", "config", "config-moved"),
        two("rename", "other", "o2"),
        two("exchange", "config", "spare"),
        two("exchange", "other", "spare"),
        two("rename", "config/secrets.json", "config/s.json"),
        two("rename", "other/secrets", "other/s2"),
        two("exchange", "other/secrets", "spare/secrets"),
        two("exchange", "config/secrets.json", "decoy.json"),
        two("link", "config/secrets.json", "leak.json"),
        one("unlink", "config/secrets.json"),
        one("rmdir", "config"),
        one("rmdir", "other/secrets"),
    ];
    let (o, report, out) = probe_reported(&sc, &run1);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    for (op, arg) in run1.iter().map(|a| a.split_once(':').unwrap()) {
        let errnos: &[i64] = match op {
            "link" => &[EXDEV, EBUSY],
            "rmdir" => &[EBUSY, ENOTEMPTY],
            // Between two pinned directories (two mounts) "same mount" is checked first.
            _ => &[EBUSY, EXDEV],
        };
        assert_denied(&o, op, arg, errnos);
    }
    // Each refusal of a held path names it.
    for held in ["config", "other", "config/secrets.json", "other/secrets"] {
        assert!(reported_write(&report, &p(held)), "{held} not reported: {report:#}");
    }
    for gone in ["config-moved", "o2", "config/s.json", "other/s2", "leak.json"] {
        assert!(!p(gone).exists(), "{gone} exists after run 1");
    }
    assert_eq!(std::fs::read_to_string(p("config/secrets.json")).unwrap(), CANARY);
    assert_eq!(std::fs::read_to_string(p("other/secrets/key.pem")).unwrap(), CANARY);
    assert_eq!(std::fs::read_to_string(p("decoy.json")).unwrap(), "decoy");

    // Run 2, same policy: the secret from its old and its would-be new places.
    let run2: Vec<String> = [
        "config/secrets.json",
        "config-moved/secrets.json",
        "config/s.json",
        "spare/secrets.json",
        "other/secrets/key.pem",
        "o2/secrets/key.pem",
        "other/s2/key.pem",
        "spare/secrets/key.pem",
        "leak.json",
    ]
    .iter()
    .map(|rel| one("file", rel))
    .collect();
    let (_, _, out) = probe_reported(&sc, &run2);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains(CANARY), "run 2 read a denied file: {stdout}");
}

#[test]
fn the_pins_of_a_deny_entry_end_at_its_write_grant() {
    if !require_os_sandbox() {
        return;
    }
    // A directory beside the deny entry's parents stays free to rename; a grant nested in
    // the project's does not end the pins (renaming `a` would carry `a/b` along).
    let sc = Scratch::new("denypin2");
    let p = |rel: &str| sc.project.join(rel);
    std::fs::create_dir_all(p("a/b")).unwrap();
    std::fs::create_dir_all(p("a/free")).unwrap();
    std::fs::write(p("a/b/token"), CANARY).unwrap();
    std::fs::write(
        p("paddock.toml"),
        "[allow]\nwrite = [\".\", \"a/b\"]\n[deny]\nread = [\"a/b/token\"]\n",
    )
    .unwrap();
    let (o, out) = sc.probe(
        &[],
        &[
            &format!("rename:{}={}", s(&p("a/free")), s(&p("a/free2"))),
            &format!("rename:{}={}", s(&p("a/b")), s(&p("a/b2"))),
            &format!("exchange:{}={}", s(&p("a")), s(&p("src"))),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_allowed(&o, "rename", &format!("{}={}", s(&p("a/free")), s(&p("a/free2"))));
    assert_denied(&o, "rename", &format!("{}={}", s(&p("a/b")), s(&p("a/b2"))), &[EBUSY]);
    assert_denied(&o, "exchange", &format!("{}={}", s(&p("a")), s(&p("src"))), &[EBUSY]);
    assert!(p("a/free2").is_dir() && p("a/b/token").is_file());
    // `paddock plan` lists what is pinned.
    let out = sc.paddock().args(["plan", "--", "true"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let pinned: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("pinned"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .map(str::trim)
        .collect();
    for dir in ["a", ".git"] {
        assert!(pinned.contains(&s(&p(dir)).as_str()), "{dir} not listed: {text}");
    }
    assert!(!pinned.iter().any(|l| l.ends_with("free2")), "{text}");
}

#[test]
fn a_large_policy_holds_every_wall_whoever_mounts_it() {
    if !require_os_sandbox() {
        return;
    }
    // Enough protected paths, pins and hidden files that bwrap does not mount them: the
    // runner's child before bwrap (`paddock plan --json` lists them as `self-mounts`), or the
    // supervisor after it (as `inner-mounts` of its payload), in this pass's itemize mode and
    // untraced.
    let sc = Scratch::new("bigwalls");
    let p = |rel: &str| sc.project.join(rel);
    let mut deny = Vec::new();
    for i in 0..30 {
        std::fs::create_dir_all(p(&format!("pkg{i}/.vscode"))).unwrap();
        std::fs::write(p(&format!("pkg{i}/.vscode/settings.json")), "{}").unwrap();
        std::fs::create_dir_all(p(&format!("conf{i}"))).unwrap();
        std::fs::write(p(&format!("conf{i}/secret.env")), CANARY).unwrap();
        deny.push(format!("\"conf{i}/secret.env\""));
    }
    std::fs::write(p("paddock.toml"), format!("[deny]\nread = [{}]\n", deny.join(", "))).unwrap();
    for flags in [&[][..], &["--itemize", "off"]] {
        let mut ops = Vec::new();
        for i in [0, 17, 29] {
            ops.push(format!("read:{}", s(&p(&format!("conf{i}/secret.env")))));
            ops.push(format!("write:{}", s(&p(&format!("conf{i}/secret.env")))));
            ops.push(format!("write:{}", s(&p(&format!("pkg{i}/.vscode/settings.json")))));
            ops.push(format!("rename:{}={}", s(&p(&format!("conf{i}"))), s(&p("moved"))));
        }
        ops.push(format!("write:{}", s(&p("conf3/ok.txt"))));
        let ops: Vec<&str> = ops.iter().map(String::as_str).collect();
        let (o, out) = sc.probe(flags, &ops);
        assert_eq!(out.status.code(), Some(0), "{flags:?}: {out:?}");
        assert!(!String::from_utf8_lossy(&out.stdout).contains(CANARY), "{flags:?}: {out:?}");
        for i in [0, 17, 29] {
            let secret = s(&p(&format!("conf{i}/secret.env")));
            assert_denied(&o, "read", &secret, &[EACCES]);
            assert_denied(&o, "write", &secret, &[EACCES, EROFS]);
            let settings = s(&p(&format!("pkg{i}/.vscode/settings.json")));
            assert_denied(&o, "write", &settings, &[EROFS]);
            let rename = format!("{}={}", s(&p(&format!("conf{i}"))), s(&p("moved")));
            assert_denied(&o, "rename", &rename, &[EBUSY, EXDEV]);
        }
        assert_allowed(&o, "write", &s(&p("conf3/ok.txt")));
        assert_eq!(std::fs::read_to_string(p("conf0/secret.env")).unwrap(), CANARY);
        assert_eq!(std::fs::read_to_string(p("pkg0/.vscode/settings.json")).unwrap(), "{}");
        std::fs::remove_file(p("conf3/ok.txt")).unwrap();
    }
    // The untraced plan of this policy has the supervisor make them where there are user
    // namespaces (bwrap keeps two capabilities for it), else the runner's child (on a host
    // whose probe found the private namespace working: the observers' too); never bwrap.
    let out =
        sc.paddock().args(["plan", "--json", "--itemize", "off", "--", "true"]).output().unwrap();
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let outer = plan["plan"]["self-mounts"].as_array().cloned().unwrap_or_default();
    let supervisor = plan["plan"]["payloads"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["name"] == "supervisor"))
        .and_then(|p| p["bytes"].as_str())
        .map(|text| serde_json::from_str::<Value>(text).unwrap())
        .unwrap_or_default();
    let inner = supervisor["inner-mounts"].as_array().cloned().unwrap_or_default();
    if itemizer() == "observe" || !outer.is_empty() || !inner.is_empty() {
        let masked = outer.iter().filter(|m| m["source"].is_string()).count()
            + inner.iter().filter(|m| m["mask"] == true).count();
        assert_eq!(masked, 30, "each hidden file's mask: {outer:?} {inner:?}");
        let args = plan["plan"]["payloads"][0]["bytes"].as_str().unwrap_or_default();
        assert!(!args.contains("secret.env"), "bwrap mounts a hidden file: {args}");
    }
}
