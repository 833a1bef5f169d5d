//! Fuzz target: `squall_stack::fuzzing::node` — arbitrary frames (some patched into IPv4
//! and IPv6 fragments for the node's addresses) through a node's demux and reassembly.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    squall_stack::fuzzing::node(data);
});
