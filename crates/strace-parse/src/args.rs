//! Typed access to a call's arguments: strings (decoded to exact bytes), integers, flag sets,
//! `-y`/`-yy` fd decorations, and the fields of a printed struct.
//!
//! Arguments stay raw text until asked for; each accessor parses only what it needs, so events
//! nobody looks at cost nothing beyond finding their end.

use std::ffi::OsString;

use crate::quote;
use crate::scan::{self, SplitTopLevel};

/// The top-level arguments of a call, in order.
#[derive(Debug, Clone)]
pub struct Args<'a> {
    inner: SplitTopLevel<'a>,
}

impl<'a> Args<'a> {
    /// Splits raw argument text (what is between a call's parentheses).
    pub fn new(raw: &'a [u8]) -> Self {
        Args { inner: SplitTopLevel::new(raw) }
    }
}

impl<'a> Iterator for Args<'a> {
    type Item = Arg<'a>;

    fn next(&mut self) -> Option<Arg<'a>> {
        self.inner.next().map(Arg::new)
    }
}

/// One argument as strace printed it, with typed views.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arg<'a> {
    raw: &'a [u8],
}

/// A decoded string argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StrArg {
    /// The exact bytes (for a truncated string: exactly those strace printed).
    pub bytes: Vec<u8>,
    /// Whether strace cut the string (`"..."...`): then `bytes` is only its beginning.
    pub truncated: bool,
}

impl StrArg {
    /// The bytes as an `OsString` (lossless on Unix).
    #[cfg(unix)]
    pub fn to_os_string(&self) -> OsString {
        use std::os::unix::ffi::OsStringExt;
        OsString::from_vec(self.bytes.clone())
    }
}

/// A file descriptor argument, with its `-y`/`-yy` decoration when strace printed one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FdArg {
    /// The descriptor.
    pub fd: Fd,
    /// The decoded decoration: a path (`/etc`), or `socket:[123]`, `UDP:[1110456]`, `pipe:[7]`.
    pub decoration: Option<Vec<u8>>,
    /// What `-yy` adds inside the decoration after a path, decoded: `char 1:3` for
    /// `3</dev/null<char 1:3>>`.
    pub detail: Option<Vec<u8>>,
}

/// A descriptor number or `AT_FDCWD`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fd {
    /// `AT_FDCWD` (also when printed raw as `-100`).
    AtFdcwd,
    /// A number.
    Num(i64),
}

/// `AT_FDCWD`'s value on Linux.
const AT_FDCWD: i64 = -100;

impl<'a> Arg<'a> {
    /// Wraps raw argument text.
    pub fn new(raw: &'a [u8]) -> Self {
        Arg { raw: scan::trim(raw) }
    }

    /// The text as strace printed it.
    pub fn raw(&self) -> &'a [u8] {
        self.raw
    }

    /// The text without a trailing `/* ... */` comment (`-X verbose`, `/* 36 vars */`).
    pub fn without_comment(&self) -> &'a [u8] {
        if memchr::memmem::find(self.raw, b"/*").is_none() {
            return self.raw;
        }
        match scan::top_level_find(self.raw, |c| c == b'/') {
            Some(i) if self.raw.get(i + 1) == Some(&b'*') => scan::trim(&self.raw[..i]),
            _ => self.raw,
        }
    }

    /// Whether the argument is `NULL`.
    pub fn is_null(&self) -> bool {
        self.without_comment() == b"NULL"
    }

    /// The argument as a string: `"..."` (decoded), `"..."...` (truncated), or an abstract
    /// unix socket name `@"..."` (returned with its leading NUL byte, as the kernel has it).
    pub fn as_str(&self) -> Option<StrArg> {
        let (abstract_ns, s) = match self.raw.strip_prefix(b"@") {
            Some(rest) => (true, rest),
            None => (false, self.raw),
        };
        if s.first() != Some(&b'"') {
            return None;
        }
        let end = scan::skip_string(s, 0)?;
        let truncated = match &s[end..] {
            b"" => false,
            b"..." => true,
            _ => return None,
        };
        let mut bytes = Vec::with_capacity(end);
        if abstract_ns {
            bytes.push(0);
        }
        quote::decode_into(&s[1..end - 1], &mut bytes);
        Some(StrArg { bytes, truncated })
    }

    /// The argument as an integer: decimal, `0x` hex or `0` octal, with an optional trailing
    /// comment (`-100 /* AT_FDCWD */`).
    pub fn as_int(&self) -> Option<i64> {
        parse_int(self.without_comment())
    }

    /// The argument as a flag set (`O_RDONLY|O_CLOEXEC`, `0`, `0x80000`): its members.
    pub fn as_flags(&self) -> Option<Vec<&'a str>> {
        let text = self.without_comment();
        if text.is_empty() {
            return None;
        }
        text.split(|&c| c == b'|')
            .map(|f| {
                let ok = !f.is_empty()
                    && f.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'<'));
                if ok { std::str::from_utf8(f).ok() } else { None }
            })
            .collect()
    }

    /// The argument as a file descriptor: `3`, `AT_FDCWD`, `-100`, optionally decorated
    /// (`3</etc>`, `AT_FDCWD</tmp>`, `5<UNIX-STREAM:[1110392]>`, `-100</tmp> /* AT_FDCWD */`).
    pub fn as_fd(&self) -> Option<FdArg> {
        let text = self.without_comment();
        let lt = memchr::memchr(b'<', text);
        let head = &text[..lt.unwrap_or(text.len())];
        let fd = if head == b"AT_FDCWD" {
            Fd::AtFdcwd
        } else {
            match parse_int(head)? {
                AT_FDCWD => Fd::AtFdcwd,
                n => Fd::Num(n),
            }
        };
        let (mut decoration, mut detail) = (None, None);
        if let Some(lt) = lt {
            let end = scan::skip_decoration(text, lt)?;
            if end != text.len() {
                return None;
            }
            let inner = &text[lt + 1..end - 1];
            // A path's own `<` is printed `\74`, so a raw `<` opens the `-yy` detail.
            match memchr::memchr(b'<', inner) {
                Some(nested) if inner.ends_with(b">") => {
                    decoration = Some(quote::decode(&inner[..nested]));
                    detail = Some(quote::decode(&inner[nested + 1..inner.len() - 1]));
                }
                _ => decoration = Some(quote::decode(inner)),
            }
        }
        Some(FdArg { fd, decoration, detail })
    }

    /// For a struct argument (`{sa_family=AF_UNIX, sun_path="/x"}`), the value of a field,
    /// looked up at the top level of the struct.
    pub fn field(&self, name: &str) -> Option<Arg<'a>> {
        let inner = self.raw.strip_prefix(b"{")?;
        let inner = inner.strip_suffix(b"}").unwrap_or(inner);
        SplitTopLevel::new(inner).find_map(|member| {
            let value = member.strip_prefix(name.as_bytes())?.strip_prefix(b"=")?;
            Some(Arg::new(value))
        })
    }

    /// Searches the argument, at any struct depth, for a field (`msg_name={..., sun_path=...}`).
    pub fn find_field(&self, name: &str) -> Option<Arg<'a>> {
        if let Some(found) = self.field(name) {
            return Some(found);
        }
        let inner = self.raw.strip_prefix(b"{")?;
        let inner = inner.strip_suffix(b"}").unwrap_or(inner);
        SplitTopLevel::new(inner).find_map(|member| {
            let eq = memchr::memchr(b'=', member)?;
            Arg::new(&member[eq + 1..]).find_field(name)
        })
    }
}

