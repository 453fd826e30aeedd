#!/usr/bin/env python3
"""A reader of the VIP allocator's `vips` table in Python, with boto3 (docs/readers.md).

- `make_client(region=None, endpoint=None)`: a boto3 DynamoDB client for a region (the nearest
  replica of the vips table) or a local engine's endpoint (with dummy credentials).
- `get_mesh(client, table, mesh)`: one GetItem, decoded (format 1 and format 2).
- `decode_item(item)`: an item as boto3's low-level client returns it (DynamoDB JSON with
  bytes for B) to a `MeshView`, with external services' hosts apart from services.
- `VipReader(client, table).refresh()`: an in-memory snapshot of every mesh, kept fresh by a
  version probe (a Scan of the table's `versions` index: mesh, version, incarnation only), then
  one GetItem per mesh whose version or incarnation moved; like the JavaScript `VipReader`.
  `lookup`, `lookup_service`, `reverse`, `lookup_host` and `reverse_host` answer from memory, as
  the JavaScript reader does (vip_snapshot.py).

Service names are data: they are kept in dicts, where `__proto__` and `constructor` are
ordinary keys.

Command line (used by the project's tests):
  vip_reader.py vectors DIR                      decode every test vector, compare, exit 1 on a mismatch
  vip_reader.py get MESH --table T [--endpoint URL] [--region R]   print one mesh as JSON (exit 1 if none)
  vip_reader.py follow --table T [--endpoint URL] [--region R]     refresh, print; again per stdin line
  vip_reader.py answers (--vectors DIR | --table T [--endpoint URL] [--region R])
                                                 every view and every lookup's answer, as JSON
"""

from __future__ import annotations

import argparse
import base64
import gzip
import json
import os
import sys
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from vip_snapshot import Snapshot, canonical_vip

VERSIONS_INDEX = "versions"


class MalformedItem(ValueError):
    """An item that cannot be decoded (no mesh, no valid version, a bad format-2 payload)."""


@dataclass
class MeshView:
    mesh: str
    version: int
    incarnation: str
    cidr: str
    updated_at: str
    format: int
    vips: Dict[str, str] = field(default_factory=dict)
    unallocated: Dict[str, str] = field(default_factory=dict)
    leaving: List[str] = field(default_factory=list)
    # External services' hosts -> VIP, and hosts without a VIP -> reason.
    hosts: Dict[str, str] = field(default_factory=dict)
    unallocated_hosts: Dict[str, str] = field(default_factory=dict)
    # Entries dropped because their VIP is not an address ("host/<host>" for a host).
    skipped: List[str] = field(default_factory=list)
    # Services and hosts without a VIP yet: a pass ran out of its invocation's time (decision 160).
    pending: List[str] = field(default_factory=list)
    pending_hosts: List[str] = field(default_factory=list)


def _string_map(attr: Optional[Dict[str, Any]]) -> Dict[str, str]:
    if not attr or "M" not in attr:
        return {}
    return {name: value["S"] for name, value in attr["M"].items() if "S" in value}


def _string_list(attr: Optional[Dict[str, Any]]) -> List[str]:
    if not attr or "L" not in attr:
        return []
    return [value["S"] for value in attr["L"] if "S" in value]


def _plain_strings(value: Any) -> Dict[str, str]:
    if not isinstance(value, dict):
        return {}
    return {name: text for name, text in value.items() if isinstance(text, str)}


def _addresses(entries: Dict[str, str], prefix: str, skipped: List[str]) -> Dict[str, str]:
    """Canonical VIPs; an entry whose VIP is not an address is dropped (and named in `skipped`)."""
    out: Dict[str, str] = {}
    for name, text in entries.items():
        vip = canonical_vip(text)
        if vip is None:
            skipped.append(f"{prefix}{name}")
        else:
            out[name] = vip
    return out


