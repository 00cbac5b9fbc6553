"""Micro timing of one TENSOR_MATCH / GLOBAL_STATE check, per backend (ns per call, timed in C++).

    python benchmarks/tensor_match_check.py

Prints the best of several runs of N checks of a 2-d float tensor that passes, one that fails on
type (the common miss), and a GLOBAL_STATE check.
"""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the in-place build in the checkout
from torch_jit_cache import _C  # noqa: E402

N = 200_000


def best(fn, repeat=7):
    return min(fn() for _ in range(repeat))


def main():
    print(f"{'backend':<12}{'pass ns':>10}{'miss(type) ns':>15}{'global_state ns':>17}")
    for backend in ("libtorch", "python-api"):
        try:
            m = _C._make_tensor_match_for_test(torch.randn(8, 4), backend)
            g = _C._make_global_state_for_test(backend)
        except RuntimeError as e:
            print(f"{backend:<12} unavailable: {e}")
            continue
        value = torch.randn(8, 4)
        hit = best(lambda: m._ns_per_check(value, N))
        miss = best(lambda: m._ns_per_check(3, N))
        gs = best(lambda: g._ns_per_check(N))
        print(f"{backend:<12}{hit:>10.1f}{miss:>15.1f}{gs:>17.1f}")


if __name__ == "__main__":
    main()
