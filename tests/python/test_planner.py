"""perseus planner bindings: profiles, schedules, optimize() and the error mapping."""
import csv
import json
import os
import subprocess
import unittest

import perseus

from common import GPT3_PROFILE, PERSEUS_BINARY, first_stages_csv, temp_dir, write_first_stages

STAGES, MICROBATCHES, P_BLOCK, UNIT = 4, 6, 83.64, 0.002


class ProfileTest(unittest.TestCase):
    def test_load_example_profile(self):
        prof = perseus.load_profile(GPT3_PROFILE)
        self.assertEqual(prof.num_stages, 8)
        pts = prof.points(0, "forward")
        self.assertEqual(len(pts), 38)
        freqs = [p["freq_mhz"] for p in pts]
        self.assertEqual(freqs, sorted(freqs, reverse=True))
        self.assertEqual(prof.max_freq_mhz(), 1410)
        self.assertEqual(prof.max_freq_mhz(0, "backward"), 1410)
        # The first data row of the file: 0,forward,1410,0.05016...,23.805...
        with open(GPT3_PROFILE) as f:
            row = next(csv.DictReader(f))
        self.assertAlmostEqual(pts[0]["time_s"], float(row["time"]), places=12)
        self.assertAlmostEqual(pts[0]["energy_j"], float(row["energy"]), places=9)
        self.assertTrue(prof.has(7, "backward"))
        self.assertFalse(prof.has(7, "backward_weight"))
        self.assertEqual(prof.points(3, "backward_input"), [])
        self.assertIn("8 stages", repr(prof))

    def test_rows_round_trip_and_expected_stages(self):
        text = first_stages_csv(2)
        prof = perseus.parse_profile(text, "two.csv", expected_stages=2)
        self.assertEqual(prof.num_stages, 2)
        self.assertEqual(len(prof.rows()), 2 * 2 * 38)
        out = os.path.join(temp_dir(self), "p.csv")
        prof.write_csv(out)
        again = perseus.load_profile(out)
        self.assertEqual(again.rows(), prof.rows())

    def test_profile_accessors_refuse_a_stage_the_profile_lacks(self):
        prof = perseus.load_profile(GPT3_PROFILE)
        self.assertEqual(prof.points(7, "backward")[0]["freq_mhz"], prof.max_freq_mhz(7, "backward"))
        self.assertEqual(prof.points(0, "backward_input"), [])  # a stage without such rows: empty
        self.assertIsNone(prof.max_freq_mhz(0, "backward_input"))  # unknown, not 0 MHz
        for call in (lambda: prof.points(8, "forward"), lambda: prof.points(-1, "forward"),
                     lambda: prof.max_freq_mhz(99, "forward")):
            with self.assertRaises(perseus.InputError) as cm:
                call()
            self.assertEqual(cm.exception.field, "stage")
            self.assertIn("must be in [0, 8)", str(cm.exception))

    def test_profile_rows_to_csv_checks_every_row(self):
        good = {"stage": 0, "instruction": "forward", "freq_mhz": 1410, "time_s": 0.01, "energy_j": 3.0}
        for bad, needle in (
            (dict(good, time_s=float("nan")), "'time_s' must be finite"),
            (dict(good, energy_j=-1.0), "energy_j >= 0"),
            (dict(good, instruction="fwd"), "'instruction' must be one of"),
            ({"a": 1}, "'stage' is missing"),
        ):
            with self.subTest(row=bad):
                with self.assertRaises(perseus.InputError) as cm:
                    perseus.profile_rows_to_csv([good, bad])
                self.assertIn("row 1", str(cm.exception))
                self.assertIn(needle, str(cm.exception))
        with self.assertRaises(TypeError):
            perseus.profile_rows_to_csv([3])
        # Whatever parse_profile refuses is refused here too, naming the row: its ranges, a
        # duplicate row, no rows at all (each returned text before, then refused by parse_profile).
        rows = [r for r in perseus.load_profile(GPT3_PROFILE).rows() if r["stage"] < 1]
        for bad_rows, needle in (
            # Named by the rows' keys, not the CSV's columns (session 18's trial: "field 'time'").
            (rows[:1] + [dict(rows[1], time_s=1e300)], "row 1: field 'time_s'"),
            (rows[:1] + [dict(rows[1], time_s=1e-300)], "row 1: field 'time_s': expected a duration"),
            (rows[:1] + [dict(rows[1], energy_j=1e13)], "row 1: field 'energy_j'"),
            ([dict(r, stage=70000) for r in rows], "row 0: field 'stage'"),
            (rows + rows[:1], "row %d: field 'freq_mhz': duplicate row for stage 0 forward at %d MHz (first as row 0)"
             % (len(rows), rows[0]["freq_mhz"])),
            ([], "no data rows"),
        ):
            with self.subTest(needle=needle):
                with self.assertRaises(perseus.InputError) as cm:
                    perseus.profile_rows_to_csv(bad_rows)
                self.assertIn(needle, str(cm.exception))
        # "-0" J is 0 J (it came back as -0.0 from points() and rows()).
        import math
        zero = perseus.parse_profile(perseus.profile_rows_to_csv(
            [dict(good, energy_j=-0.0), dict(good, instruction="backward")]))
        self.assertEqual(math.copysign(1.0, zero.rows()[0]["energy_j"]), 1.0)
        text = perseus.profile_rows_to_csv(r for r in perseus.load_profile(GPT3_PROFILE).rows() if r["stage"] < 2)
        self.assertEqual(perseus.parse_profile(text).num_stages, 2)

    def test_numpy_bools_are_not_numbers(self):
        try:
            import numpy as np
        except ImportError:
            self.skipTest("numpy is not installed")
        prof = perseus.load_profile(GPT3_PROFILE)
        calls = {
            "p2p_power_w": lambda: perseus.optimize(prof, 8, 2, p2p_power_w=np.bool_(True)),
            "plans": lambda: perseus.optimize(prof, 8, 2, p2p_power_w=80.0, plans=np.array([True, False])),
            "expected_stages": lambda: perseus.load_profile(GPT3_PROFILE, expected_stages=True),
        }
        if perseus.HAVE_EMULATE:
            calls["slowdowns"] = lambda: perseus.emulate(prof, 8, 2, slowdowns=[True], pipelines=2, p2p_power_w=80.0)
        for name, call in calls.items():
            with self.subTest(keyword=name):
                with self.assertRaises(TypeError):
                    call()

    def test_a_signal_handler_interrupts_the_solve(self):
        # Ctrl-C during optimize(): Python's handlers run while the solve goes on (every 50 ms),
        # and the one that raises ends the solve with its exception. Without that this solve
        # (8 x 1024 at 0.1 ms) would run for minutes and the test would time out.
        import signal

        def handler(signum, frame):
            raise KeyboardInterrupt

        old = signal.signal(signal.SIGALRM, handler)
        try:
            signal.setitimer(signal.ITIMER_REAL, 0.2)
            with self.assertRaises(KeyboardInterrupt):
                perseus.optimize(GPT3_PROFILE, 8, 1024, p2p_power_w=83.64, plans="none", unit_time_s=0.0001)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
        # The module still works afterwards.
        self.assertGreater(len(perseus.optimize(GPT3_PROFILE, 8, 2, p2p_power_w=83.64, plans="none")["frontier"]), 0)

    def test_missing_file_is_input_error(self):
        with self.assertRaises(perseus.InputError) as cm:
            perseus.load_profile("/nonexistent/profile.csv")
        self.assertIsInstance(cm.exception, ValueError)
        self.assertIn("/nonexistent/profile.csv", str(cm.exception))

    def test_bad_row_names_line_and_field(self):
        text = "stage,instruction,frequency,time,energy\n0,forward,1410,0.05,20\n0,backward,1410,abc,40\n"
        with self.assertRaises(perseus.InputError) as cm:
            perseus.parse_profile(text, "bad.csv")
        msg = str(cm.exception)
        self.assertIn("bad.csv", msg)
        self.assertIn("3", msg)  # line 3
        self.assertIn("time", msg)

    def test_text_that_has_no_utf8_form_is_named(self):
        """A str with a lone surrogate (bytes decoded with errors='surrogateescape') got pybind11's
        "incompatible function arguments" (session 17's trial)."""
        text = "stage,instruction,frequency,time,energy\n0,forw\udc80ard,1410,0.05,20\n"
        with self.assertRaises(perseus.InputError) as cm:
            perseus.parse_profile(text, "bad.csv")
        self.assertIn("lone surrogate U+DC80 at character 46", str(cm.exception))
        self.assertEqual(cm.exception.field, "text")
        with self.assertRaises(TypeError) as cm:
            perseus.parse_profile(text.encode("utf-8", "surrogateescape"))
        self.assertIn("text must be a str, got bytes", str(cm.exception))

    def test_bools_are_not_numbers_and_none_is_not_false(self):
        """True is an int in Python: unit_time_s=True would silently be 1 s, stage=True stage 1,
        reclaim_slack=None False. Each is a TypeError."""
        prof = perseus.parse_profile(first_stages_csv(2))
        cases = [
            lambda: prof.points(True, "forward"),
            lambda: prof.has(True, "forward"),
            lambda: prof.max_freq_mhz(True, "forward"),
            lambda: perseus.optimize(prof, 2, 3, p2p_power_w=80.0, unit_time_s=True),
            lambda: perseus.optimize(prof, 2, 3, p2p_power_w=80.0, reclaim_slack=None),
            lambda: perseus.optimize(prof, 2, 3, p2p_power_w=80.0, time_budget_s=True),
            lambda: perseus.optimize(prof, 2, 3, p2p_power_w=80.0, op_overhead_s=False),
        ]
        if perseus.HAVE_EMULATE:
            cases.append(lambda: perseus.emulate(prof, 2, 3, slowdowns=[1.1], pipelines=2, p2p_power_w=80.0,
                                                 time_scale=True))
        for i, call in enumerate(cases):
            with self.subTest(case=i), self.assertRaises(TypeError):
                call()
        # The same values as numbers still work.
        self.assertTrue(prof.points(0, "forward"))
        perseus.optimize(prof, 2, 3, p2p_power_w=80.0, unit_time_s=1e-3, reclaim_slack=False, time_budget_s=10)

    def test_bound_keywords_with_the_graph_cut_planner_warn(self):
        """As `perseus optimize` warns for --bound / --max-lp-solves / --polish with --planner graph-cut."""
        prof = perseus.parse_profile(first_stages_csv(2))
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            perseus.optimize(prof, 2, 3, p2p_power_w=80.0, planner="graph-cut", bound="lp")
            perseus.optimize(prof, 2, 3, p2p_power_w=80.0, planner="graph-cut")
        msgs = [str(w.message) for w in caught]
        self.assertEqual(msgs, ["bound has no effect with planner='graph-cut' (it computes no bound)"])
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with self.assertRaises(UserWarning):
                perseus.optimize(prof, 2, 3, p2p_power_w=80.0, planner="graph-cut", max_lp_solves=40)

    def test_implausible_units_warn_as_the_cli_does_or_fail_with_strict(self):
        """optimize() planned a profile in kJ, or P_block typed in mW (NVML's unit), without a word
        while `perseus optimize` warned (session 22's trial): now a UserWarning at the caller's
        line, summary['warnings'], and strict=True refuses them, as --strict."""
        import warnings
        bad = perseus.parse_profile("stage,instruction,frequency,time,energy\n"
                                    "0,forward,1410,0.1,5000\n0,backward,1410,0.2,20\n", "bad.csv")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            res = perseus.optimize(bad, 1, 2, p2p_power_w=80.0, plans="none")
        msgs = [str(w.message) for w in caught]
        self.assertEqual(len(msgs), 1, msgs)
        self.assertIn("bad.csv: stage 0 forward at 1410 MHz: energy 5000 J over time 0.1 s implies 5e+04 W", msgs[0])
        self.assertEqual(caught[0].filename, __file__, "the warning points at the caller's line")
        self.assertEqual(res["summary"]["warnings"], msgs)
        self.assertEqual(perseus.profile_unit_warnings(bad, 80.0), msgs)
        with self.assertRaises(perseus.InputError) as cm:
            perseus.optimize(bad, 1, 2, p2p_power_w=80.0, plans="none", strict=True)
        self.assertEqual(cm.exception.field, "profile")
        self.assertIn("strict=True", str(cm.exception))
        prof = perseus.parse_profile(first_stages_csv(2))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            milliwatts = perseus.optimize(prof, 2, 3, p2p_power_w=80000.0, plans="none")
            self.assertEqual(perseus.optimize(prof, 2, 3, p2p_power_w=80.0, plans="none", strict=True)["summary"]["warnings"], [])
        self.assertEqual(len(caught), 1, [str(w.message) for w in caught])
        self.assertIn("P_block 80000 W is above the power of stage", str(caught[0].message))
        self.assertEqual(milliwatts["summary"]["warnings"], [str(caught[0].message)])
        with self.assertRaises(TypeError):
            perseus.optimize(prof, 2, 3, p2p_power_w=80.0, strict=1)  # a bool, not a truthy number
        # As `perseus optimize --backward-input-fraction`: said so where 1F1B splits no backward.
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            perseus.optimize(prof, 2, 3, p2p_power_w=80.0, plans="none", backward_input_fraction=0.3)
            split = perseus.optimize(prof, 2, 3, p2p_power_w=80.0, plans="none", schedule="zb-h1",
                                     backward_input_fraction=0.3)
        self.assertEqual([str(w.message) for w in caught],
                         ["backward_input_fraction had no effect: the schedule does not split the backward into I "
                          "and W, or the profile has backward_input/backward_weight rows"])
        self.assertTrue(any("backward split" in a for a in split["summary"]["approximations"]))

    def test_wrong_types_name_the_argument(self):
        """Session 22's trial: Profile methods, Client() and a None path gave pybind11's generic
        "incompatible arguments" (or os.fspath's) message, naming no argument."""
        prof = perseus.parse_profile(first_stages_csv(2))
        cases = [
            (lambda: prof.points(2**40, "forward"), "Profile.points(): stage=1099511627776 is outside"),
            (lambda: prof.points(True, "forward"), "Profile.points(): stage must be int, got bool"),
            (lambda: prof.has(0, 3), "Profile.has(): instruction must be str, got int"),
            (lambda: prof.max_freq_mhz(2**40, "forward"), "Profile.max_freq_mhz(): stage=1099511627776"),
            (lambda: prof.points(0, "forward", frob=1), "Profile.points() got an unexpected keyword argument 'frob'"),
            (lambda: perseus.optimize(None, 2, 3, p2p_power_w=80.0), "profile must be a perseus.Profile or a CSV path"),
            (lambda: perseus.optimize(prof, 2, 3, p2p_power_w=80.0, schedule=None), "schedule must be str, bytes or"),
            (lambda: perseus.load_profile(3), "path must be str, bytes or os.PathLike (a path), got int"),
        ]
        if perseus.HAVE_CLIENT:
            cases += [
                (lambda: perseus.Client("http://127.0.0.1:9", None, rank=0), "Client(): job_id must be str, got None"),
                (lambda: perseus.Client("http://127.0.0.1:9", "j", rank=0, backend=None),
                 "Client(): backend must be str, got None"),
            ]
        for i, (call, text) in enumerate(cases):
            # An int beyond the C++ type is a bad value (InputError, a ValueError), the rest bad types.
            kind = perseus.InputError if "is outside" in text or "=1099511627776" in text else TypeError
            with self.subTest(case=i):
                with self.assertRaises(kind) as cm:
                    call()
                self.assertIn(text, str(cm.exception))
        self.assertEqual(prof.max_freq_mhz(0, "forward"), prof.points(0, "forward")[0]["freq_mhz"])

    def test_an_input_error_raised_from_python_has_the_attributes(self):
        e = perseus.InputError("x")
        self.assertEqual((e.field, e.source, e.line), ("", "", 0))

    def test_a_profile_cannot_be_made_without_its_loader(self):
        """Profile.__new__ gave an object whose C++ profile was never built: points() crashed
        the interpreter and num_stages read garbage. Refused with a TypeError naming the loaders."""
        for make in (lambda: perseus.Profile.__new__(perseus.Profile), lambda: perseus.Profile()):
            with self.assertRaises(TypeError) as cm:
                make()
            self.assertIn("load_profile", str(cm.exception))

        class Sub(perseus.Profile):
            pass

        with self.assertRaises(TypeError):
            Sub.__new__(Sub)
        # The base's __new__ (pybind11_object) built the same half-made object (repr read garbage,
        # max_freq_mhz segfaulted).
        for base in perseus.Profile.__mro__[1:-1]:
            with self.assertRaises(TypeError, msg=base.__name__):
                base.__new__(perseus.Profile)
        self.assertEqual(perseus.parse_profile(first_stages_csv(2)).num_stages, 2)

    def test_nul_in_a_path_is_refused(self):
        """A path with a NUL would be cut there by the OS ("p.csv\0.bak" opened p.csv): refused
        with InputError (a ValueError) naming the keyword, before any file is opened or written."""
        d = temp_dir(self)
        real = os.path.join(d, "p.csv")
        prof = perseus.parse_profile(first_stages_csv(2))
        prof.write_csv(real)
        cut = os.path.join(d, "cut.csv")
        cases = [
            (lambda: perseus.load_profile(real + "\x00.bak"), "path"),
            (lambda: perseus.load_profile(os.fsencode(real) + b"\x00.bak"), "path"),
            (lambda: prof.write_csv(cut + "\x00.bak"), "path"),
            (lambda: perseus.optimize(real + "\x00.bak", 2, 3, p2p_power_w=80.0), "profile"),
            (lambda: perseus.optimize(real, 2, 3, p2p_power_w=80.0, schedule="1f1b\x00"), "schedule"),
        ]
        if perseus.HAVE_EMULATE:
            cases.append((lambda: perseus.emulate(real + "\x00.bak", 2, 3, slowdowns=[1.0], p2p_power_w=80.0), "profile"))
        if perseus.HAVE_RENDER:
            cases.append((lambda: perseus.write_report(d + "\x00x"), "dir"))
            plan = perseus.optimize(prof, 2, 3, p2p_power_w=80.0, unit_time_s=0.01, plans="fastest")["plans"][0]
            self.assertIn("<svg", perseus.render_timeline_svg(prof, plan, 3, schedule="1f1b"))
            cases.append((lambda: perseus.render_timeline_svg(prof, plan, 3, schedule="1f1b\x00"), "schedule"))
        for call, kw in cases:
            with self.subTest(kw=kw):
                with self.assertRaises(perseus.InputError) as cm:
                    call()
                self.assertIsInstance(cm.exception, ValueError)
                self.assertEqual(cm.exception.field, kw)
                self.assertIn(kw + " must not contain a NUL character", str(cm.exception))
        self.assertFalse(os.path.exists(cut))
        self.assertEqual(perseus.load_profile(os.fsencode(real)).rows(), prof.rows())  # bytes paths work

    def test_a_file_name_that_is_not_utf8_works_as_str_and_bytes(self):
        """Linux names are bytes: os.listdir() gives such a name as a str with lone surrogates.
        It raised "Unable to cast Python instance to C++ type", and a missing one given as bytes
        UnicodeDecodeError, not InputError (fresh-user trial, session 20)."""
        d = temp_dir(self)
        name = os.path.join(os.fsencode(d), b"prof\xff.csv")
        prof = perseus.parse_profile(first_stages_csv(2))
        prof.write_csv(os.fsdecode(name))
        self.assertTrue(os.path.exists(name))
        self.assertEqual(perseus.load_profile(os.fsdecode(name)).rows(), prof.rows())
        self.assertEqual(perseus.load_profile(name).rows(), prof.rows())
        res = perseus.optimize(os.fsdecode(name), 2, 3, p2p_power_w=80.0, unit_time_s=0.01)
        self.assertGreater(len(res["frontier"]), 0)
        missing = os.path.join(os.fsencode(d), b"missing\xff.csv")
        with self.assertRaises(perseus.InputError) as cm:
            perseus.load_profile(missing)
        self.assertIn("missing\\xFF.csv", str(cm.exception))  # escaped as the CLI prints it

    def test_ctrl_c_ends_load_profile_of_a_fifo_without_writer(self):
        """Session 13's trial: load_profile() of a FIFO nobody writes to blocks in open() (as
        everywhere on Unix), and Ctrl-C did nothing: the library retried the interrupted call.
        SIGINT now raises KeyboardInterrupt there."""
        self.interrupt_a_fifo_read("perseus.load_profile(sys.argv[1])")

    @unittest.skipUnless(perseus.HAVE_CLIENT, "built without the runtime client")
    def test_ctrl_c_ends_a_simulated_client_reading_a_fifo_profile(self):
        """Session 32's trial: the same read inside Client() (the simulated backend's profile)
        raised ClientError PERSEUS_ERR_INTERNAL "KeyboardInterrupt: <EMPTY MESSAGE>" through the
        client's C ABI, which `except KeyboardInterrupt` did not catch."""
        self.interrupt_a_fifo_read("perseus.Client('http://127.0.0.1:1', 'job-x', rank=0, backend='simulated', "
                                   "profile_path=sys.argv[1], startup_timeout_s=0.2)")

    def interrupt_a_fifo_read(self, call):
        """Runs `call` (reading the FIFO sys.argv[1]) in a child, sends SIGINT once the child
        blocks opening it, and expects KeyboardInterrupt to end the call."""
        import signal
        import sys
        import time
        fifo = os.path.join(temp_dir(self), "profile.csv")
        os.mkfifo(fifo)
        code = ("import perseus, sys\ntry:\n    %s\n"
                "except KeyboardInterrupt:\n    sys.exit(7)\n" % call)
        child = subprocess.Popen([sys.executable, "-c", code, fifo], env=dict(os.environ))
        self.addCleanup(child.kill)
        # The event: the child blocked opening the FIFO (the kernel's wait for a writer).
        # A kernel that hides wait channels reads "0" as for a running process: after two minutes
        # without seeing it, the test is skipped (never failed: the deadline is not a margin).
        wchan, give_up = "/proc/%d/wchan" % child.pid, time.monotonic() + 120
        while child.poll() is None:
            with open(wchan) as f:
                if f.read().strip() == "wait_for_partner":
                    break
            if time.monotonic() > give_up:
                self.skipTest("cannot see the child block on the FIFO (/proc/PID/wchan)")
            time.sleep(0.01)
        self.assertIsNone(child.poll(), "the child ended before blocking on the FIFO")
        child.send_signal(signal.SIGINT)
        try:
            status = child.wait(timeout=300)
        except subprocess.TimeoutExpired:
            self.fail("SIGINT did not end %s of a FIFO without a writer" % call)
        self.assertEqual(status, 7)

    def test_a_keyword_typo_names_the_keyword_and_the_nearest_accepted_one(self):
        """Session 13's trial: optimize(..., microbatchs=12) said only "incompatible function
        arguments" and listed the whole signature."""
        prof = perseus.parse_profile(first_stages_csv(2))
        with self.assertRaises(TypeError) as cm:
            perseus.optimize(prof, stages=2, microbatchs=4, p2p_power_w=80)
        self.assertIn("optimize() got an unexpected keyword argument 'microbatchs' (did you mean 'microbatches'?)",
                      str(cm.exception))
        self.assertIn("; it takes backward_input_fraction, bound, chunks,", str(cm.exception))
        with self.assertRaises(TypeError) as cm:
            perseus.optimize(prof, stages=2, microbatches=4, p2p_power=80, zzz=1)
        self.assertIn("unexpected keyword arguments 'p2p_power' (did you mean 'p2p_power_w'?), 'zzz';",
                      str(cm.exception))
        with self.assertRaises(TypeError) as cm:
            perseus.load_profile(GPT3_PROFILE, stages=8)
        self.assertIn("load_profile() got an unexpected keyword argument 'stages'; it takes expected_stages, path",
                      str(cm.exception))
        # A known keyword of the wrong type: the types given and the signature (pybind11's own
        # message repeats every argument: 17 MB for a frontier with all its plans, session 18).
        with self.assertRaises(TypeError) as cm:
            perseus.optimize(prof, stages="2", microbatches=4, p2p_power_w=80)
        self.assertIn("optimize(): stages must be int or None, got str; given (Profile, stages=str, microbatches=int, "
                      "p2p_power_w=int); it takes optimize(profile: object", str(cm.exception))
        # Optional keywords are named too (they said "an argument has the wrong type" until session 26).
        for kw, value, why in (("time_budget_s", "1", "time_budget_s must be float or None, got str"),
                               ("max_points", 2.0, "max_points must be int or None, got float"),
                               ("max_points", True, "max_points must be int or None, got bool"),
                               ("p2p_power_w", "70", "p2p_power_w must be float or None, got str")):
            with self.assertRaises(TypeError) as cm:
                perseus.optimize(prof, stages=2, microbatches=4, **{"p2p_power_w": 80, kw: value})
            self.assertIn("optimize(): " + why + ";", str(cm.exception))
        with self.assertRaises(TypeError) as cm:
            perseus.optimize(prof, stages=2, microbatches=4, p2p_power_w=80, reclaim_slack=None)
        self.assertIn("optimize(): reclaim_slack must be bool, got None;", str(cm.exception))
        # The right type beyond the C++ integer was "an argument has the wrong type" (fresh-user
        # trial, session 20), then a TypeError naming it; it is a bad value, so an InputError
        # naming the keyword, as every other range check (session 31).
        # Beyond 64 bits it says so (session 32: "a 32-bit int" was wrong for 64-bit keywords).
        for args, kwargs, field, why in (((prof, 2**31, 4), {}, "stages", "a 32-bit int"),
                                         ((prof, 2, 4), {"threads": -2**40}, "threads", "a 32-bit int"),
                                         ((prof, 2, 4), {"max_points": 2**70}, "max_points", "beyond 64 bits")):
            with self.assertRaises(perseus.InputError) as cm:
                perseus.optimize(*args, p2p_power_w=80, **kwargs)
            self.assertEqual(cm.exception.field, field)
            self.assertIn("optimize(): %s=%d is outside the range of integers it accepts (%s"
                          % (field, dict(kwargs, stages=2**31)[field], why), str(cm.exception))
        # With a wrong type beside it, the call is still a TypeError naming both.
        with self.assertRaises(TypeError) as cm:
            perseus.optimize(prof, 2**31, 4, p2p_power_w="80")
        self.assertIn("stages=2147483648 is outside the range", str(cm.exception))
        self.assertIn("p2p_power_w must be float or None, got str", str(cm.exception))
        if perseus.HAVE_EMULATE:
            with self.assertRaises(TypeError) as cm:
                perseus.emulate(prof, 2, 4, slowdowns=[1.1, "1.2"], p2p_power_w=80, pipelines=2)
            self.assertIn("emulate(): slowdowns[1] must be float, got str;", str(cm.exception))
        if perseus.HAVE_RENDER:
            res = perseus.optimize(prof, stages=2, microbatches=4, p2p_power_w=80, plans="all")
            for title, why in ((None, "title must be str, got None"),
                               ("x\ud800", "title is not valid text (it holds a lone surrogate)")):
                with self.assertRaises(TypeError) as cm:
                    perseus.render_frontier_svg(res["frontier"], plans=res["plans"], title=title)
                self.assertIn("render_frontier_svg(): " + why, str(cm.exception))
                self.assertLess(len(str(cm.exception)), 1000, "the plans are not repeated in the message")
        self.assertEqual(perseus.optimize.__name__, "optimize")
        self.assertIn("p2p_power_w", perseus.optimize.__doc__)  # help() still shows the signature

    def test_wrong_stage_count(self):
        with self.assertRaises(perseus.InputError) as cm:
            perseus.parse_profile(first_stages_csv(2), "two.csv", expected_stages=3)
        self.assertIn("two.csv", str(cm.exception))

    def test_unknown_instruction_name(self):
        prof = perseus.parse_profile(first_stages_csv(1))
        with self.assertRaises(perseus.InputError) as cm:
            prof.points(0, "sideways")
        self.assertIn('"sideways"', str(cm.exception))
        with self.assertRaises(perseus.InputError):
            prof.max_freq_mhz(0)


