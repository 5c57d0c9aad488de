// Excerpt of torch-harmonics 0.8.0 (torch_harmonics/csrc/attention/attention_bwd_cuda.cu), trimmed for archguard's lint corpus.
// Verbatim except lines marked [trimmed]; see PROVENANCE for the exact ranges.
// [trimmed]
#if __CUDA_ARCH__ < 900
    // for architectures < 9.0, sh_dy and sh_qy will be read
    // as individual floats at the end of the kernel, which
    // breaks the assumption that each FLOATV_T location is
    // written to and read by the same thread throughout the 
    // kernel, in the case FLOATV_T==float4
    if constexpr(std::is_same<FLOATV_T, float4>::value) { __syncwarp(); }
#endif
// [trimmed]
#if __CUDA_ARCH__ < 900
        // to use 32-bit operations on consecutve addresses
        float *sh_qy_scl = reinterpret_cast<float *>(sh_qy);
        float *sh_dy_scl = reinterpret_cast<float *>(sh_dy);

        float *_dkx_scl = reinterpret_cast<float *>(_dkx);
        float *_dvx_scl = reinterpret_cast<float *>(_dvx);

        constexpr int VEC_SIZE = sizeof(FLOATV_T)/sizeof(float);

        // 32-bit, consecutive atomics to glmem;
        // strided atomics results in a severe slowdown
        for (int chan = tidx; chan < nchan*VEC_SIZE; chan += WARP_SIZE) {

            atomicAdd(_dkx_scl + chan, scale_fact_qy * sh_qy_scl[chan]);
            atomicAdd(_dvx_scl + chan, scale_fact_dy * sh_dy_scl[chan]);
        }
#else
        // 128-bit, consecutive atomics to glmem
        for (int chan = tidx; chan < nchan; chan += WARP_SIZE) {

            atomicAdd(_dkx + chan, __vscale(scale_fact_qy, sh_qy[chan]));
            atomicAdd(_dvx + chan, __vscale(scale_fact_dy, sh_dy[chan]));
        }
#endif
// [trimmed]
