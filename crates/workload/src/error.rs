//! The crate's one error type: bad configurations and malformed trace files
//! are typed errors, never panics.

use std::fmt;
use std::path::PathBuf;

/// Why a workload could not be built or a trace could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WorkloadError {
    /// A configuration value is out of range or inconsistent.
    InvalidConfig {
        /// Which field or combination (`"bursts.burst-size"`).
        field: &'static str,
        /// What is wrong, in a sentence.
        reason: String,
    },
    /// A trace file could not be read from disk.
    Io { path: PathBuf, message: String },
    /// A CSV trace is malformed.
    Csv {
        /// 1-based line number.
        line: usize,
        reason: String,
    },
    /// A pcap trace is malformed or unsupported.
    Pcap {
        /// Byte offset in the file where the problem was found.
        offset: usize,
        reason: String,
    },
    /// A trace contained no usable record (after filtering).
    EmptyTrace { reason: String },
    /// [`WorkloadConfig::build`](crate::WorkloadConfig::build) was asked for
    /// messages from a flow workload (HTTP cross traffic) or
    /// [`build_flows`](crate::WorkloadConfig::build_flows) for flows from a
    /// message workload.
    WrongOutputKind {
        kind: &'static str,
        expected: &'static str,
    },
}

impl WorkloadError {
    pub(crate) fn invalid(field: &'static str, reason: impl Into<String>) -> Self {
        WorkloadError::InvalidConfig {
            field,
            reason: reason.into(),
        }
    }
}

impl fmt::Display for WorkloadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WorkloadError::InvalidConfig { field, reason } => {
                write!(f, "invalid workload setting {field}: {reason}")
            }
            WorkloadError::Io { path, message } => {
                write!(f, "cannot read trace {}: {message}", path.display())
            }
            WorkloadError::Csv { line, reason } => write!(f, "CSV trace line {line}: {reason}"),
            WorkloadError::Pcap { offset, reason } => {
                write!(f, "pcap trace at byte {offset}: {reason}")
            }
            WorkloadError::EmptyTrace { reason } => {
                write!(f, "trace has no usable record: {reason}")
            }
            WorkloadError::WrongOutputKind { kind, expected } => write!(
                f,
                "workload kind {kind:?} does not produce {expected}; use {}",
                if *expected == "messages" {
                    "WorkloadConfig::build_flows"
                } else {
                    "WorkloadConfig::build"
                }
            ),
        }
    }
}

impl std::error::Error for WorkloadError {}
