//! Fuzz target: `squall_wire::fuzzing::icmp` (parser totality + invariants), and the
//! node's reading of an ICMP error for the TCP host (`squall_stack::icmp::tcp_error`):
//! never a panic, and the quoted packet it hands over lies inside the message, with room
//! for an IPv4 header and the first 8 bytes of TCP.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    squall_wire::fuzzing::icmp(data);
    if let Some((q, _)) = squall_stack::icmp::tcp_error(data) {
        assert!(q.start <= q.end && q.end <= data.len());
        assert!(q.len() >= 28);
    }
});
