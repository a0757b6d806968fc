//! The task's environment, built from the runner's by the policy's `env` rules.
//!
//! Deny by default: a variable reaches the task only if it is on the built-in safe list or
//! the policy's `env.pass`. Secret-looking names (`*_TOKEN`, `AWS_*`, `SSH_AUTH_SOCK` ...)
//! are never passed by a pattern, only by naming them exactly (ENV-01). `env.set` then sets
//! fixed values and `env.unset` removes names. The backend adds its own variables (`TMPDIR`,
//! proxy settings) after this.

use std::ffi::OsString;

use crate::model::EnvRules;

/// Passed by default: what programs need to behave normally, and nothing that authenticates.
pub const SAFE_NAMES: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TERM",
    "COLORTERM",
    "NO_COLOR",
    "FORCE_COLOR",
    "CLICOLOR",
    "TZ",
    "EDITOR",
    "VISUAL",
    "PAGER",
    "CI",
    "DEBIAN_FRONTEND",
    "RUST_BACKTRACE",
    "RUST_LOG",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "CARGO_TERM_*",
    "GOPATH",
    "GOROOT",
    "GOFLAGS",
    "GOCACHE",
    "GOMODCACHE",
    "NODE_ENV",
    "NODE_OPTIONS",
    "NPM_CONFIG_CACHE",
    "PYTHONPATH",
    "PYTHONDONTWRITEBYTECODE",
    "PYTHONUNBUFFERED",
    "VIRTUAL_ENV",
    "JAVA_HOME",
    "MAVEN_OPTS",
    "CC",
    "CXX",
    "CFLAGS",
    "CXXFLAGS",
    "LDFLAGS",
    "CPPFLAGS",
    "PKG_CONFIG_PATH",
    "MAKEFLAGS",
    "XDG_CONFIG_HOME",
    "XDG_CACHE_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "SOURCE_DATE_EPOCH",
];

/// Names never passed by a pattern (including the safe list's): they authenticate or reach
/// an agent or session bus outside the sandbox.
const SECRET_PATTERNS: &[&str] = &[
    "*_TOKEN",
    "*_TOKEN_*",
    "*TOKEN",
    "*_SECRET",
    "*_SECRET_*",
    "*SECRET*",
    "*_KEY",
    "*_KEY_*",
    "*PASSWORD*",
    "*PASSWD*",
    "*_PASS",
    "*CREDENTIAL*",
    "*_AUTH",
    "*_AUTH_*",
    "*COOKIE*",
    "*SESSION*",
    "AWS_*",
    "AZURE_*",
    "GOOGLE_*",
    "GCLOUD_*",
    "GCP_*",
    "GITHUB_*",
    "GH_*",
    "GITLAB_*",
    "ANTHROPIC_*",
    "OPENAI_*",
    "HF_*",
    "HUGGING*",
    "NPM_TOKEN",
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "GPG_AGENT_INFO",
    "GNUPGHOME",
    "DBUS_SESSION_BUS_ADDRESS",
    "KUBECONFIG",
    "DOCKER_HOST",
    "DOCKER_CONFIG",
    "VAULT_*",
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "XAUTHORITY",
    "XDG_RUNTIME_DIR",
    "*_PROXY",
    "*_proxy",
    "JAVA_TOOL_OPTIONS",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "PADDOCK_*",
    "BASH_ENV",
    "ENV",
    "PROMPT_COMMAND",
];

/// Whether a variable name looks like a secret (or otherwise must not be passed by a
/// pattern).
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_PATTERNS.iter().any(|p| glob_name(p, name) || glob_name(p, &upper))
}

