"""``python -m clinlib.cli``: the ``clintrace`` command without its installed script."""

import sys

from clinlib.cli import app

sys.exit(app(prog_name="clintrace"))
