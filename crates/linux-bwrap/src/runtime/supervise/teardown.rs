//! bwrap after the supervisor told how the task ended ([`crate::supervisor::TaskEnd`]):
//! nothing of the task runs any more, but the kernel is still tearing the sandbox's
//! namespaces down (about 0.4 ms here: the supervisor, the sandbox's pid 1, exits only once
//! its mounts are undone), and bwrap exits after that. The run is finished meanwhile, and
//! whoever holds the outcome reaps bwrap when done with it.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Mutex;

/// bwrap, still exiting: waited for and reaped when dropped (the last clone of the
/// outcome's `Arc`), then the work given to [`Teardown::and_then`] is done, so no zombie
/// and nothing of the sandbox outlives its holder.
pub struct Teardown {
    pid: libc::pid_t,
    pidfd: OwnedFd,
    after: Mutex<Vec<Box<dyn FnOnce() + Send>>>,
}

/// How long a drop waits for bwrap to exit by itself before it kills it.
const EXIT_WAIT_MS: libc::c_int = 2000;

impl Teardown {
    /// bwrap's pid and its pidfd.
    pub(super) fn new(pid: libc::pid_t, pidfd: OwnedFd) -> Teardown {
        Teardown { pid, pidfd, after: Mutex::new(Vec::new()) }
    }

    /// `work` to do once bwrap is reaped: ending what lives as long as the sandbox (the
    /// observer's serving thread, whose connection ends with the sandbox's namespaces).
    pub fn and_then(&self, work: impl FnOnce() + Send + 'static) {
        if let Ok(mut after) = self.after.lock() {
            after.push(Box::new(work));
        }
    }
}

impl Drop for Teardown {
    fn drop(&mut self) {
        let mut pfd = libc::pollfd { fd: self.pidfd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd. Readable once bwrap has exited; a failure or the limit
        // goes on to the kill.
        unsafe { libc::poll(&mut pfd, 1, EXIT_WAIT_MS) };
        // Its whole group, as when the run waited for it.
        let _ = super::reap_group(self.pid);
        let after = self.after.get_mut().map(std::mem::take).unwrap_or_default();
        for work in after {
            work();
        }
    }
}

impl std::fmt::Debug for Teardown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Teardown").field("pid", &self.pid).finish()
    }
}
