//! libFuzzer target: arbitrary bytes through the SCTP decoder; whatever
//! decodes must re-encode and decode to the same representation.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    thinstream_proto_fuzz::check_decode(data);
});
