//! `paddock check --project`: a file hidden by `deny.read` that is hard-linked elsewhere in
//! the project is listed with its other names (the walls hide paths, not inodes).

use std::path::Path;
use std::process::Output;

use crate::harness::*;

fn check(sc: &Scratch, args: &[&str]) -> Output {
    let mut c = sc.paddock();
    c.arg("check").args(args);
    c.output().unwrap()
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[test]
fn hidden_files_hard_linked_elsewhere_in_the_project_are_listed() {
    if !paddock_bin().exists() {
        eprintln!("SKIPPED: the paddock binary is not built (cargo build -p paddock)");
        return;
    }
    let sc = Scratch::new("hardlinks");
    let p = |rel: &str| sc.project.join(rel);
    for d in ["secrets", "docs/deep", "config"] {
        std::fs::create_dir_all(p(d)).unwrap();
    }
    std::fs::write(p("secrets/key.pem"), CANARY).unwrap();
    std::fs::write(p("secrets/alone"), CANARY).unwrap();
    std::fs::write(p("config/secrets.json"), CANARY).unwrap();
    std::fs::hard_link(p("secrets/key.pem"), p("docs/deep/key-copy")).unwrap();
    std::fs::hard_link(p("config/secrets.json"), p("backup.json")).unwrap();
    // A link outside the project is counted, not walked to.
    std::fs::hard_link(p("config/secrets.json"), sc.home.join("outside.json")).unwrap();
    std::fs::write(p("paddock.toml"), "[deny]\nread = [\"secrets\", \"config/secrets.json\"]\n")
        .unwrap();

    let out = check(&sc, &["--project"]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(t.contains("secrets/key.pem is hidden") && t.contains("docs/deep/key-copy"), "{t}");
    assert!(t.contains("config/secrets.json is hidden") && t.contains("backup.json"), "{t}");
    assert!(t.contains("config/secrets.json has links outside the project"), "{t}");
    assert!(!t.contains("secrets/alone"), "{t}");

    let out = check(&sc, &["--project", sc.project.to_str().unwrap(), "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let linked = v["linked"].as_array().unwrap();
    assert_eq!(linked.len(), 2, "{v:#}");
    let copy = p("docs/deep/key-copy");
    assert!(
        linked.iter().any(|l| l["also_at"][0] == copy.to_str().unwrap() && l["links"] == 2),
        "{v:#}"
    );
    assert_eq!(v["complete"], true);

    // Without the other names: nothing to say, exit 0.
    for rel in ["docs/deep/key-copy", "backup.json"] {
        std::fs::remove_file(p(rel)).unwrap();
    }
    let out = check(&sc, &["--project"]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(0), "{t}");
    assert!(t.contains("no file hidden by deny.read is hard-linked"), "{t}");
    assert!(Path::new(&sc.home.join("outside.json")).exists());
}

#[test]
fn a_hard_link_to_a_hidden_file_reads_through_as_documented() {
    // The README's limitation, asserted so that a change of it is seen: the walls hide the
    // name, and the other name reads the bytes. `paddock check --project` is the answer.
    if !require_os_sandbox() {
        return;
    }
    let sc = Scratch::new("hardlinks2");
    let p = |rel: &str| sc.project.join(rel);
    std::fs::create_dir_all(p("secrets")).unwrap();
    std::fs::write(p("secrets/key.pem"), CANARY).unwrap();
    std::fs::hard_link(p("secrets/key.pem"), p("key-copy")).unwrap();
    std::fs::write(p("paddock.toml"), "[deny]\nread = [\"secrets\"]\n").unwrap();
    let (o, _) = sc.probe(
        &[],
        &[
            &format!("file:{}", p("secrets/key.pem").display()),
            &format!("file:{}", p("key-copy").display()),
        ],
    );
    assert_denied(&o, "file", p("secrets/key.pem").to_str().unwrap(), &[ENOENT, EACCES]);
    assert_eq!(assert_allowed(&o, "file", p("key-copy").to_str().unwrap()), CANARY);
    let out = check(&sc, &["--project"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("key-copy"), "{}", text(&out));
}
