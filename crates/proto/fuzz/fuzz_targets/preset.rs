//! libFuzzer target: preset strings (`thin+rdb+frt=1`) through the parser.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    thinstream_proto_fuzz::check_preset(data);
});
