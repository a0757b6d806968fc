//! Which binds the runner's child makes before bwrap (`ops::self_mountable`): only those the
//! grant's recursive bind carries into the sandbox; and which of those the supervisor makes
//! once bwrap is done (`ops::inner_mountable`), with the masks of hidden files it makes from
//! its own masked file (`ops::inner_masks`) and the empty directories over hidden ones
//! (`ops::inner_hidden_dirs`).

use paddock_policy::{AbsPathBuf, SelfMount};

use crate::ops::{
    BwrapOp, inner_hidden_dirs, inner_masks, inner_mountable, self_mountable, take_inner_mounts,
    take_self_mounts,
};

pub(crate) fn abs(p: &str) -> AbsPathBuf {
    AbsPathBuf::new_lexical(p).unwrap()
}

pub(crate) fn bind(p: &str) -> BwrapOp {
    BwrapOp::Bind { src: abs(p), dest: abs(p) }
}

pub(crate) fn ro(p: &str) -> BwrapOp {
    BwrapOp::RoBind { src: abs(p), dest: abs(p) }
}

pub(crate) fn tmpfs(p: &str) -> BwrapOp {
    BwrapOp::Tmpfs { dest: abs(p) }
}

#[test]
fn only_binds_below_a_kept_grant_and_under_nothing_else_are_taken() {
    let mut ops = vec![
        ro("/"),
        BwrapOp::Dev { dest: abs("/dev") },
        // A read-only bind of `/` carries nothing the child may take: not a grant.
        ro("/etc/gitconfig"),
        bind("/p"),
        // A pin and a protected path below the grant: taken, in order.
        bind("/p/.git"),
        ro("/p/.git/hooks"),
        // Below a tmpfs (a hidden directory) after the grant: not carried.
        BwrapOp::Tmpfs { dest: abs("/p/secret") },
        ro("/p/secret/kept"),
        // Covered later by a mount of something else.
        ro("/p/later"),
        BwrapOp::RoBind { src: abs("/run/masked"), dest: abs("/p/later") },
        // A bind from elsewhere is never taken, and what is below it is not carried.
        BwrapOp::Bind { src: abs("/run/observe/a0"), dest: abs("/q") },
        bind("/q/proj"),
        bind("/q/proj/.git"),
        // A write grant inside another stays bwrap's.
        bind("/p/out"),
        BwrapOp::Tmpfs { dest: abs("/tmp") },
        // Under a private /tmp, a grant re-exposes what is below it.
        bind("/tmp/p"),
        ro("/tmp/p/.bashrc"),
        BwrapOp::RemountRo { dest: abs("/p/secret") },
    ];
    let taken = self_mountable(&ops, &[abs("/p"), abs("/p/out")], &[]);
    let mounts = take_self_mounts(&mut ops, &taken);
    let got: Vec<(String, bool)> =
        mounts.iter().map(|m| (m.path.to_string(), m.read_only)).collect();
    assert_eq!(
        got,
        [
            ("/p/.git".to_owned(), false),
            ("/p/.git/hooks".to_owned(), true),
            ("/q/proj/.git".to_owned(), false),
            ("/tmp/p/.bashrc".to_owned(), true),
        ]
    );
    // What stays is bwrap's, in its order: the grants themselves among it.
    assert!(
        ops.contains(&bind("/p"))
            && ops.contains(&bind("/q/proj"))
            && ops.contains(&bind("/tmp/p"))
    );
    assert!(ops.contains(&ro("/p/secret/kept")) && ops.contains(&ro("/p/later")));
    assert!(ops.contains(&bind("/p/out")));
    assert!(!ops.iter().any(|op| mounts.contains(&SelfMount {
        path: op.dest().cloned().unwrap_or_else(AbsPathBuf::root),
        read_only: matches!(op, BwrapOp::RoBind { .. }),
        source: None,
    })));
}

#[test]
fn the_masked_file_over_a_listed_hidden_file_is_taken_and_nothing_else_from_elsewhere() {
    let masked = abs("/run/t1/masked");
    let mask = |p: &str| BwrapOp::RoBind { src: masked.clone(), dest: abs(p) };
    let mut ops = vec![
        ro("/"),
        // Outside every grant: the read-only bind of `/` carries a mask (read-only itself).
        mask("/home/u/.netrc"),
        bind("/p"),
        mask("/p/conf/secret.env"),
        // Not listed as a hidden regular file (a missing entry's placeholder, say).
        mask("/p/later"),
        // Listed with another source.
        BwrapOp::RoBind { src: abs("/run/t1/observe/f0"), dest: abs("/p/other.env") },
    ];
    let masks: Vec<(AbsPathBuf, AbsPathBuf)> =
        ["/home/u/.netrc", "/p/conf/secret.env", "/p/other.env"]
            .iter()
            .map(|h| (masked.clone(), abs(h)))
            .collect();
    let taken = self_mountable(&ops, &[], &masks);
    let mounts = take_self_mounts(&mut ops, &taken);
    let masked_at =
        |p: &str| SelfMount { path: abs(p), read_only: true, source: Some(masked.clone()) };
    assert_eq!(mounts, [masked_at("/home/u/.netrc"), masked_at("/p/conf/secret.env")]);
    assert!(!ops.contains(&mask("/home/u/.netrc")) && ops.contains(&mask("/p/later")));
    // A mask not listed stays bwrap's.
    let ops = vec![ro("/"), bind("/p"), mask("/p/conf/secret.env")];
    assert!(self_mountable(&ops, &[], &[]).is_empty());
}

