"""Infrastructure every stage uses: paths and profiles, atomic artifacts, stage guards, figure style."""
