//! Low-level scanning of strace's argument text: quoted strings, `-y` fd decorations, nesting.
//!
//! Everything that finds a structural character (the `)` closing a call, the `,` between two
//! arguments) goes through here, so a `)`, `,`, `"` or `<unfinished ...>` inside a file name or
//! a decoration can never be mistaken for structure. Strings are skipped with `memchr`, which
//! keeps the hot path (finding the end of a call's arguments) at memory speed.

use memchr::{memchr, memchr2, memchr3};

/// Returns the index just past the closing quote of the string whose opening quote is at
/// `start`, or `None` when the string does not end on this line.
pub(crate) fn skip_string(s: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    loop {
        let j = i + memchr2(b'"', b'\\', s.get(i..)?)?;
        if s[j] == b'"' {
            return Some(j + 1);
        }
        i = j + 2;
    }
}

/// Whether the `<` at `i` opens an fd decoration (`3</etc>`, `AT_FDCWD</tmp>`, `4<UDP:[1]>`)
/// or a `-Y` comm (`19320<probe>`): it directly follows a name or number and is not a `<<`
/// (strace prints capability sets as `1<<CAP_CHOWN`).
pub(crate) fn opens_decoration(s: &[u8], i: usize) -> bool {
    i > 0
        && s[i - 1].is_ascii_alphanumeric()
        && s.get(i + 1).is_some_and(|&c| c != b'<')
        && !(i > 1 && s[i - 2] == b'<')
}

/// Returns the index just past the `>` closing the decoration whose `<` is at `start`.
///
/// Inside a decoration strace escapes `<`, `>`, `"` and `\` of a path, so a raw `<` can only
/// open a nested decoration (`-yy` prints `/dev/null<char 1:3>`) and a raw `>` closes one,
/// except in the `->` arrow of a `-yy` socket (`TCP:[1.2.3.4:5->6.7.8.9:10]`).
pub(crate) fn skip_decoration(s: &[u8], start: usize) -> Option<usize> {
    let mut depth = 1usize;
    let mut i = start + 1;
    loop {
        let j = i + memchr3(b'<', b'>', b'\\', s.get(i..)?)?;
        match s[j] {
            b'\\' => i = j + 2,
            b'<' => {
                depth += 1;
                i = j + 1;
            }
            _ => {
                let arrow = j > 0
                    && s[j - 1] == b'-'
                    && s.get(j + 1).is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'[');
                i = j + 1;
                if !arrow {
                    depth -= 1;
                    if depth == 0 {
                        return Some(i);
                    }
                }
            }
        }
    }
}

/// Finds the `)` that closes a call's argument list, scanning `s` from `from` with `depth`
/// parentheses already open (1 for the text right after `NAME(`). Returns its index.
pub(crate) fn find_close_paren(s: &[u8], from: usize, mut depth: usize) -> Option<usize> {
    let mut i = from;
    // The next `<` at or after `i`, found lazily: decorations are rare outside `-y` logs, so
    // this costs one memchr per log line in the common case.
    let mut next_lt = memchr(b'<', s.get(i..)?).map(|o| i + o);
    loop {
        if next_lt.is_some_and(|lt| lt < i) {
            // The `<` was inside a string skipped since: look again from here.
            next_lt = memchr(b'<', s.get(i..)?).map(|o| i + o);
        }
        let j = i + memchr3(b'"', b'(', b')', s.get(i..)?)?;
        if let Some(lt) = next_lt.filter(|&lt| lt < j) {
            if opens_decoration(s, lt) {
                i = skip_decoration(s, lt)?;
            } else {
                i = lt + 1;
            }
            next_lt = memchr(b'<', s.get(i..)?).map(|o| i + o);
            continue;
        }
        match s[j] {
            b'"' => i = skip_string(s, j)?,
            b'(' => {
                depth += 1;
                i = j + 1;
            }
            _ => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(j);
                }
                i = j + 1;
            }
        }
    }
}

