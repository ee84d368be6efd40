"""A checkpoint location and how to list and read its files: a local folder (``pathlib.Path``)
or an ``s3a://bucket/key`` one (``ObjectPath``, read with ``pyarrow.fs.S3FileSystem``).

Every reader of checkpoint files takes its paths from ``location()`` and lists folders with
``listdir``/``scandir`` here, so the same code reads both. An ``s3a://`` location is
reached with one set of settings (``S3ASettings``), for statekit's own reads and for
Spark's (``spark_settings()``: ``spark.hadoop.fs.s3a.*``), each taken from the first place
that has it:

1. Spark's conf: ``spark.hadoop.fs.s3a.bucket.<bucket>.<name>``, then
   ``spark.hadoop.fs.s3a.<name>`` (``access.key``, ``secret.key``, ``session.token``,
   ``endpoint``, ``endpoint.region``, ``path.style.access``);
2. the environment: ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
   ``AWS_SESSION_TOKEN``, ``AWS_ENDPOINT_URL_S3`` or ``AWS_ENDPOINT_URL``, ``AWS_REGION``
   or ``AWS_DEFAULT_REGION``;
3. ``~/.aws/credentials`` and ``~/.aws/config`` (profile ``AWS_PROFILE``, else
   ``default``; ``AWS_SHARED_CREDENTIALS_FILE``, ``AWS_CONFIG_FILE``).

Keys missing everywhere are an ObjectStoreError naming these settings (statekit asks no
instance-metadata service). Other schemes (``hdfs://``, ``s3://``, ``gs://``) are refused:
mount them and give the mount point.

Example:
    >>> env = {"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s",
    ...        "AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "HOME": "/nonexistent"}
    >>> settings = S3ASettings.resolve("bucket", {}, env)
    >>> settings.endpoint, settings.path_style, settings.source
    ('http://127.0.0.1:9000', True, 'the environment')
    >>> spark_settings(settings)["spark.hadoop.fs.s3a.connection.ssl.enabled"]
    'false'
    >>> location("/tmp/ck") == Path("/tmp/ck")
    True
    >>> location("hdfs://nn/ck")
    Traceback (most recent call last):
    ...
    statekit.errors.BadArgument: bad checkpoint: 'hdfs://nn/ck'; accepted: a local path or an \
s3a://bucket/path location (statekit reads other schemes' checkpoints as files: mount the \
hdfs:// location and give its mount point)
"""

from __future__ import annotations

import configparser
import contextlib
import os
import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from statekit.errors import BadArgument, CheckpointError, ObjectStoreError

SCHEME = "s3a://"
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
#: the settings ``S3ASettings`` reads, as a person names them in an error
WHERE_SETTINGS_COME_FROM = (
    "set spark.hadoop.fs.s3a.access.key and spark.hadoop.fs.s3a.secret.key in Spark's conf, "
    "or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment, or a profile in "
    "~/.aws/credentials (AWS_PROFILE, else [default]); a server other than AWS S3 also needs "
    "spark.hadoop.fs.s3a.endpoint or AWS_ENDPOINT_URL")


