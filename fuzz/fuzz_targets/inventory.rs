//! Fuzz target: bytes as inventory (see netaware_collector::robustness).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    netaware_collector::robustness::inventory_bytes(data);
});