class ScheduleTest(unittest.TestCase):
    def test_1f1b_order(self):
        s = perseus.schedule("1f1b", 4, 6)
        self.assertEqual(s["num_stages"], 4)
        self.assertEqual(s["stage_rank"], [0, 1, 2, 3])
        first = ["%s%d" % (i["instruction"][0].upper(), i["microbatch"]) for i in s["ranks"][0]]
        self.assertEqual(first, "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5".split())
        last = ["%s%d" % (i["instruction"][0].upper(), i["microbatch"]) for i in s["ranks"][3]]
        self.assertEqual(last, "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5".split())
        self.assertIn("1f1b", perseus.schedule_names())

    def test_unknown_schedule(self):
        with self.assertRaises(perseus.InputError) as cm:
            perseus.schedule("zigzag", 4, 6)
        self.assertIn("zigzag", str(cm.exception))
        with self.assertRaises(perseus.InputError):
            perseus.schedule("1f1b", 0, 6)


class OptimizeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.profile = perseus.parse_profile(first_stages_csv(STAGES), "gpt3-4stages")
        cls.res = perseus.optimize(cls.profile, STAGES, MICROBATCHES, p2p_power_w=P_BLOCK, unit_time_s=UNIT,
                                   plans="all")

    def test_frontier_shape(self):
        fr = self.res["frontier"]
        self.assertGreater(len(fr), 5)
        times = [p["time_s"] for p in fr]
        energies = [p["energy_j"] for p in fr]
        self.assertTrue(all(a > b for a, b in zip(times, times[1:])), "time must strictly decrease")
        # Planner 2.0 (docs/planner2.md): effective energy E - P_block x ranks x T rises toward
        # T_min (own-time E may fall in the straggler regime); the bound is below every point.
        eff = [p["energy_j"] - P_BLOCK * STAGES * p["time_s"] for p in fr]
        self.assertTrue(all(a < b for a, b in zip(eff, eff[1:])), "effective energy must strictly increase")
        self.assertTrue(all(0 < p["lower_bound_j"] <= p["energy_j"] for p in fr))
        s = self.res["summary"]
        self.assertEqual(s["num_plans"], len(fr))
        self.assertAlmostEqual(s["t_min_s"], times[-1])
        self.assertAlmostEqual(s["t_max_s"], times[0])
        # Perseus removes intrinsic bloat: T_min plan no slower than all-max, and cheaper.
        self.assertLessEqual(s["t_min_s"], s["allmax_time_s"] + 1e-9)
        self.assertLess(s["energy_at_t_min_j"], s["allmax_energy_j"])
        self.assertEqual(s["num_ops"], STAGES * MICROBATCHES * 2)

    def test_threads_do_not_change_plans(self):
        res = perseus.optimize(self.profile, STAGES, MICROBATCHES, p2p_power_w=P_BLOCK, unit_time_s=UNIT,
                               plans=[3, 0, 3, 1], threads=3)
        self.assertEqual([p["plan"] for p in res["plans"]], [0, 1, 3])
        for plan in res["plans"]:
            self.assertEqual(plan, self.res["plans"][plan["plan"]])
        auto = perseus.optimize(self.profile, STAGES, MICROBATCHES, p2p_power_w=P_BLOCK, unit_time_s=UNIT,
                                plans="fastest", threads=0)  # one per hardware thread
        self.assertEqual(auto["plans"][0], self.res["plans"][-1])
        with self.assertRaises(perseus.InputError):
            perseus.optimize(self.profile, STAGES, MICROBATCHES, p2p_power_w=P_BLOCK, threads=-1)

    def test_bounded_solves_are_partial(self):
        # Issue 20: a bounded solve returns the frontier found so far, marked partial.
        zero = perseus.optimize(self.profile, STAGES, MICROBATCHES, p2p_power_w=P_BLOCK, unit_time_s=UNIT,
                                plans="none", time_budget_s=0)
        self.assertTrue(zero["summary"]["partial"])
        self.assertEqual(zero["summary"]["partial_reason"], "time_budget")
        self.assertEqual(zero["summary"]["num_steps"], 0)
        self.assertGreaterEqual(len(zero["frontier"]), 2)
        # Stopped before the bound stage: no bound, so no gap (None, not a "proven optimal" 0).
        for key in ("lower_bound_at_t_min_j", "max_optimality_gap_pct", "max_deadline_gap_pct"):
            self.assertIsNone(zero["summary"][key], key)
        capped = perseus.optimize(self.profile, STAGES, MICROBATCHES, p2p_power_w=P_BLOCK, unit_time_s=UNIT,
                                  plans="all", max_points=4, threads=2)
        self.assertEqual(len(capped["frontier"]), 4)
        self.assertEqual(len(capped["plans"]), 4)
        self.assertTrue(capped["summary"]["partial"])
        self.assertEqual(capped["summary"]["partial_reason"], "max_points")
        self.assertTrue(capped["summary"]["partial_detail"])
        self.assertFalse(self.res["summary"]["partial"])
        self.assertEqual(self.res["summary"]["partial_reason"], "")
        for bad in ({"time_budget_s": -1.0}, {"time_budget_s": float("nan")}, {"max_points": 0}):
            with self.assertRaises(perseus.InputError):
                perseus.optimize(self.profile, STAGES, MICROBATCHES, p2p_power_w=P_BLOCK, **bad)

    def test_polish(self):
        # Issue 17: polish_s seconds of window search on the frontier's plans; never a worse frontier.
        res = perseus.optimize(self.profile, STAGES, MICROBATCHES, p2p_power_w=P_BLOCK, unit_time_s=UNIT,
                               plans="none", polish_s=0.5)
        self.assertEqual(res["summary"]["polish_s"], 0.5)
        self.assertGreaterEqual(res["summary"]["num_polished_points"], 0)
        self.assertEqual(self.res["summary"]["polish_s"], 0.0)
        self.assertEqual(self.res["summary"]["num_polished_points"], 0)
        self.assertLessEqual(res["frontier"][-1]["time_s"], self.res["frontier"][-1]["time_s"])
        for bad in (-1.0, float("nan"), 1e6):
            with self.assertRaisesRegex(perseus.InputError, "polish_s"):
                perseus.optimize(self.profile, STAGES, MICROBATCHES, p2p_power_w=P_BLOCK, polish_s=bad)

    def test_paths_in_errors_cannot_drive_the_terminal(self):
        # A path nobody quoted reaches the message escaped and capped (terminal_safe()); the
        # exception's `source` keeps the name as data.
        with self.assertRaises(perseus.InputError) as cm:
            perseus.optimize("nope\x1b[2J.csv", 2, 2, p2p_power_w=80.0)
        self.assertNotIn("\x1b", str(cm.exception))
        self.assertIn("\\x1B[2J", str(cm.exception))
        with self.assertRaises(perseus.InputError) as cm:
            perseus.optimize("p" * 20000, 2, 2, p2p_power_w=80.0)
        self.assertLess(len(str(cm.exception)), 5000)

    def test_polish_solves(self):
        # A budget of CBC solves instead of seconds: the same frontier every time, at most N solves.
        runs = [perseus.optimize(self.profile, STAGES, MICROBATCHES, p2p_power_w=P_BLOCK, unit_time_s=UNIT,
                                 plans="none", polish_solves=4) for _ in range(2)]
        self.assertEqual(runs[0]["frontier"], runs[1]["frontier"])
        self.assertEqual(runs[0]["summary"]["polish_solves"], 4)
        self.assertEqual(self.res["summary"]["polish_solves"], 0)
        for bad in (-1, 1000001):
            with self.assertRaisesRegex(perseus.InputError, "polish_solves"):
                perseus.optimize(self.profile, STAGES, MICROBATCHES, p2p_power_w=P_BLOCK, polish_solves=bad)
        for bad in (2.5, "3", True):
            with self.assertRaises(TypeError):
                perseus.optimize(self.profile, STAGES, MICROBATCHES, p2p_power_w=P_BLOCK, polish_solves=bad)

    def test_planner_and_bound_keywords(self):
        # As `perseus optimize --planner/--bound`: the paper's planner has no bound (None gaps);
        # the certified planner's bound method is selectable; bad names are InputErrors.
        today = perseus.optimize(self.profile, STAGES, MICROBATCHES, p2p_power_w=P_BLOCK, unit_time_s=UNIT,
                                 plans="none", planner="graph-cut")
        self.assertEqual(today["summary"]["num_lp_solves"], 0)
        for key in ("lower_bound_at_t_min_j", "max_optimality_gap_pct", "max_deadline_gap_pct"):
            self.assertIsNone(today["summary"][key], key)
        self.assertTrue(all(p["lower_bound_j"] == 0 for p in today["frontier"]))
        walk = perseus.optimize(self.profile, STAGES, MICROBATCHES, p2p_power_w=P_BLOCK, unit_time_s=UNIT,
                                plans="none", bound="hull-walk")
        self.assertEqual(walk["summary"]["bound_method"], "hull-walk")
        # LP refinement solves on small DAGs (T_min's first), within the LP stage's budget of 400.
        self.assertGreaterEqual(walk["summary"]["num_lp_solves"], 1)
        self.assertLessEqual(walk["summary"]["num_lp_solves"], 400)
        self.assertGreater(walk["summary"]["max_optimality_gap_pct"], 0)
        s = self.res["summary"]
        self.assertEqual(s["bound_method"], "lp")
        self.assertGreaterEqual(s["max_deadline_gap_pct"], 0)
        # saving_at_allmax_time_pct: the lowest-energy plan no slower than the all-max plan.
        best = min(p["energy_j"] for p in self.res["frontier"] if p["time_s"] <= s["allmax_time_s"] * (1 + 1e-12))
        self.assertAlmostEqual(s["saving_at_allmax_time_pct"], 100 * (s["allmax_energy_j"] - best) / s["allmax_energy_j"])
        self.assertGreaterEqual(s["saving_at_allmax_time_pct"], s["intrinsic_saving_pct"] - 1e-9)
        for kw, bad in (("planner", "fast"), ("bound", "simplex"), ("planner", "")):
            with self.assertRaisesRegex(perseus.InputError, kw):
                perseus.optimize(self.profile, STAGES, MICROBATCHES, p2p_power_w=P_BLOCK, **{kw: bad})

    def test_max_lp_solves(self):
        # Issue 17: fewer LP solves (the certified planner's LP bound) are faster; the bound and
        # every plan stay honest, and the count is respected.
        res = perseus.optimize(self.profile, STAGES, MICROBATCHES, p2p_power_w=P_BLOCK, unit_time_s=UNIT,
                               plans="none", max_lp_solves=3)
        self.assertEqual(res["summary"]["max_lp_solves"], 3)
        self.assertEqual(self.res["summary"]["max_lp_solves"], 400)
        self.assertEqual(res["summary"]["bound_method"], "lp")
        self.assertGreaterEqual(res["summary"]["num_lp_solves"], 1)
        self.assertLessEqual(res["summary"]["num_lp_solves"], 3)
        self.assertLessEqual(res["summary"]["num_lp_solves"], self.res["summary"]["num_lp_solves"])
        for p in res["frontier"]:
            self.assertLessEqual(p["lower_bound_j"], p["energy_j"] * (1 + 1e-12))
        for bad in (0, -1, 100001):
            with self.assertRaisesRegex(perseus.InputError, "max_lp_solves"):
                perseus.optimize(self.profile, STAGES, MICROBATCHES, p2p_power_w=P_BLOCK, max_lp_solves=bad)

    def test_timeline_overheads(self):
        # Issue 19: op_overhead_s / p2p_latency_s are folded into every computation's duration
        # (TimelineOverheads), exactly as `perseus optimize --op-overhead/--p2p-latency`.
        o, l = 0.004, 0.01
        res = perseus.optimize(self.profile, STAGES, MICROBATCHES, p2p_power_w=P_BLOCK, unit_time_s=UNIT,
                               plans="fastest", op_overhead_s=o, p2p_latency_s=l)
        self.assertEqual((res["summary"]["op_overhead_s"], res["summary"]["p2p_latency_s"]), (o, l))
        # The all-max plan, by hand: profiled time at max clock + o, + l when the computation
        # sends to another GPU (forwards of all but the last stage, backwards of all but the first).
        for r, rank in enumerate(res["all_max"]["ranks"]):
            for ins in rank["instructions"]:
                kind = ins["instruction"]
                sends = r < STAGES - 1 if kind == "forward" else r > 0
                expected = self.profile.points(r, kind)[0]["time_s"] + o + (l if sends else 0.0)
                self.assertAlmostEqual(ins["end_s"] - ins["start_s"], expected, places=9)
        self.assertGreater(res["summary"]["allmax_time_s"], self.res["summary"]["allmax_time_s"])
        # Defaults are the computation-only model: the same frontier as without the keywords.
        zero = perseus.optimize(self.profile, STAGES, MICROBATCHES, p2p_power_w=P_BLOCK, unit_time_s=UNIT,
                                plans="none", op_overhead_s=0.0, p2p_latency_s=0.0)
        self.assertEqual(zero["frontier"], self.res["frontier"])
        self.assertEqual((self.res["summary"]["op_overhead_s"], self.res["summary"]["p2p_latency_s"]), (0.0, 0.0))
        if PERSEUS_BINARY:  # the same problem as the CLI
            d = temp_dir(self)
            prof_path = os.path.join(d, "p.csv")
            self.profile.write_csv(prof_path)
            out = os.path.join(d, "out")
            subprocess.run([PERSEUS_BINARY, "optimize", "--profile", prof_path, "--stages", str(STAGES),
                            "--microbatches", str(MICROBATCHES), "--p2p-power", str(P_BLOCK), "--unit-time",
                            str(UNIT), "--op-overhead", str(o), "--p2p-latency", str(l), "--quiet", "--out", out],
                           check=True)
            with open(os.path.join(out, "frontier.csv")) as f:
                rows = list(csv.DictReader(f))
            self.assertEqual(len(rows), len(res["frontier"]))
            for row, p in zip(rows, res["frontier"]):
                self.assertAlmostEqual(float(row["time_s"]), p["time_s"], places=7)
                self.assertAlmostEqual(float(row["energy_j"]), p["energy_j"], places=4)
        # Bad values: InputError naming the keyword (no solve, no crash); wrong type: TypeError.
        for key in ("op_overhead_s", "p2p_latency_s"):
            for bad in (-0.001, float("nan"), float("inf"), 3601.0):
                with self.subTest(key=key, value=bad):
                    with self.assertRaises(perseus.InputError) as cm:
                        perseus.optimize(self.profile, STAGES, MICROBATCHES, p2p_power_w=P_BLOCK, **{key: bad})
                    self.assertEqual(cm.exception.field, key)
                    self.assertIn(key, str(cm.exception))
            with self.assertRaises(TypeError):
                perseus.optimize(self.profile, STAGES, MICROBATCHES, p2p_power_w=P_BLOCK, **{key: "0.1"})
        with self.assertRaises(perseus.InputError) as cm:  # checked before the profile file is read
            perseus.optimize("/nonexistent.csv", 2, 2, p2p_power_w=P_BLOCK, op_overhead_s=-1.0)
        self.assertEqual(cm.exception.field, "op_overhead_s")

    def test_plans_are_consistent(self):
        plans = self.res["plans"]
        self.assertEqual(len(plans), len(self.res["frontier"]))
        sched = perseus.schedule("1f1b", STAGES, MICROBATCHES)
        for plan, point in zip(plans, self.res["frontier"]):
            self.assertEqual(plan["plan"], point["plan"])
            self.assertAlmostEqual(plan["time_s"], point["time_s"], places=9)
            self.assertAlmostEqual(plan["energy_j"], point["energy_j"], places=6)
            self.assertAlmostEqual(plan["energy_j"], plan["compute_energy_j"] + plan["blocking_energy_j"], places=6)
            for r, rank in enumerate(plan["ranks"]):
                order = [(i["instruction"], i["microbatch"]) for i in rank["instructions"]]
                self.assertEqual(order, [(i["instruction"], i["microbatch"]) for i in sched["ranks"][r]])
                allowed = {p["freq_mhz"] for p in self.profile.points(r, "forward")}
                for ins in rank["instructions"]:
                    if ins["instruction"] == "forward":
                        self.assertIn(ins["frequency_mhz"], allowed)
                    self.assertLessEqual(ins["end_s"], plan["time_s"] + 1e-9)
        allmax = self.res["all_max"]
        self.assertIsNone(allmax["plan"])
        self.assertTrue(all(i["frequency_mhz"] == 1410 for r in allmax["ranks"] for i in r["instructions"]))

    def test_matches_cli(self):
        if not PERSEUS_BINARY:
            self.skipTest("PERSEUS_BINARY not set (run through ctest)")
        d = temp_dir(self)
        prof_path = os.path.join(d, "p.csv")
        self.profile.write_csv(prof_path)
        out = os.path.join(d, "out")
        subprocess.run([PERSEUS_BINARY, "optimize", "--profile", prof_path, "--stages", str(STAGES), "--microbatches",
                        str(MICROBATCHES), "--p2p-power", str(P_BLOCK), "--unit-time", str(UNIT), "--quiet",
                        "--out", out], check=True)
        with open(os.path.join(out, "frontier.csv")) as f:
            rows = list(csv.DictReader(f))
        self.assertEqual(len(rows), len(self.res["frontier"]))
        for row, p in zip(rows, self.res["frontier"]):
            self.assertAlmostEqual(float(row["time_s"]), p["time_s"], places=7)
            self.assertAlmostEqual(float(row["energy_j"]), p["energy_j"], places=4)
        last = len(rows) - 1
        with open(os.path.join(out, "plans", "plan_%05d.json" % last)) as f:
            cli_plan = json.load(f)
        py_plan = self.res["plans"][last]
        self.assertEqual([[i["frequency_mhz"] for i in r["instructions"]] for r in cli_plan["ranks"]],
                         [[i["frequency_mhz"] for i in r["instructions"]] for r in py_plan["ranks"]])

    def test_plan_selection(self):
        n = len(perseus.optimize(self.profile, STAGES, MICROBATCHES, p2p_power_w=P_BLOCK, unit_time_s=UNIT,
                                 plans="none")["frontier"])
        res = perseus.optimize(self.profile, STAGES, MICROBATCHES, p2p_power_w=P_BLOCK, unit_time_s=UNIT,
                               plans=[n - 1, 0])
        self.assertEqual([p["plan"] for p in res["plans"]], [0, n - 1])
        self.assertEqual(perseus.optimize(self.profile, STAGES, MICROBATCHES, p2p_power_w=P_BLOCK, unit_time_s=UNIT,
                                          plans="none")["plans"], [])
        fastest = perseus.optimize(self.profile, STAGES, MICROBATCHES, p2p_power_w=P_BLOCK, unit_time_s=UNIT,
                                   plans="fastest")["plans"]
        self.assertEqual([p["plan"] for p in fastest], [n - 1])
        with self.assertRaises(IndexError):
            perseus.optimize(self.profile, STAGES, MICROBATCHES, p2p_power_w=P_BLOCK, unit_time_s=UNIT, plans=[n + 5])
        with self.assertRaises(perseus.InputError) as cm:
            perseus.optimize(self.profile, STAGES, MICROBATCHES, p2p_power_w=P_BLOCK, unit_time_s=UNIT, plans="some")
        self.assertIn("got 'some'", str(cm.exception))
        self.assertEqual(cm.exception.field, "plans")  # it was '' (session 20's trial)
        # Negative indices are refused, not counted from the end (-1 is the server's all-max baseline).
        for bad in ([-1], [0, -(2 ** 70)]):
            with self.assertRaises(perseus.InputError) as cm:
                perseus.optimize(self.profile, STAGES, MICROBATCHES, p2p_power_w=P_BLOCK, unit_time_s=UNIT, plans=bad)
            self.assertEqual(cm.exception.field, "plans")
            self.assertIn("indices must be >= 0 (0 = the slowest plan, %d = the fastest" % (n - 1), str(cm.exception))
        with self.assertRaises(IndexError):
            perseus.optimize(self.profile, STAGES, MICROBATCHES, p2p_power_w=P_BLOCK, unit_time_s=UNIT,
                             plans=[2 ** 70])
        with self.assertRaises(TypeError):
            perseus.optimize(self.profile, STAGES, MICROBATCHES, p2p_power_w=P_BLOCK, unit_time_s=UNIT, plans=[1.5])
        # Bytes iterate as ints (b"8" was plan 56), a dict as its keys: not lists of indices.
        for bad in (b"8", bytearray(b"\x01"), {0: "a"}):
            with self.assertRaises(TypeError):
                perseus.optimize(self.profile, STAGES, MICROBATCHES, p2p_power_w=P_BLOCK, unit_time_s=UNIT, plans=bad)

    def test_zero_sizes_are_errors_not_defaults(self):
        for kw, field in (("stages", "stages"), ("microbatches", "microbatches"), ("chunks", "chunks")):
            args = dict(stages=STAGES, microbatches=MICROBATCHES, p2p_power_w=P_BLOCK, unit_time_s=UNIT, plans="none")
            args[kw] = 0
            with self.assertRaises(perseus.InputError) as cm:
                perseus.optimize(self.profile, **args)
            self.assertIsInstance(cm.exception, ValueError)
            self.assertEqual(cm.exception.field, field)
            self.assertEqual(str(cm.exception), "%s must be >= 1, got 0" % field)

    def test_integer_arguments_refuse_bool_and_float(self):
        # True is an int in Python: stages=True or max_lp_solves=True must not silently mean 1.
        base = dict(stages=STAGES, microbatches=MICROBATCHES, p2p_power_w=P_BLOCK, unit_time_s=UNIT, plans="none")
        for kw, bad in (("stages", True), ("microbatches", 2.0), ("chunks", False), ("sample", True),
                        ("threads", True), ("max_points", True), ("max_lp_solves", True), ("max_lp_solves", 40.0)):
            args = dict(base, **{kw: bad})
            with self.assertRaises(TypeError, msg="%s=%r" % (kw, bad)):
                perseus.optimize(self.profile, **args)
        # An int beyond the C++ type is a bad value, not a bad type (session 31).
        with self.assertRaises(perseus.InputError):
            perseus.optimize(self.profile, **dict(base, stages=2 ** 40))
        with self.assertRaises(TypeError):
            perseus.schedule("1f1b", True, 2)
        # Integers that are not Python ints (numpy) still work, through __index__.
        try:
            import numpy
        except ImportError:
            return
        res = perseus.optimize(self.profile, **dict(base, stages=numpy.int64(STAGES), max_lp_solves=numpy.int32(40)))
        self.assertEqual(res["schedule"]["num_stages"], STAGES)
        self.assertEqual(res["summary"]["max_lp_solves"], 40)
        # Plan indices and P_block likewise: numpy numbers work, bools and non-lists do not.
        res = perseus.optimize(self.profile, **dict(base, plans=numpy.array([0, 1]), p2p_power_w=numpy.float32(P_BLOCK)))
        self.assertEqual([p["plan"] for p in res["plans"]], [0, 1])
        # An array is not a number, even of one element (it was taken as 83 W; session 17's trial).
        for kw, bad in (("plans", 3), ("plans", [True]), ("plans", [0.0]), ("p2p_power_w", True),
                        ("p2p_power_w", numpy.array([P_BLOCK])), ("p2p_power_w", numpy.array([[P_BLOCK]]))):
            with self.assertRaises(TypeError, msg="%s=%r" % (kw, bad)):
                perseus.optimize(self.profile, **dict(base, **{kw: bad}))

    def test_path_argument(self):
        res = perseus.optimize(GPT3_PROFILE, 8, 2, p2p_power_w=P_BLOCK, unit_time_s=0.01, plans="fastest")
        self.assertEqual(len(res["plans"][0]["ranks"]), 8)

    def test_input_errors(self):
        cases = [
            (dict(stages=0, microbatches=6), "stages"),
            (dict(stages=STAGES, microbatches=0), "microbatches"),
            (dict(stages=STAGES, microbatches=6, schedule="zigzag"), "zigzag"),
            (dict(stages=3, microbatches=6), "4 stages"),
            (dict(stages=STAGES, microbatches=6, p2p_power_w=-1.0), "p2p_power_w"),
            (dict(stages=STAGES, microbatches=6, unit_time_s=0.0), "unit_time_s"),
            (dict(stages=STAGES, microbatches=6, unit_time_s=11.0), "unit_time_s"),
            (dict(stages=STAGES, microbatches=6, schedule="zb-h1", backward_input_fraction=1.0),
             "backward_input_fraction"),
            (dict(stages=STAGES, microbatches=6, sample=-2), "sample"),
        ]
        for kwargs, needle in cases:
            with self.subTest(kwargs=kwargs):
                stages = kwargs.pop("stages")
                mbs = kwargs.pop("microbatches")
                with self.assertRaises(perseus.InputError) as cm:
                    kwargs.setdefault("p2p_power_w", P_BLOCK)
                    perseus.optimize(self.profile, stages, mbs, **kwargs)
                self.assertIn(needle, str(cm.exception))
                if needle in ("unit_time_s", "backward_input_fraction"):
                    self.assertEqual(cm.exception.field, needle)
        with self.assertRaises(perseus.InputError) as cm:
            perseus.optimize("/nonexistent.csv", 2, 2, p2p_power_w=P_BLOCK)
        self.assertIn("/nonexistent.csv", str(cm.exception))
        with self.assertRaises(perseus.InputError) as cm:
            perseus.optimize(self.profile, 0, 6, p2p_power_w=P_BLOCK)
        self.assertEqual(cm.exception.field, "stages")
        self.assertNotIn("--", str(cm.exception))
        bad = os.path.join(temp_dir(self), "bad.csv")
        with open(bad, "w") as f:
            f.write("stage,instruction,frequency,time,energy\n0,forward,1410,abc,1\n")
        with self.assertRaises(perseus.InputError) as cm:
            perseus.load_profile(bad)
        self.assertEqual((cm.exception.source, cm.exception.line, cm.exception.field), (bad, 2, "time"))
        # File-level errors carry their source and line too (and the field, where one is named).
        with open(bad, "w") as f:
            f.write("stage,instruction,frequency,time,energy\n0,forward,1410\n")
        with self.assertRaises(perseus.InputError) as cm:
            perseus.load_profile(bad)
        self.assertEqual((cm.exception.source, cm.exception.line), (bad, 2))
        with open(bad, "w") as f:
            f.write("stage,instruction,frequency,time,energy\n1,forward,1410,0.1,10\n1,backward,1410,0.2,20\n")
        with self.assertRaises(perseus.InputError) as cm:
            perseus.load_profile(bad)
        self.assertEqual((cm.exception.source, cm.exception.field), (bad, "stage"))
        with self.assertRaises(TypeError):
            perseus.optimize(42, 2, 2, p2p_power_w=P_BLOCK)
        with self.assertRaises(perseus.InputError) as cm:  # P_block is required, as in the CLI
            perseus.optimize(self.profile, STAGES, MICROBATCHES)
        self.assertIn("p2p_power_w is required", str(cm.exception))


