"""Thin entry script for ``spark-submit`` (the same code as ``kops logs``; the master comes from the submit).

It lives with the CLI because it *is* the CLI's ``logs`` command group run as a file; the pipeline
package stays free of command-line code.

    spark-submit --master yarn --deploy-mode client \\
        --py-files kops.zip kops/cli/spark_submit.py \\
        merge --logs 'hdfs:///kafka-logs/cluster-a/*/state-change.log*' --format parquet --output hdfs:///merged/cluster-a

Arguments are those of ``kops logs merge`` / ``kops logs timeline``; see docs/logs-pipeline.md.
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str] | None = None) -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))  # kops/cli/ -> the folder holding kops/
    if root not in sys.path:  # run as a file: make the kops package importable
        sys.path.insert(0, root)
    from kops.cli.logs import app

    try:
        app(args=list(sys.argv[1:] if argv is None else argv), prog_name="kops-logs-submit", standalone_mode=True)
    except SystemExit as e:
        return int(e.code or 0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
