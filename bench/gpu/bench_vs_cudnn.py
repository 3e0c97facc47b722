#!/usr/bin/env python3
"""rnncore's GPU backend against cuDNN (PyTorch nn.LSTM / nn.GRU) on the same GPU, with the speed
model's bound (bench/gpu/speed_model.cpp) beside each measurement.

Suites (--suites, run in this order, each case in every dtype of --dtypes):
  goals     LSTM H=512 B=64 and B=1, T=100: the issue's goals (>= cuDNN at B=64, <= 0.5x at B=1)
  graphs    the same LSTMs (f32, f16) on the per-step kernels (RNNCORE_GPU_RECURRENCE=tiled), launched
            directly and replayed from a graph (RNNCORE_GPU_GRAPHS=on), two alternating pairs of
            `rnncore bench` runs: graph_ms, graph_speedup (direct / graph) and the gpu_graph line
            that says whether the runs did replay (no cuDNN timing in this suite)
  deepbench LSTM and GRU, H in {512, 1024, 2048}, N in {1, 16, 64}, T=50 (DeepBench's RNN shapes)
  flashrnn  FlashRNN's grid: LSTM, B=16, T=1024, bf16, total hidden 768 (FlashRNN splits it into
            heads x head_dim from 48x16 to 1x768; rnncore's R is dense, so this is the 1x768 point)
  stack     what cuDNN's persistent kernels refuse: 2 layers, 2 layers bidirectional, and variable
            lengths (cuDNN: a packed sequence of lengths spread over [T/2, T]; rnncore's kernels run
            every step for every row with a mask, so its time is the full-length time)
dtypes: f32 (strict: TF32 off on both sides), tf32 (cuDNN with TF32 on; rnncore f32 weights with
--gpu-half-math, TF32 on the matrix units), bf16 and f16 (cuDNN in that type; rnncore that weight
storage with --gpu-half-math, f32 accumulation and state).

Both sides are timed on the device with the inputs already there: cuDNN with CUDA events around one
forward pass (and, with --training, one forward + backward of a training step), median of --reps
after --warmup; rnncore with `rnncore bench --backend gpu` (median_ms, and with --training its
training_step_ms). The bound is the model's per-step bound for one layer and direction (H200
profile by default) times T x layers (the lower bound of the recurrence alone; the model prints
its assumptions).

Before timing, --check (default on) runs PyTorch's own LSTM and GRU (2 layers, bidirectional,
lengths) end to end through `rnncore run --backend gpu` and compares with PyTorch in float64 at 1e-5.

Every case and the whole run are time-boxed (--case-timeout, --budget-s): a case that would start
after the budget is written as skipped, so a hang cannot eat the device window. Rows are appended to
the CSV as they are measured. --dry-run (no GPU needed, no PyTorch): every case's rnncore command
line is run once to show it parses (exit 0, or a runtime error naming the missing device; a usage
error fails), every bound is computed, and both files are written with no timings.

Writes OUT/bench.csv (one row per case and dtype) and OUT/bench.md (tables, goals, environment).

  python3 bench/gpu/bench_vs_cudnn.py --rnncore build-kit/rnncore --speed-model build-kit/speed_model --out /tmp/o
"""
import argparse
import csv
import json
import os
import re
import statistics
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SUITES = ("goals", "graphs", "flashrnn", "stack", "deepbench")
DTYPES = ("f32", "tf32", "bf16", "f16")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rnncore", default=os.path.join(ROOT, "build-kit", "rnncore"), help="rnncore built with -Dgpu=cuda")
    p.add_argument("--speed-model", default=os.path.join(ROOT, "build-kit", "speed_model"))
    p.add_argument("--profile", default="H200", help="speed model profile (speed_model --profile)")
    p.add_argument("--suites", default=",".join(SUITES))
    p.add_argument("--dtypes", default=",".join(DTYPES))
    p.add_argument("--reps", type=int, default=20, help="timed runs per measurement (median reported)")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--no-training", action="store_true", help="time inference only")
    p.add_argument("--no-check", action="store_true", help="skip the end-to-end accuracy check")
    p.add_argument("--budget-s", type=float, default=240, help="start no case after this many seconds")
    p.add_argument("--case-timeout", type=float, default=60, help="seconds for one rnncore bench call")
    p.add_argument("--dry-run", action="store_true", help="no GPU: check the command lines and the bounds, no timing")
    p.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    return p.parse_args()


