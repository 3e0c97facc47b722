// JSON stack configurations → StackSpec, with errors that name file:line:column.
#include "rnncore/io/stack_config.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <initializer_list>

#include "src/io/json.hpp"
#include "rnncore/io/model.hpp"

namespace rnncore {
namespace io {

namespace {

using io::JsonValue;

// Reads fields of one JSON object, remembering which keys were used so that unknown ones are errors.
class Reader {
 public:
  Reader(const char* text, std::size_t size, const std::string& name, std::string* error)
      : text_(text), size_(size), name_(name), error_(error) {}

  bool fail(const JsonValue& at, const std::string& what) {
    const io::JsonLocation loc = io::json_location(text_, size_, at.offset);
    *error_ = name_ + ":" + std::to_string(loc.line) + ":" + std::to_string(loc.column) + ": " + what;
    return false;
  }

  bool object(const JsonValue& v, const char* what, std::initializer_list<const char*> allowed) {
    if (v.kind != JsonValue::Kind::object) return fail(v, std::string(what) + " must be an object");
    for (const auto& m : v.members) {
      bool known = false;
      for (const char* k : allowed) known = known || m.first == k;
      if (!known) {
        std::string list;
        for (const char* k : allowed) list += (list.empty() ? "" : ", ") + std::string(k);
        return fail(m.second, "unknown key '" + m.first + "' in " + what + " (known: " + list + ")");
      }
    }
    return true;
  }

  bool integer(const JsonValue& obj, const char* key, long long lo, long long hi, long long* out, bool required) {
    const JsonValue* v = obj.get(key);
    if (v == nullptr) {
      if (required) return fail(obj, std::string("missing '") + key + "'");
      return true;
    }
    if (v->kind != JsonValue::Kind::number || !v->is_integer || v->integer < lo || v->integer > hi)
      return fail(*v, std::string("'") + key + "' must be an integer in " + std::to_string(lo) + ".." + std::to_string(hi));
    *out = v->integer;
    return true;
  }

  bool unsigned64(const JsonValue& obj, const char* key, std::uint64_t* out, bool* present) {
    const JsonValue* v = obj.get(key);
    *present = v != nullptr;
    if (v == nullptr) return true;
    if (v->kind == JsonValue::Kind::number && v->is_integer && v->integer >= 0) {
      *out = static_cast<std::uint64_t>(v->integer);
      return true;
    }
    // Seeds beyond int64 may be written as decimal strings.
    if (v->kind == JsonValue::Kind::string && !v->text.empty() && v->text.find_first_not_of("0123456789") == std::string::npos &&
        v->text.size() <= 20) {
      errno = 0;
      const unsigned long long x = std::strtoull(v->text.c_str(), nullptr, 10);
      if (errno == 0) {
        *out = x;
        return true;
      }
    }
    return fail(*v, std::string("'") + key + "' must be a non-negative integer (or a decimal string up to 2^64-1)");
  }

  bool number(const JsonValue& obj, const char* key, double* out) {
    const JsonValue* v = obj.get(key);
    if (v == nullptr) return true;
    if (v->kind != JsonValue::Kind::number || !std::isfinite(v->number)) return fail(*v, std::string("'") + key + "' must be a number");
    *out = v->number;
    return true;
  }

  bool boolean(const JsonValue& obj, const char* key, bool* out) {
    const JsonValue* v = obj.get(key);
    if (v == nullptr) return true;
    if (v->kind != JsonValue::Kind::boolean) return fail(*v, std::string("'") + key + "' must be true or false");
    *out = v->boolean;
    return true;
  }

  bool string(const JsonValue& obj, const char* key, std::string* out, bool required) {
    const JsonValue* v = obj.get(key);
    if (v == nullptr) {
      if (required) return fail(obj, std::string("missing '") + key + "'");
      return true;
    }
    if (v->kind != JsonValue::Kind::string) return fail(*v, std::string("'") + key + "' must be a string");
    *out = v->text;
    return true;
  }

