//! Globs as seatbelt regexes (security case POL-03).
//!
//! A [`GlobRule`](paddock_policy::GlobRule) is a canonical base directory and a pattern
//! below it. The regex is anchored at both ends (`^...$`); the base's literal bytes are
//! escaped, so `/tmp/p.q+(x)[1]` matches only itself; `*` and `?` never cross `/`; `**` as a
//! whole component matches any number of components, including none (so `dir/**` and
//! `dir/**/*` both mean `dir` and everything under it). `[...]` classes and `{a,b}`
//! alternatives are supported as globset reads them, minus `/`.
//!
//! The regex reaches the profile as a parameter, so it is never parsed as SBPL; what is
//! refused here is what has no sure meaning in a path regex: control characters, bytes
//! that are not UTF-8, a backslash in the pattern (an escape in glob syntax, ambiguous)
//! and unbalanced `[` or `{`.

use std::fmt::Write as _;

/// Why a glob cannot become a regex.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GlobError {
    /// What is wrong, lowercase.
    pub message: &'static str,
}

fn err(message: &'static str) -> GlobError {
    GlobError { message }
}

/// Characters with a meaning in a POSIX extended regex (and Rust's `regex`).
const REGEX_META: &[char] =
    &['.', '^', '$', '*', '+', '?', '(', ')', '[', ']', '{', '}', '|', '\\'];

/// Appends `text` to `out` with every regex metacharacter escaped.
pub fn escape_into(out: &mut String, text: &str) {
    for c in text.chars() {
        if REGEX_META.contains(&c) {
            out.push('\\');
        }
        out.push(c);
    }
}

/// The anchored regex for paths under `base` matching `pattern`.
///
/// `base` is an absolute path without a trailing slash (`/` itself is allowed); `pattern`
/// is `/`-separated and relative.
pub fn to_regex(base: &str, pattern: &str) -> Result<String, GlobError> {
    if base.chars().chain(pattern.chars()).any(char::is_control) {
        return Err(err("a control character cannot go into a seatbelt rule"));
    }
    if pattern.contains('\\') {
        return Err(err("a backslash in a glob is an escape whose meaning differs between tools"));
    }
    let mut components: Vec<&str> =
        pattern.split('/').filter(|c| !c.is_empty() && *c != ".").collect();
    if components.contains(&"..") {
        return Err(err("`..` cannot appear in a glob"));
    }
    // `**/*` at the end means the same as `**`: everything below, and the base itself.
    if components.len() >= 2 && components[components.len() - 2..] == ["**", "*"] {
        components.pop();
    }
    components.dedup_by(|a, b| *a == "**" && *b == "**");

    let mut out = String::from("^");
    escape_into(&mut out, base.strip_suffix('/').unwrap_or(base));
    for component in &components {
        if *component == "**" {
            out.push_str("(/.*)?");
        } else {
            out.push('/');
            component_into(&mut out, component)?;
        }
    }
    if components.is_empty() {
        // A bare base: the base and everything under it, like a subpath.
        out.push_str("(/.*)?");
    }
    out.push('$');
    Ok(out)
}

/// Translates one path component (no `/`).
fn component_into(out: &mut String, component: &str) -> Result<(), GlobError> {
    let mut chars = component.chars().peekable();
    let mut in_braces = false;
    while let Some(c) = chars.next() {
        match c {
            '*' => out.push_str("[^/]*"),
            '?' => out.push_str("[^/]"),
            '[' => class_into(out, &mut chars)?,
            '{' if !in_braces => {
                in_braces = true;
                out.push('(');
            }
            '{' => return Err(err("nested `{` alternatives are not supported")),
            ',' if in_braces => out.push('|'),
            '}' if in_braces => {
                in_braces = false;
                out.push(')');
            }
            c => escape_into(out, c.encode_utf8(&mut [0; 4])),
        }
    }
    if in_braces {
        return Err(err("a `{` alternative is not closed"));
    }
    Ok(())
}

/// Translates a `[...]` class, the opening `[` already consumed.
fn class_into(
    out: &mut String,
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
) -> Result<(), GlobError> {
    let mut body = String::new();
    let mut negated = false;
    if matches!(chars.peek(), Some('!') | Some('^')) {
        negated = true;
        chars.next();
    }
    let mut first = true;
    loop {
        match chars.next() {
            None => return Err(err("a `[` class is not closed")),
            Some(']') if !first => break,
            Some(c @ ('[' | '\\' | '&' | '~')) => {
                // Escaped so that no regex dialect reads a nested class or set operation.
                let _ = write!(body, "\\{c}");
            }
            Some(c) => body.push(c),
        }
        first = false;
    }
    if body.starts_with(']') {
        body.insert(0, '\\');
    }
    // A class never matches `/`: a negated one says so explicitly.
    out.push('[');
    if negated {
        out.push_str("^/");
    }
    out.push_str(&body);
    out.push(']');
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use expect_test::expect;

    fn re(base: &str, pattern: &str) -> String {
        to_regex(base, pattern).unwrap_or_else(|e| format!("error: {}", e.message))
    }

    #[test]
    fn translations() {
        let got = [
            re("/private/tmp/p.q+(x)[1]", "*.txt"),
            re("/p", "**"),
            re("/p", "**/*"),
            re("/p", "**/*.pem"),
            re("/p", "a/**/b"),
            re("/p", "src/*.{rs,toml}"),
            re("/p", "x[!a-c]?"),
            re("/p", "[]x]"),
            re("/", "*.log"),
            re("/p", ""),
            re("/p", "a\\*"),
            re("/p", "a\nb"),
            re("/p", "[ab"),
            re("/p", "{a,{b}}"),
            re("/p", "../x"),
        ]
        .join("\n");
        expect![[r#"
            ^/private/tmp/p\.q\+\(x\)\[1\]/[^/]*\.txt$
            ^/p(/.*)?$
            ^/p(/.*)?$
            ^/p(/.*)?/[^/]*\.pem$
            ^/p/a(/.*)?/b$
            ^/p/src/[^/]*\.(rs|toml)$
            ^/p/x[^/a-c][^/]$
            ^/p/[\]x]$
            ^/[^/]*\.log$
            ^/p(/.*)?$
            error: a backslash in a glob is an escape whose meaning differs between tools
            error: a control character cannot go into a seatbelt rule
            error: a `[` class is not closed
            error: nested `{` alternatives are not supported
            error: `..` cannot appear in a glob"#]]
        .assert_eq(&got);
    }

    #[test]
    fn pol03_star_does_not_cross_slash_and_base_is_literal() {
        let r = regex::Regex::new(&re("/tmp/p.q+(x)[1]", "*.txt")).unwrap();
        assert!(r.is_match("/tmp/p.q+(x)[1]/e.txt"));
        assert!(!r.is_match("/tmp/pXq+(x)[1]/e.txt"));
        assert!(!r.is_match("/tmp/p.q+(x)[1]/sub/e.txt"));
        let r = regex::Regex::new(&re("/p", "**/*.pem")).unwrap();
        assert!(r.is_match("/p/a.pem") && r.is_match("/p/x/y/a.pem"));
        assert!(!r.is_match("/p/a.pem/x") && !r.is_match("/q/a.pem"));
    }
}
