//! The latest value of something many readers need and one writer
//! replaces whole: the collector's published snapshot, the network
//! coordinates' last pass, the measured topology's last round, the
//! extender's copy of the scores. One way to publish such a value
//! everywhere.
//!
//! Backed by an atomic pointer swap ([`arc_swap`]): a reader takes a
//! pointer without a lock and is never held up by the writer, and a
//! writer never waits for readers. What a reader holds stays valid until
//! it drops it, however often the value is replaced meanwhile.

use std::sync::Arc;

use arc_swap::ArcSwap;

/// The latest `T`, shared.
pub struct Latest<T> {
    value: ArcSwap<T>,
}

impl<T> Latest<T> {
    /// Starts with `value`.
    pub fn new(value: T) -> Self {
        Self {
            value: ArcSwap::from_pointee(value),
        }
    }

    /// Starts with `value`, already shared.
    pub fn from_arc(value: Arc<T>) -> Self {
        Self {
            value: ArcSwap::new(value),
        }
    }

    /// The latest value.
    pub fn get(&self) -> Arc<T> {
        self.value.load_full()
    }

    /// Replaces it with `value`.
    pub fn publish(&self, value: T) {
        self.value.store(Arc::new(value));
    }

    /// Replaces it with `value`, already shared, and hands back the value
    /// it replaced, so that the caller chooses where the old one is freed.
    pub fn replace(&self, value: Arc<T>) -> Arc<T> {
        self.value.swap(value)
    }
}

impl<T: Default> Default for Latest<T> {
    fn default() -> Self {
        Self::new(T::default())
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Latest<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Latest").field(&*self.get()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_keeps_what_it_took_while_the_value_moves_on() {
        let latest = Latest::new(1);
        let taken = latest.get();
        latest.publish(2);
        assert_eq!((*taken, *latest.get()), (1, 2));
        let replaced = latest.replace(Arc::new(3));
        assert_eq!((*replaced, *latest.get()), (2, 3));
        assert_eq!(*Latest::<u8>::default().get(), 0);
    }
}