# ------------------------------------------------------------------------------ the cases

def cases(suites):
    """(suite, mode, H, B, T, layers, bidirectional, varlen) in the order they run."""
    out = []
    for s in suites:
        if s == "goals":
            out += [("goals", "lstm", 512, 64, 100, 1, False, False), ("goals", "lstm", 512, 1, 100, 1, False, False)]
        elif s == "graphs":
            out += [("graphs", "lstm", 512, 64, 100, 1, False, False), ("graphs", "lstm", 512, 1, 100, 1, False, False)]
        elif s == "deepbench":
            out += [("deepbench", m, h, b, 50, 1, False, False)
                    for m in ("lstm", "gru") for h in (512, 1024, 2048) for b in (1, 16, 64)]
        elif s == "flashrnn":
            out += [("flashrnn", "lstm", 768, 16, 1024, 1, False, False)]
        elif s == "stack":
            out += [("stack", m, 512, 64, 100, l, bi, vl) for m in ("lstm", "gru")
                    for (l, bi, vl) in ((2, False, False), (2, True, False), (1, False, True))]
        else:
            sys.exit(f"bench_vs_cudnn: unknown suite {s} (known: {', '.join(SUITES)})")
    return out


def case_dtypes(suite, dtypes):
    if suite == "graphs":
        return [d for d in dtypes if d in ("f32", "f16")]
    return [d for d in dtypes if d == "bf16"] if suite == "flashrnn" else dtypes


# ------------------------------------------------------------------------------ speed model

def model_bounds(exe, profile, shapes, backward):
    """{(mode, H, B, weights, half): bound_us per step} from one speed_model call."""
    if not shapes:
        return {}
    cmd = [exe, "--csv", "--profile", profile] + (["--backward"] if backward else [])
    for s in shapes:
        cmd += ["--shape", ":".join([s[0], str(s[1]), str(s[2]), s[3]] + (["half"] if s[4] else []))]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        print(f"bench_vs_cudnn: speed_model failed: {r.stdout.strip()} {r.stderr.strip()}", flush=True)
        return {}
    rows = list(csv.DictReader(r.stdout.splitlines()))
    return {s: float(row["bound_us"]) for s, row in zip(shapes, rows)}


def model_key(mode, H, B, dtype):
    weights = "f32" if dtype in ("f32", "tf32") else dtype
    return (mode, H, B, weights, dtype != "f32")


# ------------------------------------------------------------------------------ rnncore side

def rnncore_bench(exe, case, dtype, reps, training, timeout, dry_run):
    """rnncore's times; where the training step is refused (a runtime error), inference alone."""
    out = rnncore_bench_once(exe, case, dtype, reps, training, timeout, dry_run)
    if training and not dry_run and "rnncore_ms" not in out and not out.get("usage_error") and "timed out" not in out["rnncore_note"]:
        refused = out["rnncore_note"]
        out = rnncore_bench_once(exe, case, dtype, reps, False, timeout, dry_run)
        out["rnncore_note"] = (out["rnncore_note"] + "; training step: " + refused).strip("; ")
    return out


def rnncore_graph_pairs(exe, case, dtype, reps, timeout, dry_run):
    """The per-step kernels launched directly and from a graph: two alternating pairs of runs."""
    direct, graph, notes = [], [], []
    for _ in range(1 if dry_run else 2):
        for on, times in (("off", direct), ("on", graph)):
            env = dict(os.environ, RNNCORE_GPU_RECURRENCE="tiled", RNNCORE_GPU_GRAPHS=on)
            out = rnncore_bench_once(exe, case, dtype, reps, False, timeout, dry_run, env)
            if out.get("usage_error"):
                return out
            if "rnncore_ms" in out:
                times.append(out["rnncore_ms"])
            notes.append(f"{on}: " + (out.get("gpu_graph") or out["rnncore_note"]))
    row = {"rnncore_note": " | ".join(dict.fromkeys(notes))[:300]}
    if direct and graph:
        row.update(rnncore_ms=statistics.median(direct), graph_ms=statistics.median(graph))
        row["graph_speedup"] = row["rnncore_ms"] / row["graph_ms"]
    return row


