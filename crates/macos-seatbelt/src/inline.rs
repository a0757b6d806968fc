//! The few values written into the profile text itself, and the check each passes first.
//!
//! Paths never are (see [`params`](crate::params)). What is inlined is a mach service name
//! (`(global-name "...")` takes no parameter in every macOS release paddock supports) and the
//! log tag paddock makes itself. A value that could end the string or the expression it
//! sits in is **refused, never escaped** (DESIGN decision 9, security case POL-02): a quote,
//! a backslash, a paren, the block-comment opener `#|`, or any control character. On top of
//! that the value must use the alphabet of real service names, so that what is accepted is
//! small enough to review.

/// Why an inlined value was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    /// What is wrong, lowercase.
    pub message: String,
}

/// Checks the characters that could change the meaning of the profile around a string.
pub fn check_sbpl_string(value: &str) -> Result<(), Refused> {
    let bad = |what: &str| {
        Err(Refused {
            message: format!("it carries {what}, which cannot go into a seatbelt profile"),
        })
    };
    if value.chars().any(char::is_control) {
        return bad("a control character");
    }
    if value.contains('"') {
        return bad("a double quote");
    }
    if value.contains('\\') {
        return bad("a backslash");
    }
    if value.contains('(') || value.contains(')') {
        return bad("a parenthesis");
    }
    if value.contains("#|") || value.contains("|#") {
        return bad("a block-comment marker");
    }
    if value.contains(';') {
        return bad("a comment marker `;`");
    }
    Ok(())
}

/// A mach service name as a policy may grant it: `com.apple.x`, `com.example.y@Uv3`, or a
/// prefix `com.example.*`. Returns the name and whether it is a prefix.
pub fn mach_name(value: &str) -> Result<(&str, bool), Refused> {
    check_sbpl_string(value)?;
    let (name, prefix) = match value.strip_suffix('*') {
        Some(stem) => (stem, true),
        None => (value, false),
    };
    let alphabet = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '@' | '+');
    if name.is_empty() || !name.chars().all(alphabet) {
        return Err(Refused {
            message: "a mach service name uses letters, digits and `.-_@+` only, with an \
                      optional trailing `*` for a prefix"
                .to_owned(),
        });
    }
    if prefix && !name.ends_with('.') {
        return Err(Refused {
            message: "a mach service prefix ends with `.*` (a `*` inside a name is not a \
                      wildcard)"
                .to_owned(),
        });
    }
    Ok((name, prefix))
}

/// The log tag: made by paddock from a hash, checked anyway because it is inlined.
pub fn log_tag(value: &str) -> Result<&str, Refused> {
    check_sbpl_string(value)?;
    if value.is_empty() || !value.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return Err(Refused { message: "a log tag uses letters, digits and `-` only".to_owned() });
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_names_are_refused_with_the_reason() {
        let cases = [
            ("x\") (allow default", "double quote"),
            ("a\\", "backslash"),
            ("a)(allow default)", "parenthesis"),
            ("a#|", "block-comment"),
            ("a\n(allow default)", "control character"),
            ("a\0", "control character"),
            ("a;b", "comment marker"),
            ("com apple", "letters, digits"),
            ("com.apple.x*y", "letters, digits"),
            ("com.apple*", "ends with `.*`"),
            ("", "letters, digits"),
        ];
        for (value, reason) in cases {
            let got = mach_name(value).unwrap_err().message;
            assert!(got.contains(reason), "{value:?}: {got}");
        }
    }

    #[test]
    fn real_names_pass() {
        assert_eq!(mach_name("com.apple.trustd.agent"), Ok(("com.apple.trustd.agent", false)));
        assert_eq!(mach_name("com.apple.lsd.*"), Ok(("com.apple.lsd.", true)));
        assert_eq!(
            mach_name("com.apple.distributed_notifications@Uv3"),
            Ok(("com.apple.distributed_notifications@Uv3", false))
        );
    }
}