  const JsonValue* at(const JsonValue& obj, const char* key) const { return obj.get(key); }

 private:
  const char* text_;
  std::size_t size_;
  std::string name_;
  std::string* error_;
};

bool parse_wrapper(Reader& r, const JsonValue& v, Wrapper* w) {
  if (!r.object(v, "a wrapper",
                {"type", "input_keep", "output_keep", "state_keep", "variational", "per_sequence", "state_filter", "seed"}))
    return false;
  std::string type;
  if (!r.string(v, "type", &type, true)) return false;
  if (type == "residual") {
    w->kind = WrapperKind::residual;
    for (const char* k : {"input_keep", "output_keep", "state_keep", "variational", "per_sequence", "state_filter", "seed"})
      if (r.at(v, k) != nullptr) return r.fail(*r.at(v, k), std::string("'") + k + "' belongs to a dropout wrapper, not a residual one");
    return true;
  }
  if (type != "dropout") return r.fail(*r.at(v, "type"), "wrapper type '" + type + "' (dropout or residual)");
  w->kind = WrapperKind::dropout;
  DropoutWrapper& d = w->dropout;
  if (!r.number(v, "input_keep", &d.input_keep) || !r.number(v, "output_keep", &d.output_keep) ||
      !r.number(v, "state_keep", &d.state_keep) || !r.boolean(v, "variational", &d.variational) ||
      !r.boolean(v, "per_sequence", &d.per_sequence) || !r.unsigned64(v, "seed", &d.seed, &d.has_seed))
    return false;
  for (const char* k : {"input_keep", "output_keep", "state_keep"}) {
    const JsonValue* kv = r.at(v, k);
    if (kv != nullptr && !(kv->number > 0.0 && kv->number <= 1.0))
      return r.fail(*kv, std::string("'") + k + "' must be a keep probability in (0, 1]");
  }
  if (d.per_sequence && !d.variational)
    return r.fail(*r.at(v, "per_sequence"), "'per_sequence' needs 'variational': true");
  std::string filter = "default";
  if (!r.string(v, "state_filter", &filter, false)) return false;
  if (filter == "default") d.state_filter = StateFilter::default_filter;
  else if (filter == "h_and_c") d.state_filter = StateFilter::h_and_c;
  else if (filter == "c_only") d.state_filter = StateFilter::c_only;
  else if (filter == "none") d.state_filter = StateFilter::none;
  else return r.fail(*r.at(v, "state_filter"), "state_filter '" + filter + "' (default, h_and_c, c_only or none)");
  return true;
}

bool parse_layer(Reader& r, const JsonValue& v, int index, LayerSpec* ls) {
  const std::string what = "layers[" + std::to_string(index) + "]";
  if (!r.object(v, what.c_str(),
                {"mode", "hidden_size", "direction", "gru", "proj_size", "peepholes", "cell_clip", "proj_clip", "wrappers"}))
    return false;
  std::string mode, direction = "unidirectional", gru = "reset-after";
  long long hidden = 0, proj = 0;
  if (!r.string(v, "mode", &mode, true) || !r.integer(v, "hidden_size", 1, 1 << 16, &hidden, true) ||
      !r.string(v, "direction", &direction, false) || !r.string(v, "gru", &gru, false) ||
      !r.integer(v, "proj_size", 0, 1 << 16, &proj, false) || !r.boolean(v, "peepholes", &ls->peepholes) ||
      !r.number(v, "cell_clip", &ls->cell_clip) || !r.number(v, "proj_clip", &ls->proj_clip))
    return false;
  ls->proj_size = static_cast<std::int32_t>(proj);  // LSTM extensions: validate() checks the values
  if (!parse_mode(mode, &ls->mode)) return r.fail(*r.at(v, "mode"), "mode '" + mode + "' (lstm, gru, rnn_tanh or rnn_relu)");
  if (!parse_gru_variant(gru, &ls->gru_variant)) return r.fail(*r.at(v, "gru"), "gru '" + gru + "' (reset-after or reset-before)");
  if (direction == "unidirectional") ls->direction = Direction::unidirectional;
  else if (direction == "bidirectional") ls->direction = Direction::bidirectional;
  else return r.fail(*r.at(v, "direction"), "direction '" + direction + "' (unidirectional or bidirectional)");
  ls->hidden_size = static_cast<std::int32_t>(hidden);
  const JsonValue* wrappers = r.at(v, "wrappers");
  if (wrappers == nullptr) return true;
  if (wrappers->kind != JsonValue::Kind::array) return r.fail(*wrappers, "'wrappers' must be an array (innermost first)");
  if (wrappers->items.size() > static_cast<std::size_t>(kMaxWrappers))
    return r.fail(*wrappers, "at most " + std::to_string(kMaxWrappers) + " wrappers per layer");
  ls->num_wrappers = static_cast<std::int32_t>(wrappers->items.size());
  for (std::size_t i = 0; i < wrappers->items.size(); ++i)
    if (!parse_wrapper(r, wrappers->items[i], &ls->wrappers[i])) return false;
  return true;
}

}  // namespace

Status parse_stack_config(const char* text, std::size_t size, const std::string& name, StackSpec* out, std::string* error) {
  io::JsonValue root;
  if (io::parse_json(text, size, name.c_str(), &root) != RNNCORE_OK) {
    *error = rnncore_last_error_detail();
    return Status::format;
  }
  Reader r(text, size, name, error);
  StackSpec st;
  if (!r.object(root, "the configuration", {"input_size", "dropout", "input_mode", "layers"})) return Status::format;
  long long input = 0;
  std::string input_mode = "linear";
  if (!r.integer(root, "input_size", 1, 1 << 16, &input, false) || !r.number(root, "dropout", &st.dropout) ||
      !r.string(root, "input_mode", &input_mode, false))
    return Status::format;
  if (r.at(root, "dropout") != nullptr && !(st.dropout >= 0.0 && st.dropout < 1.0)) {
    r.fail(*r.at(root, "dropout"), "'dropout' must be a probability in [0, 1)");
    return Status::bad_probability;
  }
  if (!parse_input_mode(input_mode, &st.input_mode)) {
    r.fail(*r.at(root, "input_mode"), "input_mode '" + input_mode + "' (linear, skip or auto_select)");
    return Status::format;
  }
  st.input_size = static_cast<std::int32_t>(input);
  const JsonValue* layers = r.at(root, "layers");
  if (layers == nullptr || layers->kind != JsonValue::Kind::array || layers->items.empty()) {
    r.fail(layers != nullptr ? *layers : root, "'layers' must be a non-empty array");
    return Status::format;
  }
  if (layers->items.size() > static_cast<std::size_t>(kMaxLayers)) {
    r.fail(*layers, "at most " + std::to_string(kMaxLayers) + " layers");
    return Status::invalid_size;
  }
  st.num_layers = static_cast<std::int32_t>(layers->items.size());
  for (std::size_t i = 0; i < layers->items.size(); ++i)
    if (!parse_layer(r, layers->items[i], static_cast<int>(i), &st.layers[i])) return Status::format;
  *out = st;
  return Status::ok;
}

Status read_stack_config(const std::string& path, StackSpec* out, std::string* error) {
  std::vector<std::uint8_t> bytes;
  if (io::read_file_bytes(path.c_str(), &bytes) != RNNCORE_OK) {
    *error = rnncore_last_error_detail();
    if (error->empty()) *error = path + ": cannot read the file";
    return Status::io;
  }
  return parse_stack_config(reinterpret_cast<const char*>(bytes.data()), bytes.size(), path, out, error);
}

}  // namespace io
}  // namespace rnncore
