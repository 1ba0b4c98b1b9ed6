//! Trace replay (the `tracepump` idea of 002 App. B: replay the sizes and
//! timing of original packets over a new connection).
//!
//! A trace is read into [`TraceRecord`]s (offset from the first record,
//! payload size, optional stream) by [`csv::parse`] or [`pcap::parse`], then
//! replayed by [`ReplayStream`]: record *i* becomes a message due at
//! `start + offset_i`. Records of size 0 (pure TCP ACKs, empty UDP datagrams)
//! are skipped, because a transport cannot send an empty message.
//!
//! Both parsers work on in-memory bytes; [`read_file`] is the only function
//! here that touches the file system.

pub mod csv;
pub mod pcap;

use std::path::Path;

use thinstream_base::{Duration, Instant};

use crate::{Generator, Message, WorkloadError};

/// One packet (or message) of a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceRecord {
    /// Time since the trace's first record.
    pub offset: Duration,
    /// Payload bytes (never 0 after parsing).
    pub bytes: u32,
    /// Stream from the trace, if it has one.
    pub stream: Option<u16>,
}

/// Reads a whole trace file.
pub fn read_file(path: &Path) -> Result<Vec<u8>, WorkloadError> {
    std::fs::read(path).map_err(|e| WorkloadError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// Replays records as messages.
#[derive(Debug)]
pub struct ReplayStream {
    start: Instant,
    records: std::vec::IntoIter<TraceRecord>,
    default_stream: u16,
    unordered: bool,
}

impl ReplayStream {
    /// Records must be in non-decreasing offset order (both parsers ensure it).
    pub fn new(
        start: Instant,
        records: Vec<TraceRecord>,
        default_stream: u16,
        unordered: bool,
    ) -> Self {
        debug_assert!(records.windows(2).all(|w| w[0].offset <= w[1].offset));
        ReplayStream {
            start,
            records: records.into_iter(),
            default_stream,
            unordered,
        }
    }
}

impl Generator for ReplayStream {
    fn next_message(&mut self) -> Option<Message> {
        let r = self.records.next()?;
        Some(Message {
            at: self.start.checked_add(r.offset)?,
            stream: r.stream.unwrap_or(self.default_stream),
            bytes: r.bytes,
            unordered: self.unordered,
        })
    }
}
