//! Human-readable [`WireError`]s.

use std::fmt;

use super::{cause_code, WireError};

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Truncated => {
                f.write_str("packet shorter than the 12-byte SCTP common header")
            }
            WireError::BadChecksum { expected, found } => write!(
                f,
                "CRC32c mismatch: contents give {expected:#010x}, packet carries {found:#010x}"
            ),
            WireError::BadChunkLength { kind, length } => {
                write!(f, "chunk type {kind:#04x} has invalid length {length}")
            }
            WireError::BadParamLength { kind, length } => {
                write!(
                    f,
                    "parameter or error cause {kind:#06x} has invalid length {length}"
                )
            }
            WireError::Malformed { kind, why } => {
                write!(f, "malformed chunk (type {kind:#04x}): {why}")
            }
        }
    }
}

impl std::error::Error for WireError {}

/// The RFC 9260 §3.3.10 name of an error cause code.
pub(super) fn cause_name(code: u16) -> &'static str {
    match code {
        cause_code::INVALID_STREAM_IDENTIFIER => "Invalid Stream Identifier",
        cause_code::MISSING_MANDATORY_PARAMETER => "Missing Mandatory Parameter",
        cause_code::STALE_COOKIE => "Stale Cookie Error",
        cause_code::OUT_OF_RESOURCE => "Out of Resource",
        cause_code::UNRESOLVABLE_ADDRESS => "Unresolvable Address",
        cause_code::UNRECOGNIZED_CHUNK_TYPE => "Unrecognized Chunk Type",
        cause_code::INVALID_MANDATORY_PARAMETER => "Invalid Mandatory Parameter",
        cause_code::UNRECOGNIZED_PARAMETERS => "Unrecognized Parameters",
        cause_code::NO_USER_DATA => "No User Data",
        cause_code::COOKIE_RECEIVED_WHILE_SHUTTING_DOWN => "Cookie Received While Shutting Down",
        cause_code::RESTART_WITH_NEW_ADDRESSES => "Restart of an Association with New Addresses",
        cause_code::USER_INITIATED_ABORT => "User-Initiated Abort",
        cause_code::PROTOCOL_VIOLATION => "Protocol Violation",
        _ => "unknown cause",
    }
}
