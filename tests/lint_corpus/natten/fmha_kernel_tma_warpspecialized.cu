// Excerpt of csrc/include/natten/cuda/fmha_hopper/kernel/fmha_kernel_tma_warpspecialized.hpp (NATTEN 0.21.7), trimmed for archguard's lint corpus; see PROVENANCE.
// NATTEN's Hopper FMHA kernel: traps unless CUTLASS_ARCH_MMA_SM90A_ENABLED (cutlass/arch/config.h, sm_90a only); the #else is the kernel.
#pragma once

#include "cutlass/arch/arch.h"
#include "cutlass/arch/reg_reconfig.h"
#include "cutlass/cutlass.h"
#include "cutlass/pipeline/pipeline.hpp"

#include "natten/cuda/fmha_hopper/kernel/fmha_options.hpp"

namespace cutlass::fmha::kernel {

using namespace cute;

template <
    class ProblemShape,
    class CollectiveMainloop,
    class CollectiveEpilogue,
    class TileScheduler,
    class... Options>
struct FmhaKernelTmaWarpSpecialized {
// [trimmed]
  CUTLASS_DEVICE void operator()(const Params& params, char* smem) {
#if !defined(CUTLASS_ARCH_MMA_SM90A_ENABLED)
    CUTE_INVALID_CONTROL_PATH(
        "ERROR : Arch conditional MMA instruction used without targeting appropriate compute capability. Aborting.\n");
#else

// [trimmed]
    TileScheduler tile_scheduler{params.tile_scheduler};

    // Shared memory.
    auto& storage = *reinterpret_cast<SharedStorage*>(smem);

    int lane_idx = cutlass::canonical_lane_idx();
    int warp_idx = cutlass::canonical_warp_idx_sync();
    int warp_idx_in_warp_group = warp_idx % cutlass::NumWarpsPerWarpGroup;
    int warp_group_idx = cutlass::canonical_warp_group_idx();
    auto warp_group_role = WarpGroupRole(warp_group_idx);
    auto producer_warp_role = ProducerWarpRole(warp_idx_in_warp_group);
// [trimmed]
#endif
  }
};

} // namespace cutlass::fmha::kernel
