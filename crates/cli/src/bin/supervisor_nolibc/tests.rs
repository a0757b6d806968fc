//! The payload and the constants against the runner's side (`paddock_linux_bwrap`).

use std::ffi::{CStr, CString, OsString};

use paddock_linux_bwrap::nolibc::encode;
use paddock_linux_bwrap::payload::{Bytes, SupervisorPayload};

use crate::constants::*;
use crate::payload::{self, parse};

fn payload(program: &str, path: Option<&str>) -> SupervisorPayload {
    let mut env = vec![(Bytes("HOME".into()), Bytes("/home/u".into()))];
    if let Some(path) = path {
        env.push((Bytes("PATH".into()), Bytes("/nowhere".into())));
        env.push((Bytes("PATH".into()), Bytes(path.into())));
    }
    SupervisorPayload {
        version: paddock_linux_bwrap::payload::PAYLOAD_VERSION.to_owned(),
        program: Bytes(program.into()),
        args: vec![Bytes(program.into()), Bytes("-c".into()), Bytes("".into())],
        env,
        cwd: Bytes("/work/p".into()),
        seccomp_fd: 5,
        signal_fd: Some(6),
        ..Default::default()
    }
}

fn strings(array: &[*const u8]) -> Vec<String> {
    let Some((last, items)) = array.split_last() else { panic!("an empty array") };
    assert!(last.is_null(), "NULL-terminated");
    items
        .iter()
        // SAFETY: the parser's pointers point at NUL-terminated fields of the buffer.
        .map(|&p| unsafe { CStr::from_ptr(p.cast()) }.to_string_lossy().into_owned())
        .collect()
}

#[test]
fn what_the_runner_encodes_is_what_this_supervisor_reads() {
    let bytes = encode(&payload("sh", Some("/usr/bin:/bin")), false).unwrap();
    let p = parse(&bytes).unwrap();
    assert_eq!(p.version, PAYLOAD_VERSION.as_bytes());
    assert_eq!(p.cwd.to_bytes(), b"/work/p");
    assert_eq!((p.seccomp_fd, p.signal_fd), (5, Some(6)));
    assert_eq!(p.program.to_bytes(), b"sh");
    assert_eq!(strings(p.argv), ["sh", "-c", ""]);
    assert_eq!(strings(p.envp), ["HOME=/home/u", "PATH=/nowhere", "PATH=/usr/bin:/bin"]);
    // The last PATH, as `paddock-supervisor` takes it.
    assert_eq!(p.path, Some(b"/usr/bin:/bin".as_slice()));
    let without =
        encode(&SupervisorPayload { signal_fd: None, ..payload("sh", None) }, false).unwrap();
    let p = parse(&without).unwrap();
    assert_eq!((p.signal_fd, p.path), (None, None));
}

#[test]
fn the_inner_mounts_are_read_in_order_and_a_malformed_one_is_refused() {
    use paddock_linux_bwrap::payload::InnerMount;
    let mount = |path: &str, read_only, mask, empty_dir| InnerMount {
        mask,
        empty_dir,
        ..InnerMount::on_itself(path, read_only)
    };
    let devices = InnerMount { devices: true, ..mount("/dev", false, false, false) };
    let grant = InnerMount { grant_clone: true, ..mount("/work/p", false, false, false) };
    let in_clone =
        InnerMount { in_grant_clone: true, ..mount("/work/p/.zshrc", true, false, false) };
    let inner = vec![
        devices,
        grant,
        in_clone,
        mount("/work/p/.git", false, false, false),
        mount("/work/p/.bashrc", true, false, false),
        mount("/work/p/key.pem", true, true, false),
        mount("/home/u/.ssh", true, false, true),
    ];
    let bytes =
        encode(&SupervisorPayload { inner_mounts: inner, ..payload("sh", None) }, false).unwrap();
    let p = parse(&bytes).unwrap();
    assert_eq!(
        strings(p.inner_mounts),
        [
            "v/dev",
            "c/work/p",
            "R/work/p/.zshrc",
            "w/work/p/.git",
            "r/work/p/.bashrc",
            "m/work/p/key.pem",
            "e/home/u/.ssh"
        ]
    );
    assert_eq!(p.program.to_bytes(), b"sh");
    assert_eq!(
        strings(parse(&encode(&payload("sh", None), false).unwrap()).unwrap().inner_mounts),
        [""; 0]
    );
    // A kind other than r or w, or a relative path: refused, nothing mounted.
    for bad in [&b"x/work/p/.git"[..], b"rwork/p", b"r", b""] {
        let mut odd = Vec::new();
        let good = b"\0w/work/p/.git\0";
        let at = bytes.windows(good.len()).position(|w| w == good).unwrap() + 1;
        odd.extend_from_slice(&bytes[..at]);
        odd.extend_from_slice(bad);
        odd.extend_from_slice(&bytes[at + good.len() - 2..]);
        assert_eq!(parse(&odd).unwrap_err(), "a malformed inner mount", "{bad:?}");
    }
}

