"""A pool worker keeps its C heap's free chunks before it forks tasks (:func:`latch.bench.executor.hold_free_heap`):
what is allocated after it comes from the heap's top, none from a chunk freed before it."""

from __future__ import annotations

import ctypes
import subprocess
import sys

import pytest

from latch.bench import executor

libc = ctypes.CDLL(None) if sys.platform.startswith("linux") else None
pytestmark = pytest.mark.skipif(libc is None or not hasattr(libc, "mallinfo2"), reason="glibc 2.33 or later only")

SIZE = 200
COUNT = 400


def _allocate(n: int) -> list[int]:
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    return [libc.malloc(SIZE) for _ in range(n)]


def _free(chunks: list[int]) -> None:
    libc.free.restype, libc.free.argtypes = None, [ctypes.c_void_p]
    for chunk in chunks:
        libc.free(chunk)


def test_nothing_allocated_after_it_reuses_a_chunk_freed_before_it():
    chunks = _allocate(COUNT)
    freed = chunks[::2]  # every other one: no two freed chunks are neighbours, none merges with the heap's top
    _free(freed)
    assert executor.hold_free_heap() >= len(freed)
    again = _allocate(len(freed))
    assert all(again) and not set(again) & set(freed)
    _free(again + chunks[1::2])


def test_without_it_the_freed_chunks_are_reused():
    """The allocator this relies on reuses freed chunks of the same size (what the test above rules out)."""
    chunks = _allocate(COUNT)
    freed = chunks[::2]
    _free(freed)
    again = _allocate(len(freed))
    assert len(set(again) & set(freed)) > len(freed) // 2
    _free(again + chunks[1::2])


CHURN = """
import ctypes, random, sys
from latch.bench import executor
libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.restype, libc.free.argtypes = None, [ctypes.c_void_p]
random.seed(int(sys.argv[1]))
kept, reused = [], 0
for _ in range(int(sys.argv[2])):
    blocks = [bytes(random.randint(100, 20000)) for _ in range(3000)]  # the heap of a long-lived process
    kept.extend(blocks[::3])
    del blocks
    chunks = [libc.malloc(200) for _ in range(400)]
    freed = chunks[::2]
    for chunk in freed:
        libc.free(chunk)
    executor.hold_free_heap()
    again = [libc.malloc(200) for _ in range(len(freed))]
    reused += len(set(again) & set(freed))
    for chunk in again + chunks[1::2]:
        libc.free(chunk)
print(reused)
"""


@pytest.mark.parametrize("seed", [1, 2])
def test_nothing_freed_before_it_is_reused_in_a_long_lived_fragmented_heap(seed):
    """A process whose heap is fragmented by thousands of blocks of many sizes, and which has already held tens of
    thousands of chunks (a long-lived worker, a test session): no chunk freed before it is handed out after it."""
    done = subprocess.run(
        [sys.executable, "-c", CHURN, str(seed), "16"], capture_output=True, text=True, timeout=120, check=True
    )
    assert int(done.stdout) == 0
