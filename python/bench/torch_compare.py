"""rnncore.torch against torch.nn on the CPU, side by side: inference and a training step (forward and
backward; again with an input that needs no gradient, as the first layer's input usually does, and with
frozen weights: the input's gradient only), LSTM and GRU, as ratios. A benchmark, never a test.

    python python/bench/torch_compare.py                   # H 256/512, B 1/16/64, T 50, threads 1/2
    python python/bench/torch_compare.py --hidden 256 --batch 1 16 --threads 1 --repeat 5
    OMP_WAIT_POLICY=PASSIVE python python/bench/torch_compare.py --threads 2   # torch's workers sleep at once
    python python/bench/torch_compare.py --weight-dtype f32 bf16 f16   # rnncore's weights stored rounded too

Both sides get the same weights and inputs; torch.set_num_threads and the module's `threads` are set
alike. `--weight-dtype bf16` / `f16` runs rnncore.torch's modules with `weight_dtype=` (weights stored
rounded, f32 accumulation, f32 gradients) against torch.nn in f32 and against torch.nn under
`torch.autocast("cpu", dtype=torch.bfloat16 / float16)` (its products in that type, activations too:
the like-for-like row, "autocast ... ratio"), and prints the largest relative deviation of each one's
inference output from torch.nn's f32 output beside those rows. Prints the median time of `--repeat` runs of
each, alternating, after one warm-up, and torch.nn / rnncore; first the kernel, the load average and
the per-call cost of a small module (LSTM(1, 1) and LSTM(32, 32), T = B = 1), wall-clock and this
thread's CPU time, through the kernel path in use (rnncore.torch.kernel_path()) and, with the C ABI,
through torch's Python API beside it.

Rows on more than one thread are measured twice: with a pause of --gap-ms before each library's turn
(torch's OpenMP workers keep spinning for a while after each torch op, and on a machine with few
cores they take the cores from rnncore's pool, and rnncore's workers from torch's: the gap measures
each library on its own), then back to back ("in program": what a training loop that mixes torch
ops with rnncore.torch's calls sees). The header names the OpenMP wait settings in force.
"""

import argparse
import os
import statistics
import time

import torch

import rnncore
import rnncore.torch as rt


def timed(fns, repeat, gap=0.0):
    """The median time of each of `fns`, run in turn `repeat` times after one warm-up each (alternating, so
    that a shared machine's load falls on both sides alike), each after a pause of `gap` seconds."""
    for fn in fns:
        fn()
    times = [[] for _ in fns]
    for _ in range(repeat):
        for fn, ts in zip(fns, times):
            if gap > 0:
                time.sleep(gap)
            t = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t)
    return [statistics.median(ts) for ts in times]


def case(kind, hidden, batch, seq, threads, repeat, gap_ms, weight_dtype="f32"):
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    ref = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU}[kind](hidden, hidden)
    ours = {"lstm": rt.LSTM, "gru": rt.GRU}[kind](hidden, hidden, threads=threads, weight_dtype=weight_dtype)
    ours.load_state_dict(ref.state_dict())
    x = torch.randn(seq, batch, hidden)
    # With rounded weights, torch.nn is timed twice: in f32, and under CPU autocast to the same type
    # (its matrix products, activations included, in bf16 / f16: like for like).
    autocast = {"f32": None, "bf16": torch.bfloat16, "f16": torch.float16}[weight_dtype]
    tag = "" if autocast is None else f"  [{weight_dtype} W"
    if tag:
        with torch.no_grad():
            y_ref, y = ref(x)[0], ours(x)[0]
            dev = lambda v: ((v - y_ref).abs().max() / y_ref.abs().max()).item()
            try:
                with torch.autocast("cpu", dtype=autocast):
                    tag += f", y {dev(y):.1e}; torch.nn autocast y {dev(ref(x)[0].float()):.1e}]"
            except RuntimeError as e:  # e.g. oneDNN has no f16 LSTM on a CPU without AVX512-FP16
                tag += f", y {dev(y):.1e}; torch.nn refuses autocast to {weight_dtype}: {str(e).splitlines()[0][:60]}]"
                autocast = None
    rows = []
    for what in ("inference", "train step", "train, x no grad", "train, frozen W"):
        def run(m, cast=None):
            with torch.autocast("cpu", dtype=cast or torch.bfloat16, enabled=cast is not None):
                if what == "inference":
                    with torch.no_grad():
                        m(x)
                    return
                for w in m.parameters():
                    w.requires_grad_(what != "train, frozen W")
                y, _ = m(x.requires_grad_(what != "train, x no grad"))
            y.float().sum().backward()
        fns = [lambda: run(ref), lambda: run(ours)] + ([lambda: run(ref, autocast)] if autocast else [])
        if threads > 1 and gap_ms > 0:
            rows.append((what, timed(fns, repeat, gap_ms / 1e3), f"  gap {gap_ms:g} ms"))
        rows.append((what, timed(fns, repeat), "  in program" if threads > 1 else ""))
    for what, t, note in rows:
        cast = "" if len(t) < 3 else f"  autocast {t[2] * 1e3:8.2f} ms  ratio {t[2] / t[1]:5.2f}"
        print(f"{kind:4} H={hidden:4} B={batch:3} T={seq} threads={threads}  {what:16}  torch.nn {t[0] * 1e3:8.2f} ms"
              f"  rnncore {t[1] * 1e3:8.2f} ms  ratio {t[0] / t[1]:5.2f}{cast}{note}{tag}", flush=True)


