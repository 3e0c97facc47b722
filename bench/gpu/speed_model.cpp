// speed_model: what bounds one time step of rnncore's GPU recurrence on a device, in place of a
// timing where no GPU can be reached (issue 14, item 6; docs/gpu.md "Speed model").
//
// For each device profile (src/gpu/host/device_profiles.hpp) and shape, the backend's own planner
// (gpu::plan_for_device, the modeled occupancy) chooses the recurrence kernel; the model then takes,
// per time step and direction:
//   FLOPs       2·G·H·H·B for R·h (the input projection of all steps is one GEMM before the
//               recurrence, reported apart as a per-step share at the f32 rate);
//   weights     G·H·Hs elements of R in the plan's storage type, read once per step, from
//               - shared memory / LDS, for the persistent kernel (the slice stays on chip); its
//                 bandwidth is 128 bytes per clock per multiprocessor on every profile;
//               - L2, for the per-step kernel when R fits in half the L2 (bandwidth: an assumption,
//                 2.5× HBM, stated in the output);
//               - HBM otherwise;
//   latency     the assumed cost of one grid barrier (persistent: 1 µs, two for the reset-before
//               GRU) or one kernel launch (per step: 3 µs, two for the reset-before GRU); with
//               graph replay (RNNCORE_GPU_GRAPHS=on, src/gpu/host/graph.hpp) the per-step kernels
//               are nodes of one graph, assumed 1 µs each back to back (the "graph" column; the
//               persistent kernel is never captured, so its rows do not change).
// bound = max(FLOPs at the f32 rate of the multiprocessors the grid occupies, weight bytes at the
// tier's bandwidth) + latency. Shapes marked "half math" plan with PlanOptions::gpu_half_math: where
// the per-step recurrence runs on the matrix units (rnn_step_mma_16x16, batch ≥ 8), the
// compute term counts the batch padded to 16 rows at the profile's f16 matrix rate of the
// multiprocessors its blocks occupy (R from L2 or HBM, as the per-step kernel), and the projection's
// share is at that rate too where it runs on them (with f32 weights: TF32 on NVIDIA, at the
// profile's TF32 rate). The persistent kernel on the matrix units (rnn_recurrence_persistent_mma,
// batch 8 to 16) counts one 16-row tile, its blocks' whole units and k in chunks of 32 at that
// rate, R from shared memory as the f32 persistent kernel (TF32 slices: 4 bytes an element), one
// grid barrier per step (two for the reset-before GRU); its occupancy is modelled with the f32
// persistent kernel's registers of the profile. A lower bound for these kernels, not a prediction: the kernels'
// instruction mix, bank conflicts and the h broadcast are not modelled. Printed beside cuDNN's
// published anchors.
//
// --backward: the same bound for one step of backward through time (src/gpu/host/backward.hpp) as
// auto runs it: per step the cell kernel and dh += dpre · R (2·G·H·H·B FLOPs, R read once from L2
// or HBM), 2 launches (3 for the reset-after GRU, 4 for the reset-before); the weight and input
// gradients are products over all steps after the recurrence, reported as a per-step share at the
// f32 rate (2·G·H·(2·I + H)·B FLOPs). --backward-persistent: the same with a forced persistent
// recurrence, where the training plan has a slice for backward's persistent kernel
// (f32_<cell>_grad_persistent, B ≤ 16): R's columns from shared memory of the multiprocessors its
// blocks occupy, the f32 rate of those, one grid barrier a step (its occupancy modelled with the
// forward persistent kernel's registers of the profile, as the forward's).
//
// --profile NAME: only that profile (a name or arch: "H100 SXM", "sm_90", "gfx942", ...; "H200": the H100's
// multiprocessors and rates with the H200's 4.8 TB/s HBM and the 60 MB of L2 PyTorch reported on
// one), --shape MODE:H:B:WEIGHTS[:half] (repeatable; e.g. lstm:512:16:f16:half): only those
// shapes. The device kit (bench/gpu/device_run.sh, bench_vs_cudnn.py) asks this way for the bound
// beside each measurement.
//
// usage: speed_model [--csv] [--backward | --backward-persistent] [--profile NAME] [--shape MODE:H:B:WEIGHTS[:half]]...
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <iterator>
#include <vector>

