"""The PyTorch side of `cargo xtask bench`. With `--json --model NAME` (what `cargo xtask bench
--torch` runs, one fresh Python per model): one zoo model's training step, timed as ours is
(warm-up, then steps each synchronized, then groups of steps with one synchronize each),
printed as one JSON line; with `--compile MODE` as well (what `--torch-compile` adds), the same
step with its forward and loss under `torch.compile(mode=MODE)`, and the first step's time (the
compile) in the line. Where torch.compile cannot run (no C++ compiler for the CPU, no Triton,
an unsupported Python), it says why on stderr and exits with status 3. With `--overhead --model
NAME` (what `cargo xtask bench-fusion --torch` runs): forward+backward, and forward+backward+step with SGD and with Adam, as one JSON line of
median ms. With `--matmul` (what `cargo xtask bench --torch` runs per GPU): f16 and f32 square
products and the zoo's f32 products (TF32 off, as ours are exact) as JSON micro-benchmark rows. Without any: the older kernel and zoo rows as a Markdown table."""
import argparse
import contextlib
import json
import statistics
import sys
import time

import torch


def synchronizer(device):
    """What waits for `device`'s queued work: CUDA's and MPS's synchronize (their ops return
    before they run), nothing on the CPU."""
    return {"cuda": torch.cuda.synchronize, "mps": lambda: torch.mps.synchronize()}.get(device.type, lambda: None)


def timed(device, warmup, reps, fn):
    sync = synchronizer(device)
    warm_since = None
    for _ in range(warmup):
        fn()
        if warm_since is None:
            sync()
            warm_since = time.perf_counter()
    sync()
    # As ours (micro.rs `time`): on a GPU the warm-up goes on until a second after the first run.
    while device.type != "cpu" and warm_since is not None and time.perf_counter() - warm_since < 1.0:
        fn()
        sync()
    samples = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        sync()
        samples.append(time.perf_counter() - t)
    return statistics.median(samples)


