//! Anthropic sandbox-runtime (SRT) settings JSON, converted into a [`Policy`] so its users
//! can switch. What has no paddock meaning is returned as a note, never dropped silently;
//! an unknown key is an error, as in `paddock.toml`.

use std::ffi::OsString;
use std::path::Path;

use serde_json::{Map, Value};

use crate::config::{MAX_CONFIG_BYTES, check_path_text, nearest, parse_domain};
use crate::defaults::default_policy;
use crate::error::{Error, Result};
use crate::model::{Entry, NetworkRule, PathSpec, Policy, UnixSocketsRule};
use crate::origin::Origin;

const TOP: &[&str] = &[
    "network",
    "filesystem",
    "ignoreViolations",
    "enableWeakerNestedSandbox",
    "ripgrep",
    "mandatoryDenySearchDepth",
    "allowPty",
    "enableWeakerNetworkIsolation",
];
const NETWORK: &[&str] = &[
    "allowedDomains",
    "deniedDomains",
    "allowUnixSockets",
    "allowAllUnixSockets",
    "allowLocalBinding",
    "httpProxyPort",
    "socksProxyPort",
    "allowMachLookup",
];
const FILESYSTEM: &[&str] = &["denyRead", "allowRead", "allowWrite", "denyWrite", "allowGitConfig"];

/// Converts SRT settings JSON. Returns the policy and notes on what was not converted.
pub fn convert(text: &str, file: &Path) -> Result<(Policy, Vec<String>)> {
    if text.len() > MAX_CONFIG_BYTES {
        return Err(Error::Invalid {
            origin: Origin::file(file, ""),
            value: format!("{} bytes", text.len()),
            message: "the settings file is larger than paddock reads".to_owned(),
            fix: format!("keep it under {MAX_CONFIG_BYTES} bytes"),
        });
    }
    let root: Value = serde_json::from_str(text).map_err(|e| Error::Syntax {
        file: file.to_path_buf(),
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })?;
    let origin = Origin::file(file, "");
    let top = object(&root, &origin, TOP)?;
    let mut policy = default_policy();
    let mut notes = Vec::new();
    if let Some(v) = top.get("enableWeakerNestedSandbox") {
        policy.weaker_when_nested = boolean(v, &origin.child("enableWeakerNestedSandbox"))?;
    }
    if let Some(v) = top.get("allowPty") {
        policy.allow.pty = boolean(v, &origin.child("allowPty"))?;
    }
    for key in ["ripgrep", "mandatoryDenySearchDepth", "enableWeakerNetworkIsolation"] {
        if top.contains_key(key) {
            notes.push(format!("{}: not converted: paddock has no `{key}` (it needs no ripgrep and scans no depth limit)", origin.child(key)));
        }
    }
    if top.contains_key("ignoreViolations") {
        notes.push(format!(
            "{}: not converted: SRT keys it by command; write paddock's `[ignore]` read/write/network lists instead",
            origin.child("ignoreViolations")
        ));
    }
    if let Some(fs) = top.get("filesystem") {
        let o = origin.child("filesystem");
        let fs = object(fs, &o, FILESYSTEM)?;
        if let Some(v) = fs.get("denyRead") {
            policy.deny.read = paths(v, &o.child("denyRead"))?;
        }
        if let Some(v) = fs.get("allowRead") {
            policy.allow.read = paths(v, &o.child("allowRead"))?;
        }
        if let Some(v) = fs.get("allowWrite") {
            policy.allow.write = paths(v, &o.child("allowWrite"))?;
        }
        if let Some(v) = fs.get("denyWrite") {
            policy.deny.write = paths(v, &o.child("denyWrite"))?;
        }
        if let Some(v) = fs.get("allowGitConfig") {
            policy.allow.git_config = boolean(v, &o.child("allowGitConfig"))?;
            if policy.allow.git_config {
                notes.push(format!(
                    "{}: converted to allow.git-config = true: the project's own .git/config and config.worktree are writable (nested repositories' are not), hooks stay read-only, and every run warns that the task can configure programs git runs on the host",
                    o.child("allowGitConfig")
                ));
            }
        }
    }
    if let Some(net) = top.get("network") {
        let o = origin.child("network");
        let net = object(net, &o, NETWORK)?;
        if let Some(v) = net.get("allowedDomains") {
            let list = strings(v, &o.child("allowedDomains"))?;
            policy.allow.network = if list.iter().any(|(s, _)| s == "*") {
                Entry::new(NetworkRule::On, o.child("allowedDomains"))
            } else if list.is_empty() {
                Entry::new(NetworkRule::Off, o.child("allowedDomains"))
            } else {
                let mut out = Vec::new();
                for (s, so) in list {
                    out.push(Entry::new(parse_domain(&s, &so)?, so));
                }
                Entry::new(NetworkRule::Domains(out), o.child("allowedDomains"))
            };
        }
        if let Some(v) = net.get("deniedDomains") {
            for (s, so) in strings(v, &o.child("deniedDomains"))? {
                policy.deny.network.push(Entry::new(parse_domain(&s, &so)?, so));
            }
        }
        if let Some(v) = net.get("allowAllUnixSockets")
            && boolean(v, &o.child("allowAllUnixSockets"))?
        {
            policy.allow.unix_sockets =
                Entry::new(UnixSocketsRule::All, o.child("allowAllUnixSockets"));
        }
        if let Some(v) = net.get("allowUnixSockets")
            && !matches!(policy.allow.unix_sockets.value, UnixSocketsRule::All)
        {
            let list = paths(v, &o.child("allowUnixSockets"))?;
            if !list.is_empty() {
                policy.allow.unix_sockets =
                    Entry::new(UnixSocketsRule::Paths(list), o.child("allowUnixSockets"));
            }
        }
        if let Some(v) = net.get("allowMachLookup") {
            policy.allow.mach_lookup = strings(v, &o.child("allowMachLookup"))?
                .into_iter()
                .map(|(s, so)| Entry::new(s, so))
                .collect();
        }
        if net.contains_key("allowLocalBinding") {
            notes.push(format!(
                "{}: not converted: paddock grants inbound ports one by one; write `allow.local-ports = [PORT]`",
                o.child("allowLocalBinding")
            ));
        }
        for key in ["httpProxyPort", "socksProxyPort"] {
            if net.contains_key(key) {
                notes.push(format!(
                    "{}: not converted: paddock runs its own per-task proxy",
                    o.child(key)
                ));
            }
        }
    }
    Ok((policy, notes))
}

