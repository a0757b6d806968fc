//! The observer filesystem (`--itemize observe`): a FUSE filesystem served by the runner in
//! place of each directory deny anchor, recording every attempt to find, list or change
//! what the anchor hides.
//!
//! # Shape
//!
//! The root holds `a0`, `a1`, ... (one directory per [`ObserverPlan::anchors`] entry), each
//! serving exactly its anchor's nodes: the mount points bwrap binds the exceptions onto.
//! The plan binds `mount_dir/a{i}` over anchor `i` (see [`crate::ops`]). What is answered
//! and what is recorded is described in the `fs` submodule: in short, every lookup of a
//! name that is not served is recorded and answered `ENOENT`, every listing is recorded,
//! every change is recorded and answered `EROFS`, and nothing is cached that would let a
//! second attempt go unseen. Nothing outside anchors reaches this filesystem, so nothing
//! there is slowed.
//!
//! # Lifecycle
//!
//! 1. [`open`] (in the runner) builds the tree, checks that `/dev/fuse` can be opened (so a
//!    missing or unreadable device is a clear error before anything is spawned), creates
//!    the mount point, and starts the serving thread, which waits for the device.
//! 2. [`ObserverMount::enter`] (in the forked child, first thing in `pre_exec`) enters a
//!    mount namespace of its own (and a user namespace mapping the runner's uid and gid to
//!    themselves when not root), makes `/` recursively private, opens `/dev/fuse` there,
//!    mounts it on the mount point and sends the descriptor to the serving thread over a
//!    socket. The device is opened in the child because the kernel accepts a FUSE
//!    descriptor only from the user namespace that mounts it. bwrap is then executed
//!    nested in that namespace: the mount is never in the host's mount table and needs
//!    neither `fusermount3` nor `allow_other` (the daemon and the sandbox are the same
//!    user, which is what the kernel checks without `allow_other`).
//! 3. The serving thread answers requests until the kernel ends the connection, which it
//!    does when the last process of the child's namespace is gone: the sandbox's exit, or
//!    its death with the runner (`--die-with-parent`) after a `kill -9` of the runner, whose
//!    death also takes this thread. Nothing is left behind: no mount, no process.
//! 4. [`ObserverServer::finish`] (after the child is reaped) waits a bounded time for the
//!    thread and returns the records not yet taken from [`ObserverServer::records`].
//!
//! Requests carry the caller's pid in the runner's pid namespace (the mount was made there).

mod fs;
mod mount;
mod tree;

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use paddock_policy::ObserverPlan;

use crate::Error;

pub use mount::ObserverMount;
use tree::Tree;

/// The FUSE device.
pub const DEV_FUSE: &str = "/dev/fuse";

/// How long [`ObserverServer::finish`] waits for the serving thread.
pub const FINISH_WAIT: Duration = Duration::from_secs(2);

/// What a recorded request tried to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FsOp {
    /// Find a name that is hidden (`stat`, `open`, `exec`, `chdir`, ...).
    Lookup,
    /// List a directory.
    List,
    /// Create a file.
    Create,
    /// Create a directory.
    Mkdir,
    /// Create a node (fifo, socket, device).
    Mknod,
    /// Remove a file.
    Unlink,
    /// Remove a directory.
    Rmdir,
    /// Rename (the source).
    Rename,
    /// Make a hard link (the new name).
    Link,
    /// Make a symbolic link.
    Symlink,
    /// Change attributes (mode, owner, size, times).
    Setattr,
    /// Open a served file for writing.
    OpenWrite,
    /// Open a hidden file (a file anchor).
    Open,
}

impl FsOp {
    /// The operation's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            FsOp::Lookup => "lookup",
            FsOp::List => "readdir",
            FsOp::Create => "create",
            FsOp::Mkdir => "mkdir",
            FsOp::Mknod => "mknod",
            FsOp::Unlink => "unlink",
            FsOp::Rmdir => "rmdir",
            FsOp::Rename => "rename",
            FsOp::Link => "link",
            FsOp::Symlink => "symlink",
            FsOp::Setattr => "setattr",
            FsOp::OpenWrite => "open-write",
            FsOp::Open => "open",
        }
    }

    /// Whether it is an attempt to change something (refused with `EROFS`).
    pub fn is_write(self) -> bool {
        !matches!(self, FsOp::Lookup | FsOp::List | FsOp::Open)
    }
}

/// One recorded request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FsRecord {
    /// The caller, in the runner's pid namespace.
    pub pid: u32,
    /// What it tried.
    pub op: FsOp,
    /// The sandbox path: the anchor joined with the path under it (for a lookup, the name
    /// looked up; for a listing, the directory).
    pub path: PathBuf,
    /// What the caller got: `ENOENT` (lookups and listings: the hidden entry is not there)
    /// `EROFS` (changes) or `EACCES` (opening a hidden file).
    pub errno: &'static str,
}

