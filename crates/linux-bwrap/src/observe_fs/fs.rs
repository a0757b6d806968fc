//! The FUSE operations: serve the [`Tree`], refuse and record everything else.
//!
//! - LOOKUP of a served name answers its entry with a long TTL (it is not a denial, and
//!   bwrap finds its mount points this way). LOOKUP of any other name under an anchor is
//!   recorded and answered with an error reply of `ENOENT`. Error replies are never cached
//!   by the kernel and no negative entry (inode 0 with a TTL) is ever sent, so a second
//!   attempt reaches this daemon and is recorded again: each record is one attempt.
//! - OPENDIR of an anchor or of a served directory is recorded as a listing, and the
//!   listing is then answered with the served entries only. A tmpfs anchor listed exactly
//!   its mount points, so programs see what they saw before (a shell's `ls ~` or a `find`
//!   walking into an anchor keep working); refusing it would change the sandbox's behavior
//!   only to itemize it. The record says `ENOENT`: whatever the anchor hides was reported
//!   as not being there.
//! - CREATE, MKDIR, MKNOD, UNLINK, RMDIR, RENAME, LINK, SYMLINK, SETATTR and an open for
//!   writing (or with `O_TRUNC`) are recorded and refused with `EROFS`, the errno the
//!   read-only tmpfs anchor gave. A served file opened for reading is empty.
//! - A file anchor (`f0`, `f1`, ... under the root, bound over each hidden file) is an
//!   empty mode-0000 file: every open is recorded and refused with `EACCES`, as the shared
//!   masked file refused a task without capabilities.
//! - Requests on the root (`a0`, `a1`, ... and nothing else) are not recorded: the sandbox
//!   never sees the root; only bwrap looks there while it sets up.
//! - Listings carry each entry's attributes (`READDIRPLUS`, when the kernel has it), kept
//!   as long as a LOOKUP's: the child mounting many masks from the root lists it once and
//!   finds each file cached (`crate::private_ns::SelfMounts::mount`).
//!
//! Records go to a channel the runner drains; a full or closed channel never blocks the
//! sandbox (it is unbounded, and a send to a dropped receiver is ignored).

use std::ffi::OsStr;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use crossbeam_channel::Sender;
use fuser::{
    BsdFileFlags, Errno, FileAttr, FileHandle, FileType, FopenFlags, Generation, INodeNo,
    InitFlags, KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyOpen, Request, TimeOrNow,
};

use super::tree::{ROOT, Tree};
use super::{FsOp, FsRecord};

/// How long the kernel may cache a served node's entry and attributes: the tree never
/// changes while it is served.
const TTL: Duration = Duration::from_secs(3600);

/// The filesystem the serving thread runs.
#[derive(Debug)]
pub(super) struct ObserverFs {
    tree: Tree,
    uid: u32,
    gid: u32,
    time: SystemTime,
    records: Sender<FsRecord>,
}

impl ObserverFs {
    pub(super) fn new(tree: Tree, uid: u32, gid: u32, records: Sender<FsRecord>) -> ObserverFs {
        ObserverFs { tree, uid, gid, time: SystemTime::now(), records }
    }

    fn attr(&self, ino: u64) -> Option<FileAttr> {
        let node = self.tree.node(ino)?;
        Some(FileAttr {
            ino: INodeNo(ino),
            size: 0,
            blocks: 0,
            atime: self.time,
            mtime: self.time,
            ctime: self.time,
            crtime: self.time,
            kind: if node.dir { FileType::Directory } else { FileType::RegularFile },
            perm: if node.dir {
                0o755
            } else if node.masked {
                0
            } else {
                0o644
            },
            nlink: if node.dir { 2 } else { 1 },
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        })
    }

    fn record(&self, req: &Request, op: FsOp, path: Option<PathBuf>) {
        let Some(path) = path else { return };
        let errno = match op {
            FsOp::Open => "EACCES",
            _ if op.is_write() => "EROFS",
            _ => "ENOENT",
        };
        // Ignored when the runner has stopped listening: the sandbox must not notice.
        let _ = self.records.send(FsRecord { pid: req.pid(), op, path, errno });
    }

    /// Records a change of `name` under `parent` and refuses it.
    fn refuse_name(&self, req: &Request, op: FsOp, parent: INodeNo, name: &OsStr) -> Errno {
        self.record(req, op, self.tree.path_under(parent.0, name));
        Errno::EROFS
    }

    /// Records a change of the node `ino` and refuses it.
    fn refuse_node(&self, req: &Request, op: FsOp, ino: INodeNo) -> Errno {
        self.record(req, op, self.tree.path_of(ino.0));
        Errno::EROFS
    }
}

