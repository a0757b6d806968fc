//! `paddock.toml`: the config file format, read into a [`Policy`].
//!
//! Keys are kebab-case, like Cargo's. The file is parsed into a TOML table first and walked
//! against the schema by hand, so that an unknown key is an error naming the key and the
//! nearest valid one, and a wrong value names its key path (`allow.write[2]`), the value and
//! the fix. Keys the file sets replace the built-in default for that key; keys it omits keep
//! the default. Nothing is half-applied: any error rejects the whole file.

use std::ffi::OsString;
use std::path::Path;

use toml::{Table, Value};

use crate::defaults::default_policy;
use crate::domain::DomainPattern;
use crate::error::{Error, Result};
use crate::model::{
    Entry, ItemizeMode, NetworkRule, NewRepositories, PathSpec, Policy, ProtectedDepth,
    UnixSocketsRule,
};
use crate::origin::Origin;
use crate::protected::PROTECTED_NAMES;

/// The formats [`load_str`] reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `paddock.toml`.
    Toml,
    /// Anthropic sandbox-runtime's settings JSON (converted; see `srt`).
    SrtJson,
}

/// The largest config file paddock reads; a larger one is refused (POL-01).
pub const MAX_CONFIG_BYTES: usize = 1 << 20;

/// Reads a config text into a policy on top of the built-in default. `file` is used in
/// messages only. For [`Format::SrtJson`] the conversion notes are dropped; use
/// [`crate::srt::convert`] to get them.
pub fn load_str(text: &str, file: &Path, format: Format) -> Result<Policy> {
    match format {
        Format::Toml => parse_toml(text, file),
        Format::SrtJson => crate::srt::convert(text, file).map(|(policy, _notes)| policy),
    }
}

/// The valid keys of each table, for unknown-key errors.
const TOP_KEYS: &[&str] =
    &["allow", "deny", "protected", "env", "report", "ignore", "weaker-when-nested"];
const ALLOW_KEYS: &[&str] = &[
    "read",
    "write",
    "network",
    "unix-sockets",
    "local-ports",
    "host-ports",
    "pty",
    "git-config",
    "system-info",
    "mach-lookup",
    "write-home",
];
const DENY_KEYS: &[&str] = &["read", "write", "network", "builtin-secrets"];
const PROTECTED_KEYS: &[&str] = &["writable", "extra", "depth", "new-repositories"];
const ENV_KEYS: &[&str] = &["pass", "set", "unset"];
const REPORT_KEYS: &[&str] = &["within", "linked", "itemize", "ignore"];
const REPORT_IGNORE_KEYS: &[&str] = &["unix-sockets"];
const IGNORE_KEYS: &[&str] = &["read", "write", "network", "system-info"];