#[test]
fn the_supervisor_takes_what_ends_as_bwrap_would_leave_it_made_after_all_of_bwraps_mounts() {
    let ops = vec![
        ro("/"),
        BwrapOp::Tmpfs { dest: abs("/home/u") },
        bind("/home/u/p"),
        // Taken: a pin and the protected paths below it, in order.
        bind("/home/u/p/.git"),
        ro("/home/u/p/.git/config"),
        ro("/home/u/p/.bashrc"),
        // A protected directory with a write grant inside it: made last, the supervisor's
        // read-only tree would take the grant with it. bwrap keeps it.
        ro("/home/u/p/.vscode"),
        bind("/home/u/p/.vscode/cache"),
        // A pin with a mask bwrap makes below it later: bwrap keeps the pin.
        bind("/home/u/p/conf"),
        // A pin remounted read-only at its very path later: made after it, the pin would
        // escape the remount. bwrap keeps it.
        bind("/home/u/p/ro"),
        BwrapOp::RoBind { src: abs("/run/masked"), dest: abs("/home/u/p/conf/key.pem") },
        BwrapOp::RemountRo { dest: abs("/home/u/p/ro") },
        // A remount of an ancestor reaches no other mount: bwrap's is not recursive.
        BwrapOp::RemountRo { dest: abs("/home/u") },
    ];
    let grants = [abs("/home/u/p"), abs("/home/u/p/.vscode/cache")];
    let outer = self_mountable(&ops, &grants, &[]);
    let taken: Vec<String> = inner_mountable(&ops, &outer)
        .into_iter()
        .map(|i| ops[i].dest().unwrap().to_string())
        .collect();
    assert_eq!(taken, ["/home/u/p/.git", "/home/u/p/.git/config", "/home/u/p/.bashrc"]);
    // Each is one the runner's child could take as well: the same rules of carrying.
    assert!(outer.len() > taken.len(), "{outer:?}");
}

#[test]
fn the_supervisor_masks_a_hidden_file_where_the_sandbox_shows_the_hosts_and_nothing_covers_it() {
    let mask = |p: &str| BwrapOp::RoBind { src: abs("/run/t1/masked"), dest: abs(p) };
    let ops = vec![
        ro("/"),
        BwrapOp::Dev { dest: abs("/dev") },
        // Under `/` as the host has it: taken (0-based index 2).
        mask("/home/u/.npmrc"),
        // Inside a hidden directory's tmpfs: not the host's, bwrap makes its mount point.
        BwrapOp::Tmpfs { dest: abs("/home/u/.nothing") },
        mask("/home/u/.nothing/file"),
        // Covered later by a tmpfs above it: bwrap's order hides it, so it stays bwrap's.
        mask("/srv/later/key"),
        BwrapOp::Tmpfs { dest: abs("/srv/later") },
        bind("/p"),
        // Below a grant's bind of itself: taken (index 8).
        mask("/p/.env"),
        // The observer's file over a hidden file: never the supervisor's.
        BwrapOp::RoBind { src: abs("/run/t1/observe/f0"), dest: abs("/p/.token") },
        // Under the private /tmp: not the host's.
        BwrapOp::Tmpfs { dest: abs("/tmp") },
        mask("/tmp/x"),
        ro("/p/.git"),
    ];
    // What inner_mountable gave comes through, in order with the masks.
    let taken = inner_masks(&ops, vec![12], &abs("/run/t1/masked"));
    assert_eq!(taken, [2, 8, 12]);
}

#[test]
fn the_supervisor_hides_a_directory_left_empty_where_the_sandbox_shows_the_hosts() {
    let tmpfs = |p: &str| BwrapOp::Tmpfs { dest: abs(p) };
    let remount = |p: &str| BwrapOp::RemountRo { dest: abs(p) };
    let mut ops = vec![
        ro("/"), // 0
        BwrapOp::Dev { dest: abs("/dev") },
        tmpfs("/home/u/.ssh"),     // 2: empty, under `/`: taken
        tmpfs("/home/u/.aws"),     // 3: an exception bound back into it: bwrap's
        tmpfs("/srv/late"),        // 4: covered by a later tmpfs above it: bwrap's
        tmpfs("/srv"),             // 5: no remount (a private /tmp's kind): bwrap's
        tmpfs("/tmp"),             // 6
        tmpfs("/tmp/hidden"),      // 7: under the private /tmp, not the host's: bwrap's
        bind("/p"),                // 8
        tmpfs("/p/.secrets"),      // 9: under a grant's bind of itself: taken
        ro("/home/u/.aws/config"), // 10
        ro("/p/.git"),             // 11: the supervisor's already
        remount("/home/u/.ssh"),   // 12
        remount("/home/u/.aws"),   // 13
        remount("/srv/late"),      // 14
        remount("/tmp/hidden"),    // 15
        remount("/p/.secrets"),    // 16
    ];
    let hidden = inner_hidden_dirs(&ops, &[11]);
    assert_eq!(hidden, [(2, 12), (9, 16)]);
    let taken = take_inner_mounts(&mut ops, &[11], &hidden);
    let kinds: Vec<_> = taken
        .iter()
        .map(|m| (m.path.0.to_string_lossy().into_owned(), m.empty_dir, m.read_only))
        .collect();
    assert_eq!(
        kinds,
        [
            ("/home/u/.ssh".to_owned(), true, true),
            ("/p/.secrets".to_owned(), true, true),
            ("/p/.git".to_owned(), false, true),
        ]
    );
    // Their tmpfs and remount are gone from bwrap's ops; the others stay.
    assert!(!ops.contains(&tmpfs("/home/u/.ssh")) && !ops.contains(&remount("/home/u/.ssh")));
    assert!(!ops.contains(&remount("/p/.secrets")));
    assert!(ops.contains(&tmpfs("/home/u/.aws")) && ops.contains(&remount("/home/u/.aws")));
    assert_eq!(ops.len(), 17 - 5);
}
