# A test suite for `pytest --ldscope` (tests/e2e/snapshot_test.cc): the first test leaves
# two NCCLs loaded, the second fails on a loader error.
import ctypes
import os

FX = os.environ["FIXTURES"]


def test_two_nccls():
    ctypes.CDLL(FX + "/site-packages/torch/lib/libtorch_cuda.so", os.RTLD_LAZY)
    ctypes.CDLL(FX + "/system/lib/libnccl.so.2.16.2")


def test_plugin_with_missing_symbol():
    ctypes.CDLL(FX + "/lib/libfix_bad.so", os.RTLD_NOW)


def test_unrelated_failure():
    assert 1 == 2
