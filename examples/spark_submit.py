"""Entry point for spark-submit, which takes a Python file rather than a module:

    spark-submit --master yarn examples/spark_submit.py wordcount s3-mounted/input --output /mnt/out

Runs ``xor-ack`` with the given arguments; the master and the Spark settings come from
spark-submit. The package must be importable on the driver and on every executor (see
docs/spark.md).
"""

import sys

from xor_ack_dynamodb.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
