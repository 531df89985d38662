"""``python -m bench.prefix_share``: the share of the kit's prompt tokens a prefix cache can
reuse (issue 32 §5, README "Beyond one machine": self-hosted vLLM's automatic prefix caching
behind the OpenAI-compatible entry), per strategy, in the kit's record-first order and with
the question first (:mod:`clinlib.eval.interop.prefix_share`: vLLM's 16-token blocks, a cache that
never evicts, the kit's tokenizer).

Usage: ``python -m bench.prefix_share [--profile quick] [--strategies a,b] [--setting post]``
(the profile's questions must be built; the contexts are built or read from its cache).
"""

from __future__ import annotations

import argparse
import time

import pandas as pd

from clinlib.core.config import resolve_profile
from clinlib.eval.interop.prefix_share import VLLM_BLOCK, profile_prefix_share

DEFAULT = "full-context,dense-retrieval,structured-timeline,mem0,no-context-blind"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default=None)
    ap.add_argument("--strategies", default=DEFAULT)
    ap.add_argument("--setting", default="post")
    ap.add_argument("--block", type=int, default=VLLM_BLOCK)
    args = ap.parse_args(argv)
    name = resolve_profile(args.profile)
    t0 = time.perf_counter()
    table = profile_prefix_share(name, args.strategies.split(","), args.setting,
                                 block=args.block)  # fmt: skip
    with pd.option_context("display.width", 200, "display.max_columns", 10):
        print(f"profile {name}, setting {args.setting}, block {args.block} tokens, "
              f"{time.perf_counter() - t0:.0f} s")  # fmt: skip
        print(table.assign(share=table["share"].round(3)).to_string(index=False))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
