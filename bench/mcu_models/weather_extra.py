#!/tmp/tfenv/bin/python
"""bench/mcu_models/weather_extra.h from make_models.py's weather files (numpy only): the non-zero
initial state and LiteRT's output from it (mcu_model.c), and the float model's Dense layer, float
sample and TensorFlow's float output (weather_f32.c). Run by make_models.py; by hand:
    /tmp/tfenv/bin/python bench/mcu_models/weather_extra.py"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "golden"))
from safetensors_io import load_file  # noqa: E402


def array(ctype, name, a):
    a = np.asarray(a).reshape(-1)
    if a.dtype == np.float32:
        vals = ["%.9gf" % v for v in a]
    else:
        vals = ["%d" % v for v in a]
    rows = [", ".join(vals[i:i + 12]) for i in range(0, len(vals), 12)]
    return "static const %s %s[%d] = {\n  %s,\n};\n" % (ctype, name, len(vals), ",\n  ".join(rows))


def main():
    load = lambda n: np.load(os.path.join(HERE, n))  # noqa: E731
    t, _ = load_file(os.path.join(HERE, "weather_f32.safetensors"))
    out = ["/* Made by bench/mcu_models/weather_extra.py from make_models.py's weather files: do not edit. */",
           "#include <stdint.h>",
           "/* int8: a non-zero initial state (LiteRT's variable tensors set before invoke()) and LiteRT's output. */",
           array("int8_t", "weather_state_h0", load("weather_state_h0.npy")),
           array("int16_t", "weather_state_c0", load("weather_state_c0.npy")),
           array("int8_t", "weather_state_expected_y", load("weather_state_expected_y.npy")),
           "/* float: the Keras Dense layer [1, 32] and bias, the float sample [1, 24, 19] and TensorFlow's output [1, 24, 1]. */",
           array("float", "weather_dense_w", t["dense_w"]),
           array("float", "weather_dense_b", t["dense_b"]),
           array("float", "weather_f32_input", load("weather_f32_input.npy")),
           array("float", "weather_f32_y", load("weather_f32_y.npy"))]
    with open(os.path.join(HERE, "weather_extra.h"), "w") as f:
        f.write("\n".join(out))


if __name__ == "__main__":
    main()
