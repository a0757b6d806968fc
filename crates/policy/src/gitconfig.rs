//! The keys of a git config file that make git run a program on the host.
//!
//! A repository the task creates in the project is reported with every such key
//! (`core.fsmonitor`, `core.hooksPath`, `filter.*.smudge`, `!` aliases, includes, ...), so
//! that the user knows what `git status` there would run. This reads git's config syntax
//! (sections, `[section "sub"]`, the old `[section.sub]`, quoted values, `\` line
//! continuations, `#`/`;` comments) far enough to name keys; it never interprets values
//! beyond an alias's leading `!`.

/// A key that names a program. `*` stands for any subsection.
const PROGRAM_KEYS: &[&str] = &[
    "core.fsmonitor",
    "core.hookspath",
    "core.sshcommand",
    "core.gitproxy",
    "core.editor",
    "core.pager",
    "core.askpass",
    "core.alternaterefscommand",
    "core.worktree",
    "sequence.editor",
    "diff.external",
    "diff.*.textconv",
    "diff.*.command",
    "merge.*.driver",
    "filter.*.clean",
    "filter.*.smudge",
    "filter.*.process",
    "credential.helper",
    "credential.*.helper",
    "gpg.program",
    "gpg.*.program",
    "gpg.ssh.defaultkeycommand",
    "include.path",
    "includeif.*.path",
    "uploadpack.packobjectshook",
    "remote.*.uploadpack",
    "remote.*.receivepack",
    "remote.*.vcs",
    "hook.*.command",
    "difftool.*.cmd",
    "mergetool.*.cmd",
    "man.*.cmd",
    "browser.*.cmd",
    "web.browser",
    "trailer.*.command",
    "trailer.*.cmd",
    "interactive.difffilter",
    "imap.tunnel",
    "sendemail.smtpserver",
    "sendemail.*.smtpserver",
    "guitool.*.cmd",
];

/// Sections whose every key names a program unless its value is a boolean: `pager.log = sh
/// -c ...` pipes `git log` into it, `pager.log = true` only turns the default pager on.
const PROGRAM_SECTIONS: &[&str] = &["pager."];

/// The values git reads as booleans.
const BOOLEANS: &[&str] = &["true", "false", "yes", "no", "on", "off", "1", "0", ""];

/// One `key = value` of a config file: the key as `section[.subsection].name` (section and
/// name lowercased, as git compares them) and the raw value (`None` for a bare key).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigEntry {
    /// `section.name` or `section.subsection.name`.
    pub key: String,
    /// The value with quotes and escapes removed, if the key has one.
    pub value: Option<String>,
}

/// The entries of a git config file, in order. Lines git would reject are skipped.
pub fn config_entries(text: &[u8]) -> Vec<ConfigEntry> {
    let text = String::from_utf8_lossy(text);
    let mut out = Vec::new();
    let mut section = String::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let mut line = line.trim_start().to_owned();
        // Continuations: a value ending in an unescaped backslash goes on.
        while line.ends_with('\\') && !line.ends_with("\\\\") {
            line.pop();
            match lines.next() {
                Some(next) => line.push_str(next),
                None => break,
            }
        }
        let rest = line.trim_start();
        if rest.is_empty() || rest.starts_with('#') || rest.starts_with(';') {
            continue;
        }
        let rest = if rest.starts_with('[') {
            let Some(end) = rest.find(']') else { continue };
            section = section_name(&rest[1..end]);
            rest[end + 1..].trim_start()
        } else {
            rest
        };
        if rest.is_empty() || rest.starts_with('#') || rest.starts_with(';') || section.is_empty() {
            continue;
        }
        let (name, value) = match rest.find('=') {
            Some(eq) => (rest[..eq].trim(), Some(unquote(rest[eq + 1..].trim()))),
            None => (rest.split(['#', ';']).next().unwrap_or("").trim(), None),
        };
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            continue;
        }
        out.push(ConfigEntry { key: format!("{section}.{}", name.to_ascii_lowercase()), value });
    }
    out
}

/// `core`, `remote "origin"` or the old `remote.origin` to `core` / `remote.origin`.
fn section_name(header: &str) -> String {
    let header = header.trim();
    match header.find('"') {
        Some(q) => {
            let name = header[..q].trim().to_ascii_lowercase();
            let sub = header[q + 1..].trim_end_matches('"').replace("\\\"", "\"");
            format!("{name}.{sub}")
        }
        None => match header.split_once('.') {
            Some((name, sub)) => {
                format!("{}.{}", name.to_ascii_lowercase(), sub.to_ascii_lowercase())
            }
            None => header.to_ascii_lowercase(),
        },
    }
}

