// The integer LSTM's C API (include/rnncore/int8.h): thin conversions onto rnncore::q8.
#include <new>

#include "rnncore/int8.h"
#include "src/internal/error.hpp"
#include "src/internal/int8_activations.hpp"
#include "src/internal/int8_elementwise.hpp"
#include "src/internal/int8_dense.hpp"
#include "src/internal/int8_lstm.hpp"

namespace rnncore {
namespace {

static_assert(RNNCORE_INT8_LSTM_GATES == q8::kGates, "RNNCORE_INT8_LSTM_GATES is out of date");
static_assert(RNNCORE_INT8_WEIGHTS_ROW_MAJOR == static_cast<int>(q8::Int8WeightLayout::row_major) &&
                  RNNCORE_INT8_WEIGHTS_INTERLEAVED4 == static_cast<int>(q8::Int8WeightLayout::interleaved4) &&
                  RNNCORE_INT8_WEIGHTS_INTERLEAVED4_I16 == static_cast<int>(q8::Int8WeightLayout::interleaved4_i16),
              "RNNCORE_INT8_WEIGHTS_* are out of date");
static_assert(RNNCORE_INT8_INTERLEAVED4_BYTES(5, 9) == q8::interleaved4_bytes(5, 9), "RNNCORE_INT8_INTERLEAVED4_BYTES");
static_assert(RNNCORE_INT8_INTERLEAVED4_I16_BYTES(5, 9) == q8::interleaved4_i16_bytes(5, 9),
              "RNNCORE_INT8_INTERLEAVED4_I16_BYTES");
static_assert(sizeof(q8::Int8LstmParams) <= sizeof(rnncore_int8_lstm), "RNNCORE_INT8_LSTM_BYTES is too small");
static_assert(alignof(rnncore_int8_lstm) >= alignof(q8::Int8LstmParams), "rnncore_int8_lstm is under-aligned");
static_assert(sizeof(q8::Int8DenseParams) <= sizeof(rnncore_int8_dense), "RNNCORE_INT8_DENSE_BYTES is too small");
static_assert(alignof(rnncore_int8_dense) >= alignof(q8::Int8DenseParams), "rnncore_int8_dense is under-aligned");

q8::Int8LstmQuantization to_cpp(const rnncore_int8_lstm_quantization& c) {
  q8::Int8LstmQuantization q;
  q.input_scale = c.input_scale;
  q.input_zp = c.input_zp;
  for (int g = 0; g < q8::kGates; ++g) {
    q.w_scale[g] = c.w_scale[g];
    q.r_scale[g] = c.r_scale[g];
    q.w_scales[g] = c.w_scales[g];
    q.r_scales[g] = c.r_scales[g];
  }
  q.state_scale = c.state_scale;
  q.state_zp = c.state_zp;
  q.hidden_scale = c.hidden_scale;
  q.hidden_zp = c.hidden_zp;
  q.cell_scale = c.cell_scale;
  q.cell_clip = c.cell_clip;
  q.weight_layout = static_cast<q8::Int8WeightLayout>(c.weight_layout);
  return q;
}

bool hidden_size_ok(std::int32_t h) { return h >= 1 && h <= (1 << 16); }

// The prepared parameters live in the union's bytes (constructed there by prepare).
const q8::Int8LstmParams& params(const rnncore_int8_lstm* lstm) {
  return *std::launder(reinterpret_cast<const q8::Int8LstmParams*>(lstm->opaque));
}

// Stores `p` in *lstm, or an unprepared value (run refuses it) when prepare failed.
rnncore_status store(Status s, const q8::Int8LstmParams& p, rnncore_int8_lstm* lstm) {
  new (lstm->opaque) q8::Int8LstmParams(s == Status::ok ? p : q8::Int8LstmParams{});
  return static_cast<rnncore_status>(s);
}

}  // namespace
}  // namespace rnncore

using namespace rnncore;

