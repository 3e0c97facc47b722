#!/usr/bin/env python3
"""rnncore's GPU backend against cuDNN (PyTorch nn.LSTM / nn.GRU) on the same GPU.

Shapes: B in {1, 8, 64, 256}, H in {256, 512, 1024}, T = 100, input size I = H, one layer,
unidirectional (override with --batches / --hiddens / --seq / --modes). Both sides are timed with
CUDA events around one forward pass on the device (inputs already on the device), after warm-up;
the median of --reps runs is reported.

  cuDNN:   torch.nn.LSTM / GRU, torch.backends.cudnn enabled, inference (no_grad), f32 with TF32
           off (strict f32, what rnncore computes), f32 with TF32 on (PyTorch's default), and f16.
  rnncore: `rnncore bench --backend gpu` (tools/rnncore.cpp: device buffers, events on the null
           stream), once per recurrence kernel choice in --rnncore-variants (env
           RNNCORE_GPU_RECURRENCE=auto|persistent|tiled, read at plan time).

Before timing, --check (default on) runs one small model end to end through `rnncore run
--backend gpu` on PyTorch's own weights and compares y, h_n, c_n with PyTorch (float64 on the CPU)
at a relative tolerance of 1e-5.

Writes bench/results/gpu_<gpu-name>_<date>.csv (raw numbers, one row per mode, dtype and shape)
and .md (tables, the issue's goals and the environment). Needs: a CUDA GPU, PyTorch with CUDA,
numpy, and an rnncore built with -Dgpu=cuda (--rnncore PATH, default: the first of build*/tools/rnncore,
/tmp/*/tools/rnncore that reports a GPU).

  python3 bench/gpu/bench_vs_cudnn.py --rnncore build-cuda/tools/rnncore
"""
import argparse
import csv
import datetime
import glob
import json
import os
import re
import statistics
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rnncore", help="path of the rnncore command built with -Dgpu=cuda")
    p.add_argument("--modes", default="lstm,gru")
    p.add_argument("--batches", default="1,8,64,256")
    p.add_argument("--hiddens", default="256,512,1024")
    p.add_argument("--seq", type=int, default=100)
    p.add_argument("--reps", type=int, default=50, help="timed runs per measurement (median reported)")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--rnncore-variants", default="auto,persistent,tiled",
                   help="RNNCORE_GPU_RECURRENCE values to time (auto is the library's own choice)")
    p.add_argument("--no-check", action="store_true", help="skip the end-to-end accuracy check")
    p.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    return p.parse_args()


# ------------------------------------------------------------------------------ rnncore side

def find_rnncore(explicit):
    candidates = [explicit] if explicit else sorted(glob.glob(os.path.join(ROOT, "build*", "tools", "rnncore"))) + \
        sorted(glob.glob("/tmp/*/tools/rnncore"))
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            info = subprocess.run([c, "info"], capture_output=True, text=True).stdout
            if explicit or re.search(r"^gpu: \w+ build, device 0", info, re.M):
                return c, info
    sys.exit("bench_vs_cudnn: no rnncore with a usable GPU found; build with -Dgpu=cuda and pass --rnncore PATH")


def rnncore_bench(exe, mode, B, H, T, dtype, reps, variant):
    env = dict(os.environ, RNNCORE_GPU_RECURRENCE=variant)
    cmd = [exe, "bench", "--backend", "gpu", "--mode", mode, "--seq", str(T), "--batch", str(B), "--input", str(H),
           "--hidden", str(H), "--reps", str(reps), "--dtype", dtype]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    m = re.search(r"median_ms=([0-9.]+)", r.stdout)
    k = re.search(r"kernel=(\S+)", r.stdout)
    if r.returncode != 0 or not m:
        return None, (r.stderr.strip() or r.stdout.strip()).splitlines()[-1:] or ["failed"]
    return float(m.group(1)), [k.group(1) if k else ""]


# ------------------------------------------------------------------------------ cuDNN side