/// Splits argument text at the commas that are not inside a string, a decoration, a comment
/// or a `()`, `[]`, `{}` group. Each piece is trimmed of surrounding spaces.
#[derive(Debug, Clone)]
pub(crate) struct SplitTopLevel<'a> {
    rest: Option<&'a [u8]>,
}

impl<'a> SplitTopLevel<'a> {
    pub(crate) fn new(s: &'a [u8]) -> Self {
        let s = trim(s);
        SplitTopLevel { rest: if s.is_empty() { None } else { Some(s) } }
    }
}

impl<'a> Iterator for SplitTopLevel<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let s = self.rest?;
        let end = top_level_find(s, |c| c == b',').unwrap_or(s.len());
        // Nothing after the last comma means the list was cut (`f(a,  <detached ...>`).
        self.rest =
            if end < s.len() { Some(trim(&s[end + 1..])).filter(|r| !r.is_empty()) } else { None };
        Some(trim(&s[..end]))
    }
}

/// The index of the first byte at nesting depth 0 (outside strings, decorations and
/// comments) for which `pred` holds.
pub(crate) fn top_level_find(s: &[u8], pred: impl Fn(u8) -> bool) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        if depth == 0 && pred(c) {
            return Some(i);
        }
        match c {
            b'"' => {
                i = skip_string(s, i).unwrap_or(s.len());
                continue;
            }
            b'<' if opens_decoration(s, i) => {
                i = skip_decoration(s, i).unwrap_or(s.len());
                continue;
            }
            b'/' if s.get(i + 1) == Some(&b'*') => {
                i = memchr::memmem::find(&s[i + 2..], b"*/").map_or(s.len(), |o| i + 2 + o + 2);
                continue;
            }
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    None
}

/// Trims ASCII spaces (not other whitespace: strace pads with spaces only).
pub(crate) fn trim(s: &[u8]) -> &[u8] {
    let start = s.iter().position(|&c| c != b' ').unwrap_or(s.len());
    let end = s.iter().rposition(|&c| c != b' ').map_or(start, |e| e + 1);
    &s[start..end.max(start)]
}

/// Trims leading ASCII spaces.
pub(crate) fn trim_start(s: &[u8]) -> &[u8] {
    let start = s.iter().position(|&c| c != b' ').unwrap_or(s.len());
    &s[start..]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(s: &str) -> Vec<String> {
        SplitTopLevel::new(s.as_bytes()).map(|p| String::from_utf8_lossy(p).into_owned()).collect()
    }

    #[test]
    fn close_paren_ignores_strings_and_decorations() {
        let s = br#"AT_FDCWD, "a) = 0 \"(", O_RDONLY) = 3"#;
        assert_eq!(find_close_paren(s, 0, 1), Some(32));
        let s = br#"3</tmp/a(b>, "x") = 0"#;
        assert_eq!(find_close_paren(s, 0, 1), Some(16));
        let s = br#""f <unfinished ...>", "<... x resumed>", 1) = 0"#;
        assert_eq!(find_close_paren(s, 0, 1), Some(42));
        let s = b"{effective=1<<CAP_CHOWN|1<<CAP_KILL}, NULL) = 0";
        assert_eq!(find_close_paren(s, 0, 1), Some(42));
        assert_eq!(find_close_paren(b"\"unterminated)", 0, 1), None);
    }

    #[test]
    fn decorations_nest_and_allow_socket_arrows() {
        let s = b"3</dev/null<char 1:3>>, x";
        assert_eq!(skip_decoration(s, 1), Some(22));
        let s = b"4<TCP:[127.0.0.1:1->127.0.0.1:2]>)";
        assert_eq!(skip_decoration(s, 1), Some(33));
    }

    #[test]
    fn splits_only_top_level_commas() {
        assert_eq!(
            split(r#"AT_FDCWD</a,b>, "x, \"y", {a=1, b=[2, 3]}, f(1, 2) /* c, d */, 0"#),
            [r"AT_FDCWD</a,b>", r#""x, \"y""#, "{a=1, b=[2, 3]}", "f(1, 2) /* c, d */", "0"]
        );
        assert!(split("  ").is_empty());
        assert_eq!(split("a, {b},  "), ["a", "{b}"]);
    }
}