#include "src/gpu/host/device_profiles.hpp"
#include "src/gpu/host/plan.hpp"
#include "src/internal/plan_impl.hpp"

using namespace rnncore;

namespace {

constexpr double kGridBarrierUs = 1.0;     // assumption: one grid-wide barrier
constexpr double kLaunchUs = 3.0;          // assumption: one kernel launch, back to back on a stream
constexpr double kGraphNodeUs = 1.0;       // assumption: one kernel node of a replayed graph, back to back
constexpr double kL2OverHbm = 2.5;         // assumption: L2 bandwidth as a multiple of HBM's
constexpr double kSmemBytesPerClock = 128; // shared memory / LDS bytes per clock per multiprocessor

struct ModelShape {
  Mode mode;
  int hidden;
  int batch;
  DType weights;
  bool half_math = false;  ///< PlanOptions::gpu_half_math
};

struct Row {
  std::string kernel, where;
  double flops = 0, weight_bytes = 0, compute_us = 0, memory_us = 0, latency_us = 0, bound_us = 0, proj_us = 0;
  double graph_bound_us = 0;  ///< bound_us with the per-step launches replayed from a graph
  int blocks = 0;
};

std::string weights_label(const ModelShape& sh) { return std::string(to_string(sh.weights)) + (sh.half_math ? " half math" : ""); }

double clock_ghz(const gpu::DeviceProfile& p) {
  // Boost clocks of the data sheets (H100 SXM 1.98, A100 1.41, MI250X 1.7, MI300X 2.1 GHz).
  const std::string arch = p.device.arch;
  return arch == "sm_90" ? 1.98 : arch == "sm_80" ? 1.41 : arch == "gfx90a" ? 1.7 : 2.1;
}

/// The backend's plan of one layer of `sh` (I = H) on `prof`: training with a forced recurrence, or
/// inference with auto's choices.
bool plan_shape(const gpu::DeviceProfile& prof, const ModelShape& sh, bool training, gpu::Recurrence recurrence, Plan* plan) {
  RnnSpec spec;
  spec.mode = sh.mode;
  spec.input_size = sh.hidden;
  spec.hidden_size = sh.hidden;
  PlanOptions opt;
  opt.max_batch = sh.batch;
  opt.max_seq_len = 100;
  opt.weight_dtype = sh.weights;
  opt.gpu_half_math = sh.half_math;
  opt.training = training;
  gpu::DescribedDevice on;
  on.device = prof.device;
  on.registers = prof.persistent_registers;
  on.choices.recurrence = recurrence;
  return gpu::plan_for_device(to_stack(spec), opt, on, plan) == Status::ok;
}

bool model(const gpu::DeviceProfile& prof, const ModelShape& sh, Row* row) {
  Plan plan;
  if (!plan_shape(prof, sh, false, gpu::Recurrence::auto_select, &plan)) return false;
  const detail::PlanImpl& p = detail::impl(plan);
  const detail::LayerPlan& lp = p.layers[0];
  const double G = lp.gates, H = lp.hidden, Hs = lp.hidden_stride, B = sh.batch;
  const double wb = sh.weights == DType::f32 ? 4 : 2;
  const bool two_phase = lp.cell == simd::Cell::gru_reset_before;
  const int mma_units = gpu::persistent_mma_units(p.gpu, 0, sh.batch);
  const int units = mma_units > 0 ? 0 : gpu::persistent_units(p.gpu, 0, sh.batch);
  row->flops = 2 * G * H * H * B;
  row->weight_bytes = G * H * Hs * wb;
  const double sm_gflops = prof.f32_tflops * 1e3 / prof.device.sm_count;  // GFLOP/s per multiprocessor
  // The matrix units' rate for the plan's operands: TF32 for f32 weights (NVIDIA only), else f16 / bf16.
  const double matrix_tflops = p.gpu.weights == gpu::kWeightF32 ? prof.tf32_matrix_tflops : prof.f16_matrix_tflops;
  double sms_used, bandwidth_gbs, rate_gflops = sm_gflops, padded = 1;
  if (mma_units > 0) {
    row->kernel = "persistent on matrix units";
    row->blocks = static_cast<int>((lp.hidden + mma_units - 1) / mma_units);
    sms_used = std::min<double>(prof.device.sm_count, row->blocks);
    rate_gflops = matrix_tflops * 1e3 / prof.device.sm_count;
    const double k_computed = std::ceil(Hs / 32) * 32;  // one 16-row tile, whole blocks of units, k chunks of 32
    padded = gpu::kMmaDim * static_cast<double>(row->blocks) * mma_units * k_computed / (B * H * H);
    bandwidth_gbs = kSmemBytesPerClock * clock_ghz(prof) * sms_used;
    row->where = std::string(gpu::vendor_of(prof.device)) == "hip" ? "LDS of " + std::to_string(static_cast<int>(sms_used)) + " CUs"
                                                                   : "shared memory of " + std::to_string(static_cast<int>(sms_used)) + " SMs";
    row->latency_us = kGridBarrierUs * (two_phase ? 2 : 1);
  } else if (units == 0 && gpu::use_mma_step(p.gpu, sh.batch)) {
    const int unit_tiles = (lp.hidden + gpu::kMmaDim - 1) / gpu::kMmaDim, row_tiles = (sh.batch + gpu::kMmaDim - 1) / gpu::kMmaDim;
    row->kernel = "per step on matrix units";
    row->blocks = unit_tiles * row_tiles;
    sms_used = std::min<double>(prof.device.sm_count, row->blocks);
    rate_gflops = matrix_tflops * 1e3 / prof.device.sm_count;
    const int kbk = gpu::rnn_step_mma_16x16<gpu::kLstm, 0, 4, 0, gpu::WeightF16>::kBK;
    const double k_computed = std::ceil(Hs / kbk) * kbk;  // rows, units and k the tiles compute
    padded = static_cast<double>(row_tiles) * gpu::kMmaDim * unit_tiles * gpu::kMmaDim * k_computed / (B * H * H);
    const bool in_l2 = row->weight_bytes <= prof.l2_bytes / 2;
    bandwidth_gbs = in_l2 ? prof.memory_gbs * kL2OverHbm : prof.memory_gbs;
    row->where = in_l2 ? "L2" : "HBM";
    row->latency_us = kLaunchUs * (two_phase ? 2 : 1);
  } else if (units > 0) {
    row->kernel = "persistent";
    row->blocks = static_cast<int>((lp.hidden + units - 1) / units);
    // The block scheduler spreads a grid no larger than the device one block per multiprocessor.
    sms_used = std::min<double>(prof.device.sm_count, row->blocks);
    bandwidth_gbs = kSmemBytesPerClock * clock_ghz(prof) * sms_used;
    row->where = std::string(gpu::vendor_of(prof.device)) == "hip" ? "LDS of " + std::to_string(static_cast<int>(sms_used)) + " CUs"
                                                                   : "shared memory of " + std::to_string(static_cast<int>(sms_used)) + " SMs";
    row->latency_us = kGridBarrierUs * (two_phase ? 2 : 1);
  } else {
    row->kernel = "per step";
    sms_used = prof.device.sm_count;
    const bool in_l2 = row->weight_bytes <= prof.l2_bytes / 2;
    bandwidth_gbs = in_l2 ? prof.memory_gbs * kL2OverHbm : prof.memory_gbs;
    row->where = in_l2 ? "L2" : "HBM";
    row->latency_us = kLaunchUs * (two_phase ? 2 : 1);
  }
  row->compute_us = row->flops * padded / (rate_gflops * sms_used * 1e3);
  row->memory_us = row->weight_bytes / (bandwidth_gbs * 1e3);
  row->bound_us = std::max(row->compute_us, row->memory_us) + row->latency_us;
  const bool per_step = mma_units == 0 && units == 0;  // (the persistent kernels' grid barriers stay)
  row->graph_bound_us = per_step ? row->bound_us - row->latency_us + kGraphNodeUs * (two_phase ? 2 : 1) : row->bound_us;
  const double proj_tflops = p.gpu.mma_proj ? matrix_tflops : prof.f32_tflops;
  row->proj_us = 2 * G * H * H * B / (proj_tflops * 1e6);  // I = H: the projection's share of a step
  return true;
}

/// Units per block of backward's persistent kernel that a training plan with a forced persistent
/// recurrence gives one layer of `sh`, or 0 (no slice fits, or B > 16).
int grad_persistent_units_of(const gpu::DeviceProfile& prof, const ModelShape& sh) {
  Plan plan;
  if (!plan_shape(prof, sh, true, gpu::Recurrence::persistent, &plan)) return 0;
  return gpu::grad_persistent_units(detail::impl(plan).gpu, 0, sh.batch);
}

/// One step of backward (see the file comment), from the same plan's layer facts; `persistent`:
/// backward's persistent kernel where a forced persistent recurrence's plan has a slice for it.
bool model_backward(const gpu::DeviceProfile& prof, const ModelShape& sh, bool persistent, Row* row) {
  if (!model(prof, sh, row)) return false;  // the forward's plan: shapes, the weight bytes
  const double G = num_gates(sh.mode), H = sh.hidden, B = sh.batch;
  const int units = persistent ? grad_persistent_units_of(prof, sh) : 0;
  if (units > 0) {  // R's columns from shared memory, one grid barrier a step
    row->kernel = "persistent";
    row->blocks = (sh.hidden + units - 1) / units;
    const double sms_used = std::min<double>(prof.device.sm_count, row->blocks);
    row->where = std::string(gpu::vendor_of(prof.device)) == "hip" ? "LDS of " + std::to_string(static_cast<int>(sms_used)) + " CUs"
                                                                   : "shared memory of " + std::to_string(static_cast<int>(sms_used)) + " SMs";
    row->compute_us = row->flops / (prof.f32_tflops * 1e6 / prof.device.sm_count * sms_used);
    row->memory_us = row->weight_bytes / (kSmemBytesPerClock * clock_ghz(prof) * sms_used * 1e3);
    row->latency_us = kGridBarrierUs;
  } else {
    const int launches = sh.mode == Mode::gru ? 3 : 2;  // (the profiles' shapes use the reset-after GRU)
    const bool in_l2 = row->weight_bytes <= prof.l2_bytes / 2;
    const double bandwidth_gbs = in_l2 ? prof.memory_gbs * kL2OverHbm : prof.memory_gbs;
    row->kernel = "per step";
    row->blocks = 0;
    row->where = in_l2 ? "L2" : "HBM";
    row->compute_us = row->flops / (prof.f32_tflops * 1e6);
    row->memory_us = row->weight_bytes / (bandwidth_gbs * 1e3);
    row->latency_us = kLaunchUs * launches;
  }
  row->bound_us = std::max(row->compute_us, row->memory_us) + row->latency_us;
  row->graph_bound_us = row->bound_us;  // backward is not captured
  row->proj_us = 2 * G * H * (2 * H + H) * B / (prof.f32_tflops * 1e6);  // I = H: dW, dR and dx per step
  return true;
}

/// "lstm:512:16:f16[:half]" (mode gru is the reset-after GRU); false if malformed.
bool parse_shape(const char* text, ModelShape* out) {
  char mode[16] = {0}, weights[8] = {0}, half[8] = {0};
  int hidden = 0, batch = 0;
  const int n = std::sscanf(text, "%15[a-z_]:%d:%d:%7[a-z0-9]:%7s", mode, &hidden, &batch, weights, half);
  if (n < 4 || hidden < 1 || batch < 1 || (n == 5 && std::strcmp(half, "half") != 0)) return false;
  const std::string m = mode, w = weights;
  if (m == "lstm") out->mode = Mode::lstm;
  else if (m == "gru") out->mode = Mode::gru;
  else if (m == "rnn_tanh") out->mode = Mode::rnn_tanh;
  else if (m == "rnn_relu") out->mode = Mode::rnn_relu;
  else return false;
  if (w == "f32") out->weights = DType::f32;
  else if (w == "f16") out->weights = DType::f16;
  else if (w == "bf16") out->weights = DType::bf16;
  else return false;
  out->hidden = hidden;
  out->batch = batch;
  out->half_math = n == 5;
  return true;
}

/// A profile by name; "H200" is the H100's with the H200's memory (see the file comment).
bool profile_by_name(const char* name, gpu::DeviceProfile* out) {
  if (std::strcmp(name, "H200") == 0 || std::strcmp(name, "H200 SXM") == 0) {
    if (!gpu::find_device_profile("H100 SXM", out)) return false;
    std::snprintf(out->device.name, sizeof out->device.name, "H200 SXM");
    out->memory_gbs = 4800;
    out->l2_bytes = 60e6;
    return true;
  }
  return gpu::find_device_profile(name, out);
}

}  // namespace

