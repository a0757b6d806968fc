//! Runs every case of the shared strace corpus (`../shared/strace-corpus/`, real strace 6.1
//! logs with the failed calls recorded independently by the traced workload) through exactly
//! the code the `denials` example runs, and compares its JSON lines with the expected calls.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

#[allow(dead_code)]
#[path = "../examples/denials.rs"]
mod denials_example;

fn corpus_dir() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/strace-corpus");
    if dir.is_dir() {
        return Some(dir);
    }
    // The corpus lives beside the repository, not in it: a clone elsewhere has none, and
    // `xtask` names that a fact of the pass (it looks for the same directory).
    paddock_test_support::skip(
        format!("strace corpus not found at {}", dir.display()),
        Some(paddock_test_support::Fact::StraceCorpusAbsent),
    );
    None
}

/// Network calls: a failed one without a unix path is still a network denial.
const NETWORK: &[&str] = &[
    "socket",
    "socketpair",
    "connect",
    "bind",
    "sendto",
    "sendmsg",
    "listen",
    "accept",
    "accept4",
];

#[derive(Debug)]
struct Out {
    pid: Option<u64>,
    syscall: String,
    paths: Vec<String>,
    truncated: bool,
    errno: String,
}

fn run_case(dir: &Path, expected: &Value) -> (Vec<Out>, String) {
    let logs = expected["logs"].as_array().unwrap();
    let first = logs[0].as_str().unwrap();
    // A `-ff` case lists the files of one folder: the example takes the folder.
    let target = match first.split_once('/') {
        Some((folder, _)) => dir.join(folder),
        None => dir.join(first),
    };
    let (mut out, mut diag) = (Vec::new(), Vec::new());
    denials_example::run(&target, &mut out, &mut diag).unwrap();
    let lines = String::from_utf8(out).unwrap();
    let records = lines
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON {l}: {e}"));
            let keys: Vec<_> = v.as_object().unwrap().keys().cloned().collect();
            assert_eq!(keys, ["errno", "paths", "pid", "syscall", "truncated"], "keys of {l}");
            Out {
                pid: v["pid"].as_u64(),
                syscall: v["syscall"].as_str().unwrap().to_owned(),
                paths: v["paths"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| p.as_str().unwrap().to_owned())
                    .collect(),
                truncated: v["truncated"].as_bool().unwrap(),
                errno: v["errno"].as_str().unwrap().to_owned(),
            }
        })
        .collect();
    (records, String::from_utf8(diag).unwrap())
}

fn matches(out: &Out, want: &Value, pid_known: bool) -> bool {
    let pid_ok = match out.pid {
        Some(pid) => Some(pid) == want["pid"].as_u64(),
        None => !pid_known,
    };
    let want_paths = want["paths"].as_array().unwrap();
    let want_truncated = want_paths.iter().any(|p| p["truncated_in_log"].as_bool().unwrap());
    pid_ok
        && out.syscall == want["syscall"].as_str().unwrap()
        && out.errno == want["errno"].as_str().unwrap()
        && out.truncated == want_truncated
        && out.paths.len() == want_paths.len()
        && out.paths.iter().zip(want_paths).all(|(got, w)| {
            let hex = w["hex"].as_str().unwrap();
            // A cut path is exactly the bytes strace printed: a strict prefix of the real one.
            if w["truncated_in_log"].as_bool().unwrap() {
                hex.starts_with(got.as_str()) && got.len() < hex.len()
            } else {
                got == hex
            }
        })
}

#[test]
fn every_corpus_case() {
    let Some(dir) = corpus_dir() else { return };
    let mut cases: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".expected.json"))
        .collect();
    cases.sort();
    assert!(cases.len() >= 30, "only {} corpus cases found", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        let expected: Value = serde_json::from_slice(&std::fs::read(case).unwrap()).unwrap();
        let name = expected["name"].as_str().unwrap().to_owned();
        let (got, diag) = run_case(&dir, &expected);
        if diag.contains("malformed") || diag.contains("without an unfinished start") {
            failures.push(format!("{name}: diagnostics:\n{diag}"));
        }
        let pid_known =
            expected["validation"]["failure_pids_present_in_log"].as_bool().unwrap_or(true);
        let mut used = vec![false; got.len()];
        let mut last_index: BTreeMap<u64, usize> = BTreeMap::new();
        for want in expected["failures"].as_array().unwrap() {
            let found = (0..got.len()).find(|&i| !used[i] && matches(&got[i], want, pid_known));
            match found {
                Some(i) => {
                    used[i] = true;
                    // Per thread, failures come out in the order the thread made them.
                    let pid = want["pid"].as_u64().unwrap();
                    if let Some(&prev) = last_index.get(&pid)
                        && prev > i
                    {
                        failures.push(format!("{name}: pid {pid} out of order at {want}"));
                    }
                    last_index.insert(pid, i);
                }
                None => failures.push(format!("{name}: expected failure not reported: {want}")),
            }
        }
        if expected["exhaustive"].as_bool().unwrap() {
            for (out, _) in got.iter().zip(&used).filter(|(_, used)| !**used) {
                if !out.paths.is_empty() || NETWORK.contains(&out.syscall.as_str()) {
                    failures.push(format!(
                        "{name}: reported a file/network failure not expected: {out:?}"
                    ));
                }
            }
        }
        eprintln!(
            "{name}: {} expected, {} reported",
            expected["failures"].as_array().unwrap().len(),
            got.len()
        );
    }
    if !failures.is_empty() {
        let shown: Vec<_> = failures.iter().take(40).cloned().collect();
        panic!("{} corpus mismatches:\n{}", failures.len(), shown.join("\n"));
    }
}
