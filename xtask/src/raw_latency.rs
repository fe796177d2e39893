//! The latency rows of `cargo xtask ceiling` without wgpu: one submission and the wait for it
//! straight through Vulkan (`ash`), on a device of its own. What is left here is the driver's
//! and the GPU's: the floor under wgpu's rows, and so under the backend's synchronize.

use std::time::Instant;

use ash::vk;

use crate::vulkan::{vk_err, Vulkan};

type Fallible<T> = std::result::Result<T, String>;

/// One element incremented by one workgroup, as `ceiling.rs`'s latency kernel (without its
/// parameter block).
pub(crate) const ADD: &str = "@group(0) @binding(0) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if gid.x < 1u { y[gid.x] = y[gid.x] + 1.0; }
}
";

/// A latency row: its name, the median whole in us, the means of its parts in us (record,
/// end the command buffer, submit, wait and read), and the polls a wait took.
pub struct Row {
    pub name: &'static str,
    pub median: f64,
    pub parts: [f64; 4],
    pub polls: f64,
}

/// What each row does: record its commands anew each time (else submit one recorded once), a
/// dispatch, a copy of 4 bytes to mapped memory read after the wait, and poll the fence (else
/// block on it); then what wgpu adds to a submission on Vulkan: a timeline semaphore signalled
/// (and polled in place of a fence), a pair of binary semaphores relayed from one submission
/// to the next (wgpu-hal's `RelaySemaphores`: each waits on the last one's), and a command
/// buffer of barriers ahead of the recorded one (wgpu-core's transitions).
struct Kind {
    name: &'static str,
    record: bool,
    dispatch: bool,
    read: bool,
    poll: bool,
    timeline: bool,
    relay: bool,
    transit: bool,
}

const DISPATCH: Kind = Kind {
    name: "raw Vulkan: a dispatch of one workgroup recorded and submitted, fence polled",
    record: true,
    dispatch: true,
    read: false,
    poll: true,
    timeline: false,
    relay: false,
    transit: false,
};

const KINDS: [Kind; 8] = [
    Kind { name: "raw Vulkan: an empty submission, fence polled", record: false, dispatch: false, ..DISPATCH },
    DISPATCH,
    Kind { name: "raw Vulkan: the same dispatch recorded once, submitted, fence polled", record: false, ..DISPATCH },
    Kind { name: "raw Vulkan: a dispatch recorded and submitted, blocking wait", poll: false, ..DISPATCH },
    Kind { name: "raw Vulkan: a dispatch + 4 bytes copied back, recorded, polled, read", read: true, ..DISPATCH },
    Kind { name: "raw Vulkan: a dispatch, a timeline semaphore signalled and polled", timeline: true, ..DISPATCH },
    Kind { name: "raw Vulkan: the same + binary semaphores relayed (as wgpu-hal submits)", timeline: true, relay: true, ..DISPATCH },
    Kind { name: "raw Vulkan: the same + a command buffer of barriers first (as wgpu-core submits)", timeline: true, relay: true, transit: true, ..DISPATCH },
];

/// The objects the rows use, destroyed on drop.
struct Setup<'a> {
    vk: &'a Vulkan,
    pipeline: Option<crate::vulkan::Pipeline>,
    buffers: Vec<(vk::Buffer, vk::DeviceMemory)>,
    pool: vk::DescriptorPool,
    commands: vk::CommandPool,
    fence: vk::Fence,
    semaphores: Vec<vk::Semaphore>,
}

impl Drop for Setup<'_> {
    fn drop(&mut self) {
        let d = &self.vk.device;
        // SAFETY: objects made on this device; the device is idle first.
        unsafe {
            let _ = d.device_wait_idle();
            d.destroy_fence(self.fence, None);
            for &sem in &self.semaphores {
                d.destroy_semaphore(sem, None);
            }
            d.destroy_command_pool(self.commands, None);
            d.destroy_descriptor_pool(self.pool, None);
            for &(b, m) in &self.buffers {
                d.destroy_buffer(b, None);
                d.free_memory(m, None);
            }
        }
        if let Some(p) = self.pipeline.take() {
            self.vk.destroy(p);
        }
    }
}

