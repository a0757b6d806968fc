//! The in-sandbox probe: `__probe WHAT [ARG]` does one thing and prints `key=value` lines
//! about what happened (errno numbers, file lists), for the tests to assert on.

use std::ffi::OsString;

fn errno_of(rc: i64) -> i32 {
    if rc < 0 { std::io::Error::last_os_error().raw_os_error().unwrap_or(-1) } else { 0 }
}

fn syscall(nr: i64, a: [i64; 4]) -> i32 {
    // SAFETY: probe syscalls with integer or valid-buffer arguments; only the errno matters.
    errno_of(unsafe { libc::syscall(nr, a[0], a[1], a[2], a[3]) })
}

/// Runs the probe and returns the exit code.
pub fn main(args: &[OsString]) -> i32 {
    let what = args.first().and_then(|a| a.to_str()).unwrap_or("");
    let arg = args.get(1).cloned().unwrap_or_default();
    let mut buf = [0i64; 32];
    let ptr = buf.as_mut_ptr() as i64;
    match what {
        "syscalls" => {
            println!("io_uring_setup={}", syscall(libc::SYS_io_uring_setup, [1, ptr, 0, 0]));
            println!("tiocsti={}", syscall(libc::SYS_ioctl, [0, 0x5412, ptr, 0]));
            println!("tiocsti_hi={}", syscall(libc::SYS_ioctl, [0, 0x5412 | 1 << 32, ptr, 0]));
            println!("socket_unix={}", syscall(libc::SYS_socket, [1, 1, 0, 0]));
            println!("socketpair_dgram={}", syscall(libc::SYS_socketpair, [1, 2, 0, ptr]));
            println!("socketpair_stream={}", syscall(libc::SYS_socketpair, [1, 1, 0, ptr]));
            println!("socket_vsock={}", syscall(libc::SYS_socket, [40, 1, 0, 0]));
            println!("keyctl={}", syscall(libc::SYS_keyctl, [0, 0, 0, 0]));
            println!("unshare_user={}", syscall(libc::SYS_unshare, [0x1000_0000, 0, 0, 0]));
            let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
            for line in
                status.lines().filter(|l| l.starts_with("Seccomp:") || l.starts_with("NoNewPrivs:"))
            {
                println!("{}", line.replace(":\t", "="));
            }
            0
        }
        "fds" => {
            let mut fds: Vec<String> = std::fs::read_dir("/proc/self/fd")
                .map(|d| {
                    d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect()
                })
                .unwrap_or_default();
            fds.sort();
            // One of them is the directory listing itself.
            println!("fds={}", fds.join(","));
            0
        }
        "devices" => {
            use std::os::unix::fs::{FileTypeExt, MetadataExt};
            for name in ["null", "zero", "full", "random", "urandom", "tty"] {
                let path = format!("/dev/{name}");
                match std::fs::metadata(&path) {
                    Ok(m) if m.file_type().is_char_device() => {
                        let (major, minor) = (libc::major(m.rdev()), libc::minor(m.rdev()));
                        println!("{name}=c:{major}:{minor}");
                    }
                    Ok(_) => println!("{name}=not-a-device"),
                    Err(e) => println!("{name}=err:{}", e.raw_os_error().unwrap_or(-1)),
                }
            }
            let result = |r: std::io::Result<()>| match r {
                Ok(()) => "ok".to_owned(),
                Err(e) => format!("err:{}", e.raw_os_error().unwrap_or(-1)),
            };
            println!("write_null={}", result(std::fs::write("/dev/null", "x")));
            println!("write_full={}", result(std::fs::write("/dev/full", "x")));
            let zeros = std::fs::File::open("/dev/zero").and_then(|f| {
                let mut four = [1u8; 4];
                std::io::Read::read_exact(&mut &f, &mut four).map(|()| four)
            });
            println!("read_zero={:?}", zeros.map_err(|e| e.raw_os_error()));
            let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
            // The last: the one on top (the host's, under the sandbox's `/dev`, come first).
            let pts = mounts.lines().rev().find(|l| l.split(' ').nth(4) == Some("/dev/pts"));
            println!("pts={}", pts.and_then(|l| l.split(" - ").nth(1)).unwrap_or(""));
            0
        }
        "read" => {
            match std::fs::read(&arg) {
                Ok(b) => println!("read=ok:{}", String::from_utf8_lossy(&b).trim()),
                Err(e) => println!("read=err:{}", e.raw_os_error().unwrap_or(-1)),
            }
            0
        }
        "ls" => {
            match std::fs::read_dir(&arg) {
                Ok(d) => {
                    let mut names: Vec<String> =
                        d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
                    names.sort();
                    println!("ls=ok:{}", names.join(","));
                }
                Err(e) => println!("ls=err:{}", e.raw_os_error().unwrap_or(-1)),
            }
            0
        }
        "write" => {
            match std::fs::write(&arg, "pwn") {
                Ok(()) => println!("write=ok"),
                Err(e) => println!("write=err:{}", e.raw_os_error().unwrap_or(-1)),
            }
            0
        }
        "mount" => {
            // The options of the topmost mount at the path (`/proc/self/mountinfo`'s sixth
            // field).
            let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
            let at = arg.to_string_lossy();
            let found = info.lines().rev().find_map(|line| {
                let fields: Vec<&str> = line.split(' ').collect();
                (fields.get(4) == Some(&at.as_ref())).then(|| fields.get(5).map(|o| o.to_string()))
            });
            match found.flatten() {
                Some(options) => println!("mount=ok:{options}"),
                None => println!("mount=none"),
            }
            0
        }
        "mkdir" => {
            match std::fs::create_dir(&arg) {
                Ok(()) => println!("mkdir=ok"),
                Err(e) => println!("mkdir=err:{}", e.raw_os_error().unwrap_or(-1)),
            }
            0
        }
        "rename" => {
            let to = args.get(2).cloned().unwrap_or_default();
            match std::fs::rename(&arg, &to) {
                Ok(()) => println!("rename=ok"),
                Err(e) => println!("rename=err:{}", e.raw_os_error().unwrap_or(-1)),
            }
            0
        }
        "connect" => {
            let addr: std::net::SocketAddr =
                arg.to_str().and_then(|a| a.parse().ok()).unwrap_or(([127, 0, 0, 1], 1).into());
            match std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(2)) {
                Ok(_) => println!("connect=ok"),
                Err(e) => println!("connect=err:{}", e.raw_os_error().unwrap_or(-1)),
            }
            0
        }
        "proc1" => {
            let env = std::fs::read("/proc/1/environ");
            println!(
                "environ={}",
                match &env {
                    Ok(b) => String::from_utf8_lossy(b).replace('\0', " "),
                    Err(e) => format!("err:{}", e.raw_os_error().unwrap_or(-1)),
                }
            );
            let cmd = std::fs::read("/proc/1/cmdline").unwrap_or_default();
            println!("cmdline={}", String::from_utf8_lossy(&cmd).replace('\0', " "));
            let pids: Vec<String> = std::fs::read_dir("/proc")
                .map(|d| {
                    d.flatten()
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .filter(|n| n.chars().all(|c| c.is_ascii_digit()))
                        .collect()
                })
                .unwrap_or_default();
            println!("pids={}", pids.len());
            println!("tmpdir={}", std::env::var("TMPDIR").unwrap_or_default());
            println!("own_env_secret={}", std::env::var("PADDOCK_TEST_SECRET").is_ok());
            0
        }
        "sleep" => {
            std::thread::sleep(std::time::Duration::from_secs(600));
            0
        }
        "exit" => arg.to_str().and_then(|a| a.parse().ok()).unwrap_or(0),
        "leave-sleeper" => {
            // Out of the task's process group, so that only the end of the whole sandbox
            // reaches it; not waited for.
            use std::os::unix::process::CommandExt;
            #[allow(clippy::disallowed_methods)] // the probe, inside the sandbox
            let spawned = std::process::Command::new(std::env::current_exe().unwrap())
                .args(["__probe", "sleep"])
                .arg(arg)
                .process_group(0)
                .spawn();
            if spawned.is_ok() { 5 } else { 2 }
        }
        _ => {
            eprintln!("unknown probe {what:?}");
            2
        }
    }
}