extern "C" {

size_t rnncore_int8_lstm_bias_words(int32_t hidden_size) {
  return hidden_size_ok(hidden_size) ? q8::int8_lstm_bias_words(hidden_size) : 0;
}

size_t rnncore_int8_lstm_storage_words(const rnncore_int8_lstm_quantization* q, int32_t hidden_size) {
  return q != nullptr && hidden_size_ok(hidden_size) ? q8::int8_lstm_storage_words(to_cpp(*q), hidden_size) : 0;
}

size_t rnncore_int8_lstm_scratch_bytes(int32_t hidden_size) {
  return hidden_size_ok(hidden_size) ? q8::int8_lstm_scratch_bytes(hidden_size) : 0;
}

size_t rnncore_int8_lstm_run_scratch_bytes(const rnncore_int8_lstm* lstm) {
  if (lstm == nullptr || params(lstm).w[0] == nullptr) return 0;
  return q8::int8_lstm_scratch_bytes(params(lstm));
}

rnncore_status rnncore_int8_interleave4(const int8_t* w, int32_t rows, int32_t k, int8_t* out) {
  detail::clear_error();
  if (w == nullptr || out == nullptr)
    return detail::fail(RNNCORE_ERR_NULL_POINTER, "rnncore_int8_interleave4: w and out must not be null");
  if (!hidden_size_ok(rows) || !hidden_size_ok(k))
    return detail::fail(RNNCORE_ERR_INVALID_SIZE, "rnncore_int8_interleave4: rows %d and k %d must be in 1..65536",
                        static_cast<int>(rows), static_cast<int>(k));
  int bad_row = 0, bad_column = 0;
  if (!q8::interleave4(w, rows, k, out, &bad_row, &bad_column))
    return detail::fail(RNNCORE_ERR_UNSUPPORTED,
                        "rnncore_int8_interleave4: weight (%d, %d) is -128 and weight (%d, %d) negative; the "
                        "interleaved layout stores an odd row's weight beside its even row's only for -127..127 "
                        "(quantize symmetrically to -127..127, as TFLite does, or keep the weights row-major)",
                        bad_row, bad_column, bad_row - 1, bad_column);
  return RNNCORE_OK;
}

rnncore_status rnncore_int8_interleave4_i16(const int8_t* w, int32_t rows, int32_t k, int8_t* out) {
  detail::clear_error();
  if (w == nullptr || out == nullptr)
    return detail::fail(RNNCORE_ERR_NULL_POINTER, "rnncore_int8_interleave4_i16: w and out must not be null");
  if (!hidden_size_ok(rows) || !hidden_size_ok(k))
    return detail::fail(RNNCORE_ERR_INVALID_SIZE, "rnncore_int8_interleave4_i16: rows %d and k %d must be in 1..65536",
                        static_cast<int>(rows), static_cast<int>(k));
  q8::interleave4_i16(w, rows, k, out);
  return RNNCORE_OK;
}

rnncore_status rnncore_int8_lstm_prepare(const rnncore_int8_lstm_quantization* q, int32_t input_size,
                                         int32_t hidden_size, const int8_t* const w[RNNCORE_INT8_LSTM_GATES],
                                         const int8_t* const r[RNNCORE_INT8_LSTM_GATES],
                                         const int32_t* const bias[RNNCORE_INT8_LSTM_GATES], int32_t* bias_storage,
                                         size_t bias_storage_words, rnncore_int8_lstm* lstm) {
  if (q == nullptr || lstm == nullptr)
    return detail::fail(RNNCORE_ERR_NULL_POINTER, "rnncore_int8_lstm_prepare: q and lstm must not be null");
  q8::Int8LstmParams p;
  const Status s = q8::int8_lstm_prepare(to_cpp(*q), input_size, hidden_size, w, r, bias, bias_storage,
                                         bias_storage_words, &p);
  return store(s, p, lstm);
}

rnncore_status rnncore_int8_lstm_prepare_folded(const rnncore_int8_lstm_quantization* q, int32_t input_size,
                                                int32_t hidden_size, const int8_t* const w[RNNCORE_INT8_LSTM_GATES],
                                                const int8_t* const r[RNNCORE_INT8_LSTM_GATES],
                                                const int32_t* const bias[RNNCORE_INT8_LSTM_GATES],
                                                const int32_t* folded_bias, size_t folded_words,
                                                rnncore_int8_lstm* lstm) {
  if (q == nullptr || lstm == nullptr)
    return detail::fail(RNNCORE_ERR_NULL_POINTER, "rnncore_int8_lstm_prepare_folded: q and lstm must not be null");
  q8::Int8LstmParams p;
  const Status s = q8::int8_lstm_prepare_folded(to_cpp(*q), input_size, hidden_size, w, r, bias, folded_bias,
                                                folded_words, &p);
  return store(s, p, lstm);
}

rnncore_status rnncore_int8_lstm_run(const rnncore_int8_lstm* lstm, int32_t batch, int32_t seq_len, const int8_t* x,
                                     int8_t* y, int8_t* h, int16_t* c, int8_t* scratch, size_t scratch_bytes) {
  if (lstm == nullptr) return detail::fail(RNNCORE_ERR_NULL_POINTER, "rnncore_int8_lstm_run: lstm is null");
  return static_cast<rnncore_status>(
      q8::int8_lstm_sequence(params(lstm), batch, seq_len, x, y, h, c, scratch, scratch_bytes));
}

const char* rnncore_int8_lstm_kernel_name(const rnncore_int8_lstm* lstm) {
  if (lstm == nullptr || params(lstm).dot == nullptr) return "";
  int n = 0;
  if (q8::int8_panel_layout(params(lstm).layout)) {
    const q8::DotPanelsKernel* k = params(lstm).layout == q8::Int8WeightLayout::interleaved4 ? q8::int8_panel_kernels(&n)
                                                                                          : q8::int16_panel_kernels(&n);
    for (int i = 0; i < n; ++i)
      if (k[i].fn == params(lstm).dot_panels) return k[i].name;
    return "";
  }
  const q8::DotRowsKernel* k = q8::int8_dot_kernels(&n);
  for (int i = 0; i < n; ++i)
    if (k[i].fn == params(lstm).dot) return k[i].name;
  return "";
}

rnncore_status rnncore_int8_dense_prepare(const rnncore_int8_dense_quantization* q, int32_t in_size,
                                          int32_t out_size, const int8_t* w, const int32_t* bias,
                                          int32_t* bias_storage, float* scale_storage, rnncore_int8_dense* dense) {
  if (q == nullptr || dense == nullptr)
    return detail::fail(RNNCORE_ERR_NULL_POINTER, "rnncore_int8_dense_prepare: q and dense must not be null");
  q8::Int8DenseQuantization cq;
  cq.input_scale = q->input_scale;
  cq.input_zp = q->input_zp;
  cq.w_scales = q->w_scales;
  cq.w_scale_count = q->w_scale_count;
  cq.output_scale = q->output_scale;
  cq.output_zp = q->output_zp;
  cq.relu = q->relu != 0;
  q8::Int8DenseParams p;
  const Status s = q8::int8_dense_prepare(cq, in_size, out_size, w, bias, bias_storage, scale_storage, &p);
  new (dense->opaque) q8::Int8DenseParams(s == Status::ok ? p : q8::Int8DenseParams{});
  return static_cast<rnncore_status>(s);
}

rnncore_status rnncore_int8_dense_run(const rnncore_int8_dense* dense, int32_t batch, const int8_t* x, int8_t* y) {
  detail::clear_error();
  if (dense == nullptr || x == nullptr || y == nullptr)
    return detail::fail(RNNCORE_ERR_NULL_POINTER, "rnncore_int8_dense_run: dense, x and y must not be null");
  const q8::Int8DenseParams& p = *std::launder(reinterpret_cast<const q8::Int8DenseParams*>(dense->opaque));
  if (p.dot == nullptr || p.w == nullptr)
    return detail::fail(RNNCORE_ERR_WEIGHTS_NOT_PACKED, "rnncore_int8_dense_run: the layer was not prepared");
  if (batch < 0) return detail::fail(RNNCORE_ERR_INVALID_SIZE, "rnncore_int8_dense_run: batch %d < 0", static_cast<int>(batch));
  q8::int8_dense(p, batch, x, y);
  return RNNCORE_OK;
}

rnncore_status rnncore_int8_activation_table(rnncore_int8_activation f, float input_scale, int32_t input_zp,
                                             float output_scale, int32_t output_zp, int8_t table[256]) {
  detail::clear_error();
  if (table == nullptr) return detail::fail(RNNCORE_ERR_NULL_POINTER, "rnncore_int8_activation_table: table is null");
  if (f != RNNCORE_INT8_SIGMOID && f != RNNCORE_INT8_TANH)
    return detail::fail(RNNCORE_ERR_INVALID_ENUM, "rnncore_int8_activation_table: f = %d is not an activation",
                        static_cast<int>(f));
  const q8::TableActivation fn = f == RNNCORE_INT8_SIGMOID ? q8::TableActivation::sigmoid : q8::TableActivation::tanh;
  return static_cast<rnncore_status>(q8::int8_activation_table(fn, input_scale, input_zp, output_scale, output_zp, table));
}

rnncore_status rnncore_int8_lookup(const int8_t table[256], int32_t n, const int8_t* x, int8_t* y) {
  detail::clear_error();
  if (table == nullptr || x == nullptr || y == nullptr)
    return detail::fail(RNNCORE_ERR_NULL_POINTER, "rnncore_int8_lookup: table, x and y must not be null");
  if (n < 0) return detail::fail(RNNCORE_ERR_INVALID_SIZE, "rnncore_int8_lookup: n %d < 0", static_cast<int>(n));
  q8::int8_lookup(table, n, x, y);
  return RNNCORE_OK;
}

rnncore_status rnncore_int8_softmax_prepare(float input_scale, float beta, float output_scale, int32_t output_zp,
                                            rnncore_int8_softmax* softmax) {
  detail::clear_error();
  if (softmax == nullptr) return detail::fail(RNNCORE_ERR_NULL_POINTER, "rnncore_int8_softmax_prepare: softmax is null");
  return static_cast<rnncore_status>(q8::int8_softmax_prepare(input_scale, beta, output_scale, output_zp, softmax));
}

rnncore_status rnncore_int8_softmax_run(const rnncore_int8_softmax* softmax, int32_t rows, int32_t n, const int8_t* x,
                                        int8_t* y) {
  detail::clear_error();
  if (softmax == nullptr || x == nullptr || y == nullptr)
    return detail::fail(RNNCORE_ERR_NULL_POINTER, "rnncore_int8_softmax_run: softmax, x and y must not be null");
  if (rows < 0 || n < 1)
    return detail::fail(RNNCORE_ERR_INVALID_SIZE, "rnncore_int8_softmax_run: rows %d and n %d (rows >= 0, n >= 1)",
                        static_cast<int>(rows), static_cast<int>(n));
  q8::int8_softmax(*softmax, rows, n, x, y);
  return RNNCORE_OK;
}

rnncore_status rnncore_int8_add_prepare(float a_scale, int32_t a_zp, float b_scale, int32_t b_zp, float output_scale,
                                        int32_t output_zp, rnncore_int8_add* add) {
  detail::clear_error();
  if (add == nullptr) return detail::fail(RNNCORE_ERR_NULL_POINTER, "rnncore_int8_add_prepare: add is null");
  return static_cast<rnncore_status>(q8::int8_add_prepare({a_scale, a_zp}, {b_scale, b_zp}, {output_scale, output_zp}, add));
}

rnncore_status rnncore_int8_add_run(const rnncore_int8_add* add, size_t n, const int8_t* a, const int8_t* b, int8_t* y) {
  detail::clear_error();
  if (add == nullptr || a == nullptr || b == nullptr || y == nullptr)
    return detail::fail(RNNCORE_ERR_NULL_POINTER, "rnncore_int8_add_run: add, a, b and y must not be null");
  q8::int8_add(*add, n, a, b, y);
  return RNNCORE_OK;
}

rnncore_status rnncore_int8_mul_prepare(float a_scale, int32_t a_zp, float b_scale, int32_t b_zp, float output_scale,
                                        int32_t output_zp, rnncore_int8_mul* mul) {
  detail::clear_error();
  if (mul == nullptr) return detail::fail(RNNCORE_ERR_NULL_POINTER, "rnncore_int8_mul_prepare: mul is null");
  return static_cast<rnncore_status>(q8::int8_mul_prepare({a_scale, a_zp}, {b_scale, b_zp}, {output_scale, output_zp}, mul));
}

rnncore_status rnncore_int8_mul_run(const rnncore_int8_mul* mul, size_t n, const int8_t* a, const int8_t* b, int8_t* y) {
  detail::clear_error();
  if (mul == nullptr || a == nullptr || b == nullptr || y == nullptr)
    return detail::fail(RNNCORE_ERR_NULL_POINTER, "rnncore_int8_mul_run: mul, a, b and y must not be null");
  q8::int8_mul(*mul, n, a, b, y);
  return RNNCORE_OK;
}

rnncore_status rnncore_int8_mul_constant_run(const rnncore_int8_mul* mul, size_t n, const int8_t* a, int8_t b, int8_t* y) {
  detail::clear_error();
  if (mul == nullptr || a == nullptr || y == nullptr)
    return detail::fail(RNNCORE_ERR_NULL_POINTER, "rnncore_int8_mul_constant_run: mul, a and y must not be null");
  q8::int8_mul_constant(*mul, n, a, b, y);
  return RNNCORE_OK;
}

}  // extern "C"
