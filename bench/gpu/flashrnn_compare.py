#!/usr/bin/env python3
"""rnncore's GPU backend against FlashRNN (pip `flashrnn`, NX-AI; its fused CUDA, alternating CUDA and
Triton kernels) on FlashRNN's own grid, on the same GPU in one run (issue 34).

The point: an LSTM, B = 16, T = 1024, bf16, hidden 768, which FlashRNN splits into heads x head_dim
(--heads, default 1x768,12x64,48x16). rnncore's R is dense, so 1x768 is the same model on both sides;
at more heads FlashRNN's recurrence does 1/heads of the work (block-diagonal R), which the table says.

FlashRNN's kernels take the input projection Wx = x W^T precomputed; so that both sides do the same
work, its "layer" times add a PyTorch bf16 Linear (x -> 4 x 768) to the recurrence, and its
"recurrence" times are the kernel alone. Times are CUDA-event medians of --reps after --warmup (the
first call compiles: its seconds are the compile_s column). The training step is forward + backward
of h.sum() with every weight requiring a gradient. Each FlashRNN case runs in a child process with a
time limit (the JIT compile can take minutes or fail: the row then says why) and checks its output
against PyTorch's nn.LSTM (cuDNN, f32) on the same weights (heads as a block-diagonal R).

rnncore: `rnncore bench --backend gpu` at the dense point with f32 weights, bf16 weight storage with
f32 math (the direct kernel), and bf16 with --gpu-half-math (the matrix units).

The device has no network: FlashRNN and what it imports (bench/gpu/flashrnn_requirements.txt) come as
wheels in the kit (bench/gpu/prepare_kit.sh downloads them into KIT/wheels) and are unpacked into a
temporary folder here.

--dry-run (a CPU, a PyTorch): FlashRNN's pure-PyTorch backend ("vanilla") on a small LSTM against
nn.LSTM, which checks how this script lays out Wx, R and b, and rnncore's command lines; no timing.

Writes OUT/flashrnn.csv (a row per side, heads, backend) and OUT/flashrnn.md.

  python3 bench/gpu/flashrnn_compare.py --kit build-kit --out /tmp/o
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_vs_cudnn  # noqa: E402  (rnncore_bench_once, cuda_median_ms)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
B, T, HIDDEN = 16, 1024, 768
FIELDS = ("side", "heads", "backend", "layer_ms", "recurrence_ms", "train_ms", "compile_s", "max_err", "note")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kit", default=os.path.join(ROOT, "build-kit"), help="the device kit: rnncore, wheels/")
    p.add_argument("--rnncore", help="rnncore built with -Dgpu=cuda (default: KIT/rnncore)")
    p.add_argument("--heads", default="1x768,12x64,48x16", help="FlashRNN's heads x head_dim (product 768)")
    p.add_argument("--backends", default="cuda_fused,cuda,triton_fused", help="FlashRNN's backends")
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--budget-s", type=float, default=300, help="start no case after this many seconds")
    p.add_argument("--case-timeout", type=float, default=150, help="seconds for one FlashRNN case (compile included)")
    p.add_argument("--dry-run", action="store_true", help="CPU: FlashRNN's vanilla backend against nn.LSTM, no timing")
    p.add_argument("--out", required=True)
    p.add_argument("--child", nargs=3, metavar=("BACKEND", "HEADS", "HEAD_DIM"), help=argparse.SUPPRESS)
    return p.parse_args()


def install_wheels(kit):
    """FlashRNN and what it imports, from KIT/wheels, unpacked into a temporary folder for sys.path
    (pure-Python wheels are zip files of the package folders: no pip, no environment touched)."""
    wheels = os.path.join(kit, "wheels")
    found = sorted(f for f in os.listdir(wheels) if f.endswith(".whl")) if os.path.isdir(wheels) else []
    if not any(f.startswith("flashrnn-") for f in found):
        sys.exit(f"flashrnn_compare: no FlashRNN wheel in {wheels} (bench/gpu/prepare_kit.sh downloads it)")
    target = tempfile.mkdtemp(prefix="flashrnn_")
    for f in found:
        with zipfile.ZipFile(os.path.join(wheels, f)) as z:
            z.extractall(target)
    return target


# ------------------------------------------------------------------------------ FlashRNN (child)

def flashrnn_inputs(torch, heads, head_dim, batch, seq, device, dtype):
    """x, the dense input weight W [4 H, H], FlashRNN's R [4, heads, head_dim (out), head_dim (in)]
    and b [4, heads, head_dim]; gates in FlashRNN's (and PyTorch's) order i, f, g (z), o."""
    g = torch.Generator().manual_seed(7)
    hidden = heads * head_dim
    x = torch.randn(batch, seq, hidden, generator=g)
    W = torch.randn(4 * hidden, hidden, generator=g) / hidden ** 0.5
    R = torch.randn(4, heads, head_dim, head_dim, generator=g) / head_dim ** 0.5
    b = torch.randn(4, heads, head_dim, generator=g) * 0.1
    return [t.to(device=device, dtype=dtype) for t in (x, W, R, b)]


def flashrnn_layer(torch, flashrnn, backend, dtype_name, x, W, R, b):
    """h [B, T, H]: the input projection (a Linear) and FlashRNN's recurrence from zero state."""
    batch, seq, hidden = x.shape
    heads, head_dim = R.shape[1], R.shape[2]
    Wx = torch.nn.functional.linear(x, W).view(batch, seq, 4, heads, head_dim)
    h, _ = flashrnn(Wx, R, b, function="lstm", backend=backend, dtype=dtype_name)
    return h[0].reshape(batch, seq, hidden)  # states (h, c) first: [S, B, T, heads, head_dim]


