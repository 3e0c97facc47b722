#!/usr/bin/env python3
"""rnncore's int8 LSTM step against LiteRT's integer LSTM on the same shapes, as ratios.

LiteRT runs a Keras LSTM(H) (I = H, B = 1, every step returned) converted by TensorFlow's TFLite
converter to a full-integer model (int8 I/O; the fused UNIDIRECTIONAL_SEQUENCE_LSTM, 8x8_16), on
one thread (`tf.lite.Interpreter(num_threads=1)`, the default op resolver); the time per step is
the median invoke over T steps. rnncore runs `bench/int8_lstm_bench` (built with the library) at
the same H, whose fastest kernel row gives its time per step (median of --reps sequences, thread
CPU time; the step is the same for any weights). Both are timed in the thread's CPU time. Each H is
measured in rounds, alternating which goes first; reported: the median over rounds of the fastest
kernel and of the AVX2 kernel (what a machine without VNNI gets), and ratio = LiteRT µs / rnncore µs
(> 1: rnncore faster). LiteRT and rnncore compute the same bits (docs/int8.md); this compares only speed.

TensorFlow is a benchmark-only dependency (a venv as tests/golden/make_tflite_int8_golden.py's):
  /tmp/tfenv/bin/python bench/litert_int8_compare.py --bench build/bench/int8_lstm_bench \\
      [--hidden 32,128,512,1024] [--steps 64] [--reps 15] [--rounds 3] [--markdown FILE]
"""
import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import time

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
try:
    import numpy as np
    import tensorflow as tf
    import tf_keras as keras
except ImportError as e:  # the benchmark's own dependencies, never the library's
    sys.exit(f"litert_int8_compare: {e.name} is missing: pip install tensorflow-cpu tf-keras numpy")


def litert_model(H, T):
    """A full-integer LSTM(H) model with input [1, T, H] (seeded weights and calibration)."""
    tf.keras.utils.set_random_seed(H)
    rng = np.random.default_rng(H)
    inp = keras.Input(shape=(T, H), batch_size=1)
    model = keras.Model(inp, keras.layers.LSTM(H, return_sequences=True)(inp))
    calib = [rng.standard_normal((1, T, H)).astype(np.float32) for _ in range(16)]
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = lambda: ([c] for c in calib)
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = tf.int8
    conv.inference_output_type = tf.int8
    return conv.convert()


def litert_step_us(fb, H, T, reps):
    """Median µs per step of one invoke over T steps (fresh state each time)."""
    it = tf.lite.Interpreter(model_content=fb, num_threads=1)
    it.allocate_tensors()
    ops = [o["op_name"] for o in it._get_ops_details()]
    assert "UNIDIRECTIONAL_SEQUENCE_LSTM" in ops, ops
    idx = it.get_input_details()[0]["index"]
    x = np.random.default_rng(0).integers(-128, 128, (1, T, H)).astype(np.int8)
    times = []
    for r in range(reps + 1):
        it.reset_all_variables()
        it.set_tensor(idx, x)
        t0 = time.thread_time()  # CPU time, as int8_lstm_bench's: a shared machine's waits left out
        it.invoke()
        if r > 0:  # the first is the warm-up
            times.append(time.thread_time() - t0)
    return statistics.median(times) / T * 1e6


def rnncore_step_us(bench, H, reps):
    """µs per step in int8_lstm_bench: {kernel name: µs} of every kernel the CPU has, each with the
    step kernels prepare picks (a kernel's first row; the fastest's second row has the scalar rest)."""
    out = subprocess.run([bench, "--reps", str(reps), str(H)], check=True, capture_output=True, text=True).stdout
    us = {}
    for line in out.splitlines():
        m = re.match(r"\s*\d+\s+\d+\s+(i8_dot_\d\S*)(?: \+ .+?)?\s{2,}([\d.]+)\s", line)
        if m and m.group(1) not in us:
            us[m.group(1)] = float(m.group(2))
    return us


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bench", default="build/bench/int8_lstm_bench")
    ap.add_argument("--hidden", default="32,128,512,1024")
    ap.add_argument("--steps", type=int, default=64, help="T of the LiteRT model")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--markdown", help="also write the table to this file")
    args = ap.parse_args()
    rows = []
    for H in (int(h) for h in args.hidden.split(",")):
        fb = litert_model(H, args.steps)
        lite, ours = [], []
        for r in range(args.rounds):
            order = ("litert", "rnncore") if r % 2 == 0 else ("rnncore", "litert")
            for who in order:
                if who == "litert":
                    lite.append(litert_step_us(fb, H, args.steps, args.reps))
                else:
                    ours.append(rnncore_step_us(args.bench, H, args.reps))
        l = statistics.median(lite)
        med = {k: statistics.median(o[k] for o in ours) for k in ours[0]}
        best = min(med, key=med.get)
        avx2 = med.get("i8_dot_4x16__avx2")
        rows.append((H, l, med[best], best, avx2))
        print(f"H={H:5d}  LiteRT {l:9.2f} us/step  rnncore {med[best]:9.2f} us/step ({best})  ratio {l / med[best]:6.2f}"
              + (f"  (AVX2 kernel: {avx2:.2f}, ratio {l / avx2:.2f})" if avx2 else ""), flush=True)
    lines = [f"LiteRT {tf.__version__} (num_threads=1) vs rnncore int8_lstm_bench, I = H, B = 1, LiteRT T = {args.steps}, "
             f"thread CPU time; {platform.processor() or platform.machine()}; medians of {args.rounds} rounds",
             "", "| H | LiteRT µs/step | rnncore µs/step | rnncore kernel | LiteRT / rnncore | rnncore AVX2 kernel µs/step | LiteRT / AVX2 |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {H} | {l:.2f} | {o:.2f} | `{k}` | {l / o:.2f} | " + (f"{a:.2f} | {l / a:.2f} |" if a else "– | – |")
              for H, l, o, k, a in rows]
    print("\n".join(lines))
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