# --- the settings -------------------------------------------------------------------------
@dataclass(frozen=True)
class S3ASettings:
    """How to reach one bucket: keys, endpoint, region, path-style addressing.

    ``source`` says where the keys came from ("Spark's conf", "the environment",
    "~/.aws/credentials [profile]").
    """

    access_key: str
    secret_key: str
    session_token: str | None
    endpoint: str | None
    region: str
    path_style: bool
    source: str

    @classmethod
    def resolve(cls, bucket: str | None, spark_conf: Mapping[str, str] | None = None,
                environ: Mapping[str, str] | None = None) -> S3ASettings:
        """The settings for ``bucket`` (None: any bucket's), from Spark's conf, the
        environment, then ``~/.aws``; ObjectStoreError naming them when no keys are found."""
        env = os.environ if environ is None else environ
        conf = _active_spark_conf() if spark_conf is None else spark_conf
        profile = _aws_profile(env)

        def spark(name: str) -> str | None:
            if bucket:
                value = conf.get(f"spark.hadoop.fs.s3a.bucket.{bucket}.{name}")
                if value:
                    return value
            return conf.get(f"spark.hadoop.fs.s3a.{name}") or None

        keys = [(spark("access.key"), spark("secret.key"), spark("session.token"),
                 "Spark's conf"),
                (env.get("AWS_ACCESS_KEY_ID"), env.get("AWS_SECRET_ACCESS_KEY"),
                 env.get("AWS_SESSION_TOKEN"), "the environment"),
                (profile.get("aws_access_key_id"), profile.get("aws_secret_access_key"),
                 profile.get("aws_session_token"), profile.get("_source", "~/.aws"))]
        found = next((k for k in keys if k[0] and k[1]), None)
        if found is None:
            where = f" for bucket {bucket!r}" if bucket else ""
            raise ObjectStoreError(f"no credentials{where} for s3a:// locations: "
                                   f"{WHERE_SETTINGS_COME_FROM}")
        endpoint = (spark("endpoint") or env.get("AWS_ENDPOINT_URL_S3")
                    or env.get("AWS_ENDPOINT_URL") or profile.get("endpoint_url"))
        region = (spark("endpoint.region") or env.get("AWS_REGION")
                  or env.get("AWS_DEFAULT_REGION") or profile.get("region") or "us-east-1")
        style = spark("path.style.access")
        path_style = style.lower() == "true" if style else endpoint is not None
        return cls(found[0], found[1], found[2] or None, endpoint, region, path_style,
                   found[3])

    def filesystem(self) -> Any:
        """A ``pyarrow.fs.S3FileSystem`` with these settings (no retries past a few seconds:
        an endpoint that does not answer is named, not waited on)."""
        from pyarrow import fs

        options: dict[str, Any] = {
            "access_key": self.access_key, "secret_key": self.secret_key,
            "session_token": self.session_token, "region": self.region,
            "connect_timeout": 5, "request_timeout": 30,
            "retry_strategy": fs.AwsStandardS3RetryStrategy(max_attempts=2)}
        if self.endpoint:
            scheme, _, host = self.endpoint.rpartition("://")
            options.update(endpoint_override=host or self.endpoint,
                           scheme=scheme or "https")
        if self.path_style:
            options["force_virtual_addressing"] = False
        return fs.S3FileSystem(**options)


def spark_settings(settings: S3ASettings) -> dict[str, str]:
    """``settings`` as Spark's conf keys (``spark.hadoop.fs.s3a.*``) for Hadoop's S3A."""
    conf = {"access.key": settings.access_key, "secret.key": settings.secret_key,
            "endpoint.region": settings.region,
            "path.style.access": str(settings.path_style).lower()}
    if settings.session_token:
        conf["session.token"] = settings.session_token
        conf["aws.credentials.provider"] = (
            "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider")
    if settings.endpoint:
        conf["endpoint"] = settings.endpoint
        conf["connection.ssl.enabled"] = str(
            not settings.endpoint.startswith("http://")).lower()
    return {f"spark.hadoop.fs.s3a.{key}": value for key, value in conf.items()}


def _active_spark_conf() -> dict[str, str]:
    """The ``spark.hadoop.fs.s3a.*`` keys of the active session's conf (none without one;
    pyspark is not imported for it)."""
    if "pyspark.sql" not in sys.modules:
        return {}
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    if session is None:
        return {}
    found: dict[str, str] = {}
    with contextlib.suppress(Exception):  # Spark Connect: no SparkContext
        found.update((k, v) for k, v in session.sparkContext.getConf().getAll()
                     if k.startswith("spark.hadoop.fs.s3a."))
    with contextlib.suppress(Exception):
        hadoop = session.sparkContext._jsc.hadoopConfiguration()
        for name in ("access.key", "secret.key", "session.token", "endpoint",
                     "endpoint.region", "path.style.access"):
            value = hadoop.get(f"fs.s3a.{name}")
            if value:
                found.setdefault(f"spark.hadoop.fs.s3a.{name}", value)
    return found


def _aws_profile(env: Mapping[str, str]) -> dict[str, str]:
    """The profile's entries of ``~/.aws/credentials`` and ``~/.aws/config`` (config's
    ``[profile NAME]``), credentials first; ``_source`` names where the keys are."""
    name = env.get("AWS_PROFILE") or "default"
    home = env.get("HOME") or os.path.expanduser("~")
    credentials = env.get("AWS_SHARED_CREDENTIALS_FILE") or os.path.join(home, ".aws",
                                                                         "credentials")
    config = env.get("AWS_CONFIG_FILE") or os.path.join(home, ".aws", "config")
    found: dict[str, str] = {}
    for path, section in ((config, name if name == "default" else f"profile {name}"),
                          (credentials, name)):
        parser = configparser.ConfigParser(interpolation=None)
        with contextlib.suppress(OSError, configparser.Error):
            parser.read(path)
        if parser.has_section(section):
            found.update(parser[section])
            if parser.has_option(section, "aws_access_key_id"):
                found["_source"] = f"{path} [{section}]"
    return found


