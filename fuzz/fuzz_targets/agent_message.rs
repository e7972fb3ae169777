//! Fuzz target: bytes as agent message (see netaware_collector::robustness).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    netaware_collector::robustness::agent_message_bytes(data);
});
