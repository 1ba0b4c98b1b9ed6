//! Error causes (RFC 9260 §3.3.10): constructors with the right layout and
//! readers for the fields the association needs, plus the rule for
//! unrecognized chunk and parameter types (RFC 9260 §3.2, §3.2.1).

use bytes::{BufMut, Bytes, BytesMut};

use super::*;

impl ErrorCause {
    /// A cause with the given code and raw information field.
    pub fn new(code: u16, info: impl Into<Bytes>) -> ErrorCause {
        ErrorCause {
            code,
            info: info.into(),
        }
    }

    fn with_u32(code: u16, v: u32) -> ErrorCause {
        ErrorCause {
            code,
            info: Bytes::copy_from_slice(&v.to_be_bytes()),
        }
    }

    fn empty(code: u16) -> ErrorCause {
        ErrorCause {
            code,
            info: Bytes::new(),
        }
    }

    /// "Invalid Stream Identifier" (§3.3.10.1): stream, then 16 reserved bits.
    pub fn invalid_stream_identifier(stream: u16) -> ErrorCause {
        Self::with_u32(
            cause_code::INVALID_STREAM_IDENTIFIER,
            u32::from(stream) << 16,
        )
    }

    /// "Missing Mandatory Parameter" (§3.3.10.2): a count, then the types.
    pub fn missing_mandatory_parameters(kinds: &[u16]) -> ErrorCause {
        let mut info = BytesMut::with_capacity(4 + 2 * kinds.len());
        info.put_u32(kinds.len() as u32);
        for k in kinds {
            info.put_u16(*k);
        }
        ErrorCause {
            code: cause_code::MISSING_MANDATORY_PARAMETER,
            info: info.freeze(),
        }
    }

    /// "Stale Cookie" (§3.3.10.3): how late the cookie was, in microseconds.
    pub fn stale_cookie(staleness_us: u32) -> ErrorCause {
        Self::with_u32(cause_code::STALE_COOKIE, staleness_us)
    }

    /// "Out of Resource" (§3.3.10.4).
    pub fn out_of_resource() -> ErrorCause {
        Self::empty(cause_code::OUT_OF_RESOURCE)
    }

    /// "Unrecognized Chunk Type" (§3.3.10.6): the whole chunk as received.
    pub fn unrecognized_chunk(chunk: &Chunk) -> ErrorCause {
        let mut info = Vec::with_capacity(chunk.encoded_len());
        chunk.emit(&mut info);
        ErrorCause {
            code: cause_code::UNRECOGNIZED_CHUNK_TYPE,
            info: info.into(),
        }
    }

    /// "Invalid Mandatory Parameter" (§3.3.10.7).
    pub fn invalid_mandatory_parameter() -> ErrorCause {
        Self::empty(cause_code::INVALID_MANDATORY_PARAMETER)
    }

    /// "Unrecognized Parameters" (§3.3.10.8): the parameters, each padded.
    pub fn unrecognized_parameters(params: &[Param]) -> ErrorCause {
        let mut info = Vec::with_capacity(params.iter().map(Param::encoded_len).sum());
        for p in params {
            p.emit(&mut info);
        }
        ErrorCause {
            code: cause_code::UNRECOGNIZED_PARAMETERS,
            info: info.into(),
        }
    }

    /// "No User Data" (§3.3.10.9): the TSN of the empty DATA chunk.
    pub fn no_user_data(tsn: Tsn) -> ErrorCause {
        Self::with_u32(cause_code::NO_USER_DATA, tsn.0)
    }

    /// "Cookie Received While Shutting Down" (§3.3.10.10).
    pub fn cookie_received_while_shutting_down() -> ErrorCause {
        Self::empty(cause_code::COOKIE_RECEIVED_WHILE_SHUTTING_DOWN)
    }

    /// "User-Initiated Abort" (§3.3.10.12) with an application reason.
    pub fn user_initiated_abort(reason: impl Into<Bytes>) -> ErrorCause {
        ErrorCause {
            code: cause_code::USER_INITIATED_ABORT,
            info: reason.into(),
        }
    }

    /// "Protocol Violation" (§3.3.10.13) with free-form information.
    pub fn protocol_violation(info: impl Into<Bytes>) -> ErrorCause {
        ErrorCause {
            code: cause_code::PROTOCOL_VIOLATION,
            info: info.into(),
        }
    }

    fn info_u32(&self) -> Option<u32> {
        let b: [u8; 4] = self.info.get(..4)?.try_into().ok()?;
        Some(u32::from_be_bytes(b))
    }

    /// The stream of an "Invalid Stream Identifier" cause.
    pub fn stream_identifier(&self) -> Option<u16> {
        if self.code != cause_code::INVALID_STREAM_IDENTIFIER {
            return None;
        }
        self.info_u32().map(|v| (v >> 16) as u16)
    }

    /// The staleness (µs) of a "Stale Cookie" cause.
    pub fn staleness_us(&self) -> Option<u32> {
        (self.code == cause_code::STALE_COOKIE)
            .then(|| self.info_u32())
            .flatten()
    }

