//! `paddock learn` round trips: a task learned once runs again under the proposed policy,
//! from a clean state, with no violation anywhere (report within `/`).

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::harness::*;
use crate::violations::require_strace;

/// Learns `script` (run by `sh -c` in the project), writes the proposal as the project's
/// `paddock.toml` (reporting everywhere), runs `reset` on the host, then runs the script
/// again; asserts it succeeds with no violation. Returns the proposal.
fn round_trip(s: &Scratch, script: &str, reset: &dyn Fn(&Path)) -> String {
    let proposal = s.root.join("proposed.toml");
    let out = s
        .paddock()
        .args(["learn", "--output"])
        .arg(&proposal)
        .args(["--", "sh", "-c", script])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "learning run failed: {out:?}");
    let text = std::fs::read_to_string(&proposal).unwrap();
    // Nothing of the machine's secrets and no absolute project path in the proposal.
    assert!(!text.contains(s.project.to_str().unwrap()), "{text}");
    std::fs::write(s.project.join("paddock.toml"), format!("{text}\n[report]\nwithin = [\"/\"]\n"))
        .unwrap();
    reset(&s.project);
    let report = s.root.join("report.json");
    let out = s
        .paddock()
        .arg("run")
        .arg("--report")
        .arg(&report)
        .args(["--", "sh", "-c", script])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(out.status.code(), Some(0), "the task failed under the proposal:\n{text}\n{out:?}");
    assert_eq!(v["itemized"], true);
    // Only the built-in secret reads the proposal refused to grant may remain.
    let secrets = s.home.join(".ssh");
    let left: Vec<&Value> = v["violations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| !x["path"].as_str().is_some_and(|p| Path::new(p).starts_with(&secrets)))
        .collect();
    assert!(left.is_empty(), "violations under\n{text}\n{v:#}");
    text
}

#[test]
fn learn_a_shell_pipeline_writing_an_output_dir() {
    if !require_strace() {
        return;
    }
    let s = Scratch::new("learn-sh");
    std::fs::create_dir_all(s.project.join("out")).unwrap();
    let script = "mkdir -p out/sub && ls /usr | sort | head -5 > out/sub/list.txt \
                  && wc -l < out/sub/list.txt > out/count && cat ~/.ssh/id_canary 2>/dev/null; true";
    let text = round_trip(&s, script, &|p| {
        std::fs::remove_dir_all(p.join("out/sub")).unwrap();
        std::fs::remove_file(p.join("out/count")).unwrap();
    });
    assert!(text.contains("write = [\"out\"]"), "{text}");
    assert!(text.contains("network = false"), "{text}");
    // The secret read shows as a comment, never as a grant.
    assert!(text.contains("~/.ssh/id_canary, a built-in secret location"), "{text}");
    assert!(!text.lines().any(|l| l.starts_with("read =")), "{text}");
    assert!(!text.contains(CANARY));
}

#[test]
fn learn_a_python_script_reading_a_data_dir() {
    if !require_strace() {
        return;
    }
    if !require_tool("/usr/bin/python3", "learning a python script") {
        return;
    }
    let s = Scratch::new("learn-py");
    std::fs::create_dir_all(s.project.join("data")).unwrap();
    for i in 0..5 {
        std::fs::write(s.project.join(format!("data/{i}.csv")), format!("{i},{}\n", i * i))
            .unwrap();
    }
    std::fs::write(
        s.project.join("sum.py"),
        "import os, json, csv\ntotal = 0\nfor name in sorted(os.listdir('data')):\n    \
         with open(os.path.join('data', name)) as f:\n        \
         total += sum(int(r[1]) for r in csv.reader(f))\nprint(json.dumps(total))\n",
    )
    .unwrap();
    let text = round_trip(&s, "/usr/bin/python3 -B sum.py", &|_| {});
    assert!(text.contains("write = []"), "a read-only task needs no write grant: {text}");
}

/// The real cargo (not a rustup proxy, which needs the user's home).
fn cargo() -> Option<PathBuf> {
    let c = std::env::var_os("CARGO").map(PathBuf::from)?;
    (c.is_file() && c.parent()?.join("rustc").is_file()).then_some(c)
}

#[test]
fn learn_an_offline_cargo_build() {
    if !require_strace() {
        return;
    }
    let Some(cargo) = cargo() else {
        // The unprivileged runs start with a reset environment and cannot read root's
        // toolchain: a fact of those passes. Anywhere else cargo runs the suite, so CARGO
        // names it.
        // SAFETY: geteuid has no preconditions and cannot fail.
        let unprivileged = unsafe { libc::geteuid() } != 0;
        skip(
            "no real cargo binary next to rustc (CARGO names a rustup proxy or nothing)",
            // In a container image of the matrix there is no toolchain at all.
            Some(if unprivileged { Fact::Unprivileged } else { Fact::ToolchainAbsent }),
        );
        return;
    };
    let s = Scratch::new("learn-cargo");
    std::fs::write(
        s.project.join("Cargo.toml"),
        // Its own workspace: the scratch dir may lie inside another workspace's tree.
        "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    )
    .unwrap();
    let script = format!(
        "CARGO_HOME=$PWD/.cargo-home CARGO_TARGET_DIR=$PWD/target RUSTC={} {} build --offline -q",
        cargo.parent().unwrap().join("rustc").display(),
        cargo.display()
    );
    let text = round_trip(&s, &script, &|p| {
        std::fs::remove_dir_all(p.join("target")).unwrap();
    });
    assert!(text.contains("write = [\".\"]"), "Cargo.lock is written in the project root: {text}");
    // Rust's process spawning passes a pidfd over a seqpacket socketpair, which the filter
    // allows (it cannot address anyone but its peer): no unix-socket grant is needed.
    assert!(!text.contains("unix-sockets = true"), "{text}");
    assert!(s.project.join("target/debug/tiny").exists());
}
