//! The accept loop: one thread that waits in `poll(2)` on a set of listeners and a wakeup
//! socket, and hands every accepted connection to the listener's [`Service`].
//!
//! Listeners are added and removed through a crossbeam channel followed by a wakeup byte, so
//! the thread never spins and never needs a timeout. Dropping the [`Acceptor`] closes the
//! channel, wakes the thread, and joins it; the listeners it held are dropped with it, which
//! closes them and removes their socket files.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, TryRecvError};

use crate::error::{Error, Result};
use crate::stream::{Listener, Stream};

/// How many connections one listener may hand over before the others get their turn.
const ACCEPT_BATCH: usize = 64;

/// Stack size of every thread this crate starts: buffers live on the heap, so a small stack
/// keeps hundreds of connections cheap (it is address space, touched only as used; half a
/// MiB leaves room for `getaddrinfo` and its NSS modules).
pub(crate) const THREAD_STACK: usize = 512 * 1024;

/// What an accepted connection is handed to. Runs on the accept thread: it must not block
/// (it starts a connection thread and returns).
pub(crate) trait Service: Send + Sync {
    fn serve(&self, conn: Stream);
}

enum Control {
    Add { key: u64, listener: Listener, service: Arc<dyn Service> },
    Remove { key: u64, done: Sender<()> },
}

/// The handle of the accept thread.
pub(crate) struct Acceptor {
    control: Option<Sender<Control>>,
    waker: UnixStream,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Acceptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Acceptor").field("running", &self.thread.is_some()).finish()
    }
}

impl Acceptor {
    /// Starts the accept thread with no listeners.
    pub(crate) fn start(name: &str) -> Result<Acceptor> {
        let (waker, wake_rx) =
            UnixStream::pair().map_err(|source| Error::Start { what: "accept wakeup", source })?;
        wake_rx
            .set_nonblocking(true)
            .map_err(|source| Error::Start { what: "accept wakeup", source })?;
        let (control, control_rx) = crossbeam_channel::unbounded();
        let thread = thread::Builder::new()
            .name(name.to_owned())
            .stack_size(THREAD_STACK)
            .spawn(move || accept_loop(&wake_rx, &control_rx))
            .map_err(|source| Error::Start { what: "accept thread", source })?;
        Ok(Acceptor { control: Some(control), waker, thread: Some(thread) })
    }

    /// Adds a listener under `key`. Returns false if the thread has stopped.
    pub(crate) fn add(&self, key: u64, listener: Listener, service: Arc<dyn Service>) -> bool {
        let Some(control) = &self.control else { return false };
        let sent = control.send(Control::Add { key, listener, service }).is_ok();
        self.wake();
        sent
    }

    /// Removes (closes) the listener under `key` and waits until it is closed.
    pub(crate) fn remove(&self, key: u64) {
        let Some(control) = &self.control else { return };
        let (done, done_rx) = crossbeam_channel::bounded(1);
        if control.send(Control::Remove { key, done }).is_ok() {
            self.wake();
            // An error means the thread has exited, which closed every listener.
            let _ = done_rx.recv();
        }
    }

    fn wake(&self) {
        // A full socket buffer means a wakeup is already pending, which is enough.
        let _ = (&self.waker).write(&[1]);
    }
}

impl Drop for Acceptor {
    fn drop(&mut self) {
        self.control = None;
        self.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn accept_loop(wake_rx: &UnixStream, control: &Receiver<Control>) {
    let mut listeners: HashMap<u64, (Listener, Arc<dyn Service>)> = HashMap::new();
    let mut fds: Vec<libc::pollfd> = Vec::new();
    let mut keys: Vec<u64> = Vec::new();
    loop {
        fds.clear();
        keys.clear();
        fds.push(libc::pollfd { fd: wake_rx_fd(wake_rx), events: libc::POLLIN, revents: 0 });
        for (key, (listener, _)) in &listeners {
            fds.push(libc::pollfd { fd: listener.raw_fd(), events: libc::POLLIN, revents: 0 });
            keys.push(*key);
        }
        // SAFETY: `fds` is a valid, exclusively borrowed array of `fds.len()` pollfd structs
        // whose descriptors stay open for the call (the listeners and the wakeup socket are
        // owned by this frame).
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
        if rc < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            // poll itself failing is not recoverable by retrying at once; back off.
            thread::sleep(Duration::from_millis(50));
            continue;
        }
        if fds[0].revents != 0 {
            let mut sink = [0u8; 64];
            while matches!((&*wake_rx).read(&mut sink), Ok(n) if n > 0) {}
            loop {
                match control.try_recv() {
                    Ok(Control::Add { key, listener, service }) => {
                        listeners.insert(key, (listener, service));
                    }
                    Ok(Control::Remove { key, done }) => {
                        listeners.remove(&key);
                        let _ = done.send(());
                    }
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => return,
                }
            }
        }
        let mut ended = Vec::new();
        for (pfd, key) in fds[1..].iter().zip(&keys) {
            if pfd.revents == 0 {
                continue;
            }
            let Some((listener, service)) = listeners.get(key) else { continue };
            for _ in 0..ACCEPT_BATCH {
                match listener.accept() {
                    Ok(conn) => service.serve(conn),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                        // A handoff channel whose sender is gone: nothing more will come,
                        // and it would stay readable forever.
                        ended.push(*key);
                        break;
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => {}
                    Err(_) => {
                        // Out of descriptors or memory: the pending connection stays queued;
                        // back off instead of spinning on a listener that stays readable.
                        thread::sleep(Duration::from_millis(50));
                        break;
                    }
                }
            }
        }
        for key in ended {
            listeners.remove(&key);
        }
    }
}

fn wake_rx_fd(s: &UnixStream) -> std::os::fd::RawFd {
    use std::os::fd::AsRawFd;
    s.as_raw_fd()
}
