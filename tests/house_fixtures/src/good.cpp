// A file without faults: a citation that resolves (docs/design.md §1, §2.1) and a range whose
// ends exist (docs/design.md §1–2).
#include "src/internal/error.hpp"

int fine(int x) { return x + 1; }
