"""PyTorch parity files for liandan's model zoo (crates/nn/tests/parity.rs reads them).

For each zoo model this script builds PyTorch's model (the architectures of
docs/MODEL_ZOO.md, under the same attribute names so the state-dict keys agree),
gives it fixed weights, runs one forward and backward pass on a fixed batch and writes
`<model>.safetensors` here with:

  init.<key>      f64 [seed, low, high]: how the tensor <key> of the state dict was filled
  head.<key>      f32 its first 64 values as PyTorch holds them (checked bit for bit)
  digest.<key>    f64 [sum, sum of squares] of all its values
  input, target   the batch (target: I64 class labels; the VAE has `noise` instead)
  output          the model's output (the VAE's reconstruction; also `mu`, `logvar`)
  loss            f64 [1], the reference's training loss on the batch
  grad.<name>     every parameter's gradient: whole when it has at most 8192 elements,
                  otherwise the 4096 elements at flat indices (k * numel) // 4096
  gradstat.<name> f64 [sum of squares, sum(grad * r)] over the whole gradient, where r is the
                  portable uniform(-1, 1) tensor of seed 99 and the gradient's shape
  after.<key>     buffers after the pass (BatchNorm's running statistics in training mode)

The weights are not stored: they come from a portable generator, the counter-based lowbias32
generator of liandan_tensor::rng (reimplemented below in numpy), so `Tensor::rand(shape, low,
high, seed)` in liandan gives the same bits as `portable_uniform` here and the files stay small.
`--weights DIR` also writes each model's state dict as PyTorch's own safetensors checkpoint;
`lstm.weights.safetensors` is kept next to this script for the checkpoint round-trip test.
`--check-liandan DIR` loads checkpoints liandan wrote (parity.rs writes them when
LIANDAN_PARITY_OUT is set) with `load_state_dict(strict=True)` and checks PyTorch gets the
stored output from them.

Usage: python3 make_parity.py [--models a,b] [--weights DIR] [--check-liandan DIR]
Needs torch, numpy and safetensors; the tests don't.
"""
import argparse
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = ["mlp", "mnist_cnn", "seed003_cnn", "resnet18", "vit", "lstm", "vae"]
# Parity batches are small so that the tests run in seconds on two CPU cores and on lavapipe.
BATCH = {"mlp": 16, "mnist_cnn": 8, "seed003_cnn": 8, "resnet18": 4, "vit": 4, "lstm": 8, "vae": 16}
# Dropout makes training-mode passes random; those models are compared in eval mode.
EVAL = {"mnist_cnn", "seed003_cnn"}
FULL_GRAD_MAX = 8192
GRAD_SAMPLES = 4096
PROJECTION_SEED = 99


# --- the portable generator (liandan_tensor::rng) ---------------------------------------------

def _hash32(x):
    x = x.astype(np.uint32)
    x ^= x >> np.uint32(16)
    x *= np.uint32(0x7FEB352D)
    x ^= x >> np.uint32(15)
    x *= np.uint32(0x846CA68B)
    x ^= x >> np.uint32(16)
    return x


def _draw(seed, n):
    with np.errstate(over="ignore"):
        lo, hi = np.uint32(seed & 0xFFFFFFFF), np.uint32(seed >> 32)
        key = _hash32(np.array([lo ^ _hash32(np.array([hi ^ np.uint32(0x9E3779B9)]))[0]]))[0]
        c = np.arange(n, dtype=np.uint32)
        rot = (c << np.uint32(16)) | (c >> np.uint32(16))
        return _hash32(c ^ _hash32((key + rot) ^ np.uint32(0x85EBCA6B)))


def portable_uniform(shape, low, high, seed):
    """Element i = low + (high - low) * u_i in f32, u_i = (draw(seed, i) >> 8) / 2^24."""
    n = int(np.prod(shape)) if len(shape) else 1
    u = (_draw(seed, n) >> np.uint32(8)).astype(np.float32) * np.float32(1.0 / 16777216.0)
    v = np.float32(low) + np.float32(high - low) * u
    return torch.from_numpy(v.astype(np.float32).reshape(shape))


# --- the models (torch_zoo.py's, attribute for attribute) -------------------------------------

class MLP(nn.Module):
    def __init__(s):
        super().__init__(); s.fc1 = nn.Linear(1024, 512); s.fc2 = nn.Linear(512, 256); s.fc3 = nn.Linear(256, 10)

    def forward(s, x):
        return s.fc3(F.relu(s.fc2(F.relu(s.fc1(x)))))


class MnistNet(nn.Module):
    def __init__(s):
        super().__init__()
        s.conv1 = nn.Conv2d(1, 32, 3, 1); s.conv2 = nn.Conv2d(32, 64, 3, 1)
        s.dropout1 = nn.Dropout(0.25); s.dropout2 = nn.Dropout(0.5)
        s.fc1 = nn.Linear(9216, 128); s.fc2 = nn.Linear(128, 10)

    def forward(s, x):
        x = F.relu(s.conv1(x)); x = F.relu(s.conv2(x)); x = F.max_pool2d(x, 2); x = s.dropout1(x)
        x = torch.flatten(x, 1); x = F.relu(s.fc1(x)); x = s.dropout2(x)
        return F.log_softmax(s.fc2(x), dim=1)