class SameProblemAsCliTest(unittest.TestCase):
    """perseus.optimize() and `perseus optimize` assemble the same problem (perseus/problem.hpp):
    the same schedules (names and CSV files) and profile fitting, hence the same files."""

    def run_both(self, profile_path, cli_args, **py_kwargs):
        out = os.path.join(temp_dir(self), "out")
        subprocess.run([PERSEUS_BINARY, "optimize", "--profile", profile_path, "--p2p-power", str(P_BLOCK),
                        "--unit-time", str(UNIT), "--quiet", "--out", out] + cli_args, check=True)
        res = perseus.optimize(profile_path, p2p_power_w=P_BLOCK, unit_time_s=UNIT, **py_kwargs)
        with open(os.path.join(out, "frontier.csv")) as f:
            cli_frontier = f.read()
        py_frontier = "plan,time_s,energy_j,lower_bound_j\n" + "".join(
            "%d,%.9f,%.6f,%.6f\n" % (p["plan"], p["time_s"], p["energy_j"], p["lower_bound_j"]) for p in res["frontier"])
        self.assertEqual(cli_frontier, py_frontier)
        plan_files = sorted(os.listdir(os.path.join(out, "plans")))
        self.assertEqual(plan_files, ["plan_%05d.json" % p["plan"] for p in res["plans"]])
        for name, py_plan in zip(plan_files, res["plans"]):
            with open(os.path.join(out, "plans", name)) as f:
                self.assertEqual(json.load(f), py_plan, name)
        with open(os.path.join(out, "summary.json")) as f:
            summary = json.load(f)
        self.assertEqual(summary["approximations"], res["summary"]["approximations"])
        self.assertEqual(summary["num_plans"], res["summary"]["num_plans"])
        return out, res

    def setUp(self):
        if not PERSEUS_BINARY:
            self.skipTest("PERSEUS_BINARY not set (run through ctest)")
        self.profile_path = write_first_stages(STAGES, temp_dir(self))  # per-GPU, no I/W rows

    def test_zb_h1_on_a_per_gpu_profile(self):
        _, res = self.run_both(self.profile_path, ["--stages", str(STAGES), "--microbatches", str(MICROBATCHES),
                                                   "--schedule", "zb-h1"],
                               stages=STAGES, microbatches=MICROBATCHES, schedule="zb-h1")
        self.assertTrue(res["schedule"]["split_backward"])
        self.assertEqual(len(res["summary"]["approximations"]), 1)  # backward split into I/W

    def test_interleaved_on_a_per_gpu_profile(self):
        _, res = self.run_both(self.profile_path, ["--stages", str(STAGES), "--microbatches", "8",
                                                   "--schedule", "interleaved-1f1b", "--chunks", "2"],
                               stages=STAGES, microbatches=8, schedule="interleaved-1f1b", chunks=2)
        self.assertEqual(res["schedule"]["num_stages"], 2 * STAGES)
        self.assertEqual(len(res["summary"]["approximations"]), 1)  # each GPU's stage split over 2 chunks

    def test_schedule_csv(self):
        out, _ = self.run_both(self.profile_path, ["--stages", str(STAGES), "--microbatches", str(MICROBATCHES),
                                                   "--schedule", "gpipe"],
                               stages=STAGES, microbatches=MICROBATCHES, schedule="gpipe")
        csv_path = os.path.join(temp_dir(self), "gpipe.csv")
        with open(os.path.join(out, "schedule.csv")) as f, open(csv_path, "w") as g:
            g.write(f.read())
        _, res = self.run_both(self.profile_path, ["--schedule", csv_path], schedule=csv_path)
        self.assertEqual(res["schedule"]["num_microbatches"], MICROBATCHES)
        # Given sizes must match the file: chunks=2 (or 0 microbatches) is an error, not ignored.
        with self.assertRaises(perseus.InputError) as cm:
            perseus.optimize(self.profile_path, schedule=csv_path, chunks=2, p2p_power_w=P_BLOCK, unit_time_s=UNIT)
        self.assertIn("chunks 2 does not match schedule file %s, which has 1 chunks" % csv_path, str(cm.exception))
        with self.assertRaises(perseus.InputError) as cm:
            perseus.optimize(self.profile_path, microbatches=0, schedule=csv_path, p2p_power_w=P_BLOCK,
                             unit_time_s=UNIT)
        self.assertEqual(str(cm.exception), "microbatches must be >= 1, got 0")


