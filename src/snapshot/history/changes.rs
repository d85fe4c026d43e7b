//! The changes a prefix keeps, one pointer while it keeps none.

use std::collections::VecDeque;
use std::fmt;
use std::ops::Deref;

use super::HolderChange;

/// The changes of one prefix, oldest first, read as a [`VecDeque`]
/// (`Deref`). Most prefixes keep none once [`super::Limits::total`] is
/// reached (a first sighting is a change until the oldest are dropped): an
/// empty one is a null pointer (8 bytes a prefix, against a deque's 32), and
/// the deque is allocated at the first change, freed again with its last.
#[derive(Clone, Default)]
// Boxed on purpose: the point is a one-pointer field where a deque's header
// would be 32 bytes in every prefix's entry.
#[allow(clippy::box_collection)]
pub struct Changes(Option<Box<VecDeque<HolderChange>>>);

/// What an empty [`Changes`] reads as.
static NONE: VecDeque<HolderChange> = VecDeque::new();

impl Deref for Changes {
    type Target = VecDeque<HolderChange>;

    fn deref(&self) -> &VecDeque<HolderChange> {
        self.0.as_deref().unwrap_or(&NONE)
    }
}

impl fmt::Debug for Changes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl Changes {
    /// Appends `c`; the first change makes room for one only (most prefixes
    /// keep one, their first sighting, until it is dropped).
    pub(super) fn push_back(&mut self, c: HolderChange) {
        self.0
            .get_or_insert_with(|| Box::new(VecDeque::with_capacity(1)))
            .push_back(c);
    }

    /// Drops the oldest change; the room goes with the last one.
    pub(super) fn pop_front(&mut self) -> Option<HolderChange> {
        let d = self.0.as_mut()?;
        let c = d.pop_front();
        if d.is_empty() {
            self.0 = None;
        }
        c
    }
}
