//! `cargo xtask bench scale`: the start-up walk of a large project (see [`linux`]); the walk
//! is part of the Linux runtime.

#[cfg(target_os = "linux")]
#[path = "scale_bench/linux.rs"]
mod linux;

#[cfg(target_os = "linux")]
fn main() -> anyhow::Result<()> {
    linux::main()
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("the project walk this measures is Linux's");
}
