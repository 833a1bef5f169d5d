//! Fuzz target: `squall_wire::fuzzing::ipv6` (parser totality + invariants).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    squall_wire::fuzzing::ipv6(data);
});
