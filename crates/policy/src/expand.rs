//! Environment references in `allow.unix-sockets` entries (`"$SSH_AUTH_SOCK"`,
//! `"${XDG_RUNTIME_DIR}/docker.sock"`), expanded from the runner's environment when the
//! policy is resolved.

use std::ffi::{OsStr, OsString};

/// Why an entry could not be expanded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExpandError {
    /// A `$` not followed by a name or a closed `{name}`.
    Malformed,
    /// The variable is not set, or empty (the entry then grants nothing).
    Unset(String),
}

/// Expands every `$NAME` and `${NAME}` of `text` from `env` (the last value of a name
/// wins, as in a process's environment).
pub fn expand(text: &OsStr, env: &[(OsString, OsString)]) -> Result<OsString, ExpandError> {
    let bytes = text.as_encoded_bytes();
    if !bytes.contains(&b'$') {
        return Ok(text.to_owned());
    }
    let name_char =
        |b: u8, first: bool| b == b'_' || b.is_ascii_alphabetic() || (!first && b.is_ascii_digit());
    let mut out: Vec<u8> = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'$' {
            out.push(bytes[i]);
            i += 1;
            continue;
        }
        let (start, braced) =
            if bytes.get(i + 1) == Some(&b'{') { (i + 2, true) } else { (i + 1, false) };
        let mut end = start;
        while end < bytes.len() && name_char(bytes[end], end == start) {
            end += 1;
        }
        if end == start || (braced && bytes.get(end) != Some(&b'}')) {
            return Err(ExpandError::Malformed);
        }
        let name = String::from_utf8_lossy(&bytes[start..end]).into_owned();
        let value = env
            .iter()
            .rev()
            .find(|(k, _)| k.as_encoded_bytes() == name.as_bytes())
            .map(|(_, v)| v)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| ExpandError::Unset(name.clone()))?;
        out.extend_from_slice(value.as_encoded_bytes());
        i = if braced { end + 1 } else { end };
    }
    Ok(os_from(out))
}

#[cfg(unix)]
fn os_from(bytes: Vec<u8>) -> OsString {
    use std::os::unix::ffi::OsStringExt;
    OsString::from_vec(bytes)
}

#[cfg(not(unix))]
fn os_from(bytes: Vec<u8>) -> OsString {
    OsString::from(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> Vec<(OsString, OsString)> {
        vec![
            ("SSH_AUTH_SOCK".into(), "/tmp/ssh-x/agent.1".into()),
            ("XDG_RUNTIME_DIR".into(), "/run/user/1000".into()),
            ("EMPTY".into(), "".into()),
        ]
    }

    #[test]
    fn references_expand_from_the_runners_environment() {
        let x = |t: &str| expand(OsStr::new(t), &env());
        assert_eq!(x("$SSH_AUTH_SOCK"), Ok("/tmp/ssh-x/agent.1".into()));
        assert_eq!(x("${XDG_RUNTIME_DIR}/docker.sock"), Ok("/run/user/1000/docker.sock".into()));
        assert_eq!(
            x("$XDG_RUNTIME_DIR/podman/podman.sock"),
            Ok("/run/user/1000/podman/podman.sock".into())
        );
        assert_eq!(x("/run/docker.sock"), Ok("/run/docker.sock".into()));
        assert_eq!(x("$NOPE"), Err(ExpandError::Unset("NOPE".into())));
        assert_eq!(x("$EMPTY/x"), Err(ExpandError::Unset("EMPTY".into())));
        assert_eq!(x("/a/$"), Err(ExpandError::Malformed));
        assert_eq!(x("${SSH_AUTH_SOCK"), Err(ExpandError::Malformed));
        assert_eq!(x("$1"), Err(ExpandError::Malformed));
    }
}
