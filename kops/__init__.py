"""kops: rack-aware Kafka operations toolkit."""

__version__ = "0.1.0"
