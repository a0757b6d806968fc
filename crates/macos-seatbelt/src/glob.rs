//! Globs as seatbelt regexes (security case POL-03).
//!
//! A [`GlobRule`](paddock_policy::GlobRule) is a canonical base directory and a pattern
//! below it. The regex is anchored at both ends (`^...$`); the base's literal bytes are
//! escaped, so `/tmp/p.q+(x)[1]` matches only itself; `*` and `?` never cross `/`; `**` as a
//! whole component matches any number of components, including none (so `dir/**` and
//! `dir/**/*` both mean `dir` and everything under it). `[...]` classes and `{a,b}`
//! alternatives are supported as globset reads them, minus `/`.
//!
//! Deny rules also use case-folded regexes ([`path_regex`], [`to_regex`] with `fold`): APFS is
//! case-insensitive by default, so `.GIT/HOOKS/pre-commit` and `~/.BASHRC` name the protected
//! files too (security case SYM-07). ASCII letters are folded (`[gG]`); other characters are
//! kept as they are.
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

/// Appends `text` to `out` with every regex metacharacter escaped, and with ASCII letters
/// as `[xX]` classes when `fold` is set.
pub fn escape_into(out: &mut String, text: &str, fold: bool) {
    for c in text.chars() {
        if REGEX_META.contains(&c) {
            out.push('\\');
            out.push(c);
        } else if fold && c.is_ascii_alphabetic() {
            out.push('[');
            out.push(c.to_ascii_lowercase());
            out.push(c.to_ascii_uppercase());
            out.push(']');
        } else {
            out.push(c);
        }
    }
}

/// The anchored, case-folded regex for `path` itself, or for `path` and everything under it
/// when `subtree` is set (a case-insensitive `literal` or `subpath`). It only ever widens a
/// deny, so what has no sure regex spelling (a control character, a byte that is not UTF-8)
/// becomes `[^/]`: the exact `literal`/`subpath` rule next to it still names the path.
pub fn path_regex(path: &[u8], subtree: bool) -> String {
    let path = path.strip_suffix(b"/").unwrap_or(path);
    let mut out = String::from("^");
    for chunk in path.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c.is_control() {
                out.push_str("[^/]");
            } else {
                escape_into(&mut out, c.encode_utf8(&mut [0; 4]), true);
            }
        }
        for _ in chunk.invalid() {
            out.push_str("[^/]");
        }
    }
    if subtree {
        out.push_str("(/.*)?");
    }
    out.push('$');
    out
}

/// The anchored regex for paths under `base` matching `pattern`, case-folded when `fold` is
/// set.
///
/// `base` is an absolute path without a trailing slash (`/` itself is allowed); `pattern`
/// is `/`-separated and relative.
pub fn to_regex(base: &str, pattern: &str, fold: bool) -> Result<String, GlobError> {
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
    escape_into(&mut out, base.strip_suffix('/').unwrap_or(base), fold);
    for component in &components {
        if *component == "**" {
            out.push_str("(/.*)?");
        } else {
            out.push('/');
            component_into(&mut out, component, fold)?;
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
fn component_into(out: &mut String, component: &str, fold: bool) -> Result<(), GlobError> {
    let mut chars = component.chars().peekable();
    let mut in_braces = false;
    while let Some(c) = chars.next() {
        match c {
            '*' => out.push_str("[^/]*"),
            '?' => out.push_str("[^/]"),
            '[' => class_into(out, &mut chars, fold)?,
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
            c => escape_into(out, c.encode_utf8(&mut [0; 4]), fold),
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
    fold: bool,
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
    if fold {
        // The same members in the other case: `a-c` gains `A-C`.
        let swapped: String = body
            .chars()
            .map(|c| {
                if c.is_ascii_lowercase() { c.to_ascii_uppercase() } else { c.to_ascii_lowercase() }
            })
            .collect();
        if swapped != body {
            body.push_str(&swapped);
        }
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
        to_regex(base, pattern, false).unwrap_or_else(|e| format!("error: {}", e.message))
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
    fn folded_regexes_sym07() {
        let got = [
            to_regex("/Users/u/proj", "**/*.pem", true).unwrap(),
            to_regex("/p", "[a-c]x[!q]", true).unwrap(),
            path_regex(b"/Users/u/proj/.git/hooks", true),
            path_regex("/Users/u/Café".as_bytes(), false),
            path_regex(b"/p/a\nb\xff", false),
        ]
        .join("\n");
        expect![[r#"
            ^/[uU][sS][eE][rR][sS]/[uU]/[pP][rR][oO][jJ](/.*)?/[^/]*\.[pP][eE][mM]$
            ^/[pP]/[a-cA-C][xX][^/qQ]$
            ^/[uU][sS][eE][rR][sS]/[uU]/[pP][rR][oO][jJ]/\.[gG][iI][tT]/[hH][oO][oO][kK][sS](/.*)?$
            ^/[uU][sS][eE][rR][sS]/[uU]/[cC][aA][fF]é$
            ^/[pP]/[aA][^/][bB][^/]$"#]]
        .assert_eq(&got);
        let r = regex::Regex::new(&path_regex(b"/Users/u/proj/.git/hooks", true)).unwrap();
        assert!(
            r.is_match("/Users/u/proj/.GIT/HOOKS/pre-commit")
                && r.is_match("/Users/u/proj/.git/hooks")
        );
        assert!(!r.is_match("/Users/u/proj/.git/hooksx"));
        let r = regex::Regex::new(&to_regex("/p", "[a-c]x[!q]", true).unwrap()).unwrap();
        assert!(
            r.is_match("/p/BXz")
                && r.is_match("/p/axZ")
                && !r.is_match("/p/axQ")
                && !r.is_match("/p/dxz")
        );
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

#[cfg(test)]
mod agrees_with_globset {
    use super::to_regex;
    use proptest::prelude::*;

    fn arb_pattern() -> impl Strategy<Value = String> {
        let piece = prop::sample::select(vec![
            "a", "b", "*", "**", "?", "*.txt", "[ab]", "{a,b}", "a*b", "[!a]", "x.txt",
        ]);
        prop::collection::vec(piece, 1..4).prop_map(|v| v.join("/"))
    }

    fn arb_path() -> impl Strategy<Value = String> {
        let piece = prop::sample::select(vec![
            "a", "b", "ab", "x.txt", "a.txt", "c", ".txt", "aab", "A", "X.TXT", "aB",
        ]);
        prop::collection::vec(piece, 1..5).prop_map(|v| v.join("/"))
    }

    proptest! {
        /// Below the base, the regex matches what globset (with `literal_separator`, as
        /// resolution configures it) matches, plus, for a pattern ending in `/**` or `/**/*`,
        /// the directory that `**` hangs from (`dir/**` means `dir` too). The base itself is
        /// never generated.
        #[test]
        fn same_matches_as_globset(pattern in arb_pattern(), path in arb_path(), fold in any::<bool>()) {
            let re = regex::Regex::new(&to_regex("/p", &pattern, fold).unwrap()).unwrap();
            let matcher = |p: &str| {
                globset::GlobBuilder::new(p).literal_separator(true).case_insensitive(fold).build().unwrap().compile_matcher()
            };
            let mut expected = matcher(&pattern).is_match(&path);
            let mut dir = pattern.as_str();
            while let Some(stem) = dir.strip_suffix("/**/*").or_else(|| dir.strip_suffix("/**")) {
                dir = stem;
                expected |= matcher(dir).is_match(&path);
            }
            prop_assert_eq!(re.is_match(&format!("/p/{path}")), expected, "pattern {} path {}", pattern, path);
        }
    }
}
