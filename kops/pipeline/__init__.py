"""kops.pipeline."""
