//! Unit tests of the private namespace and its mounts.

use super::*;

#[test]
fn maps_and_paths_are_prepared_before_the_fork() {
    let ns = PrivateNamespace::new(1000, 100);
    assert!(!ns.is_root());
    assert_eq!(ns.uid_line, b"1000 1000 1\n");
    assert_eq!(ns.gid_line, b"100 100 1\n");
    let mounts = SelfMounts::new(
        &[AbsPathBuf::new_lexical("/p/.bashrc").unwrap()],
        &[SelfMount {
            path: AbsPathBuf::new_lexical("/p/.git").unwrap(),
            read_only: false,
            source: None,
        }],
    )
    .unwrap();
    assert_eq!(
        mounts.mounts,
        vec![
            (c"/p/.bashrc".to_owned(), Kind::Link, None),
            (c"/p/.git".to_owned(), Kind::Writable, None)
        ]
    );
    assert!(SelfMounts::default().is_empty());
    assert!(mounts.listed.is_empty(), "no masks, nothing to list");
}

#[test]
fn a_directory_holding_two_masks_sources_or_more_is_listed_once_before_they_are_mounted() {
    let mask = |path: &str, source: &str| SelfMount {
        path: AbsPathBuf::new_lexical(path).unwrap(),
        read_only: true,
        source: Some(AbsPathBuf::new_lexical(source).unwrap()),
    };
    let mounts = SelfMounts::new(
        &[],
        &[
            mask("/p/a/secret", "/run/observer/f0"),
            mask("/p/b/secret", "/run/t1/masked"),
            mask("/p/c/secret", "/run/observer/f1"),
            mask("/p/d/secret", "/run/observer/f2"),
        ],
    )
    .unwrap();
    assert_eq!(mounts.listed, vec![c"/run/observer".to_owned()]);
    assert_eq!(mounts.mounts.len(), 4);
}

/// Runs `sh -c script` in a child that entered a private namespace and mounted `dir`
/// onto itself (with the new mount API, or `mount(2)` when `fallback`); returns its
/// exit status, or `None` when this host gives no private namespace.
#[allow(clippy::disallowed_methods)] // a test spawns its own child to mount in
fn in_namespace(
    source: &std::path::Path,
    dir: &std::path::Path,
    kind: Kind,
    fallback: bool,
    script: &str,
) -> Option<i32> {
    use std::os::unix::process::CommandExt;
    let ns = PrivateNamespace::for_this_process();
    let path = CString::new(dir.as_os_str().as_bytes()).unwrap();
    let source = CString::new(source.as_os_str().as_bytes()).unwrap();
    let mut cmd = std::process::Command::new("/bin/sh");
    cmd.args(["-c", script]).stderr(std::process::Stdio::null());
    // SAFETY: the closure makes only system calls on data prepared before the fork.
    unsafe {
        cmd.pre_exec(move || {
            ns.enter().map_err(|_| io::Error::from_raw_os_error(libc::ENOTSUP))?;
            if fallback {
                bind_with_mount(&source, &path, kind)
            } else {
                mount_tree(&source, &path, kind)
            }
        });
    }
    match cmd.status() {
        Ok(status) => status.code(),
        Err(e) if e.raw_os_error() == Some(libc::ENOTSUP) => None,
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn a_path_mounted_onto_itself_is_read_only_inside_and_unchanged_outside() {
    let dir = std::env::temp_dir().join(format!("paddock-selfmount-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    let d = dir.display();
    for fallback in [false, true] {
        // Read-only, below as well; the directory cannot be renamed away (a mount point).
        let script = format!(
            "echo x > '{d}/f' && exit 10; echo x > '{d}/sub/f' && exit 11; \
             mv '{d}' '{d}.moved' && exit 12; exit 0"
        );
        let Some(code) = in_namespace(&dir, &dir, Kind::ReadOnly, fallback, &script) else {
            paddock_test_support::skip("no private mount namespace here (user namespaces)", None);
            return;
        };
        assert_eq!(code, 0, "fallback {fallback}: the read-only wall fell (exit {code})");
        // A pinned directory stays writable but cannot be renamed.
        let script =
            format!("echo x > '{d}/sub/w' || exit 20; mv '{d}' '{d}.moved' && exit 21; exit 0");
        let code = in_namespace(&dir, &dir, Kind::Writable, fallback, &script);
        assert_eq!(code, Some(0), "fallback {fallback}");
        assert!(dir.join("sub/w").exists() && !dir.join("f").exists());
        std::fs::remove_file(dir.join("sub/w")).unwrap();
        // A hidden file: the empty masked file over it, read-only; the secret stays.
        std::fs::write(dir.join("sub/secret"), "CANARY").unwrap();
        std::fs::write(dir.join("masked"), "").unwrap();
        let script = format!(
            "grep -q CANARY '{d}/sub/secret' && exit 30; echo x > '{d}/sub/secret' && exit 31; \
             mv '{d}/sub/secret' '{d}/sub/s2' && exit 32; exit 0"
        );
        let (masked, secret) = (dir.join("masked"), dir.join("sub/secret"));
        let code = in_namespace(&masked, &secret, Kind::Mask, fallback, &script);
        assert_eq!(code, Some(0), "fallback {fallback}: the mask fell");
        assert_eq!(std::fs::read_to_string(dir.join("sub/secret")).unwrap(), "CANARY");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