def row(side, bench, size, seconds, throughput=""):
    print(f"| torch {side} | {bench} | {size} | {seconds * 1e3:.3f} | {throughput} |")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", action="store_true")
    p.add_argument("--overhead", action="store_true")
    p.add_argument("--matmul", action="store_true")
    p.add_argument("--profile", action="store_true")
    p.add_argument("--no-tf32", action="store_true")
    p.add_argument("--shapes", action="store_true")
    for name in ["model", "precision", "compile"]:
        p.add_argument(f"--{name}")
    for name in ["batch", "warmup", "steps", "sync-every", "groups", "samples"]:
        p.add_argument(f"--{name}", type=int)
    a = p.parse_args()
    if a.no_tf32:
        # PyTorch runs f32 convolutions on TF32 tensor cores by default; this takes that away.
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    if a.profile:
        profile_model(a)
        return
    if a.json:
        print(json.dumps(one_model(a)))
        return
    if a.overhead:
        print(json.dumps(step_overhead(a)))
        return
    if a.matmul:
        print(json.dumps(matmul_rows(a)))
        return
    dev = torch.device(a.device)
    side = f"{torch.__version__} {dev.type}" + (f" {torch.cuda.get_device_name()}" if dev.type == "cuda" else "")
    reps = 3 if a.quick else 10
    g = torch.Generator(device="cpu").manual_seed(0)
    for n in ([256, 512] if a.quick else [1024, 2048, 4096]):
        x = torch.randn(n, n, generator=g).to(dev)
        y = torch.randn(n, n, generator=g).to(dev)
        s = timed(dev, 2, reps, lambda: x @ y)
        row(side, "matmul f32", f"{n}x{n}x{n}", s, f"{2 * n**3 / s / 1e9:.0f} GFLOP/s")
    n = 1 << 20 if a.quick else 1 << 24
    x = torch.randn(n, generator=g).to(dev)
    y = torch.randn(n, generator=g).to(dev)
    s = timed(dev, 2, reps, lambda: x + y)
    row(side, "add f32 (read 2, write 1)", str(n), s, f"{3 * 4 * n / s / 1e9:.1f} GB/s")
    if dev.type != "cpu":
        x16, y16 = x.half(), y.half()
        s = timed(dev, 1, reps, lambda: [x16 + y16 for _ in range(20)]) / 20
        row(side, "add f16 (read 2, write 1), 20 between waits", str(n), s, f"{3 * 2 * n / s / 1e9:.1f} GB/s")
        s = timed(dev, 1, reps, lambda: [y.half() for _ in range(20)]) / 20
        row(side, "cast f32 -> f16 (read 4, write 2 bytes), 20 between waits", str(n), s, f"{6 * n / s / 1e9:.1f} GB/s")
        s = timed(dev, 1, reps, lambda: [x16.float() for _ in range(20)]) / 20
        row(side, "cast f16 -> f32 (read 2, write 4 bytes), 20 between waits", str(n), s, f"{6 * n / s / 1e9:.1f} GB/s")
    # The reductions of xtask's micro rows, 20 between waits (bytes read only).
    big = 1 << 22 if a.quick else 1 << 26
    c = torch.randn(big, generator=g).to(dev)
    rows_, cols = (1 << 10, 1 << 12) if a.quick else (1 << 12, 1 << 14)
    m = c[: rows_ * cols].reshape(rows_, cols)
    s = timed(dev, 1, reps, lambda: [c * 1.0 for _ in range(20)]) / 20
    row(side, "copy (x * 1), 20 between waits", str(big), s, f"{2 * 4 * big / s / 1e9:.1f} GB/s")
    s = timed(dev, 1, reps, lambda: [c.sum() for _ in range(20)]) / 20
    row(side, "sum f32 (read 1), 20 between waits", str(big), s, f"{4 * big / s / 1e9:.1f} GB/s")
    for dim, what in [(1, "sum f32 along rows (read 1), 20 between waits"), (0, "sum f32 down columns (read 1), 20 between waits")]:
        s = timed(dev, 1, reps, lambda: [m.sum(dim) for _ in range(20)]) / 20
        row(side, what, f"{rows_}x{cols}", s, f"{4 * rows_ * cols / s / 1e9:.1f} GB/s")
    chain = 1000
    z = torch.zeros(1, device=dev)

    def tiny_adds():
        w = z
        for _ in range(chain):
            w = w + 1.0

    s = timed(dev, 2, reps, tiny_adds)
    row(side, "dependent tiny adds", f"{chain} ops", s, f"{s * 1e6 / chain:.2f} us/op")
    s = timed(dev, 2, 10 * reps, lambda: (z + 1.0).item())
    row(side, "add + read back one value", "1", s, f"{s * 1e6:.1f} us")
    s = timed(dev, 2, 10 * reps, synchronizer(dev))
    row(side, "synchronize, nothing pending", "-", s, f"{s * 1e6:.1f} us")
    batch = 256 if a.quick else 1024
    model = torch.nn.Sequential(torch.nn.Linear(1024, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    xb = torch.randn(batch, 1024, generator=g).to(dev)
    yb = (torch.arange(batch) % 10).to(dev)

    def step():
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(xb), yb).backward()
        opt.step()

    s = timed(dev, 3, reps, step)
    row(side, "mlp train step (zoo shapes)", f"batch {batch}", s)
    if dev.type != "cpu":
        zoo_passes(dev, side, a.quick, reps)
        zoo_passes(dev, side, a.quick, reps, train=True)


# docs/MODEL_ZOO.md's optimizer of each model, torch.optim's default (foreach) implementation.
OPTIMIZERS = {
    "mlp": lambda p: torch.optim.SGD(p, lr=0.01),
    "mnist_cnn": lambda p: torch.optim.Adadelta(p, lr=1.0),
    "seed003_cnn": lambda p: torch.optim.Adam(p, lr=0.01),
    "resnet18": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=5e-4),
    "vit": lambda p: torch.optim.AdamW(p, lr=1e-3),
    "lstm": lambda p: torch.optim.Adam(p, lr=1e-3),
    "vae": lambda p: torch.optim.Adam(p, lr=1e-3),
}


