"""kiln.Model: a compiled model (kiln compile -o DIR) loaded through libkiln_model."""

import ctypes
from collections import namedtuple

import numpy as np

from ._library import Handle, KilnError, encode_path, lazy_library

_OK = 0
_DTYPES = {"float32": np.float32, "float16": np.float16, "int64": np.int64, "int32": np.int32, "int8": np.int8,
           "bool": np.bool_}

TensorInfo = namedtuple("TensorInfo", ["name", "dtype", "shape"])  # shape: -1 at a dynamic axis
Dim = namedtuple("Dim", ["name", "min", "max"])


class _TensorInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_char_p), ("rank", ctypes.c_int),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("bytes", ctypes.c_size_t)]


def _declare(lib):
    handle = ctypes.c_void_p
    lib.kiln_model_load.argtypes = [ctypes.c_char_p, ctypes.POINTER(handle)]
    lib.kiln_model_num_inputs.argtypes = [handle]
    lib.kiln_model_num_inputs.restype = ctypes.c_size_t
    lib.kiln_model_num_outputs.argtypes = [handle]
    lib.kiln_model_num_outputs.restype = ctypes.c_size_t
    for f in (lib.kiln_model_input_info, lib.kiln_model_output_info):
        f.argtypes = [handle, ctypes.c_size_t, ctypes.POINTER(_TensorInfo)]
    lib.kiln_model_set_input.argtypes = [handle, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t]
    lib.kiln_model_run.argtypes = [handle]
    lib.kiln_model_get_output.argtypes = [handle, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p),
                                          ctypes.POINTER(ctypes.c_size_t)]
    lib.kiln_model_set_threads.argtypes = [ctypes.c_int]
    lib.kiln_model_last_error.argtypes = [handle]
    lib.kiln_model_last_error.restype = ctypes.c_char_p
    lib.kiln_model_free.argtypes = [ctypes.POINTER(handle)]
    lib.kiln_model_free.restype = None
    # Dynamic dimensions (kiln_model.h 1.1).
    lib.kiln_model_num_dims.argtypes = [handle]
    lib.kiln_model_num_dims.restype = ctypes.c_size_t
    lib.kiln_model_dim_info.argtypes = [handle, ctypes.c_size_t, ctypes.POINTER(ctypes.c_char_p),
                                        ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_int64)]
    lib.kiln_model_set_input_shaped.argtypes = [handle, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_int,
                                                ctypes.POINTER(ctypes.c_int64), ctypes.c_size_t]
    lib.kiln_model_output_shape.argtypes = [handle, ctypes.c_size_t, ctypes.POINTER(ctypes.c_int),
                                            ctypes.POINTER(ctypes.POINTER(ctypes.c_int64))]


_lib = lazy_library("libkiln_model.so.1", _declare)


def set_threads(threads):
    """Threads of the process-wide pool every model's parallel loops share (>= 1)."""
    if _lib().kiln_model_set_threads(int(threads)) != _OK:
        raise KilnError(f"threads must be 1 or more, not {threads}")


