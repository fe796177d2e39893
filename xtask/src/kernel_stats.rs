//! `cargo xtask kernel-stats [TEXT ..]`: what the Vulkan driver made of the wgpu backend's
//! kernels (registers, workgroup memory, spills: whatever statistics it reports through
//! `VK_KHR_pipeline_executable_properties`), for the kernels whose key contains every TEXT.
//! (NVIDIA's driver reports statistics but no internal representations, so none are asked for.)
//!
//! wgpu builds its pipelines without asking for statistics, so this opens a Vulkan device of
//! its own (the first GPU that has the extension), translates each kernel's WGSL to SPIR-V
//! with naga as wgpu does for the backend's trusted shaders (no run-time checks), and builds
//! it with `CAPTURE_STATISTICS`. The figures are the driver's; what they mean is its business
//! (NVIDIA's: registers per invocation, shared memory and local memory).

use std::ffi::CStr;

use ash::vk;

type Fallible<T> = std::result::Result<T, String>;

pub fn run(args: &[String]) -> Fallible<()> {
    let filters: Vec<&str> = args.iter().skip(1).map(String::as_str).collect();
    let sources: Vec<(String, String)> =
        liandan_backend_wgpu::shaders::all_sources(true, false, false).into_iter().filter(|(name, _)| filters.iter().all(|f| name.contains(f))).collect();
    if sources.is_empty() {
        return Err(format!("no kernel's key contains all of {filters:?} (keys print as their Rust Debug form, e.g. MatmulCoop or Prefetch)"));
    }
    let vk = Vulkan::open()?;
    println!("device: {}", vk.name);
    for (name, src) in &sources {
        match vk.statistics(src) {
            Ok(stats) => println!("{name}: {}", stats.join(", ")),
            Err(e) => println!("{name}: {e}"),
        }
    }
    Ok(())
}

struct Vulkan {
    _entry: ash::Entry,
    instance: ash::Instance,
    device: ash::Device,
    exec: ash::khr::pipeline_executable_properties::Device,
    name: String,
}

fn vk_err(what: &str) -> impl Fn(vk::Result) -> String + '_ {
    move |e| format!("{what}: {e}")
}