@unittest.skipUnless(perseus.HAVE_RENDER, "the C++ library has no perseus/render.hpp")
class RenderTest(unittest.TestCase):
    def test_timeline_and_frontier_svg(self):
        prof = perseus.parse_profile(first_stages_csv(2), "two")
        res = perseus.optimize(prof, 2, 3, p2p_power_w=P_BLOCK, unit_time_s=UNIT, plans="fastest")
        svg = perseus.render_timeline_svg(prof, res["plans"][0], 3, p2p_power_w=P_BLOCK, title="T_min & co")
        self.assertIn("<svg", svg)
        self.assertEqual(svg.count('class="op forward'), 6)
        self.assertIn("T_min &amp; co", svg)
        # Session 24's trial: without p2p_power_w the idle time was silently drawn at 0 W.
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            perseus.render_timeline_svg(prof, res["plans"][0], 3)
            perseus.render_timeline_svg(prof, res["plans"][0], 3, color_by="frequency")
        self.assertEqual([str(w.message)[:25] for w in caught], ["p2p_power_w not given: id"])
        with self.assertRaises(TypeError):
            perseus.render_timeline_svg(prof, res["plans"][0], 3, p2p_power_w=True)
        fr = perseus.render_frontier_svg(res["frontier"], plans=res["plans"], all_max=res["all_max"])
        self.assertIn("<svg", fr)
        with self.assertRaises(perseus.InputError) as cm:
            perseus.render_timeline_svg(prof, res["plans"][0], 3, color_by="rainbow")
        self.assertIn("rainbow", str(cm.exception))
        self.assertEqual(cm.exception.field, "color_by")  # it was '' (session 26's trial)
        with self.assertRaises(perseus.InputError) as cm:
            perseus.render_timeline_svg(prof, res["plans"][0], 4)  # wrong microbatch count
        self.assertIn("schedule", str(cm.exception))
        with self.assertRaises(perseus.InputError):
            perseus.write_report("/nonexistent-dir")
        # A 1F1B plan against GPipe (the same computations, another order) is refused.
        with self.assertRaises(perseus.InputError) as cm:
            perseus.render_timeline_svg(prof, res["plans"][0], 3, schedule="gpipe")
        self.assertIn("the plan is for another schedule", str(cm.exception))
        with self.assertRaises(perseus.InputError) as cm:
            perseus.render_timeline_svg(prof, {"ranks": []}, 3)
        self.assertEqual(cm.exception.field, "plan")
        # Frontier points: a wrong type is a TypeError, a missing key an InputError naming it.
        for bad in (None, 3, [3], [{"time_s": "1", "energy_j": 1.0}], [{"time_s": True, "energy_j": 1.0}]):
            with self.assertRaises(TypeError, msg=repr(bad)):
                perseus.render_frontier_svg(bad)
        with self.assertRaises(perseus.InputError) as cm:
            perseus.render_frontier_svg([{"time": 1.0, "energy_j": 1.0}])
        self.assertEqual(cm.exception.field, "frontier")
        self.assertIn("element 0 has no key 'time_s'", str(cm.exception))
        # all_max is one dict: named without an index (it said all_max[0]['time_s']).
        with self.assertRaises(TypeError) as cm:
            perseus.render_frontier_svg(res["frontier"], all_max={"time_s": "x", "energy_j": 1.0})
        self.assertIn("all_max['time_s'] must be a number, got 'x'", str(cm.exception))
        # A NaN in a plan dict is named by its place (it was "malformed JSON ... last read: N").
        import copy
        plan = copy.deepcopy(res["plans"][0])
        plan["ranks"][1]["instructions"][2]["frequency_mhz"] = float("nan")
        with self.assertRaises(perseus.InputError) as cm:
            perseus.render_timeline_svg(prof, plan, 3)
        self.assertEqual(str(cm.exception),
                         "plan has a non-finite number at ranks[1].instructions[2].frequency_mhz: nan "
                         "(expected finite numbers)")


