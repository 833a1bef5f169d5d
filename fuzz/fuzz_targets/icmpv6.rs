//! Fuzz target: `squall_wire::fuzzing::icmpv6` (parser totality + invariants), and the
//! node's reading of an ICMPv6 error for the TCP host (`squall_stack::icmp6::tcp_error6`):
//! never a panic, and a message it takes holds, after the quote offset, the IPv6 header
//! and the first 8 bytes of TCP.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    squall_wire::fuzzing::icmpv6(data);
    if squall_stack::icmp6::tcp_error6(data).is_some() {
        assert!(data.len() >= squall_stack::icmp::QUOTED_AT + 48);
    }
});
