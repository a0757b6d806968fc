//! The served tree: the root, one directory per anchor (`a0`, `a1`, ...) and, under each, the
//! nodes its exceptions need, as an inode table built once from an [`ObserverPlan`].
//!
//! Inode numbers are indexes into the table plus one, so the root is inode 1 as FUSE wants.
//! Every node knows its absolute path in the sandbox (the anchor joined with its relative
//! path), which is what a record names. Relative paths are checked component by component:
//! only normal components are accepted (no root, `.`, `..` or empty name), and no name may
//! hold a NUL byte; any other byte is kept as is (paths are bytes, not text).

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};

use paddock_policy::ObserverPlan;

use crate::Error;

/// The inode number of the root.
pub const ROOT: u64 = 1;

/// One served node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// The parent's inode (the root is its own parent).
    pub parent: u64,
    /// The name in the parent (empty for the root).
    pub name: OsString,
    /// A directory (else an empty regular file).
    pub dir: bool,
    /// A hidden file (a file anchor): mode 0000, every open recorded and refused.
    pub masked: bool,
    /// The absolute path in the sandbox this node stands for (`None` for the root, which is
    /// never visible inside the sandbox).
    pub path: Option<PathBuf>,
    /// The children, by inode, in the order they were added.
    pub children: Vec<u64>,
}

/// The served tree.
#[derive(Clone, Debug)]
pub struct Tree {
    nodes: Vec<Node>,
}

impl Tree {
    /// Builds the tree of `plan`: `a{i}` for `plan.anchors[i]`, then each anchor's nodes
    /// with every missing parent added as a directory.
    pub fn build(plan: &ObserverPlan) -> Result<Tree, Error> {
        let mut tree = Tree {
            nodes: vec![Node {
                parent: ROOT,
                name: OsString::new(),
                dir: true,
                masked: false,
                path: None,
                children: Vec::new(),
            }],
        };
        for (i, file) in plan.files.iter().enumerate() {
            let ino = tree.add(
                ROOT,
                OsString::from(format!("f{i}")),
                false,
                file.as_path().to_path_buf(),
            );
            if let Some(node) = tree.nodes.get_mut(index(ino)) {
                node.masked = true;
            }
        }
        for (i, anchor) in plan.anchors.iter().enumerate() {
            let anchor_path = anchor.path.as_path().to_path_buf();
            let top = tree.add(ROOT, OsString::from(format!("a{i}")), true, anchor_path.clone());
            for node in &anchor.nodes {
                let names =
                    checked_components(&node.rel).map_err(|message| Error::ObserverTree {
                        path: join_name(&anchor_path, node.rel.as_os_str()),
                        message,
                    })?;
                let mut cur = top;
                let last = names.len().saturating_sub(1);
                for (depth, name) in names.into_iter().enumerate() {
                    let dir = depth < last || node.dir;
                    cur = match tree.child(cur, name) {
                        Some(existing) => {
                            if tree.node(existing).is_some_and(|n| n.dir != dir) {
                                return Err(Error::ObserverTree {
                                    path: join_name(&anchor_path, node.rel.as_os_str()),
                                    message: "served both as a directory and as a file".to_owned(),
                                });
                            }
                            existing
                        }
                        None => {
                            let path = tree.path_of(cur).unwrap_or_default().join(name);
                            tree.add(cur, name.to_os_string(), dir, path)
                        }
                    };
                }
            }
        }
        Ok(tree)
    }

    fn add(&mut self, parent: u64, name: OsString, dir: bool, path: PathBuf) -> u64 {
        self.nodes.push(Node {
            parent,
            name,
            dir,
            masked: false,
            path: Some(path),
            children: Vec::new(),
        });
        let ino = self.nodes.len() as u64;
        if let Some(p) = self.nodes.get_mut(index(parent)) {
            p.children.push(ino);
        }
        ino
    }

    /// The node with inode `ino`.
    pub fn node(&self, ino: u64) -> Option<&Node> {
        if ino == 0 {
            return None;
        }
        self.nodes.get(index(ino))
    }

    /// The child of `parent` called `name`.
    pub fn child(&self, parent: u64, name: &OsStr) -> Option<u64> {
        let node = self.node(parent)?;
        node.children.iter().copied().find(|c| self.node(*c).is_some_and(|n| n.name == name))
    }

