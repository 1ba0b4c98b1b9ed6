//! Link model shared by simulator and emulator: delay, jitter, loss models, rate limit, reordering, duplication, corruption.