/// Prepares the observer of `plan`: see the module doc. The returned mount is handed to the
/// spawn (its [`enter`](ObserverMount::enter) runs in the child); the server stays with the
/// runner.
pub fn open(plan: &ObserverPlan) -> Result<(ObserverMount, ObserverServer), Error> {
    let tree = Tree::build(plan)?;
    check_device(Path::new(DEV_FUSE))?;
    let mount_dir = plan.mount_dir.as_path();
    let setup = |message: String| Error::ObserverSetup { path: mount_dir.to_path_buf(), message };
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(mount_dir)
            .map_err(|e| setup(format!("cannot create the mount point: {e}")))?;
    }
    let (ours, theirs) = crate::fdpass::socket_pair()
        .map_err(|e| setup(format!("cannot create the descriptor channel: {e}")))?;
    // SAFETY: geteuid and getegid cannot fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let mount = ObserverMount::new(mount_dir, uid, gid, theirs).map_err(setup)?;
    let (tx, rx) = crossbeam_channel::unbounded();
    let ours = Arc::new(ours);
    let thread_sock = Arc::clone(&ours);
    let fs = fs::ObserverFs::new(tree, uid, gid, tx);
    // Nothing is ever sent: the sender goes with the thread, which wakes `finish` at once.
    let (ended_tx, ended) = crossbeam_channel::bounded::<()>(0);
    let thread = std::thread::Builder::new()
        .name("paddock-observer".to_owned())
        .spawn(move || {
            let _ended = ended_tx;
            serve(&thread_sock, fs)
        })
        .map_err(|e| setup(format!("cannot start the serving thread: {e}")))?;
    let server = ObserverServer { records: rx, thread: Some(thread), ended, sock: ours };
    Ok((mount, server))
}

/// Opens and closes the device, turning a failure into the fix.
fn check_device(path: &Path) -> Result<(), Error> {
    let err = match std::fs::OpenOptions::new().read(true).write(true).open(path) {
        Ok(_) => return Ok(()),
        Err(e) => e,
    };
    let message = match err.raw_os_error() {
        Some(libc::EACCES | libc::EPERM) => {
            "permission denied; make it 0666 (Debian's udev does) or run as root".to_owned()
        }
        Some(libc::ENOENT | libc::ENODEV | libc::ENXIO) => {
            "no FUSE device; load the module (modprobe fuse), or in a container pass the \
             device (docker run --device /dev/fuse), or use --itemize strace"
                .to_owned()
        }
        _ => format!("{err}; use --itemize strace"),
    };
    Err(Error::FuseDevice { path: path.to_path_buf(), message })
}

/// The serving thread: waits for the child's descriptor, then serves until the kernel ends
/// the connection. Without a descriptor (the child never mounted) it just ends.
fn serve(sock: &OwnedFd, fs: fs::ObserverFs) {
    let Some(dev) = crate::fdpass::recv_fd(sock.as_raw_fd()).ok().flatten() else { return };
    let config = fuser::Config::default();
    // The kernel already refuses every other user (no `allow_other`): the library's own
    // check would only repeat it.
    let Ok(session) = fuser::Session::from_fd(fs, dev, fuser::SessionACL::All, config) else {
        return;
    };
    let _ = session.run();
}

/// The runner's side of an observer: the records and the serving thread.
#[derive(Debug)]
pub struct ObserverServer {
    records: Receiver<FsRecord>,
    thread: Option<JoinHandle<()>>,
    /// Disconnected when the serving thread ends.
    ended: Receiver<()>,
    sock: Arc<OwnedFd>,
}

impl ObserverServer {
    /// The records as they come (a clone of the one receiver: records taken here are not
    /// returned by [`finish`](Self::finish)).
    pub fn records(&self) -> Receiver<FsRecord> {
        self.records.clone()
    }

    /// After the child is reaped: waits up to [`FINISH_WAIT`] for the serving thread to end
    /// and joins it, then returns every record not yet taken through
    /// [`records`](Self::records). It never hangs: a thread still serving then (a process
    /// of the sandbox outlived it, holding the mount) is left to end with the connection,
    /// and what it records later is lost.
    pub fn finish(mut self) -> Vec<FsRecord> {
        // A child that never mounted never sends: wake the thread's wait for the device.
        // SAFETY: shutdown on a socket this server owns.
        unsafe { libc::shutdown(self.sock.as_raw_fd(), libc::SHUT_RDWR) };
        let deadline = Instant::now() + FINISH_WAIT;
        if let Some(thread) = self.thread.take() {
            // Woken the moment the thread is done (its end of the channel goes with it),
            // not at the next turn of a polling loop; joined then, as it returns.
            let ended = self.ended.recv_deadline(deadline);
            if ended == Err(crossbeam_channel::RecvTimeoutError::Disconnected) {
                let _ = thread.join();
            }
        }
        self.records.try_iter().collect()
    }

    /// Whether the serving thread has ended.
    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(JoinHandle::is_finished)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_names_and_write_kinds() {
        assert_eq!(FsOp::Lookup.name(), "lookup");
        assert_eq!(FsOp::List.name(), "readdir");
        assert_eq!(FsOp::OpenWrite.name(), "open-write");
        assert!(!FsOp::Lookup.is_write() && !FsOp::List.is_write());
        for op in [
            FsOp::Create,
            FsOp::Mkdir,
            FsOp::Mknod,
            FsOp::Unlink,
            FsOp::Rmdir,
            FsOp::Rename,
            FsOp::Link,
            FsOp::Symlink,
            FsOp::Setattr,
            FsOp::OpenWrite,
        ] {
            assert!(op.is_write(), "{op:?}");
        }
    }

    #[test]
    fn a_missing_device_says_how_to_fix_it() {
        let err = check_device(Path::new("/nonexistent/fuse")).expect_err("missing");
        let text = err.to_string();
        assert!(text.starts_with("/nonexistent/fuse: no FUSE device;"), "{text}");
        assert!(text.contains("--itemize strace"), "{text}");
    }
}
