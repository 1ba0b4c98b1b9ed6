//! Real I/O for thinstream: the one crate (with the CLI) that reads the OS
//! clock and opens sockets.
//!
//! [`driver`] runs any sans-IO protocol object (an SCTP association, an SCTP
//! endpoint serving many peers) over a tokio UDP socket with exactly the
//! drive loop the simulator uses: feed one input, drain every output, sleep
//! until the next input or deadline.

pub mod clock;
pub mod driver;
pub mod server;

pub use clock::Clock;
pub use driver::{spawn, DriverGone, Handle, Sans};
pub use server::{Mode, PeerReport, Server, ServerEvent};