def rnncore_bench_once(exe, case, dtype, reps, training, timeout, dry_run, env=None, half_math=None):
    """One `rnncore bench --backend gpu` call; half_math (default: any dtype but f32) adds
    --gpu-half-math."""
    _, mode, H, B, T, layers, bidir, _ = case
    cmd = [exe, "bench", "--backend", "gpu", "--mode", mode, "--seq", str(T), "--batch", str(B), "--input", str(H),
           "--hidden", str(H), "--layers", str(layers), "--reps", str(1 if dry_run else reps),
           "--dtype", "f32" if dtype == "tf32" else dtype]
    if bidir:
        cmd.append("--bidirectional")
    if (dtype != "f32") if half_math is None else half_math:
        cmd.append("--gpu-half-math")
    if training:
        cmd.append("--backward")
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"rnncore_note": f"timed out after {timeout:.0f} s"}
    text = (r.stdout + r.stderr).strip()
    last = text.splitlines()[-1] if text else "no output"
    if r.returncode == 2:
        return {"rnncore_note": "USAGE ERROR: " + last, "usage_error": True}
    if r.returncode != 0:
        return {"rnncore_note": last}
    out = {"rnncore_note": ""}
    for key, pat in (("rnncore_ms", r"median_ms=([0-9.]+)"), ("rnncore_train_ms", r"training_step_ms=([0-9.]+)")):
        m = re.search(pat, r.stdout)
        if m:
            out[key] = float(m.group(1))
    k = re.search(r"kernel=(\S+)", r.stdout)
    if k:
        out["rnncore_note"] = k.group(1)
    g = re.search(r"gpu_graph: (.*)", r.stdout)
    if g:
        out["gpu_graph"] = g.group(1).strip()
    return out


# ------------------------------------------------------------------------------ cuDNN side

