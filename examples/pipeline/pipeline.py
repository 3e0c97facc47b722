#!/usr/bin/env python3
"""One pipeline from training to firmware (docs/python.md, "From training to firmware").

1. A task generated here (seeded): which of four shapes (rising, falling, a peak, a valley) a
   noisy two-channel sequence of 32 steps carries (random amplitude and offset; the second channel
   is noise only).
2. Training in PyTorch: an rnncore.torch.LSTM(2, 16) and an nn.Linear(16, 4) head on the last
   step, Adam, 6 epochs of 1024 sequences: a few seconds on one CPU thread.
3. The float model saved as one safetensors file (the LSTM's `lstm.*` and the head's `fc.*`), read
   back with rnncore.load: the float accuracy.
4. rnncore.quantize: the LSTM to int8 (the TFLite scheme), calibrated on training sequences;
   rnncore.load of the int8 file runs it on the host (rnncore.Int8Model). The head stays float32
   (the Cortex-M4F has an FPU): it reads the dequantized last step.
5. rnncore.export_c: the int8 LSTM as a C header, with the test sequences and the host's int8
   outputs as its sample; the head, the labels and the host's predictions as a second header.
6. The firmware (firmware.c, C99) built for the Cortex-M4F against the library's firmware build
   (cross/arm-none-eabi-cortex-m4f.ini) and run under qemu-system-arm (MPS2-AN386): it runs every
   test sequence through the int8 C API, one step per call, and the float head.

Prints the accuracy of the float model, the host's int8 run and the firmware side by side, and
fails (exit 1) unless every int8 output of the firmware equals the host's, bit for bit, and its
predictions equal the host's.

    python examples/pipeline/pipeline.py [--work DIR] [--m4-build DIR]

Needs: the rnncore package, torch, safetensors; gcc-arm-none-eabi, libnewlib-arm-none-eabi,
qemu-system-arm, meson and ninja for step 6. --m4-build: a configured Cortex-M4F build of this
tree to reuse (default: DIR/build-m4f, set up on first use).
"""

import argparse
import os
import re
import subprocess
import sys
import time

import numpy as np
import torch
from safetensors.numpy import save_file

import rnncore
import rnncore.torch as rt

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
FIRMWARE = os.path.join(REPO, "examples", "firmware")

STEPS, INPUTS, HIDDEN, CLASSES = 32, 2, 16, 4
TRAIN, TEST = 1024, 256
SEED = 2026


def make_task(rows, rng):
    """x [rows, STEPS, INPUTS] float32, labels [rows] int64: channel 0 one of four shapes over the
    sequence (0 rising, 1 falling, 2 a peak in the middle, 3 a valley), with a random amplitude and
    offset and noise; channel 1 noise only."""
    labels = rng.integers(0, CLASSES, rows)
    t = np.linspace(-1, 1, STEPS)
    shapes = np.stack([t, -t, 1 - 2 * np.abs(t), 2 * np.abs(t) - 1])
    amplitude = rng.uniform(0.5, 1.5, (rows, 1))
    offset = rng.uniform(-0.5, 0.5, (rows, 1))
    x = np.empty((rows, STEPS, INPUTS), np.float32)
    x[:, :, 0] = amplitude * shapes[labels] + offset + rng.normal(0, 0.5, (rows, STEPS))
    x[:, :, 1] = rng.normal(0, 0.5, (rows, STEPS))
    return x, labels


