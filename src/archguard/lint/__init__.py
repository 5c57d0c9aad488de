"""The __CUDA_ARCH__ stub lint: lines, #if expressions, the directive walk, guards, output."""
