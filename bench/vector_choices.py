"""The measurements behind the coarse scan's kernel: sign-code Hamming distances over n codes.

For random codes (the kernel's cost does not depend on the values), thread CPU ms per scan of n
codes, median of --rounds rounds of 10 scans, rounds alternating between the variants:
  - simsimd's `hamming` on packed rows of 8, 16, 24 and 48 bytes (48: 384 dimensions, ours);
  - numpy's `bitwise_count` over column-major 64-bit words (xor, count, add per word, into
    preallocated buffers), for 1 and 6 words;
  - our compiled kernel (engine/_kernels.c): the distances alone, on 16- and 48-byte rows;
  - the whole coarse stage of a search, choosing the 1,032 nearest of n (the pool at 100k, k=10):
    simsimd's distances then numpy's selection (the engine's code before the kernel), against
    the kernel's `nearest`, which scans, counts the distances and picks the cut in one call;
  - the exact re-rank of those 1,032 (384-dimension float16 rows spread over n): numpy's gather
    then simsimd's float16 dot products (before), against the kernel's `cosines` (sums in float64).
The last two rows repeat our coarse stage and re-rank with the caches cold, as between searches
in the service (a 64 MB buffer is written before each call, outside the timing): what the
kernels' prefetching is for (engine.md).
Then what loading costs (the squared norms of n float16 rows of 384, taken when vectors are
stored): simsimd's float16 `dot` (which accumulates in half precision on CPUs with AVX-512 FP16),
float32 copies through simsimd's float32 `dot` or numpy's einsum, and our kernel's `self_dots`
(products exact, sums in float64); and the graph's pairwise cosines of 300 rows, float32 and
float64 matrix products.
A cost flat in the row width means the per-row call dominates, so a narrower first pass
cannot save time with simsimd.

    python bench/vector_choices.py [--n 100000] [--rounds 15]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
import simsimd

from engram_index.engine import _kernels


def simsimd_scan(n: int, width: int, rng: np.random.Generator) -> Callable[[], object]:
    """One simsimd Hamming scan over n packed rows of `width` bytes."""
    codes = rng.integers(0, 256, (n, width), dtype=np.uint8)
    query = codes[3].copy()
    return lambda: simsimd.hamming(query, codes, "bin8", out_dtype="float32")


def numpy_scan(n: int, words: int, rng: np.random.Generator) -> Callable[[], object]:
    """One numpy popcount scan over n codes of `words` 64-bit words stored column-major."""
    columns = rng.integers(0, 2**63, (words, n), dtype=np.uint64)
    query = columns[:, 3].copy()
    total, word, ones = np.empty(n, np.uint16), np.empty(n, np.uint64), np.empty(n, np.uint8)

    def scan() -> object:
        total[:] = 0
        for j in range(words):
            np.bitwise_xor(columns[j], query[j], out=word)
            np.bitwise_count(word, out=ones)
            np.add(total, ones, out=total)
        return total

    return scan


def kernel_scan(n: int, width: int, rng: np.random.Generator) -> Callable[[], object]:
    """One scan of our kernel over n packed rows of `width` bytes."""
    codes = rng.integers(0, 256, (n, width), dtype=np.uint8)
    query, out = codes[3].copy(), np.empty(n, np.uint16)
    return lambda: _kernels.hamming(query, codes, out)


def smallest(values: np.ndarray, count: int) -> np.ndarray:
    """The selection the engine used before the kernel: a sampled threshold, then argpartition."""
    n = len(values)
    sample = values[:: max(1, n // 16384)]
    rank = min(len(sample) - 1, 2 * (count * len(sample)) // n + 16)
    picked = np.flatnonzero(values <= np.partition(sample, rank)[rank])
    if len(picked) >= count:
        return picked[np.argpartition(values[picked], count - 1)[:count]]
    return np.argpartition(values, count - 1)[:count]


def simsimd_nearest(n: int, count: int, rng: np.random.Generator) -> Callable[[], object]:
    """The coarse stage before the kernel: simsimd's distances, a selection, the pool sorted."""
    codes = rng.integers(0, 256, (n, 48), dtype=np.uint8)
    query = codes[3].copy()

    def stage() -> object:
        distances = np.asarray(simsimd.hamming(query, codes, "bin8", out_dtype="float32")).reshape(-1)
        return np.sort(smallest(distances, count))

    return stage


def kernel_nearest(n: int, count: int, rng: np.random.Generator) -> Callable[[], object]:
    """The coarse stage with the kernel: one call."""
    codes = rng.integers(0, 256, (n, 48), dtype=np.uint8)
    query, out = codes[3].copy(), np.empty(count, np.int64)
    return lambda: _kernels.nearest(query, codes, None, out)


