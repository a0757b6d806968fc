//! The connections of one relay or one proxy task: their sockets (so that stopping can shut
//! them down and wake every blocked thread), the pool of threads that serve them (so that
//! stopping can join them), and their byte counts.
//!
//! Stopping is a broadcast: the tracker drops the sender of a crossbeam channel that every
//! waiting connection thread holds a receiver of (`recv_timeout` on it is an interruptible
//! sleep), shuts every registered socket down, then joins every thread of its pool.

use std::collections::{HashMap, VecDeque};
use std::net::Shutdown;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crossbeam_channel::{Receiver, Sender};

use crate::pool::Pool;
use crate::stream::Stream;

/// How many closed connections' records are kept for [`Tracker::connections`].
const CLOSED_HISTORY: usize = 256;

/// Live byte counters of one connection.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Client to target.
    pub(crate) up: AtomicU64,
    /// Target to client.
    pub(crate) down: AtomicU64,
}

/// Byte counts of one connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnStats {
    /// The connection's number within its relay or task, from 1.
    pub id: u64,
    /// Bytes from the client to the target so far.
    pub to_target: u64,
    /// Bytes from the target to the client so far.
    pub to_client: u64,
    /// Whether the connection is still open.
    pub open: bool,
}

/// Totals of a relay or a proxy task.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Connections accepted.
    pub accepted: u64,
    /// Connections refused because the connection cap was reached.
    pub rejected: u64,
    /// Connections open now.
    pub active: usize,
    /// Bytes from clients to targets.
    pub to_target: u64,
    /// Bytes from targets to clients.
    pub to_client: u64,
}

struct Entry {
    sockets: Vec<Stream>,
    counters: Arc<Counters>,
}

#[derive(Default)]
struct Inner {
    next_id: u64,
    conns: HashMap<u64, Entry>,
    closed: VecDeque<ConnStats>,
    stopping: bool,
    accepted: u64,
    rejected: u64,
}

pub(crate) struct Tracker {
    inner: Mutex<Inner>,
    stop: Mutex<Option<Sender<()>>>,
    stop_rx: Receiver<()>,
    pub(crate) total: Counters,
    pub(crate) pool: Arc<Pool>,
}

impl std::fmt::Debug for Tracker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracker").field("stats", &self.stats()).finish()
    }
}

/// A connection's registration; `finish` runs when it is dropped, even on a panic.
pub(crate) struct ConnGuard {
    pub(crate) tracker: Arc<Tracker>,
    pub(crate) id: u64,
    pub(crate) counters: Arc<Counters>,
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        self.tracker.finish(self.id);
    }
}

impl Tracker {
    pub(crate) fn new(name: &'static str) -> Arc<Tracker> {
        let (stop, stop_rx) = crossbeam_channel::bounded(0);
        Arc::new(Tracker {
            inner: Mutex::default(),
            stop: Mutex::new(Some(stop)),
            stop_rx,
            total: Counters::default(),
            pool: Pool::new(name),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A receiver that reports `Disconnected` once stopping has begun.
    pub(crate) fn stop_signal(&self) -> &Receiver<()> {
        &self.stop_rx
    }

    /// Registers a new connection with its client socket, unless stopping or `cap` open
    /// connections exist already.
    pub(crate) fn begin(self: &Arc<Self>, client: &Stream, cap: usize) -> Option<ConnGuard> {
        let clone = client.try_clone().ok()?;
        let mut inner = self.lock();
        if inner.stopping || inner.conns.len() >= cap {
            inner.rejected += 1;
            return None;
        }
        inner.accepted += 1;
        inner.next_id += 1;
        let id = inner.next_id;
        let counters = Arc::new(Counters::default());
        inner.conns.insert(id, Entry { sockets: vec![clone], counters: Arc::clone(&counters) });
        Some(ConnGuard { tracker: Arc::clone(self), id, counters })
    }

    /// Counts a connection passed on without being served here (handed over to another
    /// process): accepted when it was passed on, rejected when it was closed instead.
    pub(crate) fn tally(&self, passed_on: bool) {
        let mut inner = self.lock();
        if passed_on {
            inner.accepted += 1;
        } else {
            inner.rejected += 1;
        }
    }

    /// Registers another socket of connection `id` (the target side). False when stopping:
    /// the caller must then drop it.
    pub(crate) fn add_socket(&self, id: u64, socket: &Stream) -> bool {
        let Ok(clone) = socket.try_clone() else { return false };
        let mut inner = self.lock();
        if inner.stopping {
            return false;
        }
        match inner.conns.get_mut(&id) {
            Some(entry) => {
                entry.sockets.push(clone);
                true
            }
            None => false,
        }
    }

    fn finish(&self, id: u64) {
        let mut inner = self.lock();
        if let Some(entry) = inner.conns.remove(&id) {
            if inner.closed.len() == CLOSED_HISTORY {
                inner.closed.pop_front();
            }
            inner.closed.push_back(stats_of(id, &entry.counters, false));
        }
    }

    pub(crate) fn stats(&self) -> Stats {
        let inner = self.lock();
        Stats {
            accepted: inner.accepted,
            rejected: inner.rejected,
            active: inner.conns.len(),
            to_target: self.total.up.load(Ordering::Relaxed),
            to_client: self.total.down.load(Ordering::Relaxed),
        }
    }

    /// Open connections and the most recently closed ones, by id.
    pub(crate) fn connections(&self) -> Vec<ConnStats> {
        let inner = self.lock();
        let mut all: Vec<ConnStats> = inner.closed.iter().cloned().collect();
        all.extend(inner.conns.iter().map(|(id, e)| stats_of(*id, &e.counters, true)));
        all.sort_by_key(|c| c.id);
        all
    }

    /// Refuses new connections, shuts every open one down and joins every thread.
    pub(crate) fn stop(&self) {
        drop(self.stop.lock().unwrap_or_else(PoisonError::into_inner).take());
        {
            let mut inner = self.lock();
            inner.stopping = true;
            for entry in inner.conns.values() {
                for s in &entry.sockets {
                    s.shutdown(Shutdown::Both);
                }
            }
        }
        self.pool.stop();
    }
}

fn stats_of(id: u64, c: &Counters, open: bool) -> ConnStats {
    ConnStats {
        id,
        to_target: c.up.load(Ordering::Relaxed),
        to_client: c.down.load(Ordering::Relaxed),
        open,
    }
}
