//! A vector kept in chunks shared copy-on-write. A copy of the whole costs
//! a pointer per chunk; a write copies its chunk only while a copy still
//! holds it. The collector copies every pair's figures for each snapshot
//! while ingest waits on its lock: with this, that copy takes microseconds
//! whatever the cluster's size, and each chunk is copied at most once per
//! snapshot, by the first write to it.

use std::sync::Arc;

/// Items per chunk: a few hundred kilobytes of pair figures.
const CHUNK: usize = 2_048;

/// A vector in shared chunks (see the module).
#[derive(Debug, Clone)]
pub struct SharedChunks<T> {
    chunks: Vec<Arc<Vec<T>>>,
    len: usize,
}

impl<T> Default for SharedChunks<T> {
    fn default() -> Self {
        Self {
            chunks: Vec::new(),
            len: 0,
        }
    }
}

impl<T: Clone> SharedChunks<T> {
    /// Number of items.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds `item` at the end.
    pub fn push(&mut self, item: T) {
        if self.len.is_multiple_of(CHUNK) {
            self.chunks.push(Arc::new(Vec::with_capacity(CHUNK)));
        }
        if let Some(last) = self.chunks.last_mut() {
            Arc::make_mut(last).push(item);
            self.len += 1;
        }
    }

    /// The item at `index`.
    pub fn get(&self, index: usize) -> Option<&T> {
        self.chunks.get(index / CHUNK)?.get(index % CHUNK)
    }

    /// The item at `index`, to change: its chunk is copied first if a copy
    /// of this vector still holds it.
    pub fn get_mut(&mut self, index: usize) -> Option<&mut T> {
        let chunk = self.chunks.get_mut(index / CHUNK)?;
        Arc::make_mut(chunk).get_mut(index % CHUNK)
    }

    /// Every item, in order.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.chunks.iter().flat_map(|chunk| chunk.iter())
    }

    /// Keeps the items `keep` says to, in order (a new vector: rare work,
    /// such as forgetting a node).
    pub fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        let kept: Vec<T> = self.iter().filter(|item| keep(item)).cloned().collect();
        *self = kept.into_iter().collect();
    }
}

impl<T: Clone> FromIterator<T> for SharedChunks<T> {
    fn from_iter<I: IntoIterator<Item = T>>(items: I) -> Self {
        let mut chunks = Self::default();
        for item in items {
            chunks.push(item);
        }
        chunks
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Writes after a copy change the original only, whatever the
        /// sizes; the copy keeps what it saw.
        #[test]
        fn a_copy_keeps_what_it_saw(
            len in 0usize..3 * CHUNK,
            writes in prop::collection::vec((any::<usize>(), any::<u32>()), 0..50),
        ) {
            let mut vector: SharedChunks<u32> = (0..len as u32).collect();
            let copy = vector.clone();
            let mut model: Vec<u32> = (0..len as u32).collect();
            for (at, value) in writes {
                if len == 0 { break; }
                *vector.get_mut(at % len).unwrap() = value;
                model[at % len] = value;
            }
            prop_assert_eq!(vector.iter().copied().collect::<Vec<_>>(), model);
            prop_assert_eq!(copy.iter().copied().collect::<Vec<_>>(), (0..len as u32).collect::<Vec<_>>());
            prop_assert_eq!(vector.len(), len);
            prop_assert!(vector.get(len).is_none());
            vector.retain(|v| v % 2 == 0);
            prop_assert!(vector.iter().all(|v| v % 2 == 0));
            prop_assert_eq!(vector.len(), vector.iter().count());
        }
    }
}
