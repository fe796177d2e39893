"""Writes the PyTorch reference values that crates/nn/tests/loss.rs checks the loss modules against.

    python3 crates/nn/tests/data/make_loss_fixtures.py

Written with torch 2.15.0 and safetensors 0.8.0. Inputs are float32 (class targets int64); the
losses and gradients are computed in float64 from those float32 inputs and stored as float32,
so the reference carries no float32 rounding of its own.

`loss_cases.safetensors` holds, for each case `<name>` of `CASES` below:
- `<name>.input`, `<name>.target`, and where the case has them `<name>.weight`, `<name>.pos_weight`
- `<name>.loss`: the module's output (a scalar, or per element for reduction="none")
- `<name>.gy`: for reduction="none", the weights of the backward pass: loss = (out * gy).sum();
  for the other reductions the backward pass starts from the scalar output itself
- `<name>.grad`: the gradient of that with respect to the input.

The options of each case are the `opts` column of `CASES`; loss.rs repeats the table.

Where a BCE probability is exactly 0 or 1 (`bce_edge_*`), PyTorch's backward is
`(p - y) / max(p (1 - p), 1e-12)`, up to 1e12; liandan's is the derivative of the clamped loss,
so loss.rs compares the gradient there with that instead. `bcel_zero_logits_sum` has logits
exactly 0 (a zero-initialized head), where the gradient is `sigmoid(0) - y`.
"""

import os

import torch
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
N, C = 6, 5


def logits(*shape, scale=2.0):
    return torch.randn(*shape) * scale


def classes(*shape, c=C):
    return torch.randint(0, c, shape)


def probs(*shape):
    return torch.softmax(torch.randn(*shape) * 2, dim=1)


def with_ignored(t, value, every=3):
    t = t.clone()
    t.view(-1)[::every] = value
    return t


def ce_inputs_all():
    # Class weights, ignore_index 2 (which also appears as a real class elsewhere) and smoothing.
    t = classes(N)
    t[t == 2] = 4
    t[[0, 3]] = 2
    return logits(N, C), t


def bce_edge():
    # Probabilities exactly 0 and 1 against targets 0, 1 and 0.5: PyTorch clamps log at -100.
    p = torch.tensor([[0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.3, 0.9]])
    y = torch.tensor([[0.0, 1.0, 0.5, 0.0, 1.0, 0.5, 0.2, 1.0]])
    return p, y


def bcel_large():
    x = torch.tensor([[100.0, -100.0, 30.0, -30.0, 0.0], [-100.0, 100.0, 17.0, -17.0, 0.5], [3.0, -2.0, 100.0, -100.0, 1e-3]])
    y = torch.tensor([[1.0, 0.0, 1.0, 0.0, 1.0], [1.0, 0.0, 0.0, 1.0, 0.3], [0.0, 1.0, 0.0, 1.0, 0.5]])
    return x, y


def kl_inputs(log_target):
    x = torch.log_softmax(torch.randn(4, C), dim=1)
    p = probs(4, C)
    p[0, 1] = 0.0  # xlogy(0, 0) = 0
    return x, (p.clamp_min(1e-30).log() if log_target else p)


