//! Adapter discovery and the facts `liandan info` prints.

/// One adapter as `liandan info` lists it.
#[derive(Clone, Debug)]
pub struct AdapterSummary {
    pub name: String,
    pub backend: String,
    pub device_type: String,
    pub driver: String,
}

/// The adapters wgpu can open here, best first (discrete, integrated, virtual, CPU), one per
/// physical device (the Vulkan and GL views of one GPU are not listed twice).
pub(crate) fn enumerate() -> Vec<wgpu::Adapter> {
    let instance = instance();
    let mut adapters = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::PRIMARY));
    let rank = |a: &wgpu::Adapter| match a.get_info().device_type {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu | wgpu::DeviceType::Other => 2,
        wgpu::DeviceType::Cpu => 3,
    };
    adapters.sort_by_key(rank);
    let mut seen = std::collections::HashSet::new();
    adapters.retain(|a| {
        let i = a.get_info();
        seen.insert((i.name, i.vendor, i.device, i.device_pci_bus_id))
    });
    adapters
}

/// The wgpu instance the adapters are found through, as `WGPU_BACKEND` and the other `WGPU_*`
/// variables ask. On Linux its Vulkan instance is created without the window systems'
/// extensions (Xlib, XCB, Wayland): liandan never draws, and where they are enabled Mesa's
/// device-select layer connects to the Wayland display while it lists the devices, which
/// prints `error: XDG_RUNTIME_DIR is invalid or not set in the environment.` on a machine
/// without one. Elsewhere, or where that instance cannot be made, wgpu's own.
fn instance() -> wgpu::Instance {
    let desc = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
    #[cfg(target_os = "linux")]
    if desc.backends.contains(wgpu::Backends::VULKAN) {
        if let Some(instance) = vulkan_without_window_systems(&desc) {
            return instance;
        }
    }
    wgpu::Instance::new(desc)
}

#[cfg(target_os = "linux")]
fn vulkan_without_window_systems(desc: &wgpu::InstanceDescriptor) -> Option<wgpu::Instance> {
    use wgpu::hal::vulkan;
    const WINDOW_SYSTEMS: [&std::ffi::CStr; 3] = [c"VK_KHR_xlib_surface", c"VK_KHR_xcb_surface", c"VK_KHR_wayland_surface"];
    let hal_desc = wgpu::hal::InstanceDescriptor {
        name: "liandan",
        flags: desc.flags,
        memory_budget_thresholds: desc.memory_budget_thresholds,
        backend_options: desc.backend_options.clone(),
        telemetry: None,
        display: None,
    };
    // VK_KHR_surface stays (VK_KHR_swapchain, which wgpu enables on devices, requires it);
    // nothing of wgpu's outside presenting to a window uses the three removed.
    let drop_window_systems = Box::new(|args: vulkan::CreateInstanceCallbackArgs| args.extensions.retain(|e| !WINDOW_SYSTEMS.contains(e)));
    // SAFETY: the instance is created here and handed whole to wgpu, which owns it from then on.
    let hal = unsafe { vulkan::Instance::init_with_callback(&hal_desc, Some(drop_window_systems)) }.ok()?;
    Some(unsafe { wgpu::Instance::from_hal::<wgpu::hal::api::Vulkan>(hal) })
}

/// Summaries of the adapters wgpu finds.
pub fn adapters() -> Vec<AdapterSummary> {
    enumerate()
        .iter()
        .map(|a| {
            let i = a.get_info();
            AdapterSummary {
                name: i.name,
                backend: format!("{:?}", i.backend),
                device_type: format!("{:?}", i.device_type),
                driver: format!("{} {}", i.driver, i.driver_info),
            }
        })
        .collect()
}

/// Name, API, type, the features liandan uses, the limits it depends on (`l`: the opened
/// device's, which may be lower than the adapter's), and memory hints, under `options`.
pub(crate) fn describe(adapter: &wgpu::Adapter, l: &wgpu::Limits, options: &crate::WgpuOptions) -> Vec<(String, String)> {
    let i = adapter.get_info();
    let f = adapter.features();
    let mib = |b: u64| format!("{} MiB", b >> 20);
    let flags: Vec<&str> = [
        (wgpu::Features::SHADER_F16, "shader-f16"),
        (wgpu::Features::SHADER_F64, "shader-f64"),
        (wgpu::Features::SUBGROUP, "subgroup"),
        (wgpu::Features::TIMESTAMP_QUERY, "timestamp-query"),
    ]
    .iter()
    .filter(|(flag, _)| f.contains(*flag))
    .map(|(_, n)| *n)
    .collect();
    let coop = crate::coop::status(adapter, l, options.coop_matrix);
    vec![
        ("name".into(), i.name.clone()),
        ("api".into(), format!("{:?}", i.backend)),
        ("type".into(), format!("{:?}", i.device_type)),
        ("driver".into(), format!("{} {}", i.driver, i.driver_info).trim().to_string()),
        ("features".into(), flags.join(", ")),
        ("cooperative matrices".into(), crate::coop::configurations(adapter)),
        ("f16 matmul".into(), coop.describe()),
        ("f32 convolutions".into(), f32_convolutions(coop, options.conv_tf32)),
        ("max buffer".into(), mib(l.max_buffer_size)),
        ("max storage binding".into(), mib(l.max_storage_buffer_binding_size)),
        ("max workgroups per dim".into(), l.max_compute_workgroups_per_dimension.to_string()),
        ("max workgroup memory".into(), format!("{} KiB", l.max_compute_workgroup_storage_size >> 10)),
    ]
}

/// Where f32 convolutions run: exact f32, or (under `conv_tf32`, where the f16 products run on
/// tensor cores) the larger passes on the tensor cores with operands scaled into f16.
fn f32_convolutions(status: crate::coop::Status, conv_tf32: bool) -> String {
    match (status, conv_tf32) {
        (crate::coop::Status::InUse(_), true) => "tensor cores where a pass is large, operands scaled into f16 (TF32's precision; LIANDAN_CONV_TF32)".into(),
        (crate::coop::Status::InUse(_), false) => {
            "exact f32 (LIANDAN_CONV_TF32=1 or `liandan train --conv-tf32` puts the larger passes on the tensor cores)".into()
        }
        _ => "exact f32 (no tensor cores for f16 here)".into(),
    }
}
