//! `cargo xtask kernel-stats [--ceiling] [TEXT ..]`: what the Vulkan driver made of the wgpu
//! backend's kernels (registers, workgroup memory, spills: whatever statistics it reports
//! through `VK_KHR_pipeline_executable_properties`), for the kernels whose key contains every
//! TEXT; with `--ceiling`, of `cargo xtask ceiling`'s kernels whose name does.
//! (NVIDIA's driver reports statistics but no internal representations, so none are asked for.)
//!
//! wgpu builds its pipelines without asking for statistics, so this opens a Vulkan device of
//! its own (the first GPU that has the extension), translates each kernel's WGSL to SPIR-V
//! with naga as wgpu does for the backend's trusted shaders (no run-time checks), and builds
//! it with `CAPTURE_STATISTICS`. The figures are the driver's; what they mean is its business
//! (NVIDIA's: registers per invocation, shared memory and local memory).

use ash::vk;

use crate::vulkan::{vk_err, Vulkan};

type Fallible<T> = std::result::Result<T, String>;

pub fn run(args: &[String]) -> Fallible<()> {
    let ceiling = args.iter().any(|a| a == "--ceiling");
    let filters: Vec<&str> = args.iter().skip(1).map(String::as_str).filter(|a| *a != "--ceiling").collect();
    let all = if ceiling { crate::ceiling::sources() } else { liandan_backend_wgpu::shaders::all_sources(true, false, false) };
    let sources: Vec<(String, String)> = all.into_iter().filter(|(name, _)| filters.iter().all(|f| name.contains(f))).collect();
    if sources.is_empty() {
        return Err(format!("no kernel's key contains all of {filters:?} (keys print as their Rust Debug form, e.g. MatmulCoop or Prefetch)"));
    }
    let vk = Stats::open()?;
    println!("device: {}", vk.vk.name);
    for (name, src) in &sources {
        match vk.statistics(src) {
            Ok(stats) => println!("{name}: {}", stats.join(", ")),
            Err(e) => println!("{name}: {e}"),
        }
    }
    Ok(())
}

struct Stats {
    vk: Vulkan,
    exec: ash::khr::pipeline_executable_properties::Device,
}

impl Stats {
    fn open() -> Fallible<Stats> {
        let vk = Vulkan::open(Some(ash::khr::pipeline_executable_properties::NAME), Some(ash::khr::cooperative_matrix::NAME))?;
        let exec = ash::khr::pipeline_executable_properties::Device::new(&vk.instance, &vk.device);
        Ok(Stats { vk, exec })
    }

    /// The statistics of one WGSL kernel's compute pipeline, as "name value" strings.
    fn statistics(&self, src: &str) -> Fallible<Vec<String>> {
        let p = self.vk.pipeline(src, vk::PipelineCreateFlags::CAPTURE_STATISTICS_KHR)?;
        let out = self.read(p.pipeline);
        self.vk.destroy(p);
        out
    }

    fn read(&self, pipeline: vk::Pipeline) -> Fallible<Vec<String>> {
        // SAFETY: queries of a pipeline made with CAPTURE_STATISTICS on this device.
        let execs = unsafe { self.exec.get_pipeline_executable_properties(&vk::PipelineInfoKHR::default().pipeline(pipeline)) }
            .map_err(vk_err("vkGetPipelineExecutablePropertiesKHR"))?;
        let mut out = Vec::new();
        for i in 0..execs.len() as u32 {
            let info = vk::PipelineExecutableInfoKHR::default().pipeline(pipeline).executable_index(i);
            // SAFETY: as above.
            let stats = unsafe { self.exec.get_pipeline_executable_statistics(&info) }.map_err(vk_err("vkGetPipelineExecutableStatisticsKHR"))?;
            for s in stats {
                let name = s.name_as_c_str().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                // SAFETY: the union's member is the one `format` names.
                let value = unsafe {
                    match s.format {
                        vk::PipelineExecutableStatisticFormatKHR::BOOL32 => (s.value.b32 != 0).to_string(),
                        vk::PipelineExecutableStatisticFormatKHR::INT64 => s.value.i64.to_string(),
                        vk::PipelineExecutableStatisticFormatKHR::UINT64 => s.value.u64.to_string(),
                        _ => format!("{:.3}", s.value.f64),
                    }
                };
                out.push(format!("{name} {value}"));
            }
        }
        Ok(out)
    }
}
