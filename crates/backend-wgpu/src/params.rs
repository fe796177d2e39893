//! Named shader parameters: a kernel's parameter block is one `#[repr(C)]` Rust struct,
//! declared with [`shader_params!`](crate::shader_params), and its WGSL `struct Params` is
//! generated from the same declaration, so a kernel reads `p.numel`, `p.lr`, never a word by
//! its position.
//!
//! Fields are 4-byte scalars (`u32`, `i32`, `f32`), fixed arrays of them, and other blocks,
//! whose fields the WGSL struct takes in their place (so kernels that share a block's fields,
//! as the matmul and the convolutions do, read them by the same names): laid out alike by
//! `#[repr(C)]` and by WGSL's rules for a storage buffer or immediate data (4-byte alignment,
//! arrays of stride 4), with no padding in either. The block travels as the dispatch's meta
//! block (`gpu.rs`): at most [`PARAMS_BYTES`].

/// The most bytes a parameter block may hold: 64 words, a dispatch's meta slot (`gpu.rs`).
pub const PARAMS_BYTES: usize = 256;

/// A kernel's parameter block: a plain struct of 4-byte fields whose WGSL twin is
/// [`ShaderParams::wgsl_struct`]. Implemented by [`shader_params!`](crate::shader_params),
/// which checks the layout at compile time.
pub trait ShaderParams: bytemuck::Pod {
    /// Each field's name and WGSL type, in declaration order.
    fn fields() -> Vec<(&'static str, String)>;

    /// The WGSL declaration `struct Params { .. }` of this block.
    fn wgsl_struct() -> String {
        let mut s = String::from("struct Params {\n");
        for (name, ty) in Self::fields() {
            s += &format!("  {name}: {ty},\n");
        }
        s + "}\n"
    }
}

/// A dispatch's parameter block as words, inline (one is made for every op).
pub(crate) type Meta = smallvec::SmallVec<[u32; PARAMS_BYTES / 4]>;

/// The words of a parameter block, as a dispatch takes them.
pub(crate) fn words<P: ShaderParams>(params: &P) -> Meta {
    Meta::from_slice(bytemuck::cast_slice(std::slice::from_ref(params)))
}

/// A field type of a parameter block and its WGSL name.
pub trait WgslType: bytemuck::Pod {
    fn wgsl() -> String;

    /// The WGSL fields a field `name` of this type declares: itself, or a nested block's own
    /// fields in its place.
    fn wgsl_fields(name: &'static str) -> Vec<(&'static str, String)> {
        vec![(name, Self::wgsl())]
    }
}

impl WgslType for u32 {
    fn wgsl() -> String {
        "u32".into()
    }
}

impl WgslType for i32 {
    fn wgsl() -> String {
        "i32".into()
    }
}

impl WgslType for f32 {
    fn wgsl() -> String {
        "f32".into()
    }
}

impl<T: WgslType, const N: usize> WgslType for [T; N]
where
    [T; N]: bytemuck::Pod,
{
    fn wgsl() -> String {
        format!("array<{}, {N}>", T::wgsl())
    }
}

/// Declares a kernel's parameter block: a `#[repr(C)]` struct deriving `bytemuck::Pod` (the
/// calling crate depends on `bytemuck`), its [`ShaderParams`] implementation, whose
/// `wgsl_struct` is the same fields as a WGSL `struct Params`, and compile-time checks that the
/// fields are 4-byte aligned and the block fits a dispatch.
///
/// ```
/// liandan_backend_wgpu::shader_params! {
///     /// What the kernel reads.
///     pub struct ScaleParams {
///         pub numel: u32,
///         pub offsets: [u32; 2],
///         pub factor: f32,
///     }
/// }
/// use liandan_backend_wgpu::ShaderParams;
/// assert_eq!(ScaleParams::wgsl_struct(), "struct Params {\n  numel: u32,\n  offsets: array<u32, 2>,\n  factor: f32,\n}\n");
/// ```
#[macro_export]
macro_rules! shader_params {
    ($(#[$meta:meta])* $vis:vis struct $name:ident { $($(#[$fmeta:meta])* $fvis:vis $field:ident: $ty:ty),* $(,)? }) => {
        $(#[$meta])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
        $vis struct $name {
            $($(#[$fmeta])* $fvis $field: $ty),*
        }

        // All zeros, for blocks with arrays longer than `Default` covers.
        impl Default for $name {
            fn default() -> Self {
                bytemuck::Zeroable::zeroed()
            }
        }

        impl $crate::ShaderParams for $name {
            fn fields() -> Vec<(&'static str, String)> {
                let mut fields = Vec::new();
                $(fields.extend(<$ty as $crate::params::WgslType>::wgsl_fields(stringify!($field)));)*
                fields
            }
        }

        // A block nested in another lends that one its fields.
        impl $crate::params::WgslType for $name {
            fn wgsl() -> String {
                stringify!($name).into()
            }

            fn wgsl_fields(_: &'static str) -> Vec<(&'static str, String)> {
                <$name as $crate::ShaderParams>::fields()
            }
        }

        const _: () = {
            assert!(std::mem::align_of::<$name>() == 4, "shader parameters are 4-byte fields");
            assert!(std::mem::size_of::<$name>() <= $crate::params::PARAMS_BYTES, "a parameter block fits a dispatch's meta slot");
        };
    };
}

#[cfg(test)]
mod tests {
    use super::ShaderParams;

    crate::shader_params! {
        struct Probe {
            n: u32,
            table: [u32; 3],
            scale: f32,
            shift: i32,
        }
    }

    crate::shader_params! {
        struct Outer {
            head: Probe,
            tail: u32,
        }
    }

    #[test]
    fn the_wgsl_struct_has_the_rust_fields_in_order() {
        assert_eq!(Probe::wgsl_struct(), "struct Params {\n  n: u32,\n  table: array<u32, 3>,\n  scale: f32,\n  shift: i32,\n}\n");
        assert_eq!(std::mem::size_of::<Probe>(), 24);
    }

    /// A nested block's fields stand in its place, where the Rust struct holds them.
    #[test]
    fn a_nested_block_lends_its_fields() {
        assert_eq!(Outer::wgsl_struct(), "struct Params {\n  n: u32,\n  table: array<u32, 3>,\n  scale: f32,\n  shift: i32,\n  tail: u32,\n}\n");
        let outer = Outer { head: Probe { n: 1, table: [2, 3, 4], scale: 5.0, shift: -6 }, tail: 7 };
        assert_eq!(super::words(&outer)[6], 7, "tail after the head's six words");
    }

    /// The WGSL struct's layout, as naga computes it, is the Rust struct's: each field at the
    /// same byte offset, and the same size.
    #[test]
    fn naga_lays_the_struct_out_as_rust_does() {
        let src =
            format!("{}@group(0) @binding(0) var<storage, read> p: Params;\n@compute @workgroup_size(1) fn main() {{ _ = p.n; }}\n", Probe::wgsl_struct());
        let module = naga::front::wgsl::parse_str(&src).unwrap();
        let (_, ty) = module.types.iter().find(|(_, t)| t.name.as_deref() == Some("Params")).unwrap();
        let naga::TypeInner::Struct { members, span } = &ty.inner else { panic!("Params is a struct") };
        let offsets: Vec<u32> = members.iter().map(|m| m.offset).collect();
        assert_eq!(offsets, [0, 4, 16, 20]);
        assert_eq!(*span as usize, std::mem::size_of::<Probe>());
    }
}