/// Parses `paddock.toml` text.
pub fn parse_toml(text: &str, file: &Path) -> Result<Policy> {
    if text.len() > MAX_CONFIG_BYTES {
        return Err(Error::Invalid {
            origin: Origin::file(file, ""),
            value: format!("{} bytes", text.len()),
            message: "the config file is larger than paddock reads".to_owned(),
            fix: format!("keep it under {MAX_CONFIG_BYTES} bytes"),
        });
    }
    if text.starts_with('\u{feff}') {
        return Err(Error::Invalid {
            origin: Origin::file(file, ""),
            value: "a byte-order mark".to_owned(),
            message: "the config file starts with a byte-order mark".to_owned(),
            fix: "save it as UTF-8 without a BOM".to_owned(),
        });
    }
    let table: Table = text.parse().map_err(|e: toml::de::Error| {
        let (line, column) = e.span().map(|s| line_col(text, s.start)).unwrap_or((1, 1));
        Error::Syntax { file: file.to_path_buf(), line, column, message: e.message().to_owned() }
    })?;
    let mut policy = default_policy();
    let root = Origin::file(file, "");
    check_keys(&table, TOP_KEYS, &root)?;
    let mut reader = Reader { file };
    if let Some(v) = table.get("weaker-when-nested") {
        policy.weaker_when_nested = reader.boolean(v, &root.child("weaker-when-nested"))?;
    }
    if let Some(t) = table.get("allow") {
        let origin = root.child("allow");
        let t = reader.table(t, &origin, ALLOW_KEYS)?;
        let allow = &mut policy.allow;
        if let Some(v) = t.get("read") {
            allow.read = reader.paths(v, &origin.child("read"))?;
        }
        if let Some(v) = t.get("write") {
            allow.write = reader.paths(v, &origin.child("write"))?;
        }
        if let Some(v) = t.get("network") {
            let o = origin.child("network");
            allow.network = Entry::new(reader.network(v, &o)?, o);
        }
        if let Some(v) = t.get("unix-sockets") {
            let o = origin.child("unix-sockets");
            let rule = match v {
                Value::Boolean(false) => UnixSocketsRule::None,
                Value::Boolean(true) => UnixSocketsRule::All,
                Value::Array(_) => UnixSocketsRule::Paths(reader.paths(v, &o)?),
                other => {
                    return Err(invalid(
                        &o,
                        other,
                        "expected a boolean or a list of socket paths",
                        "write `true`, `false` or [\"/run/x.sock\"]",
                    ));
                }
            };
            allow.unix_sockets = Entry::new(rule, o);
        }
        if let Some(v) = t.get("local-ports") {
            allow.local_ports = reader.ports(v, &origin.child("local-ports"))?;
        }
        if let Some(v) = t.get("host-ports") {
            allow.host_ports = reader.ports(v, &origin.child("host-ports"))?;
        }
        if let Some(v) = t.get("pty") {
            allow.pty = reader.boolean(v, &origin.child("pty"))?;
        }
        if let Some(v) = t.get("git-config") {
            allow.git_config = reader.boolean(v, &origin.child("git-config"))?;
        }
        if let Some(v) = t.get("system-info") {
            allow.system_info = reader.boolean(v, &origin.child("system-info"))?;
        }
        if let Some(v) = t.get("write-home") {
            allow.write_home = reader.boolean(v, &origin.child("write-home"))?;
        }
        if let Some(v) = t.get("mach-lookup") {
            allow.mach_lookup = reader.strings(v, &origin.child("mach-lookup"))?;
        }
    }
    if let Some(t) = table.get("deny") {
        let origin = root.child("deny");
        let t = reader.table(t, &origin, DENY_KEYS)?;
        if let Some(v) = t.get("read") {
            policy.deny.read = reader.paths(v, &origin.child("read"))?;
        }
        if let Some(v) = t.get("write") {
            policy.deny.write = reader.paths(v, &origin.child("write"))?;
        }
        if let Some(v) = t.get("network") {
            policy.deny.network = reader.domains(v, &origin.child("network"))?;
        }
        if let Some(v) = t.get("builtin-secrets") {
            policy.deny.builtin_secrets = reader.boolean(v, &origin.child("builtin-secrets"))?;
        }
    }
    if let Some(t) = table.get("protected") {
        let origin = root.child("protected");
        let t = reader.table(t, &origin, PROTECTED_KEYS)?;
        if let Some(v) = t.get("writable") {
            let names = reader.strings(v, &origin.child("writable"))?;
            for name in &names {
                if !PROTECTED_NAMES.iter().any(|p| p.name == name.value) {
                    let nearest = nearest(&name.value, PROTECTED_NAMES.iter().map(|p| p.name));
                    return Err(Error::Invalid {
                        origin: name.origin.clone(),
                        value: format!("{:?}", name.value),
                        message: "not a protected name".to_owned(),
                        fix: match nearest {
                            Some(n) => format!(
                                "did you mean {n:?}? `paddock plan` lists the protected names"
                            ),
                            None => "`paddock plan` lists the protected names".to_owned(),
                        },
                    });
                }
            }
            policy.protected.writable = names;
        }
        if let Some(v) = t.get("extra") {
            policy.protected.extra = reader.paths(v, &origin.child("extra"))?;
        }
        if let Some(v) = t.get("depth") {
            let o = origin.child("depth");
            policy.protected.depth = match v.as_str().and_then(ProtectedDepth::parse) {
                Some(d) => d,
                None => return Err(invalid(&o, v, "not a depth", "write \"any\" or \"root\"")),
            };
        }
        if let Some(v) = t.get("new-repositories") {
            let o = origin.child("new-repositories");
            policy.protected.new_repositories = match v.as_str().and_then(NewRepositories::parse) {
                Some(n) => n,
                None => {
                    return Err(invalid(
                        &o,
                        v,
                        "not a way to handle new repositories",
                        "write \"disarm\" or \"report\"",
                    ));
                }
            };
        }
    }
    if let Some(t) = table.get("env") {
        let origin = root.child("env");
        let t = reader.table(t, &origin, ENV_KEYS)?;
        if let Some(v) = t.get("pass") {
            policy.env.pass = reader.env_names(v, &origin.child("pass"), true)?;
        }
        if let Some(v) = t.get("unset") {
            policy.env.unset = reader.env_names(v, &origin.child("unset"), true)?;
        }
        if let Some(v) = t.get("set") {
            let o = origin.child("set");
            let Value::Table(set) = v else {
                return Err(invalid(
                    &o,
                    v,
                    "expected a table of NAME = \"value\"",
                    "write set = { NAME = \"value\" }",
                ));
            };
            for (name, value) in set {
                let key = o.child(name);
                check_env_name(name, false, &key)?;
                let Value::String(text) = value else {
                    return Err(invalid(&key, value, "expected a string", "quote the value"));
                };
                if text.contains('\0') {
                    return Err(invalid(
                        &key,
                        value,
                        "an environment value cannot hold a NUL byte",
                        "remove it",
                    ));
                }
                policy.env.set.insert(name.clone(), Entry::new(text.clone(), key));
            }
        }
    }
    if let Some(t) = table.get("report") {
        let origin = root.child("report");
        let t = reader.table(t, &origin, REPORT_KEYS)?;
        if let Some(v) = t.get("within") {
            policy.report.within = reader.paths(v, &origin.child("within"))?;
        }
        if let Some(v) = t.get("linked") {
            policy.report.linked = reader.paths(v, &origin.child("linked"))?;
        }
        if let Some(v) = t.get("ignore") {
            let o = origin.child("ignore");
            let t = reader.table(v, &o, REPORT_IGNORE_KEYS)?;
            if let Some(v) = t.get("unix-sockets") {
                let o = o.child("unix-sockets");
                let list = reader.paths(v, &o)?;
                if let Some(e) =
                    list.iter().find(|e| !e.value.0.as_encoded_bytes().starts_with(b"/"))
                {
                    return Err(Error::Invalid {
                        origin: e.origin.clone(),
                        value: format!("{:?}", e.value.0.to_string_lossy()),
                        message: "not an absolute path".to_owned(),
                        fix:
                            "write the socket's absolute path (a glob such as \"/run/x/*\" is fine)"
                                .to_owned(),
                    });
                }
                policy.report.ignore_unix_sockets = list;
            }
        }
        if let Some(v) = t.get("itemize") {
            let o = origin.child("itemize");
            policy.report.itemize = match v.as_str().and_then(ItemizeMode::parse) {
                Some(mode) => mode,
                None => {
                    return Err(invalid(
                        &o,
                        v,
                        "not an itemize mode",
                        "write \"auto\", \"observe\", \"strace\" or \"off\"",
                    ));
                }
            };
        }
    }
    if let Some(t) = table.get("ignore") {
        let origin = root.child("ignore");
        let t = reader.table(t, &origin, IGNORE_KEYS)?;
        if let Some(v) = t.get("read") {
            policy.ignore.read = reader.paths(v, &origin.child("read"))?;
        }
        if let Some(v) = t.get("write") {
            policy.ignore.write = reader.paths(v, &origin.child("write"))?;
        }
        if let Some(v) = t.get("network") {
            policy.ignore.network = reader.domains(v, &origin.child("network"))?;
        }
        if let Some(v) = t.get("system-info") {
            policy.ignore.system_info = reader.strings(v, &origin.child("system-info"))?;
        }
    }
    Ok(policy)
}

