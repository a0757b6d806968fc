//! The `paddock` binary's own parts, beside the library: the command line, config
//! discovery with the flags laid over it, printing, the `--report` file, and the mapping of
//! `PADDOCK_*` variables to builder options. Not a stable API.

pub mod args;
pub mod commands;
#[cfg(target_os = "linux")]
pub mod learn;
pub mod load;

/// The arguments C's `main` was given, as std would read them. The binaries start at C's
/// `main` (`no_main`, see their docs), and std reads the arguments on its own only with
/// glibc, which passes them to static constructors; with another C library
/// `std::env::args_os` is empty there.
///
/// # Safety
/// `argv` holds `argc` pointers to NUL-terminated strings, as C's `main` receives them.
#[cfg(unix)]
pub unsafe fn args_of_c_main(
    argc: std::ffi::c_int,
    argv: *const *const std::ffi::c_char,
) -> Vec<std::ffi::OsString> {
    use std::os::unix::ffi::OsStrExt;
    let count = usize::try_from(argc).unwrap_or(0);
    (0..count)
        .filter_map(|i| {
            // SAFETY: i < argc, so `argv[i]` is one of C's `main` arguments (the caller's
            // promise); a null one (never passed by the kernel) is skipped.
            let arg = unsafe { *argv.add(i) };
            // SAFETY: a non-null argument is a NUL-terminated string that lives as long as
            // the process.
            (!arg.is_null()).then(|| unsafe { std::ffi::CStr::from_ptr(arg) })
        })
        .map(|arg| std::ffi::OsStr::from_bytes(arg.to_bytes()).to_os_string())
        .collect()
}