/// Matches `*` anywhere in a name pattern. Without allocating: every variable of the
/// runner's environment is matched against every safe and secret pattern.
fn glob_name(pattern: &str, name: &str) -> bool {
    let Some((first, after)) = pattern.split_once('*') else { return pattern == name };
    let (middle, last) = after.rsplit_once('*').unwrap_or(("", after));
    if name.len() < first.len() + last.len() || !name.starts_with(first) || !name.ends_with(last) {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for mid in middle.split('*').filter(|m| !m.is_empty()) {
        match rest.find(mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    true
}

/// Builds the task environment from the runner's (`host`) by the rules. Order follows
/// `host`, then `set` in name order.
pub fn build_env(rules: &EnvRules, host: &[(OsString, OsString)]) -> Vec<(OsString, OsString)> {
    let mut out: Vec<(OsString, OsString)> = Vec::new();
    for (name, value) in host {
        let Some(n) = name.to_str() else { continue };
        if n.is_empty() || n.contains('=') {
            continue;
        }
        let exact = rules.pass.iter().any(|p| p.value == n);
        let by_pattern = SAFE_NAMES.iter().any(|p| glob_name(p, n))
            || rules.pass.iter().any(|p| p.value.contains('*') && glob_name(&p.value, n));
        let removed = rules.unset.iter().any(|p| glob_name(&p.value, n));
        if !removed && (exact || (by_pattern && !is_secret_name(n))) {
            out.push((name.clone(), value.clone()));
        }
    }
    for (name, value) in &rules.set {
        if rules.unset.iter().any(|p| glob_name(&p.value, name)) {
            continue;
        }
        out.retain(|(n, _)| n != name.as_str());
        out.push((OsString::from(name), OsString::from(&value.value)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Entry;
    use crate::origin::Origin;

    fn host(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs.iter().map(|(k, v)| (OsString::from(k), OsString::from(v))).collect()
    }

    fn names(env: &[(OsString, OsString)]) -> Vec<String> {
        env.iter().map(|(k, _)| k.to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn secrets_are_not_passed_by_default_or_by_pattern() {
        let h = host(&[
            ("PATH", "/bin"),
            ("AWS_SECRET_ACCESS_KEY", "x"),
            ("GITHUB_TOKEN", "x"),
            ("CANARY_TOKEN", "x"),
            ("SSH_AUTH_SOCK", "/s"),
            ("KUBECONFIG", "/k"),
            ("MY_API_KEY", "x"),
            ("LC_ALL", "C"),
        ]);
        let mut rules = EnvRules::default();
        assert_eq!(names(&build_env(&rules, &h)), ["PATH", "LC_ALL"]);
        rules.pass.push(Entry::new("*".to_owned(), Origin::flag("test")));
        assert_eq!(names(&build_env(&rules, &h)), ["PATH", "LC_ALL"]);
        rules.pass.push(Entry::new("GITHUB_TOKEN".to_owned(), Origin::flag("test")));
        assert_eq!(names(&build_env(&rules, &h)), ["PATH", "GITHUB_TOKEN", "LC_ALL"]);
    }

    #[test]
    fn set_and_unset_apply_after_pass() {
        let h = host(&[("PATH", "/bin"), ("HOME", "/h")]);
        let mut rules = EnvRules::default();
        rules.set.insert("PATH".to_owned(), Entry::new("/opt/bin".to_owned(), Origin::flag("t")));
        rules.unset.push(Entry::new("HOME".to_owned(), Origin::flag("t")));
        let env = build_env(&rules, &h);
        assert_eq!(env, host(&[("PATH", "/opt/bin")]));
    }

    #[test]
    fn glob_names() {
        assert!(glob_name("*", ""));
        assert!(glob_name("A*B*C", "AxxBxxC") && glob_name("A*B*C", "ABC"));
        assert!(!glob_name("A*B*C", "AC") && !glob_name("A*B*C", "ACB"));
        assert!(glob_name("A**C", "AC") && !glob_name("AB*BC", "ABC"));
        assert!(glob_name("*_TOKEN", "NPM_TOKEN"));
        assert!(!glob_name("*_TOKEN", "TOKEN"));
        assert!(glob_name("LC_*", "LC_ALL"));
        assert!(glob_name("*SECRET*", "MYSECRETX"));
        assert!(!glob_name("AWS_*", "XAWS_"));
    }
}
