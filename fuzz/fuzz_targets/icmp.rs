//! Fuzz target: `squall_wire::fuzzing::icmp` (parser totality + invariants), and the
//! node's reading of an ICMP error for the TCP host (`squall_stack::icmp::tcp_error`):
//! never a panic, and a message it takes holds, after the quote offset, an IPv4 header
//! and the first 8 bytes of TCP.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    squall_wire::fuzzing::icmp(data);
    if squall_stack::icmp::tcp_error(data).is_some() {
        assert!(data.len() >= squall_stack::icmp::QUOTED_AT + 28);
    }
});
