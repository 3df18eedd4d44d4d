#!/usr/bin/env python3
"""Runs the commands that README.md and docs/*.md show, exactly as written, so the docs cannot
drift from the behaviour (issue 13).

Marked blocks only (an HTML comment on the line before the fence, invisible when rendered):
  <!-- doc-test -->             the block runs: sh/bash blocks with bash -e, python blocks with
                                the Python interpreter given; it must exit 0
  <!-- doc-output: COMMAND -->  COMMAND runs and its output must equal the block, except
                                the solve time "(..., N.NNN s)", which depends on the machine.
                                COMMAND `make run` runs the Makefile's `run` recipe (its
                                perseus lines, with BUILD and OUT as the Makefile sets them),
                                so the test needs no rebuild

Every block runs in a fresh scratch folder holding links to the repository's examples/, tests/
and docs/, and `build` -> BUILD_DIR, with BUILD_DIR/cli on PATH and BUILD_DIR/python on
PYTHONPATH, so `perseus ...`, `build/cli/perseus ...` and `python3 ...` run as a user runs them
from the repository root, and nothing is written into the repository.
usage: doc_commands.py REPO_ROOT BUILD_DIR PYTHON [FILE...]   exit 0 all pass, 1 a failure, 2 usage
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

MARK = re.compile(r"^<!--\s*doc-(test|output)(?::\s*(.*?))?\s*-->\s*$")
SOLVE_TIME = re.compile(r"\d+\.\d+ s\)")


def blocks(path):
    """Yields (line, kind, command, language, body) for each marked fenced block."""
    with open(path) as f:
        lines = f.read().splitlines()
    i = 0
    while i < len(lines):
        m = MARK.match(lines[i].strip())
        if m and i + 1 < len(lines) and lines[i + 1].startswith("```"):
            lang = lines[i + 1][3:].strip()
            j = i + 2
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            if j == len(lines):
                raise SystemExit(f"{path}:{i + 2}: unclosed code block")
            yield i + 2, m.group(1), m.group(2), lang, "\n".join(lines[i + 2:j])
            i = j
        i += 1


def make_recipe(root, target):
    """The shell lines of a Makefile target's recipe, with $(VAR) taken from `VAR ?= value`."""
    with open(os.path.join(root, "Makefile")) as f:
        text = f.read().replace("\\\n", " ")
    variables = dict(re.findall(r"^(\w+) \?= (.*)$", text, re.M))
    m = re.search(rf"^{target}:.*\n((?:\t.*\n)+)", text, re.M)
    if not m:
        raise SystemExit(f"Makefile: no target '{target}'")
    lines = [l.strip().lstrip("@") for l in m.group(1).splitlines()]
    return "\n".join(re.sub(r"\$\((\w+)\)", lambda v: variables.get(v.group(1), ""), l) for l in lines)


def scratch(root, build):
    d = tempfile.mkdtemp(prefix="perseus-doc-")
    for name in ("examples", "tests", "docs", "scripts"):
        os.symlink(os.path.join(root, name), os.path.join(d, name))
    os.symlink(os.path.abspath(build), os.path.join(d, "build"))
    return d


def main(argv):
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    root, build, python = os.path.abspath(argv[1]), os.path.abspath(argv[2]), argv[3]
    files = argv[4:] or ["README.md"] + sorted(
        os.path.join("docs", f) for f in os.listdir(os.path.join(root, "docs")) if f.endswith(".md"))
    env = dict(os.environ)
    env.pop("PERSEUS_BINARY", None)  # find the binary as a user's shell does
    env["PATH"] = os.path.join(build, "cli") + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = os.path.join(build, "python")
    # `python3` in the docs is the interpreter the module is built for.
    bindir = tempfile.mkdtemp(prefix="perseus-doc-bin-")
    os.symlink(python, os.path.join(bindir, "python3"))
    env["PATH"] = bindir + os.pathsep + env["PATH"]
    ran = failed = 0
    for rel in files:
        path = os.path.join(root, rel)
        for line, kind, command, lang, body in blocks(path):
            cwd = scratch(root, build)
            if kind == "test" and lang in ("python", "py"):
                cmd = [python, "-c", body]
            elif kind == "test":
                cmd = ["bash", "-e", "-o", "pipefail", "-c", body]
            elif command == "make run":
                cmd = ["bash", "-e", "-c", make_recipe(root, "run")]
            else:
                cmd = ["bash", "-e", "-c", command]
            try:
                proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
            finally:  # the scratch folder holds the block's outputs (plan files...): not left in /tmp
                shutil.rmtree(cwd, ignore_errors=True)
            ran += 1
            out = proc.stdout + proc.stderr
            ok = proc.returncode == 0
            why = f"exit {proc.returncode}"
            if ok and kind == "output":
                want = SOLVE_TIME.sub("<t> s)", body.strip())
                got = SOLVE_TIME.sub("<t> s)", proc.stdout.strip())
                ok, why = want == got, "output differs from the block"
            print(f"{rel}:{line}: {'ok' if ok else 'FAILED (' + why + ')'}")
            if not ok:
                failed += 1
                print(f"--- block ---\n{body if kind == 'test' else command}\n--- output ---\n{out[-3000:]}")
    shutil.rmtree(bindir, ignore_errors=True)
    print(f"{ran - failed} passed, {failed} failed")
    if ran == 0:
        print("no marked blocks found", file=sys.stderr)
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
