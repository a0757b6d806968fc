//! The binds of the ops that someone else than bwrap makes, and which are checked again
//! once made: the runner's child before bwrap starts (self mounts), the supervisor inside
//! the sandbox once bwrap is done (inner mounts), and the paths the supervisor checks after
//! bwrap's mounts ([`crate::mount_ids`]). bwrap reads the whole mount table for each bind;
//! these take a few system calls each and read none.

use paddock_policy::{AbsPathBuf, SelfMount};

use super::BwrapOp;
use crate::payload::InnerMount;

/// The paths the supervisor checks again once bwrap has mounted them (see
/// [`crate::mount_ids`]): each bind of a path onto itself at or under a writable one (where
/// a task, this one or a concurrent one, could swap it for a link), except `/`, a path at
/// or under one of `unverified` (the placeholders the runner makes, links as planned), and
/// one a later mount of something else covers (at it or above it). In mount order,
/// without repeats.
pub fn verified_binds(ops: &[BwrapOp], unverified: &[AbsPathBuf]) -> Vec<AbsPathBuf> {
    use std::collections::HashSet;
    use std::path::Path;
    // Look-ups by each path's ancestors, a handful each: a big policy has hundreds of ops,
    // and a scan of the others per op cost it more than the rest of the plan.
    let writable: HashSet<&Path> = ops
        .iter()
        .filter(|op| matches!(op, BwrapOp::Bind { .. }))
        .filter_map(same_path)
        .map(AbsPathBuf::as_path)
        .collect();
    let unverified: HashSet<&Path> = unverified.iter().map(AbsPathBuf::as_path).collect();
    // Whether a later mount of something else covers each op's path (at it or above it).
    let mut covered = vec![false; ops.len()];
    let mut later: HashSet<&Path> = HashSet::new();
    for (i, op) in ops.iter().enumerate().rev() {
        let own = same_path(op);
        if let Some(path) = own {
            covered[i] = path.as_path().ancestors().any(|a| later.contains(a));
        }
        if !matches!(op, BwrapOp::RemountRo { .. })
            && own.is_none()
            && let Some(dest) = op.dest()
        {
            later.insert(dest.as_path());
        }
    }
    let mut seen: HashSet<&AbsPathBuf> = HashSet::new();
    let mut out: Vec<AbsPathBuf> = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        let Some(path) = same_path(op) else { continue };
        let mut above = path.as_path().ancestors();
        if path.as_path() == Path::new("/")
            || !above.clone().any(|a| writable.contains(a))
            || above.any(|a| unverified.contains(a))
            || covered[i]
            || seen.contains(path)
        {
            continue;
        }
        seen.insert(path);
        out.push(path.clone());
    }
    out
}

/// The path of a bind of a path onto itself.
fn same_path(op: &BwrapOp) -> Option<&AbsPathBuf> {
    match op {
        BwrapOp::Bind { src, dest } | BwrapOp::RoBind { src, dest } => {
            (src == dest).then_some(dest)
        }
        _ => None,
    }
}