# --- a Spark session that reads s3a:// -----------------------------------------------------
S3A_CLASS = "org.apache.hadoop.fs.s3a.S3AFileSystem"


def require_connector(spark: Any) -> None:
    """S3AJarsMissing, saying how to start a session with it, unless ``spark``'s JVM can
    load Hadoop's S3A connector (Spark Connect: the server's concern, not checked)."""
    try:
        jvm, hadoop = spark.sparkContext._jvm, spark.sparkContext._jsc.hadoopConfiguration()
    except Exception:  # Spark Connect: no JVM here
        return
    try:
        jvm.java.lang.Class.forName(S3A_CLASS, False, hadoop.getClassLoader())
    except Exception:
        from statekit.errors import S3AJarsMissing
        from statekit.spark.s3a_jars import S3A_JARS

        raise S3AJarsMissing(
            f"this Spark session's JVM was started without Hadoop's S3A connector, which "
            f"s3a:// locations need, and a running JVM cannot load it: start the session "
            f"with statekit.spark_session(s3a=True) (after `{S3A_JARS.fetch_command}`), or "
            f"give Spark the jars of {S3A_JARS.folder()} in spark.jars") from None


def ready_for(spark: Any, path: ObjectPath) -> None:
    """Make ``spark`` able to read ``path``: the connector checked (``require_connector``),
    and the bucket's settings (``spark_settings``) put in the session's Hadoop conf as
    ``fs.s3a.bucket.<bucket>.*`` where Spark's conf does not already have them."""
    require_connector(spark)
    try:
        hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    except Exception:
        return
    for key, value in spark_settings(path.settings).items():
        name = key[len("spark.hadoop.fs.s3a."):]
        if not hadoop.get(f"fs.s3a.bucket.{path.bucket}.{name}"):
            hadoop.set(f"fs.s3a.bucket.{path.bucket}.{name}", value)


# --- locations ------------------------------------------------------------------------------
def is_object_store(path: object) -> bool:
    """True for an ``s3a://`` location (text or ``ObjectPath``)."""
    return isinstance(path, ObjectPath) or (isinstance(path, str) and path.startswith(SCHEME))


def as_path(path: str | os.PathLike | ObjectPath) -> Path | ObjectPath:
    """``path`` as a ``Path``, or an ``ObjectPath`` for ``s3a://`` (kept as it is, not
    made absolute: ``location`` checks and normalizes a checkpoint's)."""
    if isinstance(path, ObjectPath):
        return path
    text = os.fspath(path)
    return ObjectPath.parse(text) if isinstance(text, str) and text.startswith(SCHEME) \
        else Path(text)


@contextlib.contextmanager
def open_binary(path: Path | ObjectPath) -> Iterator[Any]:
    """A seekable binary file of ``path`` (local, or ``s3a://`` read through pyarrow)."""
    if isinstance(path, ObjectPath):
        with path.open_binary() as src:
            yield src
        return
    with open(path, "rb") as src:
        yield src


def location(path: str | os.PathLike | ObjectPath, what: str = "checkpoint"
             ) -> Path | ObjectPath:
    """``path`` as a ``Path`` (a local folder, made absolute; ``file://`` dropped) or an
    ``ObjectPath`` (``s3a://``); BadArgument for another scheme (mount it instead)."""
    if isinstance(path, ObjectPath):
        return path
    text = os.fspath(path)
    if not isinstance(text, str):
        raise BadArgument(what, path, "a folder's path (a str or os.PathLike naming a folder)")
    if text.startswith("file://"):
        text = text[len("file://"):]
    elif text.startswith(SCHEME):
        return ObjectPath.parse(text)
    elif text.startswith(("s3://", "s3n://")):
        raise BadArgument(what, text, f"a local path or an s3a://bucket/path location "
                          f"(Hadoop's S3A connector: s3a://{text.split('://', 1)[1]})")
    elif _URL.match(text):
        scheme = text.split("://", 1)[0]
        raise BadArgument(what, text, f"a local path or an s3a://bucket/path location "
                          f"(statekit reads other schemes' checkpoints as files: mount the "
                          f"{scheme}:// location and give its mount point)")
    return Path(os.path.abspath(text))


def listdir(folder: Path | ObjectPath) -> list[str]:
    """The names in ``folder`` (``os.listdir``'s errors: FileNotFoundError,
    NotADirectoryError)."""
    if isinstance(folder, ObjectPath):
        return [entry.name for entry in folder.scandir()]
    return os.listdir(folder)


