"""The one compiled module, the engine's inner loops (engine/_kernels*.c); everything else is in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "engram_index.engine._kernels",
            ["src/engram_index/engine/_kernels.c", "src/engram_index/engine/_kernels_loops.c",
             "src/engram_index/engine/_kernels_postings.c", "src/engram_index/engine/_kernels_terms.c"],
            depends=["src/engram_index/engine/_kernels.h"],
            extra_compile_args=["-O3", "-std=c11"],
        )
    ]
)
