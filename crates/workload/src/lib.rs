//! Traffic generators: thin streams, application profiles, signalling bursts, echo, bulk, HTTP-like cross traffic, trace replay.