impl Setup<'_> {
    fn buffer(&mut self, size: u64, usage: vk::BufferUsageFlags, flags: vk::MemoryPropertyFlags) -> Fallible<vk::Buffer> {
        let d = &self.vk.device;
        // SAFETY: valid create-infos on a live device; freed on drop.
        unsafe {
            let buffer = d.create_buffer(&vk::BufferCreateInfo::default().size(size).usage(usage), None).map_err(vk_err("vkCreateBuffer"))?;
            let needs = d.get_buffer_memory_requirements(buffer);
            let kind = match self.vk.memory_type(needs.memory_type_bits, flags) {
                Ok(kind) => kind,
                Err(e) => {
                    d.destroy_buffer(buffer, None);
                    return Err(e);
                }
            };
            let memory = match d.allocate_memory(&vk::MemoryAllocateInfo::default().allocation_size(needs.size).memory_type_index(kind), None) {
                Ok(memory) => memory,
                Err(e) => {
                    d.destroy_buffer(buffer, None);
                    return Err(format!("vkAllocateMemory: {e}"));
                }
            };
            self.buffers.push((buffer, memory));
            d.bind_buffer_memory(buffer, memory, 0).map_err(vk_err("vkBindBufferMemory"))?;
            Ok(buffer)
        }
    }
}