def zoo_passes(dev, side, quick, reps, train=False):
    """Forward and backward of every zoo model at its reference batch, as `cargo xtask bench`
    times them on GPUs; the models are those of the parity script. With `train`, the full
    training step: the same plus the step of the model's optimizer ("zoo <name> train step")."""
    import os
    import torch.nn.functional as F
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crates", "nn", "tests", "data", "parity"))
    from make_parity import build
    shapes = {"mlp": [1024, 1024], "mnist_cnn": [64, 1, 28, 28], "seed003_cnn": [128, 1, 28, 28], "resnet18": [128, 3, 32, 32],
              "vit": [128, 3, 32, 32], "lstm": [64, 28, 28], "vae": [128, 784]}
    for name, shape in shapes.items():
        if quick:
            shape = [min(shape[0], 16)] + shape[1:]
        torch.manual_seed(0)
        model = build(name).to(dev).train()
        x = torch.rand(shape, device=dev)
        y = (torch.arange(shape[0]) % 10).to(dev)
        opt = OPTIMIZERS[name](model.parameters())

        def fwd_bwd():
            model.zero_grad(set_to_none=True)
            if name == "vae":
                r, mu, lv = model(x, torch.randn(shape[0], 20, device=dev))
                loss = F.binary_cross_entropy(r, x.view(-1, 784), reduction="sum") - 0.5 * torch.sum(1 + lv - mu.pow(2) - lv.exp())
            else:
                out = model(x)
                loss = F.nll_loss(out, y) if name == "mnist_cnn" else F.cross_entropy(out, y)
            loss.backward()
            if train:
                opt.step()

        s = timed(dev, 3, reps, fwd_bwd)
        what = "train step" if train else "forward+backward"
        row(side, f"zoo {name} {what}", f"batch {shape[0]}", s, f"{shape[0] / s:.0f} samples/s")


