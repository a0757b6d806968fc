//! The proxy variables of a task's environment, composed from the proxy's in-sandbox port
//! and the task's own environment only (never the host's: the caller passes the env the
//! policy built for the task, and nothing here reads the process environment).
//!
//! - `HTTP_PROXY`, `HTTPS_PROXY` (`http://127.0.0.1:PORT`) and `ALL_PROXY`
//!   (`socks5h://127.0.0.1:PORT`, remote DNS), each in upper and lower case, replace the
//!   task's own: inside the sandbox the proxy is the only way out.
//! - `NO_PROXY` / `no_proxy` is loopback (`localhost,127.0.0.1,::1`) followed by the task's
//!   own entries from either spelling, without duplicates.
//! - `JAVA_TOOL_OPTIONS` keeps the task's options except the proxy properties, followed by
//!   the proxy's `-Dhttp(s).proxyHost/Port` and `-Dhttp.nonProxyHosts`.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

/// Variables replaced by the proxy's values (checked case-sensitively, both spellings).
const PROXY_VARS: &[&str] = &["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"];

/// Where the proxy is reachable inside the sandbox.
const LOOPBACK: &str = "127.0.0.1";

/// Loopback names that never go through the proxy.
const LOCAL: &[&str] = &["localhost", "127.0.0.1", "::1"];

/// Java system properties about proxies; the task's own are dropped.
const JAVA_PROXY_PROPS: &[&str] = &[
    "-Dhttp.proxyHost=",
    "-Dhttp.proxyPort=",
    "-Dhttps.proxyHost=",
    "-Dhttps.proxyPort=",
    "-Dhttp.nonProxyHosts=",
    "-DsocksProxyHost=",
    "-DsocksProxyPort=",
    "-Djava.net.useSystemProxies=",
];

/// The task's environment with the proxy variables composed in: the task's other variables
/// in their order, then the proxy's (in a fixed order).
pub fn proxy_env(port: u16, task_env: &[(OsString, OsString)]) -> Vec<(OsString, OsString)> {
    let is_proxy_var = |k: &OsStr| {
        PROXY_VARS
            .iter()
            .any(|v| k == OsStr::new(v) || k.as_bytes() == v.to_ascii_lowercase().as_bytes())
    };
    let mut no_proxy: Vec<String> = LOCAL.iter().map(|s| (*s).to_owned()).collect();
    for (k, v) in task_env {
        if k == "NO_PROXY" || k == "no_proxy" {
            for entry in String::from_utf8_lossy(v.as_bytes()).split(',') {
                let entry = entry.trim();
                if !entry.is_empty() && !no_proxy.iter().any(|e| e == entry) {
                    no_proxy.push(entry.to_owned());
                }
            }
        }
    }
    let mut java_task: Vec<u8> = Vec::new();
    let mut out: Vec<(OsString, OsString)> = Vec::new();
    for (k, v) in task_env {
        if is_proxy_var(k) {
            continue;
        }
        if k == "JAVA_TOOL_OPTIONS" {
            java_task = v.as_bytes().to_vec();
            continue;
        }
        out.push((k.clone(), v.clone()));
    }
    let http = format!("http://{LOOPBACK}:{port}");
    let socks = format!("socks5h://{LOOPBACK}:{port}");
    let no_proxy_text = no_proxy.join(",");
    for (name, value) in [
        ("HTTP_PROXY", &http),
        ("HTTPS_PROXY", &http),
        ("ALL_PROXY", &socks),
        ("NO_PROXY", &no_proxy_text),
    ] {
        out.push((name.into(), value.into()));
        out.push((name.to_ascii_lowercase().into(), value.into()));
    }
    out.push(("JAVA_TOOL_OPTIONS".into(), java_options(port, &java_task, &no_proxy)));
    out
}

