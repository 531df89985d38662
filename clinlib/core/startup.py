"""Process start-up cost: what every notebook kernel and test process would otherwise pay.

``jsonschema`` (imported by altair, i.e. by every figure) imports the optional
``rfc3987_syntax`` when it is installed (jupyter's ``jsonschema[format-nongpl]`` pulls it in),
which compiles ~40 lark grammars at import: ~2 s of CPU per process, about 3/4 of importing
altair (python-jsonschema/jsonschema#1428). The kit never validates ``iri`` formats, so the
module is marked absent before anything imports jsonschema: jsonschema then simply registers
no ``iri`` / ``iri-reference`` format checker (its documented behaviour without the extra).
"""

from __future__ import annotations

import sys

SKIPPED_MODULES: tuple[str, ...] = ("rfc3987_syntax",)


def skip_slow_optional_imports() -> None:
    """Mark :data:`SKIPPED_MODULES` absent unless already imported (then they stay)."""
    for name in SKIPPED_MODULES:
        sys.modules.setdefault(name, None)