@contextlib.contextmanager
def scandir(folder: Path | ObjectPath) -> Iterator[Any]:
    """``os.scandir`` of a local folder, or the same entries (``name``, ``path``,
    ``is_file()``, ``is_dir()``, ``stat()``) of an ``s3a://`` one, from one listing."""
    if isinstance(folder, ObjectPath):
        yield iter(folder.scandir())
        return
    with os.scandir(folder) as entries:
        yield entries


def entry_path(entry: Any) -> Path | ObjectPath:
    """The path of a ``scandir`` entry."""
    return entry.object_path if isinstance(entry, _ObjectEntry) else Path(entry.path)


def missing_error(path: Path | ObjectPath, what: str = "checkpoint") -> CheckpointError:
    """The error of a ``path`` that is not a folder, naming it: for ``s3a://``, a bucket that
    does not exist is an ObjectStoreError naming the bucket and the endpoint."""
    if isinstance(path, ObjectPath) and path.key and not path.bucket_exists():
        return ObjectStoreError(f"{what} {str(path)!r}: bucket {path.bucket!r} does not exist"
                                f"{path.at_endpoint()}")
    return CheckpointError(f"{what} {str(path)!r} does not exist or is not a directory")


@dataclass(frozen=True)
class _Stat:
    st_size: int
    st_mtime: float


@dataclass(frozen=True)
class _ObjectEntry:
    """An ``os.DirEntry`` look-alike for one object or prefix of a listing."""

    object_path: ObjectPath
    is_folder: bool
    size: int
    mtime: float

    @property
    def name(self) -> str:
        return self.object_path.name

    @property
    def path(self) -> str:
        return str(self.object_path)

    def is_file(self) -> bool:
        return not self.is_folder

    def is_dir(self) -> bool:
        return self.is_folder

    def is_symlink(self) -> bool:
        return False

    def stat(self) -> _Stat:
        return _Stat(self.size, self.mtime)


