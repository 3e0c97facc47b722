// mcu_stack_header: an int8 model file (NAME.safetensors of this folder, a `tflite_int8` file) as
// a C header for the one-call firmware (mcu_model_plan.c): the model's rnncore_stack_spec as a
// function that fills one (`NAME_stack`), and its canonical bytes as a const array in flash
// (`NAME_canonical`, rnncore_stack_param_count bytes). The spec and bytes are what
// rnncore::io::load_weights makes of the file (`rnncore run` runs the same), with int8 input and
// output (the firmware feeds int8 rows or token ids and compares int8 outputs with LiteRT's).
//
//   mcu_stack_header NAME.safetensors NAME OUT.h
//
// A bench tool, not the exporter: `rnncore export-c` writes single-layer int8.h arrays today
// (bench/mcu_models/README.md says what it should write for a whole stack).
#include <cstdio>
#include <string>

#include "rnncore/io/model.hpp"
#include "rnncore/rnncore.hpp"

namespace {

using rnncore::QuantParams;

// A float as a C literal that reads back to the same float ("10.0f", "0.00503575476f").
std::string fl(float v) {
  char b[40];
  std::snprintf(b, sizeof b, "%.9g", static_cast<double>(v));
  std::string s = b;
  if (s.find_first_of(".eni") == std::string::npos) s += ".0";
  return s + "f";
}

void quant(std::FILE* f, const std::string& lhs, const QuantParams& q) {
  std::fprintf(f, "  %s.scale = %s;\n  %s.zero_point = %d;\n", lhs.c_str(), fl(q.scale).c_str(),
               lhs.c_str(), static_cast<int>(q.zero_point));
}

void layer(std::FILE* f, const rnncore::LayerSpec& ls, int l) {
  const std::string p = "  s->layers[" + std::to_string(l) + "]";
  std::fprintf(f, "%s.mode = %d;\n%s.hidden_size = %d;\n%s.direction = %d;\n", p.c_str(), static_cast<int>(ls.mode),
               p.c_str(), ls.hidden_size, p.c_str(), static_cast<int>(ls.direction));
  for (int d = 0; d < (ls.direction == rnncore::Direction::bidirectional ? 2 : 1); ++d) {
    const rnncore::Int8LstmQuant& q = ls.int8[d];
    const std::string pd = p.substr(2) + ".int8[" + std::to_string(d) + "]";
    for (int g = 0; g < 4; ++g)
      std::fprintf(f, "  %s.w_scale[%d] = %s;\n  %s.r_scale[%d] = %s;\n", pd.c_str(), g,
                   fl(q.w_scale[g]).c_str(), pd.c_str(), g, fl(q.r_scale[g]).c_str());
    std::fprintf(f, "  %s.per_channel = %d;\n", pd.c_str(), q.per_channel ? 1 : 0);
    quant(f, pd + ".state", q.state);
    quant(f, pd + ".hidden", q.hidden);
    std::fprintf(f, "  %s.cell_scale = %s;\n  %s.cell_clip = %s;\n", pd.c_str(),
                 fl(q.cell_scale).c_str(), pd.c_str(), fl(q.cell_clip).c_str());
  }
  const std::string pm = p.substr(2) + ".merge";
  std::fprintf(f, "  %s.mode = %d;\n", pm.c_str(), static_cast<int>(ls.merge.mode));
  quant(f, pm + ".fw", ls.merge.fw);
  quant(f, pm + ".bw", ls.merge.bw);
  quant(f, pm + ".sum", ls.merge.sum);
  quant(f, pm + ".half", ls.merge.half);
  std::fprintf(f, "  %s.half_value = %d;\n", pm.c_str(), static_cast<int>(ls.merge.half_value));
  quant(f, p.substr(2) + ".int8_output", ls.int8_output);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s MODEL.safetensors NAME OUT.h\n", argv[0]);
    return 2;
  }
  const std::string name = argv[2];
  rnncore::io::LoadedModel m;
  std::string error;
  if (rnncore::io::load_weights(argv[1], rnncore::io::ModelHints{}, nullptr, &m, &error) != rnncore::Status::ok) {
    std::fprintf(stderr, "%s: %s\n", argv[1], error.c_str());
    return 1;
  }
  const rnncore::StackSpec& st = m.stack;
  if (st.dtype != rnncore::DType::i8 || st.reverse_input) {
    std::fprintf(stderr, "%s: not an int8 stack the C spec holds (dtype i8, no reversed input)\n", argv[1]);
    return 1;
  }
  std::FILE* f = std::fopen(argv[3], "w");
  if (f == nullptr) {
    std::perror(argv[3]);
    return 1;
  }
  std::fprintf(f,
               "/* %s as one int8 stack (bench/mcu_models/stack_header.cpp from %s): %s_stack() fills its\n"
               " * rnncore_stack_spec (int8 input and output), %s_canonical holds its canonical bytes. */\n"
               "#include <stdint.h>\n#include \"rnncore/rnncore.h\"\n\n",
               name.c_str(), argv[1], name.c_str(), name.c_str());
  std::fprintf(f, "#define %s_CANONICAL_BYTES %zu\n", name.c_str(), m.canonical.size());
  std::fprintf(f, "static const uint8_t %s_canonical[%zu] __attribute__((aligned(8))) = {", name.c_str(),
               m.canonical.size());
  for (std::size_t i = 0; i < m.canonical.size(); ++i)
    std::fprintf(f, "%s%u,", i % 32 == 0 ? "\n" : "", static_cast<unsigned>(m.canonical[i]));
  std::fprintf(f, "\n};\n\nstatic void %s_stack(rnncore_stack_spec* s) {\n  rnncore_stack_init(s);\n", name.c_str());
  std::fprintf(f, "  s->input_size = %d;\n  s->dtype = RNNCORE_I8;\n  s->num_layers = %d;\n", st.input_size, st.num_layers);
  for (int l = 0; l < st.num_layers; ++l) layer(f, st.layers[l], l);
  std::fprintf(f, "  s->embedding_vocab_size = %d;\n", st.embedding.vocab_size);
  std::fprintf(f, "  s->head_out_features = %d;\n  s->head_activation = %d;\n  s->head_last_step_only = %d;\n",
               st.head.out_features, static_cast<int>(st.head.activation), st.head.last_step_only ? 1 : 0);
  quant(f, "s->input_quant", st.input_quant);
  std::fprintf(f, "  s->float_input = 0;\n  s->float_output = 0;\n");
  std::fprintf(f, "  s->head_int8_per_channel = %d;\n  s->head_int8_w_scale = %s;\n", st.head.int8_per_channel ? 1 : 0,
               fl(st.head.int8_w_scale).c_str());
  quant(f, "s->head_int8_linear", st.head.int8_linear);
  quant(f, "s->head_int8_output", st.head.int8_output);
  std::fprintf(f, "  s->head_int8_softmax_beta = %s;\n}\n", fl(st.head.int8_softmax_beta).c_str());
  return std::fclose(f) == 0 ? 0 : 1;
}
