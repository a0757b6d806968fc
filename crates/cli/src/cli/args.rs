//! The command line: `paddock run`, `plan`, `check`, and the hidden supervisor entry.
//!
//! The flags of `run` are a contract that tools outside this repo rely on; add to them,
//! never change them.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Run one command with exactly the files, network and sockets its policy grants, and say
/// afterwards what it was denied.
#[derive(Debug, Parser)]
#[command(name = "paddock", version, about, max_term_width = 100)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run PROGRAM sandboxed.
    Run(RunArgs),
    /// Print the resolved policy and the plan for PROGRAM without running it.
    Plan(PlanArgs),
    /// Probe the host: what paddock can enforce and itemize here, and how to fix what is missing
    /// (with `--project`: a project under its policy instead).
    Check(CheckArgs),
    /// Run PROGRAM traced under a permissive policy and propose a `paddock.toml` for it.
    Learn(LearnArgs),
}

/// Flags shared by `run` and `plan`.
#[derive(Debug, Args, Clone, Default)]
pub struct PolicyArgs {
    /// The project directory: relative grants anchor here (default: the current directory).
    #[arg(short = 'C', long = "project", value_name = "DIR")]
    pub project: Option<PathBuf>,
    /// The config file (default: DIR/paddock.toml if present, else the built-in default
    /// policy). A `.json` file is read as sandbox-runtime settings.
    #[arg(short = 'c', long = "config", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Also allow reading P (under a deny anchor).
    #[arg(long = "allow-read", value_name = "P")]
    pub allow_read: Vec<OsString>,
    /// Also allow writing P.
    #[arg(long = "allow-write", value_name = "P")]
    pub allow_write: Vec<OsString>,
    /// A write grant may cover the home directory (`allow.write-home`); a warning says so.
    #[arg(long = "allow-write-home")]
    pub allow_write_home: bool,
    /// Also hide P (a read-deny anchor).
    #[arg(long = "deny-read", value_name = "P")]
    pub deny_read: Vec<OsString>,
    /// Network: off, on, or a comma-separated list of destinations (`NAME` grants ports 80
    /// and 443, `NAME:PORT` that port, `NAME:*` every port).
    #[arg(long = "network", value_name = "off|on|DOMAIN[,DOMAIN...]")]
    pub network: Option<String>,
    /// Allow unix-domain sockets.
    #[arg(long = "allow-unix-sockets")]
    pub allow_unix_sockets: bool,
    /// Allow connecting to the unix socket at P (repeatable; `$VAR` is expanded), and to no
    /// other (`allow.unix-sockets = [P]`).
    #[arg(long = "allow-unix-socket", value_name = "P")]
    pub allow_unix_socket: Vec<OsString>,
    /// Make a server the task starts on 127.0.0.1:PORT reachable from the host at
    /// 127.0.0.1:PORT (`allow.local-ports`).
    #[arg(long = "allow-local-port", value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    pub allow_local_port: Vec<u16>,
    /// Let the task reach the host's 127.0.0.1:PORT while its network is otherwise off
    /// (`allow.host-ports`).
    #[arg(long = "allow-host-port", value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    pub allow_host_port: Vec<u16>,
    /// How denials are itemized.
    #[arg(long = "itemize", value_enum)]
    pub itemize: Option<ItemizeArg>,
    /// The backend (default: the one for this OS).
    #[arg(long = "backend", value_enum)]
    pub backend: Option<BackendArg>,
}

/// `--itemize`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ItemizeArg {
    /// observe, else strace, else off.
    Auto,
    /// The observing FUSE mount and seccomp notifications.
    Observe,
    /// strace at every syscall stop: slower than `auto`'s `--seccomp-bpf`, and it also
    /// shows the calls the seccomp filter refuses (`socket(AF_UNIX)`).
    Strace,
    /// Enforce only.
    Off,
}

impl From<ItemizeArg> for paddock_policy::ItemizeMode {
    fn from(arg: ItemizeArg) -> Self {
        match arg {
            ItemizeArg::Auto => Self::Auto,
            ItemizeArg::Observe => Self::Observe,
            ItemizeArg::Strace => Self::Strace,
            ItemizeArg::Off => Self::Off,
        }
    }
}

/// `--backend`.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum BackendArg {
    /// bubblewrap + seccomp (Linux).
    LinuxBwrap,
    /// sandbox-exec (macOS).
    MacosSeatbelt,
}

/// `paddock run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The policy.
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Kill the task after SECS seconds (exit 124).
    #[arg(long = "timeout", value_name = "SECS")]
    pub timeout: Option<f64>,
    /// Write a JSON report of the run and its violations to FILE.
    #[arg(long = "report", value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// The program and its arguments (PATH lookup happens inside the sandbox).
    #[arg(last = true, required = true, value_name = "PROGRAM")]
    pub command: Vec<OsString>,
}

/// `paddock plan`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The policy.
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Print JSON.
    #[arg(long = "json")]
    pub json: bool,
    /// The program and its arguments (default: `true`).
    #[arg(last = true, value_name = "PROGRAM")]
    pub command: Vec<OsString>,
}

/// `paddock check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Print JSON.
    #[arg(long = "json")]
    pub json: bool,
    /// Check the project in DIR (default: the current directory) under its policy instead
    /// of the host: files hidden by `deny.read` that are hard-linked elsewhere in it.
    #[arg(long = "project", value_name = "DIR", num_args = 0..=1, default_missing_value = ".")]
    pub project: Option<PathBuf>,
    /// With `--project`: the config file (default: DIR/paddock.toml if present).
    #[arg(short = 'c', long = "config", value_name = "FILE", requires = "project")]
    pub config: Option<PathBuf>,
}

/// `paddock learn`.
#[derive(Debug, Args)]
pub struct LearnArgs {
    /// The project directory (default: the current directory). The task may write only here
    /// while paddock learns.
    #[arg(short = 'C', long = "project", value_name = "DIR")]
    pub project: Option<PathBuf>,
    /// Write the proposed policy to FILE (default: stdout, after the task's output).
    #[arg(long = "output", short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Let the task use the host's network while paddock learns.
    #[arg(long = "network")]
    pub network: bool,
    /// The program and its arguments.
    #[arg(last = true, required = true, value_name = "PROGRAM")]
    pub command: Vec<OsString>,
}
