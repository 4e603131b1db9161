"""Finding and opening libkiln_model and libkiln_db."""

import ctypes
import os
import shutil


class KilnError(RuntimeError):
    """A Kiln library refused a call; the message is the library's."""


def _candidates(soname):
    for folder in os.environ.get("KILN_LIBRARY_PATH", "").split(os.pathsep):
        if folder:
            yield os.path.join(folder, soname)
    command = shutil.which("kiln")
    if command:
        prefix = os.path.dirname(os.path.dirname(os.path.realpath(command)))
        for lib in ("lib", "lib64"):
            yield os.path.join(prefix, lib, soname)
    yield soname  # the system's loader: ldconfig's cache, LD_LIBRARY_PATH


def load(soname):
    """Opens the first `soname` found (see python/README.md for the order)."""
    tried = []
    for path in _candidates(soname):
        if os.path.sep in path and not os.path.exists(path):
            tried.append(path)
            continue
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path} ({e})")
    raise KilnError(
        f"cannot find {soname}: tried {', '.join(tried)}. Install Kiln (cmake --install) so that `kiln` is on "
        f"PATH, or set KILN_LIBRARY_PATH to the folder holding {soname}")


def lazy_library(soname, declare):
    """A function returning `soname` opened on first use, with `declare(lib)` having set
    its functions' argument and result types."""
    opened = []

    def get():
        if not opened:
            lib = load(soname)
            declare(lib)
            opened.append(lib)
        return opened[0]

    return get


class Handle:
    """An object holding a library handle (`_handle`, a c_void_p) that `_free(pointer)`
    releases: closed explicitly, by `with`, or when collected."""

    _handle = None

    def close(self):
        if self._handle is not None and self._handle.value:
            self._free(ctypes.byref(self._handle))

    def __del__(self):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def encode_path(path, what):
    """`path` (str, bytes or os.PathLike) as the bytes a C function takes. A path holding
    a NUL is refused: C would read it only up to the NUL, another path than the one given."""
    try:
        raw = os.fsencode(path)
    except TypeError:
        raise KilnError(f"{what} must be a path (str, bytes or os.PathLike), not {type(path).__name__}") from None
    if b"\0" in raw:
        raise KilnError(f"{what} {path!r} holds a NUL character; no file's path does")
    return raw
