//! `cargo xtask dist [--out DIR]`: what an installation of paddock is made of, in DIR
//! (default: `dist/` in cargo's target directory):
//!
//! - `bin/`: `paddock` and its supervisors, `paddock-supervisor` and
//!   `paddock-supervisor-nolibc`, from the release build ([`crate::build::release`]); they
//!   stay together, since `paddock` looks for its supervisors next to itself;
//! - `completions/`: completions for bash, zsh, fish, elvish and PowerShell;
//! - `man/`: the manual pages, `paddock.1` and one per subcommand (`paddock-run.1`, ...).
//!
//! Completions and manual pages are generated from the CLI's own clap definitions,
//! `crates/cli/src/cli/args.rs`, included here as a module: xtask needs the definitions, not the
//! runtime behind them.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::CommandFactory;
use clap_complete::{Generator, Shell};

/// The CLI's definitions: xtask builds the `clap::Command` of them and never reads a parsed
/// value, so the fields count as unread here.
#[allow(dead_code)]
#[path = "../../crates/cli/src/cli/args.rs"]
mod args;

/// The CLI package's manifest: its description is the command's `about` (clap's derive takes
/// it from the package being compiled, which is xtask here).
const CLI_MANIFEST: &str = include_str!("../../crates/cli/Cargo.toml");

/// The executables of an installation, from the release build's directory.
const BINARIES: [&str; 3] = ["paddock", "paddock-supervisor", "paddock-supervisor-nolibc"];

/// The shells completions are written for.
const SHELLS: [Shell; 5] = [Shell::Bash, Shell::Zsh, Shell::Fish, Shell::Elvish, Shell::PowerShell];

/// `cargo xtask dist [--out DIR]`; a relative DIR is taken from `cwd`, where xtask was started.
pub fn dist(root: &Path, cwd: &Path, args: &[String]) -> Result<()> {
    let out = match args {
        [] => crate::target_dir(root).join("dist"),
        [flag, dir] if flag == "--out" => cwd.join(dir),
        [arg] if arg.starts_with("--out=") => cwd.join(&arg["--out=".len()..]),
        _ => bail!("usage: cargo xtask dist [--out DIR]"),
    };
    let paddock = crate::build::release(root)?;
    let release = paddock.parent().context("the release build has no directory")?;
    let mut written = copy_binaries(release, &out.join("bin"))?;
    written.extend(write_docs(&out)?);
    for path in &written {
        println!("{}", path.display());
    }
    eprintln!("xtask dist: wrote {} files into {}", written.len(), out.display());
    Ok(())
}

/// Copies [`BINARIES`] from `release` into `bin`, replacing what is there (a running copy is
/// unlinked, not overwritten); their modes come along.
fn copy_binaries(release: &Path, bin: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(bin).with_context(|| format!("cannot create {}", bin.display()))?;
    let mut written = Vec::new();
    for name in BINARIES {
        let (from, to) = (release.join(name), bin.join(name));
        match std::fs::remove_file(&to) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e).with_context(|| format!("cannot replace {}", to.display()));
            }
            _ => {}
        }
        std::fs::copy(&from, &to)
            .with_context(|| format!("cannot copy {} to {}", from.display(), to.display()))?;
        written.push(to);
    }
    Ok(written)
}

/// Writes the completions into `out/completions` and the manual pages into `out/man`;
/// returns the files written.
pub fn write_docs(out: &Path) -> Result<Vec<PathBuf>> {
    let cmd = command()?;
    let mut written = Vec::new();
    for (dir, files) in [("completions", completions(&cmd)?), ("man", man_pages(&cmd)?)] {
        let dir = out.join(dir);
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        for (name, bytes) in files {
            let path = dir.join(name);
            std::fs::write(&path, bytes)
                .with_context(|| format!("cannot write {}", path.display()))?;
            written.push(path);
        }
    }
    Ok(written)
}

/// The `paddock` command as its binary has it: the definitions, with the CLI package's
/// description as `about` (the version is the workspace's, xtask's too).
pub fn command() -> Result<clap::Command> {
    Ok(args::Cli::command().about(cli_description()?))
}