def rerank(n: int, count: int, rng: np.random.Generator, ours: bool) -> Callable[[], object]:
    """The exact cosines of `count` rows spread over n: gather + simsimd, or our kernel."""
    vectors = rng.standard_normal((n, 384)).astype(np.float16)
    inv_norms = np.ones(n, np.float64)
    ords = np.sort(rng.choice(n, count, replace=False)).astype(np.int64)
    parts = rng.standard_normal((2, 384)).astype(np.float16)
    out = np.empty(count, np.float32)
    if ours:
        unit = parts.astype(np.float64).sum(axis=0)
        return lambda: _kernels.cosines(unit, vectors, inv_norms, ords, out)

    def before() -> object:
        rows = np.take(vectors, ords, axis=0)
        dots = np.asarray(simsimd.cdist(parts, rows, "dot", dtype="float16", out_dtype="float32"))
        return np.clip((dots[0] + dots[1]) * inv_norms[ords], -1.0, 1.0)

    return before


def self_dots(n: int, how: str, rng: np.random.Generator) -> Callable[[], object]:
    """The squared norms of n float16 rows of 384, taken one of several ways."""
    vectors = rng.standard_normal((n, 384)).astype(np.float16)
    out = np.empty(n, np.float64)
    if how == "simsimd float16":
        return lambda: simsimd.dot(vectors, vectors, "float16")
    if how == "float32 copy + simsimd":
        return lambda: simsimd.dot(wide := vectors.astype(np.float32), wide, "float32")
    if how == "float32 copy + einsum":
        return lambda: np.einsum("ij,ij->i", wide := vectors.astype(np.float32), wide)
    return lambda: _kernels.self_dots(vectors, out)


def pairwise(n: int, dtype: type[np.floating], rng: np.random.Generator) -> Callable[[], object]:
    """The graph's cosines among n unit rows of 384, as one matrix product in dtype."""
    vectors = rng.standard_normal((n, 384)).astype(np.float16)
    inv = (1 / np.linalg.norm(vectors.astype(np.float64), axis=1)).astype(np.float32)

    def product() -> object:
        unit = vectors.astype(dtype) * inv[:, None].astype(dtype)
        return np.clip(unit @ unit.T, -1.0, 1.0).astype(np.float32)

    return product


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    variants = {f"simsimd hamming, {w}-byte rows": simsimd_scan(args.n, w, rng) for w in (8, 16, 24, 48)}
    variants.update({f"numpy bitwise_count, {w} column word(s)": numpy_scan(args.n, w, rng) for w in (1, 6)})
    variants.update({f"our kernel, {w}-byte rows": kernel_scan(args.n, w, rng) for w in (16, 48)})
    pool = 1032
    variants[f"coarse stage: simsimd + selection of {pool}"] = simsimd_nearest(args.n, pool, rng)
    variants[f"coarse stage: our kernel's nearest {pool}"] = kernel_nearest(args.n, pool, rng)
    variants[f"re-rank {pool}: gather + simsimd dots"] = rerank(args.n, pool, rng, ours=False)
    variants[f"re-rank {pool}: our kernel's cosines"] = rerank(args.n, pool, rng, ours=True)
    cold = {f"coarse stage, caches cold: nearest {pool}": kernel_nearest(args.n, pool, rng),
            f"re-rank {pool}, caches cold: cosines": rerank(args.n, pool, rng, ours=True)}
    hows = ["simsimd float16", "float32 copy + simsimd", "float32 copy + einsum"]
    hows += ["our kernel's self_dots"] if hasattr(_kernels, "self_dots") else []
    variants.update({f"load: squared norms, {how}": self_dots(args.n, how, rng) for how in hows})
    variants.update({f"graph: pairwise of 300, {np.dtype(t).name}": pairwise(300, t, rng)
                     for t in (np.float32, np.float64)})
    flush = np.zeros(64 << 20, np.uint8)
    samples: dict[str, list[float]] = {name: [] for name in [*variants, *cold]}
    for _ in range(args.rounds):
        for name, scan in variants.items():
            began = time.thread_time()
            for _ in range(10):
                scan()
            samples[name].append((time.thread_time() - began) / 10 * 1000)
        for name, scan in cold.items():
            spent = 0.0
            for _ in range(10):
                np.add(flush, 1, out=flush)
                began = time.thread_time()
                scan()
                spent += time.thread_time() - began
            samples[name].append(spent / 10 * 1000)
    print(f"coarse scan of {args.n:,} codes, thread CPU ms, median (min) of {args.rounds} rounds")
    for name, values in samples.items():
        print(f"  {name:50s}{np.median(values):8.3f}  ({min(values):.3f})")


if __name__ == "__main__":
    from machine import print_machine

    print_machine()
    main()