int main(int argc, char** argv) {
  bool csv = false, backward = false, backward_persistent = false;
  std::vector<gpu::DeviceProfile> profiles;
  std::vector<ModelShape> chosen;
  for (int i = 1; i < argc; ++i) {
    ModelShape sh{};
    gpu::DeviceProfile prof;
    if (std::strcmp(argv[i], "--csv") == 0) {
      csv = true;
    } else if (std::strcmp(argv[i], "--backward") == 0) {
      backward = true;
    } else if (std::strcmp(argv[i], "--backward-persistent") == 0) {
      backward = backward_persistent = true;
    } else if (std::strcmp(argv[i], "--profile") == 0 && i + 1 < argc && profile_by_name(argv[i + 1], &prof)) {
      profiles.push_back(prof);
      ++i;
    } else if (std::strcmp(argv[i], "--shape") == 0 && i + 1 < argc && parse_shape(argv[i + 1], &sh)) {
      chosen.push_back(sh);
      ++i;
    } else {
      std::printf("usage: speed_model [--csv] [--backward | --backward-persistent] [--profile NAME] [--shape MODE:H:B:WEIGHTS[:half]]...\n"
                  "  Per device profile and shape, the bound on one time step of the GPU recurrence\n"
                  "  (--backward: of backward through time as auto runs it; --backward-persistent: with\n"
                  "  RNNCORE_GPU_RECURRENCE=persistent, backward's persistent kernel where it fits; see the comment\n"
                  "  at the top of bench/gpu/speed_model.cpp and docs/gpu.md). NAME: H200, or a profile's name or arch (sm_90, sm_80, gfx90a, gfx942);\n"
                  "  MODE lstm|gru|rnn_tanh|rnn_relu, WEIGHTS f32|f16|bf16, :half for gpu_half_math.\n");
      return std::strcmp(argv[i], "--help") == 0 ? 0 : 2;
    }
  }
  const ModelShape default_shapes[] = {
      {Mode::lstm, 512, 16, DType::f32},  {Mode::lstm, 512, 16, DType::f16},  {Mode::lstm, 256, 1, DType::f32},
      {Mode::lstm, 512, 1, DType::f32},   {Mode::lstm, 1024, 1, DType::f32},  {Mode::lstm, 1024, 4, DType::f16},
      {Mode::lstm, 1024, 64, DType::f32}, {Mode::gru, 512, 8, DType::f32},    {Mode::rnn_tanh, 2048, 4, DType::f32},
      {Mode::lstm, 512, 16, DType::f16, true}, {Mode::lstm, 1024, 64, DType::f16, true}, {Mode::lstm, 1024, 64, DType::f32, true},
      {Mode::lstm, 1024, 16, DType::f16, true}, {Mode::lstm, 1024, 16, DType::f32, true}, {Mode::gru, 512, 8, DType::bf16, true},
  };
  if (csv)
    std::printf("device,mode,H,B,weights,kernel,blocks,where,flops,weight_bytes,compute_us,memory_us,latency_us,bound_us,"
                "tflops_at_bound,projection_us,graph_bound_us\n");
  else
    std::printf("Assumptions: grid barrier %.1f us, kernel launch %.1f us, graph node %.1f us, L2 bandwidth %.1fx HBM, shared memory %g B/clock/SM.\n"
                "I = H, one layer, one direction; bound = max(compute, weight reads) + latency, per time step%s.\n\n",
                kGridBarrierUs, kLaunchUs, kGraphNodeUs, kL2OverHbm, kSmemBytesPerClock,
                backward ? " of backward (last column: the weight and input gradients' share of a step)" : "");
  if (chosen.empty()) chosen.assign(std::begin(default_shapes), std::end(default_shapes));
  if (profiles.empty())
    for (int i = 0; i < gpu::kProfileCount; ++i) profiles.push_back(gpu::device_profile(i));
  for (const gpu::DeviceProfile& prof : profiles) {
    if (!csv) {
      std::printf("## %s (%s): %d %s, %.0f GB/s HBM, %.0f MB L2, %.1f TFLOP/s f32\n\n", prof.device.name, prof.device.arch,
                  prof.device.sm_count, std::strcmp(gpu::vendor_of(prof.device), "hip") == 0 ? "CUs" : "SMs", prof.memory_gbs, prof.l2_bytes / 1e6, prof.f32_tflops);
      std::printf("| cell | H | B | weights | kernel (blocks) | R read from | MFLOP | R KiB | compute us | memory us | latency us | bound us/step | graph us/step | TFLOP/s | %s |\n",
                  backward ? "gradient products us" : "projection us");
      std::printf("| --- | ---: | ---: | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    }
    for (const ModelShape& sh : chosen) {
      Row r;
      if (!(backward ? model_backward(prof, sh, backward_persistent, &r) : model(prof, sh, &r))) {
        std::fprintf(stderr, "speed_model: planning failed for %s H=%d: %s\n", prof.device.name, sh.hidden, last_error_detail());
        return 1;
      }
      const double tflops = r.flops / (r.bound_us * 1e6);
      if (csv)
        std::printf("%s,%s,%d,%d,%s,%s,%d,%s,%.0f,%.0f,%.3f,%.3f,%.2f,%.3f,%.3f,%.3f,%.3f\n", prof.device.name, to_string(sh.mode),
                    sh.hidden, sh.batch, weights_label(sh).c_str(), r.kernel.c_str(), r.blocks, r.where.c_str(), r.flops,
                    r.weight_bytes, r.compute_us, r.memory_us, r.latency_us, r.bound_us, tflops, r.proj_us, r.graph_bound_us);
      else
        std::printf("| %s | %d | %d | %s | %s%s | %s | %.1f | %.0f | %.2f | %.2f | %.1f | %.2f | %.2f | %.2f | %.3f |\n",
                    to_string(sh.mode), sh.hidden, sh.batch, weights_label(sh).c_str(), r.kernel.c_str(),
                    r.blocks ? (" (" + std::to_string(r.blocks) + ")").c_str() : "", r.where.c_str(), r.flops / 1e6,
                    r.weight_bytes / 1024, r.compute_us, r.memory_us, r.latency_us, r.bound_us, r.graph_bound_us, tflops, r.proj_us);
    }
    if (!csv) std::printf("\n");
  }
  if (!csv)
    std::printf("Anchors (published, cuDNN): DeepBench on a V100, LSTM H = 512, N = 16: 43.8 us/step in FP32, 17.6 us in FP16;\n"
                "persistent RNNs (Diamos et al. 2016): 2.8 TFLOP/s at batch 4 on a Titan X (Maxwell).\n");
  return 0;
}