/// The binds of `ops` that the runner's child can make instead of bwrap
/// ([`SpawnPlan::self_mounts`](paddock_policy::SpawnPlan)): each bind of a path onto itself,
/// and each bind listed in `masks` (a mask's source and the hidden regular file it covers),
/// strictly below a writable bind of a path onto itself that bwrap keeps (a write
/// grant, whose recursive bind carries the mounts below it into the sandbox; for a mask,
/// read-only itself, a read-only one too: the host's `/`), with no mount
/// of anything else between that grant's and its own, or after it, at or above it (a
/// tmpfs, `/dev`, a mask would hide it). The binds of `grants` (write grants: carriers, and
/// what the user asked for by name) stay bwrap's. Index of each op in `ops`, in mount order.
pub fn self_mountable(
    ops: &[BwrapOp],
    grants: &[AbsPathBuf],
    masks: &[(AbsPathBuf, AbsPathBuf)],
) -> Vec<usize> {
    use std::collections::{HashMap, HashSet};
    use std::path::Path;
    // A deny glob's hits make thousands of ops (POL-06): every look-up below is by the
    // path's ancestors, a handful each, never a scan of the other ops.
    let grants: HashSet<&AbsPathBuf> = grants.iter().collect();
    let masks: HashMap<&AbsPathBuf, &AbsPathBuf> = masks.iter().map(|(s, d)| (d, s)).collect();
    let candidate = |op: &BwrapOp| -> Option<AbsPathBuf> {
        let path = same_path(op).or_else(|| match op {
            BwrapOp::RoBind { src, dest } if masks.get(dest) == Some(&src) => Some(dest),
            _ => None,
        })?;
        (!grants.contains(path)).then(|| path.clone())
    };
    // Whether a later mount of something else covers each op's path (at it or above it).
    let mut covered_later = vec![false; ops.len()];
    let mut later: HashSet<&Path> = HashSet::new();
    for (i, op) in ops.iter().enumerate().rev() {
        if let Some(path) = candidate(op) {
            covered_later[i] = path.as_path().ancestors().any(|a| later.contains(a));
        }
        if !matches!(op, BwrapOp::RemountRo { .. })
            && same_path(op).is_none()
            && let Some(dest) = op.dest()
        {
            later.insert(dest.as_path());
        }
    }
    // The latest op kept for bwrap at each path so far: the nearest one at or above a path
    // decides whether it is carried (a bind of a path onto itself, above it).
    let mut kept: HashMap<&Path, usize> = HashMap::new();
    let mut out: Vec<usize> = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        let taken = candidate(op).is_some_and(|path| {
            let nearest = path
                .as_path()
                .ancestors()
                .filter_map(|a| kept.get(a).map(|j| (*j, a)))
                .max_by_key(|(j, _)| *j);
            // A mask (read-only) is carried by a read-only bind of a path onto itself too (the
            // host's `/`), whose recursive bind makes what it carries read-only.
            let mask = same_path(op).is_none();
            let carried = nearest.is_some_and(|(j, at)| {
                at != path.as_path()
                    && match &ops[j] {
                        BwrapOp::Bind { src, dest } => src == dest,
                        BwrapOp::RoBind { src, dest } => mask && src == dest,
                        _ => false,
                    }
            });
            carried && !covered_later[i]
        });
        if taken {
            out.push(i);
        } else if !matches!(op, BwrapOp::RemountRo { .. })
            && let Some(dest) = op.dest()
        {
            kept.insert(dest.as_path(), i);
        }
    }
    out
}

/// The binds of `ops` that the supervisor can make inside the sandbox once bwrap is done
/// ([`crate::payload::SupervisorPayload::inner_mounts`]): those of `self_mountable` (what
/// [`self_mountable`] gave for these `ops`; a mask's source is the masked file, which bwrap
/// binds where the supervisor finds it) but any with a mount bwrap keeps strictly below it
/// later in `ops`, or a `--remount-ro` of its very path. Made after all of bwrap's, such a
/// bind would carry that mount into its own and make it read-only, or escape the remount;
/// every other one ends as bwrap would have left it, since nothing after it mounts at or
/// above its path. Index of each op, ascending.
pub fn inner_mountable(ops: &[BwrapOp], self_mountable: &[usize]) -> Vec<usize> {
    use std::collections::HashSet;
    use std::path::Path;
    let taken: HashSet<usize> = self_mountable.iter().copied().collect();
    // Whether a later op bwrap keeps mounts strictly below each candidate, and whether a
    // later `--remount-ro` is at its very path (made before it, a writable bind would
    // escape it; one above it does not reach it: bwrap's remount is not recursive).
    let mut below_later: HashSet<&Path> = HashSet::new();
    let mut remounted_later: HashSet<&Path> = HashSet::new();
    let mut out = Vec::new();
    for (i, op) in ops.iter().enumerate().rev() {
        let Some(dest) = op.dest() else { continue };
        if taken.contains(&i) {
            let path = dest.as_path();
            if !below_later.contains(path) && !remounted_later.contains(path) {
                out.push(i);
            } else {
                // bwrap keeps this one.
                below_later.extend(path.ancestors().skip(1));
            }
        } else if matches!(op, BwrapOp::RemountRo { .. }) {
            remounted_later.insert(dest.as_path());
        } else {
            below_later.extend(dest.as_path().ancestors().skip(1));
        }
    }
    out.reverse();
    out
}

