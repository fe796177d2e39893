//! A Vulkan device of xtask's own, through `ash` (the version wgpu 30 already builds), for what
//! wgpu does not expose: the driver's statistics of a pipeline (`kernel_stats.rs`) and what a
//! submission costs with nothing between the program and the driver (`ceiling.rs`'s latency
//! rows). Kernels are WGSL translated to SPIR-V by naga as wgpu translates the backend's
//! trusted shaders (no run-time checks).

use std::ffi::CStr;

use ash::vk;

type Fallible<T> = std::result::Result<T, String>;

pub fn vk_err(what: &str) -> impl Fn(vk::Result) -> String + '_ {
    move |e| format!("{what}: {e}")
}

pub struct Vulkan {
    _entry: ash::Entry,
    pub instance: ash::Instance,
    pub physical: vk::PhysicalDevice,
    pub device: ash::Device,
    /// The first queue family that computes; its queue 0 is the device's only queue.
    pub family: u32,
    pub name: String,
}

/// A compute pipeline and the objects it was built from; [`Vulkan::destroy`] frees them.
pub struct Pipeline {
    pub pipeline: vk::Pipeline,
    pub layout: vk::PipelineLayout,
    pub sets: Vec<vk::DescriptorSetLayout>,
    shader: vk::ShaderModule,
}

/// How the device kinds rank when several offer what is asked: a real GPU before a software one.
fn rank(kind: vk::PhysicalDeviceType) -> u32 {
    match kind {
        vk::PhysicalDeviceType::DISCRETE_GPU => 0,
        vk::PhysicalDeviceType::INTEGRATED_GPU => 1,
        vk::PhysicalDeviceType::VIRTUAL_GPU => 2,
        vk::PhysicalDeviceType::CPU => 4,
        _ => 3,
    }
}

