"""Run configuration shared by the unit tests and the notebooks (``make test``).

``make test`` runs pytest with two xdist workers (``-n 2 --dist loadgroup``): the numbered
notebooks go to ONE worker, in their numbered order, because they read and append the same
quick-profile predictions (notebook 11 appends ablation variants that 13 reads; the order in
:data:`clinlib.cli.notebooks.AFTER`); the unit tests, which write only to temporary folders,
spread over both workers meanwhile.
"""

from __future__ import annotations

import pytest

NOTEBOOK_GROUP = "notebooks"


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config, items):
    for item in items:
        if str(item.path).endswith(".ipynb"):
            item.add_marker(pytest.mark.xdist_group(NOTEBOOK_GROUP))
