//! libFuzzer target: a client and a server endpoint driven by operations
//! decoded from the input (traffic, arbitrary and tag-patched datagrams,
//! time jumps, sends, closes, aborts, losses); association accounting must
//! hold after every operation.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = thinstream_proto_fuzz::check_endpoint(data);
});