class Model(Handle):
    """A compiled model. `Model(path).run(inputs)` returns the outputs as NumPy arrays.
    A model compiled with a `--dim NAME=MIN..MAX` range lists it in `dims`, shows -1 at
    its inputs' and outputs' dynamic axes, and takes inputs of any shape in the range."""

    def __init__(self, path):
        lib = _lib()
        self._handle = ctypes.c_void_p()
        status = lib.kiln_model_load(encode_path(path, "the model's path"), ctypes.byref(self._handle))
        if status != _OK:
            message = lib.kiln_model_last_error(self._handle).decode(errors="replace")
            lib.kiln_model_free(ctypes.byref(self._handle))
            raise KilnError(message)
        self.inputs = [self._info(lib.kiln_model_input_info, k) for k in range(lib.kiln_model_num_inputs(self._handle))]
        self.outputs = [self._info(lib.kiln_model_output_info, k)
                        for k in range(lib.kiln_model_num_outputs(self._handle))]
        self.dims = []
        for k in range(lib.kiln_model_num_dims(self._handle)):
            name, low, high = ctypes.c_char_p(), ctypes.c_int64(), ctypes.c_int64()
            self._check(lib.kiln_model_dim_info(self._handle, k, ctypes.byref(name), ctypes.byref(low),
                                                ctypes.byref(high)))
            self.dims.append(Dim(name.value.decode(), low.value, high.value))

    def _info(self, describe, index):
        info = _TensorInfo()
        self._check(describe(self._handle, index, ctypes.byref(info)))
        return TensorInfo(info.name.decode(), info.dtype.decode(), tuple(info.shape[d] for d in range(info.rank)))

    def _check(self, status):
        if status != _OK:
            raise KilnError(_lib().kiln_model_last_error(self._handle).decode(errors="replace"))

    def run(self, *arrays):
        """Runs one inference. Inputs are arrays in the model's input order, or one dict
        {name: array}. Returns the outputs, in order, as arrays the caller owns."""
        if len(arrays) == 1 and isinstance(arrays[0], dict):
            given = dict(arrays[0])
            unknown = sorted(set(given) - {i.name for i in self.inputs})
            if unknown:
                raise KilnError(f"no input named {unknown[0]!r}; the model's inputs are "
                                f"{[i.name for i in self.inputs]}")
            missing = [i.name for i in self.inputs if i.name not in given]
            if missing:
                raise KilnError(f"no array for input {missing[0]!r}")
            arrays = [given[i.name] for i in self.inputs]
        if len(arrays) != len(self.inputs):
            raise KilnError(f"the model takes {len(self.inputs)} inputs ({[i.name for i in self.inputs]}), "
                            f"not {len(arrays)}")
        lib = _lib()
        for index, (info, array) in enumerate(zip(self.inputs, arrays)):
            data = self._prepared(info, array)
            if self.dims:
                shape = (ctypes.c_int64 * data.ndim)(*data.shape)
                self._check(lib.kiln_model_set_input_shaped(self._handle, index, data.ctypes.data, data.ndim, shape,
                                                            data.nbytes))
            else:
                self._check(lib.kiln_model_set_input(self._handle, index, data.ctypes.data, data.nbytes))
        self._check(lib.kiln_model_run(self._handle))
        results = []
        for index, info in enumerate(self.outputs):
            pointer, size = ctypes.c_void_p(), ctypes.c_size_t()
            self._check(lib.kiln_model_get_output(self._handle, index, ctypes.byref(pointer), ctypes.byref(size)))
            shape = info.shape
            if self.dims:
                rank, dims = ctypes.c_int(), ctypes.POINTER(ctypes.c_int64)()
                self._check(lib.kiln_model_output_shape(self._handle, index, ctypes.byref(rank), ctypes.byref(dims)))
                shape = tuple(dims[d] for d in range(rank.value))
            dtype = np.dtype(_DTYPES[info.dtype])
            view = np.ctypeslib.as_array(ctypes.cast(pointer, ctypes.POINTER(ctypes.c_uint8)), (size.value,))
            results.append(view.view(dtype).reshape(shape).copy())  # the model reuses its buffer
        return results

    @staticmethod
    def _prepared(info, array):
        array = np.asarray(array)
        want = np.dtype(_DTYPES[info.dtype])
        fits = len(array.shape) == len(info.shape) and all(want_d in (-1, d) for d, want_d in zip(array.shape,
                                                                                                info.shape))
        if not fits:
            raise KilnError(f"input {info.name!r} has shape {tuple(array.shape)}; the model takes {info.shape}"
                            + (" (-1: any value of a dynamic dimension)" if -1 in info.shape else ""))
        if array.dtype != want:
            if array.dtype.kind != want.kind and not (want.kind == "i" and array.dtype.kind == "u"):
                raise KilnError(f"input {info.name!r} is {array.dtype}; the model takes {info.dtype}")
            converted = array.astype(want)
            if want.kind in "iu" and not np.array_equal(converted, array):
                raise KilnError(f"input {info.name!r} has values that do not fit {info.dtype}")
            array = converted
        return np.ascontiguousarray(array)

    @staticmethod
    def _free(pointer):
        _lib().kiln_model_free(pointer)
