"""Reads a `pip install --dry-run --report` file; fails if torch would come from the registry.

The only torch meant for this project here is the CPU wheel on disk (pip's find-links); a registry
torch==2.13.0 for Linux is a CUDA build that pulls several GB of nvidia-* packages.
Used by scripts/setup.sh before it installs requirements-dev.txt.
"""
import json
import sys


def problems(report: dict) -> list[str]:
    found = []
    for item in report.get("install", []):
        name = item["metadata"]["name"].lower()
        version = item["metadata"]["version"]
        url = item.get("download_info", {}).get("url", "")
        if name == "torch" and not url.startswith("file:"):
            found.append(f"torch {version} from {url}")
        elif name.startswith(("nvidia-", "triton")):
            found.append(f"{name} {version} (a CUDA dependency)")
    return found


def main() -> int:
    with open(sys.argv[1]) as f:
        found = problems(json.load(f))
    if not found:
        return 0
    print("[setup] error: pip would download " + "; ".join(found) + ".", file=sys.stderr)
    print("[setup] The CPU wheel torch==2.13.0 for Python 3.11 is expected on disk, in a folder that pip's "
          "find-links names (PIP_FIND_LINKS=/opt/wheels on this machine's kind).", file=sys.stderr)
    print("[setup] Set TJC_ALLOW_TORCH_DOWNLOAD=1 to download it anyway.", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
