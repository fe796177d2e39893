#!/usr/bin/env python3
"""Checks liandan's ONNX exports in ONNX Runtime and records the fixtures of tests/onnx.rs.

Runs the ignored test `write_models_for_onnx_runtime`, which exports every case of
crates/nn/tests/onnx.rs (the seven zoo models, a model of our own in f32, at opset 20 and in
f16, and a fixed-batch export) with its inputs and liandan's outputs. Each model is checked with
`onnx.checker` (full check, shape inference included) and run in ONNX Runtime on the CPU at the
case's batch sizes (1 and 7: the dynamic batch). ONNX Runtime's outputs must equal liandan's
within the case's tolerance; they are written, with the SHA-256 of each graph, to
ort_outputs.safetensors beside this script, which `cargo test` then checks against without
Python.

    python3 -m venv /tmp/onnx && /tmp/onnx/bin/pip install onnx onnxruntime safetensors numpy
    /tmp/onnx/bin/python crates/nn/tests/data/onnx/check_onnx.py
"""

import hashlib
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", "..", "..", ".."))


def export_cases(out_dir):
    env = dict(os.environ, LIANDAN_ONNX_DIR=out_dir)
    cmd = ["cargo", "test", "-p", "liandan-nn", "--test", "onnx", "--", "--ignored", "--exact", "write_models_for_onnx_runtime"]
    subprocess.run(cmd, cwd=ROOT, env=env, check=True)


def check(out_dir, name):
    path = os.path.join(out_dir, name + ".onnx")
    onnx.checker.check_model(onnx.load(path), full_check=True)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    inputs_path = os.path.join(out_dir, name + ".inputs.safetensors")
    inputs = load_file(inputs_path)
    with safe_open(inputs_path, "np") as f:
        meta = f.metadata()
    tol = float(meta["tolerance"])
    ours = load_file(os.path.join(out_dir, name + ".liandan.safetensors"))
    outputs = {}
    for batch in [int(b) for b in meta["batches"].split(",")]:
        feed = {i.name: inputs[i.name][:batch] for i in session.get_inputs()}
        for meta_out, value in zip(session.get_outputs(), session.run(None, feed)):
            key = f"{name}/{meta_out.name}/b{batch}"
            mine = ours[key].astype(np.float64)
            theirs = value.astype(np.float64)
            worst = float(np.max(np.abs(mine - theirs)))
            ok = mine.shape == theirs.shape and bool(np.all(np.abs(mine - theirs) <= tol + tol * np.abs(theirs)))
            print(f"{key}: {list(value.shape)} {value.dtype}, largest difference {worst:.2e} {'ok' if ok else 'OVER ' + str(tol)}")
            if not ok:
                sys.exit(f"{key}: ONNX Runtime and liandan disagree")
            outputs[key] = np.ascontiguousarray(value)
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    return outputs, digest


def main():
    with tempfile.TemporaryDirectory() as out_dir:
        export_cases(out_dir)
        names = sorted(f[: -len(".onnx")] for f in os.listdir(out_dir) if f.endswith(".onnx"))
        tensors, meta = {}, {"onnx": onnx.__version__, "onnxruntime": ort.__version__}
        for name in names:
            outputs, digest = check(out_dir, name)
            tensors.update(outputs)
            meta[name] = digest
        target = os.path.join(HERE, "ort_outputs.safetensors")
        save_file(tensors, target, metadata=meta)
        print(f"wrote {target}: {len(names)} models, {len(tensors)} outputs")


if __name__ == "__main__":
    main()