    /// The absolute sandbox path of `ino` (`None` for the root or an unknown inode).
    pub fn path_of(&self, ino: u64) -> Option<PathBuf> {
        self.node(ino).and_then(|n| n.path.clone())
    }

    /// The sandbox path a name under `parent` stands for: the parent's path joined with
    /// `name`, or `None` under the root (names there are `a{i}` or nothing the sandbox sees).
    pub fn path_under(&self, parent: u64, name: &OsStr) -> Option<PathBuf> {
        self.path_of(parent).map(|p| join_name(&p, name))
    }

    /// How many nodes, the root included.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.nodes.len()
    }
}

fn index(ino: u64) -> usize {
    usize::try_from(ino.saturating_sub(1)).unwrap_or(usize::MAX)
}

/// `dir` joined with `name` as bytes: a name the kernel sent is one component (it never
/// sends `/`), and a refused relative path is shown as it was planned.
fn join_name(dir: &Path, name: &OsStr) -> PathBuf {
    let mut bytes = dir.as_os_str().as_bytes().to_vec();
    if bytes.last() != Some(&b'/') {
        bytes.push(b'/');
    }
    bytes.extend_from_slice(name.as_bytes());
    PathBuf::from(OsString::from_vec(bytes))
}

/// The names of a relative path, or why it cannot be served.
fn checked_components(rel: &Path) -> Result<Vec<&OsStr>, String> {
    if rel.as_os_str().as_bytes().contains(&0) {
        return Err("a served path cannot contain a NUL byte".to_owned());
    }
    let mut out = Vec::new();
    for comp in rel.components() {
        match comp {
            Component::Normal(name) => out.push(name),
            Component::RootDir | Component::Prefix(_) => {
                return Err("a served path must be relative to its anchor".to_owned());
            }
            Component::CurDir | Component::ParentDir => {
                return Err("a served path cannot contain `.` or `..`".to_owned());
            }
        }
    }
    // `Path::components` drops interior `.`; refuse it from the bytes as well, so that what
    // is served is exactly what was planned.
    if rel.as_os_str().as_bytes().split(|b| *b == b'/').any(|c| c == b"." || c == b"..") {
        return Err("a served path cannot contain `.` or `..`".to_owned());
    }
    if out.is_empty() {
        return Err("a served path cannot be empty".to_owned());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use paddock_policy::{AbsPathBuf, ObservedAnchor, ObservedNode};

    /// `(relative path bytes, directory)`.
    type Nodes<'a> = Vec<(&'a [u8], bool)>;

    fn plan(anchors: Vec<(&str, Nodes<'_>)>) -> ObserverPlan {
        ObserverPlan {
            mount_dir: AbsPathBuf::new_lexical("/run/x/observe").unwrap(),
            anchors: anchors
                .into_iter()
                .map(|(path, nodes)| ObservedAnchor {
                    path: AbsPathBuf::new_lexical(path).unwrap(),
                    nodes: nodes
                        .into_iter()
                        .map(|(rel, dir)| ObservedNode {
                            rel: PathBuf::from(OsStr::from_bytes(rel)),
                            dir,
                        })
                        .collect(),
                })
                .collect(),
            files: Vec::new(),
            record_fd: 7,
        }
    }

    #[test]
    fn file_anchors_become_masked_f0_f1_under_the_root() {
        let mut p = plan(vec![("/home/u", vec![])]);
        p.files = vec![
            AbsPathBuf::new_lexical("/home/u/proj/.env").unwrap(),
            AbsPathBuf::new_lexical("/home/u/.netrc").unwrap(),
        ];
        let tree = Tree::build(&p).unwrap();
        let f1 = tree.child(ROOT, OsStr::new("f1")).unwrap();
        let node = tree.node(f1).unwrap();
        assert!(node.masked && !node.dir);
        assert_eq!(tree.path_of(f1).unwrap(), PathBuf::from("/home/u/.netrc"));
        let a0 = tree.child(ROOT, OsStr::new("a0")).unwrap();
        assert!(!tree.node(a0).unwrap().masked);
    }

    #[test]
    fn anchors_become_a0_a1_with_their_nodes_and_parents() {
        let tree = Tree::build(&plan(vec![
            ("/home/u", vec![(b"proj", true), (b"proj/sub/file", false), (b".netrc", false)]),
            ("/etc/secret", vec![]),
        ]))
        .unwrap();
        let a0 = tree.child(ROOT, OsStr::new("a0")).unwrap();
        let a1 = tree.child(ROOT, OsStr::new("a1")).unwrap();
        assert!(tree.child(ROOT, OsStr::new("a2")).is_none());
        assert_eq!(tree.path_of(a0).unwrap(), Path::new("/home/u"));
        assert_eq!(tree.path_of(a1).unwrap(), Path::new("/etc/secret"));
        assert!(tree.node(a1).unwrap().children.is_empty());
        let proj = tree.child(a0, OsStr::new("proj")).unwrap();
        let sub = tree.child(proj, OsStr::new("sub")).unwrap();
        let file = tree.child(sub, OsStr::new("file")).unwrap();
        assert!(tree.node(sub).unwrap().dir, "an intermediate parent is a directory");
        assert!(!tree.node(file).unwrap().dir);
        assert_eq!(tree.path_of(file).unwrap(), Path::new("/home/u/proj/sub/file"));
        let netrc = tree.child(a0, OsStr::new(".netrc")).unwrap();
        assert!(!tree.node(netrc).unwrap().dir);
        // root, a0, proj, sub, file, .netrc, a1
        assert_eq!(tree.len(), 7);
        assert_eq!(tree.node(file).unwrap().parent, sub);
        assert!(tree.node(0).is_none() && tree.node(99).is_none());
    }

    #[test]
    fn a_parent_listed_after_its_child_is_not_duplicated() {
        let tree = Tree::build(&plan(vec![("/h", vec![(b"a/b", true), (b"a", true)])])).unwrap();
        let a0 = tree.child(ROOT, OsStr::new("a0")).unwrap();
        assert_eq!(tree.node(a0).unwrap().children.len(), 1);
        assert_eq!(tree.len(), 4);
    }

    #[test]
    fn paths_under_nodes_keep_odd_bytes_and_the_root_has_none() {
        let tree = Tree::build(&plan(vec![("/h", vec![(b"d\xff\x01", true)])])).unwrap();
        let a0 = tree.child(ROOT, OsStr::new("a0")).unwrap();
        let d = tree.child(a0, OsStr::from_bytes(b"d\xff\x01")).unwrap();
        assert_eq!(
            tree.path_under(d, OsStr::from_bytes(b"x\xfe")).unwrap().as_os_str().as_bytes(),
            b"/h/d\xff\x01/x\xfe"
        );
        assert_eq!(tree.path_under(a0, OsStr::new(".ssh")).unwrap(), Path::new("/h/.ssh"));
        assert!(tree.path_under(ROOT, OsStr::new("a9")).is_none());
        assert!(tree.path_of(ROOT).is_none());
    }

    #[test]
    fn the_root_anchor_joins_without_a_double_slash() {
        assert_eq!(join_name(Path::new("/"), OsStr::new("x")), Path::new("/x"));
        assert_eq!(join_name(Path::new("/a"), OsStr::new("x")).as_os_str(), "/a/x");
        assert_eq!(join_name(Path::new("/a"), OsStr::new("/x")).as_os_str(), "/a//x");
    }

    #[test]
    fn odd_relative_paths_are_refused_with_the_path() {
        for bad in [&b"../etc"[..], b"a/../b", b"./a", b"a/./b", b"/abs", b"", b"a\0b"] {
            let err = Tree::build(&plan(vec![("/h", vec![(bad, true)])]))
                .expect_err(&format!("{:?} must be refused", OsStr::from_bytes(bad)));
            let text = err.to_string();
            assert!(text.starts_with("observer filesystem: /h"), "{text}");
        }
    }

    #[test]
    fn a_node_served_as_file_and_dir_is_refused() {
        let err = Tree::build(&plan(vec![("/h", vec![(b"x", false), (b"x/y", false)])]))
            .expect_err("x is a file and a parent");
        assert!(err.to_string().contains("/h/x/y"), "{err}");
    }
}
