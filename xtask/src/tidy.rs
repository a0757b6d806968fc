//! The repository's own rules, checked in CI: every Rust module starts with a `//!` doc,
//! and no committed file names a machine path.

use std::path::Path;

use anyhow::{Result, bail};

/// Checks every `.rs` file under `crates/`, `xtask/` and `tests/`.
pub fn check(root: &Path) -> Result<()> {
    let mut missing = Vec::new();
    let mut count = 0;
    for dir in ["crates", "xtask", "tests"] {
        walk(&root.join(dir), &mut |path| {
            if path.extension().is_some_and(|e| e == "rs")
                && !path.components().any(|c| c.as_os_str() == "target")
            {
                count += 1;
                let text = std::fs::read_to_string(path).unwrap_or_default();
                let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
                if !first.starts_with("//!") {
                    missing.push(path.strip_prefix(root).unwrap_or(path).display().to_string());
                }
            }
        });
    }
    if !missing.is_empty() {
        bail!("these modules do not start with a `//!` doc:\n  {}", missing.join("\n  "));
    }
    eprintln!("xtask tidy: {count} modules, each with a //! doc");
    no_process_state(root)
}

/// The libraries keep no process-wide state (ARCHITECTURE.md, invariants): no `static`
/// item in their code outside tests. Binaries (`main.rs`, `src/bin/`) own the process and
/// may; a file's tests start at its first `#[cfg(test)]` (they are at the end, by habit).
fn no_process_state(root: &Path) -> Result<()> {
    let mut found = Vec::new();
    walk(&root.join("crates"), &mut |path| {
        let rel = path.strip_prefix(root).unwrap_or(path);
        let text = rel.to_string_lossy();
        let library = text.contains("/src/")
            && !text.contains("/src/bin/")
            && !text.ends_with("/main.rs")
            && !text.ends_with("tests.rs")
            && !text.starts_with("crates/test-support/");
        if !library || path.extension().is_none_or(|e| e != "rs") {
            return;
        }
        let source = std::fs::read_to_string(path).unwrap_or_default();
        for (n, line) in source.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("#[cfg(test)]") || code.starts_with("#[cfg(all(test") {
                break;
            }
            let item =
                code.strip_prefix("pub(crate) ").or(code.strip_prefix("pub ")).unwrap_or(code);
            if item.starts_with("static ") || item.starts_with("thread_local!") {
                found.push(format!("{}:{}: {}", rel.display(), n + 1, code));
            }
        }
    });
    if !found.is_empty() {
        bail!(
            "process-wide state in library code (the caller owns the process: pass it in instead):\n  {}",
            found.join("\n  ")
        );
    }
    eprintln!("xtask tidy: no process-wide state in the libraries");
    Ok(())
}

fn walk(dir: &Path, f: &mut dyn FnMut(&Path)) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n == "target" || n == "fuzz") {
                continue;
            }
            walk(&p, f);
        } else {
            f(&p);
        }
    }
}
