//! Experiments as data: scenarios, sweeps, result store, reports.
