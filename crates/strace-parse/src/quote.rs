//! strace's string quoting, both ways: decoding a printed string back to its exact bytes, and
//! encoding bytes the way strace 6.1 prints them (used by tests and by tools that write logs).
//!
//! One decoder covers every string mode strace has (default octal escapes, `-x`, `-xx`, `-X`,
//! `--strings-in-hex=non-ascii-chars`) and the unquoted text of `-y`/`-yy` fd decorations: an
//! escape is self-describing (`\x` is hex, a digit starts octal, a letter is a C escape), so the
//! mode never has to be guessed.

/// How strace renders the bytes of a string (its `-x` family of options).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StringStyle {
    /// No option: printable ASCII as is, C escapes for `\t\n\v\f\r`, octal for the rest.
    Default,
    /// `-x` (`--strings-in-hex=non-ascii`): the whole string in `\xNN` if any byte needs an
    /// escape other than `\t\n\v\f\r`, else as [`StringStyle::Default`].
    HexNonAscii,
    /// `-xx` (`--strings-in-hex=all`): every byte as `\xNN`.
    HexAll,
    /// `--strings-in-hex=non-ascii-chars`: as the default, with `\xNN` in place of octal.
    NonAsciiChars,
    /// The inside of a `-y` fd decoration: default escaping plus `<` and `>` in octal.
    Decoration,
}

/// Decodes the text strace printed between the quotes of a string (or inside a `<...>` fd
/// decoration) into the exact bytes it stands for.
///
/// The decoder is total: an escape strace never writes (a lone trailing backslash, `\q`) is kept
/// as the literal bytes, so no input makes it fail or lose bytes silently.
pub fn decode(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    decode_into(text, &mut out);
    out
}

/// Like [`decode`], appending to `out` (no allocation when `out` has room).
pub fn decode_into(text: &[u8], out: &mut Vec<u8>) {
    let mut i = 0;
    while i < text.len() {
        let Some(off) = memchr::memchr(b'\\', &text[i..]) else {
            out.extend_from_slice(&text[i..]);
            return;
        };
        out.extend_from_slice(&text[i..i + off]);
        i += off;
        let Some(&c) = text.get(i + 1) else {
            out.push(b'\\');
            return;
        };
        match c {
            b'x' => {
                let hex = |b: Option<&u8>| b.and_then(|b| (*b as char).to_digit(16));
                match (hex(text.get(i + 2)), hex(text.get(i + 3))) {
                    (Some(h), Some(l)) => {
                        out.push((h * 16 + l) as u8);
                        i += 4;
                    }
                    _ => {
                        out.extend_from_slice(b"\\x");
                        i += 2;
                    }
                }
            }
            b'0'..=b'7' => {
                let mut value: u32 = 0;
                let mut n = 0;
                while n < 3 {
                    match text.get(i + 1 + n) {
                        Some(d @ b'0'..=b'7') => {
                            value = value * 8 + u32::from(d - b'0');
                            n += 1;
                        }
                        _ => break,
                    }
                }
                // Three octal digits can exceed a byte (`\777`); strace never prints that, so
                // keep such text literally rather than wrap.
                if value <= 0xff {
                    out.push(value as u8);
                } else {
                    out.extend_from_slice(&text[i..i + 1 + n]);
                }
                i += 1 + n;
            }
            _ => {
                let byte = match c {
                    b'n' => Some(b'\n'),
                    b't' => Some(b'\t'),
                    b'v' => Some(0x0b),
                    b'f' => Some(0x0c),
                    b'r' => Some(b'\r'),
                    b'a' => Some(0x07),
                    b'b' => Some(0x08),
                    b'e' => Some(0x1b),
                    b'"' | b'\\' | b'\'' | b'<' | b'>' => Some(c),
                    _ => None,
                };
                match byte {
                    Some(b) => out.push(b),
                    None => out.extend_from_slice(&[b'\\', c]),
                }
                i += 2;
            }
        }
    }
}

