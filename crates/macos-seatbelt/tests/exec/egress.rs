//! A domain list on macOS: the task reaches the network only through its own listener on
//! the shared egress proxy, on the loopback port its profile allows; refusals come back
//! with the run, and a busy port stops the run before the task.

use super::*;
use paddock_macos_seatbelt::proxy_port;
use paddock_macos_seatbelt::run::{Egress, SharedProxy, TaskRules};
use paddock_policy::DomainPattern;
use std::io::{Read, Write};

fn filtered(s: &Stage, allow: &[&str]) -> ResolvedPolicy {
    let mut p = policy(&s.proj);
    let allow = allow.iter().map(|a| DomainPattern::parse(a).unwrap()).collect();
    p.network = NetworkPolicy::Filtered { allow, deny: vec![] };
    p
}

fn egress(proxy: &SharedProxy, policy: &ResolvedPolicy) -> Egress {
    Egress { proxy: proxy.clone(), rules: TaskRules::from_policy(&policy.network).unwrap() }
}

/// An HTTP GET of `url` through `$HTTP_PROXY`, printing the status line: a shell task
/// without curl (the probe is `/dev/tcp`-free `sh`, so python3 speaks HTTP).
fn get_via_proxy(url: &str) -> String {
    format!(
        "/usr/bin/python3 -c \"import os,socket,sys; h,p=os.environ['HTTP_PROXY'][7:].split(':'); \
         c=socket.create_connection((h,int(p)),5); c.sendall(b'GET {url} HTTP/1.1\\r\\nHost: ' + \
         b'{host}' + b'\\r\\nConnection: close\\r\\n\\r\\n'); \
         print(c.recv(4096).split(b'\\r\\n')[0].decode())\"",
        host = url.trim_start_matches("http://").split('/').next().unwrap_or_default(),
    )
}

#[test]
fn a_domain_list_goes_through_the_tasks_own_proxy_port_and_refusals_come_back() {
    if !paddock_test_support::available(
        Path::new("/usr/bin/python3").exists(),
        "python3 speaks HTTP to the proxy",
    ) {
        return;
    }
    // A granted destination on the host's loopback, answering once.
    let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    let served = std::thread::spawn(move || {
        let (mut c, _) = server.accept().unwrap();
        let mut buf = [0u8; 1024];
        let _ = c.read(&mut buf).unwrap();
        c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
            .unwrap();
    });
    let s = Stage::new("egress");
    let policy = filtered(&s, &[&format!("127.0.0.1:{port}")]);
    let granted = get_via_proxy(&format!("http://127.0.0.1:{port}/"));
    let refused = get_via_proxy("http://refused.test/");
    let task = s.sh(&format!("echo \"$HTTP_PROXY\"; {granted}; {refused}"));
    let plan = MacosSeatbelt::new().plan(&policy, &task, &HostFacts::default()).unwrap();
    let proxy = SharedProxy::new();
    let mut opts = s.opts();
    opts.egress = Some(egress(&proxy, &policy));
    s.log_streaming(&task);
    let ran = run_plan(&plan, &task, &opts).unwrap();
    served.join().unwrap();

    let out = text(&ran.outcome.stdout);
    let lines: Vec<&str> = out.lines().collect();
    let expected_port = proxy_port(&task);
    let proxy_url = format!("http://127.0.0.1:{expected_port}");
    assert_eq!(lines.first().copied(), Some(proxy_url.as_str()), "{out}");
    assert!(lines.get(1).is_some_and(|l| l.contains(" 200")), "granted: {out}");
    assert!(lines.get(2).is_some_and(|l| l.contains(" 403")), "refused: {out}");
    assert_eq!(ran.outcome.exit_code, 0, "{}", text(&ran.outcome.stderr));
    let targets: Vec<_> = ran.refusals.iter().filter_map(|r| r.violation.target.clone()).collect();
    assert_eq!(targets, ["refused.test:80"]);
    assert_eq!(ran.refusals[0].violation.kind, ViolationKind::Network);
    // The task's listener is gone with the run, and so is the proxy no task holds.
    assert!(std::net::TcpStream::connect(("127.0.0.1", expected_port)).is_err());
    assert!(!proxy.running());
}

#[test]
fn a_busy_proxy_port_stops_the_run_before_the_task() {
    let s = Stage::new("egress-busy");
    let policy = filtered(&s, &["allowed.test"]);
    let marker = s.proj.join("ran");
    let task = s.sh(&format!("touch {}", q(&marker)));
    let plan = MacosSeatbelt::new().plan(&policy, &task, &HostFacts::default()).unwrap();
    // Someone else holds the task's port: never serve the task another's proxy.
    let Ok(_holder) = std::net::TcpListener::bind(("127.0.0.1", proxy_port(&task))) else {
        paddock_test_support::skip("the task's proxy port is in use by another program", None);
        return;
    };
    let mut opts = s.opts();
    opts.egress = Some(egress(&SharedProxy::new(), &policy));
    s.log_streaming(&task);
    let err = run_plan(&plan, &task, &opts).unwrap_err();
    assert!(err.to_string().contains(&format!("127.0.0.1:{}", proxy_port(&task))), "{err}");
    assert!(!marker.exists(), "the task ran");
    assert!(s.events().is_empty(), "something started: {:?}", s.events());
    assert!(!s.runtime.exists(), "the runtime dir is left behind");
}

#[test]
fn a_domain_list_without_an_egress_proxy_is_refused() {
    let s = Stage::new("egress-none");
    let policy = filtered(&s, &["allowed.test"]);
    let task = s.sh("true");
    let plan = MacosSeatbelt::new().plan(&policy, &task, &HostFacts::default()).unwrap();
    let err = run_plan(&plan, &task, &s.opts()).unwrap_err();
    assert!(err.to_string().contains("egress proxy"), "{err}");
    assert!(s.events().is_empty());
}
