//! A small pool of connection threads per relay or proxy task, so that a new connection
//! usually finds a thread waiting instead of paying for a thread start (which is most of
//! the cost of a short connection through a bridge).
//!
//! A job goes to an idle thread when one is free, otherwise to a new thread; a thread idle
//! for [`IDLE_KEEP`] exits. Idle threads are counted: a submitter claims a slot before it
//! sends, and a thread that timed out leaves only if it can take its slot back, so a claimed
//! slot always has a thread to run its job. [`Pool::stop`] closes the channel (idle threads
//! exit at once; jobs already sent still run) and joins every thread.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use crate::acceptor::THREAD_STACK;

/// How long an idle thread waits for another connection before it exits.
const IDLE_KEEP: Duration = Duration::from_secs(2);

type Job = Box<dyn FnOnce() + Send + 'static>;

pub(crate) struct Pool {
    name: &'static str,
    /// `None` once stopped. Held while submitting, so that `stop` sees every thread.
    sender: Mutex<Option<Sender<Job>>>,
    receiver: Receiver<Job>,
    idle: AtomicUsize,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Pool {
    pub(crate) fn new(name: &'static str) -> Arc<Pool> {
        let (sender, receiver) = crossbeam_channel::unbounded();
        Arc::new(Pool {
            name,
            sender: Mutex::new(Some(sender)),
            receiver,
            idle: AtomicUsize::new(0),
            threads: Mutex::default(),
        })
    }

    fn threads(&self) -> MutexGuard<'_, Vec<JoinHandle<()>>> {
        self.threads.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `job` on a pool thread. False if the pool is stopped or no thread could be
    /// started; the job is then dropped (which closes the sockets it owns).
    pub(crate) fn run(self: &Arc<Self>, job: Job) -> bool {
        let guard = self.sender.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(sender) = guard.as_ref() else { return false };
        let mut idle = self.idle.load(Ordering::Acquire);
        while idle > 0 {
            match self.idle.compare_exchange(idle, idle - 1, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return sender.send(job).is_ok(),
                Err(now) => idle = now,
            }
        }
        let pool = Arc::clone(self);
        let spawned = thread::Builder::new()
            .name(self.name.to_owned())
            .stack_size(THREAD_STACK)
            .spawn(move || pool.work(job));
        match spawned {
            Ok(handle) => {
                let mut threads = self.threads();
                threads.retain(|t| !t.is_finished());
                threads.push(handle);
                true
            }
            Err(_) => false,
        }
    }

    fn work(&self, first: Job) {
        first();
        loop {
            self.idle.fetch_add(1, Ordering::AcqRel);
            let job = match self.receiver.recv_timeout(IDLE_KEEP) {
                Ok(job) => job,
                Err(RecvTimeoutError::Disconnected) => return,
                Err(RecvTimeoutError::Timeout) => match self.leave_or_wait() {
                    Some(job) => job,
                    None => return,
                },
            };
            job();
        }
    }

    /// Takes this thread's idle slot back and returns `None` (leave), or, when every slot has
    /// been claimed by a submitter, waits for the job that is on its way.
    fn leave_or_wait(&self) -> Option<Job> {
        let mut idle = self.idle.load(Ordering::Acquire);
        loop {
            if idle == 0 {
                return self.receiver.recv().ok();
            }
            match self.idle.compare_exchange(idle, idle - 1, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return None,
                Err(now) => idle = now,
            }
        }
    }

    /// Refuses new jobs, lets idle threads exit, and joins every thread. The caller has
    /// already made running jobs return (by shutting their sockets down).
    pub(crate) fn stop(&self) {
        drop(self.sender.lock().unwrap_or_else(PoisonError::into_inner).take());
        let threads = std::mem::take(&mut *self.threads());
        for t in threads {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn every_job_runs_and_threads_are_reused() {
        let pool = Pool::new("pb-test");
        let ran = Arc::new(AtomicU64::new(0));
        for round in 0..20 {
            let submitters: Vec<_> = (0..4)
                .map(|_| {
                    let (pool, ran) = (Arc::clone(&pool), Arc::clone(&ran));
                    thread::spawn(move || {
                        for _ in 0..10 {
                            let ran = Arc::clone(&ran);
                            assert!(pool.run(Box::new(move || {
                                ran.fetch_add(1, Ordering::SeqCst);
                            })));
                        }
                    })
                })
                .collect();
            for s in submitters {
                s.join().unwrap();
            }
            let want = (round + 1) * 40;
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while ran.load(Ordering::SeqCst) < want && std::time::Instant::now() < deadline {
                thread::sleep(Duration::from_millis(1));
            }
            assert_eq!(ran.load(Ordering::SeqCst), want);
        }
        let started = pool.threads().len();
        assert!(started < 800, "idle threads took later jobs ({started} threads for 800 jobs)");
        pool.stop();
        assert!(pool.threads().is_empty());
        assert!(!pool.run(Box::new(|| {})), "a stopped pool refuses jobs");
    }
}
