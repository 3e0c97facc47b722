#include <stdio.h>
#include "hip/gpu_compat.hpp"
#include <rnncore/rnncore.h>

int main(void) { return 0; }