/// A value without its quotes, escapes and trailing comment.
fn unquote(value: &str) -> String {
    let mut out = String::new();
    let mut quoted = false;
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => quoted = !quoted,
            '\\' => match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(other) => out.push(other),
                None => {}
            },
            '#' | ';' if !quoted => break,
            _ => out.push(c),
        }
    }
    out.trim_end().to_owned()
}

/// Whether `key` (from [`config_entries`]) matches `pattern` (`*` one subsection, which may
/// itself hold dots).
fn key_matches(key: &str, pattern: &str) -> bool {
    match pattern.split_once(".*.") {
        None => key == pattern,
        Some((section, name)) => {
            key.len() > section.len() + name.len() + 2
                && key.starts_with(section)
                && key[section.len()..].starts_with('.')
                && key.ends_with(name)
                && key[..key.len() - name.len()].ends_with('.')
        }
    }
}

/// The keys of a config file that make git run a program (or read more config that may),
/// each once, in file order: `core.fsmonitor`, `alias.x` (only with a `!` value),
/// `submodule.x.update` (only with a `!` value), `include.path`, ...
pub fn program_keys(text: &[u8]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for entry in config_entries(text) {
        let bang = entry.value.as_deref().is_some_and(|v| v.trim_start().starts_with('!'));
        let named = if entry.key.starts_with("alias.")
            || (entry.key.starts_with("submodule.") && entry.key.ends_with(".update"))
        {
            bang
        } else {
            PROGRAM_KEYS.iter().any(|p| key_matches(&entry.key, p))
                || (PROGRAM_SECTIONS
                    .iter()
                    .any(|s| entry.key.strip_prefix(s).is_some_and(|name| !name.contains('.')))
                    && entry.value.as_deref().is_some_and(|v| {
                        !BOOLEANS.contains(&v.trim().to_ascii_lowercase().as_str())
                    }))
        };
        if named && !out.contains(&entry.key) {
            out.push(entry.key);
        }
    }
    out
}

/// Whether a config sets `extensions.worktreeConfig` to true: git then reads
/// `config.worktree` too.
pub fn worktree_config(text: &[u8]) -> bool {
    config_entries(text).iter().rev().find(|e| e.key == "extensions.worktreeconfig").is_some_and(
        |e| match e.value.as_deref().map(str::to_ascii_lowercase).as_deref() {
            None => true,
            Some("true" | "yes" | "on" | "1") => true,
            Some(_) => false,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_that_run_programs_are_named_in_file_order() {
        let text = br#"
[core]
	repositoryformatversion = 0
	fsmonitor = "sh -c 'touch /tmp/pwned'"  # planted
	hooksPath=/tmp/hooks
[alias]
	st = status
	pwn = !sh -c id
[filter "lfs"]
	smudge = git-lfs smudge -- %f
	required
[diff "bin"]
	textconv = hexdump
[includeIf "gitdir:~/x/"]
	path = ../evil.inc
[remote "origin"]
	url = https://example.com/x.git
	uploadpack = evil
[Core.sub]
	x = 1
; [core] fsmonitor = commented
[submodule "a"]
	update = !rm -rf /
[submodule "b"]
	update = checkout
[sequence]
	editor = \
	vim
[pager]
	log = sh -c 'touch /tmp/pwned' #
	status = true
	diff
[pager "x"]
	y = 1
[imap]
	tunnel = ssh evil
"#;
        assert_eq!(
            program_keys(text),
            [
                "core.fsmonitor",
                "core.hookspath",
                "alias.pwn",
                "filter.lfs.smudge",
                "diff.bin.textconv",
                "includeif.gitdir:~/x/.path",
                "remote.origin.uploadpack",
                "submodule.a.update",
                "sequence.editor",
                "pager.log",
                "imap.tunnel",
            ]
        );
    }

    #[test]
    fn a_plain_config_names_nothing() {
        let text = b"[core]\n\tbare = false\n[remote \"o\"]\n\turl = x\n\tfetch = +refs/*\n";
        assert!(program_keys(text).is_empty());
        assert!(!worktree_config(text));
    }

    #[test]
    fn worktree_config_is_read_as_git_reads_booleans() {
        assert!(worktree_config(b"[extensions]\n\tworktreeConfig = true\n"));
        assert!(worktree_config(b"[extensions]\n\tworktreeconfig\n"));
        assert!(!worktree_config(
            b"[extensions]\n\tworktreeConfig = true\n\tworktreeConfig = false\n"
        ));
    }

    #[test]
    fn a_value_with_a_comment_sign_in_quotes_keeps_it() {
        let e = config_entries(b"[alias]\n x = \"!echo #not a comment\"\n");
        assert_eq!(e[0].value.as_deref(), Some("!echo #not a comment"));
    }
}
