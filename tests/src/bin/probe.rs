//! `paddock-probe`: a small program run inside the sandbox by the end-to-end tests (see
//! [`linux`] for its operations). It makes Linux system calls, so elsewhere it only says so.

#[cfg(target_os = "linux")]
#[path = "probe/linux.rs"]
mod linux;
#[cfg(target_os = "linux")]
#[path = "probe/race.rs"]
mod race;

#[cfg(target_os = "linux")]
fn main() {
    linux::main();
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("paddock-probe makes Linux system calls; it runs on Linux only");
    std::process::exit(2);
}
