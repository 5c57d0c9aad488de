"""The __CUDA_ARCH__ stub lint: the C preprocessor walk and the guard analysis."""
