"""examples/torch_pipeline.py runs end to end (2 stages, 3 iterations) and prints its losses."""
import os
import re
import subprocess
import sys
import unittest

from common import SOURCE_DIR, runtime_missing


class ExampleTest(unittest.TestCase):
    def setUp(self):
        why = runtime_missing()
        if why:
            self.skipTest(why)

    def test_torch_pipeline_example(self):
        path = os.path.join(SOURCE_DIR, "examples", "torch_pipeline.py")
        with open(path) as f:
            self.assertLessEqual(len(f.read().splitlines()), 90)
        # As its docstring says to run it: from the repository root, PYTHONPATH=build/python and
        # no PERSEUS_BINARY (the package finds the perseus binary of its build tree).
        env = {k: v for k, v in os.environ.items() if k != "PERSEUS_BINARY"}
        r = subprocess.run([sys.executable, "examples/torch_pipeline.py", "--stages", "2", "--iterations", "3"],
                           cwd=SOURCE_DIR, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=1500)
        self.assertEqual(r.returncode, 0, r.stdout[-4000:])
        self.assertRegex(r.stdout, r"frontier: \d+ plans")
        losses = [float(x) for x in re.findall(r"iteration \d+: loss ([0-9.]+)", r.stdout)]
        self.assertEqual(len(losses), 3, r.stdout)
        self.assertLess(losses[-1], losses[0])
        # A newcomer sees Perseus change clocks: the ranks with a clock below the max are shown.
        self.assertRegex(r.stdout, r"rank \d+: \d+/\d+ below 1410 MHz: \[")

    def test_torch_pipeline_example_bad_arguments(self):
        """Out-of-range --stages/--iterations are a usage error (exit 2, argparse's message), not a
        traceback from deep inside, and nothing starts."""
        env = {k: v for k, v in os.environ.items() if k != "PERSEUS_BINARY"}
        for args in (["--stages", "0"], ["--stages", "9"], ["--iterations", "0"]):
            r = subprocess.run([sys.executable, "examples/torch_pipeline.py"] + args, cwd=SOURCE_DIR, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
            self.assertEqual(r.returncode, 2, r.stdout[-2000:])
            self.assertIn("--stages must be in 1..8", r.stdout)
            self.assertNotIn("Traceback", r.stdout)


if __name__ == "__main__":
    unittest.main()
