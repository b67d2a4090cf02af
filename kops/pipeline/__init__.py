"""kops.pipeline: Spark (PySpark) jobs over brokers' logs.

Imported only by the commands that use it (``kops logs ...``); importing this package does not import
pyspark — ``kops.pipeline.session.get_spark`` does, when a command needs a session.

* :mod:`kops.pipeline.logformat` — Kafka's log line formats (pure Python, shared with the baseline)
* :mod:`kops.pipeline.statechange` — read / parse / merge / filter (DataFrame API)
* :mod:`kops.pipeline.timeline` — leadership and ISR history, per-broker gained/lost counts, chart
* the ``spark-submit`` entry script is :mod:`kops.cli.spark_submit` (it is the CLI run as a file)
"""
