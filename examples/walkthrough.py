"""The seed README's walkthrough, with its exact bytes, against an embedded DynamoDB.

    python examples/walkthrough.py

A file's chain starts at 29; one stamp finishes the file and starts three words (4c, the
XOR of 29, 25, a9 and e9); each finished word is stamped in turn, and the chain reaches
00 exactly at the last one. Illustrative one-byte stamps only: real stamps are random and
16 bytes (``new_stamp()``).
"""

from __future__ import annotations

from xor_ack_dynamodb import LocalDynamoDB, XorAckDynamoDB, xor


def main() -> None:
    file_stamp = bytes.fromhex("29")
    words = [bytes.fromhex(h) for h in ("25", "a9", "e9")]
    with LocalDynamoDB() as dynamodb:
        ack = XorAckDynamoDB.from_config(dynamodb.config("walkthrough"))
        ack.create_table()
        tag = "database/file13"

        print(f"create {tag}: {ack.create(tag, file_stamp).hex()}")
        xor_of_all = xor(file_stamp, *words)
        result = ack.stamp(tag, xor_of_all)
        print(f"stamp {xor_of_all.hex()} (file done, 3 words started) -> {result.hex()}")
        for word in words:
            result = ack.stamp(tag, word)
            print(f"stamp {word.hex()} (word done) -> {result.hex()} acked={result.acked}")
        status = ack.status(tag)
        print(f"status: {status.state}; DynamoDB requests: {ack.stats.requests}")


if __name__ == "__main__":
    main()