def seed003_cnn():
    return nn.Sequential(nn.Conv2d(1, 64, 3), nn.MaxPool2d(2, 2), nn.Conv2d(64, 512, 3), nn.MaxPool2d(2, 2),
                         nn.Dropout2d(0.1), nn.AdaptiveMaxPool2d((1, 1)), nn.Flatten(), nn.Linear(512, 1024), nn.ReLU(),
                         nn.Linear(1024, 10))


class BasicBlock(nn.Module):
    def __init__(s, cin, cout, stride):
        super().__init__()
        s.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False); s.b1 = nn.BatchNorm2d(cout)
        s.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False); s.b2 = nn.BatchNorm2d(cout)
        s.sc = nn.Sequential()
        if stride != 1 or cin != cout:
            s.sc = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(s, x):
        return F.relu(s.b2(s.c2(F.relu(s.b1(s.c1(x))))) + s.sc(x))


class ResNet18(nn.Module):
    def __init__(s, nc=10):
        super().__init__()
        s.stem = nn.Sequential(nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU())
        layers, cin = [], 64
        for cout, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
            layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]; cin = cout
        s.layers = nn.Sequential(*layers); s.fc = nn.Linear(512, nc)

    def forward(s, x):
        return s.fc(torch.flatten(F.adaptive_avg_pool2d(s.layers(s.stem(x)), 1), 1))


class ViT(nn.Module):
    def __init__(s, dim=192, depth=6, heads=3, mlp=768, nc=10):
        super().__init__()
        s.patch = nn.Conv2d(3, dim, 4, 4); s.cls = nn.Parameter(torch.zeros(1, 1, dim)); s.pos = nn.Parameter(torch.zeros(1, 65, dim))
        layer = nn.TransformerEncoderLayer(dim, heads, mlp, dropout=0.0, activation="gelu", batch_first=True, norm_first=True)
        s.enc = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False); s.norm = nn.LayerNorm(dim); s.head = nn.Linear(dim, nc)

    def forward(s, x):
        x = s.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([s.cls.expand(x.shape[0], -1, -1), x], 1) + s.pos
        return s.head(s.norm(s.enc(x))[:, 0])


class LSTMNet(nn.Module):
    def __init__(s):
        super().__init__(); s.lstm = nn.LSTM(28, 256, batch_first=True); s.fc = nn.Linear(256, 10)

    def forward(s, x):
        out, _ = s.lstm(x.view(x.shape[0], 28, 28)); return s.fc(out[:, -1])


class VAE(nn.Module):
    def __init__(s):
        super().__init__(); s.fc1 = nn.Linear(784, 400); s.fc21 = nn.Linear(400, 20); s.fc22 = nn.Linear(400, 20); s.fc3 = nn.Linear(20, 400); s.fc4 = nn.Linear(400, 784)

    def forward(s, x, noise):
        h = F.relu(s.fc1(x.view(-1, 784))); mu, logvar = s.fc21(h), s.fc22(h)
        z = mu + noise * torch.exp(0.5 * logvar)
        return torch.sigmoid(s.fc4(F.relu(s.fc3(z)))), mu, logvar


def build(name):
    return {"mlp": MLP, "mnist_cnn": MnistNet, "seed003_cnn": seed003_cnn, "resnet18": ResNet18, "vit": ViT,
            "lstm": LSTMNet, "vae": VAE}[name]()


INPUT_SHAPE = {"mlp": [1024], "mnist_cnn": [1, 28, 28], "seed003_cnn": [1, 28, 28], "resnet18": [3, 32, 32],
               "vit": [3, 32, 32], "lstm": [28, 28], "vae": [784]}


# --- fixed weights, batch, pass ----------------------------------------------------------------