def decode_item(item: Dict[str, Any]) -> MeshView:
    """Decodes an item in DynamoDB JSON (B as bytes, as boto3's client returns it)."""
    mesh = item.get("mesh", {}).get("S")
    if not mesh:
        raise MalformedItem("no mesh name (key `mesh`)")
    try:
        version = int(item["version"]["N"])
    except (KeyError, ValueError) as error:
        raise MalformedItem(f"mesh {mesh!r}: no valid version") from error
    fmt = int(item.get("format", {}).get("N", "1"))
    if fmt == 2:
        data = item.get("vipsGz", {}).get("B")
        if not isinstance(data, (bytes, bytearray)):
            raise MalformedItem(f"mesh {mesh!r}: format 2 without vipsGz")
        try:
            payload = json.loads(gzip.decompress(bytes(data)).decode("utf-8"))
        except (OSError, ValueError) as error:
            raise MalformedItem(f"mesh {mesh!r}: vipsGz does not decode: {error}") from error
        vips = _plain_strings(payload.get("vips"))
        unallocated = _plain_strings(payload.get("unallocated"))
        leaving = [name for name in payload.get("leaving", []) if isinstance(name, str)]
        hosts = _plain_strings(payload.get("hosts"))
        unallocated_hosts = _plain_strings(payload.get("unallocatedHosts"))
        pending = [name for name in payload.get("pending", []) if isinstance(name, str)]
        pending_hosts = [name for name in payload.get("pendingHosts", []) if isinstance(name, str)]
    else:
        vips = _string_map(item.get("vips"))
        unallocated = _string_map(item.get("unallocated"))
        leaving = _string_list(item.get("leaving"))
        hosts = _string_map(item.get("hosts"))
        unallocated_hosts = _string_map(item.get("unallocatedHosts"))
        pending = _string_list(item.get("pending"))
        pending_hosts = _string_list(item.get("pendingHosts"))
    skipped: List[str] = []
    return MeshView(
        mesh=mesh,
        version=version,
        incarnation=item.get("incarnation", {}).get("S", ""),
        cidr=item.get("cidr", {}).get("S", ""),
        updated_at=item.get("updatedAt", {}).get("S", ""),
        format=fmt,
        vips=_addresses(vips, "", skipped),
        unallocated=unallocated,
        leaving=leaving,
        hosts=_addresses(hosts, "host/", skipped),
        unallocated_hosts=unallocated_hosts,
        skipped=skipped,
        pending=pending,
        pending_hosts=pending_hosts,
    )


def get_mesh(client: Any, table: str, mesh: str, consistent: bool = False) -> Optional[MeshView]:
    """One mesh: one GetItem (eventually consistent unless `consistent`)."""
    out = client.get_item(TableName=table, Key={"mesh": {"S": mesh}}, ConsistentRead=consistent)
    item = out.get("Item")
    return None if item is None else decode_item(item)


@dataclass
class RefreshStats:
    probe_requests: int = 0
    probe_source: str = "index"
    fetched: List[str] = field(default_factory=list)
    added: List[str] = field(default_factory=list)
    removed: List[str] = field(default_factory=list)
    changed: List[str] = field(default_factory=list)
    malformed: List[str] = field(default_factory=list)