def reference_max_err(torch, x, W, R, b, h):
    """Largest |h - nn.LSTM's h|, nn.LSTM in f32 on the same weights (FlashRNN's heads as a
    block-diagonal R: each gate's [hidden, hidden] block holds the heads' blocks on its diagonal)."""
    hidden = x.shape[2]
    lstm = torch.nn.LSTM(hidden, hidden, batch_first=True).to(device=x.device, dtype=torch.float32)
    with torch.no_grad():
        lstm.weight_ih_l0.copy_(W.float())
        lstm.weight_hh_l0.copy_(torch.cat([torch.block_diag(*R[g].float().unbind(0)) for g in range(4)]))
        lstm.bias_ih_l0.copy_(b.float().reshape(-1))
        lstm.bias_hh_l0.zero_()
        ref = lstm(x.float())[0]
    return float((h.float() - ref).abs().max())


def child(args):
    """One FlashRNN case: prints one JSON line (FIELDS' FlashRNN columns)."""
    import torch
    from flashrnn import flashrnn
    backend, heads, head_dim = args.child[0], int(args.child[1]), int(args.child[2])
    row = {"side": "flashrnn", "heads": f"{heads}x{head_dim}", "backend": backend}
    if args.dry_run:
        x, W, R, b = flashrnn_inputs(torch, heads, head_dim, 3, 5, "cpu", torch.float32)
        h = flashrnn_layer(torch, flashrnn, backend, "float32", x, W, R, b)
        row["max_err"] = reference_max_err(torch, x, W, R, b, h)
        print(json.dumps(row), flush=True)
        return
    x, W, R, b = flashrnn_inputs(torch, heads, head_dim, B, T, "cuda", torch.bfloat16)
    t0 = time.time()
    with torch.no_grad():
        h = flashrnn_layer(torch, flashrnn, backend, "bfloat16", x, W, R, b)
        torch.cuda.synchronize()
        row["compile_s"] = round(time.time() - t0, 1)
        row["max_err"] = reference_max_err(torch, x, W, R, b, h)
        row["layer_ms"] = bench_vs_cudnn.cuda_median_ms(
            torch, lambda: flashrnn_layer(torch, flashrnn, backend, "bfloat16", x, W, R, b), args.reps, args.warmup)
        Wx = torch.nn.functional.linear(x, W).view(B, T, 4, heads, head_dim)
        row["recurrence_ms"] = bench_vs_cudnn.cuda_median_ms(
            torch, lambda: flashrnn(Wx, R, b, function="lstm", backend=backend, dtype="bfloat16"), args.reps, args.warmup)
    params = [t.detach().clone().requires_grad_(True) for t in (W, R, b)]

    def step():
        for p in params:
            p.grad = None
        flashrnn_layer(torch, flashrnn, backend, "bfloat16", x, *params).float().sum().backward()
    try:
        row["train_ms"] = bench_vs_cudnn.cuda_median_ms(torch, step, args.reps, args.warmup)
    except Exception as e:  # a backend without a backward: the forward's rows stand
        row["note"] = f"training step: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
    print(json.dumps(row), flush=True)


def run_child(args, target, backend, heads, head_dim, timeout):
    cmd = [sys.executable, os.path.abspath(__file__), "--out", args.out, "--reps", str(args.reps),
           "--warmup", str(args.warmup), "--child", backend, str(heads), str(head_dim)] + (["--dry-run"] if args.dry_run else [])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([target, os.environ.get("PYTHONPATH", "")]),
               CUDA_LIB=os.environ.get("CUDA_LIB", "/usr/local/cuda/lib64"),
               TORCH_EXTENSIONS_DIR=os.path.join(target, "torch_extensions"))
    row = {"side": "flashrnn", "heads": f"{heads}x{head_dim}", "backend": backend}
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return dict(row, note=f"timed out after {timeout:.0f} s (compile included)")
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode != 0 or not lines:
        tail = [ln for ln in (r.stderr or r.stdout).strip().splitlines() if ln.strip()][-1:] or ["no output"]
        return dict(row, note=f"exit {r.returncode}: {tail[0][:300]}")
    return json.loads(lines[-1])


