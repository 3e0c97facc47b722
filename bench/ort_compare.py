#!/usr/bin/env python3
"""rnncore against ONNX Runtime on the same shapes, alternating, as ratios.

ONNX Runtime runs a one-operator ONNX model (LSTM, GRU with linear_before_reset=1 -- the reset-after
GRU, rnncore's default -- or RNN with Tanh), f32, on the CPU execution provider with
intra_op_num_threads = the thread count. rnncore runs through `rnncore bench` (same T, B, I = H, H,
threads). Each shape is measured in rounds; a round times ONNX Runtime (median of --reps runs after
warm-up) and then rnncore (median of --reps runs, in `rnncore bench`), alternating which goes first,
so that drift on a shared machine hits both. Reported: the median over rounds of each library's
median, and ratio = ORT ms / rnncore ms (> 1: rnncore is faster).

ONNX Runtime is an optional benchmark dependency (pip install onnxruntime onnx numpy); no test needs
it. Usage (from the repository root, after building the tool in release mode):

  python3 bench/ort_compare.py --rnncore build-bench/tools/rnncore [--modes lstm,gru] [--hidden 256,512]
          [--batch 1,16,64] [--threads 1,2] [--seq 100] [--reps 15] [--rounds 3] [--markdown FILE]
          [--rnncore-dtype f16]

--rnncore-dtype f16 (or bf16) times rnncore with that weight storage (f32 accumulation; `rnncore
bench --dtype`) against ONNX Runtime's f32: at batch 1 a step reads all of R, so halving its bytes
is what moves it; the error is stated in docs/performance.md ("Accuracy of reduced-precision
weights").
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
    import numpy as np
    import onnx
    from onnx import TensorProto, helper
    import onnxruntime as ort
except ImportError as e:  # the benchmark's own dependencies, never the library's
    sys.exit(f"ort_compare: {e.name} is missing: pip install onnxruntime onnx numpy")

GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1}
OPS = {"lstm": "LSTM", "gru": "GRU", "rnn_tanh": "RNN"}


def build_model(mode, T, B, I, H):
    """A one-operator ONNX model with random weights, and its input."""
    rng = np.random.default_rng(1)
    G = GATES[mode]
    scale = 1.0 / np.sqrt(H)
    W = (rng.standard_normal((1, G * H, I)) * scale).astype(np.float32)
    R = (rng.standard_normal((1, G * H, H)) * scale).astype(np.float32)
    Bias = (rng.standard_normal((1, 2 * G * H)) * scale).astype(np.float32)
    attrs = {"hidden_size": H}
    if mode == "gru":
        attrs["linear_before_reset"] = 1
    if mode == "rnn_tanh":
        attrs["activations"] = ["Tanh"]
    node = helper.make_node(OPS[mode], ["X", "W", "R", "B"], ["Y", "Y_h"], **attrs)
    graph = helper.make_graph(
        [node], "rnn",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [T, B, I])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [T, 1, B, H]),
         helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, [1, B, H])],
        [helper.make_tensor("W", TensorProto.FLOAT, W.shape, W.ravel()),
         helper.make_tensor("R", TensorProto.FLOAT, R.shape, R.ravel()),
         helper.make_tensor("B", TensorProto.FLOAT, Bias.shape, Bias.ravel())])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = min(model.ir_version, 8)
    x = rng.standard_normal((T, B, I)).astype(np.float32)
    return model.SerializeToString(), x


def ort_session(model_bytes, threads):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])


def time_ort(sess, x, reps, warmup):
    feed = {"X": x}
    for _ in range(warmup):
        sess.run(None, feed)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        sess.run(None, feed)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def time_rnncore(tool, mode, T, B, H, threads, reps, dtype):
    cmd = [tool, "bench", "--mode", mode, "--seq", str(T), "--batch", str(B), "--input", str(H), "--hidden", str(H),
           "--threads", str(threads), "--reps", str(reps), "--dtype", dtype]
    out = subprocess.run(cmd, capture_output=True, text=True)
    m = re.search(r"median_ms=([0-9.eE+-]+)", out.stdout)
    if out.returncode != 0 or m is None:
        sys.exit(f"ort_compare: {' '.join(cmd)} failed:\n{out.stdout}{out.stderr}")
    return float(m.group(1))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rnncore", default="build-bench/tools/rnncore", help="the rnncore tool (release build)")
    p.add_argument("--modes", default="lstm,gru,rnn_tanh")
    p.add_argument("--hidden", default="128,256,512,1024", help="hidden sizes (input size = hidden size)")
    p.add_argument("--batch", default="1,16,64")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--seq", type=int, default=100)
    p.add_argument("--reps", type=int, default=15, help="timed runs per library per round (median)")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds per shape")
    p.add_argument("--markdown", help="also write the table to this file")
    p.add_argument("--rnncore-dtype", default="f32", choices=["f32", "f16", "bf16"],
                   help="rnncore's weight storage (ONNX Runtime stays f32)")
    a = p.parse_args()
    if not os.access(a.rnncore, os.X_OK):
        sys.exit(f"ort_compare: {a.rnncore} is not an executable rnncore tool (build it, or pass --rnncore)")
    for m in a.modes.split(","):
        if m not in GATES:
            sys.exit(f"ort_compare: unknown mode '{m}' (lstm, gru, rnn_tanh)")

    info = subprocess.run([a.rnncore, "info"], capture_output=True, text=True).stdout
    isa = re.search(r"(?m)^f32 kernels:.*$", info)
    header = [f"rnncore vs ONNX Runtime {ort.__version__} (CPUExecutionProvider), f32, T={a.seq}, I=H, "
              f"rnncore weights {a.rnncore_dtype},",
              f"median of {a.reps} runs per round, median over {a.rounds} alternating rounds;",
              f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
              f"RNNCORE_MAX_ISA={os.environ.get('RNNCORE_MAX_ISA', 'unset')}",
              f"rnncore info: {isa.group(0).strip() if isa else 'n/a'}"]
    rows = ["| mode | H | B | threads | ORT ms | rnncore ms | ratio (ORT / rnncore) |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    for line in header:
        print(line)
    print(rows[0])
    print(rows[1])
    for threads in [int(t) for t in a.threads.split(",")]:
        for mode in a.modes.split(","):
            for H in [int(h) for h in a.hidden.split(",")]:
                for B in [int(b) for b in a.batch.split(",")]:
                    model, x = build_model(mode, a.seq, B, H, H)
                    sess = ort_session(model, threads)
                    ort_ms, ours_ms = [], []
                    for r in range(a.rounds):
                        if r % 2 == 0:
                            ort_ms.append(time_ort(sess, x, a.reps, a.warmup))
                            ours_ms.append(time_rnncore(a.rnncore, mode, a.seq, B, H, threads, a.reps, a.rnncore_dtype))
                        else:
                            ours_ms.append(time_rnncore(a.rnncore, mode, a.seq, B, H, threads, a.reps, a.rnncore_dtype))
                            ort_ms.append(time_ort(sess, x, a.reps, a.warmup))
                    o, us = statistics.median(ort_ms), statistics.median(ours_ms)
                    row = f"| {mode} | {H} | {B} | {threads} | {o:.3f} | {us:.3f} | {o / us:.2f} |"
                    rows.append(row)
                    print(row, flush=True)
                    del sess
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write("\n".join(header) + "\n\n" + "\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
