//! The caching allocator: freed buffers return to a pool by size class and are reused, so a
//! training loop that allocates the same shapes every step stops allocating after warm-up and
//! its memory stays flat (the `torch.mps` caching-allocator behaviour, with its statistics).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use liandan_tensor::{Error, MemoryStats, Result};

use crate::bind::BindGroups;

/// Rounds a request up to its size class: powers of two up to 4 KiB, then quarter steps
/// between powers of two (at most 25% waste), always a multiple of 256 bytes.
pub(crate) fn size_class(bytes: u64) -> u64 {
    let b = bytes.max(256);
    if b <= 4096 {
        return b.next_power_of_two();
    }
    let top = 63 - b.leading_zeros() as u64; // 2^top <= b
    let step = 1u64 << (top - 2);
    // Saturating: a request near 2^64 is refused by the caller's size check, not an overflow.
    b.div_ceil(step).saturating_mul(step)
}

pub(crate) struct Pool {
    device: wgpu::Device,
    usage: wgpu::BufferUsages,
    max_buffer: u64,
    state: Mutex<PoolState>,
    /// Bind groups over these buffers, kept for reuse: they hold buffers alive, so they are
    /// dropped whenever the pool returns its buffers to the driver.
    pub(crate) bind_groups: BindGroups,
}

#[derive(Default)]
struct PoolState {
    free: HashMap<u64, Vec<wgpu::Buffer>>,
    stats: MemoryStats,
    /// Bytes live and pooled buffers may hold together (`Device::set_memory_budget`).
    budget: Option<u64>,
}

/// A buffer on loan from the pool; it goes back when dropped.
pub(crate) struct PooledBuffer {
    buffer: Option<wgpu::Buffer>,
    pool: Arc<Pool>,
}

impl PooledBuffer {
    pub(crate) fn buffer(&self) -> &wgpu::Buffer {
        self.buffer.as_ref().expect("pooled buffer used after release")
    }
}

impl Drop for PooledBuffer {
    fn drop(&mut self) {
        if let Some(b) = self.buffer.take() {
            self.pool.release(b);
        }
    }
}

impl Pool {
    pub(crate) fn new(device: wgpu::Device, max_buffer: u64) -> Arc<Pool> {
        let usage = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST;
        Arc::new(Pool { device, usage, max_buffer, state: Mutex::new(PoolState::default()), bind_groups: BindGroups::default() })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A buffer of at least `bytes` bytes, reused from the pool when one of its class is free.
    pub(crate) fn alloc(self: &Arc<Self>, bytes: u64, device_name: &str) -> Result<PooledBuffer> {
        let class = size_class(bytes);
        if class > self.max_buffer {
            return Err(Error::Backend {
                backend: device_name.to_string(),
                op: "alloc",
                detail: format!("{bytes} bytes asked for, but this device's largest buffer is {} bytes (max_buffer_size)", self.max_buffer),
            });
        }
        let reused = {
            let mut st = self.lock();
            let b = st.free.get_mut(&class).and_then(Vec::pop);
            if b.is_some() {
                st.stats.pooled -= class;
                st.stats.in_use += class;
                st.stats.peak = st.stats.peak.max(st.stats.in_use);
            }
            b
        };
        if let Some(buffer) = reused {
            return Ok(PooledBuffer { buffer: Some(buffer), pool: self.clone() });
        }
        self.check_budget(class, device_name)?;
        let buffer = self.create(class, device_name)?;
        let mut st = self.lock();
        st.stats.in_use += class;
        st.stats.allocations += 1;
        st.stats.peak = st.stats.peak.max(st.stats.in_use);
        Ok(PooledBuffer { buffer: Some(buffer), pool: self.clone() })
    }

    /// A new buffer of `class` bytes must fit the budget, after the pool is emptied if need be.
    fn check_budget(&self, class: u64, device_name: &str) -> Result<()> {
        let Some(budget) = self.lock().budget else { return Ok(()) };
        let held = |st: &PoolState| st.stats.in_use + st.stats.pooled;
        if held(&self.lock()) + class > budget {
            self.empty();
        }
        let in_use = self.lock().stats.in_use;
        if in_use + class > budget {
            return Err(Error::OutOfMemory {
                op: "alloc",
                bytes: class as u128,
                detail: format!("{device_name}'s memory budget of {budget} bytes has {} left (Device::set_memory_budget)", budget.saturating_sub(in_use)),
            });
        }
        Ok(())
    }

    pub(crate) fn set_budget(&self, bytes: Option<u64>) {
        self.lock().budget = bytes;
    }

    pub(crate) fn reset_peak(&self) {
        let mut st = self.lock();
        st.stats.peak = st.stats.in_use;
    }

    /// Creates a buffer, turning an out-of-memory into an error (after emptying the pool once),
    /// and any other error wgpu raises for it into an error too, rather than a device fault.
    fn create(&self, class: u64, device_name: &str) -> Result<wgpu::Buffer> {
        let fail = |detail: String| Error::Backend { backend: device_name.to_string(), op: "alloc", detail };
        for attempt in 0..2 {
            let oom = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
            let invalid = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
            let buffer =
                self.device.create_buffer(&wgpu::BufferDescriptor { label: Some("liandan"), size: class, usage: self.usage, mapped_at_creation: false });
            if let Some(e) = pollster::block_on(invalid.pop()) {
                return Err(fail(format!("could not create a buffer of {class} bytes: {e}")));
            }
            match pollster::block_on(oom.pop()) {
                None => return Ok(buffer),
                Some(_) if attempt == 0 => self.empty(),
                Some(e) => {
                    return Err(Error::OutOfMemory {
                        op: "alloc",
                        bytes: class as u128,
                        detail: format!("{device_name} is out of memory ({e}); use a smaller batch"),
                    })
                }
            }
        }
        unreachable!("the loop returns on its second attempt")
    }

    fn release(&self, buffer: wgpu::Buffer) {
        let class = buffer.size();
        let mut st = self.lock();
        st.stats.in_use -= class;
        st.stats.pooled += class;
        st.free.entry(class).or_default().push(buffer);
    }

    pub(crate) fn stats(&self) -> MemoryStats {
        self.lock().stats
    }

    /// Returns every pooled buffer to the driver (`torch.mps.empty_cache`).
    pub(crate) fn empty(&self) {
        self.bind_groups.clear();
        let mut st = self.lock();
        st.free.clear();
        st.stats.pooled = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::size_class;

    #[test]
    fn size_classes_waste_at_most_a_quarter() {
        assert_eq!(size_class(1), 256);
        assert_eq!(size_class(300), 512);
        assert_eq!(size_class(4096), 4096);
        for bytes in [4097u64, 5000, 65_537, 1 << 20, (1 << 27) + 12] {
            let c = size_class(bytes);
            assert!(c >= bytes && c.is_multiple_of(256) && (c - bytes) * 4 <= bytes, "{bytes} -> {c}");
        }
    }
}
