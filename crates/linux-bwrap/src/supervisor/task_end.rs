//! The task's end as the supervisor tells it up the signal channel: [`EXITED`] followed by
//! the exit code and what the task's processes used, so that the runner can finish the run
//! while the kernel is still tearing the sandbox's namespaces down, without waiting for
//! bwrap's exit status.
//!
//! The message is [`TaskEnd::LEN`] bytes: [`EXITED`], the exit code (the task's, 128+N for
//! signal N), then the user + system CPU time of every process the supervisor reaped in
//! microseconds and the largest one's peak resident set in KiB, both `u64` little-endian.
//! `paddock-supervisor-nolibc` writes the same bytes by hand; its tests check them against
//! [`TaskEnd::decode`].

use std::time::Duration;

use super::EXITED;

/// How a task ended, as its supervisor saw it once everything of the sandbox was reaped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskEnd {
    /// The exit code the supervisor exits with.
    pub code: u8,
    /// User + system CPU time of every process the supervisor reaped.
    pub cpu_time: Duration,
    /// Peak resident set size of the largest of them, in KiB.
    pub max_rss_kib: u64,
}

impl TaskEnd {
    /// The length of the message, [`EXITED`] included.
    pub const LEN: usize = 18;

    /// The end of a task that exits with `code`, with the usage of every child reaped so far
    /// (`getrusage(RUSAGE_CHILDREN)`: the supervisor calls it once nothing is left to reap).
    pub fn of_children(code: i32) -> TaskEnd {
        // SAFETY: an all-zero rusage is a valid value to be overwritten.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: getrusage with a valid pointer; on failure the zeros stay.
        unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
        let micros = |t: libc::timeval| {
            u64::try_from(t.tv_sec).unwrap_or(0).saturating_mul(1_000_000)
                + u64::try_from(t.tv_usec).unwrap_or(0)
        };
        TaskEnd {
            code: u8::try_from(code).unwrap_or(super::EXIT_SUPERVISOR as u8),
            cpu_time: Duration::from_micros(
                micros(usage.ru_utime).saturating_add(micros(usage.ru_stime)),
            ),
            max_rss_kib: u64::try_from(usage.ru_maxrss).unwrap_or(0),
        }
    }

    /// The message's bytes.
    pub fn encode(&self) -> [u8; TaskEnd::LEN] {
        let mut out = [0u8; TaskEnd::LEN];
        out[0] = EXITED;
        out[1] = self.code;
        let micros = u64::try_from(self.cpu_time.as_micros()).unwrap_or(u64::MAX);
        out[2..10].copy_from_slice(&micros.to_le_bytes());
        out[10..18].copy_from_slice(&self.max_rss_kib.to_le_bytes());
        out
    }

    /// The message read back; `None` unless it starts with [`EXITED`].
    pub fn decode(bytes: &[u8; TaskEnd::LEN]) -> Option<TaskEnd> {
        if bytes[0] != EXITED {
            return None;
        }
        let word = |at: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&bytes[at..at + 8]);
            u64::from_le_bytes(w)
        };
        Some(TaskEnd {
            code: bytes[1],
            cpu_time: Duration::from_micros(word(2)),
            max_rss_kib: word(10),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_end_reads_back_as_it_was_written() {
        let end =
            TaskEnd { code: 137, cpu_time: Duration::from_micros(1_234_567), max_rss_kib: 9000 };
        let bytes = end.encode();
        assert_eq!(bytes[0], EXITED);
        assert_eq!(TaskEnd::decode(&bytes), Some(end));
        let mut other = bytes;
        other[0] = b'S';
        assert_eq!(TaskEnd::decode(&other), None);
    }

    #[test]
    fn the_usage_of_a_reaped_child_is_counted() {
        #[allow(clippy::disallowed_methods)] // a child to be reaped, nothing sandboxed
        let mut child = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"])
            .spawn()
            .unwrap();
        child.wait().unwrap();
        let end = TaskEnd::of_children(3);
        assert_eq!(end.code, 3);
        assert!(end.cpu_time > Duration::ZERO, "{end:?}");
        assert!(end.max_rss_kib > 0, "{end:?}");
    }
}