@unittest.skipUnless(perseus.HAVE_EMULATE, "the C++ library has no perseus/emulate.hpp")
class EmulateTest(unittest.TestCase):
    def test_emulate_stragglers(self):
        path = os.path.join(temp_dir(self), "p.csv")
        perseus.parse_profile(first_stages_csv(STAGES)).write_csv(path)
        res = perseus.emulate(path, STAGES, MICROBATCHES, slowdowns=[1.0, 1.2], pipelines=4, p2p_power_w=P_BLOCK,
                              unit_time_s=0.01)
        self.assertEqual(res["num_pipelines"], 4)
        methods = {r["method"] for r in res["rows"]}
        self.assertIn("perseus", methods)
        self.assertIn("all_max", methods)
        per = [r for r in res["rows"] if r["method"] == "perseus"]
        self.assertEqual([r["slowdown"] for r in per], [1.0, 1.2])
        self.assertGreater(per[1]["total_saving_pct"], 0)
        self.assertGreaterEqual(per[1]["chosen_time_s"], per[0]["chosen_time_s"])
        # A perseus.Profile works as optimize() takes it: the same rows as its file.
        same = perseus.emulate(perseus.load_profile(path), STAGES, MICROBATCHES, slowdowns=[1.0, 1.2], pipelines=4,
                               p2p_power_w=P_BLOCK, unit_time_s=0.01)
        self.assertEqual(same["rows"], res["rows"])
        # This profile stops EnvPipe early: its message is the only warning (units are plausible).
        self.assertTrue(all(w.startswith("EnvPipe stopped") for w in res["warnings"]), res["warnings"])
        # Rows come by slowdown whatever the order given; implausible units are a UserWarning
        # and listed, as optimize() does (emulate said nothing until session 26).
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            odd = perseus.emulate(path, STAGES, MICROBATCHES, slowdowns=[1.2, 1.0], pipelines=4, p2p_power_w=5000,
                                  unit_time_s=0.01)
        self.assertEqual([r["slowdown"] for r in odd["rows"] if r["method"] == "perseus"], [1.0, 1.2])
        self.assertEqual(len([w for w in odd["warnings"] if "P_block 5000 W is above the power of" in w]), 1)
        self.assertEqual([str(w.message) for w in caught if issubclass(w.category, UserWarning)], odd["warnings"])
        with self.assertRaises(TypeError):  # True is not 1 W
            perseus.emulate(path, STAGES, MICROBATCHES, slowdowns=[1.1], pipelines=4, p2p_power_w=True)
        with self.assertRaises(perseus.InputError):
            perseus.emulate(path, STAGES, MICROBATCHES, slowdowns=[0.5], pipelines=4, p2p_power_w=P_BLOCK)
        # P_block is required, as `perseus emulate --p2p-power` and perseus.optimize: a silent 0 W
        # would change every plan.
        with self.assertRaises(perseus.InputError) as cm:
            perseus.emulate(path, STAGES, MICROBATCHES, slowdowns=[1.1], pipelines=4)
        self.assertEqual(cm.exception.field, "p2p_power_w")
        # Errors name the keyword argument, never a CLI flag.
        with self.assertRaises(perseus.InputError) as cm:
            perseus.emulate(path, STAGES, MICROBATCHES, slowdowns=[1.1], pipelines=4, tp_degree=0, p2p_power_w=P_BLOCK)
        self.assertEqual(str(cm.exception), "tp_degree must be >= 1, got 0")
        self.assertEqual(cm.exception.field, "tp_degree")
        with self.assertRaises(perseus.InputError) as cm:
            perseus.emulate(path, 0, MICROBATCHES, slowdowns=[1.1], pipelines=4, p2p_power_w=P_BLOCK)
        self.assertEqual(str(cm.exception), "stages must be >= 1, got 0")
        self.assertEqual(cm.exception.field, "stages")
        with self.assertRaises(perseus.InputError) as cm:
            perseus.emulate(path, STAGES, MICROBATCHES, slowdowns=[1.1], global_batch=7, p2p_power_w=P_BLOCK)
        self.assertIn("global_batch 7 is not a multiple of microbatches 6", str(cm.exception))


