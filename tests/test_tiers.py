"""The test tiers mean what they say: conftest's guard tells a process that does real work (which makes a test
slow) from a millisecond command, and the Makefile's targets select the markers pyproject.toml declares."""

import re
import sys
import tomllib

from conftest import REPO, _heavy_program


def test_an_interpreter_or_a_browser_is_heavy_and_git_or_make_n_is_not():
    assert _heavy_program([sys.executable, "-m", "typhoon", "run"]).startswith(sys.executable)
    assert _heavy_program(["/usr/bin/python3", "-c", "pass"]) is not None
    assert _heavy_program("python3 -c pass") is not None  # a shell command line
    assert _heavy_program(["/usr/bin/chromium", "--headless"]) is not None
    assert _heavy_program(["git", "rev-parse", "HEAD"]) is None
    assert _heavy_program(["make", "-n", "lab"]) is None
    assert _heavy_program(["bash", "scripts/install_torch.sh", "/tmp/fake-python"]) is None
    assert _heavy_program([]) is None and _heavy_program("") is None


def test_the_make_targets_select_the_declared_markers():
    declared = {line.split(":")[0] for line in tomllib.loads((REPO / "pyproject.toml").read_text())
                ["tool"]["pytest"]["ini_options"]["markers"]}
    assert declared == {"slow", "results", "gpu"}
    makefile = (REPO / "Makefile").read_text()
    recipes = {target: re.search(rf"^{target}:.*\n\t(.*)$", makefile, re.M).group(1)
               for target in ("test", "test-fast", "test-results", "test-gpu")}
    assert recipes["test"].split()[3:].count("-m") == 0  # after `python -m pytest`: CI's `make test` runs every tier
    assert '-m "not slow and not results"' in recipes["test-fast"]
    assert "-m results" in recipes["test-results"]
    assert "-m gpu" in recipes["test-gpu"]


def test_make_test_hands_whole_files_to_two_workers_the_longest_first():
    """`make test` runs on pytest-xdist workers taking whole files (a file's module fixtures made once) in
    collection order (xdist's own reorder, by test count, would put the two longest files last), and the
    collection puts the two longest files first, the others in the order pytest found them."""
    from pathlib import Path
    from types import SimpleNamespace

    from conftest import LONGEST_FIRST, pytest_collection_modifyitems

    makefile = (REPO / "Makefile").read_text()
    flags = re.search(r"^XDIST := (.*)$", makefile, re.M).group(1).split()
    assert flags[:2] == ["-n", "$(PYTEST_WORKERS)"] and "--no-loadscope-reorder" in flags
    assert flags[flags.index("--dist") + 1] == "loadfile"
    assert "$(XDIST)" in re.search(r"^test:.*\n\t(.*)$", makefile, re.M).group(1)
    assert all((REPO / "tests" / name).is_file() for name in LONGEST_FIRST)

    found = ["test_a.py", "test_slurm.py", "test_b.py", "test_reproduce.py", "test_b.py", "test_c.py"]
    items = [SimpleNamespace(path=Path("tests") / name, n=i) for i, name in enumerate(found)]
    pytest_collection_modifyitems(None, items)
    assert [(item.path.name, item.n) for item in items] == [
        ("test_reproduce.py", 3), ("test_slurm.py", 1), ("test_a.py", 0), ("test_b.py", 2), ("test_b.py", 4),
        ("test_c.py", 5)]
