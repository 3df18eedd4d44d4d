"""Runs one unittest module for ctest: exit 0 on success, 1 on failure, 77 when every test
was skipped (ctest SKIP_RETURN_CODE), so that a missing component shows as "Skipped" with
its reason in the log instead of a fake pass."""
import sys
import unittest

if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: run_unittest.py <module>")
    suite = unittest.defaultTestLoader.loadTestsFromName(sys.argv[1])
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    if not result.wasSuccessful():
        sys.exit(1)
    if result.testsRun and len(result.skipped) == result.testsRun:
        for _, reason in result.skipped[:1]:
            print("SKIPPED: " + reason)
        sys.exit(77)
    sys.exit(0)