#[test]
fn a_payload_cut_short_or_padded_or_of_another_kind_is_refused() {
    let bytes = encode(&payload("sh", None), false).unwrap();
    for cut in 1..bytes.len() {
        assert!(parse(&bytes[..cut]).is_err(), "cut at {cut}");
    }
    let mut padded = bytes.clone();
    padded.extend_from_slice(b"x\0");
    assert_eq!(parse(&padded).unwrap_err(), "more fields than counted");
    let json = payload("sh", None).to_bytes();
    assert!(parse(&json).is_err());
    assert!(payload::parse_int(b"12a").is_none() && payload::parse_int(b"").is_none());
    assert!(payload::parse_int(b"1234567890").is_none(), "no overflow");
}

#[test]
fn an_observed_payload_names_the_filter_and_the_server_with_room_for_the_task() {
    let observed =
        SupervisorPayload { record_fd: Some(7), record_connects: true, ..payload("sh", None) };
    let bytes = encode(&observed, true).unwrap();
    let p = parse(&bytes).unwrap();
    let n = p.notify.expect("an observed payload has its notifier");
    assert_eq!(
        (n.filter_fd, n.server_fd),
        (paddock_linux_bwrap::NOTIFY_BPF_FD, paddock_linux_bwrap::NOTIFIER_EXE_FD)
    );
    let argv = &n.server_argv[..n.server_argc];
    let mut given: Vec<OsString> =
        strings(&[argv, &[std::ptr::null()]].concat()).into_iter().map(OsString::from).collect();
    assert_eq!(given[..2], ["paddock-supervisor", "__serve-notify"]);
    // Room for the four the supervisor adds and the NULL, all null until then.
    assert_eq!(n.server_argv.len(), n.server_argc + 5);
    assert!(n.server_argv[n.server_argc..].iter().all(|p| p.is_null()));
    // What it adds makes a command line `paddock-supervisor` takes.
    given.extend(["--task", "2", "--listener", "3"].map(OsString::from));
    assert_eq!(
        paddock_linux_bwrap::run_hidden_subcommand(&given),
        Some(125),
        "parsed, then refused outside a sandbox (not pid 1)"
    );
    // The same task as without the observers.
    assert_eq!(strings(p.argv), ["sh", "-c", ""]);
    // Not observed: no notifier; observed without a record descriptor: no payload.
    assert!(parse(&encode(&payload("sh", None), false).unwrap()).unwrap().notify.is_none());
    assert!(encode(&payload("sh", None), true).is_none());
    assert!(encode(&observed, false).is_none());
}

#[test]
fn a_filter_without_its_server_is_refused() {
    let bytes = encode(&payload("sh", None), false).unwrap();
    let text = String::from_utf8(bytes).unwrap();
    let half = text.replacen(concat!("\0-\0-\0-\0", "0\0"), concat!("\0-\0", "10\0-\0", "0\0"), 1);
    assert_ne!(half, text, "the notifier's fields are where they are expected");
    assert!(parse(half.as_bytes()).unwrap_err().contains("notification filter"));
}

