"""kops.sandbox."""