/// The `description` of the CLI package's manifest.
fn cli_description() -> Result<&'static str> {
    let manifest: toml::Table = toml::from_str(CLI_MANIFEST).context("crates/cli/Cargo.toml")?;
    let description = manifest
        .get("package")
        .and_then(|p| p.get("description"))
        .and_then(toml::Value::as_str)
        .context("crates/cli/Cargo.toml has no package.description")?;
    // clap keeps `&'static str`s; xtask builds the command a few times at most.
    Ok(description.to_owned().leak())
}

/// The completion script of each of [`SHELLS`]: file name and contents.
fn completions(cmd: &clap::Command) -> Result<Vec<(String, Vec<u8>)>> {
    let name = cmd.get_name().to_owned();
    let mut files = Vec::new();
    for shell in SHELLS {
        let mut bytes = Vec::new();
        clap_complete::generate(shell, &mut cmd.clone(), &name, &mut bytes);
        if bytes.is_empty() {
            bail!("clap_complete wrote no {shell} completions");
        }
        files.push((shell.file_name(&name), bytes));
    }
    Ok(files)
}

/// The manual page of `cmd` and of each of its visible subcommands, recursively (`paddock.1`,
/// `paddock-run.1`, ...): file name and contents.
fn man_pages(cmd: &clap::Command) -> Result<Vec<(String, Vec<u8>)>> {
    fn add(cmd: clap::Command, files: &mut Vec<(String, Vec<u8>)>) -> Result<()> {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            add(sub.clone(), files)?;
        }
        let man = clap_mangen::Man::new(cmd);
        let mut bytes = Vec::new();
        man.render(&mut bytes)?;
        files.push((man.get_filename(), bytes));
        Ok(())
    }
    // `paddock help` is clap's, not a page of its own; building names the subcommands'
    // pages after their parents (`paddock-run`).
    let mut cmd = cmd.clone().disable_help_subcommand(true);
    cmd.build();
    let mut files = Vec::new();
    add(cmd, &mut files)?;
    files.sort();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(files: &[(String, Vec<u8>)], name: &str) -> String {
        let (_, bytes) = files.iter().find(|(n, _)| n == name).unwrap();
        String::from_utf8(bytes.clone()).unwrap()
    }

    #[test]
    fn the_command_is_well_formed() {
        let cmd = command().unwrap();
        cmd.clone().debug_assert();
        assert_eq!(cmd.get_name(), "paddock");
        assert!(cmd.get_about().unwrap().to_string().starts_with("Run one command"));
    }

    #[test]
    fn completions_name_the_subcommands_and_flags() {
        let files = completions(&command().unwrap()).unwrap();
        let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            ["paddock.bash", "_paddock", "paddock.fish", "paddock.elv", "_paddock.ps1"]
        );
        for (name, _) in &files {
            let text = text(&files, name);
            // fish names long flags without their dashes (`-l allow-write`).
            let flag = if name.ends_with(".fish") { "-l allow-write" } else { "--allow-write" };
            for word in ["run", "plan", "check", "learn", flag, "itemize"] {
                assert!(text.contains(word), "{name} does not mention {word}");
            }
        }
    }

    #[test]
    fn man_pages_cover_every_subcommand() {
        let files = man_pages(&command().unwrap()).unwrap();
        let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            ["paddock-check.1", "paddock-learn.1", "paddock-plan.1", "paddock-run.1", "paddock.1"]
        );
        let main = text(&files, "paddock.1");
        assert!(main.starts_with(".ie \\n(.g .ds Aq"), "not roff:\n{main}");
        for sub in ["run", "plan", "check", "learn"] {
            assert!(main.contains(&format!("paddock\\-{sub}(1)")), "paddock.1 lacks {sub}");
        }
        assert!(main.contains("Run one command with exactly the files"));
        // roff escapes each `-`.
        let run = text(&files, "paddock-run.1");
        for flag in ["\\-\\-allow\\-write", "\\-\\-network", "\\-\\-timeout"] {
            assert!(run.contains(flag), "paddock-run.1 lacks {flag}");
        }
    }

    #[test]
    fn write_docs_writes_the_files() {
        let out = std::env::temp_dir().join(format!("xtask-dist-test-{}", std::process::id()));
        let written = write_docs(&out).unwrap();
        for rel in ["completions/paddock.bash", "completions/_paddock", "man/paddock-run.1"] {
            let path = out.join(rel);
            assert!(written.contains(&path), "{rel} not reported");
            assert!(std::fs::metadata(&path).unwrap().len() > 0, "{rel} is empty");
        }
        std::fs::remove_dir_all(&out).unwrap();
    }
}
