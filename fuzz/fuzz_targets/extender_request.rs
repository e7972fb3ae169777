//! Fuzz target: bytes as the body of a kube-scheduler extender call, for
//! every verb (see netaware_scheduler::robustness).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    netaware_scheduler::robustness::request_bytes(data);
});
