"""The __CUDA_ARCH__ stub lint: source lines (lines), #if expressions (expressions), the
per-configuration directive walk (preprocessor), what is read (sources), the guard analysis
(guards) and its output (render)."""
