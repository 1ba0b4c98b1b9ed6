//! SCTP (RFC 9260) carried in UDP (RFC 6951), sans-IO.
//!
//! [`wire`] parses and emits packets; the association state machine takes
//! time and random bytes from its caller and never touches a socket or a
//! clock. Thin-stream and loss-recovery mechanisms live in `mechanism`,
//! selected by configuration.

pub mod wire;
