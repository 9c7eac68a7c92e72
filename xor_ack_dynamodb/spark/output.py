"""Where tracked output goes. :meth:`Location.open` writes each file the library writes
itself durably (a temporary name, fsync, rename, the directory fsync'd; on S3 one
``PutObject``): a sink acks only output that survives the task, and readers see a whole
file or none of it.
"""

from __future__ import annotations

import io
import os
import secrets
import shutil
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ..errors import InvalidConfig, XorAckError

__all__ = ["Location", "OutputRefused", "RestagedApart"]


class OutputRefused(InvalidConfig):
    """A tracked write refused before any task runs and before anything is written: a
    column named like the tag column, another format, a location Spark has no file
    system for, a file where a directory should be."""


class RestagedApart(XorAckError):
    """A write of records of several roots whose stamps did not all ack was made again
    over the roots that acked, and records of those failed there (their input changed):
    nothing of the write is kept; the acks stand."""

    @classmethod
    def of(cls, failed: Collection[str], what: str) -> RestagedApart:
        return cls(
            f"{len(failed)} acked root(s) failed when their {what} again without the roots that "
            f"did not ack (their input changed during the run?), e.g. {min(failed)!r}: nothing of "
            "the write is kept"
        )


@dataclass(frozen=True)
class Location:
    """A directory (local, or shared by the nodes: NFS, EFS, a FUSE mount) or an
    ``s3://bucket/prefix``. Picklable: executors build their own S3 client;
    ``endpoint_url`` and ``region`` None mean the environment's. Build one with
    :meth:`of`."""

    url: str
    endpoint_url: str | None = None
    region: str | None = None

    @classmethod
    def of(cls, where: str | os.PathLike[str] | Location) -> Location:
        """``where`` as a location: ``s3://bucket/prefix`` (endpoint and region from this
        process's environment) or a directory (made absolute). :class:`InvalidConfig`
        for an S3 URL without a bucket."""
        if isinstance(where, Location):
            return where
        text = os.fspath(where)
        if not text.startswith("s3://"):
            return cls(os.path.abspath(text))
        if not text[len("s3://") :].split("/")[0]:
            raise InvalidConfig(f"no bucket in {text!r}")
        env = os.environ.get
        endpoint = env("AWS_ENDPOINT_URL_S3") or env("AWS_ENDPOINT_URL")
        return cls(text, endpoint, env("AWS_REGION") or env("AWS_DEFAULT_REGION"))

    @classmethod
    def s3_environment(cls) -> Location:
        """This process's S3 endpoint and region (as :meth:`of` reads them), for executors."""
        return cls.of("s3://environment")

    def at(self, url: str) -> Location:
        """``url`` with this location's endpoint and region."""
        return Location(url, self.endpoint_url, self.region)

    @property
    def is_s3(self) -> bool:
        return self.url.startswith("s3://")

    def child(self, sub: str) -> Location:
        if self.is_s3:
            return Location(f"{self.url.rstrip('/')}/{sub.strip('/')}", self.endpoint_url, self.region)
        return Location(os.path.join(self.url, sub))

    def key(self, name: str) -> tuple[str, str]:
        bucket, _, prefix = self.url[len("s3://") :].partition("/")
        prefix = prefix.strip("/")
        return bucket, f"{prefix}/{name}" if prefix else name

    def client(self) -> Any:
        """A new S3 client; network failures raise the library's typed errors."""
        import boto3

        from ..stores.dynamodb.clients import typed_client

        session = boto3.session.Session(region_name=self.region)
        return typed_client(session.client("s3", endpoint_url=self.endpoint_url))

    @contextmanager
    def open(self, name: str) -> Iterator[IO[bytes]]:
        """A binary file to write ``name`` into: durable under its final name once the
        block exits cleanly (module doc); a block that raises leaves nothing."""
        if self.is_s3:
            buffer = io.BytesIO()
            yield buffer
            bucket, key = self.key(name)
            self.client().put_object(Bucket=bucket, Key=key, Body=buffer.getvalue())
            return
        directory = Path(self.url)
        directory.mkdir(parents=True, exist_ok=True)
        # not mkstemp: its 0o600 would be the published file's mode; this one follows the umask
        temp = directory / f".{name}.{secrets.token_hex(8)}.tmp"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            with os.fdopen(fd, "wb") as handle:
                yield handle
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temp, directory / name)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def put(self, name: str, data: bytes) -> None:
        with self.open(name) as handle:
            handle.write(data)

    def get(self, name: str, client: Any = None) -> bytes | None:
        if not self.is_s3:
            path = Path(self.url) / name
            return path.read_bytes() if path.exists() else None
        bucket, key = self.key(name)
        client = client or self.client()
        try:
            return bytes(client.get_object(Bucket=bucket, Key=key)["Body"].read())
        except client.exceptions.NoSuchKey:
            return None

    def names(self, prefix: str = "part-", suffix: str = "", client: Any = None) -> list[str]:
        """The files named ``prefix*suffix`` here, sorted (temporary files never)."""
        if not self.is_s3:
            return sorted(p.name for p in Path(self.url).glob(f"{prefix}*{suffix}") if p.is_file())
        bucket, start = self.key(prefix)
        base = len(start) - len(prefix)
        pages = (
            (client or self.client()).get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=start)
        )
        keys = (item["Key"] for page in pages for item in page.get("Contents", []))
        return sorted(key[base:] for key in keys if key.endswith(suffix))

    def remove(self) -> None:
        """Delete everything here (a file, a tree, every object under the prefix)."""
        if not self.is_s3:
            if os.path.isfile(self.url):
                os.remove(self.url)
            shutil.rmtree(self.url, ignore_errors=True)
            return
        client = self.client()
        bucket, prefix = self.key("")
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            keys = [{"Key": item["Key"]} for item in page.get("Contents", [])]
            if keys:
                client.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})

    def claim(self, name: str, data: bytes) -> bool:
        """Create file ``name`` holding ``data`` unless it exists; True if this call did
        (of concurrent claims of one name exactly one wins)."""
        if self.is_s3:
            bucket, key = self.key(name)
            client = self.client()
            try:
                client.put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
            except client.exceptions.ClientError as exc:
                if exc.response.get("Error", {}).get("Code") in (
                    "PreconditionFailed",
                    "ConditionalRequestConflict",
                ):
                    return False
                raise
            return True
        Path(self.url).mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(Path(self.url) / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        return True

    def move(self, name: str, into: Location) -> None:
        """Move file ``name`` into ``into`` (rename; on S3 copy then delete). A file
        already moved is left alone: an interrupted series of moves can run again."""
        if self.is_s3:
            client = self.client()
            bucket, key = self.key(name)
            target_bucket, target = into.key(name)
            try:
                client.copy_object(
                    Bucket=target_bucket, Key=target, CopySource={"Bucket": bucket, "Key": key}
                )
            except client.exceptions.ClientError as exc:
                if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                    return
                raise
            client.delete_object(Bucket=bucket, Key=key)
            return
        source = Path(self.url) / name
        if source.exists():
            os.replace(source, Path(into.url) / name)

    def describe(self, name: str) -> str:
        """File ``name`` as a path or an ``s3://`` URL."""
        return "s3://{}/{}".format(*self.key(name)) if self.is_s3 else os.path.join(self.url, name)
