"""Reads a TensorBoard event file with TensorBoard's own reader and lists what it found.

The listing (`read_by_tensorboard.txt` beside this script) is what `tests/tensorboard.rs`
compares liandan's writer with: the file's SHA-256, then every scalar and histogram as
TensorBoard's `EventAccumulator` loaded them. The reader checks each record's length and data
CRCs (it stops at the first bad record), so a file it lists completely is one TensorBoard reads.

    pip install tensorboard
    python3 read_events.py fixed.tfevents > read_by_tensorboard.txt
"""

import hashlib
import sys

import numpy as np
from tensorboard.backend.event_processing import event_file_loader
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.compat.proto import event_pb2


def fmt(x):
    """A number as Rust's `{}` prints an f64 (shortest round-trip form)."""
    x = float(x)
    return str(int(x)) if x.is_integer() else repr(x)


def fmt32(x):
    """A float32 value as Rust's `{}` prints an f32."""
    v = np.float32(x)
    return str(int(v)) if float(v).is_integer() else np.format_float_positional(v, unique=True, trim="-")


def main(path):
    data = open(path, "rb").read()
    print("sha256", hashlib.sha256(data).hexdigest())

    # Every record, CRCs checked: the reader stops at a damaged or truncated record, so it
    # must yield as many as the framing holds.
    events = list(event_file_loader.RawEventFileLoader(path, detect_file_replacement=False).Load())
    records = 0
    at = 0
    while at < len(data):
        length = int.from_bytes(data[at : at + 8], "little")
        at += 12 + length + 4
        records += 1
    if len(events) != records or at != len(data):
        sys.exit(f"TensorBoard read {len(events)} of {records} records")

    acc = EventAccumulator(path, size_guidance={"scalars": 0, "histograms": 0})
    acc.Reload()
    first = event_pb2.Event.FromString(events[0]).file_version
    if acc.file_version != 2.0:
        sys.exit(f"TensorBoard read file version {acc.file_version} from `{first}`")
    print("file_version", first)
    tags = acc.Tags()
    # Tags in order of first appearance in the file, as the Rust test lists them.
    order = []
    for raw in events:
        ev = event_pb2.Event.FromString(raw)
        for v in ev.summary.value:
            if v.tag not in order:
                order.append(v.tag)
    for tag in order:
        if tag in tags["scalars"]:
            for s in acc.Scalars(tag):
                print("scalar", tag, s.step, fmt32(s.value))
        if tag in tags["histograms"]:
            for h in acc.Histograms(tag):
                v = h.histogram_value
                print("histogram", tag, h.step, "min", fmt(v.min), "max", fmt(v.max), "num", fmt(v.num), "sum", fmt(v.sum), "sum_squares", fmt(v.sum_squares))
                print("buckets", tag, h.step, " ".join(fmt(c) for c in v.bucket))


if __name__ == "__main__":
    main(sys.argv[1])