impl Vulkan {
    /// Opens the best-ranked device that has the `required` extension (if any), with every
    /// feature it reports enabled, and the `optional` extension where it has that too.
    pub fn open(required: Option<&'static CStr>, optional: Option<&'static CStr>) -> Fallible<Vulkan> {
        // SAFETY: loading the Vulkan loader runs its initialisation; nothing else is shared.
        let entry = unsafe { ash::Entry::load() }.map_err(|e| format!("loading Vulkan: {e}"))?;
        let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_3);
        // SAFETY: a valid create-info; the instance lives as long as `Vulkan`.
        let instance = unsafe { entry.create_instance(&vk::InstanceCreateInfo::default().application_info(&app), None) }.map_err(vk_err("vkCreateInstance"))?;
        // SAFETY: queries on a live instance.
        let physical = unsafe { instance.enumerate_physical_devices() }.map_err(vk_err("vkEnumeratePhysicalDevices"))?;
        let (pd, has_optional) = physical
            .into_iter()
            .filter_map(|pd| {
                // SAFETY: as above.
                let exts = unsafe { instance.enumerate_device_extension_properties(pd) }.ok()?;
                let has = |n: &CStr| exts.iter().any(|e| e.extension_name_as_c_str() == Ok(n));
                // SAFETY: as above.
                let kind = unsafe { instance.get_physical_device_properties(pd) }.device_type;
                required.is_none_or(has).then(|| (rank(kind), pd, optional.is_some_and(has)))
            })
            .min_by_key(|(rank, ..)| *rank)
            .map(|(_, pd, has)| (pd, has))
            .ok_or_else(|| match required {
                Some(r) => format!("no Vulkan device offers {}", r.to_string_lossy()),
                None => "no Vulkan device".to_string(),
            })?;
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
        let mut features = vk::PhysicalDeviceFeatures2::default().push_next(&mut v11).push_next(&mut v12).push_next(&mut v13);
        let exts: Vec<&CStr> = [required, optional.filter(|_| has_optional)].into_iter().flatten().collect();
        if exts.contains(&ash::khr::pipeline_executable_properties::NAME) {
            features = features.push_next(&mut exec_features);
        }
        if exts.contains(&ash::khr::cooperative_matrix::NAME) {
            features = features.push_next(&mut coop);
        }
        let exts: Vec<_> = exts.iter().map(|e| e.as_ptr()).collect();
        // SAFETY: the chain above holds valid structs.
        unsafe { instance.get_physical_device_features2(pd, &mut features) };
        let priorities = [1.0f32];
        let queues = [vk::DeviceQueueCreateInfo::default().queue_family_index(family).queue_priorities(&priorities)];
        let info = vk::DeviceCreateInfo::default().queue_create_infos(&queues).enabled_extension_names(&exts).push_next(&mut features);
        // SAFETY: valid create-info; the features are those the device reported.
        let device = unsafe { instance.create_device(pd, &info, None) }.map_err(vk_err("vkCreateDevice"))?;
        Ok(Vulkan { _entry: entry, instance, physical: pd, device, family, name })
    }

    /// The compute pipeline of one WGSL kernel (entry point `main`), one descriptor set layout
    /// per bind group it declares, every binding a storage or uniform buffer.
    pub fn pipeline(&self, src: &str, flags: vk::PipelineCreateFlags) -> Fallible<Pipeline> {
        use naga::valid::{Capabilities, ValidationFlags, Validator};
        let module = naga::front::wgsl::parse_str(src).map_err(|e| e.emit_to_string(src))?;
        let caps = Capabilities::SHADER_FLOAT16 | Capabilities::COOPERATIVE_MATRIX | Capabilities::SUBGROUP;
        let info = Validator::new(ValidationFlags::all(), caps).validate(&module).map_err(|e| format!("{e:?}"))?;
        let unchecked = naga::proc::BoundsCheckPolicy::Unchecked;
        let bounds = naga::proc::BoundsCheckPolicies { index: unchecked, buffer: unchecked, image_load: unchecked, ..Default::default() };
        let options = naga::back::spv::Options { lang_version: (1, 6), bounds_check_policies: bounds, ..Default::default() };
        let words = naga::back::spv::write_vec(&module, &info, &options, None).map_err(|e| format!("{e:?}"))?;
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
        let mut sets = Vec::new();
        for g in 0..most {
            let bindings = groups.get(&g).cloned().unwrap_or_default();
            // SAFETY: valid create-info on a live device; destroyed by `destroy`.
            sets.push(
                unsafe { d.create_descriptor_set_layout(&vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings), None) }
                    .map_err(vk_err("vkCreateDescriptorSetLayout"))?,
            );
        }
        // SAFETY: as above, for each object made here.
        let layout =
            unsafe { d.create_pipeline_layout(&vk::PipelineLayoutCreateInfo::default().set_layouts(&sets), None) }.map_err(vk_err("vkCreatePipelineLayout"))?;
        let shader = unsafe { d.create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&words), None) }.map_err(vk_err("vkCreateShaderModule"))?;
        let stage = vk::PipelineShaderStageCreateInfo::default().stage(vk::ShaderStageFlags::COMPUTE).module(shader).name(c"main");
        let info = vk::ComputePipelineCreateInfo::default().stage(stage).layout(layout).flags(flags);
        let mut made = Pipeline { pipeline: vk::Pipeline::null(), layout, sets, shader };
        match unsafe { d.create_compute_pipelines(vk::PipelineCache::null(), &[info], None) } {
            Ok(pipelines) => {
                made.pipeline = pipelines[0];
                Ok(made)
            }
            Err((_, e)) => {
                self.destroy(made);
                Err(format!("vkCreateComputePipelines: {e}"))
            }
        }
    }

    pub fn destroy(&self, p: Pipeline) {
        let d = &self.device;
        // SAFETY: objects made on this device by `pipeline`, no longer in use.
        unsafe {
            if p.pipeline != vk::Pipeline::null() {
                d.destroy_pipeline(p.pipeline, None);
            }
            d.destroy_shader_module(p.shader, None);
            d.destroy_pipeline_layout(p.layout, None);
            for l in p.sets {
                d.destroy_descriptor_set_layout(l, None);
            }
        }
    }

    /// The index of a memory type allowed by `bits` with every flag of `flags`.
    pub fn memory_type(&self, bits: u32, flags: vk::MemoryPropertyFlags) -> Fallible<u32> {
        // SAFETY: a query on a live instance.
        let props = unsafe { self.instance.get_physical_device_memory_properties(self.physical) };
        (0..props.memory_type_count)
            .find(|&i| bits & (1 << i) != 0 && props.memory_types[i as usize].property_flags.contains(flags))
            .ok_or_else(|| format!("no memory type with {flags:?}"))
    }
}

impl Drop for Vulkan {
    fn drop(&mut self) {
        // SAFETY: every object made on the device was destroyed by its user.
        unsafe {
            self.device.destroy_device(None);
            self.instance.destroy_instance(None);
        }
    }
}
