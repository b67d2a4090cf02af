"""The SparkSession for kops' pipeline commands (pyspark is imported here, lazily, and nowhere at start-up).

* ``--master URL`` wins; under ``spark-submit`` the master and resources come from the submit command
  (detected by the gateway the launcher started); ``KOPS_SPARK_MASTER`` is honoured; otherwise an
  embedded ``local[*]`` session with the UI and the console progress bar off, its driver's servers
  on 127.0.0.1.
* An active session (a notebook, a test fixture) is reused as it is.
"""

from __future__ import annotations

import os
import tempfile
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

_QUIET_LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex
logger.hadoop.name = org.apache.hadoop
logger.hadoop.level = error
logger.spark.name = org.apache.spark
logger.spark.level = error
logger.parquet.name = org.apache.parquet
logger.parquet.level = error
"""


def _quiet_log4j2_file() -> str:
    path = os.path.join(tempfile.gettempdir(), f"kops-spark-log4j2-{os.getuid()}.properties")
    try:
        with open(path) as f:
            if f.read() == _QUIET_LOG4J2:
                return path
    except OSError:
        pass
    with open(path, "w") as f:
        f.write(_QUIET_LOG4J2)
    return path


#: local inputs up to this size are merged by a JVM with C1 only (see :func:`embedded_java_opts`)
SMALL_INPUT_BYTES = 32 << 20


def embedded_java_opts(cores: int, input_bytes: int | None = None) -> str:
    """JIT and GC options of the embedded session's JVM (measured on the 2.27 GB merge, see
    docs/benchmarks.md). A kops job runs for seconds to minutes, so methods are compiled later
    (``CompileThresholdScaling=10``: only the truly hot ones reach C2, whose compiler threads otherwise
    spend ~12 CPU-s, a fifth of the merge, without the tasks getting slower); on a machine of at most
    2 CPUs the serial collector (no GC threads besides the two tasks; the pipeline's heap holds little
    that lives long). Local inputs of at most :data:`SMALL_INPUT_BYTES` (``input_bytes``; None:
    unknown) run on C1 alone (``TieredStopAtLevel=1``): their tasks take a second or less, and C2
    would spend more compiling Spark's own start and planning than it saves.
    ``KOPS_SPARK_JAVA_OPTS`` replaces them (empty: the JVM's defaults)."""
    env = os.environ.get("KOPS_SPARK_JAVA_OPTS")
    if env is not None:
        return env
    small = input_bytes is not None and input_bytes <= SMALL_INPUT_BYTES
    jit = "-XX:TieredStopAtLevel=1" if small else "-XX:CompileThresholdScaling=10"
    return jit + (" -XX:+UseSerialGC" if cores <= 2 else "")


def under_spark_submit() -> bool:
    """True when this Python driver was launched by spark-submit (the JVM is already up)."""
    return bool(os.environ.get("PYSPARK_GATEWAY_PORT"))


def get_spark(
    master: str | None = None,
    *,
    app_name: str = "kops-logs",
    shuffle_partitions: int | None = None,
    driver_memory: str | None = None,
    input_bytes: int | None = None,
) -> SparkSession:
    """The session (``input_bytes``: the local inputs' size, for the embedded JVM's options)."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        return active
    builder = SparkSession.builder.appName(app_name)
    embedded = False
    if master:
        builder = builder.master(master)
        embedded = master.startswith("local")
    elif under_spark_submit():
        pass  # spark-submit decided
    elif os.environ.get("KOPS_SPARK_MASTER"):
        m = os.environ["KOPS_SPARK_MASTER"]
        builder = builder.master(m)
        embedded = m.startswith("local")
    else:
        builder = builder.master("local[*]")
        embedded = True
    builder = (
        builder.config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.adaptive.enabled", "true")
    )
    if embedded:
        import sys

        # the pipeline runs no Python UDFs, but should a Python worker start, it must be this Python
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        cores = os.cpu_count() or 2
        builder = (
            builder.config("spark.ui.enabled", "false")
            # the driver's RPC and block-manager servers on the loopback only: an embedded session
            # has no executor elsewhere, and Spark's default (the host name's address, else the
            # first non-loopback interface) opened both on the host's network
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.sql.shuffle.partitions", str(shuffle_partitions or max(2, 2 * cores)))
            .config("spark.driver.memory", driver_memory or os.environ.get("KOPS_SPARK_DRIVER_MEMORY", "2g"))
            .config("spark.driver.extraJavaOptions",
                    f"-Dlog4j2.configurationFile=file:{_quiet_log4j2_file()} {embedded_java_opts(cores, input_bytes)}"
                    .strip())
        )
    elif shuffle_partitions:
        builder = builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR" if embedded else "WARN")
    return spark
