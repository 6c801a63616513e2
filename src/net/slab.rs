//! A slab: values stored by small integer keys that are reused once freed, so
//! a key can serve as a mio `Token`. Free slots form a linked list through the
//! vector, so insert and remove are O(1) and allocate only when the slab grows.

#[derive(Debug)]
enum Slot<T> {
    Occupied(T),
    /// Free, linking to the next free slot (`usize::MAX` ends the list).
    Vacant(usize),
}

#[derive(Debug)]
pub(crate) struct Slab<T> {
    slots: Vec<Slot<T>>,
    first_free: usize,
    len: usize,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab {
            slots: Vec::new(),
            first_free: usize::MAX,
            len: 0,
        }
    }
}

impl<T> Slab<T> {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The key the next `insert` will use.
    pub(crate) fn vacant_key(&self) -> usize {
        if self.first_free == usize::MAX {
            self.slots.len()
        } else {
            self.first_free
        }
    }

    pub(crate) fn insert(&mut self, value: T) -> usize {
        let key = self.vacant_key();
        if key == self.slots.len() {
            self.slots.push(Slot::Occupied(value));
        } else if let Slot::Vacant(next) = self.slots[key] {
            self.first_free = next;
            self.slots[key] = Slot::Occupied(value);
        }
        self.len += 1;
        key
    }

    pub(crate) fn get(&self, key: usize) -> Option<&T> {
        match self.slots.get(key) {
            Some(Slot::Occupied(value)) => Some(value),
            _ => None,
        }
    }

    pub(crate) fn get_mut(&mut self, key: usize) -> Option<&mut T> {
        match self.slots.get_mut(key) {
            Some(Slot::Occupied(value)) => Some(value),
            _ => None,
        }
    }

    pub(crate) fn remove(&mut self, key: usize) -> Option<T> {
        match self.slots.get(key) {
            Some(Slot::Occupied(_)) => {
                let slot = std::mem::replace(&mut self.slots[key], Slot::Vacant(self.first_free));
                self.first_free = key;
                self.len -= 1;
                match slot {
                    Slot::Occupied(value) => Some(value),
                    Slot::Vacant(_) => None,
                }
            }
            _ => None,
        }
    }

    /// Every value with its key.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (usize, &T)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(key, slot)| match slot {
                Slot::Occupied(value) => Some((key, value)),
                Slot::Vacant(_) => None,
            })
    }

    /// Removes and returns every value.
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = T> {
        self.first_free = usize::MAX;
        self.len = 0;
        std::mem::take(&mut self.slots)
            .into_iter()
            .filter_map(|slot| match slot {
                Slot::Occupied(value) => Some(value),
                Slot::Vacant(_) => None,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::Slab;

    #[test]
    fn reuses_freed_keys() {
        let mut slab = Slab::default();
        assert_eq!(
            (slab.insert('a'), slab.insert('b'), slab.insert('c')),
            (0, 1, 2)
        );
        assert_eq!(slab.remove(1), Some('b'));
        assert_eq!(slab.remove(1), None);
        assert_eq!(slab.vacant_key(), 1);
        assert_eq!(slab.insert('d'), 1);
        assert_eq!(slab.get_mut(1), Some(&mut 'd'));
        assert_eq!(slab.len(), 3);
        let keys: Vec<usize> = slab.iter().map(|(key, _)| key).collect();
        assert_eq!(keys, [0, 1, 2]);
        assert_eq!(slab.drain().collect::<String>(), "adc");
        assert_eq!(slab.len(), 0);
    }
}
