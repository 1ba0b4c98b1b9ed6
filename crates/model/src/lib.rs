//! Closed-form models: the head-of-line blocking model of Scharf & Kiesel
//! (document 001 §III, equations (1)-(5)).
//!
//! The model predicts the mean extra one-way delay `W` that random packet loss
//! adds to a stream of signalling messages, and the resulting mean response
//! time `R` of request/echo transactions, for
//!
//! * one SCTP association whose messages are spread round robin over `N`
//!   ordered streams ([`Scheme::SctpStreams`]),
//! * one SCTP association sending every message unordered
//!   ([`Scheme::SctpUnordered`]),
//! * `N` parallel TCP connections, messages spread round robin
//!   ([`Scheme::TcpConnections`]).
//!
//! Use [`HolParams::predict`] for the whole chain, or the per-equation
//! functions in [`hol`] to reproduce a single step. The laboratory plots these
//! next to simulated response times (001 §IV compares them to measurements).

pub mod hol;

pub use hol::{
    delay_increase_ordered, delay_increase_unordered, detection_time_sctp, detection_time_tcp,
    detection_time_with_reports, fast_retransmit_rate_threshold, optimal_tcp_connections,
    queued_chunks, response_time_ms, streams_for_unordered_behaviour, tcp_optimal_rate, HolParams,
    HolPrediction, ModelError, Scheme,
};