def step_overhead(a):
    """Median ms of forward+backward, of forward+backward+step with the model's optimizer
    (docs/MODEL_ZOO.md's, default foreach implementation), and of the step alone (the gradients of one
    backward stepped again and again), each synchronized, and the step alone pipelined (20 steps,
    one synchronize), as `cargo xtask bench-fusion` times ours."""
    import os
    import torch.nn.functional as F
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crates", "nn", "tests", "data", "parity"))
    from make_parity import build
    dev = torch_device(a.device)
    shapes = {"mlp": [1024], "mnist_cnn": [1, 28, 28], "seed003_cnn": [1, 28, 28], "resnet18": [3, 32, 32], "vit": [3, 32, 32], "lstm": [28, 28], "vae": [784]}
    torch.manual_seed(0)
    model = build(a.model).to(dev).train()
    x = torch.rand([a.batch] + shapes[a.model], device=dev)
    y = (torch.arange(a.batch) % 10).to(dev)

    def fwd_bwd():
        model.zero_grad(set_to_none=True)
        if a.model == "vae":
            r, mu, lv = model(x, torch.randn(a.batch, 20, device=dev))
            loss = F.binary_cross_entropy(r, x.view(-1, 784), reduction="sum") - 0.5 * torch.sum(1 + lv - mu.pow(2) - lv.exp())
        else:
            out = model(x)
            loss = F.nll_loss(out, y) if a.model == "mnist_cnn" else F.cross_entropy(out, y)
        loss.backward()

    reps = a.steps or 20
    result = {"fwd_bwd_ms": timed(dev, 2, reps, fwd_bwd) * 1e3}
    opt = OPTIMIZERS[a.model](model.parameters())

    def step():
        fwd_bwd()
        opt.step()

    result["step_ms"] = timed(dev, 2, reps, step) * 1e3
    result["step_alone_ms"] = timed(dev, 2, reps, opt.step) * 1e3

    # The step alone as a training loop sees it: PIPELINED steps, one synchronize at the end.
    def steps():
        for _ in range(PIPELINED):
            opt.step()

    result["step_alone_pipelined_ms"] = timed(dev, 1, max(reps // 4, 3), steps) * 1e3 / PIPELINED
    return result


# Steps a pipelined "step alone" runs between synchronizes (xtask/src/fusion.rs uses the same).
PIPELINED = 20


def torch_device(spec):
    """Ours `cpu` or `gpu:N` as PyTorch's: the CPU, CUDA device N, or MPS on a Mac."""
    if spec == "cpu":
        return torch.device("cpu")
    n = int(spec.split(":")[1]) if ":" in spec else 0
    if torch.cuda.is_available() and n < torch.cuda.device_count():
        return torch.device("cuda", n)
    if n == 0 and torch.backends.mps.is_available():
        return torch.device("mps")
    raise SystemExit(f"this PyTorch has no GPU {n} (CUDA or MPS)")


# The zoo's own f32 products (`ZOO_PRODUCTS` in xtask/src/bench/micro.rs): name, [batch, m, k,
# n], and which operand is read transposed.
ZOO_PRODUCTS = [
    ("matmul f32 mnist_cnn fc1", [1, 64, 9216, 128], "rhs"),
    ("matmul f32 mnist_cnn fc1 dW", [1, 128, 64, 9216], "lhs"),
    ("matmul f32 mlp fc1", [1, 1024, 1024, 512], "rhs"),
    ("matmul f32 lstm step", [1, 64, 256, 1024], "rhs"),
    ("matmul f32 lstm dW", [1, 1024, 64, 256], "lhs"),
    ("matmul f32 vit attention QK^T", [384, 65, 64, 65], "rhs"),
    ("matmul f32 vit attention AV", [384, 65, 65, 64], None),
    ("matmul f32 vit mlp fc1", [1, 8320, 192, 768], "rhs"),
    ("matmul f32 vit mlp fc2", [1, 8320, 768, 192], "rhs"),
    ("matmul f32 vit mlp fc1 dW", [1, 768, 8320, 192], "lhs"),
]
# Products timed in a row between two waits, as `micro.rs` times the zoo's.
ROW = 20


def matmul_rows(a):
    """The products of `cargo xtask bench`'s matmul rows, timed as ours are, as the rows of its
    micro-benchmarks (JSON): f16 squares (cuBLAS on tensor cores on CUDA), f32 squares and the
    zoo's f32 products with TF32 off (PyTorch's default for matmul; ours are exact f32)."""
    dev = torch_device(a.device)
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
    reps = 3 if a.quick else 10
    side = f"PyTorch {torch.__version__} {dev.type}"
    rows = []

    def add(bench, size, s, flops):
        rows.append({"bench": f"{bench} ({side})", "size": size, "median_ms": s * 1e3, "rate": flops / s / 1e9, "unit": "GFLOP/s"})

    sizes, transposed = ([256, 512], 512) if a.quick else ([1024, 2048, 4096, 8192], 4096)
    # The square products, then one with a transposed rhs (a Linear layer's `x W^T`).
    for n, rhs_t in [(n, False) for n in sizes] + [(transposed, True)]:
        x = torch.randn(n, n, device=dev, dtype=torch.float16)
        y = torch.randn(n, n, device=dev, dtype=torch.float16)
        y = y.t() if rhs_t else y
        add(f"matmul f16{' rhs^T' if rhs_t else ''}", f"{n}x{n}x{n}", timed(dev, 2, reps, lambda: x @ y), 2 * n**3)
    for n in [128, 256, 512] if a.quick else [256, 1024, 2048, 4096]:
        x = torch.randn(n, n, device=dev)
        y = torch.randn(n, n, device=dev)
        add("matmul f32", f"{n}x{n}x{n}", timed(dev, 2, reps, lambda: x @ y), 2 * n**3)
    for bench, (batch, m, k, n), t in ZOO_PRODUCTS:
        x = torch.randn(batch, k, m, device=dev).transpose(1, 2) if t == "lhs" else torch.randn(batch, m, k, device=dev)
        y = torch.randn(batch, n, k, device=dev).transpose(1, 2) if t == "rhs" else torch.randn(batch, k, n, device=dev)
        if batch == 1:
            x, y = x[0], y[0]
        s = timed(dev, 1, reps, lambda: [x @ y for _ in range(ROW)]) / ROW
        note = f" {t}^T" if t else ""
        size = f"{f'{batch}x' if batch > 1 else ''}[{m},{k}]x[{k},{n}]{note}"
        add(f"{bench}, {ROW} between waits", size, s, 2 * batch * m * k * n)
    return {"peak_copy_gbs": 0.0, "rows": rows}


def model_step(a):
    """The device, its synchronize, and one training step of zoo model `a.model` (its optimizer, `a.precision`);
    with `a.compile`, its forward and loss (the backward that AOTAutograd derives from them
    too) run under `torch.compile(mode=a.compile)`, the optimizer's step eager as above."""
    import os
    import torch.nn.functional as F
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crates", "nn", "tests", "data", "parity"))
    from make_parity import build
    dev = torch_device(a.device)
    sync = synchronizer(dev)
    low = {"f32": None, "f16": torch.float16, "bf16": torch.bfloat16}[a.precision or "f32"]
    shapes = {"mlp": [1024], "mnist_cnn": [1, 28, 28], "seed003_cnn": [1, 28, 28], "resnet18": [3, 32, 32], "vit": [3, 32, 32], "lstm": [28, 28], "vae": [784]}
    torch.manual_seed(0)
    model = build(a.model).to(dev).train()
    opt = OPTIMIZERS[a.model](model.parameters())
    x = torch.rand([a.batch] + shapes[a.model], device=dev)
    y = (torch.arange(a.batch) % 10).to(dev)
    # f16 needs a loss scaler, as ours will; bf16 has f32's range and needs none.
    scaler = torch.amp.GradScaler(dev.type) if low == torch.float16 else None

    def forward_loss():
        ctx = torch.autocast(dev.type, dtype=low) if low is not None else contextlib.nullcontext()
        with ctx:
            if a.model == "vae":
                r, mu, lv = model(x, torch.randn(a.batch, 20, device=dev))
                return F.binary_cross_entropy(r.float(), x.view(-1, 784), reduction="sum") - 0.5 * torch.sum(1 + lv - mu.pow(2) - lv.exp())
            out = model(x)
            return F.nll_loss(out, y) if a.model == "mnist_cnn" else F.cross_entropy(out, y)

    # Under reduce-overhead the compiled graphs replay as CUDA graphs, whose outputs the next
    # replay overwrites: marking each step's start tells PyTorch the last step's are dead.
    mark = getattr(getattr(torch, "compiler", None), "cudagraph_mark_step_begin", None) if a.compile else None
    if a.compile:
        forward_loss = torch.compile(forward_loss, mode=a.compile)

    def step():
        if mark is not None:
            mark()
        opt.zero_grad(set_to_none=True)
        loss = forward_loss()
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()

    return dev, sync, step


# The least time the warm-up steps after the first take (as WARMUP_SECS in
# xtask/src/bench/step.rs: an idle GPU speeds its clock up only after some time under load; the
# first step sets up the kernels).
WARMUP_SECS = 1.0


# Warm-up steps a compiled step gets at least: reduce-overhead runs its graphs once plainly,
# then records them as CUDA graphs, and replays them only from the third step on.
COMPILED_WARMUP = 3


def one_model(a):
    dev, sync, step = model_step(a)
    first = time.perf_counter()
    if a.compile:
        try:
            step()
            sync()
        except Exception as e:  # torch.compile fails in many ways where it cannot run
            why = next((line for line in str(e).splitlines() if line.strip()), "")
            print(f"torch.compile(mode={a.compile}) cannot run on {dev.type} here: {type(e).__name__}: {why}", file=sys.stderr)
            sys.exit(3)
    else:
        step()
        sync()
    start, done = time.perf_counter(), 1
    first_step_s = start - first
    warmup = max(a.warmup, COMPILED_WARMUP) if a.compile else a.warmup
    while done < warmup or time.perf_counter() - start < WARMUP_SECS:
        step()
        sync()
        done += 1
    synced = []
    for _ in range(a.steps):
        t = time.perf_counter()
        step()
        sync()
        synced.append(time.perf_counter() - t)
    # One untimed group recorded ahead, as xtask/src/bench/step.rs does before its groups.
    for _ in range(a.sync_every):
        step()
    sync()
    pipelined = []
    for _ in range(a.groups):
        t = time.perf_counter()
        for _ in range(a.sync_every):
            step()
        sync()
        pipelined.append((time.perf_counter() - t) / a.sync_every)

    def stats(v):
        v = sorted(v)
        return {"median_ms": statistics.median(v) * 1e3, "min_ms": v[0] * 1e3, "max_ms": v[-1] * 1e3}

    peak = torch.cuda.max_memory_allocated(dev) if dev.type == "cuda" else None
    return {"synced": stats(synced), "pipelined": stats(pipelined), "peak_bytes": peak, "first_step_s": first_step_s}


def profile_model(a):
    """`torch.profiler` over `a.steps` training steps of `a.model` after `a.warmup`: the kernels
    by their self device time, to set beside `liandan profile` (with `--shapes`, grouped by op and
    input shapes, with FLOPs, beside `liandan profile --shapes`)."""
    from torch.profiler import ProfilerActivity, profile
    dev, sync, step = model_step(a)
    for _ in range(a.warmup or 3):
        step()
    sync()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    with profile(activities=activities, record_shapes=a.shapes, with_flops=a.shapes) as prof:
        for _ in range(a.steps or 5):
            step()
        sync()
    key = "self_cuda_time_total" if dev.type == "cuda" else "self_cpu_time_total"
    print(f"torch {torch.__version__}, {a.model} batch {a.batch} {a.precision or 'f32'}, {a.steps or 5} steps, TF32 convolutions {torch.backends.cudnn.allow_tf32}")
    averages = prof.key_averages(group_by_input_shape=a.shapes)
    print(averages.table(sort_by=key, row_limit=40 if a.shapes else 30, max_name_column_width=60, max_shapes_column_width=90))


if __name__ == "__main__":
    main()
