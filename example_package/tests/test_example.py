"""The example's own test: the built extension imports anywhere, and runs where a GPU is."""

import pytest
import torch


def test_extension_imports_and_exposes_scale() -> None:
    import archguard_example
    from archguard_example import _C

    assert callable(_C.scale) and callable(_C.fp8_roundtrip)
    assert archguard_example.scale.__doc__ and archguard_example.fp8_roundtrip.__doc__


def test_cpu_tensor_is_refused_with_a_clear_message() -> None:
    from archguard_example import scale

    with pytest.raises(RuntimeError, match="must be a CUDA tensor"):
        scale(torch.ones(4), 2.0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU visible: kernel not run")
def test_kernel_scales_on_the_gpu() -> None:
    from archguard_example import scale

    x = torch.arange(1000, dtype=torch.float32, device="cuda")
    torch.testing.assert_close(scale(x, 2.5), x * 2.5)