struct Reader<'a> {
    #[allow(dead_code)] // Kept for messages that will need the file without an origin.
    file: &'a Path,
}

impl Reader<'_> {
    fn table<'t>(&mut self, v: &'t Value, origin: &Origin, keys: &[&str]) -> Result<&'t Table> {
        match v {
            Value::Table(t) => {
                check_keys(t, keys, origin)?;
                Ok(t)
            }
            other => Err(invalid(
                origin,
                other,
                "expected a table",
                &format!("write it as [{}]", origin.key()),
            )),
        }
    }

    fn boolean(&mut self, v: &Value, origin: &Origin) -> Result<bool> {
        v.as_bool().ok_or_else(|| {
            invalid(origin, v, "expected true or false", "write `true` or `false` without quotes")
        })
    }

    fn array<'t>(&mut self, v: &'t Value, origin: &Origin, what: &str) -> Result<&'t Vec<Value>> {
        match v {
            Value::Array(a) => Ok(a),
            other => Err(invalid(
                origin,
                other,
                &format!("expected a list of {what}"),
                "put the values in brackets, like [\"a\", \"b\"]",
            )),
        }
    }

    fn strings(&mut self, v: &Value, origin: &Origin) -> Result<Vec<Entry<String>>> {
        let items = self.array(v, origin, "strings")?;
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let o = origin.child(&format!("[{i}]"));
            match item {
                Value::String(s) if !s.is_empty() && !s.chars().any(char::is_control) => {
                    out.push(Entry::new(s.clone(), o))
                }
                Value::String(_) => {
                    return Err(invalid(
                        &o,
                        item,
                        "an empty value or one with control characters",
                        "remove it",
                    ));
                }
                other => return Err(invalid(&o, other, "expected a string", "quote the value")),
            }
        }
        Ok(out)
    }

    fn paths(&mut self, v: &Value, origin: &Origin) -> Result<Vec<Entry<PathSpec>>> {
        let items = self.array(v, origin, "paths")?;
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let o = origin.child(&format!("[{i}]"));
            let Value::String(s) = item else {
                return Err(invalid(&o, item, "expected a path string", "quote the path"));
            };
            check_path_text(s, &o)?;
            out.push(Entry::new(PathSpec(OsString::from(s)), o));
        }
        Ok(out)
    }

    fn ports(&mut self, v: &Value, origin: &Origin) -> Result<Vec<Entry<u16>>> {
        let items = self.array(v, origin, "ports")?;
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let o = origin.child(&format!("[{i}]"));
            match item.as_integer().and_then(|n| u16::try_from(n).ok()).filter(|p| *p != 0) {
                Some(p) => out.push(Entry::new(p, o)),
                None => {
                    return Err(invalid(&o, item, "not a port", "write a number from 1 to 65535"));
                }
            }
        }
        Ok(out)
    }

    fn domains(&mut self, v: &Value, origin: &Origin) -> Result<Vec<Entry<DomainPattern>>> {
        let items = self.array(v, origin, "destinations")?;
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let o = origin.child(&format!("[{i}]"));
            let Value::String(s) = item else {
                return Err(invalid(
                    &o,
                    item,
                    "expected a destination string",
                    "quote it, like \"example.com\"",
                ));
            };
            out.push(Entry::new(parse_domain(s, &o)?, o));
        }
        Ok(out)
    }

    fn network(&mut self, v: &Value, origin: &Origin) -> Result<NetworkRule> {
        match v {
            Value::Boolean(false) => Ok(NetworkRule::Off),
            Value::Boolean(true) => Ok(NetworkRule::On),
            Value::Array(_) => {
                let list = self.domains(v, origin)?;
                Ok(if list.is_empty() { NetworkRule::Off } else { NetworkRule::Domains(list) })
            }
            other => Err(invalid(
                origin,
                other,
                "expected false, true or a list of destinations",
                "write `false`, `true` or [\"example.com\", \"*.example.org:443\"]",
            )),
        }
    }

    fn env_names(
        &mut self,
        v: &Value,
        origin: &Origin,
        allow_pattern: bool,
    ) -> Result<Vec<Entry<String>>> {
        let names = self.strings(v, origin)?;
        for n in &names {
            check_env_name(&n.value, allow_pattern, &n.origin)?;
        }
        Ok(names)
    }
}

