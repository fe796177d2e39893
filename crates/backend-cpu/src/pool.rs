//! Freed large buffers kept for reuse.
//!
//! The system allocator hands large buffers out as fresh pages and takes them back when they
//! are freed, so a training step that allocates the same activations every step pays a page
//! fault per 4 KiB of them, every step (a quarter of seed003_cnn's CPU step on a 2-core
//! machine). Buffers of [`MIN_BYTES`] and more are kept here when
//! their storage drops and handed out again for a buffer of the same element type and capacity:
//! a loop of fixed shapes stops taking memory from the system after its first step.
//!
//! What is kept is bounded: before a new large buffer is made, the pool frees buffers until in
//! use and pooled bytes together stay within twice the most ever in use ([`make_room`], called
//! by `storage::reserve`). `Device::empty_cache` empties it.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Buffers smaller than this come from the allocator's own free lists, which are cheap.
pub(crate) const MIN_BYTES: usize = 64 << 10;

/// Free buffers of one element type and capacity, each a boxed `Vec<T>`: of length 0, or, for
/// element types without a destructor, of the length it was given back with (its old values,
/// which a kernel that writes every element reuses without a fill: `storage::alloc_overwritten`).
#[derive(Default)]
struct Shelf {
    /// The bytes of each buffer on it.
    bytes: u64,
    buffers: Vec<Box<dyn Any + Send>>,
}

static FREE: Mutex<Option<HashMap<(TypeId, usize), Shelf>>> = Mutex::new(None);
static POOLED: AtomicU64 = AtomicU64::new(0);

fn lock() -> MutexGuard<'static, Option<HashMap<(TypeId, usize), Shelf>>> {
    // A panic while the lock was held cannot leave a shelf half-updated in a way that matters:
    // at worst a buffer is lost to the pool (and freed).
    FREE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Bytes held in free buffers.
pub(crate) fn pooled() -> u64 {
    POOLED.load(Ordering::Relaxed)
}

/// A buffer with room for exactly `n` elements, when one is free: empty, or holding its old
/// values (see [`Shelf`]).
pub(crate) fn take<T: Send + 'static>(n: usize) -> Option<Vec<T>> {
    if n.saturating_mul(std::mem::size_of::<T>()) < MIN_BYTES {
        return None;
    }
    let mut guard = lock();
    let shelf = guard.as_mut()?.get_mut(&(TypeId::of::<T>(), n))?;
    let buffer = shelf.buffers.pop()?;
    POOLED.fetch_sub(shelf.bytes, Ordering::Relaxed);
    Some(*buffer.downcast::<Vec<T>>().expect("buffers are shelved under their own element type"))
}

/// Keeps `v`'s memory for a later [`take`] (a buffer too small to keep is freed).
pub(crate) fn give<T: Send + 'static>(mut v: Vec<T>) {
    let (cap, bytes) = (v.capacity(), v.capacity() * std::mem::size_of::<T>());
    if bytes < MIN_BYTES {
        return;
    }
    if std::mem::needs_drop::<T>() {
        v.clear();
    }
    let mut guard = lock();
    let shelf = guard.get_or_insert_with(HashMap::new).entry((TypeId::of::<T>(), cap)).or_default();
    shelf.bytes = bytes as u64;
    shelf.buffers.push(Box::new(v));
    POOLED.fetch_add(bytes as u64, Ordering::Relaxed);
}

/// Frees pooled buffers, the largest first, until `in_use` and the pool together leave room for
/// `bytes` more within `limit`, or the pool is empty.
pub(crate) fn make_room(in_use: u64, bytes: u64, limit: u64) {
    let fits = || in_use.saturating_add(pooled()).saturating_add(bytes) <= limit;
    if pooled() == 0 || fits() {
        return;
    }
    let mut freed = Vec::new();
    {
        let mut guard = lock();
        let Some(free) = guard.as_mut() else { return };
        let mut shelves: Vec<&mut Shelf> = free.values_mut().collect();
        shelves.sort_by_key(|s| std::cmp::Reverse(s.bytes));
        'shelves: for shelf in shelves {
            while let Some(buffer) = shelf.buffers.pop() {
                POOLED.fetch_sub(shelf.bytes, Ordering::Relaxed);
                freed.push(buffer);
                if fits() {
                    break 'shelves;
                }
            }
        }
        free.retain(|_, shelf| !shelf.buffers.is_empty());
    }
    // The buffers go back to the system here, outside the lock.
    drop(freed);
}

/// Frees every pooled buffer.
pub(crate) fn empty() {
    let free = lock().take();
    if let Some(free) = free {
        POOLED.fetch_sub(free.values().map(|s| s.bytes * s.buffers.len() as u64).sum(), Ordering::Relaxed);
    }
}
