"""The compiled modules: the engine's inner loops (engine/_kernels*.c) and garden.engram's hit writer
(engram/_views.c); everything else is in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "engram_index.engine._kernels",
            ["src/engram_index/engine/_kernels.c", "src/engram_index/engine/_kernels_loops.c",
             "src/engram_index/engine/_kernels_postings.c", "src/engram_index/engine/_kernels_terms.c",
             "src/engram_index/engine/_kernels_explain.c", "src/engram_index/engine/_kernels_explain_any.c",
             "src/engram_index/engine/_kernels_snippet.c", "src/engram_index/engine/_kernels_fuse.c",
             "src/engram_index/engine/_kernels_maxscore.c", "src/engram_index/engine/_kernels_columns.c",
             "src/engram_index/engine/_kernels_holds.c", "src/engram_index/engine/_kernels_rest.c",
             "src/engram_index/engine/_kernels_context.c", "src/engram_index/engine/_kernels_pick.c"],
            depends=["src/engram_index/engine/_kernels.h"],
            # No fused multiply-adds outside the loops that ask for them: fusion must round as numpy does.
            extra_compile_args=["-O3", "-std=c11", "-ffp-contract=off"],
        ),
        # Its scale-and-round must be Python's round(x * scale): one multiply, rounded once.
        Extension("engram_index.engram._views", ["src/engram_index/engram/_views.c"],
                  extra_compile_args=["-O3", "-std=c11", "-ffp-contract=off"]),
    ]
)
