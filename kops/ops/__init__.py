"""kops.ops."""