def per_call(fns, repeat, calls=1000, paths=None):
    """Median seconds per call of each of `fns` (alternating), wall-clock and CPU time of this thread (the
    second is what a busy shared machine disturbs less). paths: each fn's rnncore.torch kernel path
    (True: the stable C ABI), set before its calls."""
    wall, cpu = [[] for _ in fns], [[] for _ in fns]
    paths = paths or [None] * len(fns)
    for fn in fns:
        fn()
    for _ in range(repeat):
        for fn, w, c, abi in zip(fns, wall, cpu, paths):
            if abi is not None:
                rt._use_abi(abi)
            t, u = time.perf_counter(), time.thread_time()
            for _ in range(calls):
                fn()
            c.append((time.thread_time() - u) / calls)
            w.append((time.perf_counter() - t) / calls)
    return [(statistics.median(w), statistics.median(c)) for w, c in zip(wall, cpu)]


def overhead(repeat, hidden=(1, 32)):
    """The Python cost of one call: a small module, one step, one row, no grad (torch.nn's beside it),
    and where rnncore.torch's time goes."""
    torch.set_num_threads(1)
    for h in hidden:
        x = torch.zeros(1, 1, h)
        mods = [torch.nn.LSTM(h, h), rt.LSTM(h, h), rt.LSTM(h, h, weight_check="version")]
        # rnncore.torch's modules through the kernel path in use and, when that is the C ABI, through
        # torch's Python API too (the path of a torch without the ABI), alternating.
        abi = rt.kernel_path() == "stable-abi"
        fns, paths = [lambda m=m: m(x) for m in mods], [None, abi, abi]
        if abi:
            fns, paths = fns + fns[1:], paths + [False, False]
        with torch.no_grad():
            t = per_call(fns, repeat, paths=paths)
        rt._use_abi(abi)
        print(f"per call, LSTM({h}, {h}), one step and row, no grad, wall (thread CPU): torch.nn "
              f"{t[0][0] * 1e6:.1f} ({t[0][1] * 1e6:.1f}) us, rnncore.torch {t[1][0] * 1e6:.1f} ({t[1][1] * 1e6:.1f}) us "
              f"(weight_check='values'), {t[2][0] * 1e6:.1f} ({t[2][1] * 1e6:.1f}) us ('version'), {rt.kernel_path()}")
        if abi:
            print(f"  through torch's Python API instead: {t[3][0] * 1e6:.1f} ({t[3][1] * 1e6:.1f}) us ('values'), "
                  f"{t[4][0] * 1e6:.1f} ({t[4][1] * 1e6:.1f}) us ('version')")
        # Where rnncore.torch's time goes: an empty module's call (nn.Module.__call__, which every module
        # pays); the one extension call (weight check, planning, the kernels, the output tensors); the
        # NumPy API's run of the same net (planning, NumPy outputs, the kernels), the floor of a call;
        # the three torch.empty that the extension call makes for y, h_n and c_n.
        m = mods[1]
        e, w, xs = rt._entry(m._spec), m.all_weights, x.numpy()
        empty = torch.nn.Identity()
        kw = {"dtype": torch.float32}
        parts = {
            "nn.Module call": lambda: empty(x),
            "extension call": lambda: e.infer.tensor_forward(x, w, None, None, None, None, None, False, "inference",
                                                             0, 0, False, False, False),
            "NumPy API run": lambda: e.infer.forward(xs, None, None, None, False, "inference", 0, 0, 0, None, False),
            "three torch.empty": lambda: (torch.empty((1, 1, h), **kw), torch.empty((1, 1, h), **kw),
                                          torch.empty((1, 1, h), **kw)),
        }
        with torch.no_grad():
            t = per_call(list(parts.values()), repeat)
        print("  of which: " + ", ".join(f"{name} {v[0] * 1e6:.1f} ({v[1] * 1e6:.1f}) us"
                                         for name, v in zip(parts, t)) + "; the module's Python the rest")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kind", nargs="+", default=["lstm", "gru"])
    p.add_argument("--hidden", nargs="+", type=int, default=[256, 512])
    p.add_argument("--batch", nargs="+", type=int, default=[1, 16, 64])
    p.add_argument("--seq", type=int, default=50)
    p.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--weight-dtype", nargs="+", default=["f32"], choices=["f32", "bf16", "f16"],
                   help="rnncore.torch's weight storage (torch.nn in f32, and under autocast to the same type); each a row")
    p.add_argument("--gap-ms", type=float, default=20.0,
                   help="pause before each library's turn in the rows on more than one thread, which are then "
                        "also measured back to back ('in program'); 0: back to back only")
    a = p.parse_args()
    info = rnncore.info()
    print(f"rnncore {info['version']}, kernel {info['kernels']['f32']}; torch {torch.__version__}; load average "
          f"{' '.join(f'{v:.1f}' for v in os.getloadavg())}; OpenMP wait: OMP_WAIT_POLICY="
          f"{os.environ.get('OMP_WAIT_POLICY', '(unset)')}, GOMP_SPINCOUNT={os.environ.get('GOMP_SPINCOUNT', '(unset)')}")
    overhead(a.repeat)
    for kind in a.kind:
        for h in a.hidden:
            for b in a.batch:
                for n in a.threads:
                    for wd in a.weight_dtype:
                        case(kind, h, b, a.seq, n, a.repeat, a.gap_ms, wd)


if __name__ == "__main__":
    main()
