//! Profile parameters: how user paths reach the profile without ever being part of its text.
//!
//! Every path (and every regex built from a glob) travels as `-D NAME=VALUE` on the
//! `sandbox-exec` command line and is referenced in the profile as `(param "NAME")`. Names
//! are made here, from a fixed alphabet (`A-Z`, `0-9`, `_`), so the profile text depends only
//! on the *shape* of the policy, never on the bytes of a path.
//!
//! This module also owns macOS's path aliases (security case MAC-05): `/tmp`, `/var` and
//! `/etc` are symlinks into `/private`, and seatbelt matches the path the kernel resolved,
//! so a rule about `/tmp/x` must be written about `/private/tmp/x`.

use std::ffi::{OsStr, OsString};

use paddock_policy::{AbsPathBuf, DisplayBytes};

/// The symlinks at the root of a macOS system volume and where they point.
const ROOT_ALIASES: [(&str, &str); 3] =
    [("/tmp", "/private/tmp"), ("/var", "/private/var"), ("/etc", "/private/etc")];

/// The path seatbelt sees for `path`: the root aliases resolved. Idempotent.
pub fn canonical(path: &AbsPathBuf) -> AbsPathBuf {
    for (alias, target) in ROOT_ALIASES {
        let alias = AbsPathBuf::new_lexical(alias).unwrap_or_else(AbsPathBuf::root);
        if let Some(rest) = path.strip_prefix(&alias) {
            let target = AbsPathBuf::new_lexical(target).unwrap_or_else(AbsPathBuf::root);
            return if rest.as_os_str().is_empty() { target } else { target.join(rest) };
        }
    }
    path.clone()
}

/// The spellings a rule about `path` is written for: the canonical one first and, when it
/// differs, the spelling given. The second one matches nothing on a stock system (the kernel
/// reports `/private/tmp/x`, never `/tmp/x`); it is kept so that a deny also holds on a system
/// where the alias is a real directory, and so that the parameters show what the policy said.
pub fn spellings(path: &AbsPathBuf) -> Vec<AbsPathBuf> {
    let canon = canonical(path);
    if &canon == path { vec![canon] } else { vec![canon, path.clone()] }
}

/// One `-D` parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    /// The name, `[A-Z0-9_]+`.
    pub name: String,
    /// The value, byte-exact.
    pub value: OsString,
}

/// The parameters of one profile, in the order they were added.
#[derive(Clone, Debug, Default)]
pub struct Params {
    list: Vec<Param>,
}

/// A parameter value that cannot travel in argv.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadValue {
    /// The parameter's name.
    pub name: String,
    /// The value, escaped for display.
    pub value: String,
}

impl Params {
    /// An empty list.
    pub fn new() -> Params {
        Params::default()
    }

    /// Adds `NAME=value` and returns the profile expression `(param "NAME")`.
    ///
    /// Refuses a value with a NUL byte: argv cannot carry it, and a truncated path would
    /// name a different file than the policy did.
    pub fn add(&mut self, name: String, value: &OsStr) -> Result<String, BadValue> {
        debug_assert!(is_param_name(&name), "parameter names are made by this crate");
        if value.as_encoded_bytes().contains(&0) {
            return Err(BadValue { name, value: DisplayBytes(value).to_string() });
        }
        let expr = format!("(param \"{name}\")");
        self.list.push(Param { name, value: value.to_os_string() });
        Ok(expr)
    }

    /// Adds one parameter per spelling of `path` (see [`spellings`]), named `NAME` and
    /// `NAME_AS_GIVEN`, and returns `(FILTER (param "NAME")) ...` for each.
    pub fn add_path(
        &mut self,
        name: &str,
        path: &AbsPathBuf,
        filter: &str,
    ) -> Result<Vec<String>, BadValue> {
        let mut out = Vec::new();
        for (i, spelling) in spellings(path).into_iter().enumerate() {
            let pname = if i == 0 { name.to_owned() } else { format!("{name}_AS_GIVEN") };
            let expr = self.add(pname, spelling.as_os_str())?;
            out.push(format!("({filter} {expr})"));
        }
        Ok(out)
    }

    /// Consumes the list.
    pub fn into_vec(self) -> Vec<Param> {
        self.list
    }
}

/// Whether `name` uses only the parameter alphabet.
pub fn is_param_name(name: &str) -> bool {
    !name.is_empty()
        && name.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn abs(p: &str) -> AbsPathBuf {
        AbsPathBuf::new_lexical(p).unwrap()
    }

    #[test]
    fn aliases_resolve_at_component_boundaries_only() {
        assert_eq!(canonical(&abs("/tmp")), abs("/private/tmp"));
        assert_eq!(canonical(&abs("/tmp/w/x")), abs("/private/tmp/w/x"));
        assert_eq!(canonical(&abs("/var/folders/x")), abs("/private/var/folders/x"));
        assert_eq!(canonical(&abs("/etc/hosts")), abs("/private/etc/hosts"));
        assert_eq!(canonical(&abs("/tmpfoo")), abs("/tmpfoo"));
        assert_eq!(canonical(&abs("/private/tmp/a")), abs("/private/tmp/a"));
        assert_eq!(canonical(&abs("/Users/u/tmp")), abs("/Users/u/tmp"));
    }

    #[test]
    fn both_spellings_when_aliased() {
        assert_eq!(spellings(&abs("/tmp/sec")), vec![abs("/private/tmp/sec"), abs("/tmp/sec")]);
        assert_eq!(spellings(&abs("/Users/u")), vec![abs("/Users/u")]);
    }

    #[test]
    fn nul_is_refused_with_the_name() {
        use std::os::unix::ffi::OsStrExt;
        let mut params = Params::new();
        let err = params.add("WRITE_0".into(), OsStr::from_bytes(b"/a\0b")).unwrap_err();
        assert_eq!(err.name, "WRITE_0");
        assert_eq!(err.value, "/a\\u{0}b");
    }
}
