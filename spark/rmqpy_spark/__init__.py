"""rmqpy_spark: read a RocketMQ store (Apache RocketMQ's on-disk format) with PySpark.

    from rmqpy_spark import register
    register(spark)
    spark.read.format("rocketmq").load("/path/to/store")
"""

from .reader import ARROW_SCHEMA, SCHEMA_DDL  # noqa: F401

__all__ = ["RocketMQDataSource", "register", "ARROW_SCHEMA", "SCHEMA_DDL"]


def __getattr__(name):  # pyspark is imported only when the data source itself is needed
    if name in ("RocketMQDataSource", "register"):
        from . import datasource
        return getattr(datasource, name)
    raise AttributeError(name)
