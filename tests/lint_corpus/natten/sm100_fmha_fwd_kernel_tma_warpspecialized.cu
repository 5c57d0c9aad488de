// Excerpt of csrc/include/natten/cuda/fmha_blackwell/kernel/sm100_fmha_fwd_kernel_tma_warpspecialized.hpp (NATTEN 0.21.7), trimmed for archguard's lint corpus; see PROVENANCE.
// NATTEN's Blackwell FMHA kernel: prints an error unless CUTLASS's SM100A/SM100F/SM103A/SM103F switch is on (a/f targets only).
#pragma once

#include "cute/arch/tmem_allocator_sm100.hpp"
#include "cute/layout.hpp"
#include "cutlass/arch/arch.h"
#include "cutlass/cutlass.h"
#include "cutlass/kernel_hardware_info.h"
#include "cutlass/pipeline/pipeline.hpp"

#include "natten/cuda/fmha_blackwell/collective/fmha_common.hpp"
#include "natten/cuda/fmha_blackwell/collective/fmha_fusion.hpp"
#include "natten/cuda/fmha_blackwell/kernel/fmha_causal_tile_scheduler.hpp"
#include "natten/cuda/fmha_blackwell/kernel/fmha_tile_scheduler.hpp"

namespace cutlass::fmha::kernel {

using namespace cute;
// [trimmed]
template <
    class ProblemShapeIn,
    class CollectiveMainloop,
    class CollectiveEpilogue,
    class TileScheduler,
    class KernelSchedule = Sm100FmhaCtxKernelWarpspecializedSchedule>
struct Sm100FmhaFwdKernelTmaWarpspecialized {
// [trimmed]
  CUTLASS_DEVICE void operator()(const Params& params, char* smem) {
#if (                                            \
    !defined(CUTLASS_ARCH_MMA_SM100A_ENABLED) && \
    !defined(CUTLASS_ARCH_MMA_SM100F_ENABLED) && \
    !defined(CUTLASS_ARCH_MMA_SM103A_ENABLED) && \
    !defined(CUTLASS_ARCH_MMA_SM103F_ENABLED))
    printf(
        "ERROR : Arch conditional MMA instruction used without targeting appropriate compute capability. Aborting.\n");
#else

    TileScheduler tile_scheduler{params.tile_scheduler};

    int warp_idx = cutlass::canonical_warp_idx_sync();
    auto role = warp_idx_to_WarpRole(warp_idx);
    uint32_t lane_predicate = cute::elect_one_sync();

    if (role == WarpRole::Load && lane_predicate) {
// [trimmed]
#endif
  }
};

} // namespace cutlass::fmha::kernel
