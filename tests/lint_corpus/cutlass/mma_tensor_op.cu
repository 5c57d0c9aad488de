// Excerpt of nvidia-cutlass 4.2.0.0 (cutlass/gemm/warp/mma_tensor_op.h, cutlass/gemm/warp/mma_with_reduction_tensor_op.h), trimmed for archguard's lint corpus.
// Verbatim except lines marked [trimmed]; see PROVENANCE for the exact ranges.
// --- cutlass/gemm/warp/mma_tensor_op.h (class MmaTensorOp) ---
// [trimmed]
  /// Number of threads participating in warp-level matrix product
  static int const kThreadCount = 32;

  /// Number of partitions along K dimension
  static int const kPartitionsK = PartitionsK_;

  #if defined(__CUDA_ARCH__) && ((__CUDA_ARCH__ < 800) || (__CUDA_ARCH__ == 890)) 
    static int const kVerticalVisit = true;
  #elif defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 1200) 
    static int const kVerticalVisit = true;
  #else
    static int const kVerticalVisit = false;
  #endif

// [trimmed]
// --- cutlass/gemm/warp/mma_with_reduction_tensor_op.h (MmaWithReductionTensorOp::operator()) ---
    D = C;

    [[maybe_unused]] MmaOperandA const *ptr_A = reinterpret_cast<MmaOperandA const *>(&A);
    [[maybe_unused]] MmaOperandB const *ptr_B = reinterpret_cast<MmaOperandB const *>(&B);
    [[maybe_unused]] MmaOperandC *ptr_D = reinterpret_cast<MmaOperandC *>(&D);

    #if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ < 800)
      assert(0);
    #elif defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 800)
      // Serpentine visitation order maximizing reuse of Ra
      CUTLASS_PRAGMA_UNROLL
      for (int m = 0; m < MmaIterations::kRow; ++m) {

        CUTLASS_PRAGMA_UNROLL
        for (int n = 0; n < MmaIterations::kColumn; ++n) {

          int n_serpentine = ((m % 2) ? (MmaIterations::kColumn - 1 - n) : n);

          mma(ptr_D[m + n_serpentine * MmaIterations::kRow],
              ptr_A[m],
              ptr_B[n_serpentine],
              ptr_D[m + n_serpentine * MmaIterations::kRow]);

          if (!kReduceKForA && m == 0) {
            #if 0
            gemm_k_reduction[n_serpentine] += float(B[n_serpentine * 4]);
            // [trimmed]
            #else
            // [trimmed]
            #endif
            // [trimmed]
          }
        }
      }
    #else
      assert(0);
    #endif
  }
