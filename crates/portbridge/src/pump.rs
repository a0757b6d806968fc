//! Moving bytes between two connected streams, both ways, until both sides are done.
//!
//! Each direction is a blocking loop on its own pool thread with one buffer, so memory per
//! connection is bounded (two buffers) and an idle connection costs no CPU. The buffer starts
//! at [`BUFFER`] and grows once to [`BUFFER_GROWN`] when a read fills it: a bulk transfer then
//! moves more per pair of calls (fewer wake-ups of the threads on both sides), while a quiet
//! connection keeps the small one.
//!
//! Bytes are copied through user space, not spliced (`splice(2)` through a pipe): measured
//! on a two-core machine (`bridge_bench`, 2 GiB runs, both ways in one binary, alternated),
//! a TCP-to-TCP relay (an inbound port grant) ran at 73-74% of direct loopback spliced and
//! 83-85% copied, with less CPU per byte (0.66-0.70 s/GiB against 0.75): splicing packs
//! each segment it sends with the pages of the segments it received, which costs the
//! sending and the receiving stack more than the copy saves. TCP to unix ran the same either
//! way (109-113%), and a copy needs no pipe per direction. End of stream on
//! one side is passed on as `shutdown(Write)` on the other (half-close), and the opposite
//! direction keeps flowing. An error on either side (a reset, a client that hung up
//! mid-transfer) shuts both sockets down completely, which wakes the other direction's
//! blocked read so that both threads end.

use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::stream::Stream;
use crate::tracker::{Counters, Tracker};

/// Bytes read at a time in each direction, at first.
pub(crate) const BUFFER: usize = 128 * 1024;
/// Bytes read at a time once a read has filled [`BUFFER`]. Alternated with 256 and 512 KiB
/// (`bridge_bench`, 2 GiB runs), 1 MiB moved an inbound grant's bytes at 89-97% of direct
/// loopback against 84-85% and 80-87%, with the least CPU per byte. At most
/// `RelayOptions::max_connections` connections, each with two buffers, bound the memory.
pub(crate) const BUFFER_GROWN: usize = 1024 * 1024;

/// Inspects the client's first bytes (appending what it reads to the buffer) and says whether
/// they may go on to the target.
pub(crate) type Gate<'a> = &'a mut dyn FnMut(&Stream, &mut Vec<u8>) -> bool;

/// Takes each piece the client sends and appends to the buffer what of it goes on to the
/// target (the proxy's one request per connection, see `proxy::pipeline`).
pub(crate) type Meter<'a> = &'a mut dyn FnMut(&[u8], &mut Vec<u8>);

/// Relays between `client` and `target` until both directions end. `first_up` is sent to the
/// target before anything else (bytes the client sent while a proxy was deciding).
///
/// `gate`, if given, sees the client's first bytes before any reach the target and may refuse
/// the connection (the proxy's TLS server-name check); the target-to-client direction already
/// flows meanwhile, so protocols where the server speaks first still work. `meter`, if
/// given, decides what of each later piece from the client goes on.
pub(crate) fn relay(
    client: Stream,
    target: Stream,
    first_up: Vec<u8>,
    gate: Option<Gate<'_>>,
    meter: Option<Meter<'_>>,
    counters: &Arc<Counters>,
    tracker: &Arc<Tracker>,
) {
    let (Ok(client_down), Ok(target_down)) = (client.try_clone(), target.try_clone()) else {
        client.shutdown(Shutdown::Both);
        target.shutdown(Shutdown::Both);
        return;
    };
    let down_counters = Arc::clone(counters);
    let down_tracker = Arc::clone(tracker);
    let (done, down_finished) = crossbeam_channel::bounded::<()>(1);
    let started = tracker.pool.run(Box::new(move || {
        let totals = &down_tracker.total.down;
        copy_one_way(&target_down, &client_down, &[], None, &down_counters.down, totals);
        drop(done);
    }));
    if !started {
        client.shutdown(Shutdown::Both);
        target.shutdown(Shutdown::Both);
        return;
    }
    let mut first = first_up;
    let allowed = match gate {
        Some(gate) => gate(&client, &mut first),
        None => true,
    };
    if allowed {
        copy_one_way(&client, &target, &first, meter, &counters.up, &tracker.total.up);
    } else {
        client.shutdown(Shutdown::Both);
        target.shutdown(Shutdown::Both);
    }
    // The other direction reports its end by dropping `done`.
    let _ = down_finished.recv();
}

/// Copies `from` to `to` (what `meter` passes of it, when given) until end of stream (then
/// half-closes `to`) or an error (then shuts both down).
fn copy_one_way(
    from: &Stream,
    to: &Stream,
    first: &[u8],
    mut meter: Option<Meter<'_>>,
    conn: &AtomicU64,
    total: &AtomicU64,
) {
    let result = (|| -> io::Result<()> {
        if !first.is_empty() {
            let mut w = to;
            w.write_all(first)?;
            conn.fetch_add(first.len() as u64, Ordering::Relaxed);
            total.fetch_add(first.len() as u64, Ordering::Relaxed);
        }
        let mut buf = vec![0u8; BUFFER];
        let mut metered = Vec::new();
        let (mut r, mut w) = (from, to);
        loop {
            let n = match r.read(&mut buf) {
                Ok(0) => return Ok(()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            let out = match meter.as_mut() {
                Some(meter) => {
                    metered.clear();
                    meter(&buf[..n], &mut metered);
                    &metered[..]
                }
                None => &buf[..n],
            };
            w.write_all(out)?;
            conn.fetch_add(out.len() as u64, Ordering::Relaxed);
            total.fetch_add(out.len() as u64, Ordering::Relaxed);
            if n == buf.len() && n < BUFFER_GROWN {
                // More was waiting: a bulk transfer.
                buf = vec![0u8; BUFFER_GROWN];
            }
        }
    })();
    match result {
        Ok(()) => to.shutdown(Shutdown::Write),
        Err(_) => {
            from.shutdown(Shutdown::Both);
            to.shutdown(Shutdown::Both);
        }
    }
}
