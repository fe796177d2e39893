//! Device selection and parsing, with only the CPU backend linked.

use liandan_backend_cpu as _;
use liandan_tensor::{DType, Device, DeviceKind, Tensor};

#[test]
fn cpu_is_registered_and_best_falls_back_to_it() {
    let cpu = Device::cpu();
    assert_eq!(cpu.kind(), DeviceKind::Cpu);
    assert!(Device::all().iter().any(|d| d.same(&cpu)));
    if Device::gpus().is_empty() && std::env::var("LIANDAN_DEVICE").is_err() {
        assert_eq!(Device::best(), cpu);
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
