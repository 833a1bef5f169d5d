//! Fuzz target: `squall_wire::fuzzing::icmpv6` (parser totality + invariants), and the
//! node's reading of an ICMPv6 error for the TCP host (`squall_stack::icmp6::tcp_error6`):
//! never a panic, and the quoted packet it hands over lies inside the message, with room
//! for the IPv6 header and the first 8 bytes of TCP.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    squall_wire::fuzzing::icmpv6(data);
    if let Some((q, _)) = squall_stack::icmp6::tcp_error6(data) {
        assert!(q.start <= q.end && q.end <= data.len());
        assert!(q.len() >= 48);
    }
});
