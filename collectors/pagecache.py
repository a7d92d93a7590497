"""How much of a file the page cache holds, as fincore(1) measures it: mincore(2) over a
read-only shared mapping of the file. Mapping a file reads none of it, so measuring does not
warm what it measures."""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
from pathlib import Path

# Python's mmap module has no mincore: libc's mmap and mincore through ctypes, the mapping's
# address kept as an integer (a Python mmap object hides it).
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
_MAP_FAILED = ctypes.c_void_p(-1).value


def resident_pages(path: Path) -> tuple[int, int]:
    """(pages of the file in the page cache, pages of the file); (0, 0) for an empty file."""
    size = path.stat().st_size
    pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
    if not size:
        return 0, 0
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, _MAP_FAILED):
            raise OSError(ctypes.get_errno(), f"mmap of {path} failed")
        try:
            vector = (ctypes.c_ubyte * pages)()
            if _libc.mincore(addr, size, vector) != 0:
                raise OSError(ctypes.get_errno(), f"mincore of {path} failed")
            return sum(b & 1 for b in vector), pages
        finally:
            _libc.munmap(addr, size)
    finally:
        os.close(fd)


def resident_fraction(path: Path) -> float:
    """The share of the file's pages in the page cache, 0.0 to 1.0."""
    resident, pages = resident_pages(path)
    return resident / pages if pages else 0.0
