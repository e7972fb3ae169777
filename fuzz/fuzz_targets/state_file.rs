//! Fuzz target: bytes as state file (see netaware_collector::robustness).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    netaware_collector::robustness::state_file_bytes(data);
});