class InterpreterSafetyTest(unittest.TestCase):
    """Ways a trial (session 15) crashed the interpreter through the bindings; each case runs in
    its own process, which must end normally."""

    def run_child(self, code, *args):
        import sys
        child = subprocess.run([sys.executable, "-c", code, *args], env=dict(os.environ), capture_output=True,
                               text=True, timeout=600)
        return child.returncode, child.stdout + child.stderr

    def start_child(self, code, *args):
        """Starts `code` in its own interpreter and returns it once it printed its first line."""
        import sys
        child = subprocess.Popen([sys.executable, "-c", code, *args], env=dict(os.environ), stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, text=True)
        self.addCleanup(child.kill)
        self.assertTrue(child.stdout.readline().strip())
        return child

    def assert_sigint_ends_with_7(self, child, what):
        """Sends SIGINT; the child must catch KeyboardInterrupt and exit 7."""
        import signal
        child.send_signal(signal.SIGINT)
        try:
            status = child.wait(timeout=300)
        except subprocess.TimeoutExpired:
            self.fail("SIGINT did not end " + what)
        self.assertEqual(status, 7)

    def test_a_daemon_thread_inside_perseus_at_exit_does_not_abort_the_process(self):
        # CPython 3.11 ends such a thread by pthread_exit when it retakes the GIL; its unwinding
        # through pybind11's noexcept gil_scoped_release called std::terminate ("terminate called
        # without an active exception", rc -6). The child exits while the thread is inside
        # optimize() (it has printed "started" and the solve takes seconds).
        code = ("import perseus, sys, threading\n"
                "p = perseus.load_profile(sys.argv[1])\n"
                "started = threading.Event()\n"
                "def work():\n"
                "    started.set()\n"
                "    while True:\n"
                "        perseus.optimize(p, 8, 96, p2p_power_w=83.64, plans='none')\n"
                "threading.Thread(target=work, daemon=True).start()\n"
                "started.wait()\n"
                "print('main exits', flush=True)\n")
        for _ in range(3):
            rc, out = self.run_child(code, GPT3_PROFILE)
            self.assertEqual(rc, 0, out)

    # The exit race (session 23's CI): a daemon thread coming back from perseus waited for the GIL
    # while the main thread held it into finalizing; CPython 3.11 then ended the waiting thread by
    # pthread_exit, and the unwinding aborted the process. Each case below holds the GIL from its
    # last atexit callback (sum(), called straight from C, never gives it up) into finalizing, and
    # makes the final collection slow (3 million lists), so that the ended thread would reach the
    # abort first. Without the exit gate (python/src/bindings.hpp) both aborted 5 times in 5.
    EXIT_RACE_PROLOGUE = ("import atexit\n"
                          "atexit.register(sum, range(10**8))  # registered first, run last\n")
    EXIT_RACE_EPILOGUE = ("junk = [[] for _ in range(3 * 10**6)]\n"
                          "print('main exits', flush=True)\n")

    def test_a_thread_returning_from_perseus_while_the_interpreter_exits_does_not_abort_it(self):
        # Was "terminate called without an active exception" (GilRelease's destructor). The daemon
        # thread is inside load_profile() of a FIFO (the writer's open() returns once it opened
        # the FIFO); closing the writer, the first callback at exit, lets it finish and want the
        # GIL back while the main thread holds it.
        code = (self.EXIT_RACE_PROLOGUE +
                "import os, perseus, sys, tempfile, threading\n"
                "fifo = os.path.join(tempfile.mkdtemp(), 'profile.csv')\n"
                "os.mkfifo(fifo)\n"
                "text = open(sys.argv[1], 'rb').read()\n"
                "threading.Thread(target=lambda: perseus.load_profile(fifo), daemon=True).start()\n"
                "w = open(fifo, 'wb')\n"
                "w.write(text)\n"
                "w.flush()\n"
                "atexit.register(w.close)\n" + self.EXIT_RACE_EPILOGUE)
        rc, out = self.run_child(code, GPT3_PROFILE)
        self.assertEqual(rc, 0, out)

    @unittest.skipUnless(perseus.HAVE_CLIENT, "built without the runtime client")
    def test_a_client_waiting_for_the_server_while_the_interpreter_exits_does_not_abort_it(self):
        # Was "FATAL: exception not rethrown" (the client's C ABI). The daemon thread is inside
        # Client(): its connection was accepted and its start-up request is never answered; its
        # Ctrl-C poll wants the GIL every 50 ms.
        code = (self.EXIT_RACE_PROLOGUE +
                "import perseus, socket, threading\n"
                "srv = socket.socket()\n"
                "srv.bind(('127.0.0.1', 0))\n"
                "srv.listen()\n"
                "url = 'http://127.0.0.1:%d' % srv.getsockname()[1]\n"
                "threading.Thread(target=lambda: perseus.Client(url, 'job', rank=0, backend='dry-run', "
                "startup_timeout_s=1e5, request_timeout_s=1e4), daemon=True).start()\n"
                "conn, _ = srv.accept()\n" + self.EXIT_RACE_EPILOGUE)
        rc, out = self.run_child(code)
        self.assertEqual(rc, 0, out)

    @unittest.skipUnless(perseus.HAVE_RENDER, "the C++ library has no perseus/render.hpp")
    def test_render_arguments_that_crashed_are_refused_or_read_safely(self):
        # None as the profile was dereferenced (segfault); a dict subclass whose __getitem__
        # returns a fresh object was read through a dangling handle (use after free).
        code = ("import perseus, sys\n"
                "try:\n"
                "    perseus.render_timeline_svg(None, {'ranks': [[]]}, 1)\n"
                "    sys.exit(3)\n"
                "except TypeError:\n"
                "    pass\n"
                "class D(dict):\n"
                "    def __getitem__(self, k):\n"
                "        return float(len(k)) + 0.5\n"
                "svg = perseus.render_frontier_svg([D(time_s=1.0, energy_j=2.0)] * 50)\n"
                "assert '<svg' in svg\n")
        rc, out = self.run_child(code)
        self.assertEqual(rc, 0, out)

    def assert_ctrl_c_ends_the_call(self, call, *args):
        """Runs `call` (one line of Python; sys.argv[1:] = args) in a child, sends SIGINT a second
        after it started (not a margin: SIGINT anywhere in the call must end it the same way) and
        expects KeyboardInterrupt from the call (exit 7)."""
        import time
        code = ("import perseus, sys\n"
                "print('calling', flush=True)\n"
                "try:\n"
                "    " + call + "\n"
                "except KeyboardInterrupt:\n"
                "    sys.exit(7)\n")
        child = self.start_child(code, *args)
        time.sleep(1)
        self.assert_sigint_ends_with_7(child, call)

    def test_ctrl_c_during_the_polish_stage_ends_the_solve_with_keyboard_interrupt(self):
        # The cancel poll was not latched: the polish stage saw one "cancel", went on to the end
        # of its budget (here 600 s: the test would time out) and raised RuntimeError.
        self.assert_ctrl_c_ends_the_call("perseus.optimize(perseus.load_profile(sys.argv[1]), 8, 12, p2p_power_w=83.64, "
                                         "plans='none', polish_s=600)", GPT3_PROFILE)

    @unittest.skipUnless(perseus.HAVE_EMULATE, "built without emulation")
    def test_ctrl_c_during_emulate_ends_it_with_keyboard_interrupt(self):
        # emulate() had no cancel hook: Ctrl-C waited for the whole solve. At a 0.1 µs unit the
        # solve takes hours, so without the hook this child outlives the wait.
        self.assert_ctrl_c_ends_the_call("perseus.emulate(sys.argv[1], 8, 12, slowdowns=[1.1], pipelines=2, "
                                         "p2p_power_w=83.64, unit_time_s=1e-7)", GPT3_PROFILE)

    @unittest.skipUnless(perseus.HAVE_CLIENT, "built without the runtime client")
    def test_ctrl_c_while_a_client_waits_for_the_server_ends_the_wait(self):
        # Client() waited out startup_timeout_s for a server that is down, whatever Ctrl-C said.
        self.assert_ctrl_c_ends_the_call("perseus.Client('http://127.0.0.1:9', 'job', rank=0, backend='dry-run', "
                                         "startup_timeout_s=1e5)")

    @unittest.skipUnless(perseus.HAVE_CLIENT, "built without the runtime client")
    def test_a_forked_child_neither_crashes_on_nor_uses_its_parents_client(self):
        # The child's close() joined the client's threads, which do not exist after fork(): a
        # segfault. Now the child's copy is left alone, its calls refused; the parent's works.
        code = ("import os, perseus, sys\n"
                "c = perseus.Client('http://127.0.0.1:9', 'job', rank=0, backend='dry-run', startup_timeout_s=0.1)\n"
                "pid = os.fork()\n"
                "if pid == 0:\n"
                "    try:\n"
                "        c.flush(1)\n"
                "        os._exit(3)\n"
                "    except Exception as e:\n"
                "        if 'this is a fork() of it' not in str(e):\n"
                "            os._exit(4)\n"
                "    c.close()\n"
                "    sys.exit(0)  # the child's interpreter exits normally, collecting c\n"
                "_, status = os.waitpid(pid, 0)\n"
                "c.close()\n"
                "sys.exit(os.waitstatus_to_exitcode(status))\n")
        rc, out = self.run_child(code)
        self.assertEqual(rc, 0, out)

    @unittest.skipUnless(perseus.HAVE_CLIENT, "built without the runtime client")
    def test_a_living_forked_child_neither_holds_up_close_nor_takes_the_parents_sigterm(self):
        # Session 25's trial: a child forked after the client existed (DataLoader's persistent
        # workers) held the watchdog's pipe, so close() waited for the child (for ever); and a
        # SIGTERM to the child went to the parent's reset thread: the child lived on and the
        # parent died. The child here lives until its SIGTERM.
        code = ("import os, perseus, signal, sys\n"
                "c = perseus.Client('http://127.0.0.1:9', 'job', rank=0, backend='dry-run', startup_timeout_s=0.1)\n"
                "r, w = os.pipe()\n"
                "pid = os.fork()\n"
                "if pid == 0:\n"
                "    os.close(w)\n"
                "    os.read(r, 1)\n"
                "    os._exit(0)\n"
                "os.close(r)\n"
                "c.close()  # returns while the child lives\n"
                "os.kill(pid, signal.SIGTERM)\n"
                "_, status = os.waitpid(pid, 0)\n"
                "sys.exit(0 if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM else 5)\n")
        rc, out = self.run_child(code)
        self.assertEqual(rc, 0, out)

    @unittest.skipUnless(perseus.HAVE_CLIENT, "built without the runtime client")
    def test_a_client_leaves_ctrl_c_able_to_end_a_blocking_read(self):
        # The client's signal guard installed SIGINT with SA_RESTART: a blocked read anywhere in
        # the process was restarted after Ctrl-C instead of raising KeyboardInterrupt.
        import time
        code = ("import os, perseus, sys\n"
                "c = perseus.Client('http://127.0.0.1:9', 'job', rank=0, backend='dry-run', startup_timeout_s=0.1)\n"
                "r, w = os.pipe()\n"
                "print('reading', flush=True)\n"
                "try:\n"
                "    os.read(r, 1)\n"
                "except KeyboardInterrupt:\n"
                "    c.close()\n"
                "    sys.exit(7)\n")
        child = self.start_child(code)
        wchan, give_up = "/proc/%d/wchan" % child.pid, time.monotonic() + 120
        while child.poll() is None:  # the event: the child blocked in the pipe's read
            with open(wchan) as f:
                if f.read().strip() in ("pipe_read", "pipe_wait", "anon_pipe_read"):
                    break
            if time.monotonic() > give_up:
                self.skipTest("cannot see the child block on the pipe (/proc/PID/wchan)")
            time.sleep(0.01)
        self.assert_sigint_ends_with_7(child, "a blocking read after a Client was created")


if __name__ == "__main__":
    unittest.main()
