// Command-line parsing for the rnncore tool: --name value, --name=value and boolean --flags,
// checked against each command's table so that an unknown option is a usage error.
#ifndef RNNCORE_TOOLS_CLI_ARGS_HPP
#define RNNCORE_TOOLS_CLI_ARGS_HPP

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace rnncore {
namespace tools {

struct OptionSpec {
  const char* name;  // without the leading dashes
  bool takes_value;
};

class Args {
 public:
  /// Parses argv[first..argc); false (with *error set) on an unknown option or a missing value.
  bool parse(int argc, char** argv, int first, const std::vector<OptionSpec>& known, std::string* error) {
    for (int i = first; i < argc; ++i) {
      std::string a = argv[i];
      if (a.size() < 3 || a.compare(0, 2, "--") != 0) {
        *error = "unexpected argument '" + a + "'";
        return false;
      }
      std::string name = a.substr(2), value;
      const std::size_t eq = name.find('=');
      const bool inline_value = eq != std::string::npos;
      if (inline_value) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
      }
      const OptionSpec* spec = nullptr;
      for (const OptionSpec& k : known)
        if (name == k.name) spec = &k;
      if (spec == nullptr) {
        *error = "unknown option '--" + name + "'";
        return false;
      }
      if (spec->takes_value && !inline_value) {
        if (i + 1 >= argc) {
          *error = "option '--" + name + "' needs a value";
          return false;
        }
        value = argv[++i];
      } else if (!spec->takes_value && inline_value) {
        *error = "option '--" + name + "' takes no value";
        return false;
      }
      if (values_.count(name) != 0) {
        *error = "option '--" + name + "' given twice";
        return false;
      }
      values_[name] = value;
    }
    return true;
  }

  bool has(const std::string& name) const { return values_.count(name) != 0; }
  std::string get(const std::string& name, const std::string& fallback = "") const {
    auto it = values_.find(name);
    return it == values_.end() ? fallback : it->second;
  }

  /// Integer option in [lo, hi]; false (with *error) if malformed or out of range.
  bool get_int(const std::string& name, long long lo, long long hi, long long fallback, long long* out,
               std::string* error) const {
    if (!has(name)) {
      *out = fallback;
      return true;
    }
    const std::string v = get(name);
    char* end = nullptr;
    const long long x = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || x < lo || x > hi) {
      *error = "option '--" + name + "' needs an integer in " + std::to_string(lo) + ".." + std::to_string(hi) +
               ", got '" + v + "'";
      return false;
    }
    *out = x;
    return true;
  }

  /// Unsigned 64-bit option (seeds, step counters).
  bool get_u64(const std::string& name, unsigned long long fallback, unsigned long long* out, std::string* error) const {
    if (!has(name)) {
      *out = fallback;
      return true;
    }
    const std::string v = get(name);
    char* end = nullptr;
    const unsigned long long x = std::strtoull(v.c_str(), &end, 0);
    if (v.empty() || v[0] == '-' || *end != '\0') {
      *error = "option '--" + name + "' needs a non-negative integer, got '" + v + "'";
      return false;
    }
    *out = x;
    return true;
  }

  /// Real option in [lo, hi].
  bool get_double(const std::string& name, double lo, double hi, double fallback, double* out, std::string* error) const {
    if (!has(name)) {
      *out = fallback;
      return true;
    }
    const std::string v = get(name);
    char* end = nullptr;
    const double x = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0' || !(x >= lo && x <= hi)) {
      char range[96];
      std::snprintf(range, sizeof range, "[%g, %g]", lo, hi);
      *error = "option '--" + name + "' needs a number in " + range + ", got '" + v + "'";
      return false;
    }
    *out = x;
    return true;
  }

 private:
  std::map<std::string, std::string> values_;
};

}  // namespace tools
}  // namespace rnncore

#endif  // RNNCORE_TOOLS_CLI_ARGS_HPP
