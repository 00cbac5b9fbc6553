"""The upstream test files in .upstream/: which were read in, from which PyTorch commit, and whether
each is whole (its length as the repository reports it, and it parses).

  python benchmarks/upstream_files.py            check .upstream/ against .upstream/MANIFEST.json
  python benchmarks/upstream_files.py --write    record the files present (path, commit, sha256,
                                                 chars) in .upstream/MANIFEST.json

The files are read by hand from the repository's text, page by page (docs/upstream_tests.md); the
manifest says what was read so that a later run, or another checkout, can tell it has the same set.
COMMITS names the commit each file was read at; CHARS its length there.
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / ".upstream"

# path (under the repository root) -> (commit it was read at, its length in characters there)
FILES = {
    "test/dynamo/_test_misc_common.py": ("d2fdd8244d32068f6e539630bf05f1862bedc183", 5305),
    "test/dynamo/_test_misc_part1.py": ("d2fdd8244d32068f6e539630bf05f1862bedc183", 59092),
    "test/dynamo/_test_misc_part2.py": ("d2fdd8244d32068f6e539630bf05f1862bedc183", 66267),
    "test/dynamo/_test_misc_part3.py": ("d2fdd8244d32068f6e539630bf05f1862bedc183", 60773),
    "test/dynamo/_test_misc_part4.py": ("d2fdd8244d32068f6e539630bf05f1862bedc183", 65550),
    "test/dynamo/_test_misc_part5.py": ("d2fdd8244d32068f6e539630bf05f1862bedc183", 60641),
    "test/dynamo/_test_misc_part6.py": ("d2fdd8244d32068f6e539630bf05f1862bedc183", 69810),
    "test/dynamo/_test_misc_part7.py": ("d2fdd8244d32068f6e539630bf05f1862bedc183", 62296),
    "test/dynamo/_test_misc_part8.py": ("d2fdd8244d32068f6e539630bf05f1862bedc183", 40338),
    "test/dynamo/_repros_common.py": ("bcfe68ff9ce3c812a9c5a7a094cc20432436cc1a", 30524),
    "test/dynamo/_repros_part2.py": ("bcfe68ff9ce3c812a9c5a7a094cc20432436cc1a", 81050),
    "test/dynamo/_repros_part3.py": ("bcfe68ff9ce3c812a9c5a7a094cc20432436cc1a", 70597),
    "test/dynamo/test_dicts.py": ("0ddda5febc5eb7c58de691ed8a4bc83f8c03e838", 29893),
    "test/dynamo/test_sets.py": ("41016811b424df648f5b4d0e7f1bdb62bfe9002b", 22205),
    "test/dynamo/test_list.py": ("bc589e051487589360115199f48bd5e8bdf2d6e8", 11680),
    "test/dynamo/test_ctx_manager.py": ("c808ffcf74f42ffdb4030fb38519e673cf40c24c", 84193),
    "test/dynamo/test_exceptions.py": ("a088dd90b8fb03ae5d264568e474ee44c7f0982b", 10959),
    "test/dynamo/test_generator.py": ("6e8faa6fbf0a5e262bc704acf95a155dfa4a570c", 41043),
    "test/dynamo/cpython/3_13/test_list.py": ("00ff8dbdf735f0321eae2898dfdc88ec76720b9a", 12658),
    "test/dynamo/cpython/3_13/test_operator.py": ("484dd4235105c005530bee61c49888897ba10fd0", 28788),
    "test/dynamo/cpython/3_13/test_contextlib.py": ("3c4c1aa9650cc36d6961253af8b7ddf35cc15537", 45715),
    "test/dynamo/cpython/3_13/test_exceptions.py": ("741c3226cadcd49d65b3cdb03f769065859794c9", 89198),
    "test/dynamo/cpython/3_13/test_generators.py": ("84a838067aed02969d582f98d3302f0198222746", 74498),
    "test/dynamo/cpython/3_13/test_itertools.py": ("57ba412974d87ca62f0c7010e5953581587c40c6", 116332),
    "test/dynamo/cpython/3_13/test_functools.py": ("ccc5737a69bdf91ac1123a34872d41b0c12d437b", 127517),
    "test/dynamo/cpython/3_13/test_collections.py": ("538e92aef299e062db782193a9572b328c7ff3db", 96081),
    "test/dynamo/cpython/3_13/test_dict.py": ("01f9ef32eae5ef513002dd44902c23cbe6be3aae", 59046),
    "test/dynamo/cpython/3_13/mapping_tests.py": ("00ff8dbdf735f0321eae2898dfdc88ec76720b9a", 23860),
    "test/dynamo/cpython/3_13/test_set.py": ("00ff8dbdf735f0321eae2898dfdc88ec76720b9a", 74815),
    "test/dynamo/cpython/3_13/test_iter.py": ("17a7e1e09b3e17825b4cb51d75dab1a764712793", 41729),
    "test/dynamo/cpython/3_13/test_sort.py": ("2ceea7cea5d58a883d1766e689ef7877ca4e8f82", 16151),
    "test/dynamo/cpython/3_13/test_bool.py": ("195496c7530e2057cf9b2791d9eab51552cd2793", 15036),
    "test/dynamo/cpython/3_13/test_raise.py": ("2ce3bd49b69cf0da29920ba7c515dbf603183571", 16163),
    "test/dynamo/cpython/3_13/test_int.py": ("01f9ef32eae5ef513002dd44902c23cbe6be3aae", 39077),
    "test/dynamo/cpython/3_13/test_float.py": ("03b5cffcf90099add3221a93af8b9b5fe6fe54ee", 67620),
    "test/dynamo/cpython/3_13/test_math.py": ("00ff8dbdf735f0321eae2898dfdc88ec76720b9a", 124535),
    "test/dynamo/cpython/3_13/test_grammar.py": ("08b95fa3da356490f73e8e2166a7c2130a98ad6d", 69107),
    "test/dynamo/cpython/3_13/typinganndata/ann_module.py": ("6fc6081e6662608a7c4285d0eee00222d2a89098", 1120),
    "test/dynamo/cpython/3_13/typinganndata/ann_module2.py": ("b85534a712eb8b2559f2109c3c770a2f6119de75", 519),
    "test/dynamo/cpython/3_13/typinganndata/ann_module3.py": ("31db7314acb89ae9cc0d0bca86e0076ca8217835", 448),
    "test/dynamo/cpython/3_13/list_tests.py": ("01f9ef32eae5ef513002dd44902c23cbe6be3aae", 19121),
    "test/dynamo/cpython/3_13/seq_tests.py": ("33c040b56dbc9bbd387559563b838b8600e53aa4", 17280),
}


CPYTHON_PREFIX = "test/dynamo/cpython/"


def present(root: Path) -> list:
    return [rel for rel in FILES if (root / rel).is_file()]


def describe(root: Path, rel: str) -> dict:
    text = (root / rel).read_text()
    return {"path": rel, "commit": FILES[rel][0], "sha256": hashlib.sha256(text.encode()).hexdigest(),
            "chars": len(text)}


def problems(root: Path, rel: str, recorded: dict | None) -> list:
    text = (root / rel).read_text()
    out = []
    if len(text) != FILES[rel][1]:
        out.append(f"{len(text)} characters, the repository's file has {FILES[rel][1]}")
    try:
        ast.parse(text)
    except SyntaxError as e:
        # CPython 3.13's suites may use syntax this interpreter predates (`def f[T]()`, 3.12);
        # they run under 3.13 (upstream_tests.py --cpython-python), which parses them there.
        if not (rel.startswith(CPYTHON_PREFIX) and sys.version_info < (3, 13)):
            out.append(f"does not parse: {e}")
    if recorded is not None and recorded["sha256"] != describe(root, rel)["sha256"]:
        out.append("sha256 differs from the manifest's")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--root", default=str(ROOT))
    args = ap.parse_args(argv)
    root = Path(args.root)
    if not root.is_dir():
        print(f"upstream tests: not fetched ({root} is missing)")
        return 0
    manifest = root / "MANIFEST.json"
    files = present(root)
    if args.write:
        bad = {rel: p for rel in files if (p := problems(root, rel, None))}
        for rel, p in bad.items():
            print(f"{rel}: {'; '.join(p)}")
        if bad:
            return 1
        manifest.write_text(json.dumps([describe(root, rel) for rel in files], indent=1) + "\n")
        print(f"wrote {manifest}: {len(files)} files")
        return 0
    recorded = {e["path"]: e for e in json.loads(manifest.read_text())} if manifest.exists() else {}
    failed = 0
    for rel in files:
        p = problems(root, rel, recorded.get(rel))
        if rel not in recorded:
            p.append("not in the manifest")
        failed += bool(p)
        print(f"{'ok  ' if not p else 'BAD '} {rel}" + (f": {'; '.join(p)}" if p else ""))
    missing = [rel for rel in recorded if rel not in files]
    for rel in missing:
        print(f"MISSING {rel}")
    print(f"{len(files) - failed} of {len(FILES)} files present and whole")
    return 1 if failed or missing else 0


if __name__ == "__main__":
    sys.exit(main())