# name: (module, opts, inputs) where inputs() gives (input, target) and opts holds the keyword
# arguments; "weight" / "pos_weight" name the shape of a random positive tensor.
CASES = {
    "ce_mean": ("ce", {}, lambda: (logits(N, C), classes(N))),
    "ce_sum": ("ce", {"reduction": "sum"}, lambda: (logits(N, C), classes(N))),
    "ce_none": ("ce", {"reduction": "none"}, lambda: (logits(N, C), classes(N))),
    "ce_default_ignore": ("ce", {}, lambda: (logits(N, C), with_ignored(classes(N), -100))),
    "ce_all_mean": ("ce", {"weight": (C,), "ignore_index": 2, "label_smoothing": 0.1}, ce_inputs_all),
    "ce_all_sum": ("ce", {"weight": (C,), "ignore_index": 2, "label_smoothing": 0.1, "reduction": "sum"}, ce_inputs_all),
    "ce_all_none": ("ce", {"weight": (C,), "ignore_index": 2, "label_smoothing": 0.1, "reduction": "none"}, ce_inputs_all),
    "ce_smooth": ("ce", {"label_smoothing": 0.25}, lambda: (logits(N, C), classes(N))),
    "ce_kdim_mean": ("ce", {}, lambda: (logits(3, 4, 5), classes(3, 5, c=4))),
    "ce_kdim_all": (
        "ce",
        {"weight": (4,), "ignore_index": 1, "label_smoothing": 0.2, "reduction": "none"},
        lambda: (logits(3, 4, 5), classes(3, 5, c=4)),
    ),
    "ce_kdim2_sum": ("ce", {"weight": (3,), "reduction": "sum"}, lambda: (logits(2, 3, 4, 2), classes(2, 4, 2, c=3))),
    "ce_unbatched": ("ce", {"weight": (C,)}, lambda: (logits(C), torch.tensor(3))),
    "ce_prob_mean": ("ce", {}, lambda: (logits(N, C), probs(N, C))),
    "ce_prob_all": ("ce", {"weight": (C,), "label_smoothing": 0.1, "reduction": "none"}, lambda: (logits(N, C), probs(N, C))),
    "ce_prob_kdim_sum": ("ce", {"weight": (4,), "label_smoothing": 0.3, "reduction": "sum"}, lambda: (logits(3, 4, 5), probs(3, 4, 5))),
    "nll_mean": ("nll", {}, lambda: (torch.log_softmax(logits(N, C), 1), classes(N))),
    "nll_weight_mean": ("nll", {"weight": (C,)}, lambda: (torch.log_softmax(logits(N, C), 1), classes(N))),
    "nll_weight_sum": ("nll", {"weight": (C,), "reduction": "sum"}, lambda: (torch.log_softmax(logits(N, C), 1), classes(N))),
    "nll_weight_ignore_none": (
        "nll",
        {"weight": (C,), "ignore_index": 0, "reduction": "none"},
        lambda: (torch.log_softmax(logits(N, C), 1), with_ignored(classes(N), 0, 2)),
    ),
    "nll_kdim_weight_mean": ("nll", {"weight": (4,), "ignore_index": 3}, lambda: (torch.log_softmax(logits(3, 4, 5), 1), classes(3, 5, c=4))),
    "mse_mean": ("mse", {}, lambda: (torch.randn(N, C), torch.randn(N, C))),
    "mse_sum": ("mse", {"reduction": "sum"}, lambda: (torch.randn(N, C), torch.randn(N, C))),
    "mse_none": ("mse", {"reduction": "none"}, lambda: (torch.randn(3, 4, 2), torch.randn(3, 4, 2))),
    "l1_mean": ("l1", {}, lambda: (torch.randn(N, C), torch.randn(N, C))),
    "l1_sum": ("l1", {"reduction": "sum"}, lambda: (torch.randn(N, C), torch.randn(N, C))),
    "l1_none": ("l1", {"reduction": "none"}, lambda: (torch.randn(3, 4, 2), torch.randn(3, 4, 2))),
    "bce_mean": ("bce", {}, lambda: (torch.sigmoid(torch.randn(N, C) * 2), torch.rand(N, C))),
    "bce_weight_none": ("bce", {"weight": (C,), "reduction": "none"}, lambda: (torch.sigmoid(torch.randn(N, C) * 2), torch.rand(N, C))),
    "bce_weight_sum": ("bce", {"weight": (N, 1), "reduction": "sum"}, lambda: (torch.sigmoid(torch.randn(N, C) * 2), torch.rand(N, C))),
    "bce_edge_sum": ("bce", {"reduction": "sum"}, bce_edge),
    "bce_edge_none": ("bce", {"reduction": "none"}, bce_edge),
    "bcel_mean": ("bcel", {}, lambda: (logits(N, C), torch.rand(N, C))),
    "bcel_weight_none": ("bcel", {"weight": (C,), "reduction": "none"}, lambda: (logits(N, C), torch.rand(N, C))),
    "bcel_zero_logits_sum": ("bcel", {"reduction": "sum"}, lambda: (torch.zeros(N, C), torch.rand(N, C))),
    "bcel_pos_weight_mean": ("bcel", {"pos_weight": (C,)}, lambda: (logits(N, C), torch.rand(N, C))),
    "bcel_pos_weight_large_none": ("bcel", {"weight": (3, 1), "pos_weight": (5,), "reduction": "none"}, bcel_large),
    "bcel_pos_weight_large_sum": ("bcel", {"pos_weight": (5,), "reduction": "sum"}, bcel_large),
    "kl_batchmean": ("kl", {"reduction": "batchmean"}, lambda: kl_inputs(False)),
    "kl_batchmean_logt": ("kl", {"reduction": "batchmean", "log_target": True}, lambda: kl_inputs(True)),
    "kl_mean": ("kl", {}, lambda: kl_inputs(False)),
    "kl_sum_logt": ("kl", {"reduction": "sum", "log_target": True}, lambda: kl_inputs(True)),
    "kl_none": ("kl", {"reduction": "none"}, lambda: kl_inputs(False)),
    "kl_none_logt": ("kl", {"reduction": "none", "log_target": True}, lambda: kl_inputs(True)),
}

MODULES = {
    "ce": torch.nn.CrossEntropyLoss,
    "nll": torch.nn.NLLLoss,
    "mse": torch.nn.MSELoss,
    "l1": torch.nn.L1Loss,
    "bce": torch.nn.BCELoss,
    "bcel": torch.nn.BCEWithLogitsLoss,
    "kl": torch.nn.KLDivLoss,
}


def main():
    out = {}
    for i, (name, (module, opts, inputs)) in enumerate(CASES.items()):
        torch.manual_seed(1000 + i)
        x, y = inputs()
        x, y = x.float().contiguous(), (y if y.dtype == torch.int64 else y.float()).contiguous()
        kwargs = dict(opts)
        for key in ("weight", "pos_weight"):
            if key in kwargs:
                w = (torch.rand(*kwargs[key]) * 1.5 + 0.25).float()
                out[f"{name}.{key}"] = w
                kwargs[key] = w.double()
        out[f"{name}.input"], out[f"{name}.target"] = x, y
        xd = x.double().requires_grad_(True)
        yd = y if y.dtype == torch.int64 else y.double()
        loss = MODULES[module](**kwargs)(xd, yd)
        if loss.dim() > 0:
            gy = torch.randn(loss.shape).float()
            out[f"{name}.gy"] = gy
            (loss * gy.double()).sum().backward()
        else:
            loss.backward()
        out[f"{name}.loss"] = loss.detach().float()
        out[f"{name}.grad"] = xd.grad.float()
    path = os.path.join(HERE, "loss_cases.safetensors")
    save_file(out, path, metadata={"torch": torch.__version__, "script": "make_loss_fixtures.py"})
    print(f"wrote {len(out)} tensors, {os.path.getsize(path)} bytes, to {path}")


if __name__ == "__main__":
    main()
