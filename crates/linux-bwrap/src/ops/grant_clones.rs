//! The write grants the supervisor attaches from the runner's clones rather than bwrap's
//! binds ([`SpawnPlan::grant_clones`](paddock_policy::SpawnPlan)).
//!
//! bwrap reads and parses the whole mount table for every bind (a quarter of a millisecond
//! on a small host, more on a big one). Where the runner may clone mounts
//! (`HostFacts::clone_mounts`), it clones such a grant itself with the new mount API, with
//! everything mounted below it, `nosuid` and `nodev` as bwrap's bind makes it, while bwrap
//! sets up, and hands the clone to the supervisor on the signal channel; the supervisor
//! attaches it (an inner mount of its own kind, first of all but the devices), and the mount
//! identities (SYM-03) check afterwards that the path is that grant and a mount point.
//! bwrap only makes the directory (`--dir`: it may lie in a tmpfs bwrap made, the private
//! `/tmp`).
//!
//! Made after all of bwrap's mounts, the attach must end as bwrap's bind would have: so a
//! grant is cloned only when no other op is at its path, none lies below it (the clone
//! would cover it), none comes after it above it (which would have covered the bind), and no
//! other inner mount is at or above it (made before the attach by the rules of
//! [`super::inner_mountable`], which a bind bwrap keeps below it prevents, but never after).

use std::collections::{HashMap, HashSet};
use std::path::Path;

use paddock_policy::{AbsPathBuf, GrantClone, SelfMount};

use super::BwrapOp;
use crate::payload::InnerMount;

/// The indices in `ops` of the binds of `grants` (write grants, each a path onto itself)
/// that the supervisor can attach from the runner's clones, given `inner`, the supervisor's
/// other mounts (see the module doc). Ascending.
pub fn clonable_grants(ops: &[BwrapOp], grants: &[AbsPathBuf], inner: &[InnerMount]) -> Vec<usize> {
    let grants: HashSet<&Path> = grants.iter().map(AbsPathBuf::as_path).collect();
    let inner: HashSet<&Path> = inner.iter().map(|m| Path::new(m.path.0.as_os_str())).collect();
    // Look-ups by each path's ancestors, a handful each (a big policy has hundreds of ops).
    let mut at: HashMap<&Path, usize> = HashMap::new();
    let mut below: HashSet<&Path> = HashSet::new();
    for dest in ops.iter().filter_map(BwrapOp::dest) {
        *at.entry(dest.as_path()).or_default() += 1;
        below.extend(dest.as_path().ancestors().skip(1));
    }
    // Whether an op after each one mounts strictly above its path (a `--remount-ro` there
    // does not: it is not recursive, and leaves the bind below as it is).
    let mut covered_later = vec![false; ops.len()];
    let mut later: HashSet<&Path> = HashSet::new();
    for (i, op) in ops.iter().enumerate().rev() {
        let Some(dest) = op.dest() else { continue };
        covered_later[i] = dest.as_path().ancestors().skip(1).any(|a| later.contains(a));
        if !matches!(op, BwrapOp::RemountRo { .. }) {
            later.insert(dest.as_path());
        }
    }
    let mut out = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        let BwrapOp::Bind { src, dest } = op else { continue };
        let path = dest.as_path();
        if src == dest
            && grants.contains(path)
            && at.get(path) == Some(&1)
            && !below.contains(path)
            && !covered_later[i]
            && !path.ancestors().any(|a| inner.contains(a))
        {
            out.push(i);
        }
    }
    out
}

/// Takes the binds at `indices` (from [`clonable_grants`], ascending) out of `ops`, leaving
/// bwrap a `--dir` at each path, as the supervisor's inner mounts, in mount order.
pub fn take_grant_clones(ops: &mut [BwrapOp], indices: &[usize]) -> Vec<InnerMount> {
    let mut taken = Vec::with_capacity(indices.len());
    for &i in indices {
        let Some(BwrapOp::Bind { dest, .. }) = ops.get(i).cloned() else { continue };
        taken.push(InnerMount {
            grant_clone: true,
            ..InnerMount::on_itself(dest.as_os_str(), false)
        });
        ops[i] = BwrapOp::Dir { dest };
    }
    taken
}

/// The plan's entries for the grants `clones` (from [`take_grant_clones`]), given `inner`,
/// the supervisor's other mounts: each with the mounts the supervisor makes below it, when
/// each is a path bound onto itself (read-only or as it is) that the runner may make in its
/// clone instead (`crate::grant_clones`), else none.
pub fn grant_clones_of(clones: &[InnerMount], inner: &[InnerMount]) -> Vec<GrantClone> {
    clones
        .iter()
        .filter_map(|clone| {
            let path = AbsPathBuf::new_lexical(clone.path.0.as_os_str())?;
            let below: Vec<&InnerMount> = inner
                .iter()
                .filter(|m| {
                    let at = Path::new(m.path.0.as_os_str());
                    at != path.as_path() && at.starts_with(path.as_path())
                })
                .collect();
            let plain = |m: &&InnerMount| !(m.mask || m.empty_dir || m.devices || m.grant_clone);
            let within = if below.iter().all(plain) {
                below
                    .iter()
                    .filter_map(|m| {
                        Some(SelfMount {
                            path: AbsPathBuf::new_lexical(m.path.0.as_os_str())?,
                            read_only: m.read_only,
                            source: None,
                        })
                    })
                    .collect()
            } else {
                Vec::new()
            };
            Some(GrantClone { path, within })
        })
        .collect()
}

