//! Deterministic discrete-event simulator driving the real protocol code.
