"""tiers.py: every test file is in a tier, and CI runs every tier somewhere (torch-free).

The stages select tests by tier (`pytest --tiers ...` in scripts/test.sh); a file in no tier would
silently leave the stages that select, and a tier no stage names would never run.
"""
import re
from pathlib import Path

import pytest

import tiers

HERE = Path(__file__).resolve().parent
TEST_SH = HERE.parents[1] / "scripts" / "test.sh"


def all_test_files():
    return sorted(p.relative_to(HERE).as_posix() for p in HERE.rglob("test_*.py"))


def test_every_test_file_has_a_tier():
    missing = [f for f in all_test_files() if f not in tiers.TIER_OF]
    assert not missing, f"add these files to tests/python/tiers.py (TIER_OF): {missing}"


def test_every_row_names_a_test_that_exists_and_a_known_tier():
    for key, tier in tiers.TIER_OF.items():
        assert tier in tiers.TIERS, f"{key}: unknown tier {tier!r}"
        path, _, name = key.partition("::")
        assert (HERE / path).is_file(), f"{key}: no such test file"
        if name:
            source = (HERE / path).read_text()
            assert re.search(rf"^\s*def {re.escape(name)}\(", source, re.M), f"{key}: no such test"


def test_a_test_row_wins_over_its_file_row():
    file_row = "test_counters.py"
    assert tiers.tier_of(f"{file_row}::test_anything[param-1]") == tiers.TIER_OF[file_row]
    assert tiers.tier_of("no_such_file.py::test_x") is None
    extra = {f"{file_row}::test_special": "core"}
    try:
        tiers.TIER_OF.update(extra)
        assert tiers.tier_of(f"{file_row}::test_special[a]") == "core"
    finally:
        for key in extra:
            del tiers.TIER_OF[key]


def stage_tiers() -> dict[str, set[str]]:
    """What scripts/test.sh gives each pytest stage: PYTEST_TIERS per Python, ASAN_TIERS."""
    text = TEST_SH.read_text()
    per_python = re.search(r"^declare -A PYTEST_TIERS=\((.*)\)$", text, re.M)
    asan = re.search(r"^ASAN_TIERS=(\S+)$", text, re.M)
    assert per_python and asan, "scripts/test.sh no longer declares PYTEST_TIERS / ASAN_TIERS"
    stages = {f"pytest {v}": set(t.split(",")) for v, t in re.findall(r"\[([\d.]+)\]=(\S+)", per_python[1])}
    stages["asan pytest 3.11"] = set(asan[1].split(","))
    return stages


def test_every_tier_runs_and_the_first_python_runs_them_all():
    stages = stage_tiers()
    for name, named in stages.items():
        assert named <= set(tiers.TIERS), f"{name}: unknown tiers {named - set(tiers.TIERS)}"
    # Every test runs in at least one stage: pytest 3.11 runs every tier.
    assert stages["pytest 3.11"] == set(tiers.TIERS)
    # The versions that exist for the bytecode layer, the frame hook and the version tables run them.
    for version in ("3.12", "3.13"):
        assert {"core", "versions"} <= stages[f"pytest {version}"]


@pytest.mark.parametrize("tier", tiers.TIERS)
def test_each_tier_has_tests(tier):
    assert any(t == tier for t in tiers.TIER_OF.values())