/// Parses one destination with the error attached to its key.
pub(crate) fn parse_domain(text: &str, origin: &Origin) -> Result<DomainPattern> {
    DomainPattern::parse(text).map_err(|message| Error::Invalid {
        origin: origin.clone(),
        value: format!("{text:?}"),
        message: "not a valid destination".to_owned(),
        fix: message,
    })
}

/// Refuses path text that cannot name a file safely: NUL bytes, control characters, and
/// `~user` (only `~` and `~/...` are expanded).
pub(crate) fn check_path_text(s: &str, origin: &Origin) -> Result<()> {
    let fail = |message: &str, fix: &str| Error::Invalid {
        origin: origin.clone(),
        value: format!("{s:?}"),
        message: message.to_owned(),
        fix: fix.to_owned(),
    };
    if s.is_empty() {
        return Err(fail("an empty path", "write \".\" for the project directory"));
    }
    if s.contains('\0') {
        return Err(fail("a path cannot hold a NUL byte", "remove it"));
    }
    if s.chars().any(char::is_control) {
        return Err(fail(
            "a path with control characters",
            "rename the file, or grant its directory",
        ));
    }
    if s.starts_with('~') && s != "~" && !s.starts_with("~/") {
        return Err(fail("only `~` and `~/...` are expanded", "write the path in full"));
    }
    Ok(())
}