/// Encodes `bytes` as strace 6.1 prints a string in `style`, without the surrounding quotes.
pub fn encode(bytes: &[u8], style: StringStyle) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len() + 2);
    let hex_all = match style {
        StringStyle::HexAll => true,
        StringStyle::HexNonAscii => bytes.iter().any(|&b| {
            !(0x20..=0x7e).contains(&b) && !matches!(b, b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
        }),
        _ => false,
    };
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for (i, &b) in bytes.iter().enumerate() {
        if hex_all {
            out.extend_from_slice(&[
                b'\\',
                b'x',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 15)],
            ]);
            continue;
        }
        let next_is_octal_digit = matches!(bytes.get(i + 1), Some(b'0'..=b'7'));
        match b {
            b'"' | b'\\' => out.extend_from_slice(&[b'\\', b]),
            b'<' | b'>' if style == StringStyle::Decoration => {
                push_octal(&mut out, b, next_is_octal_digit)
            }
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            0x0b => out.extend_from_slice(b"\\v"),
            0x0c => out.extend_from_slice(b"\\f"),
            b'\r' => out.extend_from_slice(b"\\r"),
            0x20..=0x7e => out.push(b),
            _ if style == StringStyle::NonAsciiChars => out.extend_from_slice(&[
                b'\\',
                b'x',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 15)],
            ]),
            _ => push_octal(&mut out, b, next_is_octal_digit),
        }
    }
    out
}

/// Pushes `\` and `b` in octal: minimal digits, or exactly three when `full` (strace uses three
/// when the next byte is an octal digit, which would otherwise be read as part of the escape).
fn push_octal(out: &mut Vec<u8>, b: u8, full: bool) {
    out.push(b'\\');
    let digits = [b >> 6, (b >> 3) & 7, b & 7];
    let skip = if full || b >= 64 {
        0
    } else if b >= 8 {
        1
    } else {
        2
    };
    out.extend(digits[skip..].iter().map(|d| b'0' + d));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check(printed: &str, bytes: &[u8]) {
        assert_eq!(decode(printed.as_bytes()), bytes, "decoding {printed}");
    }

    #[test]
    fn decodes_every_escape_form_strace_prints() {
        check(r"/nonexistent/oct\0017", b"/nonexistent/oct\x017");
        check(r"ctl\1\33[31m", b"ctl\x01\x1b[31m");
        check(r"caf\303\251", "café".as_bytes());
        check(r#"dq\"uote back\\slash"#, br#"dq"uote back\slash"#);
        check(r"vt\vff\f\t\n\r", b"vt\x0bff\x0c\t\n\r");
        check(r"\x2f\x6e\xfe\xff", b"/n\xfe\xff");
        check(r"oct\x017", b"oct\x017");
        check(r"fake \74unfinished ...\76", b"fake <unfinished ...>");
        check(r"\19", b"\x019");
    }

    #[test]
    fn keeps_escapes_strace_never_writes() {
        check(r"a\q", br"a\q");
        check(r"a\", br"a\");
        check(r"\xZ1", br"\xZ1");
        check(r"\777", br"\777");
    }

    #[test]
    fn encodes_like_strace() {
        let enc = |b: &[u8], s| String::from_utf8(encode(b, s)).unwrap();
        assert_eq!(enc(b"oct\x017", StringStyle::Default), r"oct\0017");
        assert_eq!(enc(b"\x019", StringStyle::Default), r"\19");
        assert_eq!(enc(b"\x7f\xff", StringStyle::Default), r"\177\377");
        assert_eq!(enc(b"a\nb", StringStyle::HexNonAscii), r"a\nb");
        assert_eq!(enc(b"a\xffb", StringStyle::HexNonAscii), r"\x61\xff\x62");
        assert_eq!(enc(b"/ x", StringStyle::HexAll), r"\x2f\x20\x78");
        assert_eq!(enc(b"oct\x017", StringStyle::NonAsciiChars), r"oct\x017");
        assert_eq!(enc(b"weird>ok", StringStyle::Decoration), r"weird\76ok");
    }
}