/// Each row `reps` times after a tenth as many to warm up.
pub fn rows(reps: usize) -> Fallible<(String, Vec<Row>)> {
    let vk = Vulkan::open(None, None)?;
    let d = &vk.device;
    // SAFETY (this function's unsafe blocks): Vulkan calls on live objects made here, each
    // command buffer reused only after its fence said the device was done with it.
    let mut s = Setup {
        vk: &vk,
        pipeline: None,
        buffers: Vec::new(),
        pool: vk::DescriptorPool::null(),
        commands: vk::CommandPool::null(),
        fence: vk::Fence::null(),
        semaphores: Vec::new(),
    };
    s.pipeline = Some(vk.pipeline(ADD, vk::PipelineCreateFlags::empty())?);
    let (pipeline, layout, set_layout) = {
        let p = s.pipeline.as_ref().expect("made above");
        (p.pipeline, p.layout, p.sets[0])
    };
    let y = s.buffer(256, vk::BufferUsageFlags::STORAGE_BUFFER | vk::BufferUsageFlags::TRANSFER_SRC, vk::MemoryPropertyFlags::DEVICE_LOCAL)?;
    let back = s.buffer(256, vk::BufferUsageFlags::TRANSFER_DST, vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT)?;
    let back_memory = s.buffers[1].1;
    let mapped = unsafe { d.map_memory(back_memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty()) }.map_err(vk_err("vkMapMemory"))? as *const f32;
    let sizes = [vk::DescriptorPoolSize { ty: vk::DescriptorType::STORAGE_BUFFER, descriptor_count: 1 }];
    s.pool = unsafe { d.create_descriptor_pool(&vk::DescriptorPoolCreateInfo::default().max_sets(1).pool_sizes(&sizes), None) }
        .map_err(vk_err("vkCreateDescriptorPool"))?;
    let set = unsafe { d.allocate_descriptor_sets(&vk::DescriptorSetAllocateInfo::default().descriptor_pool(s.pool).set_layouts(&[set_layout])) }
        .map_err(vk_err("vkAllocateDescriptorSets"))?[0];
    let info = [vk::DescriptorBufferInfo { buffer: y, offset: 0, range: vk::WHOLE_SIZE }];
    let write = vk::WriteDescriptorSet::default().dst_set(set).dst_binding(0).descriptor_type(vk::DescriptorType::STORAGE_BUFFER).buffer_info(&info);
    unsafe { d.update_descriptor_sets(&[write], &[]) };
    s.commands = unsafe {
        d.create_command_pool(&vk::CommandPoolCreateInfo::default().queue_family_index(vk.family).flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER), None)
    }
    .map_err(vk_err("vkCreateCommandPool"))?;
    let allocate = vk::CommandBufferAllocateInfo::default().command_pool(s.commands).level(vk::CommandBufferLevel::PRIMARY).command_buffer_count(3);
    let cbs = unsafe { d.allocate_command_buffers(&allocate) }.map_err(vk_err("vkAllocateCommandBuffers"))?;
    s.fence = unsafe { d.create_fence(&vk::FenceCreateInfo::default(), None) }.map_err(vk_err("vkCreateFence"))?;
    let fence = s.fence;
    // The timeline semaphore, then the two binary ones the relay alternates between.
    let mut timeline_info = vk::SemaphoreTypeCreateInfo::default().semaphore_type(vk::SemaphoreType::TIMELINE).initial_value(0);
    for info in [vk::SemaphoreCreateInfo::default().push_next(&mut timeline_info), vk::SemaphoreCreateInfo::default(), vk::SemaphoreCreateInfo::default()] {
        s.semaphores.push(unsafe { d.create_semaphore(&info, None) }.map_err(vk_err("vkCreateSemaphore"))?);
    }
    let (timeline, mut relay) = (s.semaphores[0], [s.semaphores[1], s.semaphores[2]]);
    // The timeline's last value signalled, and whether relay[0] has been signalled and not yet waited on.
    let (mut value, mut relayed) = (0u64, false);
    // The transitions' command buffer: one barrier between compute passes, recorded once.
    let transit = cbs[2];
    unsafe {
        d.begin_command_buffer(transit, &vk::CommandBufferBeginInfo::default()).map_err(vk_err("vkBeginCommandBuffer"))?;
        let barrier = vk::MemoryBarrier::default()
            .src_access_mask(vk::AccessFlags::SHADER_WRITE)
            .dst_access_mask(vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE);
        let stage = vk::PipelineStageFlags::COMPUTE_SHADER;
        d.cmd_pipeline_barrier(transit, stage, stage, vk::DependencyFlags::empty(), &[barrier], &[], &[]);
        d.end_command_buffer(transit).map_err(vk_err("vkEndCommandBuffer"))?;
    }
    let queue = unsafe { d.get_device_queue(vk.family, 0) };

    // The commands of a row into `cb`: the dispatch, and for a read-back the copy with the
    // barriers that make the shader's write visible to it and its write to the host.
    let record = |cb: vk::CommandBuffer, kind: &Kind| -> Fallible<()> {
        unsafe {
            d.begin_command_buffer(cb, &vk::CommandBufferBeginInfo::default()).map_err(vk_err("vkBeginCommandBuffer"))?;
            if kind.dispatch {
                d.cmd_bind_pipeline(cb, vk::PipelineBindPoint::COMPUTE, pipeline);
                d.cmd_bind_descriptor_sets(cb, vk::PipelineBindPoint::COMPUTE, layout, 0, &[set], &[]);
                d.cmd_dispatch(cb, 1, 1, 1);
            }
            if kind.read {
                let written = vk::MemoryBarrier::default().src_access_mask(vk::AccessFlags::SHADER_WRITE).dst_access_mask(vk::AccessFlags::TRANSFER_READ);
                let flags = vk::DependencyFlags::empty();
                d.cmd_pipeline_barrier(cb, vk::PipelineStageFlags::COMPUTE_SHADER, vk::PipelineStageFlags::TRANSFER, flags, &[written], &[], &[]);
                d.cmd_copy_buffer(cb, y, back, &[vk::BufferCopy { src_offset: 0, dst_offset: 0, size: 4 }]);
                let copied = vk::MemoryBarrier::default().src_access_mask(vk::AccessFlags::TRANSFER_WRITE).dst_access_mask(vk::AccessFlags::HOST_READ);
                d.cmd_pipeline_barrier(cb, vk::PipelineStageFlags::TRANSFER, vk::PipelineStageFlags::HOST, flags, &[copied], &[], &[]);
            }
        }
        Ok(())
    };

    let mut rows = Vec::new();
    for kind in &KINDS {
        // The command buffer recorded once, for the rows that do not record each time.
        let once = cbs[1];
        unsafe { d.reset_command_buffer(once, vk::CommandBufferResetFlags::empty()) }.map_err(vk_err("vkResetCommandBuffer"))?;
        record(once, kind)?;
        unsafe { d.end_command_buffer(once) }.map_err(vk_err("vkEndCommandBuffer"))?;
        let mut whole = Vec::with_capacity(reps);
        let mut parts = [0f64; 4];
        let mut polls = 0u64;
        let warm = reps / 10;
        for rep in 0..reps + warm {
            let t0 = Instant::now();
            let cb = if kind.record {
                unsafe { d.reset_command_buffer(cbs[0], vk::CommandBufferResetFlags::empty()) }.map_err(vk_err("vkResetCommandBuffer"))?;
                record(cbs[0], kind)?;
                cbs[0]
            } else {
                once
            };
            let t1 = Instant::now();
            if kind.record {
                unsafe { d.end_command_buffer(cb) }.map_err(vk_err("vkEndCommandBuffer"))?;
            }
            let t2 = Instant::now();
            let list: &[vk::CommandBuffer] = match (kind.dispatch, kind.transit) {
                (false, _) => &[],
                (true, false) => &[cb],
                (true, true) => &[transit, cb],
            };
            let mut waits = Vec::new();
            let mut signals = Vec::new();
            let mut values = Vec::new();
            if kind.timeline {
                value += 1;
                signals.push(timeline);
                values.push(value);
            }
            if kind.relay {
                if relayed {
                    waits.push(relay[0]);
                }
                signals.push(relay[1]);
                values.push(0);
            }
            let wait_values = vec![0u64; waits.len()];
            let stages = vec![vk::PipelineStageFlags::TOP_OF_PIPE; waits.len()];
            let mut timeline_submit = vk::TimelineSemaphoreSubmitInfo::default().wait_semaphore_values(&wait_values).signal_semaphore_values(&values);
            let mut submit = vk::SubmitInfo::default().command_buffers(list).wait_semaphores(&waits).wait_dst_stage_mask(&stages).signal_semaphores(&signals);
            if kind.timeline {
                submit = submit.push_next(&mut timeline_submit);
            }
            let signalled = if kind.timeline { vk::Fence::null() } else { fence };
            unsafe { d.queue_submit(queue, &[submit], signalled) }.map_err(vk_err("vkQueueSubmit"))?;
            if kind.relay {
                relay.swap(0, 1);
                relayed = true;
            }
            let t3 = Instant::now();
            let mut n = 0u64;
            if kind.timeline {
                while unsafe { d.get_semaphore_counter_value(timeline) }.map_err(vk_err("vkGetSemaphoreCounterValue"))? < value {
                    n += 1;
                    std::hint::spin_loop();
                }
            } else if kind.poll {
                while !unsafe { d.get_fence_status(fence) }.map_err(vk_err("vkGetFenceStatus"))? {
                    n += 1;
                    std::hint::spin_loop();
                }
            } else {
                unsafe { d.wait_for_fences(&[fence], true, u64::MAX) }.map_err(vk_err("vkWaitForFences"))?;
            }
            if kind.read {
                // SAFETY: 256 mapped bytes of coherent memory the device finished writing.
                std::hint::black_box(unsafe { mapped.read_volatile() });
            }
            let t4 = Instant::now();
            if !kind.timeline {
                unsafe { d.reset_fences(&[fence]) }.map_err(vk_err("vkResetFences"))?;
            }
            if rep >= warm {
                whole.push((t4 - t0).as_secs_f64() * 1e6);
                for (p, (a, b)) in parts.iter_mut().zip([(t0, t1), (t1, t2), (t2, t3), (t3, t4)]) {
                    *p += (b - a).as_secs_f64() * 1e6;
                }
                polls += n;
            }
        }
        whole.sort_by(f64::total_cmp);
        let n = reps as f64;
        rows.push(Row { name: kind.name, median: whole[reps / 2], parts: parts.map(|p| p / n), polls: polls as f64 / n });
    }
    let name = vk.name.clone();
    drop(s);
    Ok((name, rows))
}

#[cfg(test)]
mod tests {
    /// Every row runs to its end on whatever Vulkan device there is (lavapipe in CI), so a GPU
    /// call never meets a Vulkan error; without one it is skipped unless LIANDAN_REQUIRE_GPU=1.
    #[test]
    fn every_row_runs() {
        match super::rows(10) {
            Ok((_, rows)) => {
                assert_eq!(rows.len(), super::KINDS.len());
                for r in rows {
                    assert!(r.median > 0.0 && r.parts.iter().all(|p| *p >= 0.0), "{}", r.name);
                }
            }
            Err(e) if !liandan_tensor::settings::require_gpu().unwrap_or_else(|e| panic!("{e}")) => eprintln!("skipped: {e}"),
            Err(e) => panic!("{e}"),
        }
    }
}