def cudnn_time(torch, mode, B, H, T, dtype, tf32, reps, warmup):
    torch.backends.cudnn.enabled = True
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    cls = torch.nn.LSTM if mode == "lstm" else torch.nn.GRU
    rnn = cls(H, H, num_layers=1).to(device="cuda", dtype=dtype)
    rnn.flatten_parameters()
    x = torch.randn(T, B, H, device="cuda", dtype=dtype)
    times = []
    with torch.no_grad():
        for _ in range(warmup):
            rnn(x)
        torch.cuda.synchronize()
        for _ in range(reps):
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            rnn(x)
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop))
    return statistics.median(times)


# ------------------------------------------------------------------------------ accuracy check

def write_safetensors(path, tensors, metadata):
    """Minimal safetensors writer (little-endian f32), so the check needs no extra package."""
    import numpy as np
    header, blobs, offset = {"__metadata__": metadata}, [], 0
    for name, arr in tensors.items():
        data = np.ascontiguousarray(arr, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def accuracy_check(torch, exe):
    """PyTorch's own LSTM and GRU (2 layers, bidirectional, lengths) through `rnncore run --backend gpu`."""
    import numpy as np
    results = []
    for mode in ("lstm", "gru"):
        torch.manual_seed(0)
        cls = torch.nn.LSTM if mode == "lstm" else torch.nn.GRU
        T, B, I, H = 20, 5, 24, 32
        rnn = cls(I, H, num_layers=2, bidirectional=True).double()
        x = torch.randn(T, B, I, dtype=torch.float64)
        lengths = [20, 13, 1, 7, 20]  # pack_padded_sequence needs lengths ≥ 1
        with torch.no_grad():
            packed = torch.nn.utils.rnn.pack_padded_sequence(x, torch.tensor(lengths), enforce_sorted=False)
            out, state = rnn(packed)
            y, _ = torch.nn.utils.rnn.pad_packed_sequence(out, total_length=T)
        hn = state[0] if mode == "lstm" else state
        with tempfile.TemporaryDirectory() as d:
            write_safetensors(os.path.join(d, "m.safetensors"),
                              {k: v.float().numpy() for k, v in rnn.state_dict().items()}, {"mode": mode})
            np.save(os.path.join(d, "x.npy"), x.float().numpy())
            np.save(os.path.join(d, "len.npy"), np.array(lengths, dtype=np.int32))
            np.save(os.path.join(d, "y_ref.npy"), y.numpy())
            np.save(os.path.join(d, "hn_ref.npy"), hn.numpy())
            cmd = [exe, "run", "--weights", os.path.join(d, "m.safetensors"), "--input", os.path.join(d, "x.npy"),
                   "--output", os.path.join(d, "y.npy"), "--seq-lengths", os.path.join(d, "len.npy"),
                   "--backend", "gpu", "--expect", os.path.join(d, "y_ref.npy"),
                   "--expect-hn", os.path.join(d, "hn_ref.npy"), "--tolerance", "1e-5"]
            if mode == "lstm":
                np.save(os.path.join(d, "cn_ref.npy"), state[1].numpy())
                cmd += ["--expect-cn", os.path.join(d, "cn_ref.npy")]
            r = subprocess.run(cmd, capture_output=True, text=True)
            results.append((mode, r.returncode == 0, (r.stdout + r.stderr).strip()))
    return results


# ------------------------------------------------------------------------------ main

def main():
    args = parse_args()
    try:
        import torch
    except ImportError:
        sys.exit("bench_vs_cudnn: PyTorch is needed (pip install torch)")
    if not torch.cuda.is_available():
        sys.exit("bench_vs_cudnn: PyTorch sees no CUDA GPU")
    exe, info = find_rnncore(args.rnncore)
    gpu = torch.cuda.get_device_name(0)
    slug = re.sub(r"[^A-Za-z0-9]+", "-", gpu).strip("-").lower()
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M")
    os.makedirs(args.out, exist_ok=True)
    base = os.path.join(args.out, f"gpu_{slug}_{stamp}")
    env = {
        "gpu": gpu,
        "torch": torch.__version__,
        "cuda (torch)": torch.version.cuda,
        "cudnn": str(torch.backends.cudnn.version()),
        "rnncore": exe,
        "rnncore info": info.strip().replace("\n", "; "),
    }
    print("\n".join(f"{k}: {v}" for k, v in env.items()), flush=True)

    checks = [] if args.no_check else accuracy_check(torch, exe)
    for mode, ok, out in checks:
        print(f"check {mode}: {'ok' if ok else 'FAILED'}\n{out}", flush=True)

    variants = [v for v in args.rnncore_variants.split(",") if v]
    rows = []
    for mode in args.modes.split(","):
        for dtype in ("f32", "f16"):
            for H in map(int, args.hiddens.split(",")):
                for B in map(int, args.batches.split(",")):
                    T = args.seq
                    row = {"gpu": gpu, "mode": mode, "dtype": dtype, "T": T, "B": B, "I": H, "H": H}
                    tdtype = torch.float32 if dtype == "f32" else torch.float16
                    row["cudnn_ms"] = cudnn_time(torch, mode, B, H, T, tdtype, False, args.reps, args.warmup)
                    if dtype == "f32":
                        row["cudnn_tf32_ms"] = cudnn_time(torch, mode, B, H, T, tdtype, True, args.reps, args.warmup)
                    for v in variants:
                        ms, note = rnncore_bench(exe, mode, B, H, T, dtype, args.reps, v)
                        row[f"rnncore_{v}_ms"] = ms
                        row[f"rnncore_{v}_note"] = note[0] if note else ""
                    best = row.get("rnncore_auto_ms")
                    row["speedup_vs_cudnn"] = row["cudnn_ms"] / best if best else None
                    print(json.dumps(row), flush=True)
                    rows.append(row)

    fields = []
    for r in rows:
        for k in r:
            if k not in fields:
                fields.append(k)
    with open(base + ".csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)

    def fmt(v):
        return "n/a" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v))

    def find(mode, dtype, B, H):
        for r in rows:
            if (r["mode"], r["dtype"], r["B"], r["H"]) == (mode, dtype, B, H):
                return r
        return None

    lines = [f"# rnncore GPU vs cuDNN on {gpu}", "", f"{stamp}, T = {args.seq}, I = H, one layer, unidirectional, "
             f"median of {args.reps} runs after {args.warmup} warm-up runs, CUDA events; times in ms.", ""]
    lines += ["## Environment", ""] + [f"- {k}: {v}" for k, v in env.items()] + [""]
    if checks:
        lines += ["## Accuracy (rnncore run --backend gpu vs PyTorch float64, 2 layers, bidirectional, lengths)", ""]
        lines += [f"- {m}: {'ok' if ok else 'FAILED'} — " + out.replace("\n", "; ") for m, ok, out in checks] + [""]
    lines += ["## Goals", ""]
    for dtype in ("f32", "f16"):
        r = find("lstm", dtype, 64, 512)
        if r:
            rn = r.get("rnncore_auto_ms")
            verdict = "n/a" if rn is None else ("met" if rn <= r["cudnn_ms"] else "not met")
            lines.append(f"- throughput ≥ cuDNN at B=64, H=512, T={args.seq} (LSTM, {dtype}): rnncore {fmt(rn)} ms vs "
                         f"cuDNN {fmt(r['cudnn_ms'])} ms — {verdict}")
    for H in map(int, args.hiddens.split(",")):
        r = find("lstm", "f32", 1, H)
        if r:
            rn = r.get("rnncore_auto_ms")
            ratio = None if rn is None else rn / r["cudnn_ms"]
            verdict = "n/a" if ratio is None else ("met" if ratio <= 0.5 else "not met")
            lines.append(f"- latency at B=1 ≤ 0.5× cuDNN (LSTM f32, H={H}): ratio {fmt(ratio)} — {verdict}")
    lines.append("")
    vcols = [f"rnncore_{v}_ms" for v in variants]
    header = ["mode", "dtype", "B", "H", "cudnn_ms", "cudnn_tf32_ms"] + vcols + ["speedup_vs_cudnn", "rnncore kernel / note"]
    lines += ["## Results", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        note = r.get("rnncore_auto_note", "")
        lines.append("| " + " | ".join(fmt(r.get(h)) for h in header[:-1]) + f" | {note} |")
    lines += ["", "speedup_vs_cudnn = cuDNN (strict f32 / f16) time ÷ rnncore time with the library's own kernel choice.",
              "rnncore f16 rows need GPU f16 weight storage; where the build has none the note says so.", ""]
    with open(base + ".md", "w") as f:
        f.write("\n".join(lines))
    print(f"wrote {base}.csv and {base}.md")
    return 0 if all(ok for _, ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