fn check_env_name(name: &str, allow_pattern: bool, origin: &Origin) -> Result<()> {
    let body = if allow_pattern { name.strip_suffix('*').unwrap_or(name) } else { name };
    let ok = !body.is_empty() || (allow_pattern && name == "*");
    let ok = ok
        && body.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !body.starts_with(|c: char| c.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err(Error::Invalid {
            origin: origin.clone(),
            value: format!("{name:?}"),
            message: "not an environment variable name".to_owned(),
            fix: if allow_pattern {
                "write NAME or PREFIX* (letters, digits and _)".to_owned()
            } else {
                "write NAME (letters, digits and _)".to_owned()
            },
        })
    }
}

fn check_keys(table: &Table, keys: &[&str], origin: &Origin) -> Result<()> {
    for key in table.keys() {
        if !keys.contains(&key.as_str()) {
            return Err(Error::UnknownKey {
                origin: origin.clone(),
                key: key.clone(),
                suggestion: nearest(key, keys.iter().copied())
                    .map(|s| {
                        if origin.key().is_empty() {
                            s.to_owned()
                        } else {
                            format!("{}.{s}", origin.key())
                        }
                    })
                    .or_else(|| nested_suggestion(key)),
            });
        }
    }
    Ok(())
}

/// For a key misplaced at the wrong level (`network` at the top), the full key path it
/// probably meant (`allow.network`).
fn nested_suggestion(key: &str) -> Option<String> {
    let tables: [(&str, &[&str]); 6] = [
        ("allow", ALLOW_KEYS),
        ("deny", DENY_KEYS),
        ("protected", PROTECTED_KEYS),
        ("env", ENV_KEYS),
        ("report", REPORT_KEYS),
        ("ignore", IGNORE_KEYS),
    ];
    tables.iter().find_map(|(table, keys)| {
        nearest(key, keys.iter().copied()).map(|k| format!("{table}.{k}"))
    })
}

/// The candidate closest to `word`, if it is close enough to be a likely typo.
pub(crate) fn nearest<'a>(
    word: &str,
    candidates: impl Iterator<Item = &'a str>,
) -> Option<&'a str> {
    let folded = word.to_ascii_lowercase().replace('_', "-");
    candidates
        .map(|c| (strsim::damerau_levenshtein(&folded, c), c))
        .filter(|(d, c)| *d <= 2.max(c.len() / 3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

fn invalid(origin: &Origin, value: &Value, message: &str, fix: &str) -> Error {
    let shown = value.to_string();
    let shown = if shown.chars().count() > 80 {
        format!("{}...", shown.chars().take(80).collect::<String>())
    } else {
        shown
    };
    Error::Invalid {
        origin: origin.clone(),
        value: shown,
        message: message.to_owned(),
        fix: fix.to_owned(),
    }
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}