def init_range(key, t):
    """The uniform range each state-dict tensor is filled from."""
    leaf = key.rsplit(".", 1)[-1]
    if leaf == "running_var":
        return 0.5, 1.5
    if leaf == "running_mean" or leaf in ("cls", "pos"):
        return -0.2, 0.2
    if t.dim() == 1:
        # Norm weights around 1, biases small.
        return (0.5, 1.5) if leaf == "weight" else (-0.1, 0.1)
    bound = 1.0 / float(np.sqrt(t.numel() // t.shape[0]))
    return -bound, bound


def fix_weights(model, out):
    for i, (key, t) in enumerate(model.state_dict().items()):
        if not t.is_floating_point():
            continue  # num_batches_tracked stays 0
        seed = 1000 + i
        low, high = init_range(key, t)
        with torch.no_grad():
            t.copy_(portable_uniform(list(t.shape), low, high, seed))
        out[f"init.{key}"] = torch.tensor([seed, low, high], dtype=torch.float64)
        flat = t.detach().reshape(-1)
        out[f"head.{key}"] = flat[:64].clone()
        out[f"digest.{key}"] = torch.tensor([flat.double().sum().item(), flat.double().square().sum().item()], dtype=torch.float64)


def make_batch(name, out):
    g = torch.Generator().manual_seed(7)
    shape = [BATCH[name]] + INPUT_SHAPE[name]
    if name == "vae":
        # MNIST-like: mostly exact 0 and 1 pixels (BCE's hard case), some in between.
        u = torch.rand(shape, generator=g)
        x = torch.where(u < 0.5, torch.zeros_like(u), torch.where(u > 0.8, torch.ones_like(u), u))
        out["noise"] = torch.randn(BATCH[name], 20, generator=g)
        return x, None
    x = torch.rand(shape, generator=g) * 2 - 1
    y = torch.randint(0, 10, (BATCH[name],), generator=g)
    out["target"] = y
    return x, y


def run(name, model, x, y, noise):
    if name == "vae":
        r, mu, lv = model(x, noise)
        bce = F.binary_cross_entropy(r, x.view(-1, 784), reduction="sum")
        return (r, mu, lv), bce - 0.5 * torch.sum(1 + lv - mu.pow(2) - lv.exp())
    o = model(x)
    return (o,), (F.nll_loss(o, y) if name == "mnist_cnn" else F.cross_entropy(o, y))


def grad_record(pname, g, out):
    flat = g.detach().reshape(-1)
    n = flat.numel()
    if n <= FULL_GRAD_MAX:
        out[f"grad.{pname}"] = g.detach().clone()
    else:
        idx = (torch.arange(GRAD_SAMPLES, dtype=torch.int64) * n) // GRAD_SAMPLES
        out[f"grad.{pname}"] = flat[idx].clone()
    r = portable_uniform(list(g.shape), -1.0, 1.0, PROJECTION_SEED).reshape(-1)
    out[f"gradstat.{pname}"] = torch.tensor([flat.double().square().sum().item(), (flat.double() * r.double()).sum().item()], dtype=torch.float64)


def generate(name, weights_dir):
    from safetensors.torch import save_file  # imported here so that `build` works without it
    torch.manual_seed(0)
    out = {}
    model = build(name)
    fix_weights(model, out)
    if weights_dir:
        os.makedirs(weights_dir, exist_ok=True)
        save_file({k: v.contiguous() for k, v in model.state_dict().items()}, os.path.join(weights_dir, f"{name}.weights.safetensors"))
    x, y = make_batch(name, out)
    out["input"] = x
    model.eval() if name in EVAL else model.train()
    outputs, loss = run(name, model, x, y, out.get("noise"))
    loss.backward()
    for key, o in zip(["output", "mu", "logvar"], outputs):
        out[key] = o.detach().clone()
    out["loss"] = torch.tensor([loss.item()], dtype=torch.float64)
    for pname, p in model.named_parameters():
        grad_record(pname, p.grad, out)
    for key, b in model.named_buffers():
        if name not in EVAL:
            out[f"after.{key}"] = b.detach().clone()
    path = os.path.join(HERE, f"{name}.safetensors")
    save_file({k: v.contiguous() for k, v in out.items()}, path)
    print(f"{name}: loss {loss.item():.6f}, {sum(p.numel() for p in model.parameters()):,} params, {os.path.getsize(path) / 1024:.0f} KiB")


def check_liandan(name, directory):
    """Loads the checkpoint liandan wrote for `name` into PyTorch's model (strict) and checks the
    output of the stored batch against the stored output."""
    from safetensors.torch import load_file
    path = os.path.join(directory, f"{name}.liandan.safetensors")
    ref = load_file(os.path.join(HERE, f"{name}.safetensors"))
    model = build(name)
    model.load_state_dict(load_file(path), strict=True)
    model.eval() if name in EVAL else model.train()
    with torch.no_grad():
        outputs, loss = run(name, model, ref["input"], ref.get("target"), ref.get("noise"))
    err = (outputs[0] - ref["output"]).abs().max().item() / max(ref["output"].abs().max().item(), 1e-6)
    ok = err < 1e-5 and abs(loss.item() - ref["loss"].item()) <= 1e-5 * max(1.0, abs(ref["loss"].item()))
    print(f"{name}: PyTorch loaded {path} strictly; output rel err {err:.2e}, loss {loss.item():.6f} vs {ref['loss'].item():.6f}: {'ok' if ok else 'MISMATCH'}")
    return ok


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--weights", help="also write PyTorch's state dicts as <model>.weights.safetensors here")
    ap.add_argument("--check-liandan", help="check the <model>.liandan.safetensors files liandan wrote here instead")
    a = ap.parse_args()
    torch.use_deterministic_algorithms(True)
    names = a.models.split(",")
    if a.check_liandan:
        raise SystemExit(0 if all([check_liandan(n, a.check_liandan) for n in names]) else 1)
    for n in names:
        generate(n, a.weights)
