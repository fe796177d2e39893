"""Writes the PyTorch-side checkpoints that crates/nn/tests/checkpoint.rs reads.

    python3 crates/nn/tests/data/make_torch_checkpoint.py

With PyTorch installed it writes them with `safetensors.torch.save_file`, exactly as
`save_file(model.state_dict(), path)` does. Without it, it writes the same tensors with
`safetensors.numpy.save_file`: both call the same Rust serializer of the safetensors package,
so the bytes are the same. The committed files were written by the NumPy path
(safetensors 0.8.0, numpy 2.4.6; PyTorch was not installed on that machine). Checked since:
the PyTorch path (torch 2.11.0, safetensors 0.8.0) writes byte-identical files.

torch_small.safetensors   a tiny state dict in liandan's own dtypes (F32, F16, I64 scalar)
torch_widen.safetensors   the integer dtypes liandan widens to I64 on load, plus U8 and BOOL
"""

import os

HERE = os.path.dirname(os.path.abspath(__file__))
METADATA = {"format": "pt"}


# torch_widen's tensors as (name, values, dtype), built alike by either library.
WIDEN = [
    ("i8", [-128, 0, 127], "int8"),
    ("i16", [-32768, 1, 32767], "int16"),
    ("i32", [[-2147483648, 2], [3, 2147483647]], "int32"),
    ("u16", [0, 65535], "uint16"),
    ("u32", [0, 4294967295], "uint32"),
    ("u8", [0, 255, 7], "uint8"),
    ("mask", [True, False, True], "bool"),
]


def save(save_file, small, array):
    """Writes torch_small (`small`) and torch_widen (`array(values, dtype)` for each row of WIDEN)."""
    widen = {name: array(values, dtype) for name, values, dtype in WIDEN}
    save_file(small, os.path.join(HERE, "torch_small.safetensors"), metadata=METADATA)
    save_file(widen, os.path.join(HERE, "torch_widen.safetensors"), metadata=METADATA)


def with_torch():
    import torch
    from safetensors.torch import save_file

    small = {
        "fc.weight": torch.arange(6).reshape(2, 3).float(),
        "fc.bias": torch.tensor([0.5, -1.0]),
        "bn.num_batches_tracked": torch.tensor(3),
        "emb.weight": torch.arange(4, dtype=torch.float16).reshape(2, 2),
    }
    save(save_file, small, lambda values, dtype: torch.tensor(values, dtype=getattr(torch, dtype)))
    return "torch " + torch.__version__


def with_numpy():
    import numpy as np
    from safetensors.numpy import save_file

    small = {
        "fc.weight": np.arange(6, dtype=np.float32).reshape(2, 3),
        "fc.bias": np.array([0.5, -1.0], dtype=np.float32),
        "bn.num_batches_tracked": np.array(3, dtype=np.int64),  # 0-d, as torch.tensor(3)
        "emb.weight": np.arange(4, dtype=np.float16).reshape(2, 2),
    }
    save(save_file, small, lambda values, dtype: np.array(values, dtype=dtype))
    return "numpy " + np.__version__


if __name__ == "__main__":
    try:
        who = with_torch()
    except ImportError:
        who = with_numpy()
    import safetensors

    print(f"wrote torch_small.safetensors and torch_widen.safetensors with {who}, safetensors {safetensors.__version__}")