/// Takes the ops at `indices` (from [`self_mountable`], ascending) out of `ops`, as self
/// mounts.
pub fn take_self_mounts(ops: &mut Vec<BwrapOp>, indices: &[usize]) -> Vec<SelfMount> {
    let mut taken = Vec::new();
    let mut next = indices.iter().peekable();
    let mut i = 0;
    ops.retain(|op| {
        let take = next.next_if_eq(&&i).is_some();
        i += 1;
        if take && let BwrapOp::Bind { src, dest } | BwrapOp::RoBind { src, dest } = op {
            taken.push(SelfMount {
                path: dest.clone(),
                read_only: matches!(op, BwrapOp::RoBind { .. }),
                source: (src != dest).then(|| src.clone()),
            });
        }
        !take
    });
    taken
}

/// `inner` (from [`inner_mountable`], ascending) and every mask of a hidden regular file
/// with the masked file (`--ro-bind MASKED FILE`, `masked_file` its source) that the
/// supervisor can make itself once bwrap is done: where the nearest mount bwrap keeps
/// before it at or above the file is a bind of a path onto itself (the host's `/`, a
/// grant: the file is there in the sandbox as on the host, where the supervisor finds it)
/// and nothing bwrap keeps mounts at or above it later (which would have covered the mask).
/// The supervisor mounts its own empty mode-0000 file there, with three system calls where
/// bwrap's bind reads the whole mount table. Ascending.
pub fn inner_masks(ops: &[BwrapOp], inner: Vec<usize>, masked_file: &AbsPathBuf) -> Vec<usize> {
    use std::collections::{HashMap, HashSet};
    use std::path::Path;
    let taken: HashSet<usize> = inner.iter().copied().collect();
    let is_mask = |op: &BwrapOp| matches!(op, BwrapOp::RoBind { src, .. } if src == masked_file);
    let kept = |i: usize, op: &BwrapOp| !taken.contains(&i) && !is_mask(op);
    let mut covered_later = vec![false; ops.len()];
    let mut later: HashSet<&Path> = HashSet::new();
    for (i, op) in ops.iter().enumerate().rev() {
        if is_mask(op)
            && let Some(dest) = op.dest()
        {
            covered_later[i] = dest.as_path().ancestors().any(|a| later.contains(a));
        }
        if kept(i, op)
            && !matches!(op, BwrapOp::RemountRo { .. })
            && let Some(dest) = op.dest()
        {
            later.insert(dest.as_path());
        }
    }
    let mut nearest: HashMap<&Path, usize> = HashMap::new();
    let mut out = inner;
    for (i, op) in ops.iter().enumerate() {
        if is_mask(op)
            && !taken.contains(&i)
            && let Some(dest) = op.dest()
        {
            let carrier = dest
                .as_path()
                .ancestors()
                .skip(1)
                .filter_map(|a| nearest.get(a).map(|j| (*j, a)))
                .max_by_key(|(j, _)| *j);
            let on_itself = carrier.is_some_and(|(j, _)| same_path(&ops[j]).is_some());
            if on_itself && !covered_later[i] && !nearest.contains_key(dest.as_path()) {
                out.push(i);
            }
        }
        if kept(i, op)
            && !matches!(op, BwrapOp::RemountRo { .. })
            && let Some(dest) = op.dest()
        {
            nearest.insert(dest.as_path(), i);
        }
    }
    out.sort_unstable();
    out
}

