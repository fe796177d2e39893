//! Bind groups made once and reused: each kernel's bind group layout, read from its WGSL, and a
//! cache of bind groups keyed by the buffer windows they bind.
//!
//! Creating a bind group was the largest host cost of a dispatch (wgpu validates it, allocates
//! a descriptor set and tracks every buffer). A training loop allocates the same shapes in the
//! same order every step, so the caching allocator hands the same buffers to the same kernels,
//! and a step after the first finds its bind groups made. Where the meta block is a buffer
//! (binding 0; see `gpu.rs`), it is bound with a dynamic offset, so one bind group serves every
//! arena slot; where it is immediate data, binding 0 is absent.
//!
//! A cached bind group holds its buffers alive: the cache is owned by the pool, emptied with
//! it (`Pool::empty`), and cleared whole when it grows past `MAX_ENTRIES`.

use std::collections::HashMap;
use std::sync::Mutex;

/// A window of a buffer bound to a dispatch: `(buffer, byte offset, byte size)`. Offsets are
/// multiples of the adapter's storage offset alignment.
pub(crate) type Window<'a> = (&'a wgpu::Buffer, u64, u64);

/// One entry per buffer a dispatch binds, inline: the launch path runs for every op.
pub(crate) type PerOperand<T> = smallvec::SmallVec<[T; 4]>;

/// Bind groups kept at most; a step's worth for the zoo's largest models, and a bound on what
/// buffers freed by a program that stopped using them can keep alive.
const MAX_ENTRIES: usize = 16_384;

/// What a bind group binds: the kernel's layout and each buffer window at bindings 1...
#[derive(PartialEq, Eq, Hash)]
struct BindKey {
    layout: wgpu::BindGroupLayout,
    windows: PerOperand<(wgpu::Buffer, u64, u64)>,
}

thread_local! {
    /// Bind groups this thread's dispatches have made so far: a step that finds its bind
    /// groups made adds none (`xtask bench-model`'s phases report it).
    static MADE: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// See [`MADE`].
pub(crate) fn made() -> u64 {
    MADE.with(|m| m.get())
}

#[derive(Default)]
pub(crate) struct BindGroups {
    cache: Mutex<HashMap<BindKey, wgpu::BindGroup>>,
}

impl BindGroups {
    /// The bind group of `layout` over `arena` (binding 0, one window of the given bytes at a
    /// dynamic offset; none where the meta block is immediate data) and `windows` (bindings
    /// 1..), made the first time it is asked for.
    pub(crate) fn get(
        &self,
        device: &wgpu::Device,
        layout: &wgpu::BindGroupLayout,
        arena: Option<(&wgpu::Buffer, u64)>,
        windows: &[Window],
    ) -> wgpu::BindGroup {
        let key = BindKey { layout: layout.clone(), windows: windows.iter().map(|&(b, o, s)| (b.clone(), o, s)).collect() };
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(group) = cache.get(&key) {
            return group.clone();
        }
        let mut entries: Vec<wgpu::BindGroupEntry> = arena
            .map(|(buffer, slot_bytes)| wgpu::BindGroupEntry {
                binding: 0,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding { buffer, offset: 0, size: wgpu::BufferSize::new(slot_bytes) }),
            })
            .into_iter()
            .collect();
        for (i, &(buffer, offset, size)) in windows.iter().enumerate() {
            let binding = wgpu::BufferBinding { buffer, offset, size: wgpu::BufferSize::new(size) };
            entries.push(wgpu::BindGroupEntry { binding: i as u32 + 1, resource: wgpu::BindingResource::Buffer(binding) });
        }
        MADE.with(|m| m.set(m.get() + 1));
        let group = device.create_bind_group(&wgpu::BindGroupDescriptor { label: None, layout, entries: &entries });
        if cache.len() >= MAX_ENTRIES {
            cache.clear();
        }
        cache.insert(key, group.clone());
        group
    }

    /// Drops every cached bind group, and with them their hold on buffers.
    pub(crate) fn clear(&self) {
        self.cache.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}

/// The bind group layout of a kernel's WGSL, as wgpu would derive it: every `@group(0)` storage
/// buffer its entry point uses, read-only or read-write as declared; binding 0 (the meta
/// block, where it is a buffer) at a dynamic offset. Immediate data takes no binding.
pub(crate) fn layout_entries(wgsl: &str) -> std::result::Result<Vec<wgpu::BindGroupLayoutEntry>, String> {
    let module = naga::front::wgsl::parse_str(wgsl).map_err(|e| e.emit_to_string(wgsl))?;
    let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::all())
        .validate(&module)
        .map_err(|e| e.emit_to_string(wgsl))?;
    let main = module.entry_points.iter().position(|e| e.name == "main").ok_or("no entry point `main`")?;
    let uses = info.get_entry_point(main);
    let mut entries = Vec::new();
    for (handle, var) in module.global_variables.iter() {
        let Some(binding) = &var.binding else { continue };
        if uses[handle].is_empty() {
            continue;
        }
        let naga::AddressSpace::Storage { access } = var.space else {
            return Err(format!("binding {} is not a storage buffer, which kernels here bind only", binding.binding));
        };
        if binding.group != 0 {
            return Err(format!("binding {} is in group {}; kernels here use group 0 only", binding.binding, binding.group));
        }
        entries.push(wgpu::BindGroupLayoutEntry {
            binding: binding.binding,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Storage { read_only: !access.contains(naga::StorageAccess::STORE) },
                has_dynamic_offset: binding.binding == 0,
                min_binding_size: None,
            },
            count: None,
        });
    }
    entries.sort_by_key(|e| e.binding);
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::layout_entries;

    fn storage(read_only: bool, dynamic: bool) -> wgpu::BindingType {
        wgpu::BindingType::Buffer { ty: wgpu::BufferBindingType::Storage { read_only }, has_dynamic_offset: dynamic, min_binding_size: None }
    }

    #[test]
    fn layouts_follow_the_declarations_and_skip_unused_bindings() {
        let wgsl = "
            @group(0) @binding(0) var<storage, read> params: array<u32>;
            @group(0) @binding(2) var<storage, read_write> out: array<f32>;
            @group(0) @binding(1) var<storage, read> x: array<f32>;
            @group(0) @binding(3) var<storage, read> unused: array<f32>;
            @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) id: vec3<u32>) {
                if (id.x < params[0]) { out[id.x] = x[id.x]; }
            }";
        let got: Vec<(u32, wgpu::BindingType)> = layout_entries(wgsl).unwrap().into_iter().map(|e| (e.binding, e.ty)).collect();
        assert_eq!(got, vec![(0, storage(true, true)), (1, storage(true, false)), (2, storage(false, false))]);
    }

    #[test]
    fn a_uniform_binding_is_refused() {
        let wgsl = "
            @group(0) @binding(0) var<uniform> params: vec4<u32>;
            @compute @workgroup_size(1) fn main() { _ = params.x; }";
        assert!(layout_entries(wgsl).unwrap_err().contains("not a storage buffer"));
    }
}
