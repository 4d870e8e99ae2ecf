# The tests of tests/pyfixtures/xdist_suite: one fails on a loader error, one otherwise.
import ctypes
import os

FX = os.environ["FIXTURES"]


def test_passes():
    pass


def test_plugin_with_missing_symbol():
    ctypes.CDLL(FX + "/lib/libfix_bad.so", os.RTLD_NOW)


def test_unrelated_failure():
    assert 1 == 2
