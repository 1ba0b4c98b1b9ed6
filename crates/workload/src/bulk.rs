//! Greedy bulk sender: always has data.
//!
//! Contract with the driver: every message is due at `start` (the application
//! has the whole backlog from the beginning). The driver must pull the next
//! message once the transport has accepted the previous one: when
//! `Transport::send` refuses with `SendError::BufferFull`, the driver keeps
//! that message and retries after `AppEvent::Writable` (base `drive`), so the
//! transport's congestion and flow control pace the flow, as for the greedy
//! rows of 002 Table 2.1 and the fairness cross flows of 002 §5.2.5. Without a
//! `total_bytes` limit the generator never ends: pull, never collect.

use thinstream_base::Instant;

use crate::thin::StreamRoundRobin;
use crate::{Generator, Message};

/// Back-to-back messages of `bytes` each (the last one shorter if
/// `total_bytes` is not a multiple).
#[derive(Debug)]
pub struct BulkStream {
    start: Instant,
    bytes: u32,
    remaining: Option<u64>,
    streams: StreamRoundRobin,
    unordered: bool,
}

impl BulkStream {
    /// `bytes` must be positive (checked by the config layer).
    pub fn new(
        start: Instant,
        bytes: u32,
        total_bytes: Option<u64>,
        streams: u16,
        unordered: bool,
    ) -> Self {
        BulkStream {
            start,
            bytes,
            remaining: total_bytes,
            streams: StreamRoundRobin::new(streams),
            unordered,
        }
    }
}

impl Generator for BulkStream {
    fn next_message(&mut self) -> Option<Message> {
        let bytes = match self.remaining.as_mut() {
            Some(0) => return None,
            Some(r) => {
                let b = (*r).min(u64::from(self.bytes)) as u32;
                *r -= u64::from(b);
                b
            }
            None => self.bytes,
        };
        Some(Message {
            at: self.start,
            stream: self.streams.next_stream(),
            bytes,
            unordered: self.unordered,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::take_messages;

    #[test]
    fn bulk_is_back_to_back_and_bounded() {
        let start = Instant::from_millis(3);
        let mut g = BulkStream::new(start, 1448, Some(1448 * 2 + 100), 1, false);
        let v = take_messages(&mut g, 10);
        assert_eq!(
            v.iter().map(|m| m.bytes).collect::<Vec<_>>(),
            [1448, 1448, 100]
        );
        assert!(v.iter().all(|m| m.at == start));
        let mut endless = BulkStream::new(start, 1000, None, 2, false);
        let v = take_messages(&mut endless, 1000);
        assert_eq!(v.len(), 1000);
        assert_eq!(v[3].stream, 1);
    }
}