class Classifier(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = rt.LSTM(INPUTS, HIDDEN, batch_first=True)
        self.fc = torch.nn.Linear(HIDDEN, CLASSES)

    def forward(self, x):
        y, _ = self.lstm(x)
        return self.fc(y[:, -1])


def train(x, labels):
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    model = Classifier()
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    xt, lt = torch.from_numpy(x), torch.from_numpy(labels)
    order = np.random.default_rng(SEED).permutation
    for epoch in range(6):
        for batch in np.array_split(order(len(x)), len(x) // 64):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(xt[batch]), lt[batch])
            loss.backward()
            opt.step()
    return model, loss.item()


def head_logits(h, w, b):
    """The float32 head as firmware.c computes it: b + Σ_k w[:, k] h[k], k in order, no fused multiply-add."""
    acc = np.tile(b.astype(np.float32), (len(h), 1))
    for k in range(h.shape[1]):
        acc = (acc + w[:, k][None, :] * h[:, k][:, None]).astype(np.float32)
    return acc


def c_array(ctype, name, values, per_line=12):
    flat = [repr(float(v)) + "f" if ctype == "float" else str(int(v)) for v in np.ravel(values)]
    lines = [", ".join(flat[i:i + per_line]) for i in range(0, len(flat), per_line)]
    return f"static const {ctype} {name}[{len(flat)}] = {{\n  " + ",\n  ".join(lines) + "\n};\n"


def write_head_header(path, w, b, scale, zero_point, labels, predictions):
    with open(path, "w") as f:
        f.write("/* Written by examples/pipeline/pipeline.py: the float head on the int8 LSTM's last step, the test\n"
                " * labels and the host's predictions (its int8 run and this head). */\n")
        f.write(f"#define HEAD_CLASSES {w.shape[0]}\n#define HEAD_IN {w.shape[1]}\n")
        f.write(f"#define HEAD_H_SCALE {float(np.float32(scale))!r}f\n#define HEAD_H_ZERO_POINT {zero_point}\n")
        f.write(c_array("float", "head_w", w.astype(np.float32)))
        f.write(c_array("float", "head_b", b.astype(np.float32)))
        f.write(c_array("unsigned char", "test_labels", labels, 32))
        f.write(c_array("unsigned char", "host_predictions", predictions, 32))


def run(cmd, **kw):
    subprocess.run(cmd, check=True, **kw)


def build_firmware(work, m4_build, model_header, head_header):
    """The image: firmware.c with the two headers, the firmware example's MPS2 start-up, linker script
    and semihosting console, and librnncore.a of a Cortex-M4F build."""
    cross = os.path.join(REPO, "cross", "arm-none-eabi-cortex-m4f.ini")
    if not os.path.exists(os.path.join(m4_build, "build.ninja")):
        run(["meson", "setup", m4_build, REPO, "--cross-file", cross], stdout=subprocess.DEVNULL)
    run(["ninja", "-C", m4_build, "librnncore.a"], stdout=subprocess.DEVNULL)
    cpu = ["-mcpu=cortex-m4", "-mthumb", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard"]
    cc = ["arm-none-eabi-gcc", *cpu, "-std=c99", "-Os", "-ffp-contract=off", "-ffunction-sections",
          "-fdata-sections", "-Wall", f"-I{REPO}/include", f"-I{FIRMWARE}", f"-I{work}"]
    objs = []
    for src in (os.path.join(HERE, "firmware.c"), os.path.join(FIRMWARE, "console.c"),
                os.path.join(FIRMWARE, "mps2", "startup.c"), os.path.join(FIRMWARE, "mps2", "semihosting.c")):
        obj = os.path.join(work, os.path.basename(src)[:-2] + ".o")
        run([*cc, f"-DMODEL_HEADER=\"{os.path.basename(model_header)}\"",
             f"-DHEAD_HEADER=\"{os.path.basename(head_header)}\"", "-c", src, "-o", obj])
        objs.append(obj)
    image = os.path.join(work, "pipeline.elf")
    run(["arm-none-eabi-gcc", *cpu, "--specs=nano.specs", "-nostartfiles", f"-T{FIRMWARE}/mps2/mps2.ld",
         "-Wl,--gc-sections", "-o", image, *objs, os.path.join(m4_build, "librnncore.a"), "-lm"])
    return image


def run_firmware(image):
    out = subprocess.run(["qemu-system-arm", "-M", "mps2-an386", "-display", "none", "-serial", "null", "-monitor",
                          "none", "-semihosting", "-kernel", image], stdin=subprocess.DEVNULL,
                         capture_output=True, text=True, timeout=300)
    return out.returncode, out.stdout + out.stderr


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", default="/tmp/rnncore-pipeline", help="scratch directory (default %(default)s)")
    ap.add_argument("--m4-build", help="a Cortex-M4F build of this tree to reuse (default WORK/build-m4f)")
    args = ap.parse_args()
    work = os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    t_start = time.time()

    # 1. the task
    rng = np.random.default_rng(SEED)
    x_train, y_train = make_task(TRAIN, rng)
    x_test, y_test = make_task(TEST, rng)

    # 2. training in PyTorch with rnncore.torch
    t0 = time.time()
    model, loss = train(x_train, y_train)
    print(f"trained: rnncore.torch.LSTM({INPUTS}, {HIDDEN}) + nn.Linear({HIDDEN}, {CLASSES}) on {TRAIN} sequences "
          f"of {STEPS} steps, final loss {loss:.3f}, {time.time() - t0:.1f} s")
    with torch.no_grad():
        torch_pred = model(torch.from_numpy(x_test)).argmax(1).numpy()

    # 3. the float model as one file, run by rnncore.load (the LSTM and its Dense head on the last step)
    float_path = os.path.join(work, "pipeline_f32.safetensors")
    state = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    save_file(state, float_path, metadata={"head_last_step": "1", "head_activation": "none"})
    logits = rnncore.load(float_path).run(np.ascontiguousarray(x_test.transpose(1, 0, 2)))[0]  # [B, CLASSES]
    float_pred = logits.argmax(1)
    if not np.array_equal(float_pred, torch_pred):
        print(f"warning: rnncore.load's predictions differ from PyTorch's in {np.sum(float_pred != torch_pred)} rows")

    # 4. int8: quantized on training sequences (time-major), run on the host
    # The LSTM alone: rnncore.quantize keeps a file's Dense head (int8), and here the head stays float32.
    lstm_path = os.path.join(work, "pipeline_lstm_f32.safetensors")
    save_file({k: v for k, v in state.items() if not k.startswith("fc.")}, lstm_path)
    int8_path = os.path.join(work, "pipeline_int8.safetensors")
    report = rnncore.quantize(lstm_path, x_train[:512].transpose(1, 0, 2), int8_path,
                              eval=x_test.transpose(1, 0, 2))
    q = rnncore.load(int8_path)
    x_q = q.quantize_input(x_test)                        # [B, T, I] int8, as TFLite's QUANTIZE op
    y_q, _, _ = q.run(x_q)                               # [B, T, H] int8
    scale, zero_point = q.output_quantization
    w, b = state["fc.weight"], state["fc.bias"]
    int8_pred = head_logits(q.dequantize(y_q[:, -1]), w, b).argmax(1)
    print(f"quantized: int8 LSTM, {q.kernel}; LSTM output against the float one on the test set: "
          f"SNR {report['eval_accuracy']['snr_db']:.1f} dB, max error {report['eval_accuracy']['max_abs']:.4f}")

    # 5. the C headers
    model_header = os.path.join(work, "pipeline_model.h")
    rnncore.export_c(int8_path, model_header, name="pipeline", sample_input=x_q, sample_output=y_q, interleave=True)
    head_header = os.path.join(work, "pipeline_head.h")
    write_head_header(head_header, w, b, scale, zero_point, y_test, int8_pred)

    # 6. the firmware under qemu-system-arm
    t0 = time.time()
    image = build_firmware(work, os.path.abspath(args.m4_build or os.path.join(work, "build-m4f")), model_header,
                           head_header)
    t_build = time.time() - t0
    t0 = time.time()
    rc, log = run_firmware(image)
    t_run = time.time() - t0
    sys.stdout.write("".join("  firmware> " + line + "\n" for line in log.splitlines()))
    m = re.search(r"^RESULT differ=(\d+) of (\d+) correct=(\d+) predictions_differ=(\d+)", log, re.M)
    if m is None:
        print(f"FAIL: the firmware printed no RESULT line (exit status {rc})")
        return 1
    differ, outputs, fw_correct, pred_differ = (int(g) for g in m.groups())

    acc = lambda pred: np.mean(pred == y_test)  # noqa: E731
    print(f"\naccuracy on {TEST} test sequences (chance {1 / CLASSES:.2f}):")
    print(f"  {'float32, rnncore.load (trained with rnncore.torch)':<52} {acc(float_pred):.4f}")
    print(f"  {'int8 LSTM + float head, host (rnncore.Int8Model)':<52} {acc(int8_pred):.4f}")
    print(f"  {'int8 LSTM + float head, Cortex-M4F firmware (qemu)':<52} {fw_correct / TEST:.4f}")
    print(f"firmware against the host's int8 run: {differ} of {outputs} int8 outputs differ, "
          f"{pred_differ} of {TEST} predictions differ")
    print(f"firmware: built in {t_build:.1f} s, ran in {t_run:.1f} s; whole pipeline {time.time() - t_start:.1f} s")
    ok = rc == 0 and differ == 0 and pred_differ == 0 and outputs == y_q.size
    ok = ok and acc(float_pred) > 0.8 and fw_correct == int(np.sum(int8_pred == y_test))
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
