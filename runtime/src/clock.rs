//! The wall clock, read in one place: the pure core takes the time as an
//! argument, and every shell that passes it in reads it here.

use std::time::{SystemTime, UNIX_EPOCH};

/// Unix time now, in milliseconds (0 if the clock is before 1970).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