# ------------------------------------------------------------------------------ rnncore

def rnncore_rows(args):
    exe = args.rnncore or os.path.join(args.kit, "rnncore")
    case = ("flashrnn", "lstm", HIDDEN, B, T, 1, False, False)
    rows = []
    for name, dtype, half in (("f32 weights", "f32", False), ("bf16 weights, f32 math", "bf16", False),
                              ("bf16 weights, --gpu-half-math", "bf16", True)):
        out = bench_vs_cudnn.rnncore_bench_once(exe, case, dtype, args.reps, True, 120, args.dry_run, half_math=half)
        if "rnncore_ms" not in out and not out.get("usage_error") and "timed out" not in out["rnncore_note"]:
            refused = out["rnncore_note"]  # the training step refused: inference alone
            out = bench_vs_cudnn.rnncore_bench_once(exe, case, dtype, args.reps, False, 120, args.dry_run, half_math=half)
            out["rnncore_note"] = (out["rnncore_note"] + "; training step: " + refused).strip("; ")
        if out.get("usage_error"):
            sys.exit(f"flashrnn_compare: rnncore bench's command line is wrong: {out['rnncore_note']}")
        rows.append({"side": "rnncore", "heads": f"1x{HIDDEN}", "backend": name, "layer_ms": out.get("rnncore_ms"),
                     "train_ms": out.get("rnncore_train_ms"), "note": out["rnncore_note"]})
    return rows


# ------------------------------------------------------------------------------ report

def fmt(v, digits=2):
    """A cell: blank for none, floats with `digits` decimals ('e': one decimal, in exponent form)."""
    if v is None or v == "":
        return ""
    if not isinstance(v, float):
        return str(v)
    return f"{v:.1e}" if digits == "e" else f"{v:.{digits}f}"


def write_report(args, rows, env_line):
    with open(os.path.join(args.out, "flashrnn.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k) for k in FIELDS})
    best = {r["side"]: r for r in sorted((r for r in rows if r.get("layer_ms")), key=lambda r: r["layer_ms"], reverse=True)
            if r["heads"] == f"1x{HIDDEN}"}
    lines = [f"# rnncore against FlashRNN: LSTM B = {B}, T = {T}, hidden {HIDDEN}, bf16" + (" (dry run)" if args.dry_run else ""),
             "", env_line, "",
             "layer = input projection + recurrence (FlashRNN: a PyTorch Linear + its kernel); ms, CUDA-event medians of "
             f"{args.reps}; at more than one head FlashRNN's R is block-diagonal (1/heads of the recurrent work).", "",
             "| side | heads | backend | layer ms | recurrence ms | training step ms | compile s | max err vs nn.LSTM | note |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {r['side']} | {r['heads']} | {r['backend']} | {fmt(r.get('layer_ms'))} | {fmt(r.get('recurrence_ms'))} | "
              f"{fmt(r.get('train_ms'))} | {fmt(r.get('compile_s'), 1)} | {fmt(r.get('max_err'), 'e')} | {r.get('note') or ''} |"
              for r in rows]
    if "rnncore" in best and "flashrnn" in best:
        lines += ["", f"Dense point (1x{HIDDEN}), each side's fastest layer: FlashRNN ({best['flashrnn']['backend']}) / rnncore "
                  f"({best['rnncore']['backend']}) = {best['flashrnn']['layer_ms'] / best['rnncore']['layer_ms']:.2f} (above 1: rnncore faster)"]
    with open(os.path.join(args.out, "flashrnn.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)


def main():
    args = parse_args()
    if args.child:
        return child(args)
    os.makedirs(args.out, exist_ok=True)
    start = time.time()
    target = install_wheels(args.kit)
    import torch  # noqa: F401  (the children import it too; here only for the environment line)
    env_line = f"torch {torch.__version__}, " + (torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU")
    rows = rnncore_rows(args)
    backends = ["vanilla"] if args.dry_run else args.backends.split(",")
    for spec in args.heads.split(","):
        heads, head_dim = (int(v) for v in spec.split("x"))
        for backend in backends:
            left = args.budget_s - (time.time() - start)
            if left < 20:
                rows.append({"side": "flashrnn", "heads": spec, "backend": backend, "note": "skipped: budget spent"})
                continue
            rows.append(run_child(args, target, backend, heads, head_dim, min(args.case_timeout, left)))
            print(json.dumps(rows[-1]), flush=True)
    write_report(args, rows, env_line)
    if args.dry_run:
        flash = [r for r in rows if r["side"] == "flashrnn"]
        if not flash or any(r.get("note") or r.get("max_err") is None or r["max_err"] > 1e-5 for r in flash):
            sys.exit(f"flashrnn_compare: the dry run failed: {flash}")


if __name__ == "__main__":
    main()
