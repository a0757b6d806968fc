//! The sandbox's `/dev`: what bwrap's `--dev` makes, whoever makes it (bwrap, or the
//! supervisor from the runner's clones of the host's device nodes).

use super::{Scratch, facts, value};

pub fn dev_holds_the_devices_links_and_ptys_of_bwraps_dev() {
    // Made by the supervisor from the runner's clones where the runner may clone mounts
    // (`paddock_linux_bwrap::devices`), else by bwrap's `--dev`: the same either way.
    let s = Scratch::new("devices");
    let p = s.policy();
    let runtime = paddock_linux_bwrap::runtime::runtime_dir::RuntimeDir::create().unwrap();
    let plan = s.plan(&p, runtime.path().as_path(), &["devices"]);
    let by_supervisor = plan.device_fds.is_some();
    println!("/dev made by {}", if by_supervisor { "the supervisor" } else { "bwrap" });
    assert_eq!(by_supervisor, facts().clone_mounts, "the plan follows the host's facts");
    let out = s.run(&p, &["ls", "/dev"]);
    assert_eq!(
        value(&out, "ls"),
        "ok:.paddock-supervisor,core,fd,full,null,ptmx,pts,random,shm,stderr,stdin,stdout,tty,urandom,zero",
        "{out}"
    );
    let out = s.run(&p, &["devices"]);
    for (name, device) in
        [("null", "1:3"), ("zero", "1:5"), ("full", "1:7"), ("random", "1:8"), ("urandom", "1:9")]
    {
        assert_eq!(value(&out, name), format!("c:{device}"), "{out}");
    }
    assert_eq!(value(&out, "tty"), "c:5:0", "{out}");
    assert_eq!(value(&out, "write_null"), "ok", "{out}");
    assert_eq!(value(&out, "write_full"), "err:28", "{out}");
    assert_eq!(value(&out, "read_zero"), "Ok([0, 0, 0, 0])", "{out}");
    // A fresh devpts instance, as bwrap mounts one: no host terminal is reachable.
    let pts = value(&out, "pts");
    assert!(pts.starts_with("devpts "), "{out}");
    assert!(pts.contains("mode=620") && pts.contains("ptmxmode=666"), "{out}");
    let out = s.run(&p, &["ls", "/dev/pts"]);
    assert_eq!(value(&out, "ls"), "ok:ptmx", "{out}");
    drop(runtime);
}
