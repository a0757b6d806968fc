//! Executing the task: its program, arguments and environment turned into C strings and the
//! `PATH` candidates found before a `fork` ([`Launch::new`]), and after it the exec itself
//! ([`Launch::exec`]): every descriptor above 2 closed, SIGPIPE back to its default,
//! no_new_privs and the seccomp filter, `execve` over the candidates, and 126 or 127 as a
//! shell would when none runs.
//!
//! The supervisor's child runs it, and so does `__shim` when strace runs inside the sandbox
//! (see `crate::shim`): then strace executes the shim and the shim executes the task.

use std::ffi::{CString, OsStr, OsString};
use std::os::unix::ffi::OsStrExt;

use crate::seccomp;
use crate::supervisor::{EXIT_NOT_EXECUTABLE, EXIT_NOT_FOUND, EXIT_SUPERVISOR};

/// The task's exec, prepared so that the child allocates nothing.
pub(crate) struct Launch {
    candidates: Vec<CString>,
    argv: CArray,
    env: CArray,
    bpf: Vec<u8>,
    program: OsString,
}

pub(crate) fn cstring(bytes: &OsStr) -> Result<CString, String> {
    CString::new(bytes.as_bytes()).map_err(|_| format!("{:?} contains a NUL byte", bytes))
}

impl Launch {
    /// `program` as given (looked up in the environment's `PATH` when it has no `/`), its
    /// arguments (argv\[0\] first), the complete environment and the BPF program to load.
    pub(crate) fn new<'a>(
        program: &OsStr,
        args: impl Iterator<Item = &'a OsStr>,
        env: impl Iterator<Item = (&'a OsStr, &'a OsStr)>,
        bpf: Vec<u8>,
    ) -> Result<Launch, String> {
        let argv = args.map(cstring).collect::<Result<Vec<_>, _>>()?;
        let mut vars = Vec::new();
        let mut path_var = None;
        for (k, v) in env {
            if k == "PATH" {
                path_var = Some(v);
            }
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            vars.push(
                CString::new(kv)
                    .map_err(|_| "an environment variable contains a NUL byte".to_owned())?,
            );
        }
        Ok(Launch {
            candidates: candidates(program, path_var)?,
            argv: CArray::new(argv),
            env: CArray::new(vars),
            bpf,
            program: program.to_os_string(),
        })
    }

    /// The environment, for a program executed in the task's place (strace).
    pub(crate) fn env(&self) -> &CArray {
        &self.env
    }

    /// Closes every descriptor from `first` up, loads the filter, calls `after_filter` (the
    /// notification filter's setup), and executes the first candidate that runs. Never
    /// returns: exits 125 when the filter cannot be loaded, 126 or 127 when nothing ran.
    pub(crate) fn exec(&self, first: i32, after_filter: impl FnOnce()) -> ! {
        // SAFETY: close_range (or close) on descriptor numbers of our own process.
        unsafe {
            if libc::syscall(libc::SYS_close_range, first as u32, u32::MAX, 0u32) != 0 {
                for fd in first..1024 {
                    libc::close(fd);
                }
            }
        }
        // The supervisor is a Rust program, which ignores SIGPIPE, and an ignored signal
        // survives execve: the task starts with the default, as std's `Command` gives.
        // SAFETY: signal(2) with a valid signal number and SIG_DFL, async-signal-safe.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
        if !drop_capabilities() {
            die(EXIT_SUPERVISOR, b"paddock: cannot drop every capability; the task was not run\n");
        }
        if let Err(e) = seccomp::apply(&self.bpf) {
            let mut msg = format!("paddock: {e}; the task was not run\n").into_bytes();
            msg.truncate(512);
            die(EXIT_SUPERVISOR, &msg);
        }
        after_filter();
        let mut denied = false;
        for cand in &self.candidates {
            // SAFETY: NUL-terminated arrays of valid C strings that outlive the call.
            unsafe { libc::execve(cand.as_ptr(), self.argv.as_ptr(), self.env.as_ptr()) };
            let err = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
            if matches!(err, libc::EACCES | libc::EPERM | libc::ENOEXEC | libc::EISDIR) {
                denied = true;
            }
        }
        let mut msg = b"paddock: ".to_vec();
        msg.extend_from_slice(self.program.as_bytes());
        if denied {
            msg.extend_from_slice(b": permission denied (not executable)\n");
            die(EXIT_NOT_EXECUTABLE, &msg)
        }
        msg.extend_from_slice(b": command not found in the sandbox\n");
        die(EXIT_NOT_FOUND, &msg)
    }
}

