"""The Python package (python/kiln) over the real libraries: a compiled model loaded
with ctypes' local symbol scope, run and compared with the exporter's output; a
database written by kiln tune-op looked up. Run by ctest (tests/CMakeLists.txt) with
KILN (the kiln command), KILN_LIBRARY_PATH and the compiled tiny_cnn."""

import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import kiln  # noqa: E402

MODEL = os.environ["KILN_TEST_MODEL"]          # tiny_cnn compiled (kiln compile -o)
MODEL_FILES = os.environ["KILN_TEST_MODEL_FILES"]  # tests/frontend/models/tiny_cnn (.input.bin, .ref.bin)
KILN = os.environ["KILN"]


class ModelTest(unittest.TestCase):
    def test_runs_like_the_exporter(self):
        model = kiln.Model(MODEL)
        self.assertEqual([i.name for i in model.inputs], ["input"])
        self.assertEqual(model.inputs[0].dtype, "float32")
        self.assertEqual(model.inputs[0].shape, (1, 3, 32, 32))
        x = np.fromfile(MODEL_FILES + ".input.bin", dtype=np.float32).reshape(model.inputs[0].shape)
        want = np.fromfile(MODEL_FILES + ".ref.bin", dtype=np.float32).reshape(model.outputs[0].shape)
        kiln.set_threads(2)
        (got,) = model.run(x)
        self.assertLess(np.linalg.norm(got - want) / np.linalg.norm(want), 1e-4)
        # By name, from float64 (converted); the result is the caller's, not the model's buffer.
        (again,) = model.run({"input": x.astype(np.float64)})
        np.testing.assert_array_equal(got, again)
        again[:] = 0
        (third,) = model.run(x)
        np.testing.assert_array_equal(got, third)

    def test_bad_inputs_are_refused_with_a_reason(self):
        model = kiln.Model(MODEL)
        with self.assertRaisesRegex(kiln.KilnError, "has shape \\(1, 3, 8, 8\\)"):
            model.run(np.zeros((1, 3, 8, 8), np.float32))
        with self.assertRaisesRegex(kiln.KilnError, "no input named 'image'"):
            model.run({"image": np.zeros((1, 3, 32, 32), np.float32)})
        with self.assertRaisesRegex(kiln.KilnError, "takes 1 inputs"):
            model.run()
        with self.assertRaisesRegex(kiln.KilnError, "threads must be 1 or more"):
            kiln.set_threads(0)

    def test_a_missing_model_is_an_error_not_a_crash(self):
        with self.assertRaises(kiln.KilnError) as caught:
            kiln.Model("/nonexistent/model.kiln")
        self.assertIn("/nonexistent/model.kiln", str(caught.exception))

    def test_paths_as_bytes_and_pathlike_and_never_cut_at_a_nul(self):
        import pathlib
        for path in (MODEL.encode(), pathlib.Path(MODEL)):
            self.assertEqual(kiln.Model(path).inputs[0].name, "input")
        # C would read the path up to the NUL: the model before it, not the one given.
        with self.assertRaisesRegex(kiln.KilnError, "holds a NUL character"):
            kiln.Model(MODEL + "\x00/../other")
        with self.assertRaisesRegex(kiln.KilnError, "holds a NUL character"):
            kiln.Database("db.sqlite\x00x")
        with self.assertRaisesRegex(kiln.KilnError, "must be a path"):
            kiln.Model(42)


class DynamicModelTest(unittest.TestCase):
    def test_any_length_in_the_range_runs_and_one_past_it_is_refused(self):
        exported = os.path.join(os.path.dirname(MODEL_FILES), "bert_ids_dynamic")
        with tempfile.TemporaryDirectory() as work:
            compiled = os.path.join(work, "dynamic.kiln")
            subprocess.run([KILN, "compile", "--model", exported + ".onnx", "--dim", "batch=1", "--dim",
                            "sequence=1..20", "--buckets", "2", "--no-db", "-o", compiled], check=True,
                           capture_output=True)
            model = kiln.Model(compiled)
            self.assertEqual(model.dims, [kiln.Dim("sequence", 1, 20)])
            self.assertEqual(model.inputs[0].shape, (1, -1))
            feed = {i.name: np.load(f"{exported}.in.{i.name}.npy") for i in model.inputs}
            sequence, pooled = model.run(feed)
            want = np.load(exported + ".out.sequence.npy")
            self.assertEqual(sequence.shape, want.shape)
            self.assertLess(np.linalg.norm(sequence - want) / np.linalg.norm(want), 1e-4)
            self.assertEqual(pooled.shape, np.load(exported + ".out.pooled.npy").shape)
            short = {name: value[:, :5] for name, value in feed.items()}
            self.assertEqual(model.run(short)[0].shape, (1, 5, want.shape[2]))
            with self.assertRaisesRegex(kiln.KilnError, "'sequence' = 21 \\(the model takes 1..20\\)"):
                model.run({name: np.zeros((1, 21), np.int64) for name in feed})


class DatabaseTest(unittest.TestCase):
    def test_best_record_of_a_tuned_workload(self):
        with tempfile.TemporaryDirectory() as work:
            db = os.path.join(work, "relu.db")
            subprocess.run([KILN, "tune-op", "--op", "relu", "--shape", "1024", "--trials", "8", "--batch", "8",
                            "--confirm-top", "0", "-q", "--db", db], check=True, capture_output=True)
            key = subprocess.run([KILN, "show", "--op", "relu", "--shape", "1024", "--key"], check=True,
                                 capture_output=True, text=True).stdout.split("key: ")[1].split()[0]
            with kiln.Database(db) as database:
                record = database.best(key, "llvm -mcpu=native")
                self.assertIsNotNone(record)
                self.assertEqual(record.workload_hash, key)
                self.assertTrue(record.exact_target)
                self.assertGreater(record.latency_s, 0)
                self.assertIn('"kiln_trace"', record.trace_json)
                self.assertEqual(record.packed_inputs_json, "[]")
                self.assertIsNone(database.best("0" * 64, "llvm -mcpu=native"))
                with self.assertRaisesRegex(kiln.KilnError, "target"):
                    database.best(key, "not a target")
            with self.assertRaises(kiln.KilnError):
                kiln.Database(os.path.join(work, "missing.db"))
        self.assertRegex(kiln.library_version(), r"^\d+\.\d+\.\d+$")


if __name__ == "__main__":
    unittest.main()
