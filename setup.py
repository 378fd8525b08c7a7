"""The one compiled module, the vector index's scan kernel; everything else is in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "engram_index.engine._kernels",
            ["src/engram_index/engine/_kernels.c"],
            extra_compile_args=["-O3", "-std=c11"],
        )
    ]
)