class VipReader:
    """Every mesh's view in memory; `refresh()` probes versions and fetches only what moved."""

    def __init__(self, client: Any, table: str = "", consistent: bool = False) -> None:
        self.client = client
        self.table = table or os.environ.get("VIPS_TABLE", "vips")
        self.consistent = consistent
        self.probe_table = consistent  # the index is eventually consistent only
        self.views: Dict[str, MeshView] = {}
        self._snapshot: Optional[Snapshot] = None

    def _probe(self, stats: RefreshStats) -> Dict[str, Dict[str, Any]]:
        """mesh -> {version, incarnation}: one paged Scan of the index (or of the table)."""
        args: Dict[str, Any] = {
            "TableName": self.table,
            "ProjectionExpression": "#m, #v, #i",
            "ExpressionAttributeNames": {"#m": "mesh", "#v": "version", "#i": "incarnation"},
        }
        if self.probe_table:
            args["ConsistentRead"] = self.consistent
        else:
            args["IndexName"] = VERSIONS_INDEX
        stats.probe_source = "table" if self.probe_table else "index"
        found: Dict[str, Dict[str, Any]] = {}
        from botocore.exceptions import ClientError

        paginator = self.client.get_paginator("scan")
        try:
            for page in paginator.paginate(**args):
                stats.probe_requests += 1
                for item in page.get("Items", []):
                    mesh = item.get("mesh", {}).get("S")
                    if not mesh:
                        continue
                    found[mesh] = {
                        "version": int(item.get("version", {}).get("N", "0")),
                        "incarnation": item.get("incarnation", {}).get("S", ""),
                    }
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code", "")
            # No index on the table, or a role allowed the table only: probe the table instead.
            if not self.probe_table and code in ("ValidationException", "AccessDeniedException"):
                self.probe_table = True
                return self._probe(stats)
            raise
        return found

    def refresh(self) -> RefreshStats:
        stats = RefreshStats()
        probed = self._probe(stats)
        views = dict(self.views)
        for mesh in list(views):
            if mesh not in probed:
                del views[mesh]
                stats.removed.append(mesh)
        for mesh, seen in probed.items():
            old = views.get(mesh)
            if (
                old is not None
                and old.incarnation == seen["incarnation"]
                and old.version >= seen["version"]
            ):
                continue
            stats.fetched.append(mesh)
            try:
                view = get_mesh(self.client, self.table, mesh, self.consistent)
            except MalformedItem as error:
                stats.malformed.append(str(error))  # keep the last good view
                continue
            if view is None:
                continue
            if old is not None and old.incarnation == view.incarnation and old.version >= view.version:
                continue  # a stale (eventually consistent) read: never go back in time
            views[mesh] = view
            (stats.added if old is None else stats.changed).append(mesh)
        self.views = views
        self._snapshot = None
        return stats

    def get(self, mesh: str) -> Optional[MeshView]:
        return self.views.get(mesh)

    @property
    def snapshot(self) -> Snapshot:
        """The lookups over the current views (rebuilt after a refresh)."""
        if self._snapshot is None or self._snapshot.views != self.views:
            self._snapshot = Snapshot(self.views)
        return self._snapshot

    def lookup(self, service: str) -> Optional[str]:
        """The VIP of a service: the one most meshes list (ties: the smaller text)."""
        found = self.snapshot.lookup_service(service)
        return None if found is None else found["vip"]

    def lookup_service(self, service: str) -> Optional[Dict[str, Any]]:
        """{service, vip, meshes, addresses}: as the JavaScript reader's `lookup`."""
        return self.snapshot.lookup_service(service)

    def reverse(self, vip: str) -> Optional[Dict[str, Any]]:
        """{vip, service, meshes, services}: whose a VIP is (any text form of the address)."""
        return self.snapshot.reverse(vip)

    def lookup_host(self, host: str) -> Optional[Dict[str, Any]]:
        """{host, vip, meshes}: an external service's host (any case) and its VIP."""
        return self.snapshot.lookup_host(host)

    def reverse_host(self, vip: str) -> Optional[Dict[str, Any]]:
        """{host, vip, meshes}: which host a VIP is, when it is a host's."""
        return self.snapshot.reverse_host(vip)


def _vector_item(item: Dict[str, Any]) -> Dict[str, Any]:
    """A vector's item (DynamoDB JSON, B as base64 text) as boto3's client returns it (B as bytes)."""

    def convert(value: Dict[str, Any]) -> Dict[str, Any]:
        if "B" in value:
            return {"B": base64.b64decode(value["B"])}
        if "M" in value:
            return {"M": {k: convert(v) for k, v in value["M"].items()}}
        if "L" in value:
            return {"L": [convert(v) for v in value["L"]]}
        return value

    return {name: convert(value) for name, value in item.items()}


def _vectors(directory: str) -> List[Tuple[str, Dict[str, Any], MeshView]]:
    """(name, expected, decoded view) of every vector file, by file name."""
    out = []
    for name in sorted(name for name in os.listdir(directory) if name.endswith(".json")):
        with open(os.path.join(directory, name), encoding="utf-8") as file:
            vector = json.load(file)
        out.append((vector["name"], vector["expected"], decode_item(_vector_item(vector["item"]))))
    return out


