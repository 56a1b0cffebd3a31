#!/usr/bin/env python3
"""PyTorch's figures for the GPU check (scripts/gpu-check.sh), measured in
the same run as tensorlife's so that the two can be set side by side as
ratios against same-run baselines:

  * the per-allocation cost of PyTorch's caching allocator, warm, for the
    sizes tensorlife's pool benchmark uses: torch.cuda.caching_allocator_alloc
    + caching_allocator_delete (the allocator alone, like pool.Allocate +
    Release) and torch.empty + del (with the tensor object, like tensor.New +
    Free), with cuMemAlloc + cuMemFree called through ctypes as the
    driver baseline;
  * the per-event overhead of torch.cuda.memory._record_memory_history
    (PyTorch's allocation history with stacks, the counterpart of
    tensorlife's tracking): warm torch.empty + del with recording on and
    off, in interleaved rounds, as the median of the per-round ratios.

It prints one line per figure, "figure NAME VALUE", and lines starting with
"#" for people. When torch cannot be imported or sees no GPU it prints
"skip REASON" and exits 0: the check then reports PyTorch as skipped.
"""

import argparse
import ctypes
import statistics
import sys
import time

SIZES = [4 << 10, 256 << 10, 1 << 20, 16 << 20, 64 << 20]


def label(n):
    """The size as tensorlife's benchmarks name it: 4KiB, 1MiB."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return "%d%s" % (n >> shift, unit)
    return "%dB" % n


def figure(name, value):
    print("figure %s %.6g" % (name, value), flush=True)


def per_op_ns(fn, n):
    """Runs fn n times and returns the mean ns per call."""
    start = time.perf_counter_ns()
    for _ in range(n):
        fn()
    return (time.perf_counter_ns() - start) / n


def calibrated(fn, budget_s):
    """Picks an iteration count so that one batch of fn takes about
    budget_s, then returns the median ns per call over five batches."""
    n = 1
    while True:
        took = per_op_ns(fn, n) * n / 1e9
        if took >= budget_s / 10 or n >= 1 << 20:
            break
        n *= 4
    n = max(1, int(n * (budget_s / 5) / max(took, 1e-9)))
    return statistics.median(per_op_ns(fn, n) for _ in range(5))


class Driver:
    """cuMemAlloc/cuMemFree through ctypes, on the context the CUDA runtime
    made current for torch (or the primary context, if none is)."""

    def __init__(self):
        lib = ctypes.CDLL("libcuda.so.1")
        self.alloc = lib.cuMemAlloc_v2
        self.alloc.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
        self.free = lib.cuMemFree_v2
        self.free.argtypes = [ctypes.c_uint64]
        self.check(lib.cuInit(0), "cuInit")
        ctx = ctypes.c_void_p()
        self.check(lib.cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
        if not ctx.value:
            dev = ctypes.c_int()
            self.check(lib.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
            self.check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
            self.check(lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        self.ptr = ctypes.c_uint64()

    @staticmethod
    def check(code, what):
        if code != 0:
            raise RuntimeError("%s failed: CUresult %d" % (what, code))

    def alloc_free(self, size):
        self.check(self.alloc(ctypes.byref(self.ptr), size), "cuMemAlloc_v2")
        self.check(self.free(self.ptr.value), "cuMemFree_v2")


def record_history(torch, on):
    """Turns _record_memory_history on (its defaults: every event, with
    Python and C++ stacks) or off, across the signatures torch has had."""
    rec = torch.cuda.memory._record_memory_history
    try:
        rec(enabled="all" if on else None, max_entries=100000)
    except TypeError:
        rec(on)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=float, default=0.2,
                        help="seconds per measured variant and size (default 0.2)")
    parser.add_argument("--rounds", type=int, default=15,
                        help="interleaved rounds for the history overhead (default 15)")
    args = parser.parse_args()

    try:
        import torch
    except Exception as e:  # ImportError, or a broken install
        print("skip import torch failed: %s" % e)
        return 0
    if not torch.cuda.is_available():
        print("skip torch %s sees no CUDA device" % torch.__version__)
        return 0

    torch.cuda.init()
    torch.empty(1, device="cuda")  # the runtime makes its context current here
    print("# torch %s, CUDA %s, %s" % (torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0)))
    figure("torch.version_major", int(torch.__version__.split(".")[0]))

    try:
        driver = Driver()
    except Exception as e:
        print("# no driver baseline: %s" % e)
        driver = None

    for size in SIZES:
        name = label(size)

        def cached():
            torch.cuda.caching_allocator_delete(torch.cuda.caching_allocator_alloc(size))

        def empty():
            x = torch.empty(size, dtype=torch.uint8, device="cuda")
            del x

        cached()  # warm: the block is in the cache from here on
        figure("torch.cache." + name + ".ns", calibrated(cached, args.budget))
        figure("torch.empty." + name + ".ns", calibrated(empty, args.budget))
        if driver:
            figure("torch.driver." + name + ".ns", calibrated(lambda: driver.alloc_free(size), args.budget))

    # _record_memory_history: the same warm torch.empty + del, recording on
    # and off in alternating order, a fixed batch per round.
    try:
        record_history(torch, False)
    except Exception as e:
        print("# no _record_memory_history: %s" % e)
        return 0
    size = 4 << 10

    def empty4k():
        x = torch.empty(size, dtype=torch.uint8, device="cuda")
        del x

    batch = max(100, int(0.05e9 / calibrated(empty4k, 0.05)))  # about 50 ms with recording off
    ratios, on_ns, off_ns = [], [], []
    for r in range(args.rounds):
        took = {}
        for on in ((False, True) if r % 2 == 0 else (True, False)):
            record_history(torch, on)
            took[on] = per_op_ns(empty4k, batch)
        record_history(torch, False)
        ratios.append(took[True] / took[False])
        on_ns.append(took[True])
        off_ns.append(took[False])
    on, off = statistics.median(on_ns), statistics.median(off_ns)
    figure("torch.history.off.ns", off)
    figure("torch.history.on.ns", on)
    figure("torch.history.on_over_off", statistics.median(ratios))
    # An alloc and a free are two events, as in tensorlife's figure.
    figure("torch.history.event.ns", (on - off) / 2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