impl Vulkan {
    fn open() -> Fallible<Vulkan> {
        // SAFETY: loading the Vulkan loader runs its initialisation; nothing else is shared.
        let entry = unsafe { ash::Entry::load() }.map_err(|e| format!("loading Vulkan: {e}"))?;
        let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_3);
        // SAFETY: a valid create-info; the instance lives as long as `Vulkan`.
        let instance = unsafe { entry.create_instance(&vk::InstanceCreateInfo::default().application_info(&app), None) }.map_err(vk_err("vkCreateInstance"))?;
        let wanted = [ash::khr::pipeline_executable_properties::NAME, ash::khr::cooperative_matrix::NAME];
        // SAFETY: queries on a live instance.
        let physical = unsafe { instance.enumerate_physical_devices() }.map_err(vk_err("vkEnumeratePhysicalDevices"))?;
        let (pd, has_coop) = physical
            .into_iter()
            .find_map(|pd| {
                // SAFETY: as above.
                let exts = unsafe { instance.enumerate_device_extension_properties(pd) }.ok()?;
                let has = |n: &CStr| exts.iter().any(|e| e.extension_name_as_c_str() == Ok(n));
                has(wanted[0]).then_some((pd, has(wanted[1])))
            })
            .ok_or("no Vulkan device offers VK_KHR_pipeline_executable_properties")?;
        // SAFETY: as above.
        let props = unsafe { instance.get_physical_device_properties(pd) };
        let name = props.device_name_as_c_str().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        // SAFETY: as above.
        let family = unsafe { instance.get_physical_device_queue_family_properties(pd) }
            .iter()
            .position(|q| q.queue_flags.contains(vk::QueueFlags::COMPUTE))
            .ok_or("the device has no compute queue")? as u32;
        // Every feature the kernels may use, as the device reports them.
        let mut exec_features = vk::PhysicalDevicePipelineExecutablePropertiesFeaturesKHR::default();
        let mut coop = vk::PhysicalDeviceCooperativeMatrixFeaturesKHR::default();
        let mut v11 = vk::PhysicalDeviceVulkan11Features::default();
        let mut v12 = vk::PhysicalDeviceVulkan12Features::default();
        let mut v13 = vk::PhysicalDeviceVulkan13Features::default();
        let mut features = vk::PhysicalDeviceFeatures2::default().push_next(&mut exec_features).push_next(&mut v11).push_next(&mut v12).push_next(&mut v13);
        if has_coop {
            features = features.push_next(&mut coop);
        }
        // SAFETY: the chain above holds valid structs.
        unsafe { instance.get_physical_device_features2(pd, &mut features) };
        let mut exts = vec![wanted[0].as_ptr()];
        if has_coop {
            exts.push(wanted[1].as_ptr());
        }
        let priorities = [1.0f32];
        let queues = [vk::DeviceQueueCreateInfo::default().queue_family_index(family).queue_priorities(&priorities)];
        let info = vk::DeviceCreateInfo::default().queue_create_infos(&queues).enabled_extension_names(&exts).push_next(&mut features);
        // SAFETY: valid create-info; the features are those the device reported.
        let device = unsafe { instance.create_device(pd, &info, None) }.map_err(vk_err("vkCreateDevice"))?;
        let exec = ash::khr::pipeline_executable_properties::Device::new(&instance, &device);
        Ok(Vulkan { _entry: entry, instance, device, exec, name })
    }

    /// The statistics of one WGSL kernel's compute pipeline, as "name value" strings.
    fn statistics(&self, src: &str) -> Fallible<Vec<String>> {
        use naga::valid::{Capabilities, ValidationFlags, Validator};
        let module = naga::front::wgsl::parse_str(src).map_err(|e| e.emit_to_string(src))?;
        let caps = Capabilities::SHADER_FLOAT16 | Capabilities::COOPERATIVE_MATRIX | Capabilities::SUBGROUP;
        let info = Validator::new(ValidationFlags::all(), caps).validate(&module).map_err(|e| format!("{e:?}"))?;
        let unchecked = naga::proc::BoundsCheckPolicy::Unchecked;
        let bounds = naga::proc::BoundsCheckPolicies { index: unchecked, buffer: unchecked, image_load: unchecked, ..Default::default() };
        let options = naga::back::spv::Options { lang_version: (1, 6), bounds_check_policies: bounds, ..Default::default() };
        let words = naga::back::spv::write_vec(&module, &info, &options, None).map_err(|e| format!("{e:?}"))?;
        // One descriptor set layout per bind group the module declares.
        let mut groups: std::collections::BTreeMap<u32, Vec<vk::DescriptorSetLayoutBinding>> = Default::default();
        for (_, var) in module.global_variables.iter() {
            let Some(b) = &var.binding else { continue };
            let ty = match var.space {
                naga::AddressSpace::Uniform => vk::DescriptorType::UNIFORM_BUFFER,
                _ => vk::DescriptorType::STORAGE_BUFFER,
            };
            let binding =
                vk::DescriptorSetLayoutBinding::default().binding(b.binding).descriptor_type(ty).descriptor_count(1).stage_flags(vk::ShaderStageFlags::COMPUTE);
            groups.entry(b.group).or_default().push(binding);
        }
        let d = &self.device;
        let most = groups.keys().max().map_or(0, |g| g + 1);
        let mut layouts = Vec::new();
        for g in 0..most {
            let bindings = groups.get(&g).cloned().unwrap_or_default();
            // SAFETY: valid create-info on a live device; destroyed below.
            layouts.push(
                unsafe { d.create_descriptor_set_layout(&vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings), None) }
                    .map_err(vk_err("vkCreateDescriptorSetLayout"))?,
            );
        }
        // SAFETY: as above, for each object made here.
        let pipeline_layout = unsafe { d.create_pipeline_layout(&vk::PipelineLayoutCreateInfo::default().set_layouts(&layouts), None) }
            .map_err(vk_err("vkCreatePipelineLayout"))?;
        let shader = unsafe { d.create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&words), None) }.map_err(vk_err("vkCreateShaderModule"))?;
        let stage = vk::PipelineShaderStageCreateInfo::default().stage(vk::ShaderStageFlags::COMPUTE).module(shader).name(c"main");
        let info = vk::ComputePipelineCreateInfo::default().stage(stage).layout(pipeline_layout).flags(vk::PipelineCreateFlags::CAPTURE_STATISTICS_KHR);
        let made = unsafe { d.create_compute_pipelines(vk::PipelineCache::null(), &[info], None) };
        let result = match made {
            Ok(pipelines) => {
                let p = pipelines[0];
                let out = self.read(p);
                unsafe { d.destroy_pipeline(p, None) };
                out
            }
            Err((_, e)) => Err(format!("vkCreateComputePipelines: {e}")),
        };
        unsafe {
            d.destroy_shader_module(shader, None);
            d.destroy_pipeline_layout(pipeline_layout, None);
            for l in layouts {
                d.destroy_descriptor_set_layout(l, None);
            }
        }
        result
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

impl Drop for Vulkan {
    fn drop(&mut self) {
        // SAFETY: every object made on the device was destroyed in `statistics`.
        unsafe {
            self.device.destroy_device(None);
            self.instance.destroy_instance(None);
        }
    }
}
