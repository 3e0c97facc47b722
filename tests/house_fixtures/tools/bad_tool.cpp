// Planted faults for scripts/check_house.py --self-test: private includes in tools/.
#include <cstdio>
#include "src/internal/error.hpp"
#include "rnncore/rnncore.hpp"
#include "simd/kernels.hpp"
#include "local_header.h"

int main() { return 0; }
