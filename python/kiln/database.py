"""kiln.Database: tuned schedules looked up through libkiln_db."""

import ctypes
from collections import namedtuple

from ._library import Handle, KilnError, encode_path, lazy_library

_OK, _NOT_FOUND = 0, 1
_READ_ONLY = 0x1

Record = namedtuple("Record", ["trace_json", "latency_s", "mean_latency_s", "confirmed_latency_s", "target",
                               "exact_target", "workload_hash", "packed_inputs_json"])


class _Record(ctypes.Structure):
    _fields_ = [("trace_json", ctypes.c_char_p), ("mean_latency_s", ctypes.c_double), ("target", ctypes.c_char_p),
                ("exact_target", ctypes.c_int), ("workload_hash", ctypes.c_char_p),
                ("confirmed_latency_s", ctypes.c_double), ("packed_inputs_json", ctypes.c_char_p)]


def _declare(lib):
    handle = ctypes.c_void_p
    lib.kiln_db_open.argtypes = [ctypes.c_char_p, ctypes.c_uint, ctypes.POINTER(handle)]
    lib.kiln_db_best.argtypes = [handle, ctypes.c_char_p, ctypes.c_char_p,
                                 ctypes.POINTER(ctypes.POINTER(_Record))]
    lib.kiln_db_last_error.argtypes = [handle]
    lib.kiln_db_last_error.restype = ctypes.c_char_p
    lib.kiln_db_close.argtypes = [ctypes.POINTER(handle)]
    lib.kiln_db_close.restype = None
    lib.kiln_db_library_version.restype = ctypes.c_char_p
    lib.kiln_db_library_api_version.restype = ctypes.c_int
    if lib.kiln_db_library_api_version() < 10200:
        raise KilnError("libkiln_db is older than API 1.2, which this package needs: install a newer Kiln")


_lib = lazy_library("libkiln_db.so.1", _declare)


def library_version():
    """The version of libkiln_db, e.g. "0.1.0"."""
    return _lib().kiln_db_library_version().decode()


class Database(Handle):
    """A Kiln tuning database, opened read-only."""

    def __init__(self, path):
        lib = _lib()
        self._handle = ctypes.c_void_p()
        if lib.kiln_db_open(encode_path(path, "the database's path"), _READ_ONLY, ctypes.byref(self._handle)) != _OK:
            message = lib.kiln_db_last_error(self._handle).decode(errors="replace")
            lib.kiln_db_close(ctypes.byref(self._handle))
            raise KilnError(message)

    def best(self, workload, target):
        """The fastest record of `workload` (its 64-hex key hash, or its canonical JSON)
        for `target` (exact first, then the same device's fallback), or None."""
        lib = _lib()
        out = ctypes.POINTER(_Record)()
        status = lib.kiln_db_best(self._handle, workload.encode(), target.encode(), ctypes.byref(out))
        if status == _NOT_FOUND:
            return None
        if status != _OK:
            raise KilnError(lib.kiln_db_last_error(self._handle).decode(errors="replace"))
        r = out.contents
        latency = r.confirmed_latency_s if r.confirmed_latency_s > 0 else r.mean_latency_s
        return Record(r.trace_json.decode(), latency, r.mean_latency_s, r.confirmed_latency_s, r.target.decode(),
                      bool(r.exact_target), r.workload_hash.decode(), r.packed_inputs_json.decode())

    @staticmethod
    def _free(pointer):
        _lib().kiln_db_close(pointer)
