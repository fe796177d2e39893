//! What the indices of the index kernels being run on this thread mean, so that a backend that
//! finds a bad one only later (a GPU kernel cannot fail: it records the index, and the next
//! read-back reports it) can still name the tensor-level op and the user's value:
//! `cross_entropy: target 12 is not a class: ...` rather than the gather inside the loss.

use std::cell::Cell;

use crate::error::Error;

/// The meaning of the indices that `gather`, `index_select` and `scatter_add` are given while
/// `with_index_use` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IndexUse {
    /// Class targets of the loss `op`, over `classes` classes.
    Class { op: &'static str, classes: usize },
}

impl IndexUse {
    /// The error for `index`, found outside an axis of `size` while indexing for this use.
    pub fn error(self, index: i64, _size: usize) -> Error {
        match self {
            IndexUse::Class { op, classes } => Error::ClassOutOfRange { op, target: index, classes },
        }
    }
}

thread_local! {
    static CURRENT: Cell<Option<IndexUse>> = const { Cell::new(None) };
}

/// What the index kernels run now on this thread are indexing for, if an op said so.
pub fn current_index_use() -> Option<IndexUse> {
    CURRENT.with(|c| c.get())
}

/// Runs `f` with its index kernels marked as `what` (the outermost op's mark wins:
/// `cross_entropy` over the `nll_loss` it calls), and turns an out-of-range index that `f`
/// meets at once (the CPU's check) into `what`'s error too.
pub(crate) fn with_index_use<T>(what: IndexUse, f: impl FnOnce() -> crate::Result<T>) -> crate::Result<T> {
    struct Restore(Option<IndexUse>);
    impl Drop for Restore {
        fn drop(&mut self) {
            CURRENT.with(|c| c.set(self.0));
        }
    }
    let outer = CURRENT.with(|c| c.get());
    let _restore = Restore(outer);
    if outer.is_none() {
        CURRENT.with(|c| c.set(Some(what)));
    }
    f().map_err(|e| match e {
        Error::IndexOutOfRange { index, size, .. } => outer.unwrap_or(what).error(index, size),
        e => e,
    })
}
