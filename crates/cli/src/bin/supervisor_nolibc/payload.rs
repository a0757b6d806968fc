//! The payload this supervisor reads: what the task is, as NUL-terminated fields (written by
//! `paddock_linux_bwrap::nolibc::encode`, which documents the layout).
//!
//! The fields are what `execve` takes already (NUL-terminated byte strings), so the task's
//! argv and environment are pointers into the payload's own buffer: nothing is copied.

use core::ffi::CStr;

use libc::c_int;

use crate::arena;

/// The first field of every payload.
pub const MAGIC: &[u8] = b"paddock-exec-payload";

/// A payload, pointing into the buffer it was read from.
#[derive(Debug)]
pub struct Payload<'a> {
    /// The version of paddock that planned the task.
    pub version: &'a [u8],
    /// The working directory inside the sandbox.
    pub cwd: &'a CStr,
    /// The descriptor holding the BPF program.
    pub seccomp_fd: c_int,
    /// The descriptor polite signals arrive on, if any.
    pub signal_fd: Option<c_int>,
    /// The program as given (looked up in `PATH` when it has no `/`).
    pub program: &'a CStr,
    /// argv, NULL-terminated.
    pub argv: &'a [*const u8],
    /// The environment (`KEY=value`), NULL-terminated.
    pub envp: &'a [*const u8],
    /// The value of the environment's last `PATH`.
    pub path: Option<&'a [u8]>,
}

/// The NUL-terminated fields of a buffer, in order.
struct Fields<'a> {
    rest: &'a [u8],
}

impl<'a> Fields<'a> {
    fn next(&mut self, what: &'static str) -> Result<&'a CStr, &'static str> {
        let end = self.rest.iter().position(|&b| b == 0).ok_or(what)?;
        let (field, rest) = self.rest.split_at(end + 1);
        self.rest = rest;
        CStr::from_bytes_with_nul(field).map_err(|_| what)
    }

    fn number(&mut self, what: &'static str) -> Result<c_int, &'static str> {
        parse_int(self.next(what)?.to_bytes()).ok_or(what)
    }

    /// `count` fields as a NULL-terminated pointer array.
    fn array(&mut self, count: usize, what: &'static str) -> Result<&'a [*const u8], &'static str> {
        let ptrs = arena::array::<*const u8>(count + 1).map_err(|_| "out of memory")?;
        for slot in ptrs.iter_mut().take(count) {
            *slot = self.next(what)?.as_ptr().cast();
        }
        ptrs[count] = core::ptr::null();
        Ok(ptrs)
    }
}

/// A non-negative decimal number of at most nine digits.
pub fn parse_int(digits: &[u8]) -> Option<c_int> {
    if digits.is_empty() || digits.len() > 9 {
        return None;
    }
    digits
        .iter()
        .try_fold(0, |n: c_int, &d| d.is_ascii_digit().then(|| n * 10 + c_int::from(d - b'0')))
}

/// Reads a payload; the error names the field that is missing or malformed.
pub fn parse(buf: &[u8]) -> Result<Payload<'_>, &'static str> {
    let mut fields = Fields { rest: buf };
    if fields.next("no payload")?.to_bytes() != MAGIC {
        return Err("not a payload for this supervisor (run by the wrong paddock?)");
    }
    let version = fields.next("no version")?.to_bytes();
    let cwd = fields.next("no working directory")?;
    let seccomp_fd = fields.number("no seccomp descriptor")?;
    let signal_fd = match fields.next("no signal descriptor")?.to_bytes() {
        b"-" => None,
        digits => Some(parse_int(digits).ok_or("a malformed signal descriptor")?),
    };
    let program = fields.next("no program")?;
    let argc = fields.number("no argument count")?;
    let argv = fields.array(argc as usize, "fewer arguments than counted")?;
    let envc = fields.number("no environment count")?;
    let envp = fields.array(envc as usize, "fewer variables than counted")?;
    if !fields.rest.is_empty() {
        return Err("more fields than counted");
    }
    let path = envp[..envc as usize].iter().rev().find_map(|&var| {
        // SAFETY: every pointer of the array points at a NUL-terminated field of `buf`.
        let var = unsafe { CStr::from_ptr(var.cast()) }.to_bytes();
        var.strip_prefix(b"PATH=")
    });
    Ok(Payload { version, cwd, seccomp_fd, signal_fd, program, argv, envp, path })
}