/// Empties the capability bounding set, then the effective, permitted and inheritable sets
/// (which clears the ambient one), so that the task's `execve` gains no capability even as
/// uid 0; true when that worked. In a user namespace bwrap (`--cap-drop ALL`) has done it
/// already and this changes nothing; as root without one bwrap leaves the bounding set
/// whole, and the plan keeps `CAP_SETPCAP` for this drop (`BwrapOp::CapAddSetpcap`), which
/// bwrap also puts in the inheritable and ambient sets. Async-signal-safe.
pub(crate) fn drop_capabilities() -> bool {
    let mut dropped = true;
    for cap in 0..64 {
        // SAFETY: prctl with integer arguments only.
        let read = unsafe { libc::prctl(libc::PR_CAPBSET_READ, cap, 0, 0, 0) };
        // Past the kernel's last capability: so is every one after it. (Reading errno
        // allocates nothing.)
        if read < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
            break;
        }
        let held = read == 1;
        // SAFETY: as above.
        if held && unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) } != 0 {
            dropped = false;
        }
    }
    // The capset header (version 3, this thread) and two all-zero data words.
    let header: [u32; 2] = [CAPABILITY_VERSION_3, 0];
    let data = [0u32; 6];
    // SAFETY: capset reads a valid header and data of version 3's size; lowering is always
    // allowed.
    let cleared = unsafe { libc::syscall(libc::SYS_capset, header.as_ptr(), data.as_ptr()) } == 0;
    dropped && cleared
}

/// `_LINUX_CAPABILITY_VERSION_3`: 64-bit sets, two data words.
pub(crate) const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// Writes `msg` to stderr and exits with `code`, async-signal-safely.
pub(crate) fn die(code: i32, msg: &[u8]) -> ! {
    // SAFETY: write and _exit are async-signal-safe; the buffer is valid.
    unsafe {
        libc::write(2, msg.as_ptr().cast(), msg.len());
        libc::_exit(code)
    }
}

/// The paths `execve` tries for `program`: itself when it has a `/`, else one per entry of
/// `path` (the default `PATH` when unset) as execvp does, an empty entry meaning the cwd.
fn candidates(program: &OsStr, path: Option<&OsStr>) -> Result<Vec<CString>, String> {
    if program.as_bytes().contains(&b'/') {
        return Ok(vec![cstring(program)?]);
    }
    if program.is_empty() {
        return Ok(Vec::new());
    }
    let path = path.unwrap_or(OsStr::new("/usr/local/bin:/usr/bin:/bin"));
    let all = path
        .as_bytes()
        .split(|b| *b == b':')
        .map(|dir| {
            let mut full = if dir.is_empty() { b".".to_vec() } else { dir.to_vec() };
            full.push(b'/');
            full.extend_from_slice(program.as_bytes());
            CString::new(full).map_err(|_| "PATH contains a NUL byte".to_owned())
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(all.into_iter().filter(may_exist).collect())
}

/// False when `candidate` is an absolute path that does not exist here. The PATH lookup
/// skips those before the fork: a failed `execve` costs several times a `stat`, and a PATH
/// of ten entries is common. Relative entries stay (the task's cwd is entered after the
/// fork), and so does anything `stat` cannot rule out: `execve` has the last word.
fn may_exist(candidate: &CString) -> bool {
    if candidate.as_bytes().first() != Some(&b'/') {
        return true;
    }
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: a NUL-terminated path and a buffer of the right size for stat to fill.
    if unsafe { libc::stat(candidate.as_ptr(), st.as_mut_ptr()) } == 0 {
        return true;
    }
    let err = std::io::Error::last_os_error().raw_os_error();
    !matches!(err, Some(libc::ENOENT) | Some(libc::ENOTDIR))
}

/// Strings and the NULL-terminated pointer array `execve` takes, made before the fork. The
/// pointers point into the strings' heap buffers, which stay put when the struct moves.
pub(crate) struct CArray {
    strings: Vec<CString>,
    ptrs: Vec<*const libc::c_char>,
}

impl CArray {
    pub(crate) fn new(strings: Vec<CString>) -> CArray {
        let ptrs = strings.iter().map(|a| a.as_ptr()).chain(std::iter::once(std::ptr::null()));
        CArray { ptrs: ptrs.collect(), strings }
    }

    pub(crate) fn as_ptr(&self) -> *const *const libc::c_char {
        debug_assert_eq!(self.ptrs.len(), self.strings.len() + 1);
        self.ptrs.as_ptr()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_lookup_skips_absolute_entries_that_do_not_exist() {
        let dir = std::env::temp_dir().join(format!("paddock-path-{}", std::process::id()));
        let (empty, found) = (dir.join("empty"), dir.join("found"));
        std::fs::create_dir_all(&empty).unwrap();
        std::fs::create_dir_all(&found).unwrap();
        std::fs::write(found.join("tool"), b"").unwrap();
        let path = format!(
            "{}:{}:{}::rel",
            dir.join("missing").display(),
            empty.display(),
            found.display()
        );
        let args = [OsStr::new("tool"), OsStr::new("-v")];
        let env = [(OsStr::new("PATH"), OsStr::new(&path))];
        // A missing directory and a directory without `tool` are skipped (ENOENT); the one
        // with it stays, and so do the relative entries, which only mean something in the
        // task's cwd.
        let launch =
            Launch::new(OsStr::new("tool"), args.into_iter(), env.into_iter(), Vec::new()).unwrap();
        let got: Vec<&[u8]> = launch.candidates.iter().map(|c| c.as_bytes()).collect();
        let existing = format!("{}/tool", found.display());
        assert_eq!(got, [existing.as_bytes(), b"./tool", b"rel/tool"]);
        assert_eq!(launch.argv.ptrs.len(), 3);
        assert!(launch.argv.ptrs[2].is_null());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
