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
