#!/usr/bin/env python3
"""Reads nextest's JUnit reports (target/nextest/<profile>/junit.xml).

  junit.py summary FILE...        one line "P passed, F failed, S skipped" over every file (test.sh adds pytest's)
  junit.py slowest [-n N] FILE... the N slowest tests (default 20) as a Markdown table, for docs/TESTING.md
"""
import sys
import xml.etree.ElementTree as ET


def cases(paths):
    """(suite, test name, seconds, outcome) of every test case in the reports; outcome: passed, failed, skipped."""
    for path in paths:
        try:
            root = ET.parse(path).getroot()
        except (OSError, ET.ParseError) as e:
            print(f"junit.py: {path}: {e}", file=sys.stderr)
            continue
        for suite in root.iter("testsuite"):
            for case in suite.iter("testcase"):
                tags = {child.tag for child in case}
                if tags & {"failure", "error"}:
                    outcome = "failed"
                elif "skipped" in tags:
                    outcome = "skipped"
                else:
                    outcome = "passed"
                yield suite.get("name", ""), case.get("name", ""), float(case.get("time", "0") or 0), outcome


def summary(paths):
    n = {"passed": 0, "failed": 0, "skipped": 0}
    for _, _, _, outcome in cases(paths):
        n[outcome] += 1
    print(f"{n['passed']} passed, {n['failed']} failed, {n['skipped']} skipped")


def slowest(paths, count):
    rows = sorted(cases(paths), key=lambda c: -c[2])[:count]
    print("| # | binary | test | seconds | outcome |")
    print("|---|---|---|---:|---|")
    for i, (suite, name, secs, outcome) in enumerate(rows, 1):
        print(f"| {i} | `{suite}` | `{name}` | {secs:.1f} | {outcome} |")


def main(argv):
    if len(argv) < 2 or argv[1] not in ("summary", "slowest"):
        print(__doc__, file=sys.stderr)
        return 2
    args = argv[2:]
    if argv[1] == "summary":
        summary(args)
    else:
        count = 20
        if args[:1] == ["-n"]:
            count, args = int(args[1]), args[2:]
        slowest(args, count)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
