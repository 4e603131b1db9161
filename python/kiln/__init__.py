"""Kiln from Python: run compiled models (kiln_model.h) and look up tuned schedules
(kiln_db.h) through ctypes. See python/README.md."""

from ._library import KilnError
from .database import Database, Record, library_version
from .model import Dim, Model, TensorInfo, set_threads

__all__ = ["Database", "Dim", "KilnError", "Model", "Record", "TensorInfo", "library_version", "set_threads"]
__version__ = "0.1.0"
