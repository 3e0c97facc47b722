/* rnncore: the limits a build is made with, shared by the C API (rnncore.h) and the C++ one
 * (rnncore.hpp). A build's meson options max_layers and training define RNNCORE_MAX_LAYERS and
 * RNNCORE_TRAINING for the library and for every target that uses its dependency, pkg-config or
 * CMake file; code compiled against these headers by other means must define the same values
 * (docs/porting.md, "The plan"). */
#ifndef RNNCORE_CONFIG_H
#define RNNCORE_CONFIG_H

#include <stdint.h>

/** Largest number of layers of a stack, and so of a plan: 16 unless the build chose fewer (1..16). */
#ifndef RNNCORE_MAX_LAYERS
#define RNNCORE_MAX_LAYERS 16
#endif
#if RNNCORE_MAX_LAYERS < 1 || RNNCORE_MAX_LAYERS > 16
#error "RNNCORE_MAX_LAYERS must be 1..16"
#endif

/** Whether the library holds the training code (PlanOptions::training, backward): 1 unless the build
 *  left it out (meson option training: off by default in the firmware profile). Without it a plan
 *  has no training layout, so it is smaller, and a training plan is refused. */
#ifndef RNNCORE_TRAINING
#define RNNCORE_TRAINING 1
#endif

/** Bytes of a rnncore_plan value (rnncore::Plan::kStorageBytes): a part per layer the build allows
 *  (the layer's copy of the spec and its offsets) and a fixed part. 32-bit targets (Cortex-M,
 *  Armv7-A): 1 280 + 720 per layer, 12 800 at 16 layers, 2 720 at 2; 64-bit ones, whose plan holds
 *  wider offsets and pointers: 2 048 + 896 per layer, 16 384 at 16 layers. A build without
 *  training: 1 152 + 672 per layer on 32-bit (2 496 at 2 layers), 1 792 + 832 on 64-bit. */
#if UINTPTR_MAX <= 0xFFFFFFFFu
#define RNNCORE_PLAN_BYTES (RNNCORE_TRAINING ? 1280 + 720 * RNNCORE_MAX_LAYERS : 1152 + 672 * RNNCORE_MAX_LAYERS)
#else
#define RNNCORE_PLAN_BYTES (RNNCORE_TRAINING ? 2048 + 896 * RNNCORE_MAX_LAYERS : 1792 + 832 * RNNCORE_MAX_LAYERS)
#endif

#endif /* RNNCORE_CONFIG_H */
