//! Deny entries held in place: the directories above each `deny.read` anchor, up to the
//! write grant that holds it, are pinned like the ancestors of protected names.
//!
//! An anchor hides a path, not an inode. A task that renamed the anchor's parent (`mv
//! config config-moved`) would read nothing in its own run, but the next run, under the same
//! policy, would find nothing at `config/secrets.json` to hide and show
//! `config-moved/secrets.json` to its task. So every directory between the grant and the
//! anchor is pinned: a backend makes it unrenamable and unremovable (on Linux a mount point,
//! which `rename`, `RENAME_EXCHANGE` and `rmdir` refuse with `EBUSY`). The anchor itself is
//! already a mount point there (the tmpfs, the observer or the masked file bound over it):
//! renaming, exchanging, removing or hard-linking it fails too.

use crate::host::{FileKind, Host};
use crate::path::AbsPathBuf;
use crate::resolved::{DenyAnchor, ResolvedPolicy, WriteGrant};

/// The directories to pin so that no deny anchor can be moved out from under its path:
/// each existing directory strictly between an anchor and the outermost directory write
/// grant holding it, but for the roots of grants (mount points already). A grant nested in
/// another does not end the pins: renaming a directory above it would carry it along.
/// Sorted, without duplicates. Anchors outside every write grant need none (their
/// ancestors are read-only).
pub(crate) fn deny_anchor_pins(
    host: &dyn Host,
    anchors: &[DenyAnchor],
    write: &[WriteGrant],
) -> Vec<AbsPathBuf> {
    let mut out: Vec<AbsPathBuf> = Vec::new();
    for anchor in anchors {
        let Some(grant) = write
            .iter()
            .filter(|g| {
                g.kind == FileKind::Dir && anchor.path.starts_with(&g.path) && anchor.path != g.path
            })
            .min_by_key(|g| g.path.as_os_str().len())
        else {
            continue;
        };
        for ancestor in anchor.path.ancestors_below(&grant.path) {
            if out.contains(&ancestor) || write.iter().any(|g| g.path == ancestor) {
                continue;
            }
            // An anchor that does not exist (yet) may have missing ancestors: nothing to pin
            // there, and a link is never pinned (it would pin its target).
            if matches!(host.kind(ancestor.as_path()), Ok(Some(FileKind::Dir))) {
                out.push(ancestor);
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The key a denied rename or removal of `path` would be lifted with, when the walls hold
/// `path` in place for a deny anchor (the anchor or a directory above it: `deny.read`) or
/// for a protected path (a pinned directory above one: `protected.writable`).
pub(crate) fn held_key(policy: &ResolvedPolicy, path: &AbsPathBuf) -> Option<&'static str> {
    // Outside the write grants, `allow.write` is the key.
    if !policy.write.iter().any(|g| path.starts_with(&g.path) && *path != g.path) {
        return None;
    }
    let pinned = policy.pinned.contains(path);
    if policy.read_deny.iter().any(|a| a.path.starts_with(path) && (pinned || a.path == *path)) {
        return Some("deny.read");
    }
    (pinned && policy.protected.iter().any(|p| p.path.starts_with(path)))
        .then_some("protected.writable")
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::{AbsPathBuf, Context, FakeHost, Format, load_str, resolve};

    fn abs(p: &str) -> AbsPathBuf {
        AbsPathBuf::new_lexical(p).unwrap()
    }

    fn host() -> FakeHost {
        FakeHost::new()
            .file("/home/u/.ssh/id", "secret")
            .dir("/home/u/proj/.git/hooks")
            .file("/home/u/proj/config/secrets.json", "secret")
            .file("/home/u/proj/other/secrets/key.pem", "secret")
            .file("/home/u/proj/a/b/c/token", "secret")
            .file("/home/u/proj/top.key", "secret")
            .dir("/home/u/outside/x")
            .file("/home/u/outside/x/key", "secret")
    }

    fn pinned(config: &str) -> Vec<AbsPathBuf> {
        let policy = load_str(config, Path::new("paddock.toml"), Format::Toml).unwrap();
        let (r, _) = resolve(&policy, &Context::new("/home/u/proj", "/home/u"), &host()).unwrap();
        r.pinned
    }

    #[test]
    fn every_directory_between_the_grant_and_a_deny_entry_is_pinned() {
        let p = pinned(
            "[deny]\nread = [\"config/secrets.json\", \"other/secrets\", \"a/b/c/token\", \"top.key\"]\n",
        );
        for dir in [
            "/home/u/proj/.git",
            "/home/u/proj/config",
            "/home/u/proj/other",
            "/home/u/proj/a",
            "/home/u/proj/a/b",
            "/home/u/proj/a/b/c",
        ] {
            assert!(p.contains(&abs(dir)), "{dir} not pinned: {p:?}");
        }
        // The grant itself is a mount point already; the anchors are mounts of their own.
        for not in ["/home/u/proj", "/home/u/proj/other/secrets", "/home/u/proj/top.key"] {
            assert!(!p.contains(&abs(not)), "{not} pinned: {p:?}");
        }
    }

    #[test]
    fn anchors_outside_write_grants_need_no_pins_and_nested_grants_do_not_end_them() {
        // Outside every grant: read-only already, nothing to pin.
        let p = pinned("[deny]\nread = [\"/home/u/outside/x/key\"]\n");
        assert!(!p.iter().any(|d| d.starts_with(&abs("/home/u/outside"))), "{p:?}");
        // A grant nested in the project's: renaming `a` would carry `a/b` and the anchor
        // along, so `a` is pinned too; `a/b`, a grant, is a mount point already.
        let p = pinned("[allow]\nwrite = [\".\", \"a/b\"]\n[deny]\nread = [\"a/b/c/token\"]\n");
        assert!(p.contains(&abs("/home/u/proj/a/b/c")), "{p:?}");
        assert!(p.contains(&abs("/home/u/proj/a")), "{p:?}");
        assert!(!p.contains(&abs("/home/u/proj/a/b")), "{p:?}");
        // A grant alone inside the project: the pins start below it.
        let p = pinned("[allow]\nwrite = [\"a/b\"]\n[deny]\nread = [\"a/b/c/token\"]\n");
        assert!(p.contains(&abs("/home/u/proj/a/b/c")), "{p:?}");
        assert!(!p.contains(&abs("/home/u/proj/a")), "{p:?}");
    }

    #[test]
    fn a_writable_home_pins_the_directories_above_builtin_secrets() {
        let h = host().dir("/home/u/.config/gh").file("/home/u/.config/gh/hosts.yml", "t");
        // Granting home may need `allow.write-home` (where the key exists); the pins are the
        // same either way.
        let policy = load_str(
            "[allow]\nwrite = [\"~\"]\nwrite-home = true\n",
            Path::new("paddock.toml"),
            Format::Toml,
        )
        .or_else(|_| {
            load_str("[allow]\nwrite = [\"~\"]\n", Path::new("paddock.toml"), Format::Toml)
        })
        .unwrap();
        let (r, _) = resolve(&policy, &Context::new("/home/u/proj", "/home/u"), &h).unwrap();
        assert!(r.pinned.contains(&abs("/home/u/.config")), "{:?}", r.pinned);
    }

    #[test]
    fn a_refused_rename_names_the_key_that_holds_the_path() {
        let policy = load_str(
            "[deny]\nread = [\"config/secrets.json\"]\n",
            Path::new("paddock.toml"),
            Format::Toml,
        )
        .unwrap();
        let (r, _) = resolve(&policy, &Context::new("/home/u/proj", "/home/u"), &host()).unwrap();
        let key = |p: &str| super::held_key(&r, &abs(p));
        assert_eq!(key("/home/u/proj/config"), Some("deny.read"));
        assert_eq!(key("/home/u/proj/config/secrets.json"), Some("deny.read"));
        assert_eq!(key("/home/u/proj/.git"), Some("protected.writable"));
        assert_eq!(key("/home/u/proj/src"), None);
        assert_eq!(key("/home/u/.ssh"), None, "outside the grants: allow.write");
        let v = crate::Violation {
            kind: crate::ViolationKind::Write,
            path: Some("/home/u/proj/config".into()),
            target: None,
            syscall: Some("rename".into()),
            errno: Some("EBUSY".into()),
            count: 1,
        };
        assert_eq!(crate::summarize(&[v], &r), ["denied 1 write to config (allow with deny.read)"]);
    }
}
