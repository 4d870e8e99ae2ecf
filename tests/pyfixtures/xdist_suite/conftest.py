# A suite for `pytest --ldscope -n 2` (tests/e2e/snapshot_test.cc): whichever tests a
# worker runs, it loads one NCCL when its session starts, gw0 torch's (2.20) and the
# others the system's older one, so that the workers bound different files for
# libnccl.so.2; the controller loads none.
import ctypes
import os


def pytest_sessionstart(session):
    fx = os.environ["FIXTURES"]
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker == "gw0":
        ctypes.CDLL(fx + "/site-packages/torch/lib/libtorch_cuda.so", os.RTLD_LAZY)
    elif worker is not None:
        ctypes.CDLL(fx + "/system/lib/libnccl.so.2.16.2")
