//! The protected names: files and directories that stay read-only inside every write grant,
//! even before they exist (DESIGN decision 8).
//!
//! Each is a place that something outside the sandbox later executes or trusts: git hooks
//! and config, shell start-up files, editor task files, agent and package-manager configs,
//! paddock's own config. A task that could write one could run code outside its sandbox the
//! next time the user opens a shell or commits. The list is extended from the peers' lists
//! with the persistence paths of security cases FSW-02, FSW-08 and FSW-12.

/// One protected name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProtectedName {
    /// The path relative to where it applies, `/`-separated.
    pub name: &'static str,
    /// Whether a placeholder for it is a directory.
    pub dir: bool,
    /// Where it applies.
    pub scope: Scope,
    /// Why it is protected, for `paddock plan` and docs.
    pub why: &'static str,
}

/// Where a protected name applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    /// In the project dir and in every writable directory that is a git work tree (has a
    /// `.git`), and in the home dir when it is writable.
    Repo,
    /// In the home dir, when a write grant covers it.
    Home,
}

const fn file(name: &'static str, why: &'static str) -> ProtectedName {
    ProtectedName { name, dir: false, scope: Scope::Repo, why }
}

const fn dir(name: &'static str, why: &'static str) -> ProtectedName {
    ProtectedName { name, dir: true, scope: Scope::Repo, why }
}

const fn home_file(name: &'static str, why: &'static str) -> ProtectedName {
    ProtectedName { name, dir: false, scope: Scope::Home, why }
}

const fn home_dir(name: &'static str, why: &'static str) -> ProtectedName {
    ProtectedName { name, dir: true, scope: Scope::Home, why }
}

/// The built-in list. `protected.writable` may name entries of it to lift them.
pub const PROTECTED_NAMES: &[ProtectedName] = &[
    dir(".git/hooks", "git runs hooks on the host"),
    file(".git/config", "git config can name programs git runs (core.fsmonitor, aliases)"),
    home_file(".gitconfig", "git config can name programs git runs"),
    file(".gitmodules", "submodule URLs and update commands"),
    file(".bashrc", "shell start-up"),
    file(".bash_profile", "shell start-up"),
    file(".bash_login", "shell start-up"),
    file(".bash_logout", "shell exit"),
    file(".profile", "shell start-up"),
    file(".zshrc", "shell start-up"),
    file(".zshenv", "shell start-up"),
    file(".zprofile", "shell start-up"),
    home_file(".zlogin", "shell start-up"),
    home_file(".inputrc", "readline start-up"),
    home_dir(".config/fish", "shell start-up"),
    home_dir(".config/git", "git config"),
    home_dir(".config/autostart", "desktop session start-up"),
    home_dir(".config/systemd", "user services"),
    home_dir(".local/bin", "commands found in PATH before the system's"),
    home_dir(".ssh", "ssh keys, authorized_keys and ProxyCommand"),
    home_file(".npmrc", "npm config can run scripts and set registries"),
    home_file(".pypirc", "package index credentials"),
    home_dir(".config/pip", "pip config"),
    home_file(".cargo/config.toml", "cargo config can replace the linker and rustc"),
    home_file(".cargo/config", "cargo config can replace the linker and rustc"),
    file(".mcp.json", "agent tool servers"),
    dir(".claude", "agent config and commands"),
    dir(".codex", "agent config"),
    dir(".agents", "agent config"),
    dir(".vscode", "editor tasks run on open"),
    dir(".idea", "editor run configurations"),
    home_file(".ripgreprc", "ripgrep config"),
    home_dir("Library/LaunchAgents", "macOS user agents"),
    file("paddock.toml", "paddock's own policy"),
    dir(".paddock", "paddock's own state"),
];
