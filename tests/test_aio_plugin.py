"""The pytest plugin's asyncio fixtures, used as a user's async tests use them
(pytest-asyncio, strict mode)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from xor_ack_dynamodb import errors
from xor_ack_dynamodb.aio import AsyncAckTracker, AsyncMemoryAck, AsyncXorAckDynamoDB

pytestmark = pytest.mark.server


async def pipeline(ack: AsyncAckTracker, tag: str, workers: int) -> list[bool]:
    """A root splits into ``workers`` children processed by concurrent tasks."""
    root = ack.new_edge()
    await ack.create(tag, root)
    kids = [ack.new_edge() for _ in range(workers)]
    await ack.stamp(tag, finished=[root], started=kids)
    results = await asyncio.gather(
        *(ack.stamp(tag, finished=[k], op_id=f"{tag}/{i}") for i, k in enumerate(kids))
    )
    return [r.acked for r in results]


@pytest.mark.asyncio
async def test_async_xor_ack_is_a_real_table(async_xor_ack: AsyncXorAckDynamoDB) -> None:
    assert isinstance(async_xor_ack, AsyncAckTracker)
    acked = await pipeline(async_xor_ack, "file-1", 8)
    assert sorted(acked) == [False] * 7 + [True]
    assert (await async_xor_ack.status("file-1")).state == "acked"
    described = await async_xor_ack.client.describe_table(TableName=async_xor_ack.table)
    assert described["Table"]["TableStatus"] == "ACTIVE"


@pytest.mark.asyncio
async def test_each_test_gets_a_fresh_table(async_xor_ack: AsyncXorAckDynamoDB) -> None:
    with pytest.raises(errors.TagNotFound):
        await async_xor_ack.status("file-1")  # written by the test above, in another table


@pytest.mark.asyncio
async def test_the_factory_shares_the_table(
    async_xor_ack: AsyncXorAckDynamoDB, async_xor_ack_factory: Callable[..., Any]
) -> None:
    summing = async_xor_ack_factory(mode="sum")
    assert summing.client is async_xor_ack.client and summing.table == async_xor_ack.table
    acked = await pipeline(summing, "file-2", 8)
    assert sum(acked) == 1
    with pytest.raises(errors.ChainModeMismatch):  # the other tracker sees the same chain
        await async_xor_ack.stamp("file-2", finished=[async_xor_ack.new_edge()])


@pytest.mark.asyncio
async def test_async_memory_ack(async_memory_ack: AsyncMemoryAck) -> None:
    acked = await pipeline(async_memory_ack, "file-3", 8)
    assert sorted(acked) == [False] * 7 + [True]
    assert async_memory_ack.rotate() == []
    assert (await async_memory_ack.status("file-3")).state == "acked"