class ObjectPath:
    """An ``s3a://bucket/key`` location with the part of ``pathlib.Path``'s API checkpoint
    readers use (``/``, ``name``, ``parent``, ``is_dir``, ``read_bytes``, ``iterdir``, ...),
    read through ``pyarrow.fs.S3FileSystem``. Folders are key prefixes. Read only: statekit
    writes nothing to object storage.

    Example:
        >>> path = ObjectPath.parse("s3a://bucket/ck/")
        >>> str(path / "offsets" / "3"), (path / "offsets").name, str(path.parent)
        ('s3a://bucket/ck/offsets/3', 'offsets', 's3a://bucket')
    """

    def __init__(self, bucket: str, key: str, settings: S3ASettings | None = None):
        self.bucket, self.key = bucket, key.strip("/")
        #: the settings and file system, resolved once and shared with every path made
        #: from this one (``/``, ``parent``, listings)
        self._connection: dict[str, Any] = {"settings": settings, "fs": None}

    @classmethod
    def parse(cls, text: str) -> ObjectPath:
        """``s3a://bucket/key`` → ObjectPath; BadArgument naming a text without a bucket."""
        rest = text[len(SCHEME):] if text.startswith(SCHEME) else ""
        bucket, _, key = rest.partition("/")
        if not re.fullmatch(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", bucket):
            raise BadArgument("checkpoint", text, "s3a://bucket/path with a bucket name of "
                              "3-63 lower-case letters, digits, dots and hyphens")
        return cls(bucket, "/".join(p for p in key.split("/") if p not in ("", ".")))

    # --- the settings and the file system, resolved on first use -----------------------
    @property
    def settings(self) -> S3ASettings:
        if self._connection["settings"] is None:
            self._connection["settings"] = S3ASettings.resolve(self.bucket)
        return self._connection["settings"]

    @property
    def filesystem(self) -> Any:
        if self._connection["fs"] is None:
            self._connection["fs"] = self.settings.filesystem()
        return self._connection["fs"]

    def _child(self, key: str) -> ObjectPath:
        child = ObjectPath(self.bucket, key)
        child._connection = self._connection
        return child

    def at_endpoint(self) -> str:
        endpoint = self.settings.endpoint
        return f" at {endpoint}" if endpoint else " (AWS S3)"

    @contextlib.contextmanager
    def _calling(self, what: str) -> Iterator[None]:
        """pyarrow's and the AWS SDK's errors as ObjectStoreError naming the location (a
        missing object stays FileNotFoundError, as for a local file)."""
        try:
            yield
        except (FileNotFoundError, NotADirectoryError):
            raise
        except OSError as exc:
            text = str(exc)
            if "NoSuchBucket" in text or "bucket does not exist" in text.lower():
                raise FileNotFoundError(str(self)) from None
            reason = text.splitlines()[0][:300] if text else type(exc).__name__
            raise ObjectStoreError(
                f"cannot {what} {str(self)!r}{self.at_endpoint()} with the credentials from "
                f"{self.settings.source}: {reason}. Check the endpoint and the keys: "
                f"{WHERE_SETTINGS_COME_FROM}") from None

    @property
    def _arrow_path(self) -> str:
        return f"{self.bucket}/{self.key}" if self.key else self.bucket

    def _info(self) -> Any:
        from pyarrow import fs

        try:
            with self._calling("read"):
                return self.filesystem.get_file_info(self._arrow_path)
        except FileNotFoundError:  # the bucket is not there
            return fs.FileInfo(self._arrow_path, fs.FileType.NotFound)

    def bucket_exists(self) -> bool:
        from pyarrow import fs

        with self._calling("list"):
            return self.filesystem.get_file_info(self.bucket).type != fs.FileType.NotFound

    # --- pathlib.Path's API ---------------------------------------------------------------
    def __truediv__(self, name: str) -> ObjectPath:
        return self._child(f"{self.key}/{name}".strip("/"))

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1] if self.key else ""

    @property
    def suffix(self) -> str:
        name = self.name
        return name[name.rindex("."):] if "." in name.lstrip(".") else ""

    @property
    def parent(self) -> ObjectPath:
        return self._child(self.key.rsplit("/", 1)[0] if "/" in self.key else "")

    @property
    def parents(self) -> list[ObjectPath]:
        found, path = [], self
        while path.key:
            path = path.parent
            found.append(path)
        return found

    def with_name(self, name: str) -> ObjectPath:
        return self.parent / name

    def relative_to(self, other: ObjectPath) -> Path:
        if other.bucket != self.bucket or not (self.key + "/").startswith(
                other.key + "/" if other.key else ""):
            raise ValueError(f"{self} is not in {other}")
        return Path(self.key[len(other.key):].lstrip("/") or ".")

    def is_dir(self) -> bool:
        from pyarrow import fs

        return self._info().type == fs.FileType.Directory

    def is_file(self) -> bool:
        from pyarrow import fs

        return self._info().type == fs.FileType.File

    def exists(self) -> bool:
        from pyarrow import fs

        return self._info().type != fs.FileType.NotFound

    def is_symlink(self) -> bool:
        return False

    def stat(self) -> _Stat:
        from pyarrow import fs

        info = self._info()
        if info.type == fs.FileType.NotFound:
            raise FileNotFoundError(str(self))
        return _Stat(info.size or 0, info.mtime.timestamp() if info.mtime else 0.0)

    def read_bytes(self) -> bytes:
        with self._calling("read"), self.filesystem.open_input_stream(self._arrow_path) as src:
            return src.read()

    @contextlib.contextmanager
    def open_binary(self) -> Iterator[Any]:
        """A seekable binary file (``pyarrow.fs``'s random-access file)."""
        with self._calling("read"), self.filesystem.open_input_file(self._arrow_path) as src:
            yield src

    def read_text(self, encoding: str = "utf-8") -> str:
        return self.read_bytes().decode(encoding)

    def scandir(self) -> list[_ObjectEntry]:
        """One listing of this folder (FileNotFoundError when it is not one)."""
        from pyarrow import fs

        with self._calling("list"):
            infos = self.filesystem.get_file_info(fs.FileSelector(self._arrow_path))
        return [_ObjectEntry(self._child(info.path.split("/", 1)[1]),
                             info.type == fs.FileType.Directory, info.size or 0,
                             info.mtime.timestamp() if info.mtime else 0.0)
                for info in infos]

    def iterdir(self) -> Iterator[ObjectPath]:
        return iter([entry.object_path for entry in self.scandir()])

    def __str__(self) -> str:
        return f"{SCHEME}{self._arrow_path}"

    def __repr__(self) -> str:
        return f"ObjectPath({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjectPath) and (other.bucket, other.key) == (self.bucket,
                                                                                self.key)

    def __lt__(self, other: ObjectPath) -> bool:
        return str(self) < str(other)

    def __hash__(self) -> int:
        return hash((self.bucket, self.key))
