//! Goldens of the full command line the executor runs (`run::command_line`): program, argv
//! (the profile in full), environment and directory, for a few representative policies,
//! under `test_data/exec/`.

use expect_test::expect_file;
use paddock_policy::{
    Backend, FileKind, GlobKind, GlobRule, HostFacts, NetworkPolicy, ResolvedPolicy,
};

use super::*;
use crate::MacosSeatbelt;
use crate::run::{RunOptions, command_line};

/// One argument per line; one that spans lines is quoted as a block.
fn render(policy: &ResolvedPolicy) -> String {
    let plan = MacosSeatbelt::new().plan(policy, &task(), &HostFacts::default()).unwrap();
    let (program, argv) = command_line(&plan, &RunOptions::new().unwrap());
    let mut out = format!("program: {}\n", program.display());
    for (i, arg) in argv.iter().enumerate() {
        // The profile is text of paddock's own: shown as it is, line by line.
        if let Some(text) = arg.to_str().filter(|t| t.contains('\n')) {
            out.push_str(&format!("argv[{i}]:\n"));
            for line in text.lines() {
                out.push_str(&format!("  |{}{line}\n", if line.is_empty() { "" } else { " " }));
            }
        } else {
            out.push_str(&format!("argv[{i}]: {}\n", DisplayBytes(arg)));
        }
    }
    for (k, v) in &plan.env {
        out.push_str(&format!("env: {}={}\n", DisplayBytes(k), DisplayBytes(v)));
    }
    out.push_str(&format!("cwd: {}\n", plan.cwd.as_path().display()));
    out
}

#[test]
fn p0() {
    expect_file!["../../test_data/exec/01_p0.txt"].assert_eq(&render(&super::p0()));
}

#[test]
fn globs_and_tmp_aliases() {
    let mut p = empty_policy();
    p.write = vec![grant("/tmp/w", FileKind::Dir, "allow.write[0]")];
    p.globs = vec![GlobRule {
        kind: GlobKind::DenyRead,
        base: abs("/Users/u/proj"),
        pattern: "**/*.pem".into(),
        origin: origin("deny.read[1]"),
    }];
    p.read_deny =
        vec![anchor("/Users/u", &[("/Users/u/proj", FileKind::Dir, false)], "deny.read[0]")];
    expect_file!["../../test_data/exec/02_globs_aliases.txt"].assert_eq(&render(&p));
}

#[test]
fn network_on_with_system_info() {
    let mut p = super::p0();
    p.network = NetworkPolicy::On;
    p.system_info = true;
    expect_file!["../../test_data/exec/03_network_on.txt"].assert_eq(&render(&p));
}