def cuda_median_ms(torch, step, reps, warmup):
    """The median of reps calls of step() in ms, each between two CUDA events, after warmup calls."""
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def cudnn_time(torch, case, dtype, reps, warmup, training):
    _, mode, H, B, T, layers, bidir, varlen = case
    torch.backends.cudnn.enabled = True
    torch.backends.cudnn.allow_tf32 = dtype == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    tdtype = {"f32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[dtype]
    cls = torch.nn.LSTM if mode == "lstm" else torch.nn.GRU
    rnn = cls(H, H, num_layers=layers, bidirectional=bidir).to(device="cuda", dtype=tdtype)
    rnn.flatten_parameters()
    x = torch.randn(T, B, H, device="cuda", dtype=tdtype)
    lengths = None
    if varlen:
        g = torch.Generator().manual_seed(0)
        lengths = torch.randint(T // 2, T + 1, (B,), generator=g)
        lengths[0] = T

    def forward(inp):
        if lengths is None:
            return rnn(inp)[0]
        packed = torch.nn.utils.rnn.pack_padded_sequence(inp, lengths, enforce_sorted=False)
        return torch.nn.utils.rnn.pad_packed_sequence(rnn(packed)[0], total_length=T)[0]

    def timed(step):
        return cuda_median_ms(torch, step, reps, warmup)

    out = {}
    with torch.no_grad():
        out["cudnn_ms"] = timed(lambda: forward(x))
    if training:
        xg = x.detach().clone().requires_grad_(True)

        def step():
            rnn.zero_grad(set_to_none=True)
            forward(xg).float().sum().backward()
        out["cudnn_train_ms"] = timed(step)
    return out


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
        lengths = [20, 13, 1, 7, 20]  # pack_padded_sequence needs lengths >= 1
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
            try:
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
                results.append((mode, r.returncode == 0, (r.stdout + r.stderr).strip()))
            except subprocess.TimeoutExpired:
                results.append((mode, False, "timed out after 60 s"))
    return results


# ------------------------------------------------------------------------------ output

FIELDS = ["suite", "mode", "dtype", "T", "B", "H", "layers", "bidirectional", "varlen", "cudnn_ms", "rnncore_ms",
          "speedup_vs_cudnn", "model_ms", "cudnn_train_ms", "rnncore_train_ms", "train_speedup_vs_cudnn",
          "model_train_ms", "graph_ms", "graph_speedup", "rnncore_note"]


def fmt(v):
    return "n/a" if v is None or v == "" else (f"{v:.3f}" if isinstance(v, float) else str(v))


def markdown(rows, env, checks, args, elapsed):
    lines = [f"# rnncore GPU vs cuDNN on {env.get('gpu', 'no GPU (dry run)')}", "",
             f"Median of {args.reps} runs after {args.warmup} warm-ups, CUDA events (cuDNN) and `rnncore bench "
             f"--backend gpu` (rnncore); times in ms for the whole sequence. model_ms: the speed model's bound "
             f"({args.profile} profile) per step x T x layers, one direction. {len(rows)} rows in {elapsed:.0f} s.", ""]
    lines += ["## Environment", ""] + [f"- {k}: {v}" for k, v in env.items()] + [""]
    if checks:
        lines += ["## Accuracy (rnncore run --backend gpu vs PyTorch float64, 2 layers, bidirectional, lengths)", ""]
        lines += [f"- {m}: {'ok' if ok else 'FAILED'}: " + out.replace("\n", "; ") for m, ok, out in checks] + [""]
    lines += ["## Goals", ""]
    for r in rows:
        if r["suite"] != "goals" or r.get("rnncore_ms") is None or r.get("cudnn_ms") is None:
            continue
        ratio = r["rnncore_ms"] / r["cudnn_ms"]
        goal = (ratio <= 1.0) if r["B"] == 64 else (ratio <= 0.5)
        want = ">= 1.0x cuDNN's throughput" if r["B"] == 64 else "<= 0.5x cuDNN's latency"
        lines.append(f"- LSTM H=512 B={r['B']} {r['dtype']}: rnncore {fmt(r['rnncore_ms'])} ms, cuDNN "
                     f"{fmt(r['cudnn_ms'])} ms, ratio {ratio:.2f} ({want}): {'met' if goal else 'not met'}")
    lines.append("")
    cols = FIELDS[:-1]
    lines += ["## Results", "", "| " + " | ".join(cols) + " | rnncore kernel / note |", "|" + "---|" * (len(cols) + 1)]
    for r in rows:
        lines.append("| " + " | ".join(fmt(r.get(c)) for c in cols) + f" | {r.get('rnncore_note', '')} |")
    lines += ["", "graphs rows: rnncore_ms is the per-step kernels launched directly, graph_ms the same forward replayed "
              "from a graph (median of two alternating runs each; graph_speedup = direct / graph; the note says whether "
              "the runs did replay).", ""]
    lines += ["", "speedup = cuDNN time / rnncore time (above 1: rnncore faster). rnncore's tf32 / bf16 / f16 rows "
              "run with --gpu-half-math; its state and accumulation stay f32.", ""]
    return "\n".join(lines)


# ------------------------------------------------------------------------------ main

def main():
    args = parse_args()
    start = time.monotonic()
    os.makedirs(args.out, exist_ok=True)
    torch = None
    env = {"rnncore": args.rnncore, "profile": args.profile, "dry run": str(args.dry_run)}
    if not args.dry_run:
        try:
            import torch
        except ImportError:
            sys.exit("bench_vs_cudnn: PyTorch is needed (or --dry-run)")
        if not torch.cuda.is_available():
            sys.exit("bench_vs_cudnn: PyTorch sees no CUDA GPU (or --dry-run)")
        env.update({"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda (torch)": torch.version.cuda,
                    "cudnn": str(torch.backends.cudnn.version())})
    info = subprocess.run([args.rnncore, "info"], capture_output=True, text=True, timeout=60)
    env["rnncore info"] = (info.stdout + info.stderr).strip().replace("\n", "; ")
    print("\n".join(f"{k}: {v}" for k, v in env.items()), flush=True)

    checks = [] if (args.no_check or args.dry_run) else accuracy_check(torch, args.rnncore)
    for mode, ok, out in checks:
        print(f"check {mode}: {'ok' if ok else 'FAILED'}\n{out}", flush=True)

    dtypes = [d for d in args.dtypes.split(",") if d]
    unknown = [d for d in dtypes if d not in DTYPES]
    if unknown:
        sys.exit(f"bench_vs_cudnn: unknown dtypes {unknown} (known: {', '.join(DTYPES)})")
    todo = [(c, d) for c in cases([s for s in args.suites.split(",") if s]) for d in case_dtypes(c[0], dtypes)]
    shapes = sorted({model_key(c[1], c[2], c[3], d) for c, d in todo})
    fwd = model_bounds(args.speed_model, args.profile, shapes, False)
    bwd = model_bounds(args.speed_model, args.profile, shapes, True)
    training = not args.no_training

    csv_path, rows, failures = os.path.join(args.out, "bench.csv"), [], 0
    with open(csv_path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS, extrasaction="ignore")
        w.writeheader()
        for case, dtype in todo:
            suite, mode, H, B, T, layers, bidir, varlen = case
            row = {"suite": suite, "mode": mode, "dtype": dtype, "T": T, "B": B, "H": H, "layers": layers,
                   "bidirectional": int(bidir), "varlen": int(varlen)}
            key = model_key(mode, H, B, dtype)
            if key in fwd and suite != "graphs":  # (the model bounds the auto choice, not the forced per-step kernels)
                row["model_ms"] = fwd[key] * T * layers / 1e3
            if key in bwd and training and suite != "graphs":
                row["model_train_ms"] = (fwd.get(key, 0) + bwd[key]) * T * layers / 1e3
            if time.monotonic() - start > args.budget_s:
                row["rnncore_note"] = f"skipped: the {args.budget_s:.0f} s budget was spent"
            elif suite == "graphs":
                row.update(rnncore_graph_pairs(args.rnncore, case, dtype, args.reps, args.case_timeout, args.dry_run))
                if row.pop("usage_error", False):
                    failures += 1
            else:
                row.update(rnncore_bench(args.rnncore, case, dtype, args.reps, training, args.case_timeout, args.dry_run))
                if row.pop("usage_error", False):
                    failures += 1
                if torch is not None:
                    try:
                        row.update(cudnn_time(torch, case, dtype, args.reps, args.warmup, training))
                    except Exception as e:  # a refused configuration, out of memory: note it, go on
                        row["rnncore_note"] = (row.get("rnncore_note", "") + f"; cuDNN: {type(e).__name__}: {e}")[:300]
                        torch.cuda.empty_cache()
            if row.get("rnncore_ms") and row.get("cudnn_ms"):
                row["speedup_vs_cudnn"] = row["cudnn_ms"] / row["rnncore_ms"]
            if row.get("rnncore_train_ms") and row.get("cudnn_train_ms"):
                row["train_speedup_vs_cudnn"] = row["cudnn_train_ms"] / row["rnncore_train_ms"]
            print(json.dumps(row), flush=True)
            w.writerow(row)
            f.flush()
            rows.append(row)

    with open(os.path.join(args.out, "bench.md"), "w") as f:
        f.write(markdown(rows, env, checks, args, time.monotonic() - start))
    missing = [s for s in shapes if s not in fwd]
    if missing:
        print(f"bench_vs_cudnn: the speed model gave no bound for {missing}")
    print(f"wrote {csv_path} and bench.md: {len(rows)} rows, {failures} usage errors, "
          f"{time.monotonic() - start:.0f} s", flush=True)
    return 1 if failures or missing or not all(ok for _, ok, _ in checks) else 0


if __name__ == "__main__":
    sys.exit(main())
