"""``python -m clinlib.strategies.rebuild_static [--out DIR] [--check] [--verify]``: re-distil
the shipped static encoder ``data/models/minilm-l6-static`` from the packaged all-MiniLM-L6-v2,
offline, and (``--check``) compare every file's sha256 with the shipped manifest — the
rebuild is bit-identical. ``--verify`` only checks the shipped files. Needs the
``distill`` extra (``skeletoken``); ~5 min on two cores.
"""

from __future__ import annotations

import argparse
import sys

from clinlib.strategies import encoders as E


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Rebuild the shipped static encoder.")
    parser.add_argument("--verify", action="store_true", help="only check the shipped files")
    parser.add_argument("--out", default=str(E.STATIC_MODEL_DIR), help="target folder")
    parser.add_argument(
        "--check", action="store_true", help="compare the rebuilt files with the shipped manifest"
    )
    args = parser.parse_args(argv)
    try:
        if args.verify:
            E.verify_folder(args.out)
            print(f"{args.out}: every file matches {E.MANIFEST}")
            return 0
        shipped = E.read_manifest(E.STATIC_MODEL_DIR) if args.check else None
        result = E.rebuild(args.out)
    except E.StaticModelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"distilled in {result['seconds']} s into {args.out}")
    for name, sha in result["manifest"]["files"].items():
        print(f"  {sha}  {name}")
    if shipped is not None:
        diff = E.compare_manifests(result["manifest"], shipped)
        print("bit-identical to the shipped model" if not diff else f"DIFFERENT: {diff}")
        return 0 if not diff else 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