#[test]
fn the_shared_constants_are_the_runners() {
    use paddock_linux_bwrap::supervisor as full;
    assert_eq!(EXIT_SUPERVISOR, full::EXIT_SUPERVISOR);
    assert_eq!(EXIT_NOT_EXECUTABLE, full::EXIT_NOT_EXECUTABLE);
    assert_eq!(EXIT_NOT_FOUND, full::EXIT_NOT_FOUND);
    assert_eq!(STARTED, full::STARTED);
    assert_eq!(EXITED, full::EXITED);
    let end = crate::supervise::task_end(137, 1_234_567, 9000);
    assert_eq!(end.len(), full::TaskEnd::LEN);
    assert_eq!(
        full::TaskEnd::decode(&end),
        Some(full::TaskEnd {
            code: 137,
            cpu_time: std::time::Duration::from_micros(1_234_567),
            max_rss_kib: 9000
        })
    );
    assert_eq!(POLITE_SIGNALS, full::POLITE_SIGNALS);
    assert_eq!(PAYLOAD_VERSION, paddock_linux_bwrap::payload::PAYLOAD_VERSION);
    assert_eq!(SUPERVISE_SUBCOMMAND, paddock_linux_bwrap::SUPERVISE_SUBCOMMAND.as_bytes());
    assert_eq!(INNER_MASK_PATH.to_bytes(), paddock_linux_bwrap::INNER_MASK_PATH.as_bytes());
    assert_eq!(DEVICES_FD, paddock_linux_bwrap::DEVICES_FD);
    assert_eq!(GRANT_MOUNTED, paddock_linux_bwrap::grant_clones::MOUNTED);
    for (path, grant) in
        [(c"/p/.git", c"/p"), (c"/p", c"/p"), (c"/pp/x", c"/p"), (c"/p/a/b", c"/p")]
    {
        assert_eq!(
            crate::inner::is_below(path, grant),
            paddock_linux_bwrap::grant_clones::is_below(path, grant),
            "{path:?} below {grant:?}"
        );
    }
    assert_eq!(CONSOLE_FD, paddock_linux_bwrap::devices::CONSOLE_FD);
    assert_eq!(crate::devices::DEVICES, paddock_linux_bwrap::devices::DEVICES);
    assert_eq!(crate::devices::LINKS, paddock_linux_bwrap::devices::LINKS);
    assert_eq!(payload::MAGIC, paddock_linux_bwrap::nolibc::MAGIC.as_bytes());
    let argv = paddock_linux_bwrap::bwrap_argv();
    let supervisor_argv: Vec<CString> =
        argv[3..].iter().map(|a: &OsString| CString::new(a.as_encoded_bytes()).unwrap()).collect();
    let argv: Vec<&CStr> = supervisor_argv.iter().map(CString::as_c_str).collect();
    assert_eq!(crate::supervise::parse_args(&argv).unwrap(), paddock_linux_bwrap::SUPERVISOR_FD);
}

#[test]
fn exit_codes_follow_the_shell() {
    for status in [0, 3 << 8, 255 << 8, libc::SIGKILL, libc::SIGTERM | 0x80, 0x7f, 0x137f] {
        let full = paddock_linux_bwrap::supervisor::status_code(status);
        assert_eq!(crate::supervise::status_code(status), full, "{status:#x}");
    }
    assert_eq!(crate::supervise::status_code(3 << 8), 3);
    assert_eq!(crate::supervise::status_code(libc::SIGKILL), 137);
}

#[test]
fn outside_a_sandbox_it_runs_nothing() {
    // A test process is never pid 1.
    assert_eq!(crate::supervise::main(&[c"x", c"__supervise", c"--payload-fd", c"0"]), 125);
}

