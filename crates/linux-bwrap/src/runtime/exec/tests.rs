//! Unit tests of the spawn.

use super::*;
use paddock_policy::{Backend, DenyAnchor, FileKind, Origin, ProtectedPath, ProtectedState};

#[test]
fn only_a_placeholder_the_supervisor_alone_mounts_at_a_grant_root_is_made_after_the_setup() {
    let mut policy = crate::tests::policy();
    // A hidden file outside the write grant.
    policy.read_deny.push(DenyAnchor {
        path: AbsPathBuf::new_lexical("/etc/secret").unwrap(),
        kind: Some(FileKind::File),
        exceptions: Vec::new(),
        origin: Origin::default_key("deny.read[1]"),
    });
    // A missing protected name inside a directory that exists (maybe another run's
    // placeholder): its placeholder there is what keeps that directory.
    policy.protected.push(ProtectedPath {
        path: AbsPathBuf::new_lexical("/home/u/proj/.git/info/attributes").unwrap(),
        rule: ".git/info/attributes".into(),
        state: ProtectedState::Missing {
            first_missing: AbsPathBuf::new_lexical("/home/u/proj/.git/info").unwrap(),
        },
    });
    let task = crate::tests::task();
    let plan = crate::LinuxBwrap.plan(&policy, &task, &crate::tests::facts()).unwrap();
    let later = made_after_the_setup(&plan);
    let made_later = |path: &str| {
        later(plan.placeholders.iter().find(|p| p.path.as_path() == Path::new(path)).expect(path))
    };
    // The supervisor masks /etc/secret with an empty file of its own: the runtime dir's
    // masked file is not made at all.
    let masked = task.runtime_dir.join(crate::MASKED_FILE);
    assert!(plan.placeholders.iter().all(|p| p.path != masked));
    // The missing protected names at the project's root are the supervisor's inner
    // mounts, in the write grant bwrap binds.
    assert!(made_later("/home/u/proj/.bashrc"));
    assert!(made_later("/home/u/proj/.vscode"));
    assert!(!made_later("/home/u/proj/.git/info"));
    assert!(
        !used_before_the_supervisor(&plan).contains(Path::new("/home/u/proj/.git/info")),
        "the supervisor alone mounts it, yet it is made first"
    );
    // With a placeholder below it (made first), one is made first too.
    let mut nested = plan.clone();
    nested.placeholders.push(Placeholder {
        path: AbsPathBuf::new_lexical("/home/u/proj/.vscode/tasks.json").unwrap(),
        dir: false,
    });
    let later = made_after_the_setup(&nested);
    let vscode =
        nested.placeholders.iter().find(|p| p.path.as_path().ends_with(".vscode")).unwrap();
    assert!(!later(vscode), "made after the placeholder inside it");
    let bashrc =
        nested.placeholders.iter().find(|p| p.path.as_path().ends_with(".bashrc")).unwrap();
    assert!(later(bashrc));
}
