//! Real I/O: tokio UDP driver, async API, real-time link emulator.
