//! Network walls on a host without network namespaces: host loopback, sysctls.

use std::net::TcpListener;

use crate::util::*;

#[test]
fn mac04_host_loopback_is_refused_unless_the_port_is_granted() {
    if !require_os_sandbox() {
        return;
    }
    let f = Fixture::new("mac04");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let script = format!("/usr/bin/nc -z -G 2 127.0.0.1 {port}");
    let mut p = f.p0();
    p.local_ports = vec![port.wrapping_add(1)];
    assert_denied(&f.run(&p, &script), "host loopback service with local-ports only");
    p.host_ports = vec![port];
    assert_ok(&f.run(&p, &script), "a granted host port");
}

#[test]
fn system_info_is_a_grant() {
    if !require_os_sandbox() {
        return;
    }
    let f = Fixture::new("sysinfo");
    let mut p = f.p0();
    assert_denied(
        &f.run(&p, "/usr/sbin/sysctl -n kern.hostname"),
        "kern.hostname without system-info",
    );
    p.system_info = true;
    assert_ok(&f.run(&p, "/usr/sbin/sysctl -n kern.hostname"), "kern.hostname with system-info");
}

/// Runs `script` under `policy` through the executor, a domain list served by its own
/// listener on a shared proxy; stdout and stderr captured.
fn run_executor(
    f: &Fixture,
    policy: &paddock_policy::ResolvedPolicy,
    script: &str,
) -> paddock_macos_seatbelt::run::Ran {
    use paddock_macos_seatbelt::run::{
        Egress, RunOptions, SharedProxy, Stdio, TaskRules, run_plan,
    };
    let mut opts = RunOptions::new().expect("control");
    opts.stdio = Stdio::PIPED;
    opts.log = None;
    opts.egress = TaskRules::from_policy(&policy.network)
        .map(|rules| Egress { proxy: SharedProxy::new(), rules });
    run_plan(&f.plan(policy, script), &f.task(script), &opts).expect("run")
}

#[test]
fn network_off_reaches_nothing_and_a_domain_list_only_its_names_through_the_proxy() {
    if !require_os_sandbox() {
        return;
    }
    let f = Fixture::new("net-filtered");
    // A host service standing in for "the network": granted by address and port, it is
    // reached only through the proxy (curl without the loopback NO_PROXY the task gets);
    // directly, as with the network off, it is refused.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            use std::io::{Read, Write};
            let mut conn = conn;
            let mut buf = [0u8; 2048];
            let _ = conn.read(&mut buf);
            let _ = conn.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\nConnection: close\r\n\r\nserved",
            );
        }
    });
    let direct = format!("/usr/bin/nc -z -G 2 127.0.0.1 {port}");
    let off = f.p0();
    assert_denied(&f.run(&off, &direct), "loopback with the network off");
    assert_denied(&f.run(&off, "/usr/bin/nc -z -G 2 1.1.1.1 443"), "the internet, network off");

    let mut filtered = f.p0();
    let allow = vec![paddock_policy::DomainPattern::parse(&format!("127.0.0.1:{port}")).unwrap()];
    filtered.network = paddock_policy::NetworkPolicy::Filtered { allow, deny: vec![] };
    let script = format!(
        "{direct} && echo direct-reached; \
         /usr/bin/env -u NO_PROXY -u no_proxy /usr/bin/curl -s -m 5 -x \"$HTTP_PROXY\" \
         http://127.0.0.1:{port}/ ; echo; \
         /usr/bin/curl -s -m 5 -o /dev/null -w '%{{http_code}}\\n' -x \"$HTTP_PROXY\" http://refused.test/"
    );
    let ran = run_executor(&f, &filtered, &script);
    let out = String::from_utf8_lossy(&ran.outcome.stdout).into_owned();
    assert!(!out.contains("direct-reached"), "a granted port was reached around the proxy: {out}");
    assert!(out.contains("served"), "the granted destination through the proxy: {out}");
    assert!(out.lines().any(|l| l == "403"), "a refused name: {out}");
    assert!(
        ran.refusals.iter().any(|r| r.violation.target.as_deref() == Some("refused.test:80")),
        "{:?}",
        ran.refusals
    );
}

#[test]
fn a_local_port_serves_a_dual_stack_server_and_no_other_port() {
    if !require_os_sandbox() {
        return;
    }
    let f = Fixture::new("local-ports");
    let (granted, other) = (free_port(), free_port());
    let mut p = f.p0();
    p.local_ports = vec![granted];
    // Python's http.server binds the dual-stack `::` by default.
    let script = format!(
        "/usr/bin/python3 -m http.server {granted} >/dev/null 2>&1 & a=$!; \
         /usr/bin/python3 -m http.server {other} --bind 127.0.0.1 >/dev/null 2>&1 & b=$!; \
         sleep 3; kill $a $b"
    );
    let handle = std::thread::spawn({
        let plan = f.plan(&p, &script);
        move || perform(&plan)
    });
    std::thread::sleep(std::time::Duration::from_millis(2000));
    let reach = |port: u16| std::net::TcpStream::connect(("127.0.0.1", port)).is_ok();
    let (granted_ok, other_ok) = (reach(granted), reach(other));
    let _ = handle.join();
    assert!(granted_ok, "the granted port's dual-stack server is not reachable");
    assert!(!other_ok, "an ungranted port was served");
}

#[test]
fn exit_codes_and_a_timeout_are_as_on_linux() {
    use paddock_macos_seatbelt::run::{RunOptions, Stdio, run_plan};
    if !require_os_sandbox() {
        return;
    }
    let f = Fixture::new("exit");
    let p = f.p0();
    for (script, code) in [("exit 3", 3), ("kill -TERM $$", 128 + 15), ("exec /nonexistent", 127)] {
        let mut opts = RunOptions::new().expect("control");
        opts.log = None;
        opts.stdio = Stdio::PIPED;
        let ran = run_plan(&f.plan(&p, script), &f.task(script), &opts).expect("run");
        assert_eq!(ran.outcome.exit_code, code, "{script}");
    }
    let mut opts = RunOptions::new().expect("control");
    opts.log = None;
    opts.timeout = Some(std::time::Duration::from_secs(1));
    opts.grace = std::time::Duration::from_millis(300);
    let script = "trap '' TERM; sleep 30";
    let ran = run_plan(&f.plan(&p, script), &f.task(script), &opts).expect("run");
    assert_eq!(ran.outcome.exit_code, 124);
    assert!(ran.outcome.timed_out);
}

fn free_port() -> u16 {
    paddock_test_support::free_port()
}
