//! The runner's end of the signal channel, read: what the supervisor said up it
//! ([`exec::STARTED`], [`exec::TRACE_ME`], and the task's end, [`TaskEnd`]).
//!
//! The channel is a stream: messages may come together in one read, and the task's end
//! ([`TaskEnd::LEN`] bytes) may in principle be cut between two, so the bytes are parsed in
//! order and an unfinished end waits in [`Channel::partial`] for the rest.

use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;

use crate::runtime::exec;
use crate::supervisor::TaskEnd;

/// What the supervisor said up the channel in one read.
#[derive(Debug, Default)]
pub(super) struct Heard {
    /// [`exec::TRACE_ME`], with the supervisor's pid in this namespace when the message
    /// carried credentials (`SO_PASSCRED` on our end).
    pub trace_me: Option<Option<u32>>,
    /// [`exec::STARTED`]: the task runs.
    pub started: bool,
    /// [`exec::EXITED`] and the rest of the message: the task has exited and nothing else of
    /// the sandbox runs.
    pub ended: Option<TaskEnd>,
}

/// The runner's end of the signal channel, and the part of a message read so far.
#[derive(Debug)]
pub(super) struct Channel {
    /// The socket; `None` once closed or failed.
    pub stream: Option<UnixStream>,
    partial: Vec<u8>,
}

impl Channel {
    pub fn new(stream: Option<UnixStream>) -> Channel {
        Channel { stream, partial: Vec::new() }
    }

    /// Reads what is there without waiting. A closed or failed channel is dropped.
    pub fn read(&mut self) -> Heard {
        use nix::sys::socket::{ControlMessageOwned, MsgFlags, UnixCredentials, recvmsg};
        let Some(c) = self.stream.as_mut() else { return Heard::default() };
        let mut buf = [0u8; 64];
        let mut space = nix::cmsg_space!(UnixCredentials);
        let mut iov = [std::io::IoSliceMut::new(&mut buf)];
        let got = recvmsg::<()>(c.as_raw_fd(), &mut iov, Some(&mut space), MsgFlags::MSG_DONTWAIT)
            .map(|msg| {
                let pid = msg.cmsgs().ok().into_iter().flatten().find_map(|m| match m {
                    ControlMessageOwned::ScmCredentials(cred) => u32::try_from(cred.pid()).ok(),
                    _ => None,
                });
                (msg.bytes, pid)
            });
        match got {
            Ok((0, _)) => {
                self.stream = None;
                Heard::default()
            }
            Ok((n, pid)) => self.parse(&buf[..n], pid),
            Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EINTR) => Heard::default(),
            // A failed socket would be readable for ever.
            Err(_) => {
                self.stream = None;
                Heard::default()
            }
        }
    }

    /// The messages in `bytes`, after what was left of the last read.
    fn parse(&mut self, bytes: &[u8], pid: Option<u32>) -> Heard {
        self.partial.extend_from_slice(bytes);
        let mut heard = Heard::default();
        let mut at = 0;
        while at < self.partial.len() {
            match self.partial[at] {
                exec::STARTED => heard.started = true,
                exec::TRACE_ME => heard.trace_me = Some(pid),
                exec::EXITED => {
                    let Some(message) = self.partial.get(at..at + TaskEnd::LEN) else { break };
                    let mut whole = [0u8; TaskEnd::LEN];
                    whole.copy_from_slice(message);
                    heard.ended = TaskEnd::decode(&whole);
                    at += TaskEnd::LEN;
                    continue;
                }
                _ => {}
            }
            at += 1;
        }
        self.partial.drain(..at);
        heard
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn end(code: u8) -> TaskEnd {
        TaskEnd { code, cpu_time: Duration::from_micros(0x5345_5453), max_rss_kib: 0x54 }
    }

    #[test]
    fn messages_read_together_are_each_heard() {
        let mut channel = Channel::new(None);
        let mut bytes = vec![exec::STARTED];
        bytes.extend_from_slice(&end(3).encode());
        let heard = channel.parse(&bytes, None);
        assert!(heard.started);
        assert_eq!(heard.ended, Some(end(3)));
        assert!(heard.trace_me.is_none(), "bytes of the end are not messages of their own");
    }

    #[test]
    fn an_end_cut_between_two_reads_is_heard_once_whole() {
        let mut channel = Channel::new(None);
        let whole = end(b'S').encode();
        let first = channel.parse(&whole[..7], Some(1));
        assert!(first.ended.is_none() && !first.started && first.trace_me.is_none());
        let second = channel.parse(&whole[7..], Some(1));
        assert_eq!(second.ended, Some(end(b'S')));
        assert!(!second.started, "the code is not a STARTED");
        assert!(channel.partial.is_empty());
    }

    #[test]
    fn a_trace_request_carries_the_senders_pid() {
        let mut channel = Channel::new(None);
        let heard = channel.parse(&[exec::TRACE_ME], Some(42));
        assert_eq!(heard.trace_me, Some(Some(42)));
    }
}
