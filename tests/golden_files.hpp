// Reading the committed golden files (tests/golden/): the cases of a folder and their metadata.
// For tests that link the io library.
#ifndef RNNCORE_TESTS_GOLDEN_FILES_HPP
#define RNNCORE_TESTS_GOLDEN_FILES_HPP

#include <dirent.h>

#include <algorithm>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "rnncore/io/safetensors.hpp"

namespace rnncore_test {

/// tests/golden/<sub> in the source tree.
inline std::string golden_dir(const char* sub) { return std::string(RNNCORE_SOURCE_DIR) + "/tests/golden/" + sub; }

/// The .safetensors files of a folder, sorted by name.
inline std::vector<std::string> list_cases(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n.size() > 12 && n.compare(n.size() - 12, 12, ".safetensors") == 0) out.push_back(dir + "/" + n);
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// A metadata value the case must have.
inline std::string meta(const rnncore::io::SafeTensors& f, const char* key) {
  const std::string* v = f.meta(key);
  REQUIRE_MESSAGE(v != nullptr, "metadata '" << key << "' missing in " << f.path);
  return *v;
}

/// A tensor of a golden file as elements of T (any float dtype of the file).
template <class T>
std::vector<T> floats(const rnncore::io::SafeTensors& f, const std::string& name) {
  rnncore::io::Array a;
  REQUIRE(f.array(name, &a) == RNNCORE_OK);
  std::vector<double> d;
  REQUIRE(rnncore::io::to_f64(a, &d) == RNNCORE_OK);
  return std::vector<T>(d.begin(), d.end());
}

}  // namespace rnncore_test

#endif  // RNNCORE_TESTS_GOLDEN_FILES_HPP