/// Parses an integer as strace prints one: `-1`, `42`, `0x1f`, `0644` (octal).
pub(crate) fn parse_int(t: &[u8]) -> Option<i64> {
    let (neg, t) = match t.strip_prefix(b"-") {
        Some(rest) => (true, rest),
        None => (false, t),
    };
    let (radix, digits) = if let Some(hex) = t.strip_prefix(b"0x") {
        (16, hex)
    } else if t.len() > 1 && t[0] == b'0' {
        (8, &t[1..])
    } else {
        (10, t)
    };
    if digits.is_empty() {
        return None;
    }
    let text = std::str::from_utf8(digits).ok()?;
    // u64 first: pointers and masks are printed unsigned and may not fit an i64.
    let v = u64::from_str_radix(text, radix).ok()? as i64;
    Some(if neg { v.wrapping_neg() } else { v })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<Arg<'_>> {
        Args::new(s.as_bytes()).collect()
    }

    #[test]
    fn typed_access() {
        let a = args(r#"AT_FDCWD</tmp/w>, "/x\"y"..., O_RDONLY|O_CLOEXEC, 0644"#);
        assert_eq!(
            a[0].as_fd(),
            Some(FdArg { fd: Fd::AtFdcwd, decoration: Some(b"/tmp/w".to_vec()), detail: None })
        );
        assert_eq!(a[1].as_str(), Some(StrArg { bytes: b"/x\"y".to_vec(), truncated: true }));
        assert_eq!(a[2].as_flags(), Some(vec!["O_RDONLY", "O_CLOEXEC"]));
        assert_eq!(a[3].as_int(), Some(0o644));
        assert_eq!(a[1].as_int(), None);
        assert_eq!(a[0].as_str(), None);
    }

    #[test]
    fn raw_and_verbose_forms() {
        let a = args("-100 /* AT_FDCWD */, 0 /* O_RDONLY */, 5<UNIX-STREAM:[1110392]>, 0x10");
        assert_eq!(a[0].as_fd(), Some(FdArg { fd: Fd::AtFdcwd, decoration: None, detail: None }));
        let null = Arg::new(b"3</dev/null<char 1:3>>").as_fd().unwrap();
        assert_eq!(
            (null.decoration.unwrap(), null.detail.unwrap()),
            (b"/dev/null".to_vec(), b"char 1:3".to_vec())
        );
        assert_eq!(a[1].as_flags(), Some(vec!["0"]));
        assert_eq!(
            a[2].as_fd().and_then(|f| f.decoration),
            Some(b"UNIX-STREAM:[1110392]".to_vec())
        );
        assert_eq!(a[3].as_int(), Some(16));
        assert_eq!(
            args("3</a \\74b\\76>")[0].as_fd().and_then(|f| f.decoration),
            Some(b"/a <b>".to_vec())
        );
    }

    #[test]
    fn struct_fields() {
        let a = args(r#"4, {sa_family=AF_UNIX, sun_path=@"abs"}, 110"#);
        let sun = a[1].field("sun_path").and_then(|f| f.as_str());
        assert_eq!(sun, Some(StrArg { bytes: b"\0abs".to_vec(), truncated: false }));
        let m = args(r#"{msg_name={sa_family=AF_UNIX, sun_path="/s"}, msg_namelen=110}"#);
        assert_eq!(
            m[0].find_field("sun_path").and_then(|f| f.as_str()).map(|s| s.bytes),
            Some(b"/s".to_vec())
        );
        assert_eq!(m[0].field("sun_path"), None);
    }
}
