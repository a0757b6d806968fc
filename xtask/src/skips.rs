//! One skip summary per pass: each pass of tests gets a fresh skip log
//! (`PADDOCK_SKIP_LOG`) and the facts it sets up on purpose (`PADDOCK_PASS_FACTS`); after it,
//! the skips it recorded are printed, and where tests are required (CI) a skip that names no
//! fact of the pass fails the pass (the test itself has already failed; this is the
//! backstop). xtask's own skips (a run it cannot start, a check it cannot make) go through
//! [`Pass::skip`] by the same rule.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Result, bail};
use paddock_test_support::{FACTS_ENV, Fact, SKIP_LOG_ENV, Skip, read_log, required};

/// A pass of tests: its name, the facts it names and its skip log.
#[derive(Debug)]
pub struct Pass {
    name: String,
    facts: Vec<Fact>,
    log: PathBuf,
    /// xtask's own skips in this pass.
    own: Vec<Skip>,
}

impl Pass {
    /// A pass named `name` that names `facts`, with an empty log in `dir` (created, and
    /// readable and writable by everyone: the unprivileged runs write to it too).
    pub fn new(dir: &Path, name: &str, facts: &[Fact]) -> Result<Pass> {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(dir)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))?;
        let file: String =
            name.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
        let log = dir.join(format!("skips-{file}.log"));
        std::fs::write(&log, b"")?;
        std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o666))?;
        Ok(Pass { name: name.to_owned(), facts: facts.to_vec(), log, own: Vec::new() })
    }

    /// The environment a test process of this pass gets.
    pub fn env(&self) -> Vec<(String, String)> {
        let facts: Vec<&str> = self.facts.iter().map(|f| f.name()).collect();
        let mut env = vec![
            (FACTS_ENV.to_owned(), facts.join(",")),
            (SKIP_LOG_ENV.to_owned(), self.log.display().to_string()),
        ];
        if required() {
            // Passed on explicitly: the unprivileged runs start with a reset environment.
            env.push((paddock_test_support::CI_ENV.to_owned(), "true".to_owned()));
            env.push((paddock_test_support::REQUIRE_ENV.to_owned(), "1".to_owned()));
        }
        env
    }

    /// Sets this pass's environment on `cmd`.
    pub fn apply(&self, cmd: &mut Command) {
        cmd.envs(self.env());
    }

    /// xtask skips part of the pass: fails where tests are required, unless `fact` is one
    /// the pass names; else says so and counts it in the summary.
    pub fn skip(&mut self, what: &str, reason: &str, fact: Option<Fact>) -> Result<()> {
        let named = fact.filter(|f| self.facts.contains(f));
        if named.is_none() && required() {
            bail!("{what} is required here (CI) but cannot run: {reason}");
        }
        eprintln!("xtask: SKIPPED {what}: {reason}");
        self.own.push(Skip { test: what.to_owned(), reason: reason.to_owned(), fact: named });
        Ok(())
    }

    /// Prints the pass's skips (one summary per pass), and fails where tests are required and
    /// a skip names no fact of the pass.
    pub fn finish(self) -> Result<()> {
        let mut skips = self.own;
        skips.extend(read_log(&self.log));
        let _ = std::fs::remove_file(&self.log);
        let names: Vec<&str> = self.facts.iter().map(|f| f.name()).collect();
        let facts = if names.is_empty() { "none".to_owned() } else { names.join(", ") };
        if skips.is_empty() {
            eprintln!("xtask: skip summary of \"{}\" (facts: {facts}): no skips", self.name);
            return Ok(());
        }
        eprintln!("xtask: skip summary of \"{}\" (facts: {facts}): {}", self.name, skips.len());
        let mut unexplained = 0;
        for s in &skips {
            let fact = s.fact.filter(|f| self.facts.contains(f));
            if fact.is_none() {
                unexplained += 1;
            }
            let because = fact.map_or("NOT A FACT OF THIS PASS".to_owned(), |f| f.to_string());
            eprintln!("  {}: {} [{because}]", s.test, s.reason);
        }
        if unexplained > 0 && required() {
            bail!(
                "\"{}\": {unexplained} skip(s) that are not facts of the pass (tests are required here)",
                self.name
            );
        }
        Ok(())
    }
}

/// Where the strace corpus lives when it is there: beside the repository, not in it.
pub fn strace_corpus(root: &Path) -> PathBuf {
    root.join("../shared/strace-corpus")
}
