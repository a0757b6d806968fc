//! The variables the backend adds to the task's environment: its own `TMPDIR` and, for a
//! domain list, the proxy settings, composed with the task's own values (never the host's:
//! the policy built the task's environment before this).

use std::ffi::{OsStr, OsString};

use paddock_policy::{NetworkPolicy, ResolvedPolicy, Task};

use crate::plan::task_tmpdir;

/// Hosts that must never go through the proxy: the task's own loopback.
const LOOPBACK_NO_PROXY: &str = "localhost,127.0.0.1,::1";

/// The complete environment of the task.
pub fn task_env(
    policy: &ResolvedPolicy,
    task: &Task,
    proxy_port: Option<u16>,
) -> Vec<(OsString, OsString)> {
    let mut env = policy.env.clone();
    set(&mut env, "TMPDIR", task_tmpdir(task).as_os_str().to_os_string());
    if let (NetworkPolicy::Filtered { .. }, Some(port)) = (&policy.network, proxy_port) {
        let http = OsString::from(format!("http://127.0.0.1:{port}"));
        let socks = OsString::from(format!("socks5h://127.0.0.1:{port}"));
        for name in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
            set(&mut env, name, http.clone());
        }
        for name in ["ALL_PROXY", "all_proxy"] {
            set(&mut env, name, socks.clone());
        }
        for name in ["NO_PROXY", "no_proxy"] {
            let value = match get(&env, name) {
                Some(own) if !own.is_empty() => {
                    let mut v = own.to_os_string();
                    v.push(",");
                    v.push(LOOPBACK_NO_PROXY);
                    v
                }
                _ => OsString::from(LOOPBACK_NO_PROXY),
            };
            set(&mut env, name, value);
        }
        let java = format!(
            "-Dhttp.proxyHost=127.0.0.1 -Dhttp.proxyPort={port} -Dhttps.proxyHost=127.0.0.1 \
             -Dhttps.proxyPort={port} -Dhttp.nonProxyHosts=localhost|127.0.0.1"
        );
        let value = match get(&env, "JAVA_TOOL_OPTIONS") {
            Some(own) if !own.is_empty() => {
                let mut v = own.to_os_string();
                v.push(" ");
                v.push(&java);
                v
            }
            _ => OsString::from(java),
        };
        set(&mut env, "JAVA_TOOL_OPTIONS", value);
    }
    env
}

fn get<'e>(env: &'e [(OsString, OsString)], name: &str) -> Option<&'e OsStr> {
    env.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_os_str())
}

/// Sets `name`, replacing every earlier value in place (or appending).
fn set(env: &mut Vec<(OsString, OsString)>, name: &str, value: OsString) {
    if let Some(pos) = env.iter().position(|(k, _)| k == name) {
        env[pos].1 = value;
        let mut i = pos + 1;
        while i < env.len() {
            if env[i].0 == name {
                env.remove(i);
            } else {
                i += 1;
            }
        }
    } else {
        env.push((OsString::from(name), value));
    }
}