fn object<'v>(v: &'v Value, origin: &Origin, keys: &[&str]) -> Result<&'v Map<String, Value>> {
    let Value::Object(map) = v else {
        return Err(Error::Invalid {
            origin: origin.clone(),
            value: short(v),
            message: "expected an object".to_owned(),
            fix: "write it as { ... }".to_owned(),
        });
    };
    for key in map.keys() {
        if !keys.contains(&key.as_str()) {
            return Err(Error::UnknownKey {
                origin: origin.clone(),
                key: key.clone(),
                suggestion: nearest(key, keys.iter().copied()).map(str::to_owned),
            });
        }
    }
    Ok(map)
}

fn boolean(v: &Value, origin: &Origin) -> Result<bool> {
    v.as_bool().ok_or_else(|| Error::Invalid {
        origin: origin.clone(),
        value: short(v),
        message: "expected true or false".to_owned(),
        fix: "write true or false without quotes".to_owned(),
    })
}

fn strings(v: &Value, origin: &Origin) -> Result<Vec<(String, Origin)>> {
    let Value::Array(items) = v else {
        return Err(Error::Invalid {
            origin: origin.clone(),
            value: short(v),
            message: "expected a list of strings".to_owned(),
            fix: "write [\"a\", \"b\"]".to_owned(),
        });
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let o = origin.child(&format!("[{i}]"));
            match item {
                Value::String(s) => Ok((s.clone(), o)),
                other => Err(Error::Invalid {
                    origin: o,
                    value: short(other),
                    message: "expected a string".to_owned(),
                    fix: "quote it".to_owned(),
                }),
            }
        })
        .collect()
}

fn paths(v: &Value, origin: &Origin) -> Result<Vec<Entry<PathSpec>>> {
    strings(v, origin)?
        .into_iter()
        .map(|(s, o)| {
            check_path_text(&s, &o)?;
            Ok(Entry::new(PathSpec(OsString::from(s)), o))
        })
        .collect()
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 80 {
        format!("{}...", s.chars().take(80).collect::<String>())
    } else {
        s
    }
}
