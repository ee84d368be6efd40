"""The settings that reach an ``s3a://`` location, one set for statekit's reads (pyarrow)
and Spark's (``spark.hadoop.fs.s3a.*``): ``S3ASettings.resolve`` takes each from the first
place that has it (Spark's conf, the environment, ``~/.aws``; see
``statekit.spark.object_store``), ``spark_settings`` gives them to Spark, ``ready_for``
makes a running session read a bucket.

Example:
    >>> env = {"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s",
    ...        "AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "HOME": "/nonexistent"}
    >>> settings = S3ASettings.resolve("bucket", {}, env)
    >>> settings.endpoint, settings.path_style, settings.source
    ('http://127.0.0.1:9000', True, 'the environment')
    >>> spark_settings(settings)["spark.hadoop.fs.s3a.connection.ssl.enabled"]
    'false'
"""

from __future__ import annotations

import configparser
import contextlib
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from statekit.errors import ObjectStoreError

if TYPE_CHECKING:
    from statekit.spark.object_path import ObjectPath

#: the one scheme statekit reads checkpoints from object storage with (Hadoop's S3A)
SCHEME = "s3a://"
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