fn java_options(port: u16, task: &[u8], no_proxy: &[String]) -> OsString {
    let mut tokens: Vec<Vec<u8>> = task
        .split(|b| b.is_ascii_whitespace())
        .filter(|t| !t.is_empty())
        .filter(|t| !JAVA_PROXY_PROPS.iter().any(|p| t.starts_with(p.as_bytes())))
        .map(<[u8]>::to_vec)
        .collect();
    let non_proxy: Vec<String> = no_proxy
        .iter()
        .filter(|e| !e.contains(['|', ' ', '\t', '\n']))
        .map(|e| match e.strip_prefix('.') {
            Some(rest) => format!("*.{rest}"),
            None if e.contains(':') => format!("[{e}]"),
            None => e.clone(),
        })
        .collect();
    for t in [
        format!("-Dhttp.proxyHost={LOOPBACK}"),
        format!("-Dhttp.proxyPort={port}"),
        format!("-Dhttps.proxyHost={LOOPBACK}"),
        format!("-Dhttps.proxyPort={port}"),
        format!("-Dhttp.nonProxyHosts={}", non_proxy.join("|")),
    ] {
        tokens.push(t.into_bytes());
    }
    OsString::from_vec(tokens.join(&b' '))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect()
    }

    fn show(e: &[(OsString, OsString)]) -> String {
        e.iter()
            .map(|(k, v)| format!("{}={}\n", k.to_string_lossy(), v.to_string_lossy()))
            .collect()
    }

    #[test]
    fn empty_task_env_gets_the_proxy() {
        assert_eq!(
            show(&proxy_env(3128, &[])),
            "HTTP_PROXY=http://127.0.0.1:3128\nhttp_proxy=http://127.0.0.1:3128\n\
             HTTPS_PROXY=http://127.0.0.1:3128\nhttps_proxy=http://127.0.0.1:3128\n\
             ALL_PROXY=socks5h://127.0.0.1:3128\nall_proxy=socks5h://127.0.0.1:3128\n\
             NO_PROXY=localhost,127.0.0.1,::1\nno_proxy=localhost,127.0.0.1,::1\n\
             JAVA_TOOL_OPTIONS=-Dhttp.proxyHost=127.0.0.1 -Dhttp.proxyPort=3128 \
             -Dhttps.proxyHost=127.0.0.1 -Dhttps.proxyPort=3128 \
             -Dhttp.nonProxyHosts=localhost|127.0.0.1|[::1]\n"
        );
    }

    #[test]
    fn task_values_are_composed() {
        let task = env(&[
            ("PATH", "/usr/bin"),
            ("https_proxy", "http://corp.example:8080"),
            ("no_proxy", ".internal.test, localhost"),
            ("NO_PROXY", "build.test"),
            ("JAVA_TOOL_OPTIONS", "-Xmx1g  -Dhttp.proxyHost=corp.example -Dfile.encoding=UTF-8"),
            ("HOME", "/home/u"),
        ]);
        let out = proxy_env(41000, &task);
        let get = |k: &str| {
            out.iter().find(|(n, _)| n == k).map(|(_, v)| v.to_string_lossy().into_owned())
        };
        assert_eq!(out[0].0, "PATH");
        assert_eq!(out[1].0, "HOME");
        assert_eq!(get("https_proxy").unwrap(), "http://127.0.0.1:41000");
        assert_eq!(out.iter().filter(|(n, _)| n == "https_proxy").count(), 1);
        assert_eq!(get("NO_PROXY").unwrap(), "localhost,127.0.0.1,::1,.internal.test,build.test");
        assert_eq!(get("no_proxy"), get("NO_PROXY"));
        assert_eq!(
            get("JAVA_TOOL_OPTIONS").unwrap(),
            "-Xmx1g -Dfile.encoding=UTF-8 -Dhttp.proxyHost=127.0.0.1 -Dhttp.proxyPort=41000 \
             -Dhttps.proxyHost=127.0.0.1 -Dhttps.proxyPort=41000 \
             -Dhttp.nonProxyHosts=localhost|127.0.0.1|[::1]|*.internal.test|build.test"
        );
    }
}
