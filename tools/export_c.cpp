// `rnncore export-c` (tools/export_c.hpp): options in, io::export_c, the header written to --output.
#include "export_c.hpp"

#include <cstdio>
#include <string>

namespace rnncore {
namespace tools {

void define_export_c(CLI::App& app, io::ExportCOptions& o) {
  setup_app(app);
  app.description(
      "Writes a C header for firmware: the weights already packed for the portable scalar kernels (the\n"
      "family NAME_KERNEL_FAMILY, \"f32_rnn__reference\", which Cortex-M builds and a host's plans with\n"
      "max_isa = NAME_MAX_ISA = RNNCORE_ISA_NONE run) as one 64-byte-aligned const object NAME_packed,\n"
      "which rnncore_forward reads in place (no pack step, no RAM for weights; a plan of another family\n"
      "refuses it and says which max_isa matches; NAME_CANONICAL_WEIGHTS are its canonical floats, to\n"
      "pack for another family), the network as 'static const rnncore_spec NAME_spec', and the exact\n"
      "sizes of its plans in that family: NAME_PACKED_BYTES (sizeof NAME_packed), NAME_WORKSPACE_BYTES\n"
      "and NAME_STEP_WORKSPACE_BYTES (max_seq_len 1, for streaming; not for a bidirectional network,\n"
      "which cannot stream).\n"
      "An int8 LSTM model (format tflite_int8; docs/int8.md) gives a header for rnncore/int8.h instead:\n"
      "NAME_quantization, the int8 weights NAME_w and NAME_r, the int32 NAME_bias, the biases folded with\n"
      "the zero points (NAME_folded_bias, for rnncore_int8_lstm_prepare_folded: they can stay in flash),\n"
      "NAME_SCRATCH_BYTES and NAME_STATE_ZERO_POINT; its sample is int8 [B, T, I] (batch-major) and\n"
      "the expected output int8 [B, T, H] ([B, H] for a last-step model). A stack names layer k\n"
      "NAME_l<k>_... (a Keras Bidirectional layer: NAME_l<k>_fw_... and NAME_l<k>_bw_...), Dense layer j\n"
      "NAME_fc<j>_... (a sigmoid or tanh after it: the table NAME_fc<j>_table) and a softmax NAME_softmax.\n"
      "A model that starts with a Keras Embedding gets its table NAME_embedding_table [V, E] (a row copy per\n"
      "token id) and NAME_EMBEDDING_*; its sample is token ids, int32 or int64 [B, T] (NAME_sample_ids).\n"
      "With --interleave every LSTM layer's NAME_w and NAME_r are written in the interleaved layout\n"
      "(rnncore_int8_interleave4, 4-byte aligned; the quantization's weight_layout says so), which the\n"
      "Cortex-M4/M7 DSP kernel reads; NAME_SCRATCH_BYTES is then the larger scratch that layout needs.\n"
      "The layout holds weights -127..127 in odd rows beside negative ones (a -128 there is refused);\n"
      "it changed on 2026-11-25, so headers written with --interleave before must be exported again.\n"
      "An int8 model that one rnncore_stack_spec holds (LSTM layers, at most one Dense layer) also gets\n"
      "the one-call arrays: 'static const rnncore_stack_spec NAME_stack' (int8 in and out) and the\n"
      "weights packed by pack_weights as the const NAME_packed (NAME_PACKED_BYTES; NAME_WORKSPACE_BYTES\n"
      "for the sample's B and T), which rnncore_forward reads in place: row-major, or with --interleave\n"
      "interleaved (plan with int8_weights = RNNCORE_INT8_WEIGHTS_PACKED_INTERLEAVED off a Cortex-M DSP\n"
      "core); a plan of the other layout refuses it and says which int8_weights matches.\n"
      "--interleave-i16 writes both in the int16 panel layout instead (rnncore_int8_interleave4_i16,\n"
      "RNNCORE_INT8_WEIGHTS_INTERLEAVED4_I16; the packed buffer for RNNCORE_INT8_WEIGHTS_PACKED_INTERLEAVED_I16):\n"
      "twice the weight bytes, for the Cortex-M DSP kernel that multiplies them unpacked.\n"
      "--plan adds NAME_plan, NAME_stack planned by this tool's library as a const rnncore_plan for\n"
      "rnncore_forward (no plan RAM); its bytes are this build's (NAME_HAS_PLAN guards the plan size,\n"
      "layer limit, training and pointer width): link the program with a library of the same build.\n"
      "--token-table (a model that starts with an Embedding): NAME_packed holds, per token, layer 0's input\n"
      "parts of the gates (bias + W.e rescaled to int16, [vocab][4H]) in place of W and the Embedding's\n"
      "table, so that each step multiplies R alone, with the same bits; plan with int8_token_table = 1\n"
      "(the header says so: NAME_TOKEN_TABLE).");
  app.add_option("--weights", o.weights, "the model")->required()->type_name("M.safetensors");
  app.add_option("--output", o.output, "the header to write")->required()->type_name("MODEL.h");
  app.add_option("--name", o.name, "C identifier prefix (default: from --output)")->type_name("NAME");
  app.add_option("--max-batch", o.max_batch, "plan sizes for this batch (1..2^20;\ndefault: the sample's, else 1)")
      ->check(int_range(1, 1 << 20))
      ->type_name("B")
      ->default_str("");
  app.add_option("--max-seq-len", o.max_seq_len,
                 "plan sizes for this sequence length (1..2^28;\ndefault: the sample's, else 1)")
      ->check(int_range(1, 1 << 28))
      ->type_name("T")
      ->default_str("");
  CLI::Option* in = app.add_option("--sample-input", o.sample_input,
                                   "also embed a time-major input [T, B, I] as NAME_sample_input\n(int8 models: int8 [B, T, I])")
                        ->type_name("X.npy");
  app.add_option("--sample-output", o.sample_output, "and its expected output [T, B, D*H] as NAME_sample_output")
      ->type_name("Y.npy")
      ->needs(in);
  app.add_flag("--interleave", o.interleave,
               "int8 models: the LSTM weights in the interleaved layout\n(panels of 4 rows; the fast kernel on Cortex-M4/M7)");
  app.add_flag("--plan", o.plan,
               "int8 models: also NAME_plan, NAME_stack planned by this build\nof the library as a const rnncore_plan (no plan RAM;\nonly for programs linked with this build)");
  app.add_flag("--interleave-i16", o.interleave_i16,
               "int8 models: the LSTM weights as int16 panels (pre-widened,\ntwice the weight flash of --interleave, about a fifth fewer\ninstructions on Cortex-M4/M7); implies --interleave");
  app.add_flag("--token-table", o.token_table,
               "int8 models with an Embedding: layer 0's input products per token\nas an int16 table in NAME_packed, in place of W (fewer MACs)");
  add_model_hint_options(app, o.hints);
}

int cmd_export_c(int argc, char** argv) {
  CLI::App app{"", "rnncore export-c"};
  io::ExportCOptions o;
  define_export_c(app, o);
  if (const int rc = parse_command(app, "export-c", argc, argv); rc >= 0) return rc;
  o.hints = model_hints(app, o.hints);
  if (o.interleave_i16) o.interleave = true;
  if (o.name.empty()) o.name = io::c_identifier_from(o.output);
  std::string header, err;
  io::ExportCReport report;
  const Status s = io::export_c(o, &header, &report, &err);
  for (const std::string& note : report.notes) std::fprintf(stderr, "rnncore: note: %s\n", note.c_str());
  if (s != Status::ok) return report.option_error ? usage_error("export-c", err) : error(err);
  std::FILE* out = std::fopen(o.output.c_str(), "w");
  if (out == nullptr) return error(o.output + ": cannot open for writing");
  const bool written = std::fwrite(header.data(), 1, header.size(), out) == header.size();
  if (std::fclose(out) != 0 || !written) return error(o.output + ": cannot write");
  std::printf("%s: %s\n", o.output.c_str(), report.summary.c_str());
  return 0;
}

}  // namespace tools
}  // namespace rnncore
