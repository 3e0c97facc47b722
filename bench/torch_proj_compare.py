#!/usr/bin/env python3
"""rnncore against PyTorch's nn.LSTM(proj_size=P) on the CPU, alternating, as ratios.

The LSTM with a projection (h = W_hr (o * tanh c), PyTorch's proj_size, TF LSTMCell's num_proj) is
what speech models use; ONNX Runtime and oneDNN have no such cell, so PyTorch is the anchor. PyTorch
runs nn.LSTM(I, H, proj_size=P) in f32 under torch.inference_mode() with torch.set_num_threads(n);
rnncore runs `rnncore bench --mode lstm --proj P` on the same T, B, I, H, P and thread count. Each
shape is measured in rounds that alternate which library goes first; reported: the median over
rounds of each library's median of --reps runs, and ratio = PyTorch ms / rnncore ms (> 1: rnncore is
faster).

PyTorch is a benchmark dependency only (Debian: apt-get install python3-torch). Usage, from the
repository root after a release build of the tool:

  python3 bench/torch_proj_compare.py --rnncore build/tools/rnncore [--shapes 512x128,1024x256]
          [--batch 1,16,64] [--threads 1,2] [--seq 100] [--reps 10] [--rounds 3] [--markdown FILE]

A shape is HxP; the input size is P (a stacked layer's input) unless --input says otherwise.
"""
import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import time

try:
    import torch
except ImportError:
    sys.exit("torch_proj_compare: PyTorch is missing (apt-get install python3-torch)")


def time_torch(lstm, x, reps, warmup):
    with torch.inference_mode():
        for _ in range(warmup):
            lstm(x)
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            lstm(x)
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def time_rnncore(tool, T, B, I, H, P, threads, reps):
    cmd = [tool, "bench", "--mode", "lstm", "--seq", str(T), "--batch", str(B), "--input", str(I), "--hidden", str(H),
           "--proj", str(P), "--threads", str(threads), "--reps", str(reps)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    m = re.search(r"median_ms=([0-9.eE+-]+)", out.stdout)
    if out.returncode != 0 or m is None:
        sys.exit(f"torch_proj_compare: {' '.join(cmd)} failed:\n{out.stdout}{out.stderr}")
    return float(m.group(1))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rnncore", default="build/tools/rnncore", help="the rnncore tool (release build)")
    p.add_argument("--shapes", default="512x128,1024x256", help="HxP pairs")
    p.add_argument("--input", type=int, default=0, help="input size (default: P)")
    p.add_argument("--batch", default="1,16,64")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--seq", type=int, default=100)
    p.add_argument("--reps", type=int, default=10, help="timed runs per library per round (median)")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds per shape")
    p.add_argument("--markdown", help="also write the table to this file")
    a = p.parse_args()
    if not os.access(a.rnncore, os.X_OK):
        sys.exit(f"torch_proj_compare: {a.rnncore} is not an executable rnncore tool (build it, or pass --rnncore)")
    shapes = []
    for s in a.shapes.split(","):
        m = re.fullmatch(r"(\d+)x(\d+)", s.strip())
        if m is None or not 0 < int(m.group(2)) < int(m.group(1)):
            sys.exit(f"torch_proj_compare: shape '{s}' is not HxP with 0 < P < H")
        shapes.append((int(m.group(1)), int(m.group(2))))

    info = subprocess.run([a.rnncore, "info"], capture_output=True, text=True).stdout
    kernels = re.search(r"(?m)^f32 kernels:.*$", info)
    header = [f"rnncore vs PyTorch {torch.__version__} nn.LSTM(proj_size), f32, T={a.seq}, I={a.input or 'P'},",
              f"median of {a.reps} runs per round, median over {a.rounds} alternating rounds;",
              f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
              f"RNNCORE_MAX_ISA={os.environ.get('RNNCORE_MAX_ISA', 'unset')}",
              f"rnncore info: {kernels.group(0).strip() if kernels else 'n/a'}"]
    rows = ["| H | P | B | threads | PyTorch ms | rnncore ms | ratio (PyTorch / rnncore) |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    for line in header + rows:
        print(line)
    for threads in [int(t) for t in a.threads.split(",")]:
        torch.set_num_threads(threads)
        for H, P in shapes:
            I = a.input or P
            for B in [int(b) for b in a.batch.split(",")]:
                torch.manual_seed(1)
                lstm = torch.nn.LSTM(I, H, proj_size=P).eval()
                x = torch.randn(a.seq, B, I)
                theirs, ours = [], []
                for r in range(a.rounds):
                    runs = [lambda: theirs.append(time_torch(lstm, x, a.reps, a.warmup)),
                            lambda: ours.append(time_rnncore(a.rnncore, a.seq, B, I, H, P, threads, a.reps))]
                    for run in runs if r % 2 == 0 else runs[::-1]:
                        run()
                t, o = statistics.median(theirs), statistics.median(ours)
                row = f"| {H} | {P} | {B} | {threads} | {t:.3f} | {o:.3f} | {t / o:.2f} |"
                rows.append(row)
                print(row, flush=True)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write("\n".join(header) + "\n\n" + "\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