    /// The TSN of a "No User Data" cause.
    pub fn no_user_data_tsn(&self) -> Option<Tsn> {
        (self.code == cause_code::NO_USER_DATA)
            .then(|| self.info_u32().map(Tsn))
            .flatten()
    }

    /// The RFC name of the cause code.
    pub fn name(&self) -> &'static str {
        cause_code::name(self.code)
    }
}

/// What a receiver does with a chunk or parameter type it does not know:
/// the upper two bits of the type decide (RFC 9260 §3.2 for chunks, §3.2.1
/// for parameters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unrecognized {
    /// `00`: stop processing (the packet for a chunk, the remaining
    /// parameters for a parameter), report nothing.
    Stop,
    /// `01`: stop as above and report it (ERROR "Unrecognized Chunk Type"
    /// for a chunk; "Unrecognized Parameter" for a parameter).
    StopAndReport,
    /// `10`: skip it and continue, report nothing.
    Skip,
    /// `11`: skip it, continue and report it.
    SkipAndReport,
}

impl Unrecognized {
    const fn from_bits(bits: u8) -> Unrecognized {
        match bits & 0b11 {
            0b00 => Unrecognized::Stop,
            0b01 => Unrecognized::StopAndReport,
            0b10 => Unrecognized::Skip,
            _ => Unrecognized::SkipAndReport,
        }
    }

    /// The action for an unknown chunk type.
    pub const fn for_chunk(kind: u8) -> Unrecognized {
        Self::from_bits(kind >> 6)
    }

    /// The action for an unknown parameter type.
    pub const fn for_param(kind: u16) -> Unrecognized {
        Self::from_bits((kind >> 14) as u8)
    }

    /// Whether processing continues after the unknown item.
    pub const fn skips(self) -> bool {
        matches!(self, Unrecognized::Skip | Unrecognized::SkipAndReport)
    }

    /// Whether the unknown item is reported to the peer.
    pub const fn reports(self) -> bool {
        matches!(
            self,
            Unrecognized::StopAndReport | Unrecognized::SkipAndReport
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cause_layouts() {
        let c = ErrorCause::invalid_stream_identifier(0x1234);
        assert_eq!(&c.info[..], &[0x12, 0x34, 0, 0]);
        assert_eq!(c.stream_identifier(), Some(0x1234));
        assert_eq!(c.staleness_us(), None);

        let c = ErrorCause::no_user_data(Tsn(0xDEAD_BEEF));
        assert_eq!(c.code, 9);
        assert_eq!(&c.info[..], &[0xDE, 0xAD, 0xBE, 0xEF]);
        assert_eq!(c.no_user_data_tsn(), Some(Tsn(0xDEAD_BEEF)));

        let c = ErrorCause::missing_mandatory_parameters(&[7, 9]);
        assert_eq!(&c.info[..], &[0, 0, 0, 2, 0, 7, 0, 9]);

        let c = ErrorCause::stale_cookie(1_000);
        assert_eq!(c.staleness_us(), Some(1_000));
        assert_eq!(c.name(), "Stale Cookie Error");

        let c = ErrorCause::unrecognized_chunk(&Chunk::Unknown(UnknownChunk {
            kind: 0x7F,
            flags: 0xA5,
            value: Bytes::from_static(&[1, 2, 3]),
        }));
        assert_eq!(c.code, cause_code::UNRECOGNIZED_CHUNK_TYPE);
        assert_eq!(&c.info[..], &[0x7F, 0xA5, 0x00, 0x07, 1, 2, 3, 0]);

        let c = ErrorCause::unrecognized_parameters(&[
            Param::Unknown {
                kind: 0x8000,
                value: Bytes::new(),
            },
            Param::Unknown {
                kind: 0xC123,
                value: Bytes::from_static(&[9]),
            },
        ]);
        assert_eq!(&c.info[..], &[0x80, 0, 0, 4, 0xC1, 0x23, 0, 5, 9, 0, 0, 0]);
    }

    #[test]
    fn unrecognized_bits() {
        assert_eq!(Unrecognized::for_chunk(0x3F), Unrecognized::Stop);
        assert_eq!(Unrecognized::for_chunk(0x40), Unrecognized::StopAndReport);
        assert_eq!(Unrecognized::for_chunk(0x80), Unrecognized::Skip);
        assert_eq!(Unrecognized::for_chunk(0xC1), Unrecognized::SkipAndReport);
        assert_eq!(Unrecognized::for_param(0x8000), Unrecognized::Skip);
        assert_eq!(Unrecognized::for_param(0xC004), Unrecognized::SkipAndReport);
        assert_eq!(Unrecognized::for_param(0x4001), Unrecognized::StopAndReport);
        assert_eq!(Unrecognized::for_param(0x0042), Unrecognized::Stop);
        assert!(Unrecognized::SkipAndReport.skips() && Unrecognized::SkipAndReport.reports());
        assert!(!Unrecognized::Stop.skips() && !Unrecognized::Stop.reports());
    }
}