impl ObserverFs {
    /// A served directory's entries from `offset` on (`.` and `..` first): the offset the
    /// next listing resumes at after each, its inode, its kind and its name.
    fn listed(&self, ino: u64, offset: u64) -> Option<Vec<(u64, u64, FileType, &OsStr)>> {
        let node = self.tree.node(ino)?;
        let mut entries: Vec<(u64, FileType, &OsStr)> = vec![
            (ino, FileType::Directory, OsStr::new(".")),
            (node.parent, FileType::Directory, OsStr::new("..")),
        ];
        for child in &node.children {
            if let Some(c) = self.tree.node(*child) {
                let kind = if c.dir { FileType::Directory } else { FileType::RegularFile };
                entries.push((*child, kind, c.name.as_os_str()));
            }
        }
        let skip = usize::try_from(offset).unwrap_or(usize::MAX);
        let next = |i: usize| u64::try_from(i).map_or(u64::MAX, |i| i + 1);
        Some(
            entries
                .into_iter()
                .enumerate()
                .skip(skip)
                .map(|(i, (child, kind, name))| (next(i), child, kind, name))
                .collect(),
        )
    }
}

impl fuser::Filesystem for ObserverFs {
    /// Listings come with their entries' attributes (`READDIRPLUS`): a child that binds
    /// many of the root's files (the masks of hidden files below a write grant) lists the
    /// root once and then finds each in the kernel's cache, not one round trip each.
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // A kernel without it lists as before: nothing else changes.
        let _ = config.add_capabilities(InitFlags::FUSE_DO_READDIRPLUS);
        Ok(())
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        if let Some(attr) = self.tree.child(parent.0, name).and_then(|ino| self.attr(ino)) {
            return reply.entry(&TTL, &attr, Generation(0));
        }
        if parent.0 != ROOT {
            self.record(req, FsOp::Lookup, self.tree.path_under(parent.0, name));
        }
        // An error reply: the kernel caches nothing, so the next attempt is seen too.
        reply.error(Errno::ENOENT);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.attr(ino.0) {
            Some(attr) => reply.attr(&TTL, &attr),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        _size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        reply.error(self.refuse_node(req, FsOp::Setattr, ino));
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        reply.error(self.refuse_name(req, FsOp::Mknod, parent, name));
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        reply.error(self.refuse_name(req, FsOp::Mkdir, parent, name));
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        reply.error(self.refuse_name(req, FsOp::Unlink, parent, name));
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        reply.error(self.refuse_name(req, FsOp::Rmdir, parent, name));
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        _target: &std::path::Path,
        reply: ReplyEntry,
    ) {
        reply.error(self.refuse_name(req, FsOp::Symlink, parent, link_name));
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _newparent: INodeNo,
        _newname: &OsStr,
        _flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        // The source names what was touched under the anchor; a rename into an anchor from
        // elsewhere is EXDEV before it gets here (another mount).
        reply.error(self.refuse_name(req, FsOp::Rename, parent, name));
    }

    fn link(
        &self,
        req: &Request,
        _ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        reply.error(self.refuse_name(req, FsOp::Link, newparent, newname));
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        reply.error(self.refuse_name(req, FsOp::Create, parent, name));
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        if self.tree.node(ino.0).is_some_and(|n| n.masked) {
            // A hidden file: what the shared mode-0000 file gave a task without capabilities.
            self.record(req, FsOp::Open, self.tree.path_of(ino.0));
            return reply.error(Errno::EACCES);
        }
        let writes = flags.0 & libc::O_ACCMODE != libc::O_RDONLY || flags.0 & libc::O_TRUNC != 0;
        if writes {
            return reply.error(self.refuse_node(req, FsOp::OpenWrite, ino));
        }
        reply.opened(FileHandle(0), FopenFlags::empty());
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _offset: u64,
        _size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        // Served files are empty.
        reply.data(&[]);
    }

    fn opendir(&self, req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        if self.tree.node(ino.0).is_none_or(|n| !n.dir) {
            return reply.error(Errno::ENOTDIR);
        }
        if ino.0 != ROOT {
            self.record(req, FsOp::List, self.tree.path_of(ino.0));
        }
        reply.opened(FileHandle(0), FopenFlags::empty());
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let Some(entries) = self.listed(ino.0, offset) else { return reply.error(Errno::ENOENT) };
        for (next, child, kind, name) in entries {
            if reply.add(INodeNo(child), next, kind, name) {
                break;
            }
        }
        reply.ok();
    }

    /// [`readdir`](Self::readdir) with each entry's attributes, cached as a LOOKUP's are.
    fn readdirplus(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        let Some(entries) = self.listed(ino.0, offset) else { return reply.error(Errno::ENOENT) };
        for (next, child, _, name) in entries {
            let Some(attr) = self.attr(child) else { continue };
            if reply.add(INodeNo(child), next, name, &TTL, &attr, Generation(0)) {
                break;
            }
        }
        reply.ok();
    }
}
