"""A new KRaft log folder without a JVM: Kafka's own ``StorageTool format`` run once per machine.

Before its first start a KRaft node's log folder must be formatted: ``meta.properties`` (the
cluster id, the node id, the folder's own id) and ``bootstrap.checkpoint`` (the feature
levels the cluster starts with). Kafka's ``kafka-storage format`` does it in a JVM of its
own, ~1.3 CPU-seconds and 1.7 s of wall time before the broker's own JVM even starts: the
first thing a notebook's ``EmbeddedBroker().start(wait=False)`` waited for.

``bootstrap.checkpoint`` does not depend on the node, its ports or the cluster id: two
folders formatted with different ones differ only in the record batches' timestamps and
checksums (compared byte by byte; ``tests/kafka/test_log_format.py`` starts a broker on a
folder formatted this way and reads its own record of the features back). So statekit runs
Kafka's tool once per Kafka release, class path and broker settings into a template under
``~/.cache/statekit`` (staged, renamed whole) and formats a folder by copying the template's
files and writing ``meta.properties`` itself, as Kafka writes it.

Example:
    >>> format_log_dir(data, java, settings, node_id=1, cluster="yqQwn7BWQV6xIqwuMwrPyA")
    ...                                                               # doctest: +SKIP
    >>> sorted(p.name for p in data.iterdir())                        # doctest: +SKIP
    ['bootstrap.checkpoint', 'meta.properties']
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from statekit.cache import cache_dir, remove_stale
from statekit.errors import StatekitError

META = "meta.properties"
#: settings that name this node and where it listens or writes: not part of the template's key
NODE_SETTINGS = frozenset({"node.id", "controller.quorum.voters", "listeners",
                           "advertised.listeners", "log.dirs"})
#: a staging folder older than this is a build that died
STALE_STAGING_S = 600.0


def meta_properties(node_id: int, cluster: str, directory: str) -> str:
    """The text of a formatted folder's ``meta.properties`` (Kafka's version 1).

    Example:
        >>> print(meta_properties(1, "yqQwn7BWQV6xIqwuMwrPyA", "FAdm-yg0Xz9d5Ev-I5Qrog"))
        #
        node.id=1
        directory.id=FAdm-yg0Xz9d5Ev-I5Qrog
        version=1
        cluster.id=yqQwn7BWQV6xIqwuMwrPyA
        <BLANKLINE>
    """
    return (f"#\nnode.id={node_id}\ndirectory.id={directory}\nversion=1\n"
            f"cluster.id={cluster}\n")


def template_key(java: Sequence[str], settings: Mapping[str, str]) -> str:
    """What a template is built from: the java command (its class path says which Kafka; its
    ``-D`` properties, such as the broker's own log configuration file, left out) and the
    settings that are not the node's own (``NODE_SETTINGS``), hashed.

    Example:
        >>> a = template_key(["java", "-cp", "k/*"], {"node.id": "1", "num.partitions": "1"})
        >>> a == template_key(["java", "-cp", "k/*"], {"node.id": "2", "num.partitions": "1"})
        True
        >>> a == template_key(["java", "-Dlog4j2.configurationFile=/b", "-cp", "k/*"],
        ...                   {"node.id": "1", "num.partitions": "1"})
        True
        >>> a == template_key(["java", "-cp", "k2/*"], {"node.id": "1", "num.partitions": "1"})
        False
    """
    shared = {k: v for k, v in settings.items() if k not in NODE_SETTINGS}
    text = json.dumps([[a for a in java if not a.startswith("-D")], sorted(shared.items())])
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def format_log_dir(data_dir: Path, java: Sequence[str], settings: Mapping[str, str], *,
                   node_id: int, cluster: str, cache: Path | None = None) -> None:
    """Format ``data_dir`` as node ``node_id`` of KRaft cluster ``cluster``: the template's
    files copied in (the template built first if this machine has none for these ``java``
    and ``settings``), then ``meta.properties``, written last (its presence means formatted)."""
    from statekit.kafka.broker import cluster_id

    template = ensure_template(java, settings, cache)
    data_dir.mkdir(parents=True, exist_ok=True)
    for item in template.iterdir():
        if item.name != META:
            shutil.copy2(item, data_dir / item.name)
    staged = data_dir / f".{META}.tmp"
    staged.write_text(meta_properties(node_id, cluster, cluster_id()))
    staged.rename(data_dir / META)


def ensure_template(java: Sequence[str], settings: Mapping[str, str],
                    cache: Path | None = None) -> Path:
    """The template folder for ``java`` and ``settings``, built with Kafka's ``StorageTool
    format`` when missing (in a staging folder renamed whole: a concurrent build or one that
    died never leaves half a template)."""
    root = (cache or cache_dir()) / "kafka-format"
    home = root / template_key(java, settings)
    if (home / META).is_file():
        return home
    root.mkdir(parents=True, exist_ok=True)
    remove_stale(root.glob("*.staging-*"), STALE_STAGING_S)
    staging = Path(tempfile.mkdtemp(prefix=f"{home.name}.staging-", dir=root))
    try:
        data = staging / "data"
        config = staging / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in
                                  {**settings, "log.dirs": str(data)}.items()))
        from statekit.kafka.broker import cluster_id

        cmd = [*java, "kafka.tools.StorageTool", "format", "--cluster-id", cluster_id(),
               "--config", str(config), "--ignore-formatted"]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0 or not (data / META).is_file():
            raise StatekitError(
                f"could not format an Apache Kafka log folder with Kafka's StorageTool (exit "
                f"{done.returncode}): {(done.stdout + done.stderr).strip()[-1500:]}")
        try:
            data.rename(home)
        except OSError:
            if not (home / META).is_file():  # not another process that got there first
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return home
