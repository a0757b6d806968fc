//! Plans for deny anchors missing on the host: masked on a placeholder the runner makes.

use paddock_policy::{Backend, DenyAnchor, FileKind, Origin};

use crate::LinuxBwrap;
use crate::tests::{facts, policy, task};

fn abs(p: &str) -> paddock_policy::AbsPathBuf {
    paddock_policy::AbsPathBuf::new_lexical(p).unwrap()
}

fn args(p: &paddock_policy::ResolvedPolicy) -> Vec<String> {
    let plan = LinuxBwrap.plan(p, &task(), &facts()).unwrap();
    let bytes = &plan.payloads.iter().find(|p| p.name == "bwrap-args").unwrap().bytes;
    String::from_utf8_lossy(bytes).split('\0').map(str::to_owned).collect()
}

fn missing(path: &str) -> DenyAnchor {
    DenyAnchor {
        path: abs(path),
        kind: None,
        exceptions: vec![],
        origin: Origin::flag("--deny-read"),
    }
}

#[test]
fn a_missing_deny_anchor_is_masked_on_a_placeholder() {
    let mut p = policy();
    p.read_deny = vec![missing("/home/u/later.txt"), missing("/home/u/later-dir")];
    let plan = LinuxBwrap.plan(&p, &task(), &facts()).unwrap();
    let holders: Vec<(String, bool)> =
        plan.placeholders.iter().map(|p| (p.path.to_string(), p.dir)).collect();
    assert!(holders.contains(&("/home/u/later.txt".to_owned(), false)), "{holders:?}");
    assert!(holders.contains(&("/home/u/later-dir".to_owned(), true)), "{holders:?}");
    let a = args(&p).join(" ");
    // The file's mask and the directory's empty tmpfs are the supervisor's: bwrap mounts
    // nothing there.
    assert!(!a.contains("/home/u/later"), "{a}");
    let sup = plan.payloads.iter().find(|p| p.name == "supervisor").unwrap();
    let sup = crate::payload::SupervisorPayload::from_bytes(&sup.bytes, sup.fd).unwrap();
    let inner = |pick: fn(&crate::payload::InnerMount) -> bool| -> Vec<_> {
        sup.inner_mounts.iter().filter(|m| pick(m)).map(|m| m.path.0.clone()).collect()
    };
    assert_eq!(inner(|m| m.mask), ["/home/u/later.txt"]);
    assert_eq!(inner(|m| m.empty_dir && m.read_only), ["/home/u/later-dir"]);
    // Hidden by another anchor already: no placeholder.
    p.read_deny.push(DenyAnchor {
        path: abs("/home/u"),
        kind: Some(FileKind::Dir),
        exceptions: vec![],
        origin: Origin::flag("--deny-read"),
    });
    let plan = LinuxBwrap.plan(&p, &task(), &facts()).unwrap();
    assert!(!plan.placeholders.iter().any(|h| h.path.starts_with(&abs("/home/u/later-dir"))));
}

#[test]
fn the_masked_file_is_made_only_for_a_mask_bwrap_still_binds() {
    let file = |path: &str| DenyAnchor {
        path: abs(path),
        kind: Some(FileKind::File),
        exceptions: vec![],
        origin: Origin::flag("--deny-read"),
    };
    let masked = task().runtime_dir.join(crate::MASKED_FILE);
    let mut p = policy();
    // Under `/` as the host has it: the supervisor's mask, with a file of its own.
    p.read_deny.push(file("/etc/secret"));
    let plan = LinuxBwrap.plan(&p, &task(), &facts()).unwrap();
    assert!(plan.placeholders.iter().all(|h| h.path != masked));
    // Under the private /tmp, bwrap makes its mount point and binds the masked file there.
    p.read_deny.push(file("/tmp/key"));
    let plan = LinuxBwrap.plan(&p, &task(), &facts()).unwrap();
    let a = args(&p).join(" ");
    assert!(a.contains(&format!("--ro-bind {masked} /tmp/key")), "{a}");
    assert!(plan.placeholders.iter().any(|h| h.path == masked));
}
