"""Counts test cases in JUnit XML files (pytest's --junitxml, GoogleTest's --gtest_output=xml).

    python scripts/junit_summary.py FILE...   ->   "12 passed, 0 failed, 3 skipped"

Used by scripts/test.sh for its per-stage and total lines. A missing or unreadable file counts as one
failure: a stage that crashed before writing its report must not look green.
"""
import sys
import xml.etree.ElementTree as ET


def count(path: str) -> tuple[int, int, int]:
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return 0, 1, 0
    passed = failed = skipped = 0
    for case in root.iter("testcase"):
        tags = {child.tag for child in case}
        if tags & {"failure", "error"}:
            failed += 1
        elif "skipped" in tags or case.get("result") == "skipped" or case.get("status") == "notrun":
            skipped += 1
        else:
            passed += 1
    return passed, failed, skipped


def main(paths: list[str]) -> None:
    totals = [0, 0, 0]
    for path in paths:
        for i, n in enumerate(count(path)):
            totals[i] += n
    print(f"{totals[0]} passed, {totals[1]} failed, {totals[2]} skipped")


if __name__ == "__main__":
    main(sys.argv[1:])
