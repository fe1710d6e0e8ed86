"""A HIP-free Python application for the tests of sqtt-patch-tool: loads the driver that plays
ROCr (rocr_driver.cpp built as a shared library) with ctypes, as Python frameworks load the ROCm
runtime, and runs it with this script's arguments.

usage: python3 app.py DRIVER.so TOOL|- OUTDIR [driver flags] LOAD...
"""

import ctypes
import sys


def main() -> int:
    lib = ctypes.CDLL(sys.argv[1])
    args = [b"driver"] + [a.encode() for a in sys.argv[2:]]
    argv = (ctypes.c_char_p * (len(args) + 1))(*args, None)
    lib.driver_main.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    lib.driver_main.restype = ctypes.c_int
    sys.stdout.flush()
    return lib.driver_main(len(args), argv)


if __name__ == "__main__":
    sys.exit(main())
