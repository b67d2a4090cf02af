"""Pure planning over :mod:`kops.model`: no network, no files, no imports from cluster/ops/cli."""