#[test]
fn path_lookup_skips_absolute_entries_that_do_not_exist() {
    let dir = std::env::temp_dir().join(format!("paddock-nolibc-path-{}", std::process::id()));
    let found = dir.join("found");
    std::fs::create_dir_all(&found).unwrap();
    std::fs::write(found.join("tool"), b"").unwrap();
    let path = format!("{}:{}::rel", dir.join("missing").display(), found.display());
    let bytes = encode(&payload("tool", Some(&path)), false).unwrap();
    let got = strings(crate::supervise::candidates(&parse(&bytes).unwrap()).unwrap());
    assert_eq!(got, [format!("{}/tool", found.display()), "./tool".into(), "rel/tool".into()]);
    let bytes = encode(&payload("/bin/sh", Some(&path)), false).unwrap();
    assert_eq!(
        strings(crate::supervise::candidates(&parse(&bytes).unwrap()).unwrap()),
        ["/bin/sh"]
    );
    let bytes = encode(&payload("", None), false).unwrap();
    assert!(strings(crate::supervise::candidates(&parse(&bytes).unwrap()).unwrap()).is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn messages_are_cut_to_their_buffer() {
    let mut msg = crate::message::Message::new();
    msg.bytes(&[b'x'; 2000]);
    assert_eq!(msg.as_bytes().len(), 1024);
}

#[test]
fn mount_identities_are_read_as_the_runner_writes_them_and_each_must_be_a_mount_point() {
    use paddock_linux_bwrap::mount_ids::{MountId, encode as encode_ids, request};
    use payload::{MountIdsError, check_mount_ids};
    let p = paddock_linux_bwrap::payload::SupervisorPayload {
        mount_ids_fd: Some(9),
        ..payload("sh", None)
    };
    assert_eq!(parse(&encode(&p, false).unwrap()).unwrap().mount_ids_fd, Some(9));
    let ids = encode_ids(&[
        MountId { path: "/p/build".into(), dev: 7, ino: 42 },
        MountId { path: "/x".into(), dev: 7, ino: 43 },
    ]);
    // Device, inode and mount as the runner recorded and bwrap mounted them.
    let world = |path: &CStr| match path.to_bytes() {
        b"/p/build" => Some((7, 42, Some(3))),
        b"/p" => Some((7, 40, Some(2))),
        b"/x" => Some((7, 43, Some(4))),
        b"/" => Some((7, 2, Some(1))),
        _ => None,
    };
    assert_eq!(check_mount_ids(&ids, world), Ok(()));
    // Another file there (a symlink, a new directory): refused, naming it.
    let swapped = |path: &CStr| {
        if path.to_bytes() == b"/p/build" { Some((7, 99, Some(3))) } else { world(path) }
    };
    assert!(
        matches!(check_mount_ids(&ids, swapped), Err(MountIdsError::Differs(p)) if p.to_bytes() == b"/p/build")
    );
    // The same file, but bwrap's mount landed elsewhere (no mount of its own there).
    let unmounted = |path: &CStr| {
        if path.to_bytes() == b"/p/build" { Some((7, 42, Some(2))) } else { world(path) }
    };
    assert!(matches!(check_mount_ids(&ids, unmounted), Err(MountIdsError::Differs(_))));
    // Gone: refused. A kernel without mount ids: the identity alone.
    assert!(check_mount_ids(&ids, |_| None).is_err());
    let no_mnt = |path: &CStr| world(path).map(|(d, i, _)| (d, i, None));
    assert_eq!(check_mount_ids(&ids, no_mnt), Ok(()));
    // A request the runner never stamped, cut short, or padded: refused.
    let unstamped = request(&[paddock_policy::AbsPathBuf::new_lexical("/p/build").unwrap()]);
    assert!(
        matches!(check_mount_ids(&unstamped, world), Err(MountIdsError::Malformed(w)) if w.contains("never recorded"))
    );
    for cut in 1..ids.len() {
        assert!(check_mount_ids(&ids[..cut], world).is_err(), "cut at {cut}");
    }
    assert!(check_mount_ids(&[&ids[..], b"x\0"].concat(), world).is_err());
}

#[test]
fn an_executable_open_for_writing_a_moment_is_executed_once_it_is_closed() {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let dir = std::env::temp_dir().join(format!("paddock-nolibc-txtbsy-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // A copy of sh (a binary: a script executed by descriptor needs /dev/fd).
    let script = dir.join("sh");
    let mut writer = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o755)
        .custom_flags(libc::O_CLOEXEC)
        .open(&script)
        .unwrap();
    writer.write_all(&std::fs::read("/bin/sh").unwrap()).unwrap();
    let path = CString::new(script.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: open(O_PATH) of a NUL-terminated path.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    assert!(fd >= 0);
    let argv = [c"sh", c"-c", c"exit 7"].map(|a| a.as_ptr().cast::<u8>());
    let argv = [argv[0], argv[1], argv[2], std::ptr::null()];
    let envp = [std::ptr::null::<u8>()];
    // SAFETY: the child only makes system calls (execveat, poll, exit_group) on data made
    // before the fork; the writer stays open in the parent alone (close-on-exec is moot:
    // the child's copy is closed right away).
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: closing the child's copy of the writer, as a child that executes would.
        unsafe { libc::close(writer.as_raw_fd()) };
        let crate::sys::Errno(e) = crate::sys::execveat_when_free(fd, argv.as_ptr(), envp.as_ptr());
        crate::sys::exit(100 + e);
    }
    std::thread::sleep(std::time::Duration::from_millis(30));
    drop(writer);
    let mut status = 0;
    // SAFETY: waitpid on our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    // 126 (100 + ETXTBSY) had it given up at once.
    assert_eq!(libc::WEXITSTATUS(status), 7, "status {status}");
    let _ = std::fs::remove_dir_all(&dir);
}