/// Marks each of `inner` that the runner may make in the clone of one of `grants`
/// (`InnerMount::in_grant_clone`): the supervisor skips just those when the clone came with
/// them made.
pub fn mark_in_grant_clones(inner: &mut [InnerMount], grants: &[GrantClone]) {
    let within: HashSet<&Path> =
        grants.iter().flat_map(|g| &g.within).map(|m| m.path.as_path()).collect();
    for m in inner.iter_mut() {
        m.in_grant_clone = within.contains(Path::new(m.path.0.as_os_str()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::self_mount_tests::{abs, bind, ro, tmpfs};

    fn inner(p: &str) -> InnerMount {
        InnerMount::on_itself(p, true)
    }

    #[test]
    fn a_grant_alone_at_its_path_is_cloned_and_leaves_bwrap_its_directory() {
        let mut ops = vec![ro("/"), tmpfs("/tmp"), bind("/tmp/p"), bind("/work/q")];
        let grants = [abs("/tmp/p"), abs("/work/q")];
        // Protected names below the grant that the supervisor mounts anyway come after it.
        let clonable = clonable_grants(&ops, &grants, &[inner("/tmp/p/.git")]);
        assert_eq!(clonable, [2, 3]);
        let taken = take_grant_clones(&mut ops, &clonable);
        assert_eq!(
            ops,
            [
                ro("/"),
                tmpfs("/tmp"),
                BwrapOp::Dir { dest: abs("/tmp/p") },
                BwrapOp::Dir { dest: abs("/work/q") }
            ]
        );
        assert!(taken.iter().all(|m| m.grant_clone && !m.read_only));
        assert_eq!(taken[0].path, crate::payload::Bytes("/tmp/p".into()));
        // The runner may make the binds below the first in its clone; not below the second,
        // where the supervisor masks a hidden file.
        let mask = InnerMount { mask: true, ..inner("/work/q/key.pem") };
        let others = [inner("/tmp/p/.git"), inner("/tmp/pp"), mask, inner("/work/q/.bashrc")];
        let plan = grant_clones_of(&taken, &others);
        assert_eq!(plan[0].path, abs("/tmp/p"));
        assert_eq!(
            plan[0].within,
            [SelfMount { path: abs("/tmp/p/.git"), read_only: true, source: None }]
        );
        assert_eq!(plan[1].path, abs("/work/q"));
        assert!(plan[1].within.is_empty());
        let mut others = others.to_vec();
        mark_in_grant_clones(&mut others, &plan);
        let marked: Vec<bool> = others.iter().map(|m| m.in_grant_clone).collect();
        assert_eq!(marked, [true, false, false, false]);
    }

    #[test]
    fn a_grant_whose_attach_would_change_the_sandbox_stays_bwraps() {
        let grants = [abs("/p")];
        // Not a grant: a pinned directory, a read-only exception.
        assert!(clonable_grants(&[ro("/"), bind("/p")], &[], &[]).is_empty());
        // A mount bwrap keeps below it: the clone attached after would cover it.
        assert!(
            clonable_grants(&[ro("/"), bind("/p"), tmpfs("/p/secret")], &grants, &[]).is_empty()
        );
        // A later mount above it: it covered bwrap's bind, it would not cover the attach.
        assert!(clonable_grants(&[ro("/"), bind("/p"), tmpfs("/")], &grants, &[]).is_empty());
        // But a later remount of the hidden directory it is bound back into is no mount.
        let hidden = [ro("/"), tmpfs("/h"), bind("/h/p"), BwrapOp::RemountRo { dest: abs("/h") }];
        assert_eq!(clonable_grants(&hidden, &[abs("/h/p")], &[]), [2]);
        // A remount of the grant itself, made before the attach, would not reach it.
        let remounted = [ro("/"), bind("/p"), BwrapOp::RemountRo { dest: abs("/p") }];
        assert!(clonable_grants(&remounted, &grants, &[]).is_empty());
        // Another op at its very path.
        assert!(clonable_grants(&[ro("/"), tmpfs("/p"), bind("/p")], &grants, &[]).is_empty());
        // An inner mount at or above it: made before the attach, it would be covered.
        assert!(clonable_grants(&[ro("/"), bind("/p")], &grants, &[inner("/")]).is_empty());
        assert!(clonable_grants(&[ro("/"), bind("/p")], &grants, &[inner("/p")]).is_empty());
        // A grant below another: the inner one alone, the outer one keeps it below.
        let nested = [abs("/p"), abs("/p/q")];
        assert_eq!(clonable_grants(&[ro("/"), bind("/p"), bind("/p/q")], &nested, &[]), [2]);
        // A bind of something else.
        let other = BwrapOp::Bind { src: abs("/elsewhere"), dest: abs("/p") };
        assert!(clonable_grants(&[ro("/"), other], &grants, &[]).is_empty());
    }
}