def view_json(view: MeshView) -> Dict[str, Any]:
    """A view with the JavaScript reader's field names (what vectors' `expected` hold)."""
    return {
        "mesh": view.mesh,
        "version": view.version,
        "incarnation": view.incarnation,
        "cidr": view.cidr,
        "updatedAt": view.updated_at,
        "format": view.format,
        "vips": view.vips,
        "unallocated": view.unallocated,
        "leaving": view.leaving,
        "hosts": view.hosts,
        "unallocatedHosts": view.unallocated_hosts,
        "pending": view.pending,
        "pendingHosts": view.pending_hosts,
    }


def check_vectors(directory: str) -> int:
    vectors = _vectors(directory)
    failures = 0
    for name, expected, view in vectors:
        got = view_json(view)
        if got == expected and not view.skipped:
            print(f"ok {name} ({len(view.vips)} services, {len(view.hosts)} hosts, format {view.format})")
        else:
            failures += 1
            diff = [key for key in expected if got.get(key) != expected[key]] or ["skipped"]
            print(f"FAIL {name}: differs in {', '.join(diff)}")
    print(f"{len(vectors) - failures} of {len(vectors)} vectors decoded as expected")
    return 1 if failures or not vectors else 0


def answers(views: Dict[str, MeshView]) -> Dict[str, Any]:
    """Every view and every lookup's answer, maps as sorted [key, value] pairs: what the tests
    compare with the JavaScript reader's on the same items."""
    listed = []
    for mesh, view in sorted(views.items()):
        fields = view_json(view)
        for key in ("vips", "unallocated", "hosts", "unallocatedHosts"):
            fields[key] = sorted([name, value] for name, value in fields[key].items())
        listed.append([mesh, fields])
    return {"views": listed, **Snapshot(views).answers()}


def make_client(region: Optional[str] = None, endpoint: Optional[str] = None) -> Any:
    """A DynamoDB client: in `region` (the nearest replica), or on a local engine's `endpoint`
    (with dummy credentials: a local engine accepts any; region us-east-1 unless given)."""
    import boto3  # only the commands that talk to DynamoDB need it

    if endpoint:
        return boto3.client(
            "dynamodb",
            endpoint_url=endpoint,
            region_name=region or "us-east-1",
            aws_access_key_id="local",
            aws_secret_access_key="local",
        )
    return boto3.client("dynamodb", region_name=region) if region else boto3.client("dynamodb")


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    vectors = sub.add_parser("vectors")
    vectors.add_argument("directory")
    get = sub.add_parser("get")
    get.add_argument("mesh")
    follow = sub.add_parser("follow")
    answer = sub.add_parser("answers")
    answer.add_argument("--vectors", help="answer for the test vectors in this directory")
    for command in (get, follow, answer):
        command.add_argument("--table", default=os.environ.get("VIPS_TABLE", "vips"))
        command.add_argument("--endpoint", default=os.environ.get("DYNAMODB_ENDPOINT"))
        command.add_argument("--region", default=None, help="the region of the replica to read")
    args = parser.parse_args(argv)
    if args.command == "vectors":
        return check_vectors(args.directory)
    if args.command == "answers" and args.vectors:
        views = {view.mesh: view for _, _, view in _vectors(args.vectors)}
        print(json.dumps(answers(views), sort_keys=True))
        return 0
    client = make_client(args.region, args.endpoint)
    if args.command == "get":
        view = get_mesh(client, args.table, args.mesh)
        if view is None:
            print(f"no VIP item for mesh {args.mesh!r}", file=sys.stderr)
            return 1
        print(json.dumps(asdict(view), sort_keys=True))
        return 0
    reader = VipReader(client, args.table)
    if args.command == "answers":
        reader.refresh()
        print(json.dumps(answers(reader.views), sort_keys=True))
        return 0
    while True:
        stats = reader.refresh()
        views = {mesh: asdict(view) for mesh, view in reader.views.items()}
        print(json.dumps({"stats": asdict(stats), "views": views}, sort_keys=True), flush=True)
        if not sys.stdin.readline():
            return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
