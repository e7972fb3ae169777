//! The latest result of a background task (the network coordinates' last
//! pass, the measured topology's last round), shared by every reader and
//! replaced whole: a reader takes a pointer and is never held up by the
//! next result being made.

use std::sync::{Arc, PoisonError, RwLock};

/// The latest `T`, shared.
#[derive(Debug, Default)]
pub struct Latest<T> {
    value: RwLock<Arc<T>>,
}

impl<T> Latest<T> {
    /// The latest value.
    pub fn get(&self) -> Arc<T> {
        Arc::clone(&self.value.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Replaces it.
    pub fn publish(&self, value: T) {
        *self.value.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(value);
    }
}
