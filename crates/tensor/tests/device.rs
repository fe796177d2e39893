//! Device selection and parsing, with only the CPU backend linked.

use liandan_backend_cpu as _;
use liandan_tensor::{DType, Device, DeviceKind, Tensor};

#[test]
fn cpu_is_registered_and_best_falls_back_to_it() {
    let cpu = Device::cpu();
    assert_eq!(cpu.kind(), DeviceKind::Cpu);
    assert!(Device::all().iter().any(|d| d.same(&cpu)));
    if Device::gpus().is_empty() && std::env::var("LIANDAN_DEVICE").is_err() {
        assert_eq!(Device::best().unwrap(), cpu);
    }
}

#[test]
fn device_specs_parse_or_explain() {
    assert_eq!(Device::parse("cpu").unwrap(), Device::cpu());
    assert_eq!(Device::parse(" CPU ").unwrap(), Device::cpu());
    let err = Device::parse("tpu").unwrap_err().to_string();
    assert!(err.contains("tpu") && err.contains("gpu:N"), "{err}");
    let n = Device::gpus().len();
    let err = Device::parse(&format!("gpu:{}", n + 3)).unwrap_err().to_string();
    assert!(err.contains(&format!("GPU {}", n + 3)), "{err}");
    assert!(Device::parse("gpu:x").is_err());
}

#[test]
fn tensors_move_between_devices_and_keep_gradients() {
    let cpu = Device::cpu();
    let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3], &cpu).unwrap().requires_grad_(true).unwrap();
    for d in Device::all() {
        let y = x.to_device(&d).unwrap().mul_scalar(2.0).unwrap().to_device(&cpu).unwrap();
        assert_eq!(y.to_vec::<f32>().unwrap(), vec![2.0, 4.0, 6.0]);
        y.sum_all().unwrap().backward().unwrap();
    }
    let n = Device::all().len() as f32;
    assert_eq!(x.grad().unwrap().to_vec::<f32>().unwrap(), vec![2.0 * n; 3]);
    let h = Tensor::zeros(&[2], DType::F16, &cpu).unwrap();
    assert!(h.to_vec::<f32>().is_err(), "to_vec with the wrong element type is an error");
}

/// `LIANDAN_DEVICE` is read by a child run of this test (environment variables are process-wide,
/// and setting one here would race the other tests): a name that matches no device is an
/// error naming the variable and the devices there are; empty means unset.
#[test]
fn liandan_device_naming_no_device_is_an_error() {
    const TEST: &str = "liandan_device_naming_no_device_is_an_error";
    if let Ok(value) = std::env::var("TENSOR_TEST_CHILD_DEVICE") {
        if value.is_empty() {
            assert!(Device::from_env().unwrap().is_none(), "an empty LIANDAN_DEVICE is unset");
            assert!(Device::best().is_ok());
            return;
        }
        let err = Device::from_env().unwrap_err().to_string();
        assert!(err.contains(&format!("LIANDAN_DEVICE={value:?}")) && err.contains("Devices here: cpu"), "{err}");
        assert_eq!(Device::best().unwrap_err().to_string(), err, "best() must not fall back to another device");
        return;
    }
    let exe = std::env::current_exe().unwrap();
    for value in ["", "gpu:7", "gpu:x", "tpu"] {
        let o = std::process::Command::new(&exe)
            .args(["--exact", TEST, "--nocapture", "--test-threads", "1"])
            .env("LIANDAN_DEVICE", value)
            .env("TENSOR_TEST_CHILD_DEVICE", value)
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success() && out.contains("1 passed"), "LIANDAN_DEVICE={value:?}:\n{out}\n{}", String::from_utf8_lossy(&o.stderr));
    }
}
