//! The built-in default policy, used when a project has no config, and the base every
//! config file is laid over.
//!
//! Reads everywhere except the well-known secret locations of the home directory; writes
//! only in the project directory (plus the private `/tmp` every task gets); network off; no
//! unix sockets; protected names read-only. Keys a config sets replace the default's value
//! for that key; the secret list stays unless `deny.builtin-secrets = false`.

use std::ffi::OsString;

use crate::model::{Entry, PathSpec, Policy};
use crate::origin::Origin;

/// Secret locations under the home directory, hidden by default (`deny.builtin-secrets`).
pub const BUILTIN_SECRETS: &[&str] = &[
    "~/.ssh",
    "~/.gnupg",
    "~/.aws",
    "~/.azure",
    "~/.config/gcloud",
    "~/.config/gh",
    "~/.config/hub",
    "~/.config/op",
    "~/.config/doctl",
    "~/.config/heroku",
    "~/.kube",
    "~/.docker",
    "~/.netrc",
    "~/.git-credentials",
    "~/.config/git/credentials",
    "~/.npmrc",
    "~/.pypirc",
    "~/.cargo/credentials",
    "~/.cargo/credentials.toml",
    "~/.gem/credentials",
    "~/.terraform.d/credentials.tfrc.json",
    "~/.vault-token",
    "~/.password-store",
    "~/.local/share/keyrings",
    "~/.mozilla",
    "~/.config/google-chrome",
    "~/.config/chromium",
    "~/.bash_history",
    "~/.zsh_history",
    "~/.python_history",
    "~/.psql_history",
    "~/.mysql_history",
    "~/.pgpass",
    "~/.my.cnf",
    "~/.claude.json",
    "~/.config/anthropic",
    "~/.config/openai",
    "~/Library/Keychains",
    "~/Library/Cookies",
];

/// The default policy: see the module doc.
pub fn default_policy() -> Policy {
    let mut policy = Policy::default();
    policy.allow.write =
        vec![Entry::new(PathSpec(OsString::from(".")), Origin::default_key("allow.write[0]"))];
    policy
}

/// The builtin secret anchors as policy entries.
pub(crate) fn builtin_secret_entries() -> Vec<Entry<PathSpec>> {
    BUILTIN_SECRETS
        .iter()
        .enumerate()
        .map(|(i, s)| {
            Entry::new(
                PathSpec(OsString::from(s)),
                Origin::default_key(format!("deny.builtin-secrets[{i}]")),
            )
        })
        .collect()
}