/// The hidden directories the supervisor can hide itself once bwrap is done: each
/// `--tmpfs DIR` with a `--remount-ro DIR` after it (an empty read-only directory over DIR)
/// where the nearest mount bwrap keeps before it above DIR is a bind of a path onto itself
/// (the host's `/`, a grant: DIR is there as the host has it), none at DIR, and no other
/// mount bwrap keeps after it at, above or below DIR (nothing bound back into it, nothing
/// covering it). `inner` are the ops the supervisor takes already (made in mount order with
/// these, they are not bwrap's). Each as (the tmpfs's index, the remount's), ascending.
pub fn inner_hidden_dirs(ops: &[BwrapOp], inner: &[usize]) -> Vec<(usize, usize)> {
    use std::collections::{HashMap, HashSet};
    use std::path::Path;
    let taken: HashSet<usize> = inner.iter().copied().collect();
    let remount_of = |i: usize, dir: &AbsPathBuf| {
        ops.iter()
            .enumerate()
            .skip(i + 1)
            .find(|(_, op)| matches!(op, BwrapOp::RemountRo { dest } if dest == dir))
            .map(|(r, _)| r)
    };
    let mut candidates: Vec<(usize, usize)> = ops
        .iter()
        .enumerate()
        .filter(|(i, _)| !taken.contains(i))
        .filter_map(|(i, op)| match op {
            BwrapOp::Tmpfs { dest } => remount_of(i, dest).map(|r| (i, r)),
            _ => None,
        })
        .collect();
    let remounts: HashSet<usize> = candidates.iter().map(|(_, r)| *r).collect();
    // Whether a mount bwrap keeps after each op is at, above or below its path.
    let mut later: HashSet<&Path> = HashSet::new();
    let mut later_below: HashSet<&Path> = HashSet::new();
    let mut crowded = vec![false; ops.len()];
    for (i, op) in ops.iter().enumerate().rev() {
        let Some(dest) = op.dest() else { continue };
        let path = dest.as_path();
        crowded[i] = path.ancestors().any(|a| later.contains(a)) || later_below.contains(path);
        if !taken.contains(&i) && !remounts.contains(&i) {
            later.insert(path);
            later_below.extend(path.ancestors().skip(1));
        }
    }
    let mut nearest: HashMap<&Path, usize> = HashMap::new();
    let mut visible = vec![false; ops.len()];
    for (i, op) in ops.iter().enumerate() {
        let Some(dest) = op.dest() else { continue };
        let path = dest.as_path();
        let carrier = path.ancestors().skip(1).filter_map(|a| nearest.get(a).copied()).max();
        visible[i] =
            !nearest.contains_key(path) && carrier.is_some_and(|j| same_path(&ops[j]).is_some());
        if !taken.contains(&i) && !remounts.contains(&i) && !matches!(op, BwrapOp::RemountRo { .. })
        {
            nearest.insert(path, i);
        }
    }
    candidates.retain(|&(i, _)| visible[i] && !crowded[i]);
    candidates
}

/// Takes the ops at `binds` (ascending: binds, from [`inner_mountable`] and
/// [`inner_masks`]) and at `hidden` (from [`inner_hidden_dirs`]) out of `ops`, as the
/// supervisor's inner mounts, in mount order.
pub fn take_inner_mounts(
    ops: &mut Vec<BwrapOp>,
    binds: &[usize],
    hidden: &[(usize, usize)],
) -> Vec<InnerMount> {
    use std::collections::HashSet;
    let binds: HashSet<usize> = binds.iter().copied().collect();
    let dirs: HashSet<usize> = hidden.iter().map(|(i, _)| *i).collect();
    let remounts: HashSet<usize> = hidden.iter().map(|(_, r)| *r).collect();
    let mut taken = Vec::new();
    let mut i = 0;
    ops.retain(|op| {
        let at = i;
        i += 1;
        match op {
            BwrapOp::Bind { src, dest } | BwrapOp::RoBind { src, dest } if binds.contains(&at) => {
                let read_only = matches!(op, BwrapOp::RoBind { .. });
                let on_itself = InnerMount::on_itself(dest.as_os_str(), read_only);
                taken.push(InnerMount { mask: src != dest, ..on_itself });
                false
            }
            BwrapOp::Tmpfs { dest } if dirs.contains(&at) => {
                taken.push(InnerMount {
                    empty_dir: true,
                    ..InnerMount::on_itself(dest.as_os_str(), true)
                });
                false
            }
            _ => !remounts.contains(&at),
        }
    });
    taken
}
