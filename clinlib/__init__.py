"""ClinTrace Kit (see the README). Importing it first skips a slow optional import."""

from clinlib._imports import skip_slow_optional_imports

skip_slow_optional_imports()
